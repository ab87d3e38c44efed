"""The one IPS kernel (psens.ips.metric._union_ips, _salient_union) against eq. 3 written out
with plain Python loops over subsets, through every entry point that uses it (ips_pairs, ips,
interaction_classes, sample_ips, the sparse path), and dense == sparse on the same games."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from psens.interactions.sparse import SparseAndOr, SparseInteractions
from psens.ips import interaction_classes, ips, ips_pairs, sample_ips
from psens.ips import sparse as S
from psens.ips.metric import _salient_union, _union_ips

TAUS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7)
ORDERS = (None, "low", "mid", "high")
NORMALIZATIONS = ("nonempty", "all")


# ----------------------------------------------------------------------------- literal eq. 3


def _band(k: int, n: int) -> str:
    return "low" if k <= n // 3 else "mid" if k <= 2 * n // 3 else "high"


def _normalized(I_and, I_or, normalization):
    """``{(kind, S): Ĩ_S}`` of one game (min-max over the non-empty or all effects)."""
    first = 0 if normalization == "all" else 1
    size = len(I_and)
    mags = [abs(arr[s]) for arr in (I_and, I_or) for s in range(first, size)]
    lo, hi = min(mags), max(mags)
    return {
        (kind, s): 0.0 if hi == lo else float(np.sign(arr[s]) * (abs(arr[s]) - lo) / (hi - lo))
        for kind, arr in (("and", I_and), ("or", I_or))
        for s in range(first, size)
    }


def _literal(I_and, I_or, tau, order, normalization):
    """Per template pair of one sample (``[template, 2**n]``, no padding): IPS and the counts
    of the three classes over the union of both salient sets, by loops over subsets."""
    n = len(I_and[0]).bit_length() - 1
    norm = [_normalized(a, o, normalization) for a, o in zip(I_and, I_or, strict=True)]
    values, counts = [], []
    for i, j in itertools.combinations(range(len(norm)), 2):
        terms, cls = [], [0, 0, 0]
        for key in norm[i]:
            s = key[1]
            k = bin(s).count("1")
            if order is not None and (k == 0 or _band(k, n) != order):
                continue
            a, b = norm[i][key], norm[j][key]
            if not (abs(a) > tau or abs(b) > tau):
                continue
            terms.append(abs(a - b) / ((abs(a) + abs(b)) / 2))
            if a * b < 0:
                cls[0] += 1
            elif a == 0 or b == 0 or abs(b) / abs(a) > 2 or abs(b) / abs(a) < 0.5:
                cls[1] += 1
            else:
                cls[2] += 1
        values.append(sum(terms) / len(terms) if terms else np.nan)
        counts.append(cls)
    return np.asarray(values), np.asarray(counts)


def _games(seed: int, n: int, templates: int):
    """AND and OR interactions of ``templates`` related games, some exact zeros and ties."""
    rng = np.random.default_rng(seed)
    base = rng.laplace(size=(2, 2**n))
    I = base + 0.5 * rng.normal(size=(templates, 2, 2**n))
    I[rng.random(I.shape) < 0.2] = 0.0
    I[1] = I[0] if templates > 2 and seed % 3 == 0 else I[1]  # identical templates
    return I[:, 0], I[:, 1]


SHAPES = [(1, 2), (2, 3), (3, 4), (4, 3), (5, 5), (6, 2)]  # (n, templates)
CASES = [(seed, n, t) for seed, (n, t) in enumerate(SHAPES)]


# ----------------------------------------------------------------------------- the kernel


def test_union_ips_is_the_mean_over_the_union_for_every_group_and_threshold():
    rng = np.random.default_rng(0)
    a = rng.normal(scale=0.4, size=(3, 2, 40))
    b = a + rng.normal(scale=0.3, size=a.shape)
    a[0, 0, :5] = np.nan  # padding (both NaN) is never salient
    b[0, 0, :5] = np.nan
    b[rng.random(b.shape) < 0.2] = 0.0
    keep = rng.random((3, 1, 4, 40)) < 0.6  # broadcast over the second axis
    taus = np.asarray(TAUS)
    got = _union_ips(a, b, keep, taus)
    assert got.shape == (3, 2, 4, len(TAUS))
    for k in range(len(TAUS)):  # one threshold: summed directly (many salient) or binned (few)
        one = _union_ips(a, b, keep, taus[k : k + 1])
        np.testing.assert_allclose(one, got[..., k : k + 1], rtol=1e-12, equal_nan=True)
    for r, p, g, k in itertools.product(range(3), range(2), range(4), range(len(TAUS))):
        terms = [
            abs(x - y) / ((abs(x) + abs(y)) / 2)
            for x, y, kept in zip(a[r, p], b[r, p], keep[r, 0, g], strict=True)
            if kept and (abs(x) > taus[k] or abs(y) > taus[k])
        ]
        want = sum(terms) / len(terms) if terms else np.nan
        np.testing.assert_allclose(got[r, p, g, k], want, rtol=1e-12, equal_nan=True)
        union = _salient_union(a[r, p], b[r, p], keep[r, 0, g], taus[k])
        assert int(union.sum()) == len(terms)


def test_union_ips_of_one_row_and_of_nothing_salient():
    a, b = np.asarray([0.9, 0.0, 0.05]), np.asarray([0.9, 0.5, 0.0])
    keep = np.ones((1, 3), bool)
    np.testing.assert_allclose(_union_ips(a, b, keep, [0.1, 0.6, 0.95])[0], [1.0, 0.0, np.nan])


# ----------------------------------------------------------------------------- entry points


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize(("seed", "n", "templates"), CASES)
def test_dense_entry_points_equal_the_literal_loops(seed, n, templates, normalization):
    I_and, I_or = _games(seed, n, templates)
    for tau, order in itertools.product(TAUS, ORDERS):
        want, counts = _literal(I_and, I_or, tau, order, normalization)
        got = ips_pairs(I_and, I_or, tau, order, normalization=normalization)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, equal_nan=True)
        mean = ips(I_and, I_or, tau, order, normalization=normalization)
        want_mean = np.nanmean(want) if np.isfinite(want).any() else np.nan
        np.testing.assert_allclose(mean, want_mean, rtol=1e-12, equal_nan=True)
        res = interaction_classes(I_and, I_or, tau, order=order, normalization=normalization)
        np.testing.assert_array_equal(res["counts"], counts)


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_sample_ips_equals_the_literal_loops_on_a_run(normalization):
    from psens.synthetic import synthetic_run

    ds = synthetic_run(n_samples=4, n_vars=(3, 4, 5), shots=[0, 2], seed=1)
    taus = [0.3, 0.05, 0.1]  # unsorted on purpose
    got = sample_ips(ds, taus, per_pair=True, normalization=normalization)
    got = got.transpose("model", "sample", "shot", "pair", "order", "tau")
    a_da = ds["I_and"].transpose("model", "sample", "shot", "template", "subset")
    o_da = ds["I_or"].transpose("model", "sample", "shot", "template", "subset")
    for m, s, h in itertools.product(*(range(ds.sizes[d]) for d in ("model", "sample", "shot"))):
        size = 1 << int(ds["n_vars"].values[s])
        a, o = a_da.values[m, s, h, :, :size], o_da.values[m, s, h, :, :size]
        for (k, tau), (g, order) in itertools.product(enumerate(taus), enumerate(ORDERS)):
            want, _ = _literal(a, o, tau, order, normalization)
            np.testing.assert_allclose(
                got.values[m, s, h, :, g, k], want, rtol=1e-12, atol=1e-15, equal_nan=True
            )


def _sparse(I_and, I_or, keep_zeros: bool = True):
    return [
        SparseAndOr(
            SparseInteractions.from_dense(x, "and", keep_zeros=keep_zeros),
            SparseInteractions.from_dense(y, "or", keep_zeros=keep_zeros),
        )
        for x, y in zip(I_and, I_or, strict=True)
    ]


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize(("seed", "n", "templates"), CASES)
def test_sparse_equals_dense_and_the_literal_loops(seed, n, templates, normalization):
    """Every subset listed: the sparse path is the dense one; only the nonzero subsets
    listed (different supports per template): still the dense IPS of the same games."""
    I_and, I_or = _games(seed, n, templates)
    for keep_zeros in (True, False):
        games = _sparse(I_and, I_or, keep_zeros)
        for tau, order in itertools.product(TAUS, ORDERS):
            dense = ips_pairs(I_and, I_or, tau, order, normalization=normalization)
            got = S.sparse_ips_pairs(games, tau, order, normalization)
            np.testing.assert_allclose(got, dense, rtol=1e-12, atol=1e-15, equal_nan=True)
            classes = interaction_classes(
                I_and, I_or, tau, order=order, normalization=normalization
            )
            got_classes = S.sparse_classes(games, tau, order, normalization)
            np.testing.assert_array_equal(got_classes, classes["counts"])
            if keep_zeros:
                want, counts = _literal(I_and, I_or, tau, order, normalization)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, equal_nan=True)
                np.testing.assert_array_equal(got_classes, counts)
