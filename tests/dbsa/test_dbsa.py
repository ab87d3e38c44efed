"""DBSA statistics: energy distance, permutation tests, alternative statistics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psens.dbsa import (
    energy_distance,
    null_statistics,
    p_value,
    pairwise_distances,
    permutation_indices,
    permutation_test,
    permutation_test_1d,
    permutation_test_from_distances,
    wasserstein_1d,
)
from psens.dbsa.reference import permutation_test_recompute

METRICS = ["cosine", "l1", "l2"]


def _delta(a: np.ndarray, b: np.ndarray, metric: str) -> float:
    """Literal distance between two vectors, written independently of the library."""
    if metric == "l1":
        return float(sum(abs(x - y) for x, y in zip(a, b, strict=True)))
    if metric == "l2":
        return float(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5)
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(y * y for y in b) ** 0.5
    return 1.0 - dot / (na * nb)


def _energy_loops(X: np.ndarray, Y: np.ndarray, metric: str) -> float:
    """Energy distance by the double sums of algorithm 1 (lines 10-13), one pair at a time."""
    n, m = len(X), len(Y)
    a = sum(_delta(x, y, metric) for x in X for y in Y)
    b = sum(_delta(x, x2, metric) for x in X for x2 in X)
    c = sum(_delta(y, y2, metric) for y in Y for y2 in Y)
    return 2.0 * a / (n * m) - b / n**2 - c / m**2


# ----------------------------------------------------------------------------- energy distance


@pytest.mark.parametrize("metric", ["l1", "l2"])
@pytest.mark.parametrize("sizes", [(2, 2), (5, 9), (30, 17)])
def test_energy_matches_scipy_in_1d(metric: str, sizes: tuple[int, int]) -> None:
    # scipy returns sqrt(2E|X-Y| - E|X-X'| - E|Y-Y'|) over the empirical distributions,
    # i.e. the square root of our V-statistic.
    rng = np.random.default_rng(sum(sizes))
    x = rng.normal(size=sizes[0])
    y = rng.normal(0.7, 2.0, size=sizes[1])
    ours = energy_distance(x, y, metric=metric)
    assert ours == pytest.approx(scipy.stats.energy_distance(x, y) ** 2, rel=1e-12, abs=1e-14)
    assert ours == pytest.approx(energy_distance(x[:, None], y[:, None], metric=metric), rel=1e-14)


@pytest.mark.parametrize("metric", METRICS)
def test_energy_matches_literal_double_loop_in_d_dims(metric: str) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(6, 5))
    Y = rng.normal(0.3, 1.5, size=(4, 5))
    assert energy_distance(X, Y, metric=metric) == pytest.approx(
        _energy_loops(X, Y, metric), rel=1e-11, abs=1e-13
    )


def test_cosine_energy_is_squared_distance_of_mean_directions() -> None:
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(9, 3)) + 1
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    expected = np.sum((unit(X).mean(0) - unit(Y).mean(0)) ** 2)
    assert energy_distance(X, Y) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("metric", METRICS)
def test_identical_samples_give_zero_energy_and_p_one(metric: str) -> None:
    X = np.random.default_rng(5).normal(size=(12, 8))
    assert energy_distance(X, X.copy(), metric=metric) == pytest.approx(0.0, abs=1e-12)
    e, p = permutation_test(X, X.copy(), permutations=200, metric=metric, seed=1)
    assert e == pytest.approx(0.0, abs=1e-12)
    assert p == 1.0


@pytest.mark.parametrize("metric", METRICS)
def test_shifted_distributions_reach_the_smallest_p(metric: str) -> None:
    rng = np.random.default_rng(6)
    P = 300
    X = rng.normal(size=(25, 16)) + 4.0 * np.eye(16)[0]
    Y = rng.normal(size=(25, 16)) + 4.0 * np.eye(16)[1]
    e, p = permutation_test(X, Y, permutations=P, metric=metric, seed=0)
    assert e > 0
    assert p <= 1.0 / (P + 1) + 1e-15  # c = 1: no permutation reaches the observed value


def test_p_value_has_plus_one_correction() -> None:
    null = np.array([0.1, 0.5, 0.9, 0.3])
    assert p_value(0.4, null) == pytest.approx((2 + 1) / (4 + 1))
    assert p_value(5.0, null) == pytest.approx(1 / 5)
    assert p_value(np.array([0.0, 5.0]), np.stack([null, null])).tolist() == pytest.approx(
        [1.0, 0.2]
    )


def test_permutation_test_returns_statistic_and_p_for_the_acceptance_call() -> None:
    rng = np.random.default_rng(7)
    X, Y = rng.normal(size=(10, 4)), rng.normal(size=(10, 4))
    out = permutation_test(X, Y, permutations=500, metric="cosine", seed=0)
    assert isinstance(out, tuple) and len(out) == 2
    e, p = out
    assert isinstance(e, float) and isinstance(p, float)
    assert e == pytest.approx(energy_distance(X, Y, metric="cosine"), rel=1e-10)
    assert 1 / 501 <= p <= 1
    assert (p * 501) == pytest.approx(round(p * 501))
    assert permutation_test(X, Y, seed=0) == out  # seeded: reproducible


# ----------------------------------------------------------------------------- fast == naive


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("statistic", ["energy", "mean", "emd"])
def test_fast_permutation_test_equals_naive_recomputation(metric: str, statistic: str) -> None:
    rng = np.random.default_rng(8)
    X = rng.normal(size=(9, 6))
    Y = rng.normal(0.4, 1.0, size=(7, 6))
    P = 60
    perms = permutation_indices(len(X) + len(Y), P, seed=11)
    D = pairwise_distances(np.vstack([X, Y]), metric)
    e, p, null = permutation_test_from_distances(
        D, len(X), statistic=statistic, perms=perms, return_null=True
    )
    e2, p2, null2 = permutation_test_recompute(
        X, Y, metric=metric, statistic=statistic, perms=perms
    )
    np.testing.assert_allclose(null, null2, rtol=1e-9, atol=1e-12)
    assert e == pytest.approx(e2, rel=1e-9, abs=1e-12)
    assert p == p2
    # the public function draws exactly these permutations from the same seed
    assert permutation_test(
        X, Y, permutations=P, metric=metric, seed=11, statistic=statistic
    ) == pytest.approx((e, p))


def test_permutation_indices_are_seeded_permutations() -> None:
    a = permutation_indices(10, 50, seed=3)
    assert a.shape == (50, 10)
    assert (np.sort(a, axis=1) == np.arange(10)).all()
    assert (a == permutation_indices(10, 50, seed=3)).all()
    assert not (a == permutation_indices(10, 50, seed=4)).all()


def test_batched_null_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(9)
    Ds = np.stack([pairwise_distances(rng.normal(size=(10, 3)), "l2") for _ in range(3)])
    perms = np.stack([permutation_indices(10, 20, seed=s) for s in range(3)])
    batched = null_statistics(Ds, 4, perms)
    for b in range(3):
        np.testing.assert_allclose(batched[b], null_statistics(Ds[b], 4, perms[b]), rtol=1e-12)


def test_sub_pool_indices_equal_extracted_block() -> None:
    rng = np.random.default_rng(10)
    D = pairwise_distances(rng.normal(size=(15, 3)), "l1")
    pool = np.array([0, 1, 2, 3, 9, 10, 11])
    perms = pool[permutation_indices(len(pool), 30, seed=0)]
    block = D[np.ix_(pool, pool)]
    local = permutation_indices(len(pool), 30, seed=0)
    for stat in ("energy", "mean", "emd"):
        np.testing.assert_allclose(
            null_statistics(D, 4, perms, stat), null_statistics(block, 4, local, stat), rtol=1e-12
        )


# ----------------------------------------------------------------------------- alternatives


def test_wasserstein_matches_scipy_row_by_row() -> None:
    rng = np.random.default_rng(11)
    u, v = rng.normal(size=(4, 13)), rng.exponential(size=(4, 5))
    expected = [scipy.stats.wasserstein_distance(u[i], v[i]) for i in range(4)]
    np.testing.assert_allclose(wasserstein_1d(u, v), expected, rtol=1e-12)


@pytest.mark.parametrize("statistic", ["energy", "emd", "mean"])
def test_1d_test_splits_groups_by_their_own_sizes(statistic: str) -> None:
    # unequal sizes: the published snippet's combined[n2:] would give wrong group sizes
    rng = np.random.default_rng(12)
    a, b = rng.normal(size=5), rng.normal(1.0, 1.0, size=12)
    P = 40
    stat, p = permutation_test_1d(a, b, permutations=P, statistic=statistic, seed=2)
    pooled = np.concatenate([a, b])
    fn = {
        "energy": scipy.stats.energy_distance,
        "emd": scipy.stats.wasserstein_distance,
        "mean": lambda x, y: abs(np.mean(x) - np.mean(y)),
    }[statistic]
    assert stat == pytest.approx(fn(a, b), rel=1e-10)
    null = [fn(pooled[r[:5]], pooled[r[5:]]) for r in permutation_indices(17, P, seed=2)]
    assert p == pytest.approx((np.sum(np.array(null) >= stat - 1e-12) + 1) / (P + 1))


# ----------------------------------------------------------------------------- properties

_samples = arrays(
    np.float64,
    st.tuples(st.integers(2, 7), st.integers(1, 4)),
    elements=st.floats(-10, 10, allow_nan=False, width=32),
)


@settings(max_examples=40, deadline=None)
@given(X=_samples, data=st.data(), metric=st.sampled_from(METRICS))
def test_energy_properties(X: np.ndarray, data: st.DataObject, metric: str) -> None:
    m = data.draw(st.integers(2, 7))
    Y = data.draw(
        arrays(np.float64, (m, X.shape[1]), elements=st.floats(-10, 10, allow_nan=False, width=32))
    )
    if metric == "cosine":  # zero vectors have no direction
        X = X + np.where(np.linalg.norm(X, axis=1, keepdims=True) == 0, 1.0, 0.0)
        Y = Y + np.where(np.linalg.norm(Y, axis=1, keepdims=True) == 0, 1.0, 0.0)
    scale = 1.0 + np.abs(np.vstack([X, Y])).max()
    e = energy_distance(X, Y, metric=metric)
    assert e >= -1e-12 * scale  # metrics of negative type
    assert e == pytest.approx(energy_distance(Y, X, metric=metric), rel=1e-9, abs=1e-10 * scale)
    perm = data.draw(st.permutations(range(len(X))))
    assert e == pytest.approx(
        energy_distance(X[list(perm)], Y, metric=metric), rel=1e-9, abs=1e-10 * scale
    )
    stat, p = permutation_test(X, Y, permutations=30, metric=metric, seed=0)
    assert 1 / 31 <= p <= 1.0
    assert stat == pytest.approx(e, rel=1e-8, abs=1e-9 * scale)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(2, 6), m=st.integers(2, 6))
def test_fast_equals_naive_property(seed: int, n: int, m: int) -> None:
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(n, 3)), rng.normal(size=(m, 3))
    perms = permutation_indices(n + m, 15, seed=seed)
    D = pairwise_distances(np.vstack([X, Y]), "l2")
    _, _, fast = permutation_test_from_distances(D, n, perms=perms, return_null=True)
    _, _, naive = permutation_test_recompute(X, Y, metric="l2", perms=perms)
    np.testing.assert_allclose(fast, naive, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("X", "Y", "match"),
    [
        (np.zeros((0, 3)), np.ones((3, 3)), "X is empty"),
        (np.ones((1, 3)), np.ones((3, 3)), "at least 2"),
        (np.ones((3, 3)), np.ones((1, 3)), "at least 2"),
        (np.ones((3, 3)), np.ones((3, 4)), "features"),
        (np.full((3, 3), np.nan), np.ones((3, 3)), "NaN"),
    ],
)
def test_clear_errors(X: np.ndarray, Y: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        energy_distance(X, Y)
    with pytest.raises(ValueError, match=match):
        permutation_test(X, Y)


def test_unknown_metric_and_statistic_list_the_choices() -> None:
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="cosine"):
        energy_distance(X, X, metric="jaccard")
    with pytest.raises(ValueError, match="energy"):
        permutation_test(X, X, statistic="ks")
    with pytest.raises(TypeError):
        permutation_test(X, X, permutations=1.5)  # type: ignore[arg-type]


def test_samples_of_different_dimensions_are_refused() -> None:
    X, Y = np.zeros((3, 4)), np.ones((3, 5))
    for fn in (energy_distance, permutation_test):
        with pytest.raises(ValueError, match="4 features but Y has 5"):
            fn(X, Y)
