"""Random optimal vertices of eq. 12: optimal, vertices of the optimal face, distinct, seeded.

References are literal: the LP optimum and the argmin over the optimal face by scipy's linprog
on dense matrices built entry by entry (tests/support.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from psens.interactions import (
    and_or,
    l1_objective,
    optimal_vertices,
    reconstruct,
    vertex_directions,
)
from tests.support import (
    lp_optimum,
    lp_optimum_q,
    matching_ref,
    mobius_and_ref,
    mobius_or_ref,
    optimal_face_argmin,
)

QTHRES = 0.04


def _games(n: int, count: int, seed: int, rounded: bool = False) -> np.ndarray:
    """Gaussian games; ``rounded``: one decimal, so ties make the LP degenerate."""
    v = np.random.default_rng(seed).normal(size=(count, 1 << n)) * 2
    return np.round(v, 1) if rounded else v


def _x(res, g: int, j: int) -> np.ndarray:
    """Vertex j of game g: gamma, or (gamma, q) with the noise term."""
    return res.gamma[g, j] if res.q is None else np.concatenate([res.gamma[g, j], res.q[g, j]])


@pytest.mark.parametrize("rounded", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_every_vertex_reaches_the_lp_optimum_and_matches(n, rounded):
    v = _games(n, 3, 600 + n, rounded)
    res = optimal_vertices(v, 4, seed=1)
    assert res.gamma.shape == (3, 4, 1 << n) and res.loss.shape == (3, 4)
    assert res.info["max_rel_check"] <= 1e-9
    for g in range(len(v)):
        z = lp_optimum(v[g])
        for j in range(4):
            assert res.loss[g, j] == pytest.approx(z, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(res.loss, l1_objective(res.I_and, res.I_or))
    target = np.broadcast_to(v[:, None, :], res.I_and.shape)
    atol = 1e-12 * (1 + np.abs(v).max())
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), target, atol=atol)
    np.testing.assert_allclose(matching_ref(res.I_and, res.I_or), target, atol=1e-9)
    np.testing.assert_allclose(res.I_and, mobius_and_ref(0.5 * target + res.gamma), atol=1e-9)
    np.testing.assert_allclose(res.I_or, mobius_or_ref(0.5 * target - res.gamma), atol=1e-9)


@pytest.mark.parametrize("qthres", [0.0, QTHRES])
@pytest.mark.parametrize(("n", "rounded"), [(2, True), (3, False), (3, True), (4, True)])
def test_each_vertex_minimises_its_direction_over_the_optimal_face(n, rounded, qthres):
    """Vertex j is argmin <c_j, x> over the optimal set, x = gamma or (gamma, q): linprog on
    the dense LP with the objective bounded by z* (1 + 1e-10) finds the same point."""
    v = _games(n, 2, 700 + n, rounded)
    k = 3
    res = optimal_vertices(v, k, seed=2, qthres=qthres)
    c = res.info["directions"]
    assert c.shape == (k, (2 if qthres else 1) << n)
    np.testing.assert_array_equal(c, vertex_directions(n, k, 2)[:, : c.shape[1]])
    for g in range(len(v)):
        qb = QTHRES * abs(v[g, -1] - v[g, 0]) if qthres else None
        for j in range(k):
            ref, z = optimal_face_argmin(v[g], c[j], qb)
            assert res.loss[g, j] == pytest.approx(z, rel=1e-9, abs=1e-12)
            x = _x(res, g, j)
            assert float(c[j] @ x) <= float(c[j] @ ref) + 1e-7 * (1 + np.abs(ref).sum())
            np.testing.assert_allclose(x, ref, atol=1e-6 * (1 + np.abs(v[g]).max()))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_vertices_with_the_noise_term_reach_the_joint_optimum(n):
    v = _games(n, 3, 800 + n)
    res = optimal_vertices(v, 3, qthres=QTHRES)
    bound = QTHRES * np.abs(v[:, -1] - v[:, 0])
    assert np.all(np.abs(res.q) <= bound[:, None, None] * (1 + 1e-12))
    for g in range(len(v)):
        z = lp_optimum_q(v[g], bound[g])
        np.testing.assert_allclose(res.loss[g], z, rtol=1e-9, atol=1e-12)
    target = v[:, None, :] + res.q
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), target, atol=1e-9)


def test_vertices_differ_on_degenerate_games_and_canonical_is_shortest():
    """Tie-rich games: the random vertices are different optimal splits (not only on the
    empty set's bias), and none is shorter than the canonical least-norm split."""
    v = _games(4, 6, 7, rounded=True)
    k = 6
    res = optimal_vertices(v, k, seed=0)
    canon = and_or(v, "canonical")
    distinct = [len({tuple(np.round(res.I_and[g, j, 1:], 9)) for j in range(k)}) for g in range(6)]
    assert max(distinct) >= 3, distinct
    assert sum(d > 1 for d in distinct) >= 4, distinct
    norms = np.linalg.norm(res.gamma, axis=-1)  # [game, vertex]
    short = np.linalg.norm(canon.gamma, axis=-1)[:, None]
    assert np.all(short <= norms + 1e-9 * (1 + norms))
    assert np.all(short < norms - 1e-6)  # the least-norm point is no vertex on these games
    # the vertices have the canonical split's (optimal) objective
    np.testing.assert_allclose(res.loss, np.repeat(canon.loss[:, None], k, 1), rtol=1e-9)


@pytest.mark.parametrize("qthres", [0.0, QTHRES])
def test_canonical_norm_is_below_every_vertex_with_or_without_q(qthres):
    v = _games(3, 4, 9, rounded=True)
    res = optimal_vertices(v, 5, seed=3, qthres=qthres)
    canon = and_or(v, "canonical", qthres=qthres)
    for g in range(len(v)):
        x = canon.gamma[g] if canon.q is None else np.concatenate([canon.gamma[g], canon.q[g]])
        for j in range(5):
            assert np.linalg.norm(x) <= np.linalg.norm(_x(res, g, j)) + 1e-9


def test_vertices_are_deterministic_and_do_not_depend_on_the_batch(monkeypatch):
    import psens.interactions.exact as exact

    v = _games(4, 6, 10, rounded=True)
    first = optimal_vertices(v, 4, seed=5)
    again = optimal_vertices(v, 4, seed=5)
    np.testing.assert_array_equal(first.gamma, again.gamma)
    reverse = optimal_vertices(v[::-1], 4, seed=5)
    np.testing.assert_array_equal(reverse.gamma, first.gamma[::-1])
    alone = optimal_vertices(v[2], 4, seed=5)
    np.testing.assert_array_equal(alone.gamma, first.gamma[2])
    fewer = optimal_vertices(v, 2, seed=5)  # vertex j does not depend on k
    np.testing.assert_array_equal(fewer.gamma, first.gamma[:, :2])
    monkeypatch.setattr(exact.os, "cpu_count", lambda: 1)
    np.testing.assert_array_equal(optimal_vertices(v, 4, seed=5).I_or, first.I_or)
    other = optimal_vertices(v, 4, seed=6)
    assert np.abs(other.gamma - first.gamma).max() > 1e-6


def test_vertices_shapes_dtypes_and_edge_games():
    v = _games(3, 6, 11).reshape(2, 3, 8)
    res = optimal_vertices(v, 2)
    assert res.I_and.shape == (2, 3, 2, 8) and res.loss.shape == (2, 3, 2)
    flat = optimal_vertices(v.reshape(6, 8), 2)
    np.testing.assert_array_equal(res.gamma.reshape(6, 2, 8), flat.gamma)
    f32 = optimal_vertices(v.astype(np.float32), 2)
    assert f32.gamma.dtype == np.float32 and f32.I_and.dtype == np.float32
    one = optimal_vertices(np.array([[3.0], [-2.0]]), 4)  # n = 0: both ends of |g| <= |v|/2
    assert set(np.abs(one.gamma[0, :, 0])) == {1.5}
    np.testing.assert_allclose(one.loss, [[3.0] * 4, [2.0] * 4])
    np.testing.assert_allclose(reconstruct(one.I_and, one.I_or)[..., 0], [[3.0] * 4, [-2.0] * 4])
    zero = optimal_vertices(np.zeros((2, 8)), 3)
    np.testing.assert_array_equal(zero.gamma, 0.0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"k": 0}, ValueError, r"k=0 is below 1\. Pass k >= 1"),
        ({"k": 2.5}, TypeError, r"k=2\.5 is not an integer"),
        ({"k": 2, "seed": -1}, ValueError, r"seed=-1 is below 0"),
        ({"k": 2, "qthres": -0.1}, ValueError, r"qthres=-0\.1 is outside"),
    ],
)
def test_optimal_vertices_refuse_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        optimal_vertices(np.zeros(4), **kwargs)
    with pytest.raises(ValueError, match="not a power of two"):
        optimal_vertices(np.zeros(3), 2)
