r"""What the hardware has and what a model costs on it, without loading any weights.

One place for the cost model that ``psens plan`` prints (:mod:`psens.plan`), that ``psens
run`` prints before its first block (:func:`psens.runner.estimate`) and that sizes
``batch_size = "auto"`` (:func:`largest_batch`):

* **free memory** of a device (:func:`free_memory`): the CPU's available RAM (psutil when
  installed, else ``sysconf``); a CUDA device's ``torch.cuda.mem_get_info``; ``auto``: the
  sum over the GPUs (a model sharded with ``device_map="auto"``), the CPU without one;
  none for ``mps`` (its free memory is not reported);
* **time** of :math:`T` tokens computed by a model of :math:`P` forward parameters
  (:func:`forward_params`), :math:`t = 2\,P\,T / R_{d,\mathrm{dtype}}` (:func:`flop_seconds`),
  with :math:`R` the device's throughput at the dtype (:data:`THROUGHPUT`);
* **memory** :math:`P\,b + B\,T\,2\,L\,d\,b` (:func:`memory_bytes`): the weights at
  :math:`b` bytes per parameter and the keys and values of a batch of :math:`B` prompts, with
  the width :math:`d = (128 P / 12)^{1/3}` and depth :math:`L = d / 128` of a Llama-shaped
  model of :math:`P` parameters (:math:`P \approx 12 L d^2`; Llama-3-8B: :math:`d = 4096,
  L = 32`).

References
----------
Kaplan, J., McCandlish, S., Henighan, T., Brown, T. B., Chess, B., Child, R., Gray, S.,
Radford, A., Wu, J. and Amodei, D. Scaling laws for neural language models.
arXiv:2001.08361 (2020), section 2.1 — the :math:`2P` FLOP per token of a forward pass.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

__all__ = [
    "BATCH_MEMORY_SHARE",
    "BYTES",
    "CHARS_PER_TOKEN",
    "HALF_SLOWDOWN_CPU",
    "THROUGHPUT",
    "available_ram",
    "cpu_flags",
    "cpu_name",
    "cuda_count",
    "flop_seconds",
    "forward_params",
    "free_memory",
    "half_factor",
    "largest_batch",
    "memory_bytes",
    "model_params",
    "placement",
    "rate",
    "shape",
]

#: Characters per token of English prompts (the usual BPE rule of thumb, no tokenizer loaded).
CHARS_PER_TOKEN = 4.0

#: Reference throughput (FLOP/s) per device kind and dtype, counted on the tokens a run
#: computes (:func:`psens.runner.prompt_work`: shared prefixes once). ``cpu``, float32: the
#: effective rate of the shipped ARC run (SmolLM2-135M and Gemma-3-270M, 3 shot settings,
#: bfloat16 noise floor) on this project's 2-core Intel Xeon with AMX, load average 2-3:
#: 8.8e10; bfloat16 and float16 scale it by the ratio of 1024x1024 matmul rates measured
#: on the same CPU (1250, 1160 and 101 GFLOP/s at bf16, fp16, fp32; on a CPU without AMX,
#: as the AMD EPYC measured before, 76, 0.24 and 19: bf16 4x, fp16 1/80 of fp32).
#: ``cuda``: the dense tensor-core peak of an NVIDIA A100 (19.5 TFLOP/s fp32, 312 bf16/fp16),
#: ``mps``: an Apple M2 GPU (3.6 TFLOP/s): FLOP bounds, so times on a GPU are lower bounds.
#: ``psens plan --calibrate`` replaces them by a measured rate.
THROUGHPUT: dict[str, dict[str, float]] = {
    "cpu": {"float32": 8.8e10, "bfloat16": 8.8e10 * 1250 / 101, "float16": 8.8e10 * 1160 / 101},
    "cuda": {"float32": 19.5e12, "bfloat16": 312e12, "float16": 312e12},
    "mps": {"float32": 3.6e12, "bfloat16": 3.6e12, "float16": 3.6e12},
}
#: How many times slower than float32 a CPU without native half-precision arithmetic
#: computes in bfloat16 or float16 (:func:`half_factor`): torch converts every operand, so
#: the table's bfloat16/float16 rates (a CPU with AMX) do not hold there. Measured on this
#: project's 2-core AMD EPYC (AVX2 only, no AVX-512), torch 2.13, one thread: ``F.linear``
#: of 64x576 @ 576x1536 takes 11.5 ms in bfloat16 against 1.8 ms in float32 (float16: 20.3
#: against 3.16 ms, measured beside a busy process: the same ratio). A noise floor scored
#: in half precision on such a CPU costs this factor times its float32 scoring.
HALF_SLOWDOWN_CPU = 6.4
#: The CPU flags (``/proc/cpuinfo``; ``Features`` on ARM) that mean native arithmetic in a
#: half-precision dtype.
NATIVE_HALF_FLAGS = {
    "bfloat16": ("avx512_bf16", "amx_bf16", "bf16"),
    "float16": ("avx512_fp16", "amx_fp16", "fphp"),
}
#: Bytes per parameter at each dtype.
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: Share of the free memory that ``batch_size = "auto"`` fills (weights and batch together;
#: the rest is left to the scorer's temporaries and to other processes).
BATCH_MEMORY_SHARE = 0.5


def available_ram() -> float:
    """Available RAM in bytes (psutil when installed, else sysconf; 4 GiB if unknown)."""
    try:
        import psutil

        return float(psutil.virtual_memory().available)
    except ImportError:
        try:
            return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return 4.0 * 2**30


def cpu_name() -> str:
    """The CPU model (``/proc/cpuinfo``'s model name, else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags (``/proc/cpuinfo``'s ``flags``, or ``Features`` on ARM); None
    where they cannot be read (not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def half_factor(dtype: str, flags: frozenset[str] | None = None) -> float:
    """How many times slower than the table's rate a CPU computes in ``dtype``: 1 for
    float32 and for a half-precision dtype the CPU computes natively
    (:data:`NATIVE_HALF_FLAGS`), else :data:`HALF_SLOWDOWN_CPU` (measured), the rate
    then being the float32 rate divided by it (:func:`rate`).

    ``flags`` default to :func:`cpu_flags`; where those are unknown, torch's CPU capability
    decides (an x86 CPU without AVX-512, ``"AVX2"`` or ``"DEFAULT"``, has no native half
    precision) and anything else is taken as native (the table's rate).
    """
    if dtype not in NATIVE_HALF_FLAGS:
        return 1.0
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        try:
            import torch

            capability = torch.backends.cpu.get_cpu_capability()
        except (ImportError, AttributeError):  # pragma: no cover - an old torch
            return 1.0
        return HALF_SLOWDOWN_CPU if capability in ("AVX2", "DEFAULT") else 1.0
    return 1.0 if flags & set(NATIVE_HALF_FLAGS[dtype]) else HALF_SLOWDOWN_CPU


def rate(kind: str, dtype: str, flags: frozenset[str] | None = None) -> float:
    """FLOP/s of a device kind (``cpu``, ``cuda``, ``mps``) at ``dtype``:
    :data:`THROUGHPUT`, except on a CPU without native ``dtype`` arithmetic
    (:func:`half_factor`): the float32 rate divided by :data:`HALF_SLOWDOWN_CPU`."""
    if kind == "cpu":
        factor = half_factor(dtype, flags)
        if factor != 1.0:
            return THROUGHPUT["cpu"]["float32"] / factor
    return THROUGHPUT[kind][dtype]


def cuda_count() -> int:
    """CUDA devices on this machine (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def placement(device: str) -> str:
    """The device kind a run's time and memory are costed on: ``device``'s kind, and for
    ``auto`` ``cuda`` when there is a GPU, else ``cpu`` (``device_map="auto"`` keeps
    everything on the CPU then)."""
    kind = str(device).partition(":")[0]
    if kind == "auto":
        return "cuda" if cuda_count() else "cpu"
    return kind


def free_memory(device: str) -> tuple[float | None, str]:
    """Free bytes on ``device`` and its name; None when the device does not report them.

    CPU: available RAM and the CPU model; ``cuda[:N]``: ``torch.cuda.mem_get_info``; ``auto``:
    the sum over every GPU (a sharded model uses them all), the CPU without one; ``mps`` or
    any other kind: ``(None, kind)``.
    """
    kind, _, index = str(device).partition(":")
    if kind == "auto":
        count = cuda_count()
        if not count:
            free, name = free_memory("cpu")
            return free, f"auto -> {name}"
        import torch

        free = sum(float(torch.cuda.mem_get_info(i)[0]) for i in range(count))
        return free, f"auto -> {count} x {torch.cuda.get_device_name(0)}"
    if kind == "cuda":
        if not cuda_count():
            return None, "no CUDA"
        import torch

        i = int(index or 0)
        return float(torch.cuda.mem_get_info(i)[0]), torch.cuda.get_device_name(i)
    if kind == "cpu":
        return available_ram(), cpu_name()
    return None, kind


def flop_seconds(params: float, tokens: float, prompts: float, throughput: float) -> float:
    r"""Seconds to score ``prompts`` masked prompts: :math:`2\,P\,T\,N / R`.

    ``params`` :math:`P` in parameters (not billions), ``tokens`` :math:`T` per masked
    prompt, ``throughput`` :math:`R` in FLOP/s.
    """
    return 2.0 * params * tokens * prompts / throughput


def shape(params: float) -> tuple[float, float]:
    """Width and depth of a Llama-shaped model of ``params`` parameters.

    :math:`P = 12 L d^2` with :math:`L = d / 128`.
    """
    d = (128.0 * params / 12.0) ** (1.0 / 3.0)
    return d, d / 128.0


def _sequence_bytes(params: float, dtype: str, tokens: float) -> float:
    """Keys and values of one prompt of ``tokens`` tokens: :math:`T\\,2\\,L\\,d\\,b`."""
    d, layers = shape(params)
    return tokens * 2.0 * layers * d * BYTES[dtype]


def memory_bytes(
    params: float, dtype: str, batch: int, tokens: float, floor_dtype: str | None = None
) -> float:
    r"""Device memory of a model and one batch: :math:`P\,b + B\,T\,2\,L\,d\,b`.

    With ``floor_dtype`` (a run's noise floor) the half-precision copy's weights
    :math:`P\,b_\mathrm{floor}` are added: both copies stay loaded.
    """
    weights = params * BYTES[dtype] + (params * BYTES[floor_dtype] if floor_dtype else 0.0)
    return weights + batch * _sequence_bytes(params, dtype, tokens)


def largest_batch(
    free: float,
    params: float,
    dtype: str,
    tokens: float,
    cap: int,
    floor_dtype: str | None = None,
) -> int:
    r"""The largest batch whose :func:`memory_bytes` fits :data:`BATCH_MEMORY_SHARE` of ``free``.

    .. math:: B = \min\Big(c,\ \max\Big(1, \Big\lfloor
              \frac{s\,F - P\,b}{T\,2\,L\,d\,b} \Big\rfloor\Big)\Big)

    with :math:`F` the free bytes, :math:`s` the share, :math:`c` = ``cap`` (a larger batch
    than the prompts scored together changes nothing) and :math:`T` the longest prompt's
    tokens.
    """
    room = BATCH_MEMORY_SHARE * free - memory_bytes(params, dtype, 0, tokens, floor_dtype)
    fits = int(room // _sequence_bytes(params, dtype, tokens)) if room > 0 else 1
    return int(min(cap, max(1, fits)))


def model_params(spec: Any) -> tuple[float | None, float | None]:
    """``(parameters, active parameters)`` of a model (a :class:`psens.models.spec.ModelSpec`),
    without loading it (None, None when unknown: a served model, or a hub id the model table
    does not list).

    From the model table (``params``, ``active_params``, billions), else a folder's
    ``config.json`` (:math:`12 L d^2 + V d`) or a GGUF file's size (2 bytes per parameter).
    """
    if spec.is_served:
        return None, None
    row = spec.table_row()
    if row and row.get("params"):
        params = float(row["params"]) * 1e9
        active = float(row["active_params"]) * 1e9 if row.get("active_params") else params
        return params, active
    src = spec.source
    path = src.get("path")
    if path is None or src["kind"] == "hub":
        return None, None
    path = Path(path)
    if src["kind"] == "gguf":
        params = path.stat().st_size / 2.0
        return params, params
    cfg_file = path / "config.json"
    if not cfg_file.exists():
        return None, None
    conf = json.loads(cfg_file.read_text())
    conf = conf.get("text_config", conf)
    d, layers = conf.get("hidden_size"), conf.get("num_hidden_layers")
    if not d or not layers:
        return None, None
    params = 12.0 * layers * d * d + conf.get("vocab_size", 0) * d
    return params, params


def forward_params(spec: Any) -> float | None:
    r"""Parameters one token's forward pass multiplies, for the FLOP model: the
    non-embedding parameters :math:`N` (Kaplan et al. 2020, :math:`C_\mathrm{forward}
    \approx 2N` per token; looking up an embedding costs no FLOP), None for a served model.

    A MoE model of the model table: its active parameters. Otherwise, when the model's
    ``config.json`` is on this machine (:func:`psens.models.loading.local_config`):
    :math:`L\,(2\,d\,h\,d_h + 2\,d\,k\,d_h + 3\,d\,d_\mathrm{ff})` (attention with
    :math:`h` query and :math:`k` key/value heads of size :math:`d_h`, a gated MLP); else the
    table's or :func:`model_params`' parameters.
    """
    from psens.models.loading import local_config

    params, active = model_params(spec)
    if spec.is_served:
        return None
    if params is not None and active is not None and active < params:  # a MoE model
        return active
    conf = local_config(spec.source) or {}
    conf = conf.get("text_config", conf)
    d, layers = conf.get("hidden_size"), conf.get("num_hidden_layers")
    heads = conf.get("num_attention_heads")
    if d and layers and heads:
        kv = conf.get("num_key_value_heads") or heads
        hd = conf.get("head_dim") or d // heads
        ff = conf.get("intermediate_size") or 4 * d
        return float(layers * (2 * d * heads * hd + 2 * d * kv * hd + 3 * d * ff))
    return active
