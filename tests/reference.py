"""Slow, literal reference implementations (straight from the paper's formulas) for tests.

Nothing here is fast or clever on purpose: loops over subsets, dense matrices built entry by
entry from the definitions. Only for small n.
"""

from __future__ import annotations

import itertools

import numpy as np


def subsets(mask: int):
    """All T ⊆ mask (as bitmasks)."""
    t = mask
    while True:
        yield t
        if t == 0:
            return
        t = (t - 1) & mask


def popcount(x: int) -> int:
    return bin(x).count("1")


def mobius_and_ref(v: np.ndarray) -> np.ndarray:
    """I(S) = sum_{T ⊆ S} (-1)^{|S|-|T|} v(T), by a loop over subsets (O(3^n))."""
    v = np.asarray(v, dtype=float)
    size = v.shape[-1]
    out = np.zeros_like(v)
    for s in range(size):
        for t in subsets(s):
            out[..., s] += (-1) ** (popcount(s) - popcount(t)) * v[..., t]
    return out


def mobius_or_ref(v: np.ndarray) -> np.ndarray:
    """I_or(S) = -sum_{T ⊆ S} (-1)^{|S|-|T|} v(N \\ T) for S ≠ ∅; I_or(∅) = v(∅)."""
    v = np.asarray(v, dtype=float)
    size = v.shape[-1]
    full = size - 1
    out = np.zeros_like(v)
    for s in range(1, size):
        for t in subsets(s):
            out[..., s] -= (-1) ** (popcount(s) - popcount(t)) * v[..., full ^ t]
    out[..., 0] = v[..., 0]
    return out


def matching_ref(I_and: np.ndarray, I_or: np.ndarray) -> np.ndarray:
    """phi(T) = I_and(∅) + I_or(∅) + sum_{∅≠S⊆T} I_and(S) + sum_{S∩T≠∅} I_or(S)."""
    size = I_and.shape[-1]
    out = np.zeros_like(I_and, dtype=float)
    for t in range(size):
        out[..., t] = I_and[..., 0] + I_or[..., 0]
        for s in range(1, size):
            if s & t == s:
                out[..., t] += I_and[..., s]
            if s & t:
                out[..., t] += I_or[..., s]
    return out


def dense_matrix(transform, n: int) -> np.ndarray:
    """The matrix of a linear map on R^(2^n), column by column."""
    size = 1 << n
    return np.stack([transform(np.eye(size)[k]) for k in range(size)], axis=1)


def lp_optimum(v: np.ndarray) -> float:
    """min_gamma sum|M(v/2+g)| + |L(v/2-g)| with dense literal matrices and scipy's HiGHS."""
    from scipy.optimize import linprog

    size = v.shape[-1]
    n = size.bit_length() - 1
    M = dense_matrix(mobius_and_ref, n)
    L = dense_matrix(mobius_or_ref, n)
    eye, zero = np.eye(size), np.zeros((size, size))
    A = np.block([[M, -eye, zero], [-M, -eye, zero], [-L, zero, -eye], [L, zero, -eye]])
    b = np.concatenate([-M @ v / 2, M @ v / 2, -L @ v / 2, L @ v / 2])
    c = np.concatenate([np.zeros(size), np.ones(2 * size)])
    bounds = [(None, None)] * size + [(0, None)] * (2 * size)
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def ips_ref(I_and: np.ndarray, I_or: np.ndarray, tau: float, order=None) -> float:
    """Eq. 3 for one sample: I_* of shape [template, 2**n], literal loops, no NaN padding."""
    n_t, size = I_and.shape
    n = size.bit_length() - 1
    norm = []
    for t in range(n_t):
        mags = [abs(I_and[t, s]) for s in range(1, size)] + [
            abs(I_or[t, s]) for s in range(1, size)
        ]
        lo, hi = min(mags), max(mags)
        d = {}
        for kind, arr in (("and", I_and), ("or", I_or)):
            for s in range(1, size):
                x = arr[t, s]
                d[(kind, s)] = 0.0 if hi == lo else np.sign(x) * (abs(x) - lo) / (hi - lo)
        norm.append(d)

    def in_order(s):
        k = popcount(s)
        if order is None:
            return True
        if order == "low":
            return 1 <= k <= n // 3
        if order == "mid":
            return n // 3 < k <= 2 * n // 3
        return k > 2 * n // 3

    values = []
    for i, j in itertools.combinations(range(n_t), 2):
        union = [
            key
            for key in norm[i]
            if in_order(key[1]) and (abs(norm[i][key]) > tau or abs(norm[j][key]) > tau)
        ]
        if not union:
            continue
        terms = [
            abs(norm[i][k] - norm[j][k]) / ((abs(norm[i][k]) + abs(norm[j][k])) / 2) for k in union
        ]
        values.append(sum(terms) / len(terms))
    return float(np.mean(values)) if values else float("nan")
