r"""The canonical AND-OR split: the least-norm optimum of paper eq. 12.

The L1 problem of eq. 12,

.. math::
    z^* = \min_\gamma f(\gamma), \qquad
    f(\gamma) = \sum_{S \subseteq N} |I_{and}(S)| + |I_{or}(S)|, \quad
    I_{and} = M(\tfrac12 v + \gamma), \; I_{or} = L_{or}(\tfrac12 v - \gamma),

is a linear program, and it is degenerate: its optimal set
:math:`\Gamma^* = \{\gamma : f(\gamma) = z^*\}` is a polyhedron, often larger than one point
(whenever :math:`v(\emptyset) \ne 0` the empty set alone leaves a segment of optimal
:math:`\gamma(\emptyset)`; games with ties leave more). A simplex solver returns one vertex
of :math:`\Gamma^*`, which one depending on pivoting rules, the order of the players and the
solver's history, and IPS moves with it. The canonical split is

.. math::
    \gamma^\dagger = \operatorname*{arg\,min}_{\gamma \in \Gamma^*} \|\gamma\|_2 ,

and with the noise term (:math:`|q_T| \le \bar q`) the least :math:`\|(\gamma, q)\|_2` over
the optimal set of the joint problem in :math:`(\gamma, q)`.

Uniqueness and invariance. :math:`\Gamma^*` is a non-empty closed convex set (a face of the
LP's feasible polyhedron, projected) and :math:`\|\cdot\|_2^2` is strictly convex, so
:math:`\gamma^\dagger` exists and is unique. It is defined by the game alone, so it does
not depend on the batch, the thread count or the solver's path; and relabelling the players
by a permutation :math:`\pi` permutes the subsets (:math:`P_\pi`, a permutation matrix with
:math:`P_\pi M = M P_\pi`, :math:`P_\pi L_{or} = L_{or} P_\pi`), maps :math:`\Gamma^*` onto
:math:`P_\pi \Gamma^*` and preserves the norm, so :math:`\gamma^\dagger` (and every
interaction) is permuted alike. :math:`\gamma^\dagger` is also the solution of the
regularised problem :math:`\min_\gamma f(\gamma) + \tfrac\varepsilon2 \|\gamma\|_2^2` for
every small enough :math:`\varepsilon > 0` (exact regularisation, Mangasarian & Meyer 1979),
i.e. the limit of the ridge-regularised splits.

Algorithm (per game; exact up to floating point):

1. Solve the LP (:func:`psens.interactions.exact.solve_gamma`'s reduced dual, or
   :class:`psens.interactions.exact.JointLP` with the noise term) and keep an optimal **dual**
   solution :math:`(y, w)` — multipliers :math:`|y_S|, |w_S| \le 1` of the AND and OR terms.
2. By LP duality, :math:`\gamma` is optimal iff it satisfies complementary slackness with
   that one dual solution: :math:`I_{and}(S) = 0` where :math:`|y_S| < 1`, and
   :math:`\operatorname{sign} I_{and}(S) \in \{0, y_S\}` where :math:`|y_S| = 1` (likewise
   for :math:`I_{or}` and :math:`w`; bounds of :math:`q` with a non-zero reduced cost are
   active). This describes :math:`\Gamma^*` exactly, as a polytope :math:`F` given by sign
   bounds on the interactions, with no tolerance on :math:`z^*`; on it :math:`f` is linear
   and equal to :math:`z^*`.
3. Find the least-norm point of :math:`F` with Wolfe's minimum-norm-point algorithm: keep a
   few vertices of :math:`F` ("corral") and the least-norm point :math:`x` of their affine
   hull (a small dense least-squares problem), and ask an LP over :math:`F` for the vertex
   :math:`y` minimising :math:`\langle x, y \rangle`. The iteration stops when
   :math:`\|x\|^2 - \langle x, y\rangle \le 10^{-12} \|x\|^2`: since
   :math:`\|x - \gamma^\dagger\|^2 \le \|x\|^2 - \min_{y \in F} \langle x, y\rangle` for every
   :math:`x \in F`, this certifies the least-norm point. The LP is written in interaction
   coordinates (columns :math:`I_{and}` with their sign bounds, rows :math:`I_{or}` —
   :math:`L_{or} Z`, :math:`3^n` non-zeros — never a dense :math:`2^n \times 2^n` matrix) and
   solved by HiGHS' primal simplex, warm-started from step 1's optimal basis and then from
   the previous vertex. The faces met in practice have few dimensions, so a handful of LPs
   suffice.

Each game is scaled by the power of two nearest :math:`\max|v|` before solving (exact in
floating point; the problem is positively homogeneous), so HiGHS' absolute tolerances act as
relative ones. The objective of the returned split, recomputed with the fast transforms, is
checked against the LP optimum to ``tol`` (relative, default 1e-9).

References
----------
.. [1] Mangasarian, O. L., and Meyer, R. R. "Nonlinear perturbation of linear programs."
   SIAM Journal on Control and Optimization 17(6), 745–752, 1979.
.. [2] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [3] Li and Zhang, arXiv:2304.13312, 2023; the full reference is in :mod:`psens.interactions`.
.. [4] Wolfe, P. "Finding the nearest point in a polytope." Mathematical Programming 11,
   128–149, 1976.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from psens._validation import check_game, check_in_interval, check_positive_int, fail
from psens.interactions import _kernels, exact
from psens.interactions.transforms import mobius_and, mobius_or

__all__ = [
    "FaceLP",
    "VertexResult",
    "least_norm_point",
    "optimal_vertices",
    "solve_canonical",
    "vertex_directions",
]

#: a dual multiplier within this of ±1 counts as at its bound (the optimal face is then the
#: larger one; values strictly inside pin the interaction to zero)
BOUND_TOL = 1e-9

#: Wolfe's stopping rule: ||x||^2 - min_F <x, y> <= GAP_TOL * ||x||^2
GAP_TOL = 1e-12

#: corral weights at or below this are dropped
WEIGHT_TOL = 1e-13

WHERE = "and_or(method='canonical')"


def _zeta(a: np.ndarray, n: int, transpose: bool = False) -> np.ndarray:
    r"""Serial :math:`Z a` (subset sums) or :math:`Z^\top a` (superset sums) of one game.

    The serial kernel is safe to call from the solver threads.
    """
    out = np.array(a, dtype=np.float64, copy=True)
    _kernels._row(out, n, np.float64(1.0), transpose)
    return out


def _zeta_matrix(n: int):
    """Sparse zeta matrix ``Z[T, S] = [S ⊆ T]`` (CSR, :math:`3^n` non-zeros)."""
    import scipy.sparse as sp

    z1 = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 1.0]]))
    Z = sp.csr_matrix(np.ones((1, 1)))
    for _ in range(n):
        Z = sp.kron(z1, Z, format="csr")
    return Z


class FaceLP:
    r"""Linear functions minimised over the optimal face, for one ``n``, in one HiGHS instance.

    Columns :math:`a = I_{and}` (and :math:`q`), rows :math:`I_{or} - L_{or} v`:

    .. math::
        I_{or} = L_{or}(v + q - Z a), \qquad
        \text{row activity} = -L_{or} Z a \,(+\, L_{or} q),

    with the sign bounds of the face on columns and rows (set per game). A point
    :math:`x = \gamma` (or :math:`(\gamma, q)`) corresponds to
    :math:`\gamma = Z a - \tfrac12 (v + q)`, so :math:`\langle x, (\gamma, q)\rangle` is, up to a
    constant, the cost :math:`Z^\top x_\gamma` on :math:`a` and :math:`x_q - \tfrac12
    x_\gamma` on :math:`q`.
    """

    def __init__(self, n: int, with_q: bool):
        import highspy
        import scipy.sparse as sp

        size = 1 << n
        _, L = exact.lp_matrices(n)
        LZ = (L @ _zeta_matrix(n)).tocsc()
        LZ.eliminate_zeros()
        A = sp.hstack([-LZ, L], format="csc") if with_q else -LZ
        A = A.tocsc()
        A.sort_indices()
        cols, rows = A.shape[1], A.shape[0]
        with exact._silent_fd(1):  # HiGHS prints a licence banner on construction
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("solver", "simplex")
        # primal simplex: every LP after the first starts from a vertex of the face
        h.setOptionValue("simplex_strategy", 4)
        exact.set_tight_tolerances(h)
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = cols, rows
        lp.col_cost_ = np.zeros(cols)
        lp.col_lower_, lp.col_upper_ = np.full(cols, -inf), np.full(cols, inf)
        lp.row_lower_, lp.row_upper_ = np.full(rows, -inf), np.full(rows, inf)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, rows
        h.passModel(lp)
        self.h, self.n, self.size, self.with_q, self.inf = h, n, size, with_q, inf
        self.col_idx = np.arange(cols, dtype=np.int32)
        self.row_idx = np.arange(rows, dtype=np.int32)
        self.optimal = highspy.HighsModelStatus.kOptimal
        self.status = highspy.HighsBasisStatus
        self.v = np.zeros(size)

    def start(
        self,
        v: np.ndarray,
        lv: np.ndarray,
        bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        basis: tuple[list, list] | None = None,
    ) -> None:
        """A new game (fresh solver state): ``v``, ``L_or v``, (col lo, col hi, I_or lo, I_or hi).

        ``basis`` (column and row statuses) starts the first LP at a known vertex.
        """
        import highspy

        col_lo, col_hi, row_lo, row_hi = bounds
        h = self.h
        h.clearSolver()
        h.changeColsBounds(len(self.col_idx), self.col_idx, col_lo, col_hi)
        h.changeRowsBounds(len(self.row_idx), self.row_idx, row_lo - lv, row_hi - lv)
        self.v = v
        if basis is not None:
            b = highspy.HighsBasis()
            b.col_status, b.row_status = basis
            b.valid = True
            if h.setBasis(b) != highspy.HighsStatus.kOk:  # never expected: start cold
                h.clearSolver()

    def argmin(self, x: np.ndarray) -> np.ndarray:
        r"""The vertex of the face minimising :math:`\langle x, \cdot\rangle`, as (γ[, q])."""
        size, n = self.size, self.n
        gx = x[:size]
        cost = _zeta(gx, n, transpose=True)
        if self.with_q:
            cost = np.concatenate([cost, x[size:] - 0.5 * gx])
        h = self.h
        h.changeColsCost(len(self.col_idx), self.col_idx, cost)
        h.run()
        exact._check_optimal(h, self.optimal, "canonical")
        col = np.asarray(h.getSolution().col_value, dtype=np.float64)
        a = col[:size]
        q = col[size:] if self.with_q else 0.0
        gamma = _zeta(a, n) - 0.5 * (self.v + q)
        return np.concatenate([gamma, col[size:]]) if self.with_q else gamma


def _face_lp(n: int, with_q: bool) -> FaceLP:
    return exact.thread_cached(("face", n, with_q), lambda: FaceLP(n, with_q))


def _affine_minimiser(points: np.ndarray) -> np.ndarray:
    r"""Weights :math:`\alpha` (summing to 1) of the least-norm point of the points' affine hull.

    :math:`\min_\beta \|p_0 + \sum_{i \ge 1} \beta_i (p_i - p_0)\|` by least squares;
    :math:`\alpha = (1 - \sum\beta, \beta)`.
    """
    if len(points) == 1:
        return np.ones(1)
    diffs = (points[1:] - points[0]).T
    beta = np.linalg.lstsq(diffs, -points[0], rcond=None)[0]
    return np.concatenate([[1.0 - beta.sum()], beta])


def least_norm_point(
    oracle: Callable[[np.ndarray], np.ndarray],
    first: np.ndarray,
    *,
    gap_tol: float = GAP_TOL,
    max_iter: int = 10_000,
) -> tuple[np.ndarray, dict[str, float]]:
    r"""Wolfe's minimum-norm-point algorithm over a polytope given by a linear oracle.

    Parameters
    ----------
    oracle : callable
        ``oracle(c)`` returns a vertex of the polytope :math:`F` minimising
        :math:`\langle c, \cdot\rangle`.
    first : ndarray
        Cost of the first oracle call (any vector; its answer starts the corral).
    gap_tol : float
        Stop when :math:`\|x\|^2 - \langle x, y\rangle \le` ``gap_tol`` :math:`\max(\|x\|^2,
        \|y\|^2)` for the oracle's answer :math:`y` to :math:`x`.
    max_iter : int
        Cap on major plus minor iterations.

    Returns
    -------
    x : ndarray
        The least-norm point of :math:`F`.
    info : dict
        ``oracle_calls``, ``corral`` (vertices kept) and ``gap`` (the last certificate gap,
        relative).

    Notes
    -----
    Each major iteration adds the oracle's vertex :math:`y` to the corral :math:`S`; minor
    iterations move :math:`x` (a convex combination of :math:`S`) towards the least-norm point
    of the affine hull of :math:`S` and drop the vertices whose weight reaches zero, until that
    point lies inside the convex hull. :math:`\|x\|` decreases strictly, so no corral repeats
    and the algorithm is finite; :math:`\|x - x^*\|^2 \le \|x\|^2 - \min_F \langle x,
    y\rangle` certifies the result.

    References
    ----------
    .. [1] Wolfe, P. "Finding the nearest point in a polytope." Mathematical Programming 11,
       128–149, 1976.
    """
    points = oracle(first)[None, :]
    weights = np.ones(1)
    x = points[0].copy()
    calls, gap = 1, 0.0
    it = 0
    while it < max_iter:
        y = oracle(x)
        calls += 1
        xx = float(x @ x)
        scale = max(xx, float(y @ y), np.finfo(np.float64).tiny)
        gap = (xx - float(x @ y)) / scale
        if gap <= gap_tol:
            break
        points = np.vstack([points, y])
        weights = np.append(weights, 0.0)
        while it < max_iter:  # minor iterations
            it += 1
            alpha = _affine_minimiser(points)
            if np.all(alpha > WEIGHT_TOL):
                weights = alpha
                break
            out = alpha <= WEIGHT_TOL
            step = np.min(weights[out] / (weights[out] - alpha[out]))
            weights = step * alpha + (1.0 - step) * weights
            keep = weights > WEIGHT_TOL
            if keep.all():  # rounding kept every weight: drop the smallest
                keep[np.argmin(weights)] = False
            points, weights = points[keep], weights[keep] / weights[keep].sum()
        x_new = weights @ points
        if float(x_new @ x_new) >= xx * (1.0 - 1e-15):  # no progress left at this precision
            x = x_new if float(x_new @ x_new) < xx else x
            break
        x = x_new
    else:
        fail(WHERE, f"no least-norm point after {max_iter} iterations", "Report this game (v)")
    return x, {"oracle_calls": calls, "corral": len(points), "gap": gap}


def _sign_bounds(
    may_pos: np.ndarray, may_neg: np.ndarray, inf: float
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of an interaction allowed to be >= 0 (``may_pos``), <= 0 or only 0."""
    return np.where(may_neg, -inf, 0.0), np.where(may_pos, inf, 0.0)


def _empty_set_bounds(v_empty: float, inf: float) -> tuple[float, float]:
    r"""Optimal range of :math:`I_{and}(\emptyset)` and :math:`I_{or}(\emptyset)` (γ only).

    The two sum to :math:`v(\emptyset)`; :math:`|I_{and}(\emptyset)| + |I_{or}(\emptyset)|` is
    minimal (:math:`= |v(\emptyset)|`) iff neither has the sign opposite to
    :math:`v(\emptyset)`.
    """
    if v_empty > 0:
        return 0.0, inf
    if v_empty < 0:
        return -inf, 0.0
    return 0.0, 0.0


@dataclass
class _OptimalFace:
    """The optimal face of one (scaled) game, ready to be loaded into its :class:`FaceLP`.

    ``vertex`` is the LP's own optimal point (where Wolfe's algorithm starts) and ``optimum``
    the LP optimum :math:`z^*`; :meth:`start` resets the face LP to this game (fresh state).
    """

    lp: FaceLP
    v: np.ndarray
    lv: np.ndarray
    bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    basis: tuple[list, list] | None
    vertex: np.ndarray
    optimum: float

    def start(self) -> None:
        self.lp.start(self.v, self.lv, self.bounds, self.basis)


def _gamma_face(v: np.ndarray, lv: np.ndarray, n: int, d: np.ndarray) -> _OptimalFace:
    """One game (scaled), gamma only: its optimal face from one optimal dual solution."""
    lp = exact._dual_lp(n, tight=True)
    lp.reset()
    a, obj, y, zy = lp.solve_full(d)
    face = _face_lp(n, False)
    inf = face.inf
    # AND: a_S > 0 needs (Z y)_S = -1, a_S < 0 needs (Z y)_S = +1 (row duals of the reduced LP)
    a_lo, a_hi = _sign_bounds(zy <= -1 + BOUND_TOL, zy >= 1 - BOUND_TOL, inf)
    # OR: sigma_R I_or(R) > 0 needs y_R = +1, < 0 needs y_R = -1
    sigma = exact._sign_of_empty(n)[1:]
    up, down = y >= 1 - BOUND_TOL, y <= -1 + BOUND_TOL
    o_lo, o_hi = _sign_bounds(np.where(sigma > 0, up, down), np.where(sigma > 0, down, up), inf)
    v0 = float(v[0])
    e_lo, e_hi = _empty_set_bounds(v0, inf)
    col_lo, col_hi = np.concatenate([[e_lo], a_lo]), np.concatenate([[e_hi], a_hi])
    row_lo, row_hi = np.concatenate([[e_lo], o_lo]), np.concatenate([[e_hi], o_hi])
    basis = _face_basis(face, v0, lp.basis(), col_lo, row_lo)
    a_full = np.concatenate([[0.5 * v0], a])
    vertex = _zeta(a_full, n) - 0.5 * v  # the LP's own optimal vertex
    bounds = (col_lo, col_hi, row_lo, row_hi)
    return _OptimalFace(face, v, lv, bounds, basis, vertex, -obj + abs(v0))


def _gamma_only(
    v: np.ndarray, lv: np.ndarray, n: int, d: np.ndarray
) -> tuple[np.ndarray, float, dict[str, float]]:
    """One game (scaled): the least-norm optimal gamma, the LP optimum and Wolfe's info."""
    face = _gamma_face(v, lv, n, d)
    face.start()
    gamma, info = least_norm_point(face.lp.argmin, face.vertex)
    return gamma, face.optimum, info


def _face_basis(
    face: FaceLP,
    v0: float,
    dual_status: tuple[list, list],
    col_lo: np.ndarray,
    row_lo: np.ndarray,
) -> tuple[list, list]:
    r"""The face LP's basis at the reduced LP's optimal vertex (primal-dual complement).

    The face LP's rows are :math:`\sigma \circ Z^\top a` on non-empty sets, the transpose (up
    to row signs) of the reduced dual LP's matrix :math:`Z`: :math:`a_S` is basic iff the
    dual's row ``S`` is not, and the row of :math:`I_{or}(R)` is basic iff the dual's column
    ``y_R`` is not. Non-basic entries sit at 0, their only finite bound. The empty set:
    :math:`a(\emptyset)` basic and :math:`I_{or}(\emptyset) = 0` (both fixed at 0 when
    :math:`v(\emptyset) = 0`).
    """
    st = face.status
    y_status, zy_status = dual_status
    col_basic = [v0 != 0] + [s != st.kBasic for s in zy_status]
    row_basic = [v0 == 0] + [s != st.kBasic for s in y_status]

    def statuses(is_basic: list, lower: np.ndarray) -> list:
        return [
            st.kBasic if b else (st.kLower if lo > -face.inf else st.kUpper)
            for b, lo in zip(is_basic, lower, strict=True)
        ]

    return statuses(col_basic, col_lo), statuses(row_basic, row_lo)


def _noise_face(
    v: np.ndarray, lv: np.ndarray, rhs: np.ndarray, n: int, qbound: float
) -> _OptimalFace:
    """One game (scaled), noise term on: the optimal face of the joint LP in (gamma, q)."""
    size = 1 << n
    x, rc, obj = exact.joint_lp(n).solve(rhs, qbound, "canonical")
    face = _face_lp(n, True)
    inf = face.inf
    free = np.abs(rc) <= BOUND_TOL
    # joint LP columns: gamma | q | a+ | a- | c+ | c- ; a part with a positive reduced cost is 0
    a_lo, a_hi = _sign_bounds(free[2 * size : 3 * size], free[3 * size : 4 * size], inf)
    o_lo, o_hi = _sign_bounds(free[4 * size : 5 * size], free[5 * size : 6 * size], inf)
    rq = rc[size : 2 * size]
    q_lo = np.where(rq < -BOUND_TOL, qbound, -qbound)  # negative reduced cost: q at its upper
    q_hi = np.where(rq > BOUND_TOL, -qbound, qbound)  # positive: q at its lower bound
    bounds = (np.concatenate([a_lo, q_lo]), np.concatenate([a_hi, q_hi]), o_lo, o_hi)
    return _OptimalFace(face, v, lv, bounds, None, x[: 2 * size], obj)


def _with_noise(
    v: np.ndarray, lv: np.ndarray, rhs: np.ndarray, n: int, qbound: float
) -> tuple[np.ndarray, np.ndarray, float, dict[str, float]]:
    """One game (scaled), noise term on: least-norm optimal (gamma, q), LP optimum, info."""
    size = 1 << n
    face = _noise_face(v, lv, rhs, n, qbound)
    face.start()
    point, info = least_norm_point(face.lp.argmin, face.vertex)
    return point[:size], np.clip(point[size:], -qbound, qbound), face.optimum, info


def solve_canonical(
    flat: np.ndarray,
    n: int,
    *,
    qbound: np.ndarray | None = None,
    tol: float = 1e-9,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    r"""The least-norm optimal split of every row of ``flat`` (``(batch, 2**n)``).

    Parameters
    ----------
    flat : ndarray, shape (batch, 2**n)
        Games.
    n : int
        Players.
    qbound : ndarray, shape (batch,), optional
        Bound :math:`\bar q` of the noise term per game; ``None`` solves for ``gamma`` alone.
    tol : float
        Largest relative gap allowed between the objective of the returned split and the LP
        optimum.
    progress : bool
        Show a tqdm bar over games.

    Returns
    -------
    gamma : ndarray, shape (batch, 2**n)
        :math:`\gamma^\dagger` (see the module docstring), in ``flat``'s dtype.
    q : ndarray or None
        The noise term of the least :math:`\|(\gamma, q)\|_2` optimum, or ``None``.
    info : dict
        ``backend`` and ``max_rel_check`` (largest relative objective gap found).
    """
    exact.check_too_large(n, "canonical")
    v64 = flat.astype(np.float64)
    gamma = np.zeros_like(v64)
    q = None if qbound is None else np.zeros_like(v64)
    if n == 0:  # |v/2 + g| + |v/2 - g| = |v| for |g| <= |v|/2: the least norm is g = 0
        q_out = None if q is None else q.astype(flat.dtype)
        return gamma.astype(flat.dtype), q_out, {"backend": "closed form"}
    scale = exact.power_of_two_scale(v64)
    scaled = v64 / scale[:, None]
    lv = mobius_or(scaled)  # batched here: the solver threads only call serial kernels
    want = np.zeros(len(v64))
    stats = np.zeros((len(v64), 3))
    if qbound is None:
        d = exact.reduced_cost(scaled, n)

        def work(i: int) -> None:
            g, opt, info = _gamma_only(scaled[i], lv[i], n, d[i])
            gamma[i], want[i] = g * scale[i], opt * scale[i]
            stats[i] = info["oracle_calls"], info["corral"], info["gap"]

    else:
        rhs = exact.joint_rhs(scaled)

        def work(i: int) -> None:
            s = scale[i]
            g, qq, opt, info = _with_noise(scaled[i], lv[i], rhs[i], n, float(qbound[i]) / s)
            gamma[i], q[i], want[i] = g * s, qq * s, opt * s
            stats[i] = info["oracle_calls"], info["corral"], info["gap"]

    exact.map_games(len(v64), work, progress=progress, desc=f"AND-OR canonical (n={n})")
    base = 0.5 * v64 if q is None else 0.5 * (v64 + q)
    got = np.abs(mobius_and(base + gamma)).sum(-1) + np.abs(mobius_or(base - gamma)).sum(-1)
    worst = exact.relative_gap(got, want, v64)
    if worst > tol:
        fail(
            WHERE,
            f"the least-norm split misses the LP optimum by {worst:.2e} (relative, tol={tol:g})",
            "Report this game (v) to the psens developers, or pass a larger tol",
        )
    info = {
        "backend": "highs-lp+wolfe" if q is None else "highs-joint-lp+wolfe",
        "max_rel_check": worst,
        "max_oracle_calls": int(stats[:, 0].max()) if len(stats) else 0,
        "max_corral": int(stats[:, 1].max()) if len(stats) else 0,
        "max_norm_gap": float(stats[:, 2].max()) if len(stats) else 0.0,
    }
    return gamma.astype(flat.dtype), None if q is None else q.astype(flat.dtype), info


@dataclass
class VertexResult:
    """Result of :func:`optimal_vertices`: :class:`~psens.interactions.AndOrResult`'s arrays
    with a vertex axis ``k`` before the subset axis (``loss`` ends with it).

    ``I_and + I_or`` reconstruct ``v + q`` on every subset, for every vertex.
    """

    I_and: np.ndarray
    I_or: np.ndarray
    gamma: np.ndarray
    q: np.ndarray | None
    loss: np.ndarray
    qthres: float
    info: dict[str, Any] = field(default_factory=dict)


def vertex_directions(n: int, k: int, seed: int = 0) -> np.ndarray:
    r"""The random linear functions of :func:`optimal_vertices`: ``(k, 2 * 2**n)`` Gaussians.

    Drawn from ``numpy.random.default_rng((seed, n))``, so vertex ``j`` of every game with
    ``n`` players minimises the same function :math:`c_j` (a fixed random tie-break rule,
    like a solver with its own pivoting), whatever the batch. The first :math:`2^n` entries
    weigh :math:`\gamma`, the rest :math:`q` (used with the noise term only).
    """
    return np.random.default_rng((seed, n)).standard_normal((k, 2 << n))


def optimal_vertices(
    v,
    k: int,
    *,
    seed: int = 0,
    qthres: float = 0.0,
    tol: float = 1e-9,
    progress: bool = False,
) -> VertexResult:
    r"""``k`` optimal AND-OR splits per game: vertices of the optimal face of eq. 12.

    The L1 problem of eq. 12 is a degenerate LP: its optimal set
    :math:`\Gamma^* = \{\gamma : f(\gamma) = z^*\}` is a polytope, every point of which is an
    equally valid split. Vertex ``j`` of a game is

    .. math::
        \gamma^{(j)} = \operatorname*{arg\,min}_{\gamma \in \Gamma^*} \langle c_j, \gamma
        \rangle, \qquad c_j \sim \mathcal N(0, I) \;(\text{:func:`vertex_directions`}),

    unique with probability one, so ``k`` directions sample ``k`` (not necessarily
    distinct) vertices of :math:`\Gamma^*` with random tie-breaks — what a simplex solver
    with another pivoting rule, player order or history could have returned as the
    ``"exact"`` split. With the noise term (``qthres > 0``) :math:`\Gamma^*` is the optimal
    set of the joint LP in :math:`(\gamma, q)` and :math:`c_j` weighs both.

    :math:`\Gamma^*` is the polytope of the canonical solver (see the module docstring): one
    optimal dual solution gives the sign bounds of every interaction, and :class:`FaceLP`
    minimises each :math:`c_j` over it from a fresh solver state (so vertex ``j`` depends on
    the game, ``seed`` and ``j`` alone, never on the batch or the thread). The canonical
    split :math:`\gamma^\dagger` is the least-norm point of the same set, so
    :math:`\|\gamma^\dagger\|_2 \le \|\gamma^{(j)}\|_2` for every ``j``.

    Parameters
    ----------
    v : array_like, shape (..., 2**n)
        Games, finite.
    k : int
        Vertices per game (>= 1).
    seed : int
        Seed of the directions :math:`c_j`; the result is a function of ``(v, k, seed)``.
    qthres : float
        Noise bound :math:`|q_T| \le` ``qthres`` :math:`\cdot |v(N) - v(\emptyset)|`, as in
        :func:`psens.interactions.and_or`; 0 (the IPS paper) solves for :math:`\gamma` only.
    tol : float
        Largest relative gap allowed between each vertex's objective (recomputed with the
        fast transforms) and the LP optimum.
    progress : bool
        Show a tqdm bar over games.

    Returns
    -------
    VertexResult
        Like :class:`psens.interactions.AndOrResult`: ``I_and``, ``I_or``, ``gamma`` (and
        ``q``) shaped ``(..., k, 2**n)``, ``loss`` shaped ``(..., k)``; vertex ``j`` of game
        ``v[i]`` is ``[i, j]``. ``info`` holds ``directions`` (the :math:`c_j`), ``seed``,
        ``k`` and ``max_rel_check``.

    References
    ----------
    .. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining
       Prompt Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International
       Conference on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.

    Examples
    --------
    >>> v = np.array([0.0, 1.0, 1.0, 2.0])  # additive: v(T) = |T|
    >>> res = optimal_vertices(v, 3, seed=1)
    >>> res.loss.round(12).tolist()  # every vertex is optimal
    [2.0, 2.0, 2.0]
    >>> (res.I_and[:, 1:].round(12) + 0.0).tolist()  # AND of {0}, {1}, {0, 1}
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    >>> (res.I_or[:, 1:].round(12) + 0.0).tolist()  # OR: v(T) = I_and + I_or on every T
    [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    """
    where = "optimal_vertices"
    k = check_positive_int(k, where, "k")
    seed = check_positive_int(seed, where, "seed", minimum=0)
    qthres = check_in_interval(qthres, where, "qthres", 0.0, 1.0, closed="left")
    tol = check_in_interval(tol, where, "tol", 0.0, 1.0)
    a = np.asarray(v)
    n = check_game(a, where)
    exact.check_too_large(n, "canonical")
    dtype = np.float32 if a.dtype == np.float32 else np.float64
    v64 = a.reshape(-1, a.shape[-1]).astype(np.float64)
    size, count = 1 << n, len(v64)
    with_q = qthres > 0
    qbound = qthres * np.abs(v64[:, -1] - v64[:, 0])
    directions = vertex_directions(n, k, seed)
    gamma = np.zeros((count, k, size))
    q = np.zeros((count, k, size)) if with_q else None
    want = np.zeros(count)
    if n == 0:  # f(g) = |v/2 + g| + |v/2 - g|: optimal on |g| <= |v|/2, vertices at both ends
        gamma[:, :, 0] = -np.sign(directions[None, :, 0]) * 0.5 * np.abs(v64)
        want = np.abs(v64[:, 0])
    else:
        scale = exact.power_of_two_scale(v64)
        scaled = v64 / scale[:, None]
        lv = mobius_or(scaled)  # batched here: the solver threads only call serial kernels
        if with_q:
            rhs = exact.joint_rhs(scaled)
        else:
            d = exact.reduced_cost(scaled, n)
        dim = 2 * size if with_q else size

        def work(i: int) -> None:
            s = scale[i]
            if with_q:
                face = _noise_face(scaled[i], lv[i], rhs[i], n, float(qbound[i]) / s)
            else:
                face = _gamma_face(scaled[i], lv[i], n, d[i])
            for j in range(k):
                face.start()  # each vertex from the same fresh state: independent of j's order
                x = face.lp.argmin(directions[j, :dim])
                gamma[i, j] = x[:size] * s
                if q is not None:
                    qb = float(qbound[i]) / s
                    q[i, j] = np.clip(x[size:], -qb, qb) * s
            want[i] = face.optimum * s

        exact.map_games(count, work, progress=progress, desc=f"AND-OR optimal vertices (n={n})")
    base = 0.5 * v64[:, None, :] if q is None else 0.5 * (v64[:, None, :] + q)
    I_and, I_or = mobius_and(base + gamma), mobius_or(base - gamma)
    got = np.abs(I_and).sum(-1) + np.abs(I_or).sum(-1)  # eq. 12's objective per vertex
    worst = exact.relative_gap(got.reshape(-1), np.repeat(want, k), np.repeat(v64, k, axis=0))
    if worst > tol:
        fail(
            where,
            f"an optimal vertex misses the LP optimum by {worst:.2e} (relative, tol={tol:g})",
            "Report this game (v) to the psens developers, or pass a larger tol",
        )
    shape = (*a.shape[:-1], k, size)

    def out(x: np.ndarray) -> np.ndarray:
        return x.astype(dtype).reshape(shape)

    return VertexResult(
        I_and=out(I_and),
        I_or=out(I_or),
        gamma=out(gamma),
        q=None if q is None else out(q),
        loss=got.astype(dtype).reshape(shape[:-1]),
        qthres=qthres,
        info={
            "backend": "highs-lp+face-vertex",
            "k": k,
            "seed": seed,
            "directions": directions[:, : 2 * size if with_q else size],
            "max_rel_check": worst,
        },
    )
