r"""The canonical AND-OR split: the least-norm optimum of paper eq. 12.

The L1 problem of eq. 12,

.. math::
    z^* = \min_\gamma f(\gamma), \qquad
    f(\gamma) = \sum_{S \subseteq N} |I_{and}(S)| + |I_{or}(S)|, \quad
    I_{and} = M(\tfrac12 v + \gamma), \; I_{or} = L_{or}(\tfrac12 v - \gamma),

is a linear program, and it is degenerate: its optimal set
:math:`\Gamma^* = \{\gamma : f(\gamma) = z^*\}` is a polyhedron, often larger than one point
(the empty set alone always leaves a segment of optimal :math:`\gamma(\emptyset)`; games with
ties leave more). A simplex solver returns one vertex of :math:`\Gamma^*`, which one
depending on pivoting rules, the order of the players and the solver's history, and IPS
moves with it. The canonical split is

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

Algorithm (two stages, exact; per game):

1. Solve the LP (:func:`psens.interactions.exact.solve_gamma`'s reduced dual, or
   :class:`psens.interactions.exact.JointLP` with the noise term) and keep an optimal **dual**
   solution :math:`(y, w)` — multipliers :math:`|y_S|, |w_S| \le 1` of the AND and OR terms.
2. By LP duality, :math:`\gamma` is optimal iff it satisfies complementary slackness with
   that one dual solution: :math:`I_{and}(S) = 0` where :math:`|y_S| < 1`, and
   :math:`\operatorname{sign} I_{and}(S) \in \{0, y_S\}` where :math:`|y_S| = 1` (likewise
   for :math:`I_{or}` and :math:`w`; bounds of :math:`q` with a non-zero reduced cost are
   active). This describes :math:`\Gamma^*` exactly by linear (in)equalities, with no
   tolerance on :math:`z^*`; on it :math:`f` is linear and equal to :math:`z^*`.
3. Solve the strictly convex QP :math:`\min \tfrac12\|\gamma\|_2^2` over that polyhedron
   (sparse rows :math:`M`, :math:`L_{or}`: :math:`3^n` non-zeros each, never a dense
   :math:`2^n \times 2^n` matrix) with HiGHS' active-set QP solver from a fresh state.

Each game is scaled by the power of two nearest :math:`\max|v|` before solving (exact in
floating point; the problem is positively homogeneous), so HiGHS' absolute tolerances act as
relative ones. The objective of the returned split, recomputed with the fast transforms, is
checked against the LP optimum to ``tol`` (relative, default 1e-9).

References
----------
.. [1] Mangasarian, O. L., and Meyer, R. R. "Nonlinear perturbation of linear programs."
   SIAM Journal on Control and Optimization 17(6), 745–752, 1979.
.. [2] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
.. [3] Li, M., and Zhang, Q. "Defining and Quantifying AND-OR Interactions for Faithful and
   Concise Explanation of DNNs." arXiv:2304.13312, 2023.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psens._validation import fail
from psens.interactions import exact
from psens.interactions.transforms import mobius_and, mobius_or

__all__ = ["FaceQP", "solve_canonical"]

#: a dual multiplier within this of ±1 counts as at its bound (the optimal face is then the
#: larger one; values strictly inside pin the interaction to zero)
BOUND_TOL = 1e-9

WHERE = "and_or(method='canonical')"


class FaceQP:
    r"""The least-norm QP over an optimal face, for one ``n``, kept in one HiGHS instance.

    .. math::
        \min_x \tfrac12 \|x\|_2^2 \quad \text{s.t.} \quad
        \ell \le A x \le u, \quad l \le x \le h,

    with :math:`x = \gamma` and :math:`A = \begin{pmatrix} M \\ -L_{or} \end{pmatrix}`, or
    :math:`x = (\gamma, q)` and
    :math:`A = \begin{pmatrix} M & \tfrac12 M \\ -L_{or} & \tfrac12 L_{or} \end{pmatrix}`
    (rows: the AND and OR interactions minus their values at :math:`x = 0`). Only the bounds
    change from game to game; each game is solved from a fresh state.
    """

    def __init__(self, n: int, with_q: bool):
        import highspy
        import scipy.sparse as sp

        size = 1 << n
        M, L = exact.lp_matrices(n)
        if with_q:
            A = sp.vstack([sp.hstack([M, 0.5 * M]), sp.hstack([-L, 0.5 * L])], format="csc")
        else:
            A = sp.vstack([M, -L], format="csc")
        A.sort_indices()
        cols, rows = A.shape[1], A.shape[0]
        with exact._silent_fd(1):  # HiGHS prints a licence banner on construction
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("solver", "qpasm")
        h.setOptionValue("qp_nullspace_limit", max(4000, cols + 1))
        inf = highspy.kHighsInf
        model = highspy.HighsModel()
        lp = model.lp_
        lp.num_col_, lp.num_row_ = cols, rows
        lp.col_cost_ = np.zeros(cols)
        lp.col_lower_, lp.col_upper_ = np.full(cols, -inf), np.full(cols, inf)
        lp.row_lower_, lp.row_upper_ = np.full(rows, -inf), np.full(rows, inf)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, rows
        hess = model.hessian_
        hess.dim_ = cols
        hess.format_ = highspy.HessianFormat.kTriangular
        hess.start_ = np.arange(cols + 1, dtype=np.int32)
        hess.index_ = np.arange(cols, dtype=np.int32)
        hess.value_ = np.ones(cols)
        h.passModel(model)
        self.h, self.size, self.inf = h, size, inf
        self.col_idx = np.arange(cols, dtype=np.int32)
        self.row_idx = np.arange(rows, dtype=np.int32)
        self.optimal = highspy.HighsModelStatus.kOptimal

    def solve(
        self,
        row_lo: np.ndarray,
        row_hi: np.ndarray,
        col_lo: np.ndarray | None = None,
        col_hi: np.ndarray | None = None,
    ) -> np.ndarray:
        """The least-norm ``x`` within the given bounds (columns free when not given)."""
        h = self.h
        h.clearSolver()
        h.changeRowsBounds(len(self.row_idx), self.row_idx, row_lo, row_hi)
        cols = len(self.col_idx)
        lo = np.full(cols, -self.inf) if col_lo is None else col_lo
        hi = np.full(cols, self.inf) if col_hi is None else col_hi
        h.changeColsBounds(cols, self.col_idx, lo, hi)
        h.run()
        exact._check_optimal(h, self.optimal, "canonical")
        return np.asarray(h.getSolution().col_value, dtype=np.float64)


def _face_qp(n: int, with_q: bool) -> FaceQP:
    return exact.thread_cached(("face", n, with_q), lambda: FaceQP(n, with_q))


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


def _gamma_only(v: np.ndarray, n: int, d: np.ndarray) -> tuple[np.ndarray, float]:
    """One game (scaled): the least-norm optimal gamma and the LP optimum."""
    lp = exact._dual_lp(n)
    lp.reset()
    _, obj, y, zy = lp.solve_full(d)
    qp = _face_qp(n, False)
    inf = qp.inf
    # AND: a_S > 0 needs (Z y)_S = -1, a_S < 0 needs (Z y)_S = +1 (row duals of the reduced LP)
    a_lo, a_hi = _sign_bounds(zy <= -1 + BOUND_TOL, zy >= 1 - BOUND_TOL, inf)
    # OR: sigma_R I_or(R) > 0 needs y_R = +1, < 0 needs y_R = -1
    sigma = exact._sign_of_empty(n)[1:]
    up, down = y >= 1 - BOUND_TOL, y <= -1 + BOUND_TOL
    o_lo, o_hi = _sign_bounds(np.where(sigma > 0, up, down), np.where(sigma > 0, down, up), inf)
    e_lo, e_hi = _empty_set_bounds(float(v[0]), inf)
    lo = np.concatenate([[e_lo], a_lo, [e_lo], o_lo])
    hi = np.concatenate([[e_hi], a_hi, [e_hi], o_hi])
    at_zero = 0.5 * np.concatenate([mobius_and(v), mobius_or(v)])
    gamma = qp.solve(lo - at_zero, hi - at_zero)
    return gamma, -obj + abs(float(v[0]))


def _with_noise(v: np.ndarray, n: int, qbound: float) -> tuple[np.ndarray, np.ndarray, float]:
    """One game (scaled), noise term on: least-norm optimal (gamma, q) and the LP optimum."""
    size = 1 << n
    _, rc, obj = exact.joint_lp(n).solve(v, qbound, "canonical")
    qp = _face_qp(n, True)
    inf = qp.inf
    free = np.abs(rc) <= BOUND_TOL
    # columns: gamma | q | a+ | a- | c+ | c- ; a split part with a positive reduced cost is 0
    a_lo, a_hi = _sign_bounds(free[2 * size : 3 * size], free[3 * size : 4 * size], inf)
    o_lo, o_hi = _sign_bounds(free[4 * size : 5 * size], free[5 * size : 6 * size], inf)
    rq = rc[size : 2 * size]
    q_lo = np.where(rq < -BOUND_TOL, qbound, -qbound)  # negative reduced cost: q at its upper
    q_hi = np.where(rq > BOUND_TOL, -qbound, qbound)  # positive: q at its lower bound
    at_zero = 0.5 * np.concatenate([mobius_and(v), mobius_or(v)])
    col_lo = np.concatenate([np.full(size, -inf), q_lo])
    col_hi = np.concatenate([np.full(size, inf), q_hi])
    lo = np.concatenate([a_lo, o_lo]) - at_zero
    hi = np.concatenate([a_hi, o_hi]) - at_zero
    x = qp.solve(lo, hi, col_lo, col_hi)
    return x[:size], np.clip(x[size:], -qbound, qbound), obj


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
        return gamma.astype(flat.dtype), None if q is None else q, {"backend": "closed form"}
    scale = exact.power_of_two_scale(v64)
    want = np.zeros(len(v64))
    if qbound is None:
        d = exact.reduced_cost(v64 / scale[:, None], n)

        def work(i: int) -> None:
            g, opt = _gamma_only(v64[i] / scale[i], n, d[i])
            gamma[i], want[i] = g * scale[i], opt * scale[i]

    else:

        def work(i: int) -> None:
            s = scale[i]
            g, qq, opt = _with_noise(v64[i] / s, n, float(qbound[i]) / s)
            gamma[i], q[i], want[i] = g * s, qq * s, opt * s

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
        "backend": "highs-lp+face-qp" if q is None else "highs-joint-lp+face-qp",
        "max_rel_check": worst,
    }
    return gamma.astype(flat.dtype), None if q is None else q.astype(flat.dtype), info
