"""Benchmark: the IPS entry points on a synthetic run (psens.ips), timed in one process.

A synthetic run (:func:`psens.synthetic.synthetic_run`: 3 models × 40 samples × 5 templates,
n = 6, 8 and 10 words, 2 shot settings) loaded in memory; each row times one entry point
(best of several repeats) against a baseline computed in the same process:

* ``sample_ips`` with 6 thresholds × 4 order bands in one call, against the 24 calls of
  ``ips(ds, τ, order=...)`` that give the same numbers (target: the one pass is at least 3×
  faster);
* ``ips(ds)`` against ``ips`` of the same interactions as arrays (context: what the
  block-wise reading of the run costs);
* ``interaction_classes(ds)`` against ``ips(ds)`` (context);
* ``sparse_ips_pairs`` of 60 samples × 5 templates of sparse AND-OR games with n = 32 words
  (about 300 listed subsets each), against dense ``ips_pairs`` of 60 samples with complete
  supports at n = 8 (context).

Run: ``python scripts/bench_ips.py`` (about a minute on 2 cores); ``make bench`` runs it too.
"""

from __future__ import annotations

import os

import numpy as np
from bench import best_time, cpu_model  # scripts/bench.py: the shared helpers

TAUS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
ORDERS = ("all", "low", "mid", "high")


def _run():
    from psens.synthetic import synthetic_run

    return synthetic_run(n_samples=40, n_vars=(6, 8, 10), shots=[0, 2], seed=0)


def _sparse_games(n_samples: int, n: int = 32, templates: int = 5, seed: int = 0):
    from psens.interactions.sparse import SparseAndOr, SparseInteractions

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_samples):
        shared = np.unique(rng.integers(1, 2**n, size=250, dtype=np.uint64))
        games = []
        for _ in range(templates):
            own = rng.integers(1, 2**n, size=50, dtype=np.uint64)
            keys = np.unique(np.concatenate([[0], shared[rng.random(shared.size) < 0.8], own]))
            or_keys = np.unique(rng.integers(0, 2**n, size=40, dtype=np.uint64))
            games.append(
                SparseAndOr(
                    SparseInteractions(n, keys, rng.laplace(size=keys.size)),
                    SparseInteractions(n, or_keys, rng.laplace(size=or_keys.size), "or"),
                )
            )
        out.append(games)
    return out


def _row(name: str, psens_s: float, base_s: float, target: float | None, **extra) -> dict:
    """A row of ``make bench``: ``ratio`` = baseline / psens time (higher is better); a row
    without a target is context."""
    ratio = base_s / psens_s
    row = {
        "name": name,
        "psens_seconds": psens_s,
        "baseline_seconds": base_s,
        "ratio": ratio,
        "target": target,
        **extra,
    }
    if target is not None:
        row["ok"] = bool(ratio >= target)
    return row


def bench() -> list[dict]:
    from psens.ips import interaction_classes, ips, ips_pairs, sample_ips
    from psens.ips.sparse import sparse_ips_pairs

    ds = _run()
    load = os.getloadavg()[0]
    extra = {"cpu": cpu_model(), "load": load}
    rows = []

    def one_pass():
        return sample_ips(ds, list(TAUS), orders=ORDERS)

    def one_by_one():
        return [ips(ds, t, order=None if o == "all" else o) for t in TAUS for o in ORDERS]

    rows.append(
        _row(
            f"sample_ips {len(TAUS)} τ × {len(ORDERS)} orders vs one ips(ds) call each",
            best_time(one_pass, 3),
            best_time(one_by_one, 1),
            3.0,
            **extra,
        )
    )
    a = ds["I_and"].transpose(..., "template", "subset").values
    o = ds["I_or"].transpose(..., "template", "subset").values
    rows.append(
        _row(
            "ips(ds) vs ips of the same arrays",
            best_time(lambda: ips(ds, 0.1), 5),
            best_time(lambda: ips(a, o, 0.1), 5),
            None,
            **extra,
        )
    )
    rows.append(
        _row(
            "interaction_classes(ds) vs ips(ds)",
            best_time(lambda: interaction_classes(ds, 0.1), 5),
            best_time(lambda: ips(ds, 0.1), 5),
            None,
            **extra,
        )
    )
    sparse = _sparse_games(60)
    rng = np.random.default_rng(1)
    dense_a, dense_o = rng.laplace(size=(2, 60, 5, 2**8))
    rows.append(
        _row(
            "sparse_ips_pairs 60 samples, n = 32 vs dense ips_pairs 60 samples, n = 8",
            best_time(lambda: [sparse_ips_pairs(g, 0.1) for g in sparse], 5),
            best_time(lambda: ips_pairs(dense_a, dense_o, 0.1), 5),
            None,
            **extra,
        )
    )
    return rows


if __name__ == "__main__":
    print("CPU:", cpu_model(), "| load:", os.getloadavg())
    for row in bench():
        print(
            f"{row['name']}: psens {row['psens_seconds'] * 1e3:.1f} ms, "
            f"baseline {row['baseline_seconds'] * 1e3:.1f} ms, ratio {row['ratio']:.2f}"
        )
