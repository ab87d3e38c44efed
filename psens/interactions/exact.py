r"""Exact AND-OR split: the optimum of the linear program behind paper eq. 12.

The problem :math:`\min_\gamma \sum_S |I_{and}(S)| + |I_{or}(S)|` is a linear program.
This module solves it exactly with HiGHS (``scipy.optimize.linprog``) on the
sparse Kronecker-structured formulation: the Möbius matrix of ``n`` players is
:math:`M_n = \bigotimes_{i=1}^{n} \begin{pmatrix} 1 & 0 \\ -1 & 1\end{pmatrix}`
(:math:`3^n` non-zeros), never a dense :math:`2^n \times 2^n` array.

Variables: ``gamma`` (free), slacks ``s_and, s_or >= 0``;
minimise :math:`\mathbf 1^\top (s_{and} + s_{or})` subject to
:math:`|M(v/2 + \gamma)| \le s_{and}` and :math:`|L_{or}(v/2 - \gamma)| \le s_{or}`.

The empty set's two interactions always sum to :math:`v(\emptyset)` and any split between
0 and :math:`v(\emptyset)` is optimal; the returned gamma is shifted to ``gamma(∅) = 0``
(:func:`canonical_gamma`), which splits it equally.

Stopping rule: HiGHS' own optimality tolerances (primal/dual feasibility 1e-7 by default,
simplex or IPM with crossover), i.e. a vertex optimum.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from psens._validation import fail

__all__ = ["lp_matrices", "solve_gamma"]

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


def _solve_one_highs(v: np.ndarray, n: int) -> np.ndarray:
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


def solve_gamma(
    flat: np.ndarray,
    n: int,
    *,
    tol: float = 1e-9,
    max_iter: int = 20_000,
    progress: bool = False,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Optimal ``gamma`` for each row of ``flat`` (``(batch, 2**n)``)."""
    if n > MAX_EXACT_N:
        fail(
            "and_or(method='exact')",
            f"n={n} players is too large for the exact LP (it grows like 3^n)",
            f"Use n <= {MAX_EXACT_N} or method='sgd'",
        )
    rows = range(flat.shape[0])
    if progress:
        from tqdm.auto import tqdm

        rows = tqdm(rows, desc=f"AND-OR exact (n={n})", unit="game")
    gamma = np.zeros_like(flat)
    for r in rows:
        gamma[r] = _solve_one_highs(flat[r].astype(np.float64), n)
    return gamma, {"backend": "highs", "tol": tol, "max_iter": max_iter}
