"""Numba kernel of the published AND-OR SGD (Li & Zhang 2023; IPS paper eq. 12).

Pure numerical code on plain arrays; the public entry point is
:func:`psens.interactions.and_or`.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [2] Li and Zhang, arXiv:2304.13312, 2023; the full reference is in :mod:`psens.interactions`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from psens.interactions._kernels import _row, or_row, or_transpose_row


@njit(cache=True)
def _sgd_game(v, n, lrs, momentum, qbound, gamma, q, mg, mq, wa, wo):
    """Run ``len(lrs)`` SGD steps on one game, updating ``gamma, q, mg, mq`` in place.

    Objective: ``sum_S |I_and(S)| + |I_or(S)|`` with ``I_and = M (0.5 (v+q) + gamma)`` and
    ``I_or = L_or (0.5 (v+q) - gamma)``. Subgradients (``sign(0) = 0``):
    ``d/dgamma = M^T s_and - L_or^T s_or``, ``d/dq = 0.5 (M^T s_and + L_or^T s_or)``.
    Momentum as in torch: ``m = momentum * m + g; x -= lr * m``. ``q`` is clamped to
    ``[-qbound, qbound]`` after every step; ``qbound == 0`` disables it.
    """
    size = v.shape[0]
    neg = v.dtype.type(-1.0)
    learn_q = qbound > 0.0
    for t in range(lrs.shape[0]):
        lr = lrs[t]
        for k in range(size):
            base = 0.5 * (v[k] + q[k])
            wa[k] = base + gamma[k]
            wo[k] = base - gamma[k]
        _row(wa, n, neg, False)
        or_row(wo, n)
        for k in range(size):
            wa[k] = np.sign(wa[k])
            wo[k] = np.sign(wo[k])
        _row(wa, n, neg, True)  # M^T s_and
        or_transpose_row(wo, n)  # L_or^T s_or
        for k in range(size):
            mg[k] = momentum * mg[k] + (wa[k] - wo[k])
            gamma[k] -= lr * mg[k]
        if learn_q:
            for k in range(size):
                mq[k] = momentum * mq[k] + 0.5 * (wa[k] + wo[k])
                x = q[k] - lr * mq[k]
                q[k] = min(max(x, -qbound), qbound)


@njit(cache=True, parallel=True)
def sgd_rows(v, n, lrs, momentum, qbounds, gamma, q, mg, mq):
    """:func:`_sgd_game` on every row (one thread per game; rows are independent)."""
    for r in prange(v.shape[0]):
        wa = np.empty_like(v[r])
        wo = np.empty_like(v[r])
        _sgd_game(v[r], n, lrs, momentum, qbounds[r], gamma[r], q[r], mg[r], mq[r], wa, wo)
