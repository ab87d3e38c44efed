"""Sparse AND interactions: bitmasks, transforms, recovery on synthetic sparse games, the
restricted AND-OR split."""

import itertools

import numpy as np
import pytest

from psens.interactions import and_or, l1_objective, mobius_and, mobius_or
from psens.interactions import sparse as sp
from tests.support import lp_optimum, popcount, subsets


def planted(n, keys, seed=0):
    rng = np.random.default_rng(seed)
    vals = rng.choice([-1, 1], len(keys)) * rng.uniform(1.0, 3.0, len(keys))
    return sp.SparseInteractions(n, np.asarray(keys, np.uint64), vals)


def test_bits_roundtrip_64_words():
    rng = np.random.default_rng(0)
    bits = rng.random((50, 64)) < 0.5
    bits[0] = True  # bit 63 set: beyond int64
    keys = sp.pack_bits(bits)
    assert keys.dtype == np.uint64 and keys[0] == np.uint64(2**64 - 1)
    assert np.array_equal(sp.unpack_bits(keys, 64), bits)
    assert np.array_equal(sp.as_bits(keys, 64), bits)
    assert sp.popcount(keys).tolist() == bits.sum(axis=1).tolist()


def test_int64_masks_refused_beyond_62_words():
    with pytest.raises(ValueError, match="int64 bitmasks cannot hold n=63"):
        sp.as_bits(np.array([1, 2]), 63)
    with pytest.raises(ValueError, match=r"masks must lie in \[0, 2\*\*3\)"):
        sp.as_bits(np.array([8]), 3)


def test_evaluate_against_literal_sums():
    n = 5
    g = planted(n, [0, 1, 6, 0b10101, 31], seed=1)
    h = sp.SparseInteractions(n, g.subsets, g.values, "or")
    pairs = list(zip(g.subsets.tolist(), g.values, strict=True))
    for t in range(2**n):
        want_and = sum(v for s, v in pairs if s & ~t == 0)
        want_or = sum(v for s, v in pairs if s == 0 or s & t)
        assert g([t])[0] == pytest.approx(want_and)
        assert h([t])[0] == pytest.approx(want_or)


def test_dense_roundtrip_matches_mobius():
    rng = np.random.default_rng(2)
    v = rng.normal(size=2**6)
    I = sp.SparseInteractions.from_dense(mobius_and(v))
    assert np.allclose(I(np.arange(2**6)), v)
    assert np.allclose(I.to_dense(), mobius_and(v))


def test_fourier_to_mobius_literal():
    # f(T) = sum_S f_S prod_{i in S} (2[i in T] - 1): Möbius of its 2**n values
    n = 4
    rng = np.random.default_rng(3)
    keys = np.array([0, 3, 5, 14], np.uint64)
    f = rng.normal(size=4)
    v = np.zeros(2**n)
    for t in range(2**n):
        for s, c in zip(keys.tolist(), f, strict=True):
            v[t] += c * np.prod([2 * ((t >> i) & 1) - 1 for i in range(n) if (s >> i) & 1])
    got = sp.fourier_to_mobius(keys, f, n).to_dense()
    assert np.allclose(got, mobius_and(v))


@pytest.mark.parametrize("block", [5, 2**22])  # in many blocks, or in one
def test_subsets_of_every_key(block):
    rng = np.random.default_rng(0)
    keys = [0, 1 << 63, 2**64 - 1 >> 52]  # the empty set, the 64th word, 12 words
    keys += [int(x) for x in rng.integers(0, 2**40, 20)]
    keys += [k & int(m) for k, m in zip(keys, rng.integers(0, 2**40, len(keys)), strict=False)]
    keys = [k for k in keys if bin(k).count("1") <= 14]
    owner, sub = sp.subsets_of(np.array(keys, np.uint64), block=block)
    assert sub.dtype == np.uint64 and np.all(np.diff(owner) >= 0)
    for i, key in enumerate(keys):
        bits = [b for b in range(64) if (key >> b) & 1]
        literal = {
            sum(1 << b for b in c)
            for r in range(len(bits) + 1)
            for c in itertools.combinations(bits, r)
        }
        got = sub[owner == i].tolist()
        assert len(got) == 2 ** len(bits) and set(got) == literal


@pytest.mark.parametrize("seed", range(3))
def test_fourier_to_mobius_random_against_the_dense_transform(seed):
    n = 8
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, 2**n, 30)).astype(np.uint64)
    f = rng.normal(size=keys.size)
    f[::4] = 0.0
    chi = np.ones((2**n, keys.size))  # chi_S(T) = prod_{i in S} (2[i in T] - 1)
    t = np.arange(2**n)
    for j, key in enumerate(keys.tolist()):
        for i in range(n):
            if (key >> i) & 1:
                chi[:, j] *= 2 * ((t >> i) & 1) - 1
    got = sp.fourier_to_mobius(keys, f, n).to_dense()
    assert np.allclose(got, mobius_and(chi @ f), atol=1e-12)


def test_downward_closure():
    got = sp.downward_closure(np.array([0b101, 0b1000], np.uint64), 4).tolist()
    assert got == [0, 1, 4, 5, 8]
    # nested and repeated keys, the 64th word
    keys = np.array([0b1, 0b111, 0b11, 0b111, 1 << 63], np.uint64)
    assert sp.downward_closure(keys, 64).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 1 << 63]
    assert sp.downward_closure(np.zeros(0, np.uint64), 3).tolist() == [0]


def test_subsets_beyond_n_words_are_refused():
    with pytest.raises(ValueError, match="names word 4 of a game of n=4"):
        sp.fourier_to_mobius([0b10011], [1.0], 4)
    with pytest.raises(ValueError, match="names word 3"):
        sp.downward_closure(np.array([0b1001], np.uint64), 3)
    with pytest.raises(ValueError, match="names word 5"):
        sp.SparseInteractions(5, np.array([1 << 5], np.uint64), np.ones(1))
    with pytest.raises(ValueError, match="2 subsets and 1 coefficients"):
        sp.fourier_to_mobius([1, 2], [1.0], 4)


@pytest.mark.parametrize("n", [10, 24, 64])
def test_lasso_recovers_a_planted_sparse_game_exactly(n):
    keys = [0, 1, 2 | 8, (1 << (n - 1)) | 4, 0b111 << 3, (1 << (n - 2)) | 1]
    truth = planted(n, keys, seed=n)
    calls = []

    def game(bits):
        calls.append(len(bits))
        return truth(bits)

    rec = sp.recover(game, n, 300, method="lasso", degree=3, batch=100)
    assert rec.queries == 300 == sum(calls) and max(calls) <= 100
    assert np.array_equal(rec.masks[0], np.ones(n, bool))  # the full prompt is queried
    got = rec.interactions
    assert len(got) <= len(keys) + 2
    for s, v in zip(truth.subsets, truth.values, strict=True):
        hit = got.subsets == s
        assert hit.any() and got.values[hit][0] == pytest.approx(v, abs=1e-8)
    assert np.allclose(rec.values, truth(rec.masks))
    assert np.allclose(got(rec.masks), rec.values, atol=1e-8)


@pytest.mark.slow  # shapiq's SPEX compiles its BCH decoder on first use (minutes)
def test_spex_recovers_a_planted_sparse_game():
    n = 10
    truth = planted(n, [0, 1, 2 | 8, 0b111 << 3], seed=5)
    rec = sp.recover(truth, n, 600, method="spex", degree=3)
    assert rec.queries <= 600
    assert np.allclose(rec.interactions.to_dense(), truth.to_dense(), atol=1e-6)


def test_recovery_refuses_bad_budgets_and_n():
    g = planted(6, [0, 1])
    with pytest.raises(ValueError, match="budget=100 is more than the 2\\*\\*6 = 64 masks"):
        sp.recover(g, 6, 100)
    with pytest.raises(ValueError, match="budget=3 is below 8 queries"):
        sp.recover(g, 6, 3)
    with pytest.raises(ValueError, match="is not an integer"):
        sp.recover(g, 6, 10.5)
    with pytest.raises(ValueError, match="n=65 words is above the 64"):
        sp.recover(g, 65, 100)
    with pytest.raises(ValueError, match="method='bogus' is unknown"):
        sp.recover(g, 6, 20, method="bogus")


def test_game_returning_nan_is_refused():
    with pytest.raises(ValueError, match="one finite value per mask"):
        sp.recover(lambda b: np.full(len(b), np.nan), 5, 10)


def test_or_change_of_basis_matches_mobius_or():
    rng = np.random.default_rng(4)
    v = rng.normal(size=8)
    C = sp._or_matrix(np.arange(8, dtype=np.uint64)).toarray()
    assert np.allclose(C @ mobius_and(v), mobius_or(v))
    # literal: I_or(Q) = (-1)^(|Q|+1) sum_{R ⊇ Q} b_R (Q ≠ ∅), I_or(∅) = b_∅
    b = mobius_and(v)
    for q in range(1, 8):
        want = (-1) ** (popcount(q) + 1) * sum(b[r] for r in range(8) if r & q == q)
        assert (C @ b)[q] == pytest.approx(want)


@pytest.mark.parametrize("seed", range(3))
def test_restricted_split_on_the_full_support_is_the_exact_optimum(seed):
    n = 4
    v = np.random.default_rng(seed).normal(size=2**n)
    res = sp.restricted_and_or(sp.SparseInteractions.from_dense(mobius_and(v)))
    assert res.objective == pytest.approx(lp_optimum(v), abs=1e-8)
    ex = and_or(v[None], "canonical")
    assert res.objective == pytest.approx(float(l1_objective(ex.I_and, ex.I_or)[0]), abs=1e-7)
    assert np.allclose(res(np.arange(2**n)), v)  # universal matching


def test_restricted_split_stays_on_the_closure_and_matches():
    n = 40
    truth = planted(n, [0, 1, 6, 1 << 39 | 1 << 20 | 2], seed=9)
    res = sp.restricted_and_or(truth)
    closure = set(sp.downward_closure(truth.subsets, n).tolist())
    assert set(res.I_and.subsets.tolist()) == closure == set(res.I_or.subsets.tolist())
    bits = np.random.default_rng(0).random((200, n)) < 0.5
    assert np.allclose(res(bits), truth(bits))
    # not worse than the pure AND split (gamma = v/2) of the same game
    assert res.objective <= np.abs(truth.values).sum() + 1e-9


def test_subsets_helper_consistent():  # the literal helpers agree with the bitmask code
    for t in range(16):
        assert (
            sorted(subsets(t)) == sorted(s for s in range(16) if s & ~t == 0)
            and popcount(t) == sp.popcount(np.array([t], np.uint64))[0]
        )
    assert list(itertools.islice(sp._subsets_up_to(3, 2).tolist(), 7)) == [0, 1, 2, 4, 3, 5, 6]


def _grow_literal(selected, k, limit):
    """The hierarchical candidates written out: every pair of selected (k-1)-sets."""
    sel = sorted({int(s) for s in selected if bin(int(s)).count("1") == k - 1})
    count = {}
    for a, b in itertools.combinations(sel, 2):
        if bin(a | b).count("1") == k:
            count[a | b] = count.get(a | b, 0) + 1
    return sorted(sorted(count, key=lambda c: (-count[c], c))[:limit])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block", [7, 2**22])  # pairs formed in many blocks, or in one
def test_grow_equals_the_pairwise_definition(seed, block, monkeypatch):
    monkeypatch.setattr(sp, "_PAIR_BLOCK", block)
    rng = np.random.default_rng(seed)
    n, k = 9, int(rng.integers(2, 5))
    keys = rng.choice(2**n, 120, replace=False).astype(np.uint64)
    for limit in (3, 10, 10_000):
        got = sp._grow(keys, k, limit)
        assert got.dtype == np.uint64
        assert got.tolist() == _grow_literal(keys.tolist(), k, limit)
    assert sp._grow(keys[:0], k, 10).size == 0


@pytest.mark.parametrize(("n", "degree"), [(1, 1), (5, 3), (14, 2), (64, 2)])
def test_subsets_up_to_is_the_combinations_in_order(n, degree):
    literal = [
        sum(1 << i for i in c)
        for k in range(degree + 1)
        for c in itertools.combinations(range(n), k)
    ]
    assert sp._subsets_up_to(n, degree).tolist() == literal


def _uniform_literal(n, budget, rng):
    """The query design written out: blocks of `budget` coin-flip rows, each new row kept."""
    rows, seen = [[True] * n, [False] * n], {(True,) * n, (False,) * n}
    while len(rows) < budget:
        for r in (rng.random((budget, n)) < 0.5).tolist():
            if tuple(r) not in seen and len(rows) < budget:
                seen.add(tuple(r))
                rows.append(r)
    return np.array(rows, bool)


@pytest.mark.parametrize(("n", "budget"), [(21, 300), (22, 4000), (64, 500)])
def test_uniform_masks_beyond_20_words(n, budget):
    got = sp._uniform_masks(n, budget, np.random.default_rng(7))
    assert np.array_equal(got, _uniform_literal(n, budget, np.random.default_rng(7)))
    assert np.unique(sp.pack_bits(got)).size == budget


def test_recorder_queries_each_mask_once_and_answers_every_row():
    n, rng, asked = 40, np.random.default_rng(2), []

    def game(b):
        asked.extend(sp.pack_bits(b).tolist())
        return b @ np.arange(1.0, n + 1)

    rec = sp._Recorder(game, n)
    for _ in range(5):
        b = rng.random((30, n)) < 0.5
        b = np.concatenate([b, b[:7], b[::-1][:4]])  # repeats in and across batches
        assert np.array_equal(rec(b), b @ np.arange(1.0, n + 1))
    assert len(asked) == len(set(asked)) == len(rec.values) == 150
    assert np.array_equal(sp.pack_bits(np.stack(rec.masks)), asked)


# ----------------------------------------------------------------------------- hostile budgets


def _never(bits):
    raise AssertionError("the game must not be called")


def test_a_budget_that_does_not_fit_in_memory_is_refused_before_any_allocation(monkeypatch):
    """recover(game, 40, 10**9) once died with a raw MemoryError (298 GiB); budgets of
    1e7-1e8 allocated GBs. Refused up front, naming the largest budget that fits."""
    from psens.models import hardware

    monkeypatch.setattr(hardware, "available_ram", lambda: 8.0 * 2**30)
    per_query = sp._memory_per_query(40, "lasso", None, sp.MAX_FEATURES)
    most = int(sp.MEMORY_SHARE * 8 * 2**30 // per_query)
    for budget in (10**9, 10**7, 10**5):
        with pytest.raises(ValueError, match=f"GiB of RAM available. Pass budget <= {most:,}"):
            sp.recover(_never, 40, budget)
    for method in ("spex", "proxyspex"):
        with pytest.raises(ValueError, match="GiB of RAM available"):
            sp.recover(_never, 40, 10**9, method=method)
    assert per_query > 8 * (sp._n_features(40, 2) - 1)  # the feature rows dominate
    # a budget that fits is not refused by the check (the game runs)
    calls = []
    sp.recover(lambda b: calls.append(len(b)) or b.sum(1).astype(float), 6, 40, degree=2)
    assert sum(calls) == 40


def test_lasso_columns_bound_what_the_fit_builds():
    n, degree, cap = 12, 4, 100
    d0 = sp._full_degree(n, cap)
    assert sp._lasso_columns(n, degree, cap) == sp._n_features(n, d0) - 1 + (degree - d0) * cap
    assert sp._lasso_columns(6, None, sp.MAX_FEATURES) == 2**6 - 1 - 1  # orders 1..5 of 6


def test_huge_values_and_bad_seeds_are_refused_in_one_line():
    with pytest.raises(ValueError, match="beyond 1e\\+100"):
        sp.recover(lambda b: np.full(len(b), 1e300), 6, 32)
    bits = np.random.default_rng(0).random((32, 6)) < 0.5
    with pytest.raises(ValueError, match="beyond 1e\\+100"):
        sp.fit_queries(bits, np.full(32, 1e300))
    for seed in (-1, 1.5, "0", True):
        with pytest.raises(ValueError, match="not a non-negative integer"):
            sp.recover(_never, 6, 32, seed=seed)
    with pytest.raises(ValueError, match="max_features"):
        sp.recover(_never, 6, 32, max_features=0)
    with pytest.raises(ValueError, match="max_features"):
        sp.fit_queries(bits, np.ones(32), max_features=0)


def test_a_fit_worse_than_the_mean_is_flagged():
    rng = np.random.default_rng(1)
    bits = rng.random((8, 3)) < 0.5
    with pytest.warns(UserWarning, match="cross-validated R² is .* < 0"):
        _, info = sp.fit_queries(bits, rng.normal(size=8))
    assert info["cv_r2"] < 0
