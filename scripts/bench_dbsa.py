"""Benchmark: DBSA permutation test, psens vs the published approach.

The published code (paper appendix B.5) shuffles the pooled embeddings and recomputes all
pairwise distances (three ``cdist`` calls) for every permutation. psens computes the pooled
distance matrix once and evaluates all permutations with one batched matrix product.
Both run here in the same process on the same data: n = m = 40 responses, 384-d embeddings
(the size of MiniLM), P = 500 permutations, cosine distance. Target: ratio ≥ 50.

Run: ``python scripts/bench_dbsa.py``.
"""

from __future__ import annotations

import time

import numpy as np


def baseline_permutation_test(
    X: np.ndarray, Y: np.ndarray, permutations: int, seed: int
) -> tuple[float, float]:
    """The published approach: reshuffle the pooled embeddings, recompute every distance."""
    from scipy.spatial.distance import cdist

    def energy(A: np.ndarray, B: np.ndarray) -> float:
        n, m = len(A), len(B)
        return (
            2.0 / (n * m) * cdist(A, B, "cosine").sum()
            - cdist(A, A, "cosine").sum() / n**2
            - cdist(B, B, "cosine").sum() / m**2
        )

    rng = np.random.default_rng(seed)
    combined = np.vstack([X, Y])
    n = len(X)
    observed = energy(X, Y)
    null = []
    for _ in range(permutations):
        rng.shuffle(combined)
        null.append(energy(combined[:n], combined[n:]))
    k = int(np.sum(np.asarray(null) >= observed))
    return observed, (k + 1) / (permutations + 1)


def _best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench() -> list[dict]:
    """Time both implementations.

    One dict per case: name, psens_seconds, baseline_seconds, ratio, target.
    """
    from psens.dbsa import permutation_test

    rng = np.random.default_rng(0)
    n = m = 40
    d = 384
    P = 500
    X = rng.normal(size=(n, d))
    Y = rng.normal(size=(m, d)) + 0.05
    permutation_test(X, Y, permutations=P, metric="cosine", seed=0)  # warm-up
    fast = _best_of(lambda: permutation_test(X, Y, permutations=P, metric="cosine", seed=0), 7)
    slow = _best_of(lambda: baseline_permutation_test(X, Y, P, 0), 2)
    e_fast, _ = permutation_test(X, Y, permutations=P, metric="cosine", seed=0)
    e_slow, _ = baseline_permutation_test(X, Y, P, 0)
    assert abs(e_fast - e_slow) < 1e-9, (e_fast, e_slow)
    return [
        {
            "name": f"dbsa permutation test (n=m={n}, d={d}, P={P}, cosine)",
            "psens_seconds": fast,
            "baseline_seconds": slow,
            "ratio": slow / fast,
            "target": 50.0,
        }
    ]


if __name__ == "__main__":
    for r in bench():
        print(
            f"{r['name']}: psens {r['psens_seconds'] * 1e3:.2f} ms, baseline "
            f"{r['baseline_seconds'] * 1e3:.1f} ms, ratio {r['ratio']:.0f}x "
            f"(target >= {r['target']:.0f}x)"
        )
