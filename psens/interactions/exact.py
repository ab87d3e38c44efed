r"""Exact AND-OR split: the optimum of the linear program behind paper eq. 12.

The problem :math:`\min_\gamma \sum_S |I_{and}(S)| + |I_{or}(S)|` is a linear program.
:func:`solve_gamma` solves a reduced dual of it with HiGHS (see its docstring);
:func:`solve_gamma_linprog` is the direct formulation with ``scipy.optimize.linprog``, the
baseline of ``make bench`` and a cross-check in the tests. Both use sparse
Kronecker-structured matrices (:math:`3^n` non-zeros), never a dense
:math:`2^n \times 2^n` array. The direct formulation: variables ``gamma`` (free), slacks
``s_and, s_or >= 0``; minimise :math:`\mathbf 1^\top (s_{and} + s_{or})` subject to
:math:`|M(v/2 + \gamma)| \le s_{and}` and :math:`|L_{or}(v/2 - \gamma)| \le s_{or}`.

The empty set's two interactions always sum to :math:`v(\emptyset)` and any split between
0 and :math:`v(\emptyset)` is optimal; the returned gamma is shifted to ``gamma(∅) = 0``
(:func:`canonical_gamma`), which splits it equally.


References
----------
.. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
.. [2] Li, M., and Zhang, Q. "Defining and Quantifying AND-OR Interactions for Faithful and
   Concise Explanation of DNNs." arXiv:2304.13312, 2023.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from psens._validation import fail

__all__ = ["canonical_gamma", "lp_matrices", "solve_gamma", "solve_gamma_linprog"]

#: largest n for which the exact LP is attempted (n=10 takes ~10 s per game)
MAX_EXACT_N = 12


@functools.lru_cache(maxsize=8)
def lp_matrices(n: int):
    """Sparse ``(M, L_or)`` of ``n`` players (CSR, :math:`3^n` non-zeros each)."""
    import scipy.sparse as sp

    m1 = sp.csr_matrix(np.array([[1.0, 0.0], [-1.0, 1.0]]))
    M = sp.csr_matrix(np.ones((1, 1)))
    for _ in range(n):
        M = sp.kron(m1, M, format="csr")
    size = 1 << n
    rev = sp.csr_matrix((np.ones(size), (np.arange(size), size - 1 - np.arange(size))))
    L = (-(M @ rev)).tolil()
    L[0, :] = 0.0
    L[0, 0] = 1.0
    return M, L.tocsr()


def canonical_gamma(gamma: np.ndarray) -> np.ndarray:
    """Shift ``gamma`` by a constant so that ``gamma(∅) = 0``.

    A constant shift of ``gamma`` only moves weight between ``I_and(∅)`` and ``I_or(∅)``
    (``M 1 = L_or 1 = e_∅``), so every other interaction and the objective (while
    ``|gamma(∅)| <= |v(∅)|/2``) are unchanged; ``gamma(∅) = 0`` splits the bias equally.
    """
    return gamma - gamma[..., :1]


def solve_gamma_linprog(v: np.ndarray, n: int) -> np.ndarray:
    """Optimal ``gamma`` of one game with ``linprog(method="highs")`` on the direct LP."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    size = 1 << n
    M, L = lp_matrices(n)
    eye = sp.identity(size, format="csr")
    zero = sp.csr_matrix((size, size))
    A = sp.vstack(
        [
            sp.hstack([M, -eye, zero]),
            sp.hstack([-M, -eye, zero]),
            sp.hstack([-L, zero, -eye]),
            sp.hstack([L, zero, -eye]),
        ],
        format="csr",
    )
    Mv, Lv = M @ (0.5 * v), L @ (0.5 * v)
    b = np.concatenate([-Mv, Mv, -Lv, Lv])
    c = np.concatenate([np.zeros(size), np.ones(2 * size)])
    bounds = [(None, None)] * size + [(0, None)] * (2 * size)
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        fail("and_or(method='exact')", f"HiGHS stopped with: {res.message}", "Report this game")
    return canonical_gamma(res.x[:size])


def _zeta_nonempty(n: int):
    """Sparse subset-sum matrix restricted to non-empty sets: ``Z[S, R] = [R ⊆ S]`` (CSC)."""
    import scipy.sparse as sp

    z1 = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 1.0]]))
    Z = sp.csr_matrix(np.ones((1, 1)))
    for _ in range(n):
        Z = sp.kron(z1, Z, format="csr")
    return Z[1:, 1:].tocsc()


@contextlib.contextmanager
def _silent_fd(fd: int):
    """Send what C code writes to file descriptor ``fd`` to /dev/null for a moment."""
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


class _DualLP:
    """The dual LP of one ``n``, kept in one HiGHS instance and re-solved per game.

    Only the cost vector changes from game to game, so the matrix, bounds and factorisation
    set-up are built once per thread; each game is solved from a fresh basis (see
    :data:`CHUNK`), so its optimal vertex depends on the game alone.
    """

    def __init__(self, n: int):
        import highspy

        m = (1 << n) - 1
        Z = _zeta_nonempty(n)
        with _silent_fd(1):  # HiGHS prints a licence banner on construction
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("solver", "simplex")
        # Dantzig pricing: ~10% faster than HiGHS' default on these small, degenerate LPs
        h.setOptionValue("simplex_dual_edge_weight_strategy", 0)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = m, m
        lp.col_cost_ = np.zeros(m)
        lp.col_lower_, lp.col_upper_ = -np.ones(m), np.ones(m)
        lp.row_lower_, lp.row_upper_ = -np.ones(m), np.ones(m)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = Z.indptr
        lp.a_matrix_.index_ = Z.indices
        lp.a_matrix_.value_ = Z.data
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = m, m
        h.passModel(lp)
        self.h, self.m = h, m
        self.cols = np.arange(m, dtype=np.int32)
        self.optimal = highspy.HighsModelStatus.kOptimal

    def reset(self) -> None:
        """Forget the previous basis, so a call's results depend only on its own games."""
        self.h.clearSolver()

    def solve(self, d: np.ndarray) -> tuple[np.ndarray, float]:
        """Minimise ``<d, y>`` over the polytope; return (row duals, objective)."""
        self.h.changeColsCost(self.m, self.cols, d)
        self.h.run()
        if self.h.getModelStatus() != self.optimal:
            fail(
                "and_or(method='exact')",
                f"HiGHS ended with status {self.h.modelStatusToString(self.h.getModelStatus())}",
                "Report this game (v) to the psens developers",
            )
        duals = np.asarray(self.h.getSolution().row_dual, dtype=np.float64)
        return duals, float(self.h.getInfo().objective_function_value)


_LOCAL = threading.local()

#: games per chunk; each chunk starts from a fresh basis. One game per chunk: a game's
#: result then depends on that game alone — never on the games solved with it, the number of
#: threads or earlier calls. (Warm-starting each game from its predecessor's basis was
#: measured no faster at n = 5 and n = 8, and on degenerate games it picked a different
#: optimal vertex: on the demo run, low-order IPS moved from 1.60 to 1.75 between solving all
#: samples together and one sample at a time.)
CHUNK = 1


def _dual_lp(n: int) -> _DualLP:
    """This thread's HiGHS instance for ``n`` players (HiGHS objects are not shared)."""
    cache = getattr(_LOCAL, "lps", None)
    if cache is None:
        cache = _LOCAL.lps = {}
    if n not in cache:
        cache[n] = _DualLP(n)
    return cache[n]


def _solve_chunk(n: int, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row duals and objectives of the games ``d`` (one chunk), from a fresh basis."""
    lp = _dual_lp(n)
    lp.reset()  # degenerate LPs have many optimal vertices: the history must not pick one
    a = np.zeros_like(d)
    objective = np.zeros(len(d))
    for r in range(len(d)):
        a[r], obj = lp.solve(d[r])
        objective[r] = -obj
    return a, objective


def _sign_of_empty(n: int) -> np.ndarray:
    idx = np.arange(1 << n)
    pop = np.zeros_like(idx)
    while idx.any():
        pop += idx & 1
        idx >>= 1
    return np.where(pop % 2 == 0, 1.0, -1.0)


def solve_gamma(
    flat: np.ndarray,
    n: int,
    *,
    tol: float = 1e-9,
    progress: bool = False,
) -> tuple[np.ndarray, dict[str, Any]]:
    r"""Optimal ``gamma`` for each row of ``flat`` (``(batch, 2**n)``).

    Reformulation (all sums over non-empty sets). Write :math:`a = I_{and}`; then
    :math:`v_{and} = Z a` (zeta transform) and, with :math:`b = L_{or} v` and
    :math:`\sigma_R = (-1)^{|R|}`, the OR interactions are
    :math:`I_{or}(R) = b_R + \sigma_R \sum_{S \supseteq R} a_S`. Hence eq. 12 is

    .. math::
        \min_a \|a\|_1 + \|Z^\top a - d\|_1, \qquad d_R = -\sigma_R b_R,

    whose LP dual is :math:`\max_y -\langle d, y\rangle` s.t. :math:`\|y\|_\infty \le 1,
    \|Z y\|_\infty \le 1` — :math:`2^n-1` box-bounded variables and as many range rows, half
    the size of the direct formulation, with the same matrix for every game. HiGHS' simplex
    solves it from a fresh basis per game (one HiGHS instance per thread, games in
    parallel), so a game's result never depends on the other games of the batch; the
    optimal ``a`` is the vector of row duals. The empty set decouples (``a(∅)`` anywhere
    in ``[0, v(∅)]``) and is split equally.

    Stopping rule: HiGHS' simplex optimality (primal and dual feasibility tolerance 1e-7 on
    the basis, i.e. an optimal vertex). The objective recomputed from the returned ``gamma``
    with the fast transforms is checked against HiGHS' value to ``tol`` (relative).
    """
    from psens.interactions.transforms import inverse_mobius_and, mobius_and, mobius_or

    if n > MAX_EXACT_N:
        fail(
            "and_or(method='exact')",
            f"n={n} players is too large for the exact LP (it grows like 3^n)",
            f"Use n <= {MAX_EXACT_N} or method='sgd'",
        )
    v64 = flat.astype(np.float64)
    gamma = np.zeros_like(v64)
    if n == 0:
        return gamma.astype(flat.dtype), {"backend": "closed form"}
    d = -_sign_of_empty(n)[1:] * mobius_or(v64)[:, 1:]
    a = np.zeros_like(v64)
    objective = np.zeros(len(v64))
    starts = list(range(0, len(v64), CHUNK))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(v64), desc=f"AND-OR exact (n={n})", unit="game")

    def run(start: int) -> int:
        stop = min(start + CHUNK, len(v64))
        a[start:stop, 1:], objective[start:stop] = _solve_chunk(n, d[start:stop])
        if bar is not None:
            bar.update(stop - start)
        return stop

    workers = min(len(starts), os.cpu_count() or 1)
    if workers > 1:  # HiGHS releases the GIL: one instance per thread
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, starts))
    else:
        for start in starts:
            run(start)
    if bar is not None:
        bar.close()
    a[:, 0] = 0.5 * v64[:, 0]
    gamma = canonical_gamma(inverse_mobius_and(a) - 0.5 * v64)
    got = np.abs(mobius_and(0.5 * v64 + gamma)).sum(-1) + np.abs(mobius_or(0.5 * v64 - gamma)).sum(
        -1
    )
    want = objective + np.abs(v64[:, 0])
    worst = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0)))
    if worst > max(tol, 1e-7):
        fail(
            "and_or(method='exact')",
            f"the recovered split misses the LP optimum by {worst:.2e} (relative)",
            "Report this game (v) to the psens developers",
        )
    return gamma.astype(flat.dtype), {"backend": "highs-dual-simplex", "max_rel_check": worst}
