"""`make bench` rows for the budgeted best/worst format search (psens.formats.search).

The oracle is the shipped format-space run (``data/runs/formats.nc``): each model's stored
per-item correctness under every format, replayed as the answer of a model call. For each
model, :func:`thompson_search` runs with a budget of 30 % of the calls of evaluating every
format on every item, over 10 seeds; a seed finds the best (worst) format when the format
it answers has the highest (lowest) accuracy over all items (ties count). Target: both found
in at least 9 of 10 seeds. ``ratio`` is all calls / calls used (target 1 / 0.3).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUN = ROOT / "data" / "runs" / "formats.nc"
FRACTION = 0.3
SEEDS = 10


def search_figures(correct: np.ndarray, *, fraction: float = FRACTION, seeds: int = SEEDS):
    """Hit rates of the best and the worst format, mean calls and posterior certainty."""
    from psens.formats.search import thompson_search

    acc = correct.mean(axis=0)
    budget = int(np.floor(fraction * correct.size))
    hits_best, hits_worst, calls, p_best, p_worst = [], [], [], [], []
    for seed in range(seeds):
        r = thompson_search(correct, budget, seed=seed)
        hits_best.append(acc[r.best] == acc.max())
        hits_worst.append(acc[r.worst] == acc.min())
        calls.append(r.calls)
        p_best.append(r.p_best)
        p_worst.append(r.p_worst)
    return {
        "best_hit_rate": float(np.mean(hits_best)),
        "worst_hit_rate": float(np.mean(hits_worst)),
        "mean_calls": float(np.mean(calls)),
        "all_calls": int(correct.size),
        "budget": budget,
        "p_best": float(np.mean(p_best)),
        "p_worst": float(np.mean(p_worst)),
        "n_best_ties": int((acc == acc.max()).sum()),
        "n_worst_ties": int((acc == acc.min()).sum()),
    }


def bench() -> list[dict]:
    import psens
    from psens.formats.analysis import correctness

    ds = psens.open_run(RUN).load()
    n_formats = ds.sizes["template"]
    rows = []
    for model, x in correctness(ds).items():
        t = time.perf_counter()
        fig = search_figures(x)
        wall = (time.perf_counter() - t) / SEEDS
        ratio = fig["all_calls"] / fig["mean_calls"]
        ok = (
            ratio >= 1 / FRACTION - 1e-9 and min(fig["best_hit_rate"], fig["worst_hit_rate"]) >= 0.9
        )
        rows.append(
            {
                "name": (
                    f"format search (Thompson; {model}, {n_formats} formats x {len(x)} "
                    f"items, budget {fig['budget']} of {fig['all_calls']} calls, {SEEDS} seeds)"
                ),
                "psens_seconds": wall,
                "baseline_seconds": wall * ratio,  # context only: calls scale the cost
                "ratio": ratio,
                "target": 1 / FRACTION,
                "ok": bool(ok),
                **fig,
            }
        )
    # context, no target: a synthetic space (labelled so) where the formats are far apart
    rng = np.random.default_rng(0)
    acc = np.array([0.1, 0.45, 0.5, 0.5, 0.55, 0.6, 0.5, 0.95])
    fig = search_figures((rng.random((60, len(acc))) < acc).astype(float))
    rows.append(
        {
            "name": "format search on SYNTHETIC data (8 formats x 60 items, accuracies 0.1-0.95)",
            "psens_seconds": 0.0,
            "baseline_seconds": 0.0,
            "ratio": fig["all_calls"] / fig["mean_calls"],
            "target": None,
            **fig,
        }
    )
    return rows


if __name__ == "__main__":
    for row in bench():
        print(row)
