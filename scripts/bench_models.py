"""Benchmark of the model layer: masked prompts per second, batched + cached vs naive.

SmolLM2-135M-Instruct (offline package), CPU, float32, the first ARC-Challenge
validation item with n=8 variables (256 masks), template ips1.

- psens: ``Scorer.value(method="trie")`` — dedup, prefix tree over the masks with the
  key/value cache shared across each level's batch, logits at the last position only;
- baseline: one prompt at a time, full logits over all positions (``method="naive"``),
  timed on a subset of the masks (rates are compared, not totals).

Run ``python scripts/bench_models.py``; ``bench()`` returns the rows.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

TARGET = 8.0


class _PeakRSS:
    """Sample the process's resident memory in a thread; report the peak (MiB)."""

    def __init__(self, every: float = 0.01) -> None:
        import psutil

        self._proc = psutil.Process(os.getpid())
        self._every = every
        self.peak = self.start = self._proc.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(self._every)

    def __enter__(self) -> _PeakRSS:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def bench(n: int = 8, naive_masks: int = 32, model: str = "smollm2-135m-instruct") -> list[dict]:
    """Masked prompts/s of the batched cached scorer vs a naive loop (CPU, float32)."""
    import torch

    from psens import datasets, models, prompts

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    scorer = models.load(model, device="cpu", dtype="float32", n_max=n, progress=False)
    item = datasets.load("arc-challenge", split="validation", limit=1)[0]
    n_vars = len(prompts.variables(item, n_max=n))
    masks = np.arange(2**n_vars)
    # warm-up (allocator, kernels)
    scorer.value(item, "ips1", masks[-4:])
    scorer.value(item, "ips1", masks[-2:], method="naive")

    with _PeakRSS() as mem:
        t0 = time.perf_counter()
        v = scorer.value(item, "ips1", masks)
        fast_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    sub = np.sort(rng.choice(masks, size=min(naive_masks, len(masks)), replace=False))
    with _PeakRSS() as mem_naive:
        t0 = time.perf_counter()
        ref = scorer.value(item, "ips1", sub, method="naive")
        naive_s = time.perf_counter() - t0
    err = float(np.abs(v[sub] - ref).max())
    fast_rate = len(masks) / fast_s
    threads = torch.get_num_threads()
    naive_rate = len(sub) / naive_s
    naive_total = len(masks) / naive_rate
    return [
        {
            "name": f"value {model} n={n_vars} ({len(masks)} masks), CPU x{threads}",
            "psens_seconds": round(fast_s, 3),
            "baseline_seconds": round(naive_total, 3),
            "ratio": round(naive_total / fast_s, 2),
            "target": TARGET,
            "masks_per_s": round(fast_rate, 2),
            "baseline_masks_per_s": round(naive_rate, 2),
            "peak_rss_mib": round(mem.peak / 2**20, 1),
            "peak_extra_mib": round((mem.peak - mem.start) / 2**20, 1),
            "baseline_peak_extra_mib": round((mem_naive.peak - mem_naive.start) / 2**20, 1),
            "max_abs_diff": err,
            "tokens": len(scorer.encode(item, "ips1").ids),
        }
    ]


def main() -> None:
    for row in bench():
        ok = "ok" if row["ratio"] >= row["target"] else "BELOW TARGET"
        print(
            f"{row['name']}: psens {row['psens_seconds']} s ({row['masks_per_s']} masks/s), "
            f"naive {row['baseline_seconds']} s ({row['baseline_masks_per_s']} masks/s), "
            f"ratio {row['ratio']}x (target {row['target']}x, {ok}); "
            f"peak RSS {row['peak_rss_mib']} MiB (+{row['peak_extra_mib']} MiB while scoring); "
            f"max |diff| {row['max_abs_diff']:.2e}"
        )


if __name__ == "__main__":
    main()
