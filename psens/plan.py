r"""What a run will cost, before anything is loaded: ``psens plan CONFIG``.

:func:`make_plan` resolves every model of a config (:attr:`psens.config.RunConfig.model_specs`:
a packaged model, a name of the model table, a hub id, a folder, a GGUF file or a served
entry), the dataset, split, templates, shot settings and the variables of every item
(:class:`psens.runner.Plan`, the run's own item selection) without reading any weights, and
returns one :class:`ModelCost` per model, from the cost model of
:mod:`psens.models.hardware`:

* **forward passes**: the model's masked prompts (:meth:`psens.runner.Plan.forward_passes`);
* **time**: :func:`psens.runner.model_seconds`, the FLOP model the run prints before its
  first block (:func:`psens.runner.estimate`): per token computed on a model of :math:`P`
  forward parameters (non-embedding; a MoE model's active ones,
  :func:`psens.models.hardware.forward_params`)

  .. math:: t = \frac{2\,P}{R_{d,\mathrm{dtype}}}

  with :math:`R` the device's throughput at the run's dtype (:data:`THROUGHPUT`); the tokens
  computed are the prefix tree's (shared prefixes once, :func:`psens.runner.prompt_work`),
  a cloze run's options (every option's tokens after every scored prompt,
  :func:`psens.runner.cloze_work`), the unmasked prediction's (one pass per item, template
  and shot setting) and the noise floor's second scoring at its dtype's rate (on a CPU
  without native bfloat16/float16, :data:`psens.models.hardware.HALF_SLOWDOWN_CPU` times
  slower than float32: :func:`psens.models.hardware.half_factor`), plus the loads; a
  served model has no local cost (its server's speed is not known here);
* **memory**: :func:`psens.models.hardware.memory_bytes`, :math:`P\,b + B\,T\,2\,L\,d\,b`
  (the weights at :math:`b` bytes per parameter and the keys and values of one batch of
  :math:`B` prompts, ``batch_size`` or the one ``"auto"`` picks,
  :func:`psens.runner.resolve_batch`), against the free memory of the device (CPU:
  available RAM; CUDA: ``torch.cuda.mem_get_info``; ``auto``: every GPU's, else the CPU's);
* **store size**: the model's share of :func:`psens.runner.estimate`;
* **download**: a hub model without a local copy must fetch :math:`P \cdot b` bytes.

:math:`P` comes from :func:`psens.models.hardware.model_params` (the model table, a folder's
``config.json`` or a GGUF file's size). :math:`T` is the mean rendered prompt length in
characters divided by :data:`CHARS_PER_TOKEN` (no tokenizer is loaded).

Refused with ``fail(where, problem, fix)`` (exit 2 on the command line), before any store is
created, by the same checks as ``psens run``: an unknown dataset or model (by the config and
the run's item selection), ``n_vars`` above the dense limit (by the config, pointing at the
sparse path), a device this machine lacks, ``batch_size = "auto"`` on a device without
memory information, ``scheduler = "cuda"`` without dask-cuda or CUDA; and a local model that
does not fit the device's free memory unless ``device = "auto"`` or the model is served, and
with ``offline`` a hub id that the model table does not list.

References
----------
Qin, R., Wang, Q., Wang, T., Wei, Z. and Shen, W. Evaluating and explaining prompt
sensitivity of LLMs using interactions. ICML 2026.
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass

from psens._validation import fail
from psens.config import RunConfig
from psens.models import hardware
from psens.models.hardware import BYTES, CHARS_PER_TOKEN, THROUGHPUT, cpu_name, flop_seconds
from psens.runner import ASSUMED_TOKENS, Plan, dtype_name

__all__ = [
    "CHARS_PER_TOKEN",
    "THROUGHPUT",
    "ModelCost",
    "ResolvedRun",
    "RunPlan",
    "calibrate",
    "cpu_name",
    "flop_seconds",
    "format_plan",
    "make_plan",
    "resolve",
]

WHERE = "psens plan"


@dataclass(frozen=True)
class ResolvedRun:
    """A run checked once and resolved: what :func:`psens.run` executes and what its dask
    workers receive (they re-read nothing). Made by :func:`resolve` (``psens.plan(config)``).

    Attributes
    ----------
    config : RunConfig
        The checked config.
    models : tuple of ModelSpec
        The resolved ``models`` entries (:attr:`psens.config.RunConfig.model_specs`).
    plan : psens.runner.Plan
        The items (the dataset read once), their variables, the shot examples, the
        templates and the rendered prompts and targets.
    tau, normalization, solvers, dtype, device, scheduler
        The settings the run's numbers are made with and where it runs.
    batch : int
        The batch the scorers use (``batch_size``, or the one ``"auto"`` picks:
        :func:`psens.runner.resolve_batch`).
    cost : dict
        The cost estimate (:func:`psens.runner.estimate`: forward passes, seconds, store
        bytes, tokens).
    loading : dict or None
        How each local model is loaded (dtype, attention; :func:`psens.runner.check_models`),
        with the model checks done (every model found, served models answering, answer
        tokens distinct in a format space); None when resolved without them (``psens
        plan`` loads nothing): :func:`psens.run` completes it first.
    """

    config: RunConfig
    models: tuple
    plan: Plan
    tau: float
    normalization: str
    solvers: tuple[str, ...]
    dtype: str | None
    device: str
    batch: int
    scheduler: str | None
    cost: dict
    loading: dict | None = None

    @property
    def scoring(self) -> RunConfig:
        """The config the scorers are built with: ``batch_size`` the resolved batch."""
        cached = self.__dict__.get("_scoring")
        if cached is None or cached.batch_size != self.batch:
            import dataclasses

            cached = dataclasses.replace(self.config, batch_size=self.batch)
            cached.__dict__["_specs"] = self.config.__dict__.get("_specs")  # resolved once
            object.__setattr__(self, "_scoring", cached)
        return cached


def resolve(
    config: RunConfig | dict | str | os.PathLike | ResolvedRun,
    *,
    models: bool = True,
    offline: bool = False,
    free_bytes: float | None = None,
    checked: bool = False,
) -> ResolvedRun:
    """Check a run once and resolve it (``psens.plan(config)``): every check that can fail
    before scoring, in one place.

    Parameters
    ----------
    config : RunConfig, dict, path or ResolvedRun
        A resolved run is returned as it is (completed with the model checks when
        ``models`` asks for them and it was resolved without).
    models : bool
        Also check the models (each found, served ones answering, answer tokens) and
        resolve how each is loaded (``loading``); False: the items and the cost only, no
        tokenizer or weights touched (``psens plan``).
    offline : bool
        No network; a dataset that is not on this machine gives an upper-bound plan
        without prompts (``psens plan --offline``; such a run cannot be executed).
    free_bytes : float, optional
        The device's free memory for ``batch_size = "auto"`` (default: measured).
    checked : bool
        ``config`` is a :class:`RunConfig` already checked (:meth:`RunConfig.check`) and
        unchanged since: it is not checked again.

    Returns
    -------
    ResolvedRun
    """
    from psens.runner import check_device, check_scheduler, estimate, resolve_batch

    if isinstance(config, ResolvedRun):
        return _with_models(config) if models and config.loading is None else config
    if checked and isinstance(config, RunConfig):
        cfg = config
    else:
        cfg = RunConfig.from_any(config)  # the one config check
    specs = tuple(cfg.model_specs)  # unknown models are refused here
    if offline:
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    check_scheduler(cfg)  # before the dataset: a scheduler that is not there fails fast
    check_device(cfg)  # cuda without CUDA, mps without MPS
    plan = _items_plan(cfg, offline)  # reads the dataset, once
    batch = resolve_batch(plan, free_bytes)  # "auto" without memory information: refused
    rr = ResolvedRun(
        config=cfg,
        models=specs,
        plan=plan,
        tau=cfg.tau,
        normalization=cfg.normalization,
        solvers=tuple(cfg.solvers),
        dtype=cfg.dtype,
        device=cfg.device,
        batch=batch,
        scheduler=cfg.scheduler,
        cost=estimate(plan),
    )
    return _with_models(rr) if models else rr


def _with_models(rr: ResolvedRun) -> ResolvedRun:
    """``rr`` with the model checks done and ``loading`` resolved (:func:`resolve`)."""
    import dataclasses

    from psens.runner import check_models

    if rr.plan.prompts is None:
        fail(
            "psens run",
            f"dataset {rr.config.dataset!r} is not on this machine",
            "Resolve the run with the network on (or pass dataset_path)",
        )
    return dataclasses.replace(rr, loading=check_models(rr.scoring, rr.plan))


def _in_hub_cache(hub_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return False
    return isinstance(try_to_load_from_cache(hub_id, "config.json"), str)


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
    """A costed run: the device, its free memory, the batch and one :class:`ModelCost` per
    model."""

    config: RunConfig
    device: str
    device_name: str
    dtype: str
    free_bytes: float | None
    throughput: float
    models: list[ModelCost]
    items: int
    batch: int = 32
    calibrated: bool = False
    dataset_missing: bool = False
    computed_tokens: float = 0.0  # tokens computed per scored prompt (floor apart)
    floor_factor: float = 1.0  # the noise floor's dtype: times slower than float32 here
    resolved: ResolvedRun | None = None  # the run it costs (:func:`resolve`)


def make_plan(
    config: RunConfig | dict | str | os.PathLike | ResolvedRun,
    *,
    offline: bool = False,
    free_bytes: float | None = None,
    throughput: float | None = None,
) -> RunPlan:
    """Cost a run without loading weights; refuse what cannot run (see the module docstring).

    Parameters
    ----------
    config : RunConfig, dict, path or ResolvedRun
        A config is checked and resolved once (:func:`resolve`, without the model checks
        that load tokenizers); the plan keeps it as ``resolved``.
    offline : bool
        No network: hub models are checked against the model table only.
    free_bytes : float, optional
        The device's free memory (default: measured, :func:`psens.models.hardware.free_memory`).
    throughput : float, optional
        FLOP/s replacing :data:`THROUGHPUT` (a measured rate, ``--calibrate``).
    """
    from psens.runner import estimate
    from psens.runner import throughput as rate_of

    rr = config if isinstance(config, ResolvedRun) else None
    if rr is None:
        cfg = RunConfig.from_any(config)
        measured, device_name = hardware.free_memory(cfg.device)
        free = measured if free_bytes is None else free_bytes
        rr = resolve(cfg, models=False, offline=offline, free_bytes=free, checked=True)
    else:
        measured, device_name = hardware.free_memory(rr.device)
        free = measured if free_bytes is None else free_bytes
    cfg, plan, batch, specs = rr.config, rr.plan, rr.batch, list(rr.models)
    est = rr.cost if throughput is None else estimate(plan, measured=throughput)
    passes = plan.forward_passes() // max(len(specs), 1)
    store_share = est["store_bytes"] / max(len(specs), 1)
    costs = [
        _model_cost(spec, cfg, offline, passes, est, seconds, store_share, batch, free)
        for spec, seconds in zip(specs, est["model_seconds"], strict=True)
    ]
    dtype = dtype_name(cfg.dtype) if cfg.dtype != "auto" else "auto"
    rate = throughput if throughput is not None else rate_of(cfg, dtype_name(cfg.dtype))
    rp = RunPlan(cfg, cfg.device, device_name, dtype, free, rate, costs, len(plan.items), batch)
    rp.resolved = rr
    rp.dataset_missing = plan.prompts is None
    rp.computed_tokens = est["computed_tokens"]
    if cfg.floor_dtype and hardware.placement(cfg.device) == "cpu":
        rp.floor_factor = hardware.half_factor(cfg.floor_dtype)
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
        self.versions = None
        self.cloze = cfg.answer == "cloze"  # its options are not counted: no items here


def _items_plan(cfg: RunConfig, offline: bool) -> Plan:
    """The run's own item selection (:class:`psens.runner.Plan`); offline, a known dataset
    that is not on this machine gives :class:`_UpperBound` (it is to download). A
    ``dataset_path`` is a local copy, never to download: it is read (or refused) as the run
    reads it."""
    from psens import datasets

    datasets.canonical_name(cfg.dataset)  # an unknown dataset is refused, naming the known ones
    if offline and cfg.dataset_path is None:
        try:
            datasets.load(cfg.dataset, cfg.split, path=cfg.dataset_path)
        except (OSError, ValueError, ConnectionError):
            return _UpperBound(cfg)
    return Plan(cfg)


def _model_cost(spec, cfg, offline, passes, est, seconds, store_share, batch, free):
    from psens.models.loading import resolve_dtype

    tokens = est["tokens"]
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
        from psens.models.loading import HubUnavailable

        try:
            spec.check_available()  # a packaged model's package; a hub id on the hub
        except HubUnavailable:
            fail(
                WHERE,
                f"model {spec.name!r} ({spec.source['path']}) has no local copy and the hub "
                "is off or cannot be reached to check it",
                "Plan without the network, sizes from the model table: psens plan CONFIG "
                "--offline (or download the model once with the hub on)",
            )
    elif kind == "packaged":
        spec.check_available()  # no network: the package is installed or not
    params = hardware.model_params(spec)[0]
    if params is None:
        fail(
            WHERE,
            f"model {spec.name!r}: its number of parameters is unknown (no table row, no config)",
            "Add it to data/models.csv or pass a folder with a config.json",
        )
    dtype = resolve_dtype(spec.source, cfg.dtype)  # "auto": the checkpoint's, if it is here
    memory = hardware.memory_bytes(params, dtype, batch, tokens, cfg.floor_dtype)
    if free is not None and memory > free and cfg.device != "auto":
        fail(
            WHERE,
            f"model {spec.name!r} needs about {_gb(memory)} GB at {dtype} on {cfg.device} but "
            f"only {_gb(free)} GB are free",
            'Set device = "auto" (shard it over the devices), use a served entry, a smaller '
            "dtype or a smaller batch_size",
        )
    download = 0.0
    if src["kind"] == "hub" and (offline or not _in_hub_cache(str(src["path"]))):
        download = params * BYTES[dtype]
    return ModelCost(
        spec.name, kind, params, passes, tokens, seconds, memory, store_share, download
    )


def calibrate(rp: RunPlan) -> RunPlan:
    r"""Replace the reference throughput by a measured one: score one batch per local model.

    For each model whose weights are here (not served, not a hub model still to download),
    the run's scorer (:func:`psens.runner.run_scorer`, the run's device, dtype and batch)
    scores the first ``batch`` masked prompts of the first item and template (after one
    warm-up call); the measured rate :math:`r` (masked prompts per second) gives the
    effective throughput :math:`R = 2\,P\,W r / 2^n` of the model (:math:`W`: the tokens the
    prefix tree computes for the prompt, :func:`psens.runner.prompt_work`), and its time is
    :func:`psens.runner.model_seconds` at that throughput (the header prints the first
    calibrated model's). Loads weights: the plan's other columns are computed without.
    """
    import dataclasses
    import time

    import numpy as np

    from psens.runner import cloze_work, model_scale, model_seconds, prompt_work, run_scorer

    cfg = dataclasses.replace(rp.config, batch_size=rp.batch)
    # the resolved run's items (its dataset read once), else read them
    plan = rp.resolved.plan if rp.resolved is not None else _items_plan(cfg, offline=True)
    if plan.prompts is None:
        return rp
    item, variables = plan.items[0], plan.variables[0]
    masks = np.arange(min(rp.batch, 1 << len(variables)), dtype=np.int64)
    shots = plan.shots[plan.shot_keys[0]]
    for spec, m in zip(cfg.model_specs, rp.models, strict=True):
        if spec.is_served or m.download_bytes or m.params is None:
            continue
        scorer = run_scorer(cfg, spec)
        score = scorer.choice_logprobs if plan.cloze else scorer.value
        args = dict(shots=shots, variables=variables, progress=False)
        score(item, plan.templates[0], masks[:1], **args)  # warm-up
        start = time.perf_counter()
        score(item, plan.templates[0], masks, **args)
        rate = len(masks) / max(time.perf_counter() - start, 1e-9)
        work = prompt_work(plan)[0][0, 0, 0] + cloze_work(plan)[0, 0, 0]
        measured = 2.0 * model_scale(spec) * work / (1 << len(variables)) * rate
        m.seconds = model_seconds(plan, spec, measured)
        if not rp.calibrated:
            rp.throughput = measured
            rp.calibrated = True
    return rp


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f}" if n >= 1e8 else f"{n / 1e9:.3f}"


def format_plan(rp: RunPlan) -> str:
    """The plan as a text table, one row per model and a total."""
    from psens.runner import fmt_bytes, fmt_time

    cfg = rp.config
    free = "unknown" if rp.free_bytes is None else f"{_gb(rp.free_bytes)} GB free"
    lines = [
        f"plan: {cfg.dataset} ({cfg.split or 'default split'}), {rp.items} items, "
        f"{len(cfg.template_names)} templates, shots {cfg.shots or [0]}, n_vars <= {cfg.n_vars}",
        f"device: {rp.device} ({rp.device_name}), {rp.dtype}, {free}, batch {rp.batch}; "
        f"{rp.throughput / 1e12:.3g} TFLOP/s {'measured' if rp.calibrated else 'reference'}",
        f"{'model':<32} {'kind':<8} {'params':>7} {'passes':>12} {'time':>9} "
        f"{'memory':>9} {'store':>9} {'download':>9}",
    ]
    total_s = total_dl = 0.0
    for m in rp.models:
        params = "-" if m.params is None else f"{m.params / 1e9:.3g}B"
        t = "served" if m.seconds is None else fmt_time(m.seconds)
        mem = "-" if m.memory_bytes is None else f"{_gb(m.memory_bytes)} GB"
        dl = f"{_gb(m.download_bytes)} GB" if m.download_bytes else "-"
        lines.append(
            f"{m.name[:32]:<32} {m.kind:<8} {params:>7} {m.passes:>12,} {t:>9} {mem:>9} "
            f"{fmt_bytes(m.store_bytes):>9} {dl:>9}"
        )
        total_s += m.seconds or 0.0
        total_dl += m.download_bytes
    passes = sum(m.passes for m in rp.models)
    store_total = sum(m.store_bytes for m in rp.models)
    lines.append(
        f"total: {passes:,} forward passes, {fmt_time(total_s)}, store "
        f"{fmt_bytes(store_total)}, to download {_gb(total_dl)} GB "
        f"({sum(1 for m in rp.models if m.download_bytes)} models)"
    )
    if rp.dataset_missing:
        lines.append(
            f"dataset {cfg.dataset!r} is not on this machine: to download; passes and store "
            f"are upper bounds (every item at n = {cfg.n_vars}), {ASSUMED_TOKENS:.0f} tokens "
            "per prompt assumed"
        )
    lines.append(
        "time = 2 x params x tokens computed (shared prefixes once, cloze options, "
        f"predictions, noise floor) / throughput, plus the loads; {rp.computed_tokens:.0f} "
        f"tokens computed per prompt ({rp.models[0].tokens:.0f} in the prompt)"
        if rp.models
        else "no models"
    )
    if cfg.floor_dtype:
        lines.append(
            f"noise floor in {cfg.floor_dtype}: "
            + (
                f"{rp.floor_factor:g}x slower than float32 on this CPU (no native "
                f"{cfg.floor_dtype}; the factor measured on an AVX2-only CPU)"
                if rp.floor_factor != 1.0
                else f"at the device's {cfg.floor_dtype} rate"
            )
        )
    return "\n".join(lines)


class _CallableModule(types.ModuleType):
    """This module, callable: ``psens.plan(config)`` is :func:`resolve`."""

    def __call__(self, config, **kwargs) -> ResolvedRun:
        return resolve(config, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
