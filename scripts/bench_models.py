"""Benchmark of the model layer: masked prompts per second, batched + cached vs naive.

SmolLM2-135M-Instruct (offline package), CPU, the first ARC-Challenge validation item
with n=8 variables (256 masks), template ips1, in float32 and — on CPUs with bfloat16
matrix units (AMX / AVX512-BF16) — in bfloat16, the precision the IPS paper ran in:

- psens: ``Scorer.value()`` — dedup, prefix tree over the masks with grouped tree
  attention (:mod:`psens.models.tree`), logits at the last position only;
- baseline: one prompt at a time, full logits over all positions (``method="naive"``),
  same model and dtype, timed on a subset of the masks (rates are compared, not totals).

Each row also gives the compute bound of the comparison (``flop_bound``: the naive
loop's FLOPs over the prefix tree's, from the distinct prefixes of the masked rows),
and the bfloat16 row its distance from float32 (``bf16_vs_fp32_*``) and the IPS between
the float32 and bfloat16 decompositions of the same prompt (``ips_bf16_vs_fp32``, 0 =
precision does not matter, 2 = every salient interaction differs): bfloat16 is faster
but too noisy for IPS, so psens scores in float32 by default.

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


def flop_bound(scorer, item, template: str, masks) -> float:
    """Naive-loop FLOPs over prefix-tree FLOPs for these masks (dense layers only).

    The tree computes each distinct prefix's last token once; the naive loop computes
    every token of every prompt and the LM head at every position.
    """
    enc = scorer.encode(item, template)
    rows = np.unique(np.asarray(scorer.masked_ids(enc, masks)), axis=0)
    differs = np.logical_or.accumulate(rows[1:] != rows[:-1], axis=1)
    positions = int((1 + differs.sum(axis=0)).sum())
    cfg = scorer.model.config
    head = cfg.vocab_size * cfg.hidden_size
    body = sum(p.numel() for p in scorer.model.parameters()) - head
    if not getattr(cfg, "tie_word_embeddings", False):
        body -= head
    naive = len(rows) * rows.shape[1] * (body + head)
    tree = positions * body + len(rows) * head
    return naive / tree


def bf16_matrix_units() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (AMX or AVX512-BF16)."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def same_prompt_ips(v_a: np.ndarray, v_b: np.ndarray) -> float:
    """IPS (paper eq. 3, tau = 0.1) between two value vectors of the same prompt:
    0 when the precision does not matter, up to 2."""
    from psens.interactions import and_or
    from psens.ips import ips

    res = and_or(np.stack([v_a, v_b]), "exact")
    return float(ips(res.I_and, res.I_or))


def bench_dtype(
    dtype: str, n: int = 8, naive_masks: int = 32, model: str = "smollm2-135m-instruct"
) -> tuple[dict, np.ndarray]:
    """Masked prompts/s of the batched cached scorer vs a naive loop, one dtype."""
    import torch

    from psens import datasets, models, prompts

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    scorer = models.load(model, device="cpu", dtype=dtype, n_max=n, progress=False)
    item = datasets.load("arc-challenge", split="validation", limit=1)[0]
    n_vars = len(prompts.variables(item, n_max=n))
    masks = np.arange(2**n_vars)
    # warm-up (allocator, kernels)
    scorer.value(item, "ips1", masks[-4:])
    scorer.value(item, "ips1", masks[-2:], method="naive")

    fast = []
    with _PeakRSS() as mem:
        for _ in range(2):
            t0 = time.perf_counter()
            v = scorer.value(item, "ips1", masks)
            fast.append(time.perf_counter() - t0)
    fast_s = min(fast)
    rng = np.random.default_rng(0)
    sub = np.sort(rng.choice(masks, size=min(naive_masks, len(masks)), replace=False))
    with _PeakRSS() as mem_naive:
        t0 = time.perf_counter()
        ref = scorer.value(item, "ips1", sub, method="naive")
        naive_s = time.perf_counter() - t0
    fast_rate = len(masks) / fast_s
    naive_rate = len(sub) / naive_s
    naive_total = len(masks) / naive_rate
    row = {
        "name": f"value {model} {dtype} n={n_vars} ({len(masks)} masks), "
        f"CPU x{torch.get_num_threads()}",
        "psens_seconds": round(fast_s, 3),
        "baseline_seconds": round(naive_total, 3),
        "ratio": round(naive_total / fast_s, 2),
        "target": TARGET,
        "flop_bound": round(flop_bound(scorer, item, "ips1", masks), 2),
        "masks_per_s": round(fast_rate, 2),
        "baseline_masks_per_s": round(naive_rate, 2),
        "peak_rss_mib": round(mem.peak / 2**20, 1),
        "peak_extra_mib": round((mem.peak - mem.start) / 2**20, 1),
        "baseline_peak_extra_mib": round((mem_naive.peak - mem_naive.start) / 2**20, 1),
        "max_abs_diff_vs_naive": float(np.abs(v[sub] - ref).max()),
        "tokens": len(scorer.encode(item, "ips1").ids),
        "tree_attention": scorer.tree is not None,
    }
    return row, v


def bench(n: int = 8, naive_masks: int = 32, model: str = "smollm2-135m-instruct") -> list[dict]:
    """One row per dtype: float32, and bfloat16 where the CPU has bfloat16 matrix units."""
    row32, v32 = bench_dtype("float32", n, naive_masks, model)
    rows = [row32]
    if bf16_matrix_units():
        row16, v16 = bench_dtype("bfloat16", n, naive_masks, model)
        row16["bf16_vs_fp32_max_abs"] = round(float(np.abs(v16 - v32).max()), 4)
        row16["bf16_vs_fp32_mean_abs"] = round(float(np.abs(v16 - v32).mean()), 4)
        row16["ips_bf16_vs_fp32"] = round(same_prompt_ips(v32, v16), 3)
        row16["target"] = None  # context only: too noisy for IPS, so not the target setting
        rows.append(row16)
    return rows


def main() -> None:
    for row in bench():
        if row["target"] is None:
            ok = "context, no target"
        else:
            ok = f"target {row['target']}x, " + (
                "ok" if row["ratio"] >= row["target"] else "BELOW TARGET"
            )
        print(
            f"{row['name']}: psens {row['psens_seconds']} s ({row['masks_per_s']} masks/s), "
            f"naive {row['baseline_seconds']} s ({row['baseline_masks_per_s']} masks/s), "
            f"ratio {row['ratio']}x ({ok}); "
            f"peak RSS {row['peak_rss_mib']} MiB (+{row['peak_extra_mib']} MiB while scoring); "
            f"max |diff| vs naive {row['max_abs_diff_vs_naive']:.2e}; "
            f"compute bound of the comparison {row['flop_bound']}x"
            + (
                f"; vs float32: max |dv| {row['bf16_vs_fp32_max_abs']}, "
                f"mean {row['bf16_vs_fp32_mean_abs']}, IPS(float32, bfloat16) of the same "
                f"prompt {row['ips_bf16_vs_fp32']} (of 2: too noisy for IPS)"
                if "bf16_vs_fp32_max_abs" in row
                else ""
            )
        )


if __name__ == "__main__":
    main()
