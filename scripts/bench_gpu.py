r"""GPU measurement of psens's scorer, end to end, in one process (under 8 minutes on an H200).

Measured, in this order, each in its own slice of a time budget:

* **peak**: the device's dense bfloat16 rate, from a large matrix product
  (:math:`2 s^3` FLOP per :math:`s \times s` product; no datasheet number);
* **check**: the device's values of :meth:`psens.models.Scorer.value` against the CPU's on
  a small random model: float32 within 1e-4 (prefix tree and one prompt at a time), and the
  bfloat16 values' distance from the CPU's float32 ones against the bfloat16 noise floor
  measured on the CPU (mean :math:`|v_\mathrm{bf16} - v_\mathrm{fp32}|`);
* **scorer**, for a random-weight model of Llama-3-8B's shape (32 layers, width 4096, 32/8
  heads, MLP 14336) and one of Llama-3.2-1B's (16 layers, width 2048, 32/8 heads, MLP 8192,
  tied embeddings), both with the SmolLM2 tokenizer's vocabulary, in bfloat16, on the items
  of the shipped ARC config (``data/runs/arc.toml``) at 0 shots, its 5 templates and
  n = 10 (1,024 masks per item and template): masked prompts per second and tokens computed
  per second of the prefix tree (``method="trie"``), the shared prefix (``"prefix"``) and
  one prompt at a time (``"naive"``), at the batch ``batch_size = "auto"`` picks
  (:func:`psens.runner.resolve_batch`, through :func:`psens.plan.make_plan`), the peak
  memory, and the achieved rate

  .. math:: R = \frac{2\,N\,T}{t}

  with :math:`N` the non-embedding parameters (:func:`psens.models.hardware.forward_params`),
  :math:`T` the tokens the scorer computed (counted at the embedding layer: shared prefixes
  once) and :math:`t` the wall time, as a fraction of the measured peak;
* **plan**: ``psens plan``'s predicted time of that run (:func:`psens.plan.make_plan`,
  :func:`psens.runner.model_seconds`: the reference throughput plus the loads) against the
  measured time of the prefix tree, projected to the whole run when only part of it fitted
  the budget;
* **cloze**: ``Scorer.choice_logprobs`` timed like a method, when psens has it (a marked
  hook: a row saying it is missing otherwise).

Each method scores whole (item, template) pairs in a fixed shuffled order (the naive method
a fixed number of masks per pair) until its slice of the budget is spent, after one warm-up
call; rates are measured on what ran and the run's time projected from them.

The items, their variables and the tokenizer come from a folder written beforehand on a
machine with psens's offline packages (``--prepare``, default ``scripts/gpu_assets/``, ignored
by git), so the GPU machine needs only torch, transformers, numpy, numba, scipy, pandas and
xarray (``import psens`` imports no zarr, dask or h5netcdf; the folder also carries the
stop-words list psens picks variables with, so ``psens plan`` sees the same words there).

Usage (docs/performance.md, "GPU measurement: how to run")::

    python scripts/bench_gpu.py --prepare              # here: writes scripts/gpu_assets/
    python scripts/bench_gpu.py --out bench_gpu.json   # on the GPU machine (one command)
    python scripts/bench_gpu.py --dry-run              # the whole script, tiny, on the CPU

Without a GPU (and without ``--dry-run`` or ``--prepare``) it prints "no GPU: skipped" and
exits 0. ``bench()`` returns the scorer rows in ``make bench``'s format (none without a GPU).

References
----------
Kaplan, J., McCandlish, S., Henighan, T., Brown, T. B., Chess, B., Child, R., Gray, S.,
Radford, A., Wu, J. and Amodei, D. Scaling laws for neural language models.
arXiv:2001.08361 (2020), section 2.1 — the :math:`2N` FLOP per token of a forward pass.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import shutil
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "scripts" / "gpu_assets"
RUN_CONFIG = ROOT / "data" / "runs" / "arc.toml"
#: The tokenizer (and mask token, from the model table) the random models use.
TOKENIZER = "smollm2-135m-instruct"
#: The run measured: the shipped ARC config's items and templates at 0 shots, n = 10,
#: bfloat16, no noise floor, the batch ``"auto"`` picks.
RUN = {"n_vars": 10, "shots": [0], "noise_floor": False, "dtype": "bfloat16"}
#: Whole-script budget in seconds (process start to the JSON), under the 8 minutes asked.
BUDGET = 420.0

#: psens's names of the scoring methods (:meth:`psens.models.Scorer.value`) and the cloze hook.
METHODS = {"trie": "prefix tree", "prefix": "shared prefix", "naive": "one at a time"}
CLOZE = "cloze"

#: Llama shapes (``transformers.LlamaConfig``), the vocabulary is the tokenizer's.
SHAPES: dict[str, dict[str, Any]] = {
    "llama3-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
    },
    "llama3.2-1b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    # the GPU-vs-CPU check: small enough for the CPU reference
    "check": {
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "initializer_range": 0.2,
    },
}
#: The same roles at a tiny shape (``--dry-run``).
TINY_SHAPES: dict[str, dict[str, Any]] = {
    "llama3-8b": {
        "hidden_size": 64,
        "intermediate_size": 224,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "max_position_embeddings": 2048,
    },
    "llama3.2-1b": {
        "hidden_size": 32,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": True,
    },
    "check": {**SHAPES["check"], "hidden_size": 32, "intermediate_size": 64},
}


class Settings:
    """What one invocation measures: the GPU settings, or the tiny ones of ``--dry-run``."""

    def __init__(self, dry_run: bool, budget: float | None = None):
        self.dry_run = dry_run
        self.shapes = TINY_SHAPES if dry_run else SHAPES
        self.budget = (1e6 if dry_run else BUDGET) if budget is None else budget
        self.n_vars = 3 if dry_run else RUN["n_vars"]
        self.items = 2 if dry_run else None  # None: every item of the config
        self.peak_size, self.peak_repeats = (256, 3) if dry_run else (8192, 50)
        self.naive_masks = 2 if dry_run else 64  # masks per pair, one prompt at a time
        self.check_masks = 8 if dry_run else 128
        # seconds per method and model shape (the dry run measures every pair)
        self.slices = {
            "llama3-8b": {"trie": 60.0, "prefix": 40.0, "naive": 25.0, CLOZE: 20.0},
            "llama3.2-1b": {"trie": 25.0, "prefix": 20.0, "naive": 15.0, CLOZE: 10.0},
        }
        if dry_run:
            self.slices = {k: dict.fromkeys(v, math.inf) for k, v in self.slices.items()}


# ----------------------------------------------------------------------------- rows

COMMON_KEYS = ("name", "kind", "device", "dtype", "note", "error")
#: The keys of each kind of row (besides :data:`COMMON_KEYS`); every row has all of its own.
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "peak": ("size", "repeats", "seconds", "tflops"),
    "check": (
        "model",
        "masks",
        "fp32_max_diff",
        "fp32_tol",
        "methods_max_diff",
        "bf16_mean_diff",
        "bf16_floor",
        "bf16_ratio",
        "bf16_max_ratio",
        "passed",
    ),
    "scorer": (
        "model",
        "method",
        "batch",
        "pairs",
        "pairs_total",
        "prompts",
        "prompts_total",
        "seconds",
        "prompts_per_s",
        "tokens",
        "tokens_per_s",
        "tokens_per_prompt",
        "plan_tokens_per_prompt",
        "forward_params",
        "tflops",
        "fraction_of_peak",
        "peak_memory_gb",
        "run_seconds",
        "projected",
    ),
    "plan": (
        "model",
        "batch",
        "plan_seconds",
        "plan_load_seconds",
        "plan_compute_seconds",
        "reference_tflops",
        "measured_seconds",
        "projected",
        "compute_ratio",
    ),
}


def row(kind: str, name: str, **values: Any) -> dict[str, Any]:
    """A row of ``kind`` with every key of :data:`ROW_KEYS` (None where not measured)."""
    keys = (*COMMON_KEYS, *ROW_KEYS[kind])
    unknown = set(values) - set(keys)
    if unknown:
        raise KeyError(f"{kind} rows have no keys {sorted(unknown)}")
    out = dict.fromkeys(keys)
    out.update(name=name, kind=kind, **values)
    return out


# ----------------------------------------------------------------------------- assets


def write_assets(folder: Path, tokenizer, plan, mask_model: str = TOKENIZER) -> Path:
    """Write what the GPU machine needs to rebuild ``plan`` offline into ``folder``.

    ``items.jsonl`` (the plan's items in psens's own columns), ``manifest.json`` (their ids,
    the config's dataset and split, each item's variables, the tokenizer's model-table name
    for the mask token), ``tokenizer/`` (``save_pretrained``) and, when the ``stop-words``
    package is installed, a copy of it under ``site/`` (its licence inside), so that the
    variables picked there are the ones picked here.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "items.jsonl", "w") as f:
        for it in plan.items:
            rec = {
                "id": it.id,
                "question": it.question,
                "options": [list(o) for o in it.options],
                "answer": it.answer,
                "context": it.context,
                "metadata": {k: v for k, v in it.metadata.items() if _jsonable(v)},
            }
            f.write(json.dumps(rec) + "\n")
    manifest = {
        "dataset": plan.cfg.dataset,
        "split": plan.cfg.split,
        "ids": [it.id for it in plan.items],
        "n_vars": plan.cfg.n_vars,
        "seed": plan.cfg.seed,
        "variables": [[[v.text, v.field, v.start, v.end] for v in vs] for vs in plan.variables],
        "mask_model": mask_model,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    tokenizer.save_pretrained(folder / "tokenizer")
    _copy_stop_words(folder / "site")
    return folder


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _copy_stop_words(site: Path) -> None:
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("stop_words")
    if spec is None or not spec.submodule_search_locations:
        return
    src = Path(next(iter(spec.submodule_search_locations)))
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(src, site / "stop_words", ignore=shutil.ignore_patterns("__pycache__"))
    dist = importlib.metadata.distribution("stop-words")
    for name in dist.files or ():
        if Path(str(name)).name.upper().startswith(("LICENSE", "AUTHORS")):
            shutil.copy(Path(str(dist.locate_file(name))), site / "stop_words")


def run_config(assets: Path, settings: Settings, model_folder: Path, device: str) -> dict:
    """The measured run's config: ``data/runs/arc.toml`` with :data:`RUN`, the assets' items
    (``dataset_path``, the ids), one model folder, ``device`` and ``batch_size = "auto"``."""
    manifest = json.loads((assets / "manifest.json").read_text())
    cfg = tomllib.loads(RUN_CONFIG.read_text())
    ids = manifest["ids"] if settings.items is None else manifest["ids"][: settings.items]
    cfg.update(RUN)
    cfg.update(
        models=[str(model_folder)],
        dataset_path=str(assets / "items.jsonl"),
        samples=ids,
        n_vars=settings.n_vars,
        device=device,
        batch_size="auto",
        store=str(model_folder / "unused.zarr"),
        threads=None,
    )
    return {k: v for k, v in cfg.items() if v is not None}


def prepare(folder: Path = ASSETS) -> Path:
    """``--prepare``: the shipped ARC config's items (:data:`RUN`) and the SmolLM2 tokenizer,
    from psens's offline packages, into ``folder``."""
    from psens.config import RunConfig
    from psens.models.served.entry import load_tokenizer
    from psens.runner import Plan

    cfg = tomllib.loads(RUN_CONFIG.read_text())
    cfg.update(RUN, models=[TOKENIZER])
    plan = Plan(RunConfig.from_dict(cfg))
    tok = load_tokenizer(TOKENIZER)[0]
    return write_assets(folder, tok, plan)


def _check_assets(assets: Path) -> None:
    from psens._validation import fail

    if not (assets / "manifest.json").exists():
        fail(
            "scripts/bench_gpu.py",
            f"{assets} holds no prepared items and tokenizer (manifest.json)",
            "Run `python scripts/bench_gpu.py --prepare` on a machine with psens's offline "
            "packages and copy the folder along",
            FileNotFoundError,
        )


# ----------------------------------------------------------------------------- measuring


class Clock:
    """The whole script's budget: seconds left since ``start``."""

    def __init__(self, budget: float, start: float | None = None):
        self.budget = budget
        self.start = time.perf_counter() if start is None else start

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.start)


def _sync(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def peak_row(device: str, size: int, repeats: int) -> dict:
    """The dense bfloat16 rate of one ``size`` x ``size`` matrix product, best of two runs of
    ``repeats`` products (after three warm-ups): :math:`2 s^3 r / t`."""
    import torch

    torch.manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    _sync(device)
    best = math.inf
    for _ in range(2):
        t = time.perf_counter()
        for _ in range(repeats):
            a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t)
    return row(
        "peak",
        "peak_bf16_matmul",
        device=_device_name(device),
        dtype="bfloat16",
        size=size,
        repeats=repeats,
        seconds=best,
        tflops=2.0 * size**3 * repeats / best / 1e12,
    )


def _device_name(device: str) -> str:
    import torch

    from psens.models.hardware import cpu_name

    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_name()


def build_model(shape: dict, vocab: int, dtype: str, device: str, seed: int = 0):
    """A random-weight ``LlamaForCausalLM`` of ``shape``, built on ``device`` at ``dtype``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, **shape)
    with torch.device(device):
        model = LlamaForCausalLM._from_config(
            cfg, dtype=getattr(torch, dtype), attn_implementation="sdpa"
        )
    if any(p.device.type != torch.device(device).type for p in model.parameters()):
        model = model.to(device)  # a transformers that builds elsewhere first
    return model.eval()


class TokenCounter:
    """Tokens the model computes: the input ids reaching its embedding layer (every path of
    the scorer embeds each computed token once)."""

    def __init__(self, model):
        self.tokens = 0
        self._hook = model.get_input_embeddings().register_forward_hook(self._count)

    def _count(self, module, args, output) -> None:
        self.tokens += int(args[0].numel())

    def remove(self) -> None:
        self._hook.remove()


def _pairs(plan, seed: int = 0) -> list[tuple[int, str]]:
    """The run's (sample, template) pairs in a fixed shuffled order (a budget cut keeps a
    spread of items and templates)."""
    import numpy as np

    pairs = [(s, t) for s in range(len(plan.items)) for t in plan.templates]
    order = np.random.default_rng(seed).permutation(len(pairs))
    return [pairs[int(i)] for i in order]


def measure(
    call: Callable[[Any, str, Any, list], Any],
    plan,
    counter: TokenCounter,
    device: str,
    slice_s: float,
    clock: Clock,
    masks_per_pair: int | None = None,
) -> dict[str, Any]:
    """Time ``call(item, template, masks, variables)`` over the run's pairs until ``slice_s``
    (or the clock) would be exceeded by one more call (at least one call after the warm-up).

    ``masks_per_pair``: the first that many masks of each pair (default all ``2**n``).
    Returns the prompts, pairs, seconds, tokens and peak memory of the timed calls.
    """
    import numpy as np
    import torch

    def masks_of(s: int) -> np.ndarray:
        total = 1 << len(plan.variables[s])
        return np.arange(total if masks_per_pair is None else min(total, masks_per_pair))

    order = _pairs(plan)
    s0, t0 = order[0]
    warm = masks_of(s0)[: max(2, min(64, masks_per_pair or 64))]
    call(plan.items[s0], t0, warm, plan.variables[s0])
    _sync(device)
    cuda = str(device).startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats(torch.device(device))
    counter.tokens = 0
    prompts = pairs = 0
    seconds = last = 0.0
    for s, t in order:
        if pairs and (seconds + last > slice_s or clock.left() < last):
            break
        masks = masks_of(s)
        start = time.perf_counter()
        call(plan.items[s], t, masks, plan.variables[s])
        _sync(device)
        last = time.perf_counter() - start
        seconds += last
        prompts += len(masks)
        pairs += 1
    peak = torch.cuda.max_memory_allocated(torch.device(device)) / 1e9 if cuda else None
    return {
        "prompts": prompts,
        "pairs": pairs,
        "seconds": seconds,
        "tokens": counter.tokens,
        "peak_memory_gb": peak,
    }


def scorer_row(
    model_name: str,
    method: str,
    measured: dict,
    plan,
    spec,
    batch: int,
    peak_tflops: float | None,
    device: str,
    masks_per_pair: int | None,
) -> dict:
    """A scorer row: rates, tokens, achieved TFLOP/s and its share of the measured peak, the
    plan's tokens per prompt (prefix tree: its :math:`W / 2^n`; one at a time: :math:`L`) and
    the whole run's time at the measured rate of masked prompts."""
    from psens.models.hardware import forward_params
    from psens.runner import prompt_work

    n_params = forward_params(spec)
    seconds, prompts, tokens = measured["seconds"], measured["prompts"], measured["tokens"]
    total_prompts = plan.forward_passes()
    plan_tokens = None
    if method in ("trie", "naive"):
        tree, full = prompt_work(plan)
        per = tree.sum() / total_prompts if method == "trie" else float(full.mean())
        plan_tokens = float(per)
    tflops = 2.0 * n_params * tokens / seconds / 1e12 if seconds > 0 and n_params else None
    complete = masks_per_pair is None and measured["pairs"] == len(plan.items) * len(plan.templates)
    return row(
        "scorer",
        f"scorer_{model_name}_{method}",
        device=_device_name(device),
        dtype=RUN["dtype"],
        model=model_name,
        method=method,
        batch=batch,
        pairs=measured["pairs"],
        pairs_total=len(plan.items) * len(plan.templates),
        prompts=prompts,
        prompts_total=total_prompts,
        seconds=seconds,
        prompts_per_s=prompts / seconds if seconds > 0 else None,
        tokens=tokens,
        tokens_per_s=tokens / seconds if seconds > 0 else None,
        tokens_per_prompt=tokens / prompts if prompts else None,
        plan_tokens_per_prompt=plan_tokens,
        forward_params=n_params,
        tflops=tflops,
        fraction_of_peak=tflops / peak_tflops if tflops and peak_tflops else None,
        peak_memory_gb=measured["peak_memory_gb"],
        run_seconds=seconds * total_prompts / prompts if prompts else None,
        projected=not complete,
        note=METHODS.get(method, "Scorer.choice_logprobs"),
    )


def plan_row(model_name: str, rp, plan, spec, trie: dict | None, device: str) -> dict:
    """``psens plan``'s time of the run (``rp``: :func:`psens.plan.make_plan`) against the
    prefix tree's measured (or projected) time; the plan's loads apart (the model here is
    built, not loaded): :func:`psens.runner.model_seconds` at an infinite throughput."""
    from psens.runner import model_seconds

    predicted = rp.models[0].seconds
    load = model_seconds(plan, spec, measured=math.inf)
    compute = predicted - load
    measured = trie["run_seconds"] if trie else None
    return row(
        "plan",
        f"plan_{model_name}",
        device=_device_name(device),
        dtype=rp.dtype,
        model=model_name,
        batch=rp.batch,
        plan_seconds=predicted,
        plan_load_seconds=load,
        plan_compute_seconds=compute,
        reference_tflops=rp.throughput / 1e12,
        measured_seconds=measured,
        projected=trie["projected"] if trie else None,
        compute_ratio=compute / measured if measured else None,
    )


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def scorer_rows(
    model_name: str,
    settings: Settings,
    assets: Path,
    tokenizer,
    mask,
    device: str,
    peak_tflops: float | None,
    clock: Clock,
    reserve: float,
    workdir: Path,
) -> list[dict]:
    """The scorer rows of one model shape (each method, the cloze hook) and its plan row."""
    import torch
    from transformers import LlamaConfig

    from psens.config import RunConfig
    from psens.models import Scorer
    from psens.plan import make_plan
    from psens.runner import Plan

    shape = settings.shapes[model_name]
    folder = workdir / model_name
    folder.mkdir(parents=True, exist_ok=True)
    LlamaConfig(vocab_size=len(tokenizer), **shape).save_pretrained(folder)
    cfg = run_config(assets, settings, folder, device)
    rp = make_plan(cfg, offline=True)  # before the model takes its memory, as a run does
    plan = Plan(RunConfig.from_dict(cfg))
    _pin_variables(plan, assets)
    spec = plan.cfg.model_specs[0]
    rows: list[dict] = []
    begin = time.perf_counter()
    model = build_model(shape, len(tokenizer), RUN["dtype"], device)
    _sync(device)
    built = time.perf_counter() - begin
    counter = TokenCounter(model)
    scorer = Scorer(
        model,
        tokenizer,
        name=model_name,
        mask=mask,
        n_max=plan.cfg.n_vars,
        seed=plan.cfg.seed,
        batch_size=rp.batch,
        progress=False,
    )
    calls: dict[str, Callable | None] = {
        m: (
            lambda item, t, masks, vs, m=m: scorer.value(
                item, t, masks, variables=vs, method=m, progress=False
            )
        )
        for m in METHODS
    }
    # ---- CLOZE HOOK: the cloze path is timed like a method once psens's Scorer has
    # ``choice_logprobs`` (per-option log-probabilities of the masked prompts); until then
    # its row says it is missing.
    cloze = getattr(Scorer, "choice_logprobs", None)
    calls[CLOZE] = (
        None
        if cloze is None
        else (lambda item, t, masks, vs: scorer.choice_logprobs(item, t, masks, variables=vs))
    )
    trie = None
    slices = settings.slices[model_name]
    for method, call in calls.items():
        per_pair = settings.naive_masks if method == "naive" else None
        base = dict(model=model_name, method=method, device=_device_name(device))
        if call is None:
            rows.append(
                row(
                    "scorer",
                    f"scorer_{model_name}_{method}",
                    dtype=RUN["dtype"],
                    note="skipped: psens.models.Scorer has no choice_logprobs (the cloze path) yet",
                    **base,
                )
            )
            continue
        slice_s = min(slices[method], max(0.0, clock.left() - reserve))
        if slice_s <= 0:
            rows.append(
                row(
                    "scorer",
                    f"scorer_{model_name}_{method}",
                    dtype=RUN["dtype"],
                    note="skipped: time budget spent",
                    **base,
                )
            )
            continue
        try:
            got = measure(call, plan, counter, device, slice_s, clock, per_pair)
            rows.append(
                scorer_row(
                    model_name, method, got, plan, spec, rp.batch, peak_tflops, device, per_pair
                )
            )
            if method == "trie":
                trie = rows[-1]
        except Exception as exc:  # one broken method must not lose the others' rows
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
            rows.append(
                row(
                    "scorer",
                    f"scorer_{model_name}_{method}",
                    dtype=RUN["dtype"],
                    error=_error(exc),
                    **base,
                )
            )
    counter.remove()
    rows.append(plan_row(model_name, rp, plan, spec, trie, device))
    rows[-1]["note"] = f"random-weight model built in {built:.1f} s"
    return rows  # the model goes with this frame: the caller frees its memory


def _pin_variables(plan, assets: Path) -> None:
    """Score the variables the assets were prepared with (the same n and seed): picked here
    from the same items, they differ only where the stop-words list does."""
    from psens import prompts

    manifest = json.loads((assets / "manifest.json").read_text())
    if manifest["n_vars"] != plan.cfg.n_vars or manifest["seed"] != plan.cfg.seed:
        return
    stored = dict(zip(manifest["ids"], manifest["variables"], strict=True))
    plan.variables = [
        [prompts.Variable(*v) for v in stored[it.id]] if it.id in stored else vs
        for it, vs in zip(plan.items, plan.variables, strict=True)
    ]


def _free(device: str) -> None:
    import torch

    gc.collect()
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()


def check_row(
    settings: Settings, assets: Path, tokenizer, mask, device: str, workdir: Path
) -> dict:
    """``device``'s values against the CPU's on the small ``check`` model, one item and
    template, the first ``check_masks`` masks: float32 (prefix tree, and one prompt at a time
    on the device) within :data:`FP32_TOL`; bfloat16 on the device against the CPU's float32,
    as a multiple of the bfloat16 noise floor measured on the CPU (both mean
    :math:`|\\Delta v|`), at most :data:`BF16_MAX_RATIO`."""
    import numpy as np
    import torch
    from transformers import LlamaConfig

    from psens.config import RunConfig
    from psens.models import Scorer
    from psens.runner import Plan

    folder = workdir / "check"
    folder.mkdir(parents=True, exist_ok=True)
    LlamaConfig(vocab_size=len(tokenizer), **settings.shapes["check"]).save_pretrained(folder)
    plan = Plan(RunConfig.from_dict(run_config(assets, settings, folder, "cpu")))
    _pin_variables(plan, assets)
    item, vs = plan.items[0], plan.variables[0]
    template = plan.templates[0]
    masks = np.arange(min(settings.check_masks, 1 << len(vs)))
    ref = build_model(settings.shapes["check"], len(tokenizer), "float32", "cpu")

    def values(model, method="trie"):
        sc = Scorer(model, tokenizer, name="check", mask=mask, n_max=plan.cfg.n_vars)
        return sc.value(item, template, masks, variables=vs, method=method, progress=False)

    v_cpu = values(ref)
    v_cpu16 = values(copy.deepcopy(ref).to(torch.bfloat16))
    dev32 = copy.deepcopy(ref).to(device)
    v_dev = values(dev32)
    v_dev_naive = values(dev32, "naive")
    v_dev16 = values(copy.deepcopy(ref).to(device=device, dtype=torch.bfloat16))
    fp32 = float(np.max(np.abs(v_dev - v_cpu)))
    methods = float(np.max(np.abs(v_dev_naive - v_dev)))
    bf16 = float(np.mean(np.abs(v_dev16 - v_cpu)))
    floor = float(np.mean(np.abs(v_cpu16 - v_cpu)))
    ratio = bf16 / floor if floor > 0 else (0.0 if bf16 == 0 else math.inf)
    del dev32
    _free(device)
    return row(
        "check",
        "check_device_vs_cpu",
        device=f"{_device_name(device)} vs CPU",
        dtype="float32, bfloat16",
        model="check",
        masks=len(masks),
        fp32_max_diff=fp32,
        fp32_tol=FP32_TOL,
        methods_max_diff=methods,
        bf16_mean_diff=bf16,
        bf16_floor=floor,
        bf16_ratio=ratio,
        bf16_max_ratio=BF16_MAX_RATIO,
        passed=bool(fp32 <= FP32_TOL and methods <= FP32_TOL and ratio <= BF16_MAX_RATIO),
        note=f"item {item.id}, {template}, n = {len(vs)}",
    )


#: float32: the device's values within this of the CPU's (and its methods of each other).
FP32_TOL = 1e-4
#: bfloat16: the device's mean distance from the CPU's float32 values, at most this multiple
#: of the CPU's own bfloat16 noise floor.
BF16_MAX_RATIO = 3.0


#: Seconds of the budget kept, while a shape's methods run, for what comes after them.
RESERVE = {"llama3-8b": 80.0, "llama3.2-1b": 5.0}


def read_tokenizer(folder: Path):
    """The prepared tokenizer (``AutoTokenizer``; should the GPU machine's transformers not
    read the saved config, the fast tokenizer from ``tokenizer.json`` and its special
    tokens)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception:  # another transformers version's config
        conf = json.loads((folder / "tokenizer_config.json").read_text())
        specials = {k: v for k, v in conf.items() if k.endswith("_token") and isinstance(v, str)}
        return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **specials)


def measure_all(
    settings: Settings,
    assets: Path,
    clock: Clock,
    save: Callable[[list[dict], dict], None] | None = None,
) -> tuple[list[dict], dict]:
    """Every row (peak, check, the two shapes' scorer and plan rows) and the run's facts,
    with the seconds each section took (``meta["sections"]``). ``save(rows, meta)`` is called
    after each section (what a run stopped from outside has measured is kept)."""
    import tempfile

    import torch
    import transformers

    from psens.models.mask_tokens import mask_token

    _check_assets(assets)
    device = "cpu" if settings.dry_run else "cuda"
    manifest = json.loads((assets / "manifest.json").read_text())
    tokenizer = read_tokenizer(assets / "tokenizer")
    mask = mask_token(tokenizer, manifest["mask_model"])
    reserve = dict.fromkeys(RESERVE, 0.0) if settings.dry_run else RESERVE
    meta = {
        "device": _device_name(device),
        "dry_run": settings.dry_run,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizer": manifest["mask_model"],
        "vocab": len(tokenizer),
        "items": manifest["ids"] if settings.items is None else manifest["ids"][: settings.items],
        "n_vars": settings.n_vars,
        "shapes": settings.shapes,
        "budget_s": settings.budget,
        "sections": {"start": clock.budget - clock.left()},
    }
    rows: list[dict] = []

    def peak_section(work: Path) -> list[dict]:
        return [peak_row(device, settings.peak_size, settings.peak_repeats)]

    def check_section(work: Path) -> list[dict]:
        return [check_row(settings, assets, tokenizer, mask, device, work)]

    def shape_section(name: str) -> Callable[[Path], list[dict]]:
        def run(work: Path) -> list[dict]:
            peak = rows[0]["tflops"] if rows and rows[0]["kind"] == "peak" else None
            args = (settings, assets, tokenizer, mask, device, peak, clock, reserve[name])
            return scorer_rows(name, *args, work)

        return run

    sections = [
        ("peak", peak_section, ("peak", "peak_bf16_matmul")),
        ("check", check_section, ("check", "check_device_vs_cpu")),
        *((name, shape_section(name), ("plan", f"plan_{name}")) for name in RESERVE),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, section, (kind, failed) in sections:
            begin = time.perf_counter()
            try:
                rows += section(Path(tmp))
            except Exception as exc:  # one broken section must not lose the others' rows
                rows.append(row(kind, failed, error=_error(exc)))
            _free(device)
            meta["sections"][name] = time.perf_counter() - begin
            print(
                f"[{clock.budget - clock.left():.0f} s] {name}: {meta['sections'][name]:.1f} s",
                flush=True,
            )
            if save is not None:
                save(rows, meta)
    return rows, meta


# ----------------------------------------------------------------------------- output


def _fmt(value: Any, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _sentence(r: dict) -> str:
    """A peak, check or plan row as one line."""
    if r["error"]:
        return f"{r['name']}: ERROR {r['error']}"
    if r["kind"] == "peak":
        return f"{r['name']}: {r['tflops']:.4g} TFLOP/s ({r['size']}^3 bf16 on {r['device']})"
    if r["kind"] == "check":
        return (
            f"{r['name']} ({r['device']}, {r['masks']} masks, {r['note']}): float32 max "
            f"|dv| {r['fp32_max_diff']:.2g} (tol {r['fp32_tol']:.0e}), trie vs naive "
            f"{r['methods_max_diff']:.2g}; bfloat16 mean |dv| {r['bf16_mean_diff']:.3g} vs "
            f"CPU floor {r['bf16_floor']:.3g} (ratio {r['bf16_ratio']:.2f}, at most "
            f"{r['bf16_max_ratio']:.0f}): {'passed' if r['passed'] else 'FAILED'}"
        )
    how = "projected" if r["projected"] else "measured"
    return (
        f"{r['name']}: psens plan {r['plan_seconds']:.4g} s = compute "
        f"{r['plan_compute_seconds']:.4g} s at {r['reference_tflops']:.4g} TFLOP/s "
        f"(reference) + loads {r['plan_load_seconds']:.4g} s; prefix tree {how} "
        f"{_fmt(r['measured_seconds'], '.4g')} s (plan compute / measured "
        f"{_fmt(r['compute_ratio'], '.3g')}); batch {r['batch']}"
        + (f"; {r['note']}" if r["note"] else "")
    )


def table(rows: list[dict]) -> str:
    """The rows as text: peak and check lines, the scorer rows as a table, the plan lines."""
    out = [_sentence(r) for r in rows if r["kind"] in ("peak", "check")]
    out.append(
        f"{'scorer':<28} {'batch':>5} {'pairs':>7} {'prompts/s':>10} {'tokens/s':>10} "
        f"{'tok/prompt':>10} {'plan':>6} {'TFLOP/s':>8} {'peak':>6} {'GB':>6} {'run s':>8}"
    )
    for r in rows:
        if r["kind"] != "scorer":
            continue
        if r["error"] or r["prompts"] is None:
            out.append(f"{r['name']:<28} {'ERROR ' + r['error'] if r['error'] else r['note']}")
            continue
        share = f"{100 * r['fraction_of_peak']:.0f} %" if r["fraction_of_peak"] else "-"
        out.append(
            f"{r['name']:<28} {r['batch']:>5} {r['pairs']:>3}/{r['pairs_total']:<3} "
            f"{r['prompts_per_s']:>10.4g} {r['tokens_per_s']:>10.4g} "
            f"{r['tokens_per_prompt']:>10.1f} {_fmt(r['plan_tokens_per_prompt'], '.1f'):>6} "
            f"{_fmt(r['tflops'], '.3g'):>8} {share:>6} {_fmt(r['peak_memory_gb'], '.1f'):>6} "
            f"{_fmt(r['run_seconds'], '.4g'):>8}"
        )
    out += [_sentence(r) for r in rows if r["kind"] == "plan"]
    return "\n".join(out)


def bench(notes: list[str] | None = None) -> list[dict]:
    """``make bench``'s rows: each scorer row as seconds per masked prompt against the time
    at the measured peak (ratio = fraction of the peak); none without a GPU or assets."""
    import torch

    if not torch.cuda.is_available():
        return []
    if not (ASSETS / "manifest.json").exists():
        if notes is not None:
            notes.append("bench_gpu: no scripts/gpu_assets (python scripts/bench_gpu.py --prepare)")
        return []
    rows, _ = measure_all(Settings(False), ASSETS, Clock(BUDGET))
    out = []
    for r in rows:
        if r["kind"] == "scorer" and r["fraction_of_peak"]:
            per = 1.0 / r["prompts_per_s"]
            out.append(
                {
                    "name": f"gpu_{r['name']}",
                    "psens_seconds": per,
                    "baseline_seconds": per * r["fraction_of_peak"],
                    "ratio": r["fraction_of_peak"],
                    "target": None,
                    "tokens_per_s": r["tokens_per_s"],
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench_gpu.json")
    parser.add_argument("--assets", type=Path, default=ASSETS)
    parser.add_argument("--prepare", action="store_true", help="write the assets folder")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole run")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded; no network there
    site = args.assets / "site"
    if site.is_dir() and str(site) not in sys.path:  # the prepared stop-words list
        sys.path.insert(0, str(site))
    sys.path.insert(0, str(ROOT))
    if args.prepare:
        print(f"wrote {prepare(args.assets)}")
        return 0
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no GPU: skipped")
        return 0
    settings = Settings(args.dry_run, args.budget)
    if settings.dry_run:  # tiny models: one thread, no waits for others on a busy machine
        torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save(rows: list[dict], meta: dict) -> None:
        meta["wall_s"] = time.perf_counter() - start
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
        os.replace(tmp, args.out)

    rows, meta = measure_all(settings, args.assets, Clock(settings.budget, start), save)
    save(rows, meta)
    print(f"device: {meta['device']} ({'dry run' if settings.dry_run else 'GPU'})")
    print(table(rows))
    took = ", ".join(f"{k} {v:.1f} s" for k, v in meta["sections"].items())
    print(f"wall {meta['wall_s']:.1f} s ({took}); wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
