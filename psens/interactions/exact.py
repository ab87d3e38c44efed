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

With the noise term (``qthres > 0``), :func:`solve_gamma_q` solves the joint LP in
:math:`(\gamma, q)`, :math:`|q_T| \le` ``qbound`` (see its docstring). The optimal face of
either LP, and the least-norm point on it, are in :mod:`psens.interactions.canonical`.


References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [2] Li and Zhang, arXiv:2304.13312, 2023; the full reference is in :mod:`psens.interactions`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from psens._validation import fail

__all__ = [
    "canonical_gamma",
    "lp_matrices",
    "solve_gamma",
    "solve_gamma_linprog",
    "solve_gamma_q",
]

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


_SILENT = threading.Lock()


@contextlib.contextmanager
def _silent_fd(fd: int):
    """Send what C code writes to file descriptor ``fd`` to /dev/null for a moment.

    One thread at a time: the descriptor table is shared by the threads of the pool, and two
    overlapping silences would let the second save (and finally restore) the first one's
    /dev/null, leaving ``fd`` silenced for the rest of the process.
    """
    with _SILENT:
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

    def __init__(self, n: int, tight: bool = False):
        import highspy

        m = (1 << n) - 1
        Z = _zeta_nonempty(n)
        with _silent_fd(1):  # HiGHS prints a licence banner on construction
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("solver", "simplex")
        # Dantzig pricing: ~10% faster than HiGHS' default on these small, degenerate LPs
        h.setOptionValue("simplex_dual_edge_weight_strategy", 0)
        if tight:
            set_tight_tolerances(h)
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

    def basis(self) -> tuple[list, list]:
        """The optimal basis of the last solve: (column statuses of ``y``, row statuses)."""
        b = self.h.getBasis()
        return list(b.col_status), list(b.row_status)

    def reset(self) -> None:
        """Forget the previous basis, so a call's results depend only on its own games."""
        self.h.clearSolver()

    def solve(self, d: np.ndarray) -> tuple[np.ndarray, float]:
        """Minimise ``<d, y>`` over the polytope; return (row duals, objective)."""
        duals, objective, _, _ = self.solve_full(d)
        return duals, objective

    def solve_full(self, d: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
        """Like :meth:`solve`, also returning the optimal ``y`` and the row activities ``Z y``.

        ``(y, Z y)`` is an optimal solution of the dual of eq. 12: it certifies which
        interactions may be non-zero, and with which sign, at every optimum (complementary
        slackness; used by :mod:`psens.interactions.canonical`).
        """
        self.h.changeColsCost(self.m, self.cols, d)
        self.h.run()
        _check_optimal(self.h, self.optimal, "exact")
        sol = self.h.getSolution()
        duals = np.asarray(sol.row_dual, dtype=np.float64)
        y = np.asarray(sol.col_value, dtype=np.float64)
        zy = np.asarray(sol.row_value, dtype=np.float64)
        return duals, float(self.h.getInfo().objective_function_value), y, zy


#: HiGHS' primal and dual feasibility tolerances for the canonical split and the noise-term
#: LP (its default, 1e-7, is absolute: on a game scaled to max |v| ~ 1 it would leave relative
#: errors of that size in the optimum and in the optimal face read off the duals)
TIGHT_TOLERANCE = 1e-10


def set_tight_tolerances(h) -> None:
    """Set :data:`TIGHT_TOLERANCE` on a HiGHS instance."""
    h.setOptionValue("primal_feasibility_tolerance", TIGHT_TOLERANCE)
    h.setOptionValue("dual_feasibility_tolerance", TIGHT_TOLERANCE)


def _check_optimal(h, optimal, method: str) -> None:
    """Refuse anything but an optimal HiGHS status."""
    if h.getModelStatus() != optimal:
        fail(
            f"and_or(method={method!r})",
            f"HiGHS ended with status {h.modelStatusToString(h.getModelStatus())}",
            "Report this game (v) to the psens developers",
        )


_LOCAL = threading.local()

#: games per chunk; each chunk starts from a fresh basis. One game per chunk: a game's
#: result then depends on that game alone — never on the games solved with it, the number of
#: threads or earlier calls. (Warm-starting each game from its predecessor's basis was
#: measured no faster at n = 5 and n = 8, and on degenerate games it picked a different
#: optimal vertex: on the demo run, low-order IPS moved from 1.60 to 1.75 between solving all
#: samples together and one sample at a time.)
CHUNK = 1


def thread_cached(key: tuple, build: Callable[[], Any]) -> Any:
    """This thread's object for ``key`` (HiGHS instances are not shared between threads)."""
    cache = getattr(_LOCAL, "lps", None)
    if cache is None:
        cache = _LOCAL.lps = {}
    if key not in cache:
        cache[key] = build()
    return cache[key]


def _dual_lp(n: int, tight: bool = False) -> _DualLP:
    """This thread's HiGHS instance for ``n`` players (HiGHS objects are not shared)."""
    return thread_cached(("dual", n, tight), lambda: _DualLP(n, tight))


def map_games(count: int, work: Callable[[int], None], *, progress: bool, desc: str) -> None:
    """Call ``work(i)`` for every game ``i < count``, in a thread pool.

    HiGHS releases the GIL, so games run in parallel, one HiGHS instance per thread. Each
    ``work(i)`` must start from a fresh solver state, so that a game's result never depends on
    the thread it ran in or on the games solved before it.
    """
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=count, desc=desc, unit="game")

    def run(i: int) -> None:
        work(i)
        if bar is not None:
            bar.update(1)

    workers = min(count, os.cpu_count() or 1)
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, range(count)))
    else:
        for i in range(count):
            run(i)
    if bar is not None:
        bar.close()


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
    """:math:`(-1)^{|T|}` for every subset ``T`` (bitmask order)."""
    idx = np.arange(1 << n)
    pop = np.zeros_like(idx)
    while idx.any():
        pop += idx & 1
        idx >>= 1
    return np.where(pop % 2 == 0, 1.0, -1.0)


def reduced_cost(v64: np.ndarray, n: int) -> np.ndarray:
    r"""Cost vector ``d`` of the reduced dual LP, :math:`d_R = -\sigma_R (L_{or} v)_R`, per game."""
    from psens.interactions.transforms import mobius_or

    return -_sign_of_empty(n)[1:] * mobius_or(v64)[..., 1:]


def check_too_large(n: int, method: str) -> None:
    """Refuse ``n`` beyond :data:`MAX_EXACT_N`."""
    if n > MAX_EXACT_N:
        fail(
            f"and_or(method={method!r})",
            f"n={n} players is too large for the exact LP (it grows like 3^n)",
            f"Use n <= {MAX_EXACT_N} or method='sgd'",
        )


def relative_gap(got: np.ndarray, want: np.ndarray, v64: np.ndarray) -> float:
    """Largest ``|got - want| / |want|`` over games (``|want|`` floored at 1e-12 ``||v||_1``)."""
    scale = np.maximum(np.abs(want), 1e-12 * np.abs(v64).sum(-1))
    scale = np.maximum(scale, np.finfo(np.float64).tiny)
    return float(np.max(np.abs(got - want) / scale)) if len(got) else 0.0


def power_of_two_scale(v64: np.ndarray) -> np.ndarray:
    """Per game, the power of two nearest ``max |v|`` (1 for a zero game).

    The LPs are positively homogeneous (``v -> s v`` maps optimal splits to ``s`` times
    optimal splits), so a game is solved as ``v / s``: HiGHS' absolute tolerances then act as
    relative ones, and a power of two rescales without any rounding.
    """
    top = np.abs(v64).max(-1) if v64.shape[-1] else np.zeros(len(v64))
    with np.errstate(divide="ignore"):
        exponent = np.where(top > 0, np.round(np.log2(np.where(top > 0, top, 1.0))), 0.0)
    return np.ldexp(1.0, exponent.astype(np.int64))


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

    check_too_large(n, "exact")
    v64 = flat.astype(np.float64)
    gamma = np.zeros_like(v64)
    if n == 0:
        return gamma.astype(flat.dtype), {"backend": "closed form"}
    d = reduced_cost(v64, n)
    a = np.zeros_like(v64)
    objective = np.zeros(len(v64))

    def work(start: int) -> None:
        stop = min(start + CHUNK, len(v64))
        a[start:stop, 1:], objective[start:stop] = _solve_chunk(n, d[start:stop])

    starts = list(range(0, len(v64), CHUNK))
    map_games(
        len(starts),
        lambda i: work(starts[i]),
        progress=progress,
        desc=f"AND-OR exact (n={n})",
    )
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


# ----------------------------------------------------------------------------- noise term


class JointLP:
    r"""The LP of eq. 12 with the noise term, in :math:`(\gamma, q)`, for one ``n``.

    Columns: :math:`\gamma` (free), :math:`q` (bounds set per game), and the positive and
    negative parts :math:`a^\pm, c^\pm \ge 0` of :math:`I_{and}` and :math:`I_{or}`;
    rows (equalities, right-hand side set per game):

    .. math::
        a^+ - a^- - M\gamma - \tfrac12 M q = \tfrac12 M v, \qquad
        c^+ - c^- + L_{or}\gamma - \tfrac12 L_{or} q = \tfrac12 L_{or} v,

    cost :math:`\mathbf 1^\top(a^+ + a^- + c^+ + c^-)`. :math:`6 \cdot 2^n` columns,
    :math:`2 \cdot 2^n` rows, :math:`3^{n+1} + 4 \cdot 2^n` non-zeros; the matrix is built once
    per thread and each game is solved from a fresh basis.
    """

    def __init__(self, n: int):
        import highspy
        import scipy.sparse as sp

        size = 1 << n
        M, L = lp_matrices(n)
        eye = sp.identity(size, format="csc")
        zero = sp.csc_matrix((size, size))
        A = sp.vstack(
            [
                sp.hstack([-M, -0.5 * M, eye, -eye, zero, zero]),
                sp.hstack([L, -0.5 * L, zero, zero, eye, -eye]),
            ],
            format="csc",
        )
        A.sort_indices()
        with _silent_fd(1):
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        set_tight_tolerances(h)
        inf = highspy.kHighsInf
        cols = 6 * size
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = cols, 2 * size
        lp.col_cost_ = np.concatenate([np.zeros(2 * size), np.ones(4 * size)])
        lp.col_lower_ = np.concatenate([np.full(size, -inf), np.zeros(5 * size)])
        lp.col_upper_ = np.full(cols, inf)
        lp.row_lower_, lp.row_upper_ = np.zeros(2 * size), np.zeros(2 * size)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, 2 * size
        h.passModel(lp)
        self.h, self.size = h, size
        self.q_cols = np.arange(size, 2 * size, dtype=np.int32)
        self.rows = np.arange(2 * size, dtype=np.int32)
        self.optimal = highspy.HighsModelStatus.kOptimal

    def solve(
        self, rhs: np.ndarray, qbound: float, method: str
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """One game from a fresh basis: (column values, reduced costs, objective).

        ``rhs`` is :math:`\tfrac12 (M v, L_{or} v)` (computed by the caller, batched).
        """
        h = self.h
        h.clearSolver()
        h.changeRowsBounds(len(self.rows), self.rows, rhs, rhs)
        bound = np.full(self.size, qbound)
        h.changeColsBounds(self.size, self.q_cols, -bound, bound)
        h.run()
        _check_optimal(h, self.optimal, method)
        sol = h.getSolution()
        x = np.asarray(sol.col_value, dtype=np.float64)
        rc = np.asarray(sol.col_dual, dtype=np.float64)
        return x, rc, float(h.getInfo().objective_function_value)


def joint_rhs(v64: np.ndarray) -> np.ndarray:
    r"""Right-hand sides of :class:`JointLP`, :math:`\tfrac12 (M v, L_{or} v)`, per game."""
    from psens.interactions.transforms import mobius_and, mobius_or

    return 0.5 * np.concatenate([mobius_and(v64), mobius_or(v64)], axis=-1)


def joint_lp(n: int) -> JointLP:
    """This thread's :class:`JointLP` for ``n`` players."""
    return thread_cached(("joint", n), lambda: JointLP(n))


def solve_gamma_q(
    flat: np.ndarray,
    n: int,
    qbound: np.ndarray,
    *,
    tol: float = 1e-9,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    r"""Optimal ``(gamma, q)`` of eq. 12 with the bounded noise term, per row of ``flat``.

    .. math::
        \min_{\gamma,\; |q_T| \le \bar q} \;
        \|M(\tfrac12(v+q) + \gamma)\|_1 + \|L_{or}(\tfrac12(v+q) - \gamma)\|_1,
        \qquad \bar q = \texttt{qbound} \;(= q_{thres} \, |v(N) - v(\emptyset)|),

    solved as the LP :class:`JointLP` with HiGHS (one fresh basis per game, games in
    parallel). An optimal vertex is returned, with ``gamma`` shifted to ``gamma(∅) = 0``
    (:func:`canonical_gamma`: a constant shift moves weight only between
    :math:`I_{and}(\emptyset)` and :math:`I_{or}(\emptyset)`, whose sum
    :math:`v(\emptyset) + q(\emptyset)` it keeps, and the equal split is optimal). Universal
    matching holds for ``v + q``. The objective recomputed from ``(gamma, q)`` with the fast
    transforms is checked against HiGHS' value to ``tol`` (relative).
    """
    from psens.interactions.transforms import mobius_and, mobius_or

    check_too_large(n, "exact")
    v64 = flat.astype(np.float64)
    size = 1 << n
    gamma = np.zeros_like(v64)
    q = np.zeros_like(v64)
    if n == 0:  # N = ∅: the bound |v(N) - v(∅)| is 0, so q = 0
        return gamma.astype(flat.dtype), q.astype(flat.dtype), {"backend": "closed form"}
    objective = np.zeros(len(v64))
    scale = power_of_two_scale(v64)
    rhs = joint_rhs(v64 / scale[:, None])

    def work(i: int) -> None:
        s, qb = scale[i], float(qbound[i]) / scale[i]
        x, _, obj = joint_lp(n).solve(rhs[i], qb, "exact")
        objective[i] = obj * s
        gamma[i], q[i] = x[:size] * s, np.clip(x[size : 2 * size], -qb, qb) * s

    map_games(len(v64), work, progress=progress, desc=f"AND-OR exact+q (n={n})")
    gamma = canonical_gamma(gamma)
    base = 0.5 * (v64 + q)
    got = np.abs(mobius_and(base + gamma)).sum(-1) + np.abs(mobius_or(base - gamma)).sum(-1)
    worst = relative_gap(got, objective, v64)
    if worst > max(tol, 1e-7):
        fail(
            "and_or(method='exact')",
            f"the recovered (gamma, q) misses the LP optimum by {worst:.2e} (relative)",
            "Report this game (v) to the psens developers",
        )
    info = {"backend": "highs-joint-lp", "max_rel_check": worst}
    return gamma.astype(flat.dtype), q.astype(flat.dtype), info
