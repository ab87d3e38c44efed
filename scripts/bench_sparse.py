"""Benchmark: the sparse path at n = 32 (psens.ips.sparse), SmolLM2-135M-Instruct on CPU.

One AlpacaEval instruction (the first with exactly 32 content words), template ``open``,
budget B masked prompts. Reported (context rows, no target): the sparse path's queries/s
through the scorer and its total time (scoring + the lasso fit), and, side by side in the
same process, the speed of B *random* masks (what the sparse path queries: little shared
prefix) against B masks that enumerate the first words only (what the prefix tree of the
exact path is best at) — the ratio says how much the prefix tree loses on random masks.

Run: ``python scripts/bench_sparse.py`` (about 2–4 min on 2 cores).
"""

from __future__ import annotations

import os
import time

import numpy as np
from bench import cpu_model  # scripts/bench.py: the one CPU-model lookup

BUDGET = int(os.environ.get("PSENS_BENCH_SPARSE_BUDGET", "128"))


def bench() -> list[dict]:
    import psens
    from psens.ips.sparse import content_words, sparse_sample

    scorer = psens.models.load("smollm2-135m-instruct")
    scorer.progress = False

    def n_content(it) -> int:
        try:
            return len(content_words(it))
        except ValueError:  # more than 64 content words
            return -1

    item = next(it for it in psens.datasets.load("alpaca-eval") if n_content(it) == 32)
    words = content_words(item)
    n = len(words)
    scorer.value(item, "open", np.ones((1, n), bool), variables=words)  # warm-up, greedy target
    t0 = time.perf_counter()
    res = sparse_sample(scorer, item, ["open"], budget=BUDGET, words=words, seed=0)
    total = time.perf_counter() - t0
    model_s = res.attrs["model_seconds"]
    rng = np.random.default_rng(1)
    random_masks = rng.random((BUDGET, n)) < 0.5
    low = int(np.ceil(np.log2(BUDGET)))
    enum = np.ones((BUDGET, n), bool)
    enum[:, :low] = ((np.arange(BUDGET)[:, None] >> np.arange(low)) & 1).astype(bool)
    t = time.perf_counter()
    scorer.value(item, "open", random_masks, variables=words)
    rand_s = time.perf_counter() - t
    t = time.perf_counter()
    scorer.value(item, "open", enum, variables=words)
    enum_s = time.perf_counter() - t
    load = os.getloadavg()[0]
    return [
        {
            "name": f"sparse path, n = {n}, B = {BUDGET} (SmolLM2, lasso): total vs scoring",
            "psens_seconds": total,
            "baseline_seconds": model_s,
            "ratio": model_s / total,
            "target": None,
            "queries_per_s": res.attrs["scored"] / model_s,
            "total_per_game": total,
            "cpu": cpu_model(),
            "load": load,
        },
        {
            "name": f"random vs prefix-sharing masks, n = {n}, B = {BUDGET} (Scorer.value)",
            "psens_seconds": enum_s,
            "baseline_seconds": rand_s,
            "ratio": rand_s / enum_s,
            "target": None,
            "random_masks_per_s": BUDGET / rand_s,
            "prefix_masks_per_s": BUDGET / enum_s,
            "cpu": cpu_model(),
            "load": load,
        },
    ]


if __name__ == "__main__":
    print("CPU:", cpu_model(), "| load:", os.getloadavg())
    for row in bench():
        print(row)
