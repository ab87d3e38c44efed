"""Slow reference implementations, for tests and benchmarks only.

:func:`permutation_test_recompute` follows the published approach (paper appendix B.4–B.5):
for every permutation it re-forms the two groups of embeddings and recomputes all pairwise
distances with ``scipy.spatial.distance.cdist``. Unlike the published code it is seeded (it
takes the same permutation rows as the fast test, so both can be compared exactly) and uses
the +1 correction, so the two must agree to rounding.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.
"""

from __future__ import annotations

import numpy as np

from .distances import p_value, permutation_indices

__all__ = ["energy_recompute", "permutation_test_recompute"]

_SCIPY = {"cosine": "cosine", "l1": "cityblock", "l2": "euclidean"}


def energy_recompute(X: np.ndarray, Y: np.ndarray, metric: str = "cosine") -> float:
    """Energy distance with three ``cdist`` calls (appendix B.4)."""
    from scipy.spatial.distance import cdist

    name = _SCIPY[metric]
    n, m = len(X), len(Y)
    return float(
        2.0 / (n * m) * cdist(X, Y, name).sum()
        - cdist(X, X, name).sum() / n**2
        - cdist(Y, Y, name).sum() / m**2
    )


def _similarity_recompute(X: np.ndarray, Y: np.ndarray, metric: str, statistic: str) -> float:
    from scipy.spatial.distance import cdist
    from scipy.stats import wasserstein_distance

    name = _SCIPY[metric]
    n = len(X)
    iu = np.triu_indices(n, 1)
    within = cdist(X, X, name)[iu]
    cross = cdist(X, Y, name).ravel()
    if statistic == "mean":
        return float(abs(cross.mean() - within.mean()))
    return float(wasserstein_distance(within, cross))


def permutation_test_recompute(
    X: np.ndarray,
    Y: np.ndarray,
    permutations: int = 500,
    metric: str = "cosine",
    seed: int = 0,
    statistic: str = "energy",
    perms: np.ndarray | None = None,
) -> tuple[float, float, np.ndarray]:
    """Naive permutation test: distances recomputed for every permutation → ``(stat, p, null)``."""
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    Z = np.vstack([X, Y])
    n = len(X)
    if perms is None:
        perms = permutation_indices(len(Z), permutations, seed)

    def stat(A: np.ndarray, B: np.ndarray) -> float:
        if statistic == "energy":
            return energy_recompute(A, B, metric)
        return _similarity_recompute(A, B, metric, statistic)

    obs = stat(X, Y)
    null = np.array([stat(Z[row[:n]], Z[row[n:]]) for row in perms])
    atol = 1e-12 * max(1.0, float(np.abs(null).max(initial=0.0)))
    return obs, float(p_value(obs, null, atol=atol)), null
