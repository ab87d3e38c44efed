r"""What a run will cost, before anything is loaded: ``psens plan CONFIG``.

:func:`make_plan` resolves every model of a config (:attr:`psens.config.RunConfig.model_specs`:
a packaged model, a name of the model table, a hub id, a folder, a GGUF file or a served
entry), the dataset, split, templates, shot settings and the variables of every item
(:class:`psens.runner.Plan`, the run's own item selection) without reading any weights, and
returns one :class:`ModelCost` per model:

* **forward passes**: the model's masked prompts (:meth:`psens.runner.Plan.forward_passes`);
* **time** from a FLOP model, per masked prompt of :math:`T` tokens on a model of :math:`P`
  parameters (a MoE model's active parameters)

  .. math:: t = \frac{2\,P\,T}{R_{d,\mathrm{dtype}}}

  with :math:`R` the device's throughput at the run's dtype (:data:`THROUGHPUT`); a served
  model has no local cost (its server's speed is not known here);
* **memory**: :math:`P \cdot b` (bytes per parameter at the dtype) plus the activations of
  one batch, :math:`B\,T\,2\,L\,d\,b` (the keys and values of every layer), with the width
  :math:`d = (128 P / 12)^{1/3}` and depth :math:`L = d / 128` of a Llama-shaped model of
  :math:`P` parameters (:math:`P \approx 12 L d^2`; Llama-3-8B: :math:`d = 4096, L = 32`),
  against the free memory of the device (CPU: available RAM; CUDA:
  ``torch.cuda.mem_get_info``);
* **store size**: the model's share of :func:`psens.runner.estimate`;
* **download**: a hub model without a local copy must fetch :math:`P \cdot b` bytes.

:math:`P` comes from the model table (``params``, billions), else from a folder's
``config.json`` (:math:`12 L d^2 + V d`) or a GGUF file's size (2 bytes per parameter).
:math:`T` is the mean rendered prompt length in characters divided by
:data:`CHARS_PER_TOKEN` (no tokenizer is loaded).

Refused with ``fail(where, problem, fix)`` (exit 2 on the command line), before any store is
created: an unknown dataset or model (by the config and the run's item selection), ``n_vars``
above the dense limit (by the config, pointing at the sparse path), a local model that does
not fit the device's free memory unless ``device = "auto"`` or the model is served, and with
``offline`` a hub id that the model table does not list.

References
----------
Qin, Z. et al. Interaction-based prompt sensitivity of language models (IPS). ICML 2026.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from psens._validation import fail
from psens.config import RunConfig
from psens.models.loading import DTYPE_NAMES
from psens.models.spec import ModelSpec
from psens.runner import Plan

__all__ = [
    "CHARS_PER_TOKEN",
    "THROUGHPUT",
    "ModelCost",
    "RunPlan",
    "calibrate",
    "flop_seconds",
    "format_plan",
    "make_plan",
]

WHERE = "psens plan"

#: Characters per token of English prompts (the usual BPE rule of thumb, no tokenizer loaded).
CHARS_PER_TOKEN = 4.0

#: Tokens per masked prompt assumed when the dataset is not on this machine (``offline``).
ASSUMED_TOKENS = 256.0

#: Reference throughput (FLOP/s) per device kind and dtype. ``cpu``, float32: measured on this
#: project's 2-core CPU (AMD EPYC) as the effective rate of the shipped ARC run
#: (SmolLM2-135M, 40 masked prompts/s of ~72 tokens: 2 x 0.135e9 x 72 x 40), so it includes the
#: tree scorer's prefix sharing; bfloat16 and float16 scale it by the ratio of 1024x1024
#: matmul rates measured on the same CPU (76, 19 and 0.24 GFLOP/s at bf16, fp32, fp16).
#: ``cuda``: the dense tensor-core peak of an NVIDIA A100 (19.5 TFLOP/s fp32, 312 bf16/fp16),
#: ``mps``: an Apple M2 GPU (3.6 TFLOP/s): FLOP bounds, so times on a GPU are lower bounds.
#: ``psens plan --calibrate`` replaces them by a measured rate.
THROUGHPUT: dict[str, dict[str, float]] = {
    "cpu": {"float32": 7.8e11, "bfloat16": 7.8e11 * 4.0, "float16": 7.8e11 * 0.0125},
    "cuda": {"float32": 19.5e12, "bfloat16": 312e12, "float16": 312e12},
    "mps": {"float32": 3.6e12, "bfloat16": 3.6e12, "float16": 3.6e12},
}
#: Bytes per parameter at each dtype.
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def flop_seconds(params: float, tokens: float, prompts: int, throughput: float) -> float:
    r"""Seconds to score ``prompts`` masked prompts: :math:`2\,P\,T\,N / R`.

    ``params`` :math:`P` in parameters (not billions), ``tokens`` :math:`T` per masked
    prompt, ``throughput`` :math:`R` in FLOP/s.
    """
    return 2.0 * params * tokens * prompts / throughput


def _shape(params: float) -> tuple[float, float]:
    """Width and depth of a Llama-shaped model of ``params`` parameters.

    :math:`P = 12 L d^2` with :math:`L = d / 128`.
    """
    d = (128.0 * params / 12.0) ** (1.0 / 3.0)
    return d, d / 128.0


def _local_params(spec: ModelSpec) -> float | None:
    """Parameters of a folder (from its config.json) or a GGUF file (its size / 2 bytes)."""
    src = spec.source
    path = src.get("path")
    if path is None or src["kind"] == "hub":
        return None
    path = Path(path)
    if src["kind"] == "gguf":
        return path.stat().st_size / 2.0
    cfg_file = path / "config.json"
    if not cfg_file.exists():
        return None
    conf = json.loads(cfg_file.read_text())
    d, layers = conf.get("hidden_size"), conf.get("num_hidden_layers")
    vocab = conf.get("vocab_size", 0)
    if not d or not layers:
        return None
    return 12.0 * layers * d * d + vocab * d


def _in_hub_cache(hub_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return False
    return isinstance(try_to_load_from_cache(hub_id, "config.json"), str)


def free_memory(device: str) -> tuple[float | None, str]:
    """Free bytes on ``device`` and its name (CPU: available RAM and the CPU model)."""
    kind = device.partition(":")[0]
    if kind == "cuda":
        import torch

        if torch.cuda.is_available():
            index = int(device.partition(":")[2] or 0)
            free, _ = torch.cuda.mem_get_info(index)
            return float(free), torch.cuda.get_device_name(index)
        return None, "no CUDA"
    if kind == "cpu":
        import psutil

        return float(psutil.virtual_memory().available), cpu_name()
    return None, kind


def cpu_name() -> str:
    """The CPU model (``/proc/cpuinfo``'s model name, else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


@dataclass
class ModelCost:
    """What one model of a run costs (see the module docstring for the formulas)."""

    name: str
    kind: str  # packaged, gguf, folder, hub, served
    params: float | None  # parameters (not billions); None for a served model
    passes: int
    tokens: float
    seconds: float | None
    memory_bytes: float | None
    store_bytes: float
    download_bytes: float


@dataclass
class RunPlan:
    """A costed run: the device, its free memory and one :class:`ModelCost` per model."""

    config: RunConfig
    device: str
    device_name: str
    dtype: str
    free_bytes: float | None
    throughput: float
    models: list[ModelCost]
    items: int
    calibrated: bool = False
    dataset_missing: bool = False


def make_plan(
    config: RunConfig | dict | str | os.PathLike,
    *,
    offline: bool = False,
    free_bytes: float | None = None,
    throughput: float | None = None,
) -> RunPlan:
    """Cost a run without loading weights; refuse what cannot run (see the module docstring).

    Parameters
    ----------
    config : RunConfig, dict or path
    offline : bool
        No network: hub models are checked against the model table only.
    free_bytes : float, optional
        The device's free memory (default: measured, :func:`free_memory`).
    throughput : float, optional
        FLOP/s replacing :data:`THROUGHPUT` (a measured rate, ``--calibrate``).
    """
    from psens.runner import _check_device, estimate

    cfg = RunConfig.from_any(config)
    specs = cfg.model_specs  # unknown models are refused here
    if offline:
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    plan = _items_plan(cfg, offline)
    sizes = estimate(plan)
    dtype = DTYPE_NAMES.get(cfg.dtype or "float32", "float32")
    auto = cfg.device == "auto"
    if not auto:
        _check_device(cfg)  # cuda without CUDA, mps without MPS
    device = "cuda" if auto else cfg.device
    kind = device.partition(":")[0]
    measured, device_name = free_memory(device if not auto or _has_cuda() else "cpu")
    if auto and not _has_cuda():
        kind, device_name = "cpu", f"auto -> {device_name}"
    free = measured if free_bytes is None else free_bytes
    rate = throughput if throughput is not None else THROUGHPUT[kind][dtype]
    if plan.prompts is None:  # the dataset is not here: an assumed prompt length
        tokens = ASSUMED_TOKENS
    else:
        chars = sum(len(p) for p in plan.prompts.ravel()) / plan.prompts.size
        tokens = chars / CHARS_PER_TOKEN
    passes = plan.forward_passes() // max(len(specs), 1)
    store_share = sizes["store_bytes"] / max(len(specs), 1)
    costs = []
    for spec in specs:
        costs.append(
            _model_cost(spec, cfg, offline, passes, tokens, store_share, dtype, rate, free, auto)
        )
    rp = RunPlan(cfg, cfg.device, device_name, dtype, free, rate, costs, len(plan.items))
    rp.dataset_missing = plan.prompts is None
    return rp


class _UpperBound(Plan):
    """A run's plan when its dataset is not on this machine (``offline``): every item at
    ``n = n_vars`` (an upper bound on the passes and the store) and no prompts."""

    def __init__(self, cfg: RunConfig):
        count = cfg.samples if isinstance(cfg.samples, int) else len(cfg.samples)
        self.cfg = cfg
        self.items = [None] * count
        self.templates = cfg.template_names
        self.variables = [range(cfg.n_vars)] * count
        self.n_max = cfg.n_vars
        self.shot_keys = list(cfg.shots) if cfg.shots else [0]
        self.prompts = None


def _items_plan(cfg: RunConfig, offline: bool) -> Plan:
    """The run's own item selection (:class:`psens.runner.Plan`); offline, a known dataset
    that is not on this machine gives :class:`_UpperBound` (it is to download)."""
    from psens import datasets

    datasets._canonical(cfg.dataset)  # an unknown dataset is refused, naming the known ones
    if offline:
        try:
            datasets.load(cfg.dataset, cfg.split, path=cfg.dataset_path)
        except (OSError, ValueError, ConnectionError):
            return _UpperBound(cfg)
    return Plan(cfg)


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _model_cost(spec, cfg, offline, passes, tokens, store_share, dtype, rate, free, auto):
    if spec.is_served:
        return ModelCost(spec.name, "served", None, passes, tokens, None, None, store_share, 0.0)
    src = spec.source
    kind = "packaged" if src["kind"] == "gguf" and src["path"] is None else src["kind"]
    row = spec.table_row()
    if src["kind"] == "hub" and row is None and offline:
        fail(
            WHERE,
            f"model {spec.name!r} is a hub id the model table does not list, so its size is "
            "unknown offline",
            "Add it to data/models.csv, run the plan without --offline, or pass a local copy",
        )
    if not offline:
        spec.check_available()  # a packaged model's package; a hub id on the hub
    elif kind == "packaged":
        spec.check_available()  # no network: the package is installed or not
    params = float(row["params"]) * 1e9 if row and row.get("params") else _local_params(spec)
    if params is None:
        fail(
            WHERE,
            f"model {spec.name!r}: its number of parameters is unknown (no table row, no config)",
            "Add it to data/models.csv or pass a folder with a config.json",
        )
    b = BYTES[dtype]
    d, layers = _shape(params)
    memory = params * b + cfg.batch_size * tokens * 2 * layers * d * b
    if cfg.floor_dtype:  # the half-precision copy stays loaded too
        memory += params * BYTES[cfg.floor_dtype]
    if free is not None and memory > free and not auto:
        fail(
            WHERE,
            f"model {spec.name!r} needs about {_gb(memory)} GB at {dtype} on {cfg.device} but "
            f"only {_gb(free)} GB are free",
            'Set device = "auto" (shard it over the devices), use a served entry, a smaller '
            "dtype or a smaller batch_size",
        )
    download = 0.0
    if src["kind"] == "hub" and (offline or not _in_hub_cache(str(src["path"]))):
        download = params * b
    seconds = flop_seconds(_active(spec, params), tokens, passes, rate)  # a MoE: active ones
    return ModelCost(
        spec.name, kind, params, passes, tokens, seconds, memory, store_share, download
    )


def calibrate(rp: RunPlan) -> RunPlan:
    r"""Replace the reference throughput by a measured one: score one batch per local model.

    For each model whose weights are here (not served, not a hub model still to download),
    the run's scorer (:func:`psens.runner._scorer`, the run's dtype and batch size; the CPU
    for ``device = "auto"``) scores the first ``batch_size`` masked prompts of the first item
    and template (after one warm-up call); the measured rate :math:`r` (masked prompts per
    second) gives the model's time :math:`N / r` and the effective throughput
    :math:`R = 2\,P\,T\,r` printed in the header (the first calibrated model's).
    Loads weights: the plan's other columns are computed without.
    """
    import dataclasses
    import time

    import numpy as np

    from psens.runner import _scorer

    cfg = rp.config
    if cfg.device == "auto":
        cfg = dataclasses.replace(cfg, device="cpu")
    plan = _items_plan(cfg, offline=True)
    if plan.prompts is None:
        return rp
    item, variables = plan.items[0], plan.variables[0]
    masks = np.arange(min(cfg.batch_size, 1 << len(variables)), dtype=np.int64)
    shots = plan.shots[plan.shot_keys[0]]
    for spec, m in zip(cfg.model_specs, rp.models, strict=True):
        if spec.is_served or m.download_bytes or m.params is None:
            continue
        scorer = _scorer(cfg, spec)
        args = dict(shots=shots, variables=variables, progress=False)
        scorer.value(item, plan.templates[0], masks[:1], **args)  # warm-up
        start = time.perf_counter()
        scorer.value(item, plan.templates[0], masks, **args)
        rate = len(masks) / max(time.perf_counter() - start, 1e-9)
        m.seconds = m.passes / rate
        if not rp.calibrated:
            rp.throughput = 2.0 * _active(spec, m.params) * m.tokens * rate
            rp.calibrated = True
    return rp


def _active(spec: ModelSpec, params: float) -> float:
    row = spec.table_row()
    return float(row["active_params"]) * 1e9 if row and row.get("active_params") else params


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f}" if n >= 1e8 else f"{n / 1e9:.3f}"


def format_plan(rp: RunPlan) -> str:
    """The plan as a text table, one row per model and a total."""
    from psens.runner import _fmt_bytes, _fmt_time

    cfg = rp.config
    free = "unknown" if rp.free_bytes is None else f"{_gb(rp.free_bytes)} GB free"
    lines = [
        f"plan: {cfg.dataset} ({cfg.split or 'default split'}), {rp.items} items, "
        f"{len(cfg.template_names)} templates, shots {cfg.shots or [0]}, n_vars <= {cfg.n_vars}",
        f"device: {rp.device} ({rp.device_name}), {rp.dtype}, {free}; "
        f"{rp.throughput / 1e12:.3g} TFLOP/s {'measured' if rp.calibrated else 'reference'}",
        f"{'model':<32} {'kind':<8} {'params':>7} {'passes':>12} {'time':>9} "
        f"{'memory':>9} {'store':>9} {'download':>9}",
    ]
    total_s = total_dl = 0.0
    for m in rp.models:
        params = "-" if m.params is None else f"{m.params / 1e9:.3g}B"
        t = "served" if m.seconds is None else _fmt_time(m.seconds)
        mem = "-" if m.memory_bytes is None else f"{_gb(m.memory_bytes)} GB"
        dl = f"{_gb(m.download_bytes)} GB" if m.download_bytes else "-"
        lines.append(
            f"{m.name[:32]:<32} {m.kind:<8} {params:>7} {m.passes:>12,} {t:>9} {mem:>9} "
            f"{_fmt_bytes(m.store_bytes):>9} {dl:>9}"
        )
        total_s += m.seconds or 0.0
        total_dl += m.download_bytes
    passes = sum(m.passes for m in rp.models)
    store_total = sum(m.store_bytes for m in rp.models)
    lines.append(
        f"total: {passes:,} forward passes, {_fmt_time(total_s)}, store "
        f"{_fmt_bytes(store_total)}, to download {_gb(total_dl)} GB "
        f"({sum(1 for m in rp.models if m.download_bytes)} models)"
    )
    if rp.dataset_missing:
        lines.append(
            f"dataset {cfg.dataset!r} is not on this machine: to download; passes and store "
            f"are upper bounds (every item at n = {cfg.n_vars}), {ASSUMED_TOKENS:.0f} tokens "
            "per prompt assumed"
        )
    lines.append(
        f"time = 2 x params x {rp.models[0].tokens:.0f} tokens per masked prompt / throughput"
        if rp.models
        else "no models"
    )
    return "\n".join(lines)
