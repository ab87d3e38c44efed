"""GPU benchmark: masked prompts per second of a Llama-3-8B-shaped model against the FLOP bound.

A random-weight model with Llama-3-8B's shape (``transformers.LlamaConfig``: 32 layers, width
4096, 32 heads / 8 key-value heads, MLP 14336, vocabulary 128256; nothing is downloaded) is
built on the first CUDA device at float32, bfloat16 and float16, and scores batches of
random-token prompts of 72 tokens (the mean masked-prompt length of the shipped ARC config)
over a batch sweep, logits at the last position only, as psens scores. Each row gives the
measured rate and the FLOP bound :math:`R / (2 P T)` with :math:`P` the model's parameters,
:math:`T` the tokens per prompt and :math:`R` the reference throughput of
:data:`psens.plan.THROUGHPUT` (an NVIDIA A100's dense peak), so ``ratio`` = measured / bound
is the fraction of that peak the device reaches. A dtype whose weights do not fit the free
memory is reported as such. Without a GPU it prints "no GPU: skipped" and exits 0.

Run ``python scripts/bench_gpu.py``; ``bench()`` returns the rows (none without a GPU), so
``make bench`` (``scripts/bench.py``) lists them with the other benchmarks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOKENS = 72
BATCHES = (1, 8, 32, 128)
DTYPES = ("float32", "bfloat16", "float16")


def llama3_8b_config():
    """Llama-3-8B's shape as a ``LlamaConfig`` (random weights; no download)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=8192,
        rope_theta=500000.0,
    )


def _rate(model, batch: int, repeats: int = 3) -> float:
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, TOKENS), device="cuda")
    with torch.inference_mode():
        model(input_ids=ids, logits_to_keep=1)  # warm-up
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            model(input_ids=ids, logits_to_keep=1)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t)
    return batch / best


def bench(notes: list[str] | None = None) -> list[dict]:
    """The measured rows; a dtype or batch that does not fit is added to ``notes``."""
    import torch

    if not torch.cuda.is_available():
        return []
    from transformers import LlamaForCausalLM

    from psens.plan import THROUGHPUT

    name = torch.cuda.get_device_name(0)
    rows = []
    for dtype in DTYPES:
        torch.cuda.empty_cache()
        params = 8.03e9
        free, _ = torch.cuda.mem_get_info(0)
        need = params * (4 if dtype == "float32" else 2)
        if need > 0.9 * free:
            if notes is not None:
                notes.append(f"gpu_llama3_8b_{dtype}: does not fit ({need / 1e9:.0f} GB)")
            continue
        with torch.device("cuda"):
            model = LlamaForCausalLM(llama3_8b_config()).to(getattr(torch, dtype)).eval()
        params = sum(p.numel() for p in model.parameters())
        bound = THROUGHPUT["cuda"][dtype] / (2.0 * params * TOKENS)
        for batch in BATCHES:
            try:
                rate = _rate(model, batch)
            except torch.cuda.OutOfMemoryError:
                if notes is not None:
                    notes.append(f"gpu_llama3_8b_{dtype}_b{batch}: out of memory")
                torch.cuda.empty_cache()
                break
            rows.append(
                {
                    "name": f"gpu_llama3_8b_{dtype}_b{batch}",
                    "device": name,
                    "prompts_per_s": rate,
                    "flop_bound_prompts_per_s": bound,
                    "psens_seconds": batch / rate,  # one batch, measured
                    "baseline_seconds": batch / bound,  # one batch at the FLOP bound
                    "ratio": rate / bound,
                    "target": None,
                }
            )
        del model
    return rows


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("no GPU: skipped")
        return 0
    print(f"device: {torch.cuda.get_device_name(0)}")
    notes: list[str] = []
    for row in bench(notes):
        print(
            f"  {row['name']}: {row['prompts_per_s']:.1f} masked prompts/s, FLOP bound "
            f"{row['flop_bound_prompts_per_s']:.1f} ({100 * row['ratio']:.0f} % of it)"
        )
    for note in notes:
        print(f"  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
