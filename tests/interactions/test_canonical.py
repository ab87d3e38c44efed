"""The canonical (least-norm) split, 'exact' with the noise term, and the published SGD presets.

References are literal: dense matrices built entry by entry and scipy's linprog on the direct
LP (tests/support.py), and a step-by-step transcription of the published SGD loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psens.interactions import SolverSettings, and_or, l1_objective, reconstruct
from tests.support import (
    lp_optimum,
    lp_optimum_q,
    matching_ref,
    mobius_and_ref,
    mobius_or_ref,
    optimal_face_argmin,
    paper_sgd_ref,
)

QTHRES = 0.04


def _games(n: int, count: int, seed: int, rounded: bool = False) -> np.ndarray:
    """Gaussian games; ``rounded``: one decimal, so ties make the LP degenerate."""
    v = np.random.default_rng(seed).normal(size=(count, 1 << n)) * 2
    return np.round(v, 1) if rounded else v


def _qbound(v: np.ndarray) -> np.ndarray:
    return QTHRES * np.abs(v[..., -1] - v[..., 0])


def _x(res, g: int) -> np.ndarray:
    """The solver's variables of game g: gamma, or (gamma, q) with the noise term."""
    return res.gamma[g] if res.q is None else np.concatenate([res.gamma[g], res.q[g]])


def _relabel(n: int, perm: np.ndarray) -> np.ndarray:
    """idx[T] = pi(T): the subset T with every player i renamed perm[i]."""
    t = np.arange(1 << n)
    out = np.zeros_like(t)
    for i in range(n):
        out |= ((t >> i) & 1) << perm[i]
    return out


# ----------------------------------------------------------------------------- canonical


@pytest.mark.parametrize("rounded", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_canonical_reaches_the_lp_optimum(n, rounded):
    v = _games(n, 4, 100 + n, rounded)
    res = and_or(v, "canonical")
    for g in range(len(v)):
        assert res.loss[g] == pytest.approx(lp_optimum(v[g]), rel=1e-9, abs=1e-12)
    exact = and_or(v, "exact")
    np.testing.assert_allclose(res.loss, exact.loss, rtol=1e-9)
    assert res.info["max_rel_check"] <= 1e-9


def _game_arrays(elements):
    return st.integers(1, 4).flatmap(lambda n: arrays(np.float64, 1 << n, elements=elements))


@settings(max_examples=40, deadline=None)
@given(_game_arrays(st.integers(-3200, 3200).map(lambda k: k / 64)))
def test_canonical_reaches_the_lp_optimum_on_any_game(v):
    """Multiples of 1/64 up to 50: ties everywhere, and within the reference's accuracy."""
    res = and_or(v, "canonical")
    assert float(res.loss) == pytest.approx(lp_optimum(v), rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), v, atol=1e-12 * (1 + abs(v).max()))


#: below the smallest normal double, values carry fewer significant bits than a relative
#: tolerance asks for: the absolute floor of the loss comparison (5e-324 alone has none)
TINY = float(np.finfo(np.float64).tiny)


@settings(max_examples=40, deadline=None)
@given(_game_arrays(st.floats(-50, 50)))
@example(np.array([5e-324, 5e-324]))  # subnormal: a purely relative tolerance is 0 here
@example(np.array([1e-300, 50.0]))
def test_canonical_is_accurate_on_badly_scaled_games(v):
    """Any floats (1e-300 next to 50, subnormals): the split meets its own LP optimum to 1e-9
    or raises; scipy's reference (absolute tolerance 1e-7) is compared on the game scaled to
    max |v| = 1, to 1e-6 of that scale with an absolute floor of the smallest normal double."""
    res = and_or(v, "canonical")
    assert res.info["max_rel_check"] <= 1e-9
    top = float(np.abs(v).max())
    if top > 0:
        ref = lp_optimum(v / top) * top
        assert float(res.loss) == pytest.approx(ref, rel=1e-6, abs=max(1e-6 * top, TINY))
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), v, atol=1e-12 * (1 + top))


@pytest.mark.parametrize("qthres", [0.0, QTHRES])
@pytest.mark.parametrize(("n", "rounded"), [(2, True), (3, False), (3, True), (4, True)])
def test_canonical_is_the_least_norm_point_of_the_optimal_face(n, rounded, qthres):
    """Variational certificate: x* is the least-norm point of the convex optimal set F iff
    min_{x in F} <x*, x> = ||x*||^2; the minimum is taken by linprog over F (dense LP)."""
    v = _games(n, 3, 200 + n, rounded)
    res = and_or(v, "canonical", qthres=qthres)
    exact = and_or(v, "exact", qthres=qthres)
    for g in range(len(v)):
        x = _x(res, g)
        qb = float(_qbound(v[g])) if qthres else None
        low, _ = optimal_face_argmin(v[g], x, qb)
        norm2 = float(x @ x)
        assert float(x @ low) >= norm2 - 1e-7 * (1 + norm2)
        # and the vertex 'exact' returns is never shorter
        assert np.linalg.norm(_x(exact, g)) >= np.linalg.norm(x) - 1e-9


@pytest.mark.parametrize("qthres", [0.0, QTHRES])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_canonical_norm_is_below_other_optima(n, qthres):
    """Other optimal solutions: linprog minimising random linear functions over the optimal
    face (extreme points of it); none is shorter than the canonical split."""
    v = _games(n, 2, 300 + n, rounded=True)
    res = and_or(v, "canonical", qthres=qthres)
    rng = np.random.default_rng(n)
    for g in range(len(v)):
        x = _x(res, g)
        qb = float(_qbound(v[g])) if qthres else None
        for _ in range(6):
            other, z = optimal_face_argmin(v[g], rng.normal(size=x.shape), qb)
            assert res.loss[g] == pytest.approx(z, rel=1e-9, abs=1e-12)
            assert np.linalg.norm(other) >= np.linalg.norm(x) - 1e-7 * (1 + np.linalg.norm(x))


def test_canonical_is_not_a_vertex_choice():
    """On a degenerate game the canonical split is strictly shorter than the LP vertex."""
    v = _games(4, 6, 7, rounded=True)
    canon, vertex = and_or(v, "canonical"), and_or(v, "exact")
    shorter = np.linalg.norm(canon.gamma, axis=1) < np.linalg.norm(vertex.gamma, axis=1) - 1e-6
    assert shorter.any()


@pytest.mark.parametrize("qthres", [0.0, QTHRES])
def test_canonical_does_not_depend_on_batch_order_or_threads(monkeypatch, qthres):
    import psens.interactions.exact as exact

    v = _games(5, 10, 11, rounded=True)
    together = and_or(v, "canonical", qthres=qthres)
    reverse = and_or(v[::-1], "canonical", qthres=qthres)
    np.testing.assert_array_equal(reverse.gamma, together.gamma[::-1])
    for i in (0, 4, 9):
        alone = and_or(v[i], "canonical", qthres=qthres)
        np.testing.assert_array_equal(alone.gamma, together.gamma[i])
        np.testing.assert_array_equal(alone.I_or, together.I_or[i])
        if qthres:
            np.testing.assert_array_equal(alone.q, together.q[i])
    for threads in (1, 2):
        monkeypatch.setattr(exact.os, "cpu_count", lambda threads=threads: threads)
        again = and_or(v, "canonical", qthres=qthres)
        np.testing.assert_array_equal(again.gamma, together.gamma)
        np.testing.assert_array_equal(again.I_and, together.I_and)


def test_canonical_does_not_depend_on_earlier_calls():
    v = _games(4, 3, 12, rounded=True)
    first = and_or(v[0], "canonical")
    and_or(v[1:], "canonical")
    and_or(v[1:], "exact")
    np.testing.assert_array_equal(and_or(v[0], "canonical").gamma, first.gamma)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            st.permutations(range(n)),
            arrays(np.float64, 1 << n, elements=st.integers(-4, 4).map(float)),
        )
    ),
    st.sampled_from([0.0, QTHRES]),
)
def test_canonical_is_equivariant_under_relabelling(case, qthres):
    """v'(T) = v(pi(T))  =>  I'(S) = I(pi(S)); small integer games: heavily degenerate LPs."""
    perm, v = case
    n = len(perm)
    idx = _relabel(n, np.asarray(perm))
    res = and_or(v, "canonical", qthres=qthres)
    moved = and_or(v[idx], "canonical", qthres=qthres)
    atol = 1e-8 * (1 + np.abs(v).max())
    np.testing.assert_allclose(moved.I_and, res.I_and[idx], atol=atol)
    np.testing.assert_allclose(moved.I_or, res.I_or[idx], atol=atol)
    np.testing.assert_allclose(moved.gamma, res.gamma[idx], atol=atol)


def test_exact_vertex_is_not_equivariant_but_canonical_is():
    """The motivating defect: relabelling the players moves the vertex 'exact' returns."""
    n = 4
    v = _games(n, 8, 13, rounded=True)
    idx = _relabel(n, np.array([2, 0, 3, 1]))
    gaps = {}
    for method in ("exact", "canonical"):
        res, moved = and_or(v, method), and_or(v[:, idx], method)
        gaps[method] = float(np.abs(moved.I_and - res.I_and[:, idx]).max())
    assert gaps["canonical"] <= 1e-8
    assert gaps["exact"] > 1e-6


def test_canonical_scales_exactly_with_powers_of_two():
    v = _games(4, 3, 14)
    res = and_or(v, "canonical")
    np.testing.assert_array_equal(and_or(8.0 * v, "canonical").gamma, 8.0 * res.gamma)


@pytest.mark.parametrize("qthres", [0.0, QTHRES])
def test_canonical_edge_games(qthres):
    one = and_or(np.array([3.0]), "canonical", qthres=qthres)  # n = 0
    assert one.gamma.tolist() == [0.0] and float(one.loss) == 3.0
    zero = and_or(np.zeros((2, 8)), "canonical", qthres=qthres)
    np.testing.assert_array_equal(zero.gamma, 0.0)
    assert zero.loss.tolist() == [0.0, 0.0]
    f32 = and_or(_games(3, 2, 15).astype(np.float32), "canonical", qthres=qthres)
    assert f32.gamma.dtype == np.float32 and f32.I_and.dtype == np.float32


def test_canonical_batched_shape():
    v = _games(3, 6, 16).reshape(2, 3, 8)
    res = and_or(v, "canonical")
    assert res.gamma.shape == v.shape and res.loss.shape == (2, 3)
    flat = and_or(v.reshape(6, 8), "canonical")
    np.testing.assert_array_equal(res.gamma.reshape(6, 8), flat.gamma)


# ----------------------------------------------------------------------------- noise term


@pytest.mark.parametrize("method", ["exact", "canonical"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_noise_term_reaches_the_joint_lp_optimum(method, n):
    v = _games(n, 3, 400 + n)
    res = and_or(v, method, qthres=QTHRES)
    bound = _qbound(v)
    assert np.all(np.abs(res.q) <= bound[:, None] * (1 + 1e-12))
    for g in range(len(v)):
        assert res.loss[g] == pytest.approx(lp_optimum_q(v[g], bound[g]), rel=1e-9, abs=1e-12)
        assert res.loss[g] <= lp_optimum(v[g]) * (1 + 1e-9)  # q can only help


def test_exact_noise_beats_sgd_noise():
    v = _games(5, 6, 17)
    lp = and_or(v, "exact", qthres=QTHRES)
    sgd = and_or(v, "sgd", qthres=QTHRES, steps=3000, lr=1e-2)
    paper = and_or(v, "sgd", preset="paper-pq", steps=3000, lr=1e-2)
    assert np.all(lp.loss <= sgd.loss * (1 + 1e-9))
    assert np.all(lp.loss <= paper.loss * (1 + 1e-9))


# ----------------------------------------------------------------------------- matching


CASES = [
    ("canonical", {}),
    ("canonical", {"qthres": QTHRES}),
    ("exact", {"qthres": QTHRES}),
    ("sgd", {"preset": "paper", "steps": 200, "lr": 1e-2}),
    ("sgd", {"preset": "paper-pq", "steps": 200, "lr": 1e-2}),
]


@pytest.mark.parametrize(("method", "kw"), CASES)
def test_universal_matching_for_every_new_method(method, kw):
    v = _games(4, 3, 18)
    res = and_or(v, method, **kw)
    target = v if res.q is None else v + res.q
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), target, atol=1e-9)
    np.testing.assert_allclose(matching_ref(res.I_and, res.I_or), target, atol=1e-9)
    np.testing.assert_allclose(res.I_and, mobius_and_ref(0.5 * target + res.gamma), atol=1e-9)
    np.testing.assert_allclose(res.I_or, mobius_or_ref(0.5 * target - res.gamma), atol=1e-9)
    np.testing.assert_allclose(res.loss, l1_objective(res.I_and, res.I_or))


# ----------------------------------------------------------------------------- paper presets


@pytest.mark.parametrize("preset", ["paper", "paper-pq"])
@pytest.mark.parametrize("n", [3, 4, 5])
def test_paper_preset_matches_the_published_loop_step_by_step(n, preset):
    v = _games(n, 2, 500 + n)
    qthres = 0.0 if preset == "paper" else QTHRES
    for niter in (1, 2, 3, 17, 120):  # the whole trajectory, not only its end
        res = and_or(v, "sgd", preset=preset, steps=niter, lr=1e-2)
        assert res.info["updates"] == niter - 1
        for g in range(len(v)):
            p, q = paper_sgd_ref(v[g], niter, 1e-2, qthres)
            np.testing.assert_allclose(res.gamma[g], p, rtol=0, atol=1e-12)
            if preset == "paper":
                assert res.q is None
            else:
                np.testing.assert_allclose(res.q[g], q, rtol=0, atol=1e-12)


@pytest.mark.parametrize("preset", ["paper", "paper-pq"])
def test_paper_preset_interactions_are_the_authors_up_to_the_empty_set(preset):
    """They decompose v - v(∅): every non-empty interaction is theirs; each empty-set one is
    v(∅)/2 above theirs, so that ours reconstruct v (+ q)."""
    n, niter = 4, 60
    v = _games(n, 1, 19)[0] + 3.0
    qthres = 0.0 if preset == "paper" else QTHRES
    res = and_or(v, "sgd", preset=preset, steps=niter, lr=1e-2)
    p, q = paper_sgd_ref(v, niter, 1e-2, qthres)
    r = v - v[0]
    theirs_and = mobius_and_ref(0.5 * (r + q) + p)
    theirs_or = mobius_or_ref(0.5 * (r + q) - p)
    np.testing.assert_allclose(res.I_and[1:], theirs_and[1:], atol=1e-12)
    np.testing.assert_allclose(res.I_or[1:], theirs_or[1:], atol=1e-12)
    np.testing.assert_allclose(res.I_and[0], theirs_and[0] + v[0] / 2, atol=1e-12)
    np.testing.assert_allclose(res.I_or[0], theirs_or[0] + v[0] / 2, atol=1e-12)
    assert theirs_and[0] + theirs_or[0] == pytest.approx(q[0], abs=1e-12)


def test_paper_preset_defaults_and_overrides():
    assert SolverSettings(method="sgd", preset="paper").steps == 20_000
    pq = SolverSettings(method="sgd", preset="paper-pq")
    assert (pq.steps, pq.lr, pq.qthres, pq.momentum) == (50_000, 1e-6, 0.04, 0.9)
    mine = SolverSettings(method="sgd", preset="paper-pq", steps=10, qthres=0.02)
    assert (mine.steps, mine.lr, mine.qthres) == (10, 1e-6, 0.02)
    plain = SolverSettings()
    assert (plain.method, plain.steps, plain.lr, plain.qthres) == ("canonical", 20_000, 1e-5, 0.0)
    # a preset given with settings= fills the fields the call leaves out
    res = and_or(np.zeros(4), "sgd", settings=SolverSettings(method="sgd"), preset="paper-pq")
    assert (res.settings.lr, res.settings.qthres) == (1e-6, 0.04)
    attrs = pq.to_attrs()
    assert attrs["solver_preset"] == "paper-pq" and attrs["solver_steps"] == 50_000


def test_paper_preset_differs_from_plain_sgd():
    """Same settings, different procedure (v - v(∅), one update fewer, their schedule)."""
    v = _games(3, 1, 20)[0] + 2.0
    plain = and_or(v, "sgd", steps=50, lr=1e-2)
    paper = and_or(v, "sgd", preset="paper", steps=50, lr=1e-2)
    assert np.abs(plain.gamma - paper.gamma).max() > 1e-6


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "sgd", "preset": "papers"}, r"preset='papers' is unknown\. Use one of"),
        ({"method": "exact", "preset": "paper"}, r"not method='exact'\. Use method='sgd'"),
        ({"method": "canonical", "preset": "paper-pq"}, r"Use method='sgd' with a preset"),
        ({"method": "canonical", "qthres": -0.1}, r"qthres=-0\.1 is negative\. Pass qthres >= 0"),
        ({"method": "sgd", "qthres": -1}, r"negative"),
        ({"method": "simplex"}, r"method='simplex' is unknown\. Use one of"),
    ],
)
def test_bad_solver_settings_name_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SolverSettings(**kwargs)
    method = kwargs.pop("method")
    with pytest.raises(ValueError, match=match):
        and_or(np.zeros(4), method, **kwargs)


def test_canonical_refuses_too_many_players():
    from psens.interactions.exact import MAX_EXACT_N

    v = np.zeros(1 << (MAX_EXACT_N + 1))
    with pytest.raises(ValueError, match=r"too large for the exact LP.*method='sgd'"):
        and_or(v, "canonical")


def test_runs_default_to_canonical():
    from psens.config import RunConfig

    assert RunConfig(store="x.zarr", models=["m"], dataset="arc-easy").solver == "canonical"
    assert SolverSettings().method == "canonical"
