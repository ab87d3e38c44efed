"""The IPS pipeline: datasets + templates -> models -> AND-OR decomposition -> store.

``psens.run(config)`` (and ``psens run CONFIG`` on the command line) executes a run block by
block, one block = one (model, sample): every template (and shot setting) of the sample
is scored on all ``2**n`` masked prompts, decomposed (paper eq. 12), checked for universal
matching and written to its own zarr chunks with ``status = done`` last.

* **Resume.** Starting the same config again skips the blocks that are done; a block that
  was being written when the process died is still pending and is recomputed, and so is
  a done block whose chunks no longer match their checksums (:func:`psens.store.verify`).
  Each block depends only on the config, so a resumed run ends identical to an
  uninterrupted one.
* **Fingerprints.** A store records digests of what its numbers depend on (attr
  ``fingerprints``): each selected item's content (question, options, answer, context,
  passage and the chosen words), the few-shot examples, the rendered prompts and
  targets, every model's files (config, tokenizer, weights; the GGUF file of a GGUF or
  packaged model; the local revision of a hub model), the solver settings and the psens
  version. A resume recomputes them and refuses to go on, naming what differs, so an
  edited dataset file or replaced weights never mix into one store.
* **One run per store.** The run holds the store's lock (:func:`psens.store.lock`) from
  start to end; a second run on the same store is refused with the first one's PID. Block
  writers carry the store's ``run_id``, so a stale process cannot write into a store that
  was started over with ``overwrite``.
* **Failures.** An exception while scoring a block is recorded (``status = failed``, the
  error text and NaN values) and the run goes on; the next start retries failed blocks.
* **Noise floor.** With ``noise_floor`` set, every block's masked prompts are scored a
  second time by the same model loaded in half precision (both models stay loaded, no
  more), stored as ``v_floor``, and the IPS between the two scorings is stored per order
  band as ``floor`` (:func:`psens.ips.floor.floor_bands`).
* **Distributed.** ``scheduler = "local:N"`` runs the blocks on a dask.distributed
  LocalCluster of N single-threaded worker processes; ``"tcp://host:port"`` on an existing
  cluster (one worker per GPU on GPU machines). Workers write their own zarr regions; the
  numbers equal a serial run with the same ``threads``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from psens import store
from psens._validation import fail, shown
from psens.config import RunConfig, parse_scheduler
from psens.models.spec import ModelSpec
from psens.store.labels import model_names

__all__ = [
    "block_prompts",
    "check_disk",
    "estimate",
    "execute",
    "fingerprints",
    "recalibrate",
    "select_items",
    "summarize",
]

#: Seconds to load the 135M reference model (measured on one 2-core CPU); a model of P
#: parameters takes ``max(1, P / REFERENCE_PARAMS)`` times as long.
LOAD_SECONDS = 10.0
REFERENCE_PARAMS = 0.135e9
#: Tokens per masked prompt assumed when the dataset is not on this machine (``psens plan
#: --offline``).
ASSUMED_TOKENS = 256.0


# ----------------------------------------------------------------------------- inputs


def _load_rows(cfg: RunConfig) -> list:
    """The run's dataset, read (:func:`psens.datasets.load`)."""
    from psens import datasets

    return datasets.load(cfg.dataset, cfg.split, path=cfg.dataset_path)


def select_items(cfg: RunConfig, rows: list | None = None) -> list:
    """The items of a run: a seeded choice of ``samples`` items (kept in dataset order),
    or the listed ids; ``rows``: the dataset already read (default: read it)."""
    from psens import datasets

    items = _fitting(cfg, _load_rows(cfg) if rows is None else rows)
    return datasets.choose(items, cfg.samples, cfg.seed, cfg.dataset)


def _fitting(cfg: RunConfig, items: list) -> list:
    """The items a run's templates can show: all of them, except that a layout template
    written for fixed options (ProSA's ARC-Challenge prompts show A-D) keeps only the items
    with exactly those options (as ProSA's four-option ARC-Challenge)."""
    from psens import prompts

    labels = {prompts.get_template(t).option_labels for t in cfg.template_names}
    labels.discard(())
    if not labels:
        return items
    if len(labels) > 1:
        fail(
            "psens config",
            f"the templates show different option sets {sorted(labels)}",
            "Use templates written for one option set in a run",
        )
    (want,) = labels
    return [it for it in items if tuple(lab for lab, _ in it.options) == want]


def _perturbed_items(cfg: RunConfig, rows: list) -> tuple[list, list[dict]]:
    """The items of a ``perturbations`` file (its order; the first ``samples`` of them, or
    the listed ids) and, per item, its versions ``{"original" | rewrite: (item,
    variables)}`` with the variables aligned (:func:`psens.perturbations.variants`)."""
    from psens import datasets
    from psens.perturbations import load_perturbations, variants

    entries = load_perturbations(cfg.perturbations)
    if isinstance(cfg.samples, int):
        entries = entries[: cfg.samples]
    else:
        entries = datasets.pick_ids(
            entries, cfg.samples, cfg.perturbations, "List ids of the perturbation file"
        )
    by_id = {it.id: it for it in rows}
    missing = [e.id for e in entries if e.id not in by_id]
    if missing:
        fail(
            "psens config",
            f"{cfg.perturbations} names items that are not in {cfg.dataset}: {missing[:5]}",
            "Use the dataset's item ids (psens.datasets.load(...)[k].id)",
        )
    items = [by_id[e.id] for e in entries]
    versions = [
        variants(it, e, n_max=cfg.n_vars, seed=cfg.seed, rule=cfg.variables)
        for it, e in zip(items, entries, strict=True)
    ]
    return items, versions


def _shot_items(cfg: RunConfig, items, rows: list) -> dict[int, tuple]:
    """Few-shot examples per shot count: the first k of one seeded draw from a pool
    disjoint from the evaluated items, so settings share their first examples
    (``shots_from = "paper"``: the first k of the IPS paper's three, appendix E.6)."""
    from psens import prompts

    if not cfg.shots:
        return {0: ()}
    k_max = max(cfg.shots)
    if k_max == 0:
        return {0: ()}
    if cfg.shots_from == "paper" and all(it.is_mcq for it in items):  # k <= 3: config.check
        return {k: prompts.PAPER_SHOTS[:k] for k in cfg.shots}
    pool = _fitting(cfg, rows)
    drawn = prompts.select_shots(pool, k_max, exclude=items, seed=cfg.seed)
    return {k: tuple(drawn[:k]) for k in cfg.shots}


def _check_templates_fit(items, templates: Sequence[str], dataset: str) -> None:
    """Refuse a template that cannot show the run's items: ``open`` leaves out the options
    of an MCQ item (its option words could not be masked), an MCQ template needs options."""
    from psens import prompts

    for name in templates:
        kind = prompts.get_template(name).kind
        for it in items:
            if kind == "open" and it.is_mcq:
                fail(
                    "psens config",
                    f"template {name!r} is for open-ended items but item {it.id!r} has options "
                    f"({dataset} is a multiple-choice dataset)",
                    'Use the MCQ templates (templates = "ips5") for this dataset',
                )
            if kind == "cloze" and not it.is_mcq:
                fail(
                    "psens config",
                    f'answer = "cloze" but item {it.id!r} has no options ({dataset} is '
                    "open-ended): a cloze prompt scores each option's text",
                    'Use a multiple-choice dataset, or answer = "letter"',
                )
            if kind == "mcq" and not it.is_mcq:
                fail(
                    "psens config",
                    f"template {name!r} is for multiple-choice items but item {it.id!r} has no "
                    f"options ({dataset} is open-ended)",
                    "Use templates written for open-ended items (kind 'open')",
                )


def _check_distinct_prompts(rendered: np.ndarray, templates: Sequence[str]) -> None:
    """Refuse two templates whose prompts are the same for every item (a cloze prompt does
    not show the option markers that tell ``ips5`` from ``ips1``): their IPS would be 0 by
    construction."""
    seen: dict[tuple, str] = {}
    for t, name in enumerate(templates):
        key = tuple(str(x) for x in rendered[..., t].ravel())
        if key in seen:
            fail(
                "psens config",
                f"templates {seen[key]!r} and {name!r} render the same prompts in cloze form "
                "(what tells them apart is in the option lines, which it does not show)",
                f"Drop {name.removesuffix('-cloze')!r} from 'templates'",
            )
        seen[key] = name


class Plan:
    """Everything a run needs before any model is loaded (items, variables, prompts)."""

    def __init__(self, cfg: RunConfig):
        from psens import prompts

        self.cfg = cfg
        self.versions: list[dict] | None = None  # appendix L: {rewrite: (item, variables)}
        rows = _load_rows(cfg)  # the dataset, read once
        if cfg.perturbations is None:
            self.items = select_items(cfg, rows)
            self.templates = cfg.template_names
        else:
            self.items, self.versions = _perturbed_items(cfg, rows)
            self.templates = [
                prompts.rewrite_name(t, r) if r else t
                for r in (None, *prompts.REWRITES)
                for t in cfg.template_names
            ]
        _check_templates_fit(self.items, self.templates, cfg.dataset)
        self.cloze = cfg.answer == "cloze"
        if self.cloze:
            for it in self.items:
                prompts.check_cloze_item(it, "psens config")
        self.variables = (
            [
                []
                if cfg.predictions_only
                else prompts.variables(
                    it,
                    n_max=cfg.n_vars,
                    seed=cfg.seed,
                    rule=cfg.variables,
                    options=not self.cloze,  # a cloze prompt shows the question only
                )
                for it in self.items
            ]
            if self.versions is None
            else [v["original"][1] for v in self.versions]
        )
        for it, vs in zip(self.items, self.variables, strict=True):
            if not vs and not cfg.predictions_only:
                fail(
                    "psens run",
                    f"item {it.id!r} has no input variables",
                    "Drop it from 'samples' (its question and options have no words)",
                )
        self.n_max = max(len(vs) for vs in self.variables)
        self.shots = _shot_items(cfg, self.items, rows)
        self.shot_keys = list(cfg.shots) if cfg.shots else [0]
        shape = (len(self.items), len(self.shot_keys), len(self.templates))
        self.prompts = np.empty(shape, dtype=object)
        for s in range(len(self.items)):
            for h, k in enumerate(self.shot_keys):
                for t, name in enumerate(self.templates):
                    shown = self.version(s, name)[0]
                    self.prompts[s, h, t] = prompts.render(shown, name, shots=self.shots[k])
        # an MCQ target in the item's own labels, the label space of the stored predictions
        # (a format that shows "a" or "1" labels shows the same option)
        prefix = prompts.get_template(self.templates[0]).answer_prefix
        self.targets = [prefix + it.answer if it.is_mcq else it.answer for it in self.items]
        if self.cloze:
            _check_distinct_prompts(self.prompts, self.templates)

    @property
    def n_options(self) -> int:
        """The most options of an item (the ``option`` dim of a cloze run)."""
        return max(len(it.options) for it in self.items)

    def cloze_coords(self) -> dict[str, list]:
        """Per item its option labels, its options' UTF-8 bytes and the position of its
        answer (:func:`psens.store.build`'s ``cloze``)."""
        return {
            "labels": [[lab for lab, _ in it.options] for it in self.items],
            "bytes": [[len(text.encode("utf-8")) for _, text in it.options] for it in self.items],
            "answer": [[lab for lab, _ in it.options].index(it.answer) for it in self.items],
        }

    def version(self, sample: int, template: str) -> tuple[Any, list]:
        """The item and variables a template shows for a sample: the item itself, or (with
        ``perturbations``) the instruction rewrite the template names, with the variables
        aligned to the original's."""
        from psens import prompts

        if self.versions is None:
            return self.items[sample], self.variables[sample]
        return self.versions[sample][prompts.rewrite_of(template) or "original"]

    @property
    def blocks(self) -> int:
        return len(self.cfg.models) * len(self.items)

    def forward_passes(self) -> int:
        """Masked prompts scored, the noise floor's second scoring included."""
        per = sum(1 << len(vs) for vs in self.variables)
        scorings = 2 if self.cfg.floor_dtype else 1
        return len(self.cfg.models) * per * len(self.templates) * len(self.shot_keys) * scorings


# ----------------------------------------------------------------------------- estimate


def model_scale(spec: ModelSpec) -> float:
    """Parameters per token of a model's forward pass in the FLOP model
    (:func:`psens.models.hardware.forward_params`; the 135M reference for a served or
    unknown model)."""
    from psens.models.hardware import forward_params

    return forward_params(spec) or REFERENCE_PARAMS


def dtype_name(dtype: str | None) -> str:
    """The canonical dtype a run is costed at (float32 for the default and ``"auto"``)."""
    from psens.models.loading import DTYPE_NAMES

    return DTYPE_NAMES.get(dtype or "float32", "float32")


def prompt_tokens(plan: Plan, longest: bool = False) -> float:
    """Tokens per masked prompt: the mean (``longest``: the largest) rendered prompt length
    in characters divided by :data:`psens.models.hardware.CHARS_PER_TOKEN` (no tokenizer is
    loaded), or :data:`ASSUMED_TOKENS` when the plan has no prompts (its dataset is not
    here)."""
    from psens.models.hardware import CHARS_PER_TOKEN

    if plan.prompts is None:
        return ASSUMED_TOKENS
    lengths = [len(p) for p in plan.prompts.ravel()]
    chars = max(lengths) if longest else sum(lengths) / len(lengths)
    return chars / CHARS_PER_TOKEN


def throughput(cfg: RunConfig, dtype: str) -> float:
    """FLOP/s of the run's device at the canonical ``dtype``
    (:func:`psens.models.hardware.rate`: :data:`psens.models.hardware.THROUGHPUT`, on a CPU
    without native half precision the float32 rate over
    :data:`psens.models.hardware.HALF_SLOWDOWN_CPU`; ``device = "auto"``: a GPU's when there
    is one, else the CPU's)."""
    from psens.models.hardware import placement, rate

    return rate(placement(cfg.device), dtype)


def prompt_work(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    r"""Tokens computed per (sample, shot, template): the prefix tree's and the prediction's.

    The masked prompts of a prompt of :math:`L` tokens whose variables start at tokens
    :math:`s_1 < \dots < s_n` share their prefixes (:class:`psens.models.Scorer`'s tree
    walk): the part before :math:`s_1` is computed once and the part between :math:`s_j`
    and :math:`s_{j+1}` (:math:`s_{n+1} = L`) once per distinct prefix, :math:`2^j` times,

    .. math:: W = s_1 + \sum_{j=1}^{n} 2^j\,(s_{j+1} - s_j),

    against :math:`2^n L` without sharing (the prefix-sharing factor is their ratio); the
    unmasked prediction computes the :math:`L` tokens once more. Positions are characters
    divided by :data:`psens.models.hardware.CHARS_PER_TOKEN` (no tokenizer is loaded);
    without prompts (a dataset not on this machine) every prompt has
    :data:`ASSUMED_TOKENS` and no sharing. Returns ``(tree, prediction)``, each
    ``[sample, shot, template]``.
    """
    cached = plan.__dict__.get("_work")
    if cached is not None:
        return cached
    from psens import prompts
    from psens.models.hardware import CHARS_PER_TOKEN

    shape = (len(plan.items), len(plan.shot_keys), len(plan.templates))
    tree, full = np.empty(shape), np.empty(shape)
    for s in range(shape[0]):
        for h, k in enumerate(plan.shot_keys):
            for t, name in enumerate(plan.templates):
                if plan.prompts is None:
                    n = len(plan.variables[s])
                    tree[s, h, t] = full[s, h, t] = ASSUMED_TOKENS
                    tree[s, h, t] *= 1 << n
                    continue
                shown, shown_vars = plan.version(s, name)
                r = prompts.render_spans(shown, name, shots=plan.shots[k])
                starts = sorted(a for a, _ in prompts.prompt_spans(r, shown_vars))
                bounds = [*starts, len(r.text)]
                chars = bounds[0] + sum(
                    (1 << j) * (bounds[j] - bounds[j - 1]) for j in range(1, len(bounds))
                )
                if not shown_vars:  # predictions only: no masked prompts
                    chars = 0
                tree[s, h, t], full[s, h, t] = chars, len(r.text)
    plan.__dict__["_work"] = out = (tree / CHARS_PER_TOKEN, full / CHARS_PER_TOKEN)
    return out


def cloze_work(plan: Plan) -> np.ndarray:
    r"""Tokens the cloze formulation's option scoring adds per (sample, shot, template)
    (:meth:`psens.models.Scorer.choice_logprobs`), beyond :func:`prompt_work`'s prefix tree.

    Every scored row (the :math:`2^n` masked prompts; a predictions-only run's one unmasked
    prompt) is followed by each of the item's :math:`k` options as a branch of the prefix
    tree, padded to the longest option's :math:`c` tokens (the delimiter and the option's
    text), so :math:`2^n\,k\,c`; a predictions-only run (``n_vars = 0``) has no tree and
    also computes its prompt's :math:`L` tokens once: :math:`L + k\,c`. Zero for a run that
    is not cloze and for a plan without prompts (a dataset not on this machine). Positions
    are characters divided by :data:`psens.models.hardware.CHARS_PER_TOKEN`.
    """
    cached = plan.__dict__.get("_cloze_work")
    if cached is not None:
        return cached
    from psens import prompts
    from psens.models.hardware import CHARS_PER_TOKEN

    shape = (len(plan.items), len(plan.shot_keys), len(plan.templates))
    out = plan.__dict__["_cloze_work"] = np.zeros(shape)
    if not getattr(plan, "cloze", False) or plan.prompts is None:
        return out
    for s, it in enumerate(plan.items):
        for t, name in enumerate(plan.templates):
            prefix = prompts.get_template(name).answer_prefix
            width = max(len(prefix + text) for _, text in it.options) / CHARS_PER_TOKEN
            options = len(it.options) * width
            for h in range(len(plan.shot_keys)):
                n = len(plan.version(s, name)[1])
                if n and not plan.cfg.predictions_only:
                    out[s, h, t] = (1 << n) * options
                else:
                    out[s, h, t] = len(plan.prompts[s, h, t]) / CHARS_PER_TOKEN + options
    return out


def block_work(plan: Plan, sample: int, spec: ModelSpec) -> float:
    r"""Tokens one block computes, counted at the model's dtype:
    :math:`\sum (W + C + L) + \sum (W + C)\,R / R_f` over its shots and templates, with
    :math:`W` the prefix tree's tokens and :math:`L` the unmasked prediction's
    (:func:`prompt_work`), :math:`C` a cloze run's option tokens (:func:`cloze_work`), the
    second term the noise floor's scoring at its dtype's throughput :math:`R_f`
    (:func:`throughput`: on a CPU without native half precision
    :data:`psens.models.hardware.HALF_SLOWDOWN_CPU` times slower than float32)."""
    from psens.models.loading import resolve_dtype

    tree, full = prompt_work(plan)
    scored = float(tree[sample].sum() + cloze_work(plan)[sample].sum())
    work = scored + float(full[sample].sum())
    cfg = plan.cfg
    if cfg.floor_dtype and not spec.is_served and not cfg.predictions_only:
        main = throughput(cfg, resolve_dtype(spec.source, cfg.dtype))
        work += scored * main / throughput(cfg, cfg.floor_dtype)
    return work


def model_seconds(plan: Plan, spec: ModelSpec, measured: float | None = None) -> float | None:
    r"""The time of one model's share of a run, from the FLOP model (None: a served model,
    whose speed is its server's).

    .. math:: t = \frac{2 P \sum_b w_b}{R} + n\,t_\mathrm{load}\,\max(1, P / P_\mathrm{ref})

    :math:`P` the forward pass's parameters (:func:`psens.models.hardware.forward_params`),
    :math:`w_b` the tokens block :math:`b` computes (:func:`block_work`: the prefix tree's,
    the predictions', the noise floor's), :math:`R` the device's throughput at the model's
    dtype (:func:`throughput`; ``measured``: a rate measured at that dtype), and :math:`n`
    loads of :data:`LOAD_SECONDS` (two with a noise floor). ``psens plan`` prints it per
    model and :func:`estimate` sums it.
    """
    from psens.models.hardware import flop_seconds
    from psens.models.loading import resolve_dtype

    if spec.is_served:
        return None
    cfg = plan.cfg
    params = model_scale(spec)
    work = sum(block_work(plan, s, spec) for s in range(len(plan.items)))
    rate = throughput(cfg, resolve_dtype(spec.source, cfg.dtype)) if measured is None else measured
    scorings = 2 if cfg.floor_dtype else 1
    return flop_seconds(params, work, 1, rate) + LOAD_SECONDS * scorings * max(
        1.0, params / REFERENCE_PARAMS
    )


def resolve_batch(plan: Plan, free: float | None = None) -> int:
    r"""The run's batch: ``batch_size``, or for ``"auto"`` the largest that fits.

    ``"auto"``: the smallest over the run's local models of
    :func:`psens.models.hardware.largest_batch` (weights at the model's dtype, the noise
    floor's copy, the keys and values of the longest prompt, :func:`prompt_tokens`) in the
    device's free memory (``free``, default :func:`psens.models.hardware.free_memory`), at
    most :math:`2^{n_\max}` (the masked prompts scored together); served models only: that
    cap. Refused (before any store exists) on a device that reports no free memory.
    """
    cfg = plan.cfg
    if cfg.batch_size != "auto":
        return int(cfg.batch_size)
    from psens.config import MAX_BATCH
    from psens.models import hardware
    from psens.models.loading import resolve_dtype

    cap = min(MAX_BATCH, 1 << plan.n_max)
    local = [spec for spec in cfg.model_specs if not spec.is_served]
    if not local:
        return cap
    if free is None:
        free = hardware.free_memory(cfg.device)[0]
    if free is None:
        fail(
            "psens run",
            f'batch_size = "auto" needs the free memory of the device, and device = '
            f"{cfg.device!r} does not report it",
            'Set batch_size to a number (default 32), or use device = "cpu", "cuda" or "auto"',
        )
    tokens = prompt_tokens(plan, longest=True)
    batches = []
    for spec in local:
        params = hardware.model_params(spec)[0]
        if params is not None:
            dtype = resolve_dtype(spec.source, cfg.dtype)
            batches.append(
                hardware.largest_batch(free, params, dtype, tokens, cap, cfg.floor_dtype)
            )
    return min(batches, default=cap)


def block_prompts(plan: Plan, sample: int) -> int:
    """Masked prompts of one block (all templates and shot settings of ``sample``): the
    weight of the block in the progress bar and the time estimate (``2**n`` per prompt)."""
    return (1 << len(plan.variables[sample])) * len(plan.templates) * len(plan.shot_keys)


def estimate(plan: Plan, measured: float | None = None) -> dict[str, Any]:
    """Forward passes, the time and the store size of a run (printed before it starts).

    The time is the sum of :func:`model_seconds` over the run's models (the FLOP model of
    ``psens plan``; served models are not counted, ``served`` says how many there are);
    after the first block of each model has run on this machine, :func:`recalibrate`
    replaces it by the measured rates. ``measured``: a measured throughput (FLOP/s)
    instead of the table's. ``tokens``: the mean prompt's (:func:`prompt_tokens`);
    ``computed_tokens``: the tokens computed per scored prompt (its share of the prefix
    tree, a cloze run's options, the unmasked prediction: :func:`block_work` without the
    noise floor).
    """
    cfg = plan.cfg
    passes = plan.forward_passes()
    tokens = prompt_tokens(plan)
    tree, full = prompt_work(plan)
    scored = sum(block_prompts(plan, s) for s in range(len(plan.items)))
    computed = float(tree.sum() + cloze_work(plan).sum() + full.sum()) / max(scored, 1)
    each = [model_seconds(plan, spec, measured) for spec in cfg.model_specs]
    seconds = sum(t for t in each if t is not None)
    cells = len(cfg.models) * len(plan.items) * len(plan.shot_keys) * len(plan.templates)
    games = 1 + (len(store.GAME_VARS) - 1) * len(cfg.solvers)  # v, and each solver's split
    games += 1 if cfg.floor_dtype else 0  # v_floor
    size = cells * (1 << plan.n_max) * 8 * games + cells * 200
    return {
        "forward_passes": passes,
        "seconds": seconds,
        "store_bytes": size,
        "tokens": tokens,
        "computed_tokens": computed,
        "model_seconds": each,
        "served": sum(t is None for t in each),
    }


def recalibrate(
    plan: Plan,
    todo: Sequence[tuple[int, int]],
    timed: dict[int, tuple[int, float]],
    load_seconds: float = LOAD_SECONDS,
) -> dict[str, float]:
    r"""The time left once the first block of some models has run on this machine.

    ``timed`` maps a model to its first block's sample and seconds: model :math:`m` runs at
    :math:`u_m = t_m / (P_m\,w_m)` seconds per parameter-token (:math:`w` =
    :func:`block_work`, :math:`P` = the FLOP model's parameters), and a model not timed yet
    at the first timed model's :math:`u` (the FLOP model's assumption: the same FLOP/s).
    Every block ``(m, s)`` still to do (``todo``, in run order) takes
    :math:`u_m\,P_m\,w_{m,s}`; each model in ``todo`` not timed yet first costs
    ``load_seconds`` (the first model's load) scaled by :math:`P_m / P_{m_1}`.

    Returns ``{"rate": masked prompts per second of the first timed block,
    "seconds_left": ...}``.
    """
    specs = plan.cfg.model_specs
    per = {
        m: t / max(model_scale(specs[m]) * block_work(plan, s, specs[m]), 1e-12)
        for m, (s, t) in timed.items()
    }
    m1 = next(iter(timed))
    s1, t1 = timed[m1]
    left = sum(
        per.get(m, per[m1]) * model_scale(specs[m]) * block_work(plan, s, specs[m]) for m, s in todo
    )
    later = {m for m, _ in todo} - set(timed)
    left += sum(load_seconds * model_scale(specs[m]) / model_scale(specs[m1]) for m in later)
    return {"rate": block_prompts(plan, s1) / max(t1, 1e-9), "seconds_left": left}


def check_scheduler(cfg: RunConfig) -> None:
    """The config's scheduler can start, before the store is created (``psens run`` and
    ``psens plan``): ``cuda`` needs dask-cuda and a GPU; a ``tcp://`` scheduler must answer
    (:func:`_check_reachable`)."""
    if cfg.scheduler == "cuda":
        from psens.models.hardware import cuda_count

        try:
            import dask_cuda  # noqa: F401
        except ImportError:
            fail(
                "psens run",
                'scheduler = "cuda" needs dask-cuda (one dask worker per GPU), which is not '
                "installed",
                "`pip install dask-cuda`, or for many machines serve the model (vLLM, "
                "docs/served-models.md)",
            )
        if not cuda_count():
            fail(
                "psens run",
                'scheduler = "cuda" but this machine has no CUDA device',
                'Use scheduler = "local:N" on a CPU machine, or run where the GPUs are',
            )
    _check_reachable(cfg.scheduler)


#: Seconds a ``tcp://`` scheduler has to complete dask's handshake (:func:`_check_reachable`).
SCHEDULER_TIMEOUT = 5.0


def _check_reachable(scheduler: str | None, timeout: float | None = None) -> None:
    """Refuse a ``tcp://host:port`` that is not a dask scheduler answering within
    ``timeout`` seconds (default :data:`SCHEDULER_TIMEOUT`), before the store is created:
    nobody listens, the peer does not complete dask's handshake (it is silent, or speaks
    another protocol: dask would read its bytes as frame sizes), or it answers dask's
    ``identity`` request as something other than a scheduler."""
    if not scheduler:
        return
    kind, address = parse_scheduler(scheduler)
    if kind != "tcp":
        return
    import asyncio
    import socket

    host, port = address
    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        fail(
            "psens run",
            f"the dask scheduler {scheduler} does not answer ({exc.strerror or exc})",
            "Start it (`dask scheduler --port PORT`) or fix 'scheduler' (or use 'local:N')",
        )

    async def identity() -> Any:
        from distributed.comm import connect

        comm = await connect(str(scheduler), timeout=timeout)
        try:
            await asyncio.wait_for(comm.write({"op": "identity"}), timeout)
            return await asyncio.wait_for(comm.read(), timeout)
        finally:
            comm.abort()

    try:
        reply = asyncio.run(asyncio.wait_for(identity(), timeout))
    except Exception as exc:  # a timeout, a refused handshake, garbage read as frame sizes
        reply = f"{type(exc).__name__}: {str(exc)[:60]}" if str(exc) else type(exc).__name__
    if not (isinstance(reply, dict) and reply.get("type") == "Scheduler"):
        fail(
            "psens run",
            f"{scheduler} accepts connections but is not a dask scheduler (no dask handshake "
            f"within {timeout:g} s: {shown(reply)})",
            "Point 'scheduler' at a dask scheduler (`dask scheduler --port PORT`) or use 'local:N'",
        )


def check_disk(path: Path, need: int) -> None:
    """Refuse a store path that cannot be written or lacks 1.5 × ``need`` bytes of free space."""
    parent = Path(os.path.realpath(path))
    while not parent.exists():  # the nearest folder that exists (the store's will be made)
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        fail("psens run", f"{parent} cannot be written", "Choose a 'store' path you can write to")
    free = shutil.disk_usage(parent).free
    if free < 1.5 * need:
        fail(
            "psens run",
            f"the store needs about {fmt_bytes(need)} but only {fmt_bytes(free)} "
            f"{'is' if free < 1024 else 'are'} free at {parent}"
            + (" (a virtual or full filesystem)" if free == 0 else ""),
            "Free disk space, choose another 'store' path, or run fewer samples/models",
        )


def check_device(cfg: RunConfig) -> None:
    """The config's device exists on this machine (when a model is loaded locally),
    before the store is created (``psens run`` and ``psens plan``). ``auto`` always does:
    the GPUs when there are any, else the CPU."""
    if all(spec.is_served for spec in cfg.model_specs):  # served models only: no local device
        return
    import torch

    kind, _, index = str(cfg.device).partition(":")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (index and int(index) >= count):
            found = f"{count} CUDA device{'s' if count != 1 else ''}" if count else "no CUDA"
            fail(
                "psens run",
                f"device = {cfg.device!r} is not available: this machine has {found}",
                f'Set device = "cpu"{f" or cuda:0 to cuda:{count - 1}" if count else ""}',
            )
    if kind == "mps" and not torch.backends.mps.is_available():
        fail("psens run", "device = 'mps' is not available on this machine", 'Set device = "cpu"')


# ----------------------------------------------------------------------------- blocks


def _hidden_pairs(hidden: np.ndarray, n_templates: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity and L2 distance of hidden states for every template pair
    (appendix H); ``hidden`` is ``[..., template, dim]``."""
    i, j = np.triu_indices(n_templates, k=1)
    a, b = hidden[..., i, :], hidden[..., j, :]
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (a * b).sum(-1) / (na * nb)
    return cos, np.linalg.norm(a - b, axis=-1)


def compute_block(scorer, plan: Plan, sample: int, *, floor_scorer=None) -> dict[str, np.ndarray]:
    """Score, predict and decompose one sample for one model; returns the block's values.

    With ``floor_scorer`` (the same model in half precision; runs with ``noise_floor``) the
    masked prompts are scored again into ``v_floor`` and ``floor`` is the IPS between the
    two scorings per order band (:func:`psens.ips.floor.floor_bands`, the run's solver and
    τ), ``[shot, template, band]``.
    """
    from psens.interactions import and_or, reconstruct

    cfg = plan.cfg
    item, variables = plan.items[sample], plan.variables[sample]
    n = len(variables)
    size_max = 1 << plan.n_max
    masks = np.arange(1 << n, dtype=np.int64)
    n_h, n_t = len(plan.shot_keys), len(plan.templates)
    v = np.empty((n_h, n_t, 1 << n))
    p_target = np.full((n_h, n_t), np.nan)
    confidence = np.full((n_h, n_t), np.nan)
    correct = np.full((n_h, n_t), np.nan)
    prediction = np.full((n_h, n_t), "", dtype=object)
    generated = np.full((n_h, n_t), "", dtype=object)
    v_floor = None if floor_scorer is None else np.empty_like(v)
    hidden = None
    if cfg.predictions_only:
        return _predict_block(scorer, plan, sample)
    cloze = _ClozeCells(plan, sample, masks) if plan.cloze else None
    for h, k in enumerate(plan.shot_keys):
        shots = plan.shots[k]
        for t, name in enumerate(plan.templates):
            shown, shown_vars = plan.version(sample, name)  # a rewrite with perturbations
            if cloze is not None:
                v[h, t] = cloze.score(scorer, h, t, shown, name, shots, shown_vars)
            else:
                v[h, t] = scorer.value(
                    shown, name, masks, shots=shots, variables=shown_vars, progress=False
                )
            if v_floor is not None:
                v_floor[h, t] = (
                    floor_scorer.value(
                        shown, name, masks, shots=shots, variables=shown_vars, progress=False
                    )
                    if cloze is None
                    else cloze.score(floor_scorer, h, t, shown, name, shots, shown_vars, keep=False)
                )
            pred = scorer.predict(
                shown, name, shots=shots, generate=cfg.generate, max_new_tokens=cfg.max_new_tokens
            )
            p_target[h, t], confidence[h, t] = pred.p_target, pred.confidence
            correct[h, t] = _correct(cfg, item, pred)
            prediction[h, t] = pred.choice if pred.choice is not None else pred.text
            if cloze is not None:  # the best option's text on the unmasked prompt
                prediction[h, t], correct[h, t], p_target[h, t] = cloze.answer(h, t)
            generated[h, t] = pred.text
            if hidden is None:
                hidden = np.zeros((n_h, n_t, pred.hidden.shape[-1]))
            hidden[h, t] = pred.hidden
    results = [and_or(v, m, **cfg.settings_for(m)) for m in cfg.solvers]
    err = max(
        float(np.max(np.abs(reconstruct(r.I_and, r.I_or) - v - (0.0 if r.q is None else r.q))))
        for r in results
    )
    scale = max(1.0, float(np.max(np.abs(v))))
    if not err <= 1e-8 * scale * (1 << n):
        raise RuntimeError(f"universal matching failed (max error {err:.2e}) for {item.id}")
    cos, l2 = _hidden_pairs(hidden, n_t)

    def pad(x):
        out = np.full((*x.shape[:-1], size_max), np.nan)
        out[..., : 1 << n] = x
        return out

    def by_solver(values):  # [shot, solver, template, ...] with a list of solvers
        return values[0] if isinstance(cfg.solver, str) else np.stack(values, axis=1)

    block = {
        "v": pad(v),
        "I_and": pad(by_solver([r.I_and for r in results])),
        "I_or": pad(by_solver([r.I_or for r in results])),
        "gamma": pad(by_solver([r.gamma for r in results])),
        "p_target": p_target,
        "confidence": confidence,
        "correct": correct,
        "prediction": prediction,
        "generated": generated,
        "hidden_cosine": cos,
        "hidden_l2": l2,
        "matching_error": np.float64(err),
        "error": np.asarray("", dtype=object),
        **({} if cloze is None else cloze.block(size_max)),
    }
    if v_floor is not None:
        from psens.ips.floor import floor_bands

        block["v_floor"] = pad(v_floor)
        block["floor"] = by_solver(
            [
                floor_bands(
                    v,
                    v_floor,
                    orders=store.FLOOR_BANDS,
                    solver=m,
                    tau=cfg.tau,
                    settings=cfg.settings_for(m),
                    normalization=cfg.normalization,
                )
                for m in cfg.solvers
            ]
        )
    return _squeeze_shots(plan, block)


def _correct(cfg: RunConfig, item, pred) -> float:
    """1.0 or 0.0 for a scored answer, NaN for none: the prediction's own ``correct`` (an
    option choice), or, for a HumanEval item of a run with ``allow_code_execution``, whether
    the generated code passes (:func:`psens.pss.answers.run_humaneval`, in the sandbox; NaN
    when the check itself could not run). Without the opt-in no code is run."""
    if pred.correct is not None:
        return float(pred.correct)
    meta = item.metadata or {}
    if not (
        cfg.allow_code_execution
        and item.task_type == "code"
        and pred.text
        and {"test", "entry_point"} <= set(meta)
        and item.answer
    ):
        return float("nan")
    from psens.pss.answers import run_humaneval

    got = run_humaneval(
        pred.text, item.question, meta["test"], meta["entry_point"], canonical=item.answer
    )
    return float("nan") if got.status == "error" else float(got.passed)


class _ClozeCells:
    """The cloze formulation's numbers of one block: per (shot, template) the options'
    log-likelihoods on every mask and their continuations' tokens, v from them
    (:func:`psens.cloze.cloze_value`, the run's ``cloze_norm``) and the answer on the
    unmasked prompt (the last mask)."""

    def __init__(self, plan: Plan, sample: int, masks: np.ndarray | None) -> None:
        item = plan.items[sample]
        coords = plan.cloze_coords()
        self.labels = coords["labels"][sample]
        self.nbytes = np.asarray(coords["bytes"][sample], dtype=np.float64)
        self.answer_at = coords["answer"][sample]
        self.norm = plan.cfg.cloze_norm_name
        self.masks = masks
        n_h, n_t, k = len(plan.shot_keys), len(plan.templates), len(item.options)
        rows = 1 if masks is None else len(masks)
        self.loglik = np.full((n_h, n_t, rows, k), np.nan)
        self.tokens = np.full((n_h, n_t, k), np.nan)
        self.n_options = plan.n_options

    def score(self, scorer, h, t, shown, name, shots, variables, keep: bool = True):
        """v of every mask (``keep``: the block's own scoring, stored; False: the noise
        floor's second scoring)."""
        from psens.cloze import cloze_value

        ll = scorer.choice_logprobs(
            shown, name, self.masks, shots=shots, variables=variables, progress=False
        )
        enc = scorer.encode(shown, name, shots=shots, variables=())
        tokens = np.asarray([len(enc.continuations[lab]) for lab in self.labels], float)
        if keep:
            self.loglik[h, t], self.tokens[h, t] = ll, tokens
        return cloze_value(ll, tokens, self.nbytes, self.answer_at, self.norm)

    def answer(self, h: int, t: int) -> tuple[str, float, float]:
        """(the best option's label, whether it is correct, p̃ of the correct option) on
        the unmasked prompt."""
        from psens.cloze import option_probs

        p = option_probs(self.loglik[h, t, -1], self.tokens[h, t], self.nbytes, self.norm)
        best = int(np.argmax(p))
        return self.labels[best], float(best == self.answer_at), float(p[self.answer_at])

    def block(self, size_max: int) -> dict[str, np.ndarray]:
        """``option_loglik`` and ``option_tokens``, padded to the store's subsets and
        options."""
        n_h, n_t, rows, k = self.loglik.shape
        ll = np.full((n_h, n_t, size_max, self.n_options), np.nan)
        ll[:, :, :rows, :k] = self.loglik
        tokens = np.full((n_h, n_t, self.n_options), np.nan)
        tokens[:, :, :k] = self.tokens
        return {"option_loglik": ll, "option_tokens": tokens}


def _squeeze_shots(plan: Plan, block: dict[str, Any]) -> dict[str, Any]:
    """A block without its leading shot axis when the run has no shot dim."""
    if plan.cfg.shots:
        return block
    return {
        k: (x[0] if np.ndim(x) >= 1 and k not in ("matching_error", "error") else x)
        for k, x in block.items()
    }


def _predict_block(scorer, plan: Plan, sample: int) -> dict[str, np.ndarray]:
    """A block of a predictions-only run (``n_vars = 0``, the PSS design): per shot setting
    and template the model's answer, its correctness, ``p_target`` and the decoding
    confidence; no masked prompts, so the game variables stay NaN.

    The answer is the option whose label token is most probable right after the prompt
    (:meth:`psens.models.Scorer.predict`, as in IPS runs), so every prompt gets an answer
    even from a model that does not follow the output format; ``generate = true`` also
    stores the greedy text (ProSA reads the answer from it, §3.1). ``confidence`` is the
    top next-token
    probability over the full vocabulary at the end of the prompt (ProSA eq. 3 before the
    mean over prompts).
    """
    cfg = plan.cfg
    item = plan.items[sample]
    n_h, n_t = len(plan.shot_keys), len(plan.templates)
    cells = {k: np.full((n_h, n_t), np.nan) for k in ("p_target", "confidence", "correct")}
    prediction = np.full((n_h, n_t), "", dtype=object)
    generated = np.full((n_h, n_t), "", dtype=object)
    hidden = None
    cloze = _ClozeCells(plan, sample, None) if plan.cloze else None
    for h, k in enumerate(plan.shot_keys):
        for t, name in enumerate(plan.templates):
            pred = scorer.predict(
                item,
                name,
                shots=plan.shots[k],
                generate=cfg.generate,
                max_new_tokens=cfg.max_new_tokens,
                reuse_prefix=True,  # the few-shot prefix is the same for every item
            )
            cells["p_target"][h, t], cells["confidence"][h, t] = pred.p_target, pred.confidence
            cells["correct"][h, t] = _correct(cfg, item, pred)
            prediction[h, t] = pred.choice if pred.choice is not None else pred.text
            if cloze is not None:  # the unmasked prompt's options (variables=[]: one row)
                cloze.score(scorer, h, t, item, name, plan.shots[k], [])
                prediction[h, t], cells["correct"][h, t], cells["p_target"][h, t] = cloze.answer(
                    h, t
                )
            generated[h, t] = pred.text
            if hidden is None:
                hidden = np.zeros((n_h, n_t, pred.hidden.shape[-1]))
            hidden[h, t] = pred.hidden
    cos, l2 = _hidden_pairs(hidden, n_t)
    empty = np.full((n_h, n_t, 1), np.nan)  # one subset (n_max = 0), never scored
    block = {
        "v": empty,
        "I_and": empty,
        "I_or": empty,
        "gamma": empty,
        **cells,
        "prediction": prediction,
        "generated": generated,
        "hidden_cosine": cos,
        "hidden_l2": l2,
        "matching_error": np.float64(0.0),
        "error": np.asarray("", dtype=object),
        **({} if cloze is None else cloze.block(1)),
    }
    return _squeeze_shots(plan, block)


def _failed_block(exc: BaseException) -> dict[str, Any]:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"error": np.asarray(text[:2000], dtype=object), "status": store.FAILED}


# ----------------------------------------------------------------------------- scorers

_SCORERS: dict[tuple, Any] = {}


def run_scorer(cfg: RunConfig, spec: ModelSpec, dtype: str | None = None):
    """Load (once per process) the scorer of ``spec`` with the run's settings (in ``dtype``
    instead of the run's: the noise floor's second scorer; ``cfg.batch_size`` a number:
    :func:`resolve_batch` of an ``"auto"`` batch). A process keeps one model in
    memory, or two when the second is that model's noise-floor copy. A served model gives
    its :class:`psens.models.served.ServedScorer` (it has no dtype)."""
    dtype = None if spec.is_served else (cfg.dtype if dtype is None else dtype)
    key = (
        json.dumps(spec.entry, sort_keys=True, default=str),
        cfg.device,
        dtype,
        cfg.batch_size,
        cfg.n_vars,
        cfg.seed,
        cfg.mask_tokens.get(spec.name),
        cfg.cache_dir,
        cfg.trust_remote_code,
    )
    keep = (cfg.dtype, cfg.floor_dtype)  # one model, in up to two dtypes, per process
    for old in [k for k in _SCORERS if k[:2] + k[3:] != key[:2] + key[3:] or k[2] not in keep]:
        del _SCORERS[old]
    if key not in _SCORERS:
        if cfg.threads is not None and not spec.is_served:
            import torch

            torch.set_num_threads(cfg.threads)
        _SCORERS[key] = spec.load_scorer(
            dtype=dtype,
            device=cfg.device,
            mask_token=cfg.mask_tokens.get(spec.name),
            n_max=cfg.n_vars,
            seed=cfg.seed,
            batch_size=cfg.batch_size,
            progress=False,
            trust_remote_code=cfg.trust_remote_code,
        )
    return _SCORERS[key]


def _scorers(cfg: RunConfig, spec: ModelSpec) -> tuple[Any, Any]:
    """The scorer of ``spec`` and its noise-floor scorer (None without ``noise_floor``, and
    for a served model: the server's precision only)."""
    main = run_scorer(cfg, spec)
    if spec.is_served or not cfg.floor_dtype:
        return main, None
    return main, run_scorer(cfg, spec, cfg.floor_dtype)


def _check_models(cfg: RunConfig) -> None:
    """Before the store is created: every local model can be found (a mistyped hub id is
    refused), every served model is answered for and gives prompt log-probabilities."""
    for spec in cfg.model_specs:
        spec.check_available()
        if spec.is_served:
            try:
                run_scorer(cfg, spec).probe()
            except RuntimeError as exc:  # a refused server or reply: one line, no store made
                raise ValueError(str(exc)) from None


def _work_unit(
    rr, model_index: int, samples: Sequence[int], run_id: str | None = None
) -> list[int]:
    """One dask task: score some samples of one model of the resolved run ``rr``
    (:class:`psens.plan.ResolvedRun`) and write their blocks (refused when the store's run
    id is no longer ``run_id``: the run was started over meanwhile). Nothing is checked or
    read again: the scorers are built (once per worker) from ``rr``'s settings."""
    scorer, floor_scorer = _scorers(rr.scoring, rr.models[model_index])
    for s in samples:
        _run_block(scorer, rr.plan, model_index, s, run_id, floor_scorer)
    return list(samples)


def _run_block(
    scorer, plan: Plan, m: int, s: int, run_id: str | None = None, floor_scorer=None
) -> bool:
    try:
        extra = {} if floor_scorer is None else {"floor_scorer": floor_scorer}
        block = compute_block(scorer, plan, s, **extra)
        block["status"] = store.DONE
    except Exception as exc:  # recorded, never silently wrong
        block = _failed_block(exc)
    store.write_block(plan.cfg.store, m, s, block, run_id=run_id)
    return block["status"] == store.DONE


# ----------------------------------------------------------------------------- run


def _model_meta(specs: Sequence[ModelSpec]) -> dict[str, list]:
    """The model table's columns ``store.MODEL_META`` of each model (None where unknown)."""
    meta: dict[str, list] = {k: [] for k in store.MODEL_META}
    for spec in specs:
        row = spec.table_row() or {}
        for k in store.MODEL_META:
            meta[k].append(row.get(k))
    return meta


#: The fields of an item that its numbers depend on (``metadata`` is not one of them).
ITEM_FIELDS = ("question", "options", "answer", "context", "passage", "answers", "task_type")
#: Where a resume that found a difference sends the user.
_START_OVER = "start over with --overwrite (overwrite=True)"


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _item_digests(item, variables: Sequence) -> dict[str, str]:
    """Per-field digests of one item and of its chosen words (text, field and offsets)."""
    out = {f: _digest(getattr(item, f)) for f in ITEM_FIELDS}
    out["words"] = _digest([[str(v), v.field, v.start, v.end] for v in variables])
    return out


def fingerprints(plan: Plan) -> dict[str, Any]:
    """Digests of everything a run's numbers depend on beyond its config text.

    Parameters
    ----------
    plan : Plan
        The run's items, words, shots and prompts.

    Returns
    -------
    dict
        ``items`` (sample id -> per-field digests, in sample order), ``shots``,
        ``prompts`` (prompts and targets), ``models`` (model -> its
        :func:`psens.models.loading.model_fingerprint`), ``solver`` (the settings) and
        ``psens_version``.
    """
    from psens._version import __version__

    cfg = plan.cfg
    shots = {str(k): [[it.id, _item_digests(it, ())] for it in plan.shots[k]] for k in plan.shots}
    settings = _solver_attrs(cfg)
    each = settings.pop("solvers", None)
    if each is not None:  # a list of solvers: every solver's settings
        settings = {f"{m}:{k}": v for m, attrs in each.items() for k, v in attrs.items()}
    return {
        "items": {
            it.id: _item_digests(it, vs) for it, vs in zip(plan.items, plan.variables, strict=True)
        },
        "shots": _digest(shots),
        "prompts": _digest([plan.prompts.ravel().tolist(), plan.targets]),
        "models": {spec.name: spec.fingerprint() for spec in cfg.model_specs},
        "solver": {
            k: (v if isinstance(v, int | float | str | bool) or v is None else str(v))
            for k, v in settings.items()
        },
        "psens_version": __version__,
    }


def _item_changes(old: dict, new: dict) -> str | None:
    if list(old) != list(new):
        gone = [k for k in old if k not in new]
        came = [k for k in new if k not in old]
        if gone or came:
            return f"the selected samples differ (now without {gone[:3]}, with {came[:3]})"
        return "the selected samples are in another order"
    diffs = [
        f"{sid!r} {field} differs"
        for sid, fields in old.items()
        for field, h in fields.items()
        if new[sid].get(field) != h
    ]
    if not diffs:
        return None
    more = f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else ""
    return ", ".join(diffs[:3]) + more


def _model_changes(model: str, old: dict, new: dict) -> str | None:
    if old.get("kind") != new.get("kind"):
        return f"{model} was a {old.get('kind')} model and is now a {new.get('kind')} model"
    if old.get("revision") and new.get("revision") and old["revision"] != new["revision"]:
        return f"{model} revision {old['revision']} is now {new['revision']}"
    a, b = old.get("files", {}), new.get("files", {})
    diffs = [f"{f} differs" for f in a if f in b and a[f] != b[f]]
    diffs += [f"{f} is gone" for f in a if f not in b]
    diffs += [f"{f} is new" for f in b if f not in a]
    return f"{model}: {', '.join(diffs[:3])}" if diffs else None


def _check_fingerprints(path: Path, old: dict, new: dict) -> None:
    """Refuse to resume a store whose recorded fingerprints differ from the current ones,
    naming the difference."""
    where = "psens run"
    since = "changed since the store was created"
    items = _item_changes(old.get("items", {}), new["items"])
    if items or old.get("shots", new["shots"]) != new["shots"]:
        what = items or "the few-shot examples differ"
        fail(
            where,
            f"{path}: the dataset items {since}: {what}",
            f"Restore the file or {_START_OVER}",
        )
    if old.get("prompts", new["prompts"]) != new["prompts"]:
        fail(
            where,
            f"{path}: the rendered prompts or targets {since} (the templates or psens changed)",
            f"Resume with the psens that created it, or {_START_OVER}",
        )
    changes = [
        _model_changes(m, fp, new["models"][m])
        for m, fp in old.get("models", {}).items()
        if m in new["models"]
    ]
    changes = [c for c in changes if c]
    if changes:
        fail(
            where,
            f"{path}: the model weights {since}: {'; '.join(changes)}",
            f"Restore the model files or {_START_OVER}",
        )
    solver_old, solver_new = old.get("solver", {}), new["solver"]
    keys = [
        k
        for k in sorted(set(solver_old) | set(solver_new))
        if solver_old.get(k) != solver_new.get(k)
    ]
    if keys:
        shown = ", ".join(f"{k} {solver_old.get(k)!r} -> {solver_new.get(k)!r}" for k in keys[:3])
        fail(
            where,
            f"{path}: the solver settings {since}: {shown}",
            f"Resume with the psens that created it, or {_START_OVER}",
        )
    if old.get("psens_version", new["psens_version"]) != new["psens_version"]:
        fail(
            where,
            f"{path} was created by psens {old['psens_version']}, this is psens "
            f"{new['psens_version']}",
            f"Resume with psens {old['psens_version']}, or {_START_OVER}",
        )


def _loading(cfg: RunConfig) -> dict[str, dict[str, str]]:
    """How each local model is loaded, ``{model: {"dtype", "attn_implementation"}}``
    (:func:`psens.models.loading.load_settings`: ``dtype = "auto"`` resolved to the
    checkpoint's, SDPA attention or eager where the model lacks it), recorded in the store's
    attr ``loading`` before any weights are read (a GGUF model is converted here, once).
    A noise floor in the dtype ``"auto"`` resolves to is refused."""
    from psens.models.loading import load_settings

    out = {}
    for spec in cfg.model_specs:
        if spec.is_served:
            continue
        got = load_settings(spec.source, cfg.dtype, trust_remote_code=cfg.trust_remote_code)
        if cfg.floor_dtype is not None and got["dtype"] == cfg.floor_dtype:
            fail(
                "psens run",
                f'dtype = "auto" loads {spec.name!r} in {got["dtype"]}, the noise floor\'s own '
                "dtype: the two scorings would be the same",
                'Set dtype = "float32", or noise_floor to the other half-precision dtype',
            )
        out[spec.name] = {k: str(got[k]) for k in ("dtype", "attn_implementation")}
    return out


def _open_or_create(plan: Plan, overwrite: bool, recorded: dict[str, Any] | None = None):
    from psens import prompts
    from psens._version import __version__

    cfg = plan.cfg
    path = Path(cfg.store)
    if path.exists() and not overwrite:
        ds = store.open_run(path)
        if ds.attrs.get("config_hash") != cfg.fingerprint():
            fail(
                "psens run",
                f"{path} holds a run with a different config",
                "Use a new 'store' path, or pass overwrite=True (--overwrite) to start over",
            )
        recorded = ds.attrs.get("fingerprints")
        if recorded:  # stores of an older psens have none: nothing to compare
            old = json.loads(recorded) if isinstance(recorded, str) else recorded
            # attrs are stored with sorted keys: the store's sample coord has the run's order
            items = old.get("items", {})
            order = [str(x) for x in ds["sample"].values]
            old["items"] = {
                **{k: items[k] for k in order if k in items},
                **{k: v for k, v in items.items() if k not in order},
            }
            _check_fingerprints(path, old, fingerprints(plan))
        return ds
    perturb = [prompts.get_template(t).perturbation for t in plan.templates]
    attrs = {
        "psens_version": __version__,
        "tau": cfg.tau,
        "config": cfg.to_dict(),
        "config_hash": cfg.fingerprint(),
        "dataset": cfg.dataset,
        "fingerprints": fingerprints(plan),
        # recorded when not psens's default, so stores of the default keep their attrs
        **({"normalization": cfg.normalization} if cfg.normalization != "nonempty" else {}),
        **({"preset": cfg.preset} if cfg.preset else {}),
        **({"answer": "cloze", "cloze_norm": cfg.cloze_norm_name} if plan.cloze else {}),
        **_solver_attrs(cfg),
        **(recorded or {}),
    }
    return store.create(
        path,
        overwrite=overwrite,
        models=cfg.model_names,
        samples=[it.id for it in plan.items],
        templates=plan.templates,
        words=[[str(v) for v in vs] for vs in plan.variables],
        prompts=plan.prompts if cfg.shots else plan.prompts[:, 0],
        targets=plan.targets,
        n_max=plan.n_max,
        shots=list(cfg.shots) if cfg.shots else None,
        model_meta=_model_meta(cfg.model_specs),
        perturbation=perturb,
        template_coords=cfg.template_coords,
        attrs=attrs,
        noise_floor=cfg.floor_dtype,
        solvers=None if isinstance(cfg.solver, str) else cfg.solvers,
        cloze=plan.cloze_coords() if plan.cloze else None,
    )


def _solver_attrs(cfg: RunConfig) -> dict[str, Any]:
    """The ``solver_*`` attrs of a run (its first solver's settings); with a list of
    solvers also ``solvers``: ``{solver: its solver_* attrs}``."""
    from psens.interactions import SolverSettings

    each = {m: SolverSettings(method=m, **cfg.settings_for(m)).to_attrs() for m in cfg.solvers}
    out = dict(each[cfg.solvers[0]])
    if not isinstance(cfg.solver, str):
        out["solvers"] = each
    return out


def execute(rr, overwrite: bool, progress: bool, quiet: bool):
    """Create or resume the store of a resolved run (:class:`psens.plan.ResolvedRun`, every
    check done) and score its unfinished blocks; the caller holds the store's lock
    (:func:`psens.pipeline.run`)."""
    cfg, plan, est = rr.config, rr.plan, rr.cost
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr))
    say(
        f"psens run: {len(cfg.models)} model(s) x {len(plan.items)} samples x "
        f"{len(plan.templates)} templates x {len(plan.shot_keys)} shot setting(s); "
        f"{est['forward_passes']:,} {_prompts_word(cfg)} (roughly {fmt_time(est['seconds'])} "
        f"from a FLOP model at {throughput(cfg, dtype_name(cfg.dtype)) / 1e12:.3g} TFLOP/s"
        f"{f', {served} served model(s) not counted' if (served := est['served']) else ''}; "
        f"timed on this machine after the first block), store ~{fmt_bytes(est['store_bytes'])}"
    )
    check_disk(Path(cfg.store), est["store_bytes"])
    resuming = Path(cfg.store).exists() and not overwrite
    ds = _open_or_create(plan, overwrite, {"batch_size": rr.batch, "loading": rr.loading})
    run_id = ds.attrs.get("run_id")  # None for stores of an older psens
    if resuming:
        # the batch the store was started with (an "auto" batch may differ here)
        rr = dataclasses.replace(rr, batch=int(ds.attrs.get("batch_size", rr.batch)))
        store.remove_leftovers(cfg.store)
        _recompute_damaged(cfg.store, run_id, say)
    status = ds["status"].values
    todo = [
        (m, s)
        for m in range(len(cfg.models))
        for s in range(len(plan.items))
        if status[m, s] != store.DONE
    ]
    if len(todo) < plan.blocks:
        say(f"resuming: {plan.blocks - len(todo)} of {plan.blocks} blocks already done")
    if cfg.scheduler:
        _run_dask(rr, todo, progress, run_id)
    else:
        _run_serial(rr.scoring, plan, todo, progress, run_id, say)
    return store.open_run(cfg.store)


def check_models(scoring: RunConfig, plan: Plan) -> dict[str, dict[str, str]]:
    """The model checks of a run, before its store (:func:`psens.plan.resolve`): every local
    model found and every served one answering (``scoring``: the config with the resolved
    batch), a format space's answer tokens distinct under each tokenizer; returns how each
    local model is loaded (``{model: {"dtype", "attn_implementation"}}``)."""
    _check_models(scoring)
    _check_answer_tokens(plan.cfg, plan)
    return _loading(plan.cfg)


def _check_answer_tokens(cfg: RunConfig, plan: Plan) -> None:
    """In a format-space run, every format's option labels begin with distinct answer tokens
    under every model's tokenizer (checked on the tokenizers alone, before the store)."""
    if cfg.formats is None or cfg.answer == "cloze":  # cloze: the options' text, no labels
        return
    from psens.formats.grammar import Format
    from psens.formats.tokens import scorable_enums
    from psens.models.scorer import option_token_ids
    from psens.models.served import load_tokenizer

    for spec in cfg.model_specs:
        tok, _ = load_tokenizer(
            spec.served.tokenizer if spec.is_served else spec.entry,
            cfg.cache_dir,
            trust_remote_code=cfg.trust_remote_code and not spec.is_served,
        )
        for s, it in enumerate(plan.items):
            if not it.is_mcq:
                continue
            for t, name in enumerate(plan.templates):
                prompt = str(plan.prompts[s, 0, t])
                ids = option_token_ids(tok, it, name, prompt, check=False)
                if len(set(ids.values())) == len(ids):
                    continue
                good = scorable_enums(Format.from_id(name), tok, it)
                fail(
                    f"psens run, model {shown(spec.name)}",
                    f"format {name}: the option labels of item {shown(it.id)} do not begin "
                    "with distinct answer tokens under this tokenizer",
                    f"Use formats whose enum is one of {good} (their labels tokenise apart)"
                    if good
                    else "No enumeration tokenises apart here: score it with another model",
                )


def _recompute_damaged(path: str, run_id: str | None, say) -> None:
    """Verify a store being resumed: its damaged blocks are made pending (so this run
    recomputes them); damaged coordinates cannot be recomputed and are refused."""
    found = store.verify(path)
    if found.damaged_arrays:
        fail(
            "psens run",
            f"{path} is damaged beyond its blocks: {found.brief()}",
            "Start over with overwrite=True (--overwrite)",
        )
    if found.damaged:
        say(f"{found.brief()}: recomputing them")
        for m, s in found.damaged_index:
            store.write_block(path, m, s, {"status": store.PENDING}, run_id=run_id)


def _run_serial(
    cfg: RunConfig, plan: Plan, todo, progress: bool, run_id: str | None, say=None
) -> None:
    """Blocks one by one, model by model. One progress bar counts masked prompts (so its rate
    and ETA are measured on this machine, and a block of 2**8 prompts weighs 8 times one of
    2**5); after the first block of each model, ``say`` prints the time left at the rates
    measured so far (:func:`recalibrate`)."""
    from tqdm.auto import tqdm

    by_model: dict[int, list[int]] = {}
    for m, s in todo:
        by_model.setdefault(m, []).append(s)
    order = [(m, s) for m, samples in by_model.items() for s in samples]
    total = sum(block_prompts(plan, s) for _, s in order)
    timed: dict[int, tuple[int, float]] = {}  # model -> its first scored block and seconds
    load = LOAD_SECONDS
    with tqdm(total=total, unit="prompt", disable=not progress) as bar:
        for k, (m, s) in enumerate(order):
            if k == 0 or m != order[k - 1][0]:
                bar.set_description(f"{cfg.model_names[m]} (loading)")
                t0 = time.perf_counter()
                scorer, floor_scorer = _scorers(cfg, cfg.model_specs[m])
                if k == 0:
                    load = time.perf_counter() - t0
                bar.set_description(cfg.model_names[m])
                bar.unpause()  # the load is not scoring time: keep it out of the rate
            t0 = time.perf_counter()
            ok = _run_block(scorer, plan, m, s, run_id, floor_scorer)
            took = time.perf_counter() - t0
            bar.update(block_prompts(plan, s))
            if ok and m not in timed and say is not None and k + 1 < len(order):
                # the first block of each model that was scored (a failed one is quick)
                first = not timed
                timed[m] = (s, took)
                est = recalibrate(plan, order[k + 1 :], timed, load)
                rate = block_prompts(plan, s) / max(took, 1e-9)
                line = (
                    f"{'first block' if first else f'first block of {cfg.model_names[m]}'} "
                    f"took {f'{took:.1f} s' if took < 10 else fmt_time(took)} "
                    f"({block_prompts(plan, s):,} {_prompts_word(cfg)}, "
                    f"{f'{rate:.1f}' if rate < 10 else f'{rate:.0f}'}/s on this machine); "
                    f"~{fmt_time(est['seconds_left'])} left"
                )
                if progress:  # above the bar, not through it
                    tqdm.write(line, file=sys.stderr)
                else:
                    say(line)


def _run_dask(rr, todo, progress: bool, run_id: str | None) -> None:
    """The blocks ``todo`` on a dask.distributed cluster (the run's ``scheduler``): the
    resolved run (:class:`psens.plan.ResolvedRun`) is sent to every worker once, and each
    task scores one block from it (:func:`_work_unit`: no config, dataset or plan is read
    again on a worker)."""
    from dask.distributed import Client, LocalCluster, as_completed

    cfg, plan = rr.config, rr.plan

    kind, workers = parse_scheduler(cfg.scheduler)
    cluster = None
    if kind == "cuda":  # one single-threaded worker per GPU, each seeing only its own
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
    elif kind == "local":
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            host="127.0.0.1",
        )
        client = Client(cluster)
    else:
        client = Client(str(cfg.scheduler))
    try:
        shipped = client.scatter(rr, broadcast=True)  # once per worker, not once per block
        futures = {
            client.submit(_work_unit, shipped, m, [s], run_id, pure=False): s for m, s in todo
        }
        from tqdm.auto import tqdm

        total = sum(block_prompts(plan, s) for _, s in todo)
        with tqdm(total=total, unit="prompt", disable=not progress) as bar:
            bar.set_description("blocks")
            for fut in as_completed(list(futures)):
                fut.result()
                bar.update(block_prompts(plan, futures[fut]))  # weighted by masked prompts
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ----------------------------------------------------------------------------- summary


def summarize(ds, wall: float | None = None) -> str:
    """The run's headline (:func:`psens.ips.headline.headline`: IPS overall and by order
    with CIs at the first shot, what it pools, the noise floor, accuracy, output consistency
    and the caveats), over the done blocks, and how many blocks are pending or failed
    (those are left out); a PSS run (``n_vars = 0``) gets its PSS lines instead (and, over
    a format space, the accuracy spread)."""
    from psens.ips import solver_names
    from psens.ips.headline import headline, headline_lines
    from psens.pss.runs import is_pss_run, summary_lines

    head = "psens run summary" + (f" ({fmt_time(wall)})" if wall is not None else "") + ":"
    status = np.asarray(ds["status"].values)
    if is_pss_run(ds):  # n_vars = 0: no interactions, PSS instead
        notes = [
            _blocks_note(int((row == store.PENDING).sum()), int((row == store.FAILED).sum()))
            for row in status
        ]
        text = summary_lines(ds, head, notes)
        if any(str(c).startswith("fmt_") for c in ds.coords):  # a format space: its spread
            text = "\n".join([text, *_spread_lines(ds)])
        return text
    notes = {
        str(name): _blocks_note(
            int((status[m] == store.PENDING).sum()), int((status[m] == store.FAILED).sum())
        )
        for m, name in enumerate(model_names(ds))
    }
    lines = headline_lines(headline(ds), notes)
    if "solver" in ds.dims:
        solvers = solver_names(ds)
        lines[0] = lines[0][:-1] + f"; solver {solvers[0]} of {', '.join(solvers)}:"
    return "\n".join([head, *lines, *_spread_lines(ds)])


def _spread_lines(ds) -> list[str]:
    """Each model's accuracy spread over the templates (:func:`psens.formats.analysis.
    accuracy_spread`: bootstrap CI over items, permutation noise floor)."""
    from psens.formats.analysis import accuracy_spread, spread_line

    table = accuracy_spread(ds, n_boot=500, n_perm=500)
    head = "accuracy spread over the templates (max - min; 95 % bootstrap CI over items):"
    return [head, *(spread_line(row) for _, row in table.iterrows())]


def _blocks_note(pending: int, failed: int) -> str:
    """E.g. ``"2 blocks pending, 1 failed"``; '' when every block is done."""

    def blocks(n: int) -> str:
        return f"{n} block{'s' if n != 1 else ''}"

    if pending and failed:
        return f"{blocks(pending)} pending, {failed} failed"
    if pending:
        return f"{blocks(pending)} pending"
    if failed:
        return f"{blocks(failed)} failed"
    return ""


def _prompts_word(cfg: RunConfig) -> str:
    """What a run scores: masked prompts, or (``n_vars = 0``) the unmasked prompts only."""
    return "prompts (unmasked only)" if cfg.predictions_only else "masked prompts"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def fmt_time(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
