"""Run configuration: one declarative object, read from TOML/YAML or a dict, checked up front.

Every mistake a config can hold (a typo'd key, an unknown model, template or dataset, an
out-of-range number) is reported before any model is loaded, naming the key and the fix.

Keys
----
==================  =========================================================================
``store``           path of the zarr store to write (required)
``models``          list of models: packaged short names (``smollm2-135m-instruct``), names
                    of the model table (``data/models.csv``), hub ids, folders or GGUF files,
                    or served models ``{name, base_url, model, tokenizer[, endpoints, ...]}``
                    (:mod:`psens.models.served`)
``dataset``         ``arc-challenge``, ``arc-easy``, ``mmlu[:subject]``, ``commonsenseqa``,
                    ``boolq``, ``piqa``, ``sciq``, ``hellaswag``, ``openbookqa``, ``copa``,
                    ``squad``, ``dolly`` (:func:`psens.datasets.load`)
``split``           dataset split (default: the dataset's default)
``dataset_path``    a local copy of the dataset (jsonl/parquet/save_to_disk), optional
``samples``         how many items (a seeded random choice, kept in dataset order) or a list
                    of item ids (default 20)
``templates``       a set name (``"ips5"``: the paper's five, ``"fewshot"``: templates 1
                    and 4, ``"open"``; ``"prosa"``: ProSA's twelve published prompts of the
                    dataset, :mod:`psens.pss.published`) or a list of template names (default
                    ``"ips5"``); or a format space: ``{grammar = "default", k = 16, seed =
                    0}`` samples k formats, a list of tables (``[{case = "upper"}, {enum =
                    "(A)"}]``) gives explicit points (:mod:`psens.formats`; each format's
                    coordinates are stored along ``template``)
``shots``           few-shot settings, e.g. ``[0, 1, 2, 3]`` (adds a ``shot`` dim; default none)
``n_vars``          cap on input variables per item (default 10); ``0``: no masked prompts
                    and no interactions, only the greedy answer, its correctness and the
                    decoding confidence per template (the ProSA/PSS design,
                    :mod:`psens.pss.runs`)
``tau``             salience threshold (default 0.1)
``solver``          ``"canonical"`` (default: the least-norm optimum), ``"exact"`` or ``"sgd"``;
                    or a list of them (``["canonical", "sgd"]``): every solver's interactions
                    are stored, along a ``solver`` dim (readers default to the first)
``solver_settings`` dict of :class:`psens.interactions.SolverSettings` fields (steps, lr, …);
                    with a list of solvers, ``preset`` applies to ``"sgd"`` only
``seed``            seed for sample, variable and shot choices (default 0)
``device``          ``"cpu"`` (default), ``"cuda"``, ``"cuda:N"``, ``"mps"`` or ``"auto"``:
                    ``device_map="auto"`` (accelerate) shards each model over the GPUs (a
                    model larger than one GPU; the CPU without a GPU)
``dtype``           ``"float32"`` (default), ``"bfloat16"``, ``"float16"`` or ``"auto"``: the
                    checkpoint's own dtype (its ``config.json``; float32 for GGUF models);
                    the dtype each model is loaded in is stored in the attr ``loading``
``batch_size``      masked prompts per forward pass (default 32; fixed so runs are
                    identical); ``"auto"``: the largest batch whose weights and keys/values
                    fit half the device's free memory (:func:`psens.models.hardware.
                    largest_batch`), at most the masked prompts of one prompt, stored in the
                    attr ``batch_size`` (values equal a fixed batch's to float rounding);
                    refused on a device that reports no free memory (``mps``)
``trust_remote_code`` run a model's own code from its folder or hub repository (default
                    false; always passed to transformers, so it never asks on the terminal)
``allow_code_execution`` run the code a model generates for a code item (HumanEval) to
                    score it (default false; a ``humaneval`` run that generates text is
                    refused without it). Each completion runs in a sandbox
                    (:mod:`psens.pss.sandbox`: bubblewrap without network, PID and user
                    namespaces of its own, a read-only interpreter; where bubblewrap cannot
                    run, only an audit-hook guard, which is not a security boundary and is
                    warned about) and passes when its results equal the canonical
                    solution's (:func:`psens.pss.answers.run_humaneval`); ``max_new_tokens``
                    must leave room for a function body
``threads``         torch CPU threads (default: torch's own)
``mask_tokens``     per-model mask-token overrides, ``{model: token}``, keyed by the names
                    in ``models`` (another key is refused, naming the valid ones)
``generate``        store the greedy generated text (default true), ``max_new_tokens`` (8)
``scheduler``       ``None`` (serial), ``"local:N"`` (dask LocalCluster, N at most the cores),
                    ``"cuda"`` (one dask worker per GPU: dask-cuda's LocalCUDACluster, ``pip
                    install dask-cuda``) or ``"tcp://host:port"`` (a dask scheduler: it must
                    answer dask's handshake within 5 s; :func:`parse_scheduler`)
``cache_dir``       where GGUF models are converted (default ``~/.cache/psens/models``)
``noise_floor``     ``false`` (default), ``true`` (= ``"bfloat16"``) or a half-precision dtype
                    (``"bfloat16"``, ``"float16"``): score every masked prompt a second time
                    with the model loaded in that dtype and store ``v_floor`` and the measured
                    noise floor ``floor`` (:func:`psens.ips.floor.noise_floor`)
``perturbations``   a JSON file of paraphrased and reordered instructions (IPS paper,
                    appendix L; :mod:`psens.perturbations`): the run's items are its items
                    and every template is also shown with each rewrite
                    (``"open:paraphrase"``, ``"open:reorder"``), with the variables aligned
``variables``       which words become input variables: ``"psens"`` (default) or
                    ``"paper"`` (every word of an MCQ item, §3.2; K.2's content words of an
                    open-ended one; :func:`psens.prompts.variables`)
``shots_from``      where few-shot examples come from: ``"dataset"`` (default: one seeded
                    draw from the dataset, disjoint from the items) or ``"paper"`` (the
                    three examples of appendix E.6 for MCQ items, shots <= 3; open-ended
                    items, whose examples the paper does not print, draw as ``"dataset"``)
``normalization``   what the min-max normalisation of a game spans: ``"nonempty"``
                    (default: S ≠ ∅, v(∅) is the bias) or ``"all"`` (all 2^(n+1) effects,
                    ∅ included; :func:`psens.ips.metric.normalize`)
``answer``          ``"letter"`` (default: the letter of the correct option after a listing
                    of the options, the IPS paper's formulation) or ``"cloze"``: the
                    templates' cloze forms (their wording without the options,
                    :func:`psens.prompts.cloze_form`; a format space in cloze, without
                    its enumeration), each option's text scored as a continuation and v
                    the log-odds of the correct option among the options
                    (:mod:`psens.cloze`, docs/answer-formulations.md)
``cloze_norm``      a cloze run's normalisation of the options' log-likelihoods: ``"char"``
                    (default: per byte of the option's text, lm-eval ``acc_norm``),
                    ``"token"`` (mean per token) or ``"sum"`` (lm-eval ``acc``); the
                    store keeps the raw log-likelihoods, so :func:`psens.cloze.rescore`
                    gives the others without a model
``preset``          ``"paper"``: the IPS paper's own choices (:data:`PRESETS`) for every key
                    the config does not set itself — explicit keys win; recorded in the
                    store attrs (``preset``). docs/paper-conventions.md lists each choice,
                    psens's default, why they differ and the measured effect
==================  =========================================================================
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psens._validation import check_in_interval, check_keys, check_positive_int, fail, shown
from psens.models.loading import DTYPE_NAMES  # the one table of dtype names
from psens.prompts import VARIABLE_RULES
from psens.settings import (
    ANSWERS,
    CLOZE_NORMS,
    DEFAULT_ANSWER,
    DEFAULT_CLOZE_NORM,
    DEFAULT_NORMALIZATION,
    DEFAULT_SOLVER,
    DEFAULT_TAU,
    NORMALIZATIONS,
)

if TYPE_CHECKING:
    from psens.models.spec import ModelSpec

__all__ = [
    "PRESETS",
    "TEMPLATE_SETS",
    "RunConfig",
    "load_config",
    "parse_scheduler",
    "read_config_file",
    "read_yaml",
]

#: template set names accepted by ``templates = "<name>"``
TEMPLATE_SETS: dict[str, tuple[str, ...]] = {
    "ips5": ("ips1", "ips2", "ips3", "ips4", "ips5"),
    "paper": ("ips1", "ips2", "ips3", "ips4", "ips5"),
    "fewshot": ("ips1", "ips4"),  # appendix E.6 uses templates 1 and 4
    "open": ("open",),
}

WHERE = "psens config"

#: ``preset = "<name>"``: the values a preset gives the keys a config does not set itself.
#: ``"paper"`` is the IPS paper's (Qin et al., ICML 2026) setup where psens's defaults
#: differ — the provenance of each value is in docs/paper-conventions.md:
#: ``variables`` (§3.2, appendix K.2), ``dtype`` (appendix E.1: torch.float16),
#: ``shots_from`` (appendix E.6), ``solver`` and ``solver_settings`` (eq. 12 with learnable
#: γ, trained as in the interaction group's public code; only when ``solver`` is not set
#: either), ``normalization`` (§3.2: "all 2^(n+1) interaction effects"). τ = 0.1, the five
#: templates and the mask-token rule are the paper's already and are not listed.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "variables": "paper",
        "dtype": "float16",
        "shots_from": "paper",
        "solver": "sgd",
        "solver_settings": {"preset": "paper"},
        "normalization": "all",
    },
}
#: ``shots_from`` values
SHOT_SOURCES: tuple[str, ...] = ("dataset", "paper")


@dataclass
class RunConfig:
    """A run's configuration (see the module docstring for every key)."""

    store: str
    models: list[str | dict[str, Any]]
    dataset: str
    split: str | None = None
    dataset_path: str | None = None
    samples: int | list[str] = 20
    templates: str | list[str] | dict[str, Any] | list[dict[str, Any]] = "ips5"
    shots: list[int] | None = None
    n_vars: int = 10
    tau: float = DEFAULT_TAU
    solver: str | list[str] = DEFAULT_SOLVER
    solver_settings: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    device: str = "cpu"
    dtype: str | None = None
    batch_size: int | str = 32
    trust_remote_code: bool = False
    allow_code_execution: bool = False
    threads: int | None = None
    mask_tokens: dict[str, str] = field(default_factory=dict)
    generate: bool = True
    max_new_tokens: int = 8
    scheduler: str | None = None
    cache_dir: str | None = None
    noise_floor: bool | str = False
    perturbations: str | None = None
    variables: str = "psens"
    shots_from: str = "dataset"
    normalization: str = DEFAULT_NORMALIZATION
    answer: str = DEFAULT_ANSWER
    cloze_norm: str | None = None
    preset: str | None = None

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunConfig:
        """Build from a mapping, refusing unknown keys (with the closest valid key).

        With ``preset``, the preset's values (:data:`PRESETS`) fill the keys the mapping
        does not give; keys it gives win (:func:`apply_preset`).
        """
        check_keys(raw, [f.name for f in dataclasses.fields(cls)], ("store", "models", "dataset"))
        cfg = cls(**apply_preset(raw))
        cfg.__dict__["_preset_applied"] = True
        cfg.check()
        return cfg

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every key's default (``None`` for the required ``store``, ``models``, ``dataset``).

        Examples
        --------
        >>> RunConfig.defaults()["solver"], RunConfig.defaults()["store"]
        ('canonical', None)
        """
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
            else:
                out[f.name] = None
        return out

    @classmethod
    def from_any(cls, config: RunConfig | dict | str | os.PathLike) -> RunConfig:
        """A RunConfig from itself, a dict, or a TOML/YAML file path."""
        if isinstance(config, RunConfig):
            config.check()
            return config
        if isinstance(config, str | os.PathLike):
            return load_config(config)
        return cls.from_dict(dict(config))

    # ----------------------------------------------------------------- checks

    @property
    def template_names(self) -> list[str]:
        """The templates to run, with a set name expanded; in a cloze run, their cloze
        forms (``"ips1-cloze"``; a cloze template such as ``"cloze"`` as it is)."""
        from psens import prompts

        names = self._listed_templates
        if self.answer != "cloze":
            return names
        return [
            n
            if n in prompts.TEMPLATES and prompts.TEMPLATES[n].kind == "cloze"
            else n + prompts.CLOZE_SUFFIX
            for n in names
        ]

    @property
    def cloze_norm_name(self) -> str:
        """The normalisation of a cloze run (``cloze_norm``, default ``"char"``)."""
        return self.cloze_norm or DEFAULT_CLOZE_NORM

    @property
    def _listed_templates(self) -> list[str]:
        """The templates as the config names them, with a set name expanded."""
        if self.templates == "prosa":
            from psens.pss.published import PUBLISHED_KEYS, register_published

            if self.dataset not in PUBLISHED_KEYS:
                fail(
                    WHERE,
                    f'templates = "prosa" but ProSA published no prompts for {shown(self.dataset)}',
                    f"Use one of the datasets {sorted(PUBLISHED_KEYS)} or list templates",
                )
            return register_published(self.dataset)
        if isinstance(self.templates, str):
            return list(TEMPLATE_SETS.get(self.templates, (self.templates,)))
        formats = self.formats
        if formats is not None:
            return [f.id for f in formats]
        return list(self.templates)

    @property
    def formats(self) -> list | None:
        """The :class:`psens.formats.Format` points of a format-space ``templates``, or None.

        A sampled space (``{grammar = ..., k = ...}``) draws only formats whose option labels
        every model's tokenizer tells apart (:func:`psens.formats.tokens.scorable`), so a
        tokenizer that cannot score lowercase or digit labels gets formats it can score;
        explicit points are taken as given (the run refuses one that cannot be scored).
        """
        t = self.templates
        if isinstance(t, dict):
            models = json.dumps(
                [self.models, self.cache_dir, self.trust_remote_code], sort_keys=True, default=str
            )
            return _formats(json.dumps(t, sort_keys=True), self.answer, models)
        if isinstance(t, list | tuple) and t and isinstance(t[0], dict):
            return _formats(json.dumps(t, sort_keys=True), self.answer)
        return None

    @property
    def template_coords(self) -> dict[str, list[str]] | None:
        """``{dimension: value per template}`` of a format-space run, or None."""
        formats = self.formats
        if formats is None:
            return None
        from psens.formats.grammar import CLOZE_HIDDEN

        hidden = CLOZE_HIDDEN if self.answer == "cloze" else ()  # a cloze prompt does not show
        return {k: [f.coords[k] for f in formats] for k in formats[0].coords if k not in hidden}

    def check(self) -> None:
        """Cheap checks that need no model and no dataset (the runner loads the items next).

        A RunConfig built directly (not through :meth:`from_dict`) with ``preset`` gets the
        preset's values here, for the fields still at their defaults.
        """
        from psens import prompts
        from psens.interactions import SolverSettings

        if self.preset is not None and not self.__dict__.get("_preset_applied"):
            defaults = self.defaults()
            given = {
                f.name: getattr(self, f.name)
                for f in dataclasses.fields(self)
                if getattr(self, f.name) != defaults[f.name]
            }
            for key, value in apply_preset(given).items():
                setattr(self, key, value)
            self.__dict__["_preset_applied"] = True
        self._check_types()
        self._check_choices()
        if self.dataset_path is None:  # a local copy may hold other splits
            from psens.datasets import check_split

            check_split(self.dataset, self.split, WHERE)
        names = self.model_names  # every entry checked and resolved (ModelSpec.from_entry)
        if len(set(names)) != len(names):
            fail(WHERE, "'models' lists a model twice", "Remove the duplicate")
        names = self._listed_templates
        _check_unique(names, "templates")
        if isinstance(self.samples, list | tuple):
            _check_unique(self.samples, "samples")
        if self.shots is not None:
            _check_unique(self.shots, "shots")
        for t in names:
            if t not in prompts.TEMPLATES and self.formats is None:
                fail(
                    WHERE,
                    f"unknown template {shown(t)} in 'templates'",
                    f"Use a set name {sorted(TEMPLATE_SETS)} or templates from "
                    f"{sorted(prompts.TEMPLATES)}",
                )
        self._check_answer(names)
        rewritten = [t for t in names if prompts.rewrite_of(t)]
        if rewritten and self.perturbations is None:
            fail(
                WHERE,
                f"templates {rewritten} show a rewritten instruction, but no 'perturbations' "
                "file gives the rewrites",
                'Add perturbations = "file.json" and list the templates without ":<rewrite>"',
            )
        if self.perturbations is not None:
            self._check_perturbations(names)
        elif len(names) < 2:
            fail(
                WHERE,
                "'templates' names fewer than two templates",
                'IPS compares templates: give at least two (e.g. templates = "ips5")',
            )
        if self.shots is not None:
            if not self.shots or any(not isinstance(k, int) or k < 0 for k in self.shots):
                fail(
                    WHERE,
                    f"'shots' = {shown(self.shots)}",
                    "Use a list of shot counts like [0, 1, 3]",
                )
        max_vars = prompts.MAX_VARIABLES
        check_positive_int(self.n_vars, WHERE, "n_vars", minimum=0)  # 0: predictions only
        if self.n_vars > max_vars:
            fail(
                WHERE,
                f"n_vars = {self.n_vars} exceeds the cap {max_vars} "
                f"(2**{self.n_vars} masked prompts per item and template)",
                f"Use n_vars <= {max_vars}, or the sparse path for longer inputs "
                "(psens.ips.sparse, n up to 64)",
            )
        check_in_interval(self.tau, WHERE, "tau", 0.0, 1.0)
        if isinstance(self.samples, bool) or not isinstance(self.samples, int | list | tuple):
            fail(WHERE, f"'samples' = {shown(self.samples)}", "Give a count or a list of item ids")
        if isinstance(self.samples, int):
            check_positive_int(self.samples, WHERE, "samples")
        try:
            for method in self.solvers:
                SolverSettings(method=method, **self.settings_for(method))
        except TypeError as exc:
            fail(
                WHERE,
                f"'solver_settings' has an unknown field ({exc})",
                f"Use fields of SolverSettings: "
                f"{[f.name for f in dataclasses.fields(SolverSettings)][1:]}",
            )
        except ValueError as exc:
            fail(WHERE, f"'solver'/'solver_settings': {exc}", "Fix the solver settings")
        if self.batch_size != "auto":
            check_positive_int(self.batch_size, WHERE, "batch_size")
        if self.batch_size != "auto" and self.batch_size > MAX_BATCH:
            fail(
                WHERE,
                f"batch_size = {self.batch_size} is above {MAX_BATCH} masked prompts per "
                "forward pass (their activations would not fit in memory)",
                f"Use batch_size <= {MAX_BATCH} (default 32)",
            )
        check_positive_int(self.max_new_tokens, WHERE, "max_new_tokens")
        if self.threads is not None:
            check_positive_int(self.threads, WHERE, "threads")
        if self.scheduler is not None:
            parse_scheduler(self.scheduler)
        _check_device(self.device)
        if self.dtype is not None and self.dtype not in DTYPES:
            fail(WHERE, f"dtype = {shown(self.dtype)} is not known", f"Use one of {list(DTYPES)}")
        self._check_noise_floor()
        self._check_code_execution()
        if self.cache_dir is not None:
            folder = Path(self.cache_dir).expanduser()
            if folder.exists() and not folder.is_dir():
                fail(
                    WHERE,
                    f"cache_dir = {shown(self.cache_dir)} is a file, not a folder",
                    "Point cache_dir at a folder (it is created if missing)",
                )
        models = self.model_names
        unknown_overrides = [k for k in self.mask_tokens if k not in models]
        if unknown_overrides:
            fail(
                WHERE,
                f"'mask_tokens' is keyed by models, and {shown(unknown_overrides)} "
                "are not in 'models'",
                f"Key the overrides by the names in 'models': {shown(models)}",
            )

    def _check_code_execution(self) -> None:
        """A run that would score generated code (the ``humaneval`` dataset with
        ``generate``) needs ``allow_code_execution = true``."""
        from psens.datasets import canonical_name

        if self.generate and not self.allow_code_execution:
            if canonical_name(str(self.dataset), WHERE)[0] == "humaneval":
                fail(
                    WHERE,
                    f"dataset = {self.dataset!r} is scored by running the generated code, and "
                    "code execution is off",
                    "Add allow_code_execution = true to run it in the sandbox "
                    "(psens.pss.sandbox), or set generate = false",
                )

    def _check_choices(self) -> None:
        """``variables``, ``shots_from``, ``normalization``, ``answer`` and ``cloze_norm``
        name known choices."""
        for key, known in (
            ("variables", VARIABLE_RULES),
            ("shots_from", SHOT_SOURCES),
            ("normalization", NORMALIZATIONS),
            ("answer", ANSWERS),
        ):
            value = getattr(self, key)
            if not isinstance(value, str) or value not in known:
                fail(WHERE, f"{key} = {shown(value)} is not known", f"Use one of {list(known)}")
        if self.cloze_norm is not None:
            if not isinstance(self.cloze_norm, str) or self.cloze_norm not in CLOZE_NORMS:
                fail(
                    WHERE,
                    f"cloze_norm = {shown(self.cloze_norm)} is not known",
                    f"Use one of {list(CLOZE_NORMS)}",
                )
            if self.answer != "cloze":
                fail(
                    WHERE,
                    f'cloze_norm = {shown(self.cloze_norm)} but answer = "{self.answer}": it '
                    "normalises the options' scores of cloze runs",
                    'Set answer = "cloze", or drop cloze_norm',
                )
        from psens.prompts import PAPER_SHOTS

        n_paper = len(PAPER_SHOTS)
        if self.shots_from == "paper" and self.shots and max(self.shots) > n_paper:
            fail(
                WHERE,
                f"shots = {self.shots} but the IPS paper gives {n_paper} examples "
                '(shots_from = "paper")',
                f'Use shot counts <= {n_paper}, or shots_from = "dataset"',
            )

    def _check_answer(self, names: list[str]) -> None:
        """The listed templates fit the answer formulation: a letter run lists no cloze
        template; a cloze run lists templates that have a cloze form (multiple-choice,
        not a fixed layout)."""
        from psens import prompts

        if self.formats is not None:
            return
        for n in names:
            if n not in prompts.TEMPLATES:
                return  # reported as unknown next
            t = prompts.TEMPLATES[n]
            if self.answer != "cloze" and t.kind == "cloze":
                fail(
                    WHERE,
                    f"template {n!r} is a cloze prompt (the options are not shown) but "
                    f'answer = "{self.answer}"',
                    'Set answer = "cloze" (the templates are shown in cloze form)',
                )
            if self.answer == "cloze" and ((t.kind != "mcq" and t.kind != "cloze") or t.layout):
                what = "an open-ended template" if t.kind == "open" else "a fixed layout"
                fail(
                    WHERE,
                    f'answer = "cloze" but template {n!r} is {what}: it has no cloze form',
                    'Use multiple-choice templates (templates = "ips5", "cloze", a format '
                    'space), or answer = "letter"',
                )

    @property
    def predictions_only(self) -> bool:
        """``n_vars = 0``: only the unmasked prompts are answered (the PSS design)."""
        return type(self.n_vars) is int and self.n_vars == 0

    def _check_perturbations(self, names: list[str]) -> None:
        """With ``perturbations``: a readable file, templates for open-ended items given
        without a rewrite (the run adds the rewrites)."""
        from psens import prompts
        from psens.perturbations import load_perturbations

        if not isinstance(self.perturbations, str | os.PathLike):
            _wrong_type("perturbations", self.perturbations, "a path to a JSON file")
        for t in names:
            if prompts.get_template(t).kind != "open" or prompts.rewrite_of(t):
                fail(
                    WHERE,
                    f"template {shown(t)} with 'perturbations': the rewrites are for open-ended "
                    "templates given without a rewrite",
                    'Use templates = ["open", "open-case"]; the run adds ":paraphrase" and '
                    '":reorder"',
                )
        load_perturbations(self.perturbations)

    @property
    def solvers(self) -> list[str]:
        """The AND-OR solvers of the run (one for ``solver = "name"``)."""
        return [self.solver] if isinstance(self.solver, str) else list(self.solver)

    def settings_for(self, method: str) -> dict[str, Any]:
        """``solver_settings`` for one solver: with a list of solvers, ``preset`` (which
        reproduces the published SGD procedure) only reaches ``"sgd"``."""
        if isinstance(self.solver, str) or method == "sgd":
            return dict(self.solver_settings)
        return {k: v for k, v in self.solver_settings.items() if k != "preset"}

    @property
    def floor_dtype(self) -> str | None:
        """The dtype of the noise-floor scoring (``"bfloat16"``, ``"float16"``), or None."""
        if self.noise_floor is False:
            return None
        if self.noise_floor is True:
            return "bfloat16"
        return FLOOR_DTYPES.get(self.noise_floor)

    def _check_noise_floor(self) -> None:
        """``noise_floor`` is false, true or a half-precision dtype other than the run's own."""
        value = self.noise_floor
        if not isinstance(value, bool | str) or (
            isinstance(value, str) and value not in FLOOR_DTYPES
        ):
            fail(
                WHERE,
                f"noise_floor = {shown(value)} is not a half-precision dtype",
                f"Use noise_floor = false, true (bfloat16) or one of {sorted(set(FLOOR_DTYPES))}",
            )
        if self.predictions_only and not isinstance(self.solver, str):
            fail(
                WHERE,
                "n_vars = 0 (predictions only) computes no interactions, but 'solver' is a list",
                "Drop the solver list (leave solver at its default)",
            )
        if self.floor_dtype is not None and self.predictions_only:
            fail(
                WHERE,
                "noise_floor is set but n_vars = 0 (no masked prompts to score twice)",
                "Drop noise_floor, or set n_vars > 0 for an IPS run",
            )
        run_dtype = DTYPE_NAMES.get(self.dtype or "float32")
        if self.floor_dtype is not None and self.floor_dtype == run_dtype:
            fail(
                WHERE,
                f"noise_floor = {shown(value)} is the run's own dtype ({self.dtype}): the two "
                "scorings would be the same",
                "Use another dtype for noise_floor (bfloat16 or float16) or for 'dtype'",
            )

    def _check_types(self) -> None:
        """Refuse a value of the wrong type, naming its key (``dataset = 7``, ``seed = "abc"``,
        ``samples = []``, ``templates = 5``, ``generate = "no"``)."""
        for key in ("store", "dataset"):
            value = getattr(self, key)
            if not isinstance(value, str | os.PathLike) or not str(value).strip():
                _wrong_type(key, value, "a non-empty string")
        for key in ("split", "dataset_path", "dtype", "scheduler", "cache_dir"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str | os.PathLike):
                _wrong_type(key, value, "a string")
        if not isinstance(self.device, str):
            _wrong_type("device", self.device, "a string")
        if isinstance(self.solver, list | tuple):
            if not self.solver or not all(isinstance(m, str) for m in self.solver):
                _wrong_type(
                    "solver", self.solver, 'a solver name or a list like ["canonical", "sgd"]'
                )
            _check_unique(self.solver, "solver")
        elif not isinstance(self.solver, str):
            _wrong_type("solver", self.solver, 'a solver name or a list like ["canonical", "sgd"]')
        if not isinstance(self.models, list | tuple) or not self.models:
            fail(
                WHERE,
                f"'models' must be a non-empty list of names or served-model tables, got "
                f"{shown(self.models)}",
                'Write models = ["name", {name = "...", base_url = "http://...", ...}]',
            )
        if isinstance(self.samples, list | tuple):
            if not self.samples:
                fail(WHERE, "'samples' is an empty list", "Give a count or a list of item ids")
            if not all(isinstance(x, str) for x in self.samples):
                fail(
                    WHERE,
                    f"'samples' lists {shown(self.samples)}; item ids are strings",
                    'Quote the ids (samples = ["id1", "id2"]) or give a count (samples = 20)',
                )
        t = self.templates
        if not isinstance(t, str | list | tuple | dict) or (
            isinstance(t, list | tuple)
            and not (all(isinstance(x, str) for x in t) or all(isinstance(x, dict) for x in t))
        ):
            _wrong_type(
                "templates",
                t,
                'a set name ("ips5"), a list of template names, a format space '
                '({grammar = "default", k = 16, seed = 0}) or a list of format points',
            )
        if self.shots is not None and not isinstance(self.shots, list | tuple):
            _wrong_type("shots", self.shots, "a list of shot counts like [0, 1, 3]")
        if isinstance(self.tau, bool) or not isinstance(self.tau, int | float):
            _wrong_type("tau", self.tau, "a number")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            _wrong_type("seed", self.seed, "an integer")
        if self.seed < 0:
            fail(WHERE, f"seed = {self.seed} is negative", "Use a seed >= 0")
        for key in ("trust_remote_code", "generate", "allow_code_execution"):
            value = getattr(self, key)
            if not isinstance(value, bool):
                fail(
                    WHERE,
                    f"'{key}' must be true or false, got {shown(value)}",
                    f"Write {key} = true or {key} = false (without quotes)",
                    TypeError,
                )
        for key in ("solver_settings", "mask_tokens"):
            if not isinstance(getattr(self, key), dict):
                _wrong_type(key, getattr(self, key), "a table (a mapping)")
        if not all(isinstance(v, str) for v in self.mask_tokens.values()):
            _wrong_type("mask_tokens", self.mask_tokens, "a table of model = token strings")

    # ----------------------------------------------------------------- identity

    @property
    def model_specs(self) -> list[ModelSpec]:
        """The ``models`` entries, each checked and resolved once
        (:meth:`psens.models.spec.ModelSpec.from_entry`; recomputed only when ``models`` or
        ``cache_dir`` change)."""
        key = json.dumps([self.models, self.cache_dir], sort_keys=True, default=str)
        cached = self.__dict__.get("_specs")
        if cached is None or cached[0] != key:
            from psens.models.spec import ModelSpec

            if not isinstance(self.models, list | tuple):
                self._check_types()
            specs = [ModelSpec.from_entry(m, self.cache_dir, WHERE) for m in self.models]
            self.__dict__["_specs"] = cached = (key, specs)
        return list(cached[1])

    @property
    def model_names(self) -> list[str]:
        """The models' names in the store (a served model's ``name``)."""
        return [spec.name for spec in self.model_specs]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        """Hash of everything that determines the stored numbers (not scheduler/store/device,
        nor where a served model is served: its endpoints, concurrency and timeouts)."""
        d = self.to_dict()
        for k in ("store", "scheduler", "cache_dir", "preset"):  # a preset's values are fields
            d.pop(k)
        for k, default in (
            ("variables", "psens"),
            ("shots_from", "dataset"),
            ("normalization", DEFAULT_NORMALIZATION),
            ("answer", DEFAULT_ANSWER),
            ("cloze_norm", None),
        ):
            if d[k] == default:  # absent at the default: older stores keep their hash
                d.pop(k)
        if self.answer == "cloze":  # the default normalisation named or not: one run
            d["cloze_norm"] = self.cloze_norm_name
        d.pop("noise_floor")  # absent without a floor: older stores keep their hash
        if d.pop("perturbations") is not None:  # absent without: older stores keep their hash
            d["perturbations"] = hashlib.sha256(Path(self.perturbations).read_bytes()).hexdigest()
        if self.floor_dtype is not None:
            d["noise_floor"] = self.floor_dtype  # true and "bfloat16" are one run
        for key in ("trust_remote_code", "allow_code_execution"):
            if d.pop(key):  # absent when false: older stores keep their hash
                d[key] = True
        d["models"] = [spec.identity() for spec in self.model_specs]
        text = json.dumps(d, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


#: The largest ``batch_size`` (masked prompts per forward pass) a run accepts.
MAX_BATCH = 2**16
#: ``dtype`` values a run accepts (besides None: float32; ``"auto"``: the checkpoint's)
DTYPES = (*DTYPE_NAMES, "auto")
#: ``noise_floor`` dtype names and their canonical names
FLOOR_DTYPES = {k: v for k, v in DTYPE_NAMES.items() if v != "float32"}
#: ``device`` kinds a run accepts (optionally with an index, ``cuda:1``)
DEVICES = ("cpu", "cuda", "mps", "auto")


@functools.lru_cache(maxsize=32)
def _formats(spec: str, answer: str = DEFAULT_ANSWER, models: str | None = None) -> list:
    """The formats of a ``templates`` format space (cached: sampling is deterministic); in
    a cloze run, distinct in their cloze forms; with ``models`` (``[models, cache_dir,
    trust_remote_code]`` as JSON) in a letter run, only formats every model's tokenizer can
    score (:func:`psens.formats.tokens.scorable`; a cloze run scores no label)."""
    from psens.formats import formats_from_spec
    from psens.formats.tokens import scorable

    answer = answer if answer in ANSWERS else "letter"
    usable = None
    if models is not None and answer == "letter":
        entries, cache_dir, remote = json.loads(models)
        tokenizers = _tokenizers(entries, cache_dir, remote)
        usable = functools.partial(scorable, tokenizers=tokenizers)
    return formats_from_spec(json.loads(spec), WHERE, answer, usable)


def _tokenizers(entries: list, cache_dir: str | None, remote: bool) -> list:
    """The tokenizer of each model that has one here (a served model's ``tokenizer``);
    a model whose tokenizer cannot be read now (not downloaded, offline) is left out: the
    run checks every format under it before its store (``_check_answer_tokens``)."""
    from psens.models.served import load_tokenizer
    from psens.models.spec import ModelSpec

    out = []
    for entry in entries:
        try:
            spec = ModelSpec.from_entry(entry, cache_dir, WHERE)
            name = spec.served.tokenizer if spec.is_served else spec.entry
            out.append(
                load_tokenizer(name, cache_dir, trust_remote_code=remote and not spec.is_served)[0]
            )
        except Exception:  # any failure to read it: the run's own check decides
            continue
    return out


def _wrong_type(key: str, value: Any, expected: str) -> None:
    fail(
        WHERE,
        f"'{key}' must be {expected}, got {shown(value)} ({type(value).__name__})",
        f"Fix the value of {key}",
        TypeError,
    )


def _check_unique(values: Any, key: str) -> None:
    """Refuse a list that repeats an entry (a repeated template, sample or shot count)."""
    seen: set = set()
    for x in values:
        try:
            repeated = x in seen
            seen.add(x)
        except TypeError:  # unhashable: the type checks report it
            return
        if repeated:
            fail(WHERE, f"'{key}' lists {shown(x)} twice", f"Remove the duplicate from {key}")


def _check_device(device: str) -> None:
    """``cpu``, ``mps``, ``cuda`` or ``cuda:N`` (availability is checked when loading)."""
    kind, _, index = device.partition(":")
    ok = kind in DEVICES and (not index or (kind == "cuda" and index.isdigit()))
    if not ok:
        fail(
            WHERE,
            f"device = {shown(device)} is not known",
            "Use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'",
        )


def parse_scheduler(scheduler: str) -> tuple[str, Any]:
    """The one reading of ``scheduler``: ``("cuda", None)``, ``("local", N)`` for
    ``local:N`` (1 <= N <= this machine's cores) or ``("tcp", (host, port))`` for
    ``tcp://host:port``; anything else is refused in one line (whether dask-cuda and a GPU
    are there, and whether a ``tcp://`` address is a dask scheduler, is checked before the
    run, :func:`psens.runner.check_scheduler`).

    Examples
    --------
    >>> parse_scheduler("local:1"), parse_scheduler("tcp://10.0.0.5:8786")
    (('local', 1), ('tcp', ('10.0.0.5', 8786)))
    """
    import re

    s = str(scheduler)
    if s == "cuda":
        return "cuda", None
    local = re.fullmatch(r"local:([0-9]+)", s)
    if local:
        n, cores = int(local.group(1)), os.cpu_count() or 1
        if 1 <= n <= cores:
            return "local", n
        fail(
            WHERE,
            f"scheduler = {shown(s)} asks for {n} worker processes; this machine has {cores} cores",
            f"Use 'local:N' with 1 <= N <= {cores}",
        )
    tcp = re.fullmatch(r"tcp://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})", s)
    if tcp and 0 < int(tcp.group(2)) < 65536:
        return "tcp", (tcp.group(1).strip("[]"), int(tcp.group(2)))
    fail(
        WHERE,
        f"scheduler = {shown(s)} is not a scheduler address",
        "Use 'local:N' (N worker processes), 'cuda' (one worker per GPU) or 'tcp://host:port'",
    )
    raise AssertionError  # unreachable


def apply_preset(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with its ``preset``'s values (:data:`PRESETS`) for the keys it does not set.

    Explicit keys win. ``solver_settings`` of a preset only apply with the preset's solver
    (a config that sets ``solver`` itself keeps its own settings). An unknown preset is
    refused (one line naming the known presets), before any store is created.

    Examples
    --------
    >>> out = apply_preset({"preset": "paper", "dtype": "float32"})
    >>> out["dtype"], out["solver"], out["normalization"]
    ('float32', 'sgd', 'all')
    """
    name = raw.get("preset")
    if name is None:
        return dict(raw)
    if not isinstance(name, str) or name not in PRESETS:
        fail(WHERE, f"preset = {shown(name)} is not known", f"Use one of {sorted(PRESETS)}")
    out = dict(raw)
    for key, value in PRESETS[name].items():
        if key in raw or (key == "solver_settings" and "solver" in raw):
            continue
        out[key] = copy.deepcopy(value)
    return out


def load_config(path: str | os.PathLike) -> RunConfig:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``) config file."""
    return RunConfig.from_dict(read_config_file(path))


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The table of keys of a TOML (``.toml``) or YAML (``.yaml``/``.yml``) config file,
    refusing a missing file, bad syntax or a file that is not a table."""
    p = Path(path)
    if not p.is_file():
        fail(WHERE, f"config file {p} not found", "Check the path")
    text = p.read_text()
    if p.suffix == ".toml":
        import tomllib

        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            fail(WHERE, f"{p}, {_toml_position(exc)}not valid TOML ({exc})", "Fix the syntax")
    elif p.suffix in (".yaml", ".yml"):
        raw = read_yaml(text, p)
    else:
        fail(WHERE, f"{p} has suffix {p.suffix!r}", "Use a .toml, .yaml or .yml file")
    if not isinstance(raw, dict):
        fail(
            WHERE,
            f"{p} holds a {type(raw).__name__}, not a table of keys",
            "Write one key per line (store = ..., models = [...], dataset = ...)",
        )
    return raw


#: The most values the aliases (``*name``) of a YAML config may add to it when expanded.
MAX_ALIAS_VALUES = 10_000


def read_yaml(text: str, p: Path) -> Any:
    """The value of a YAML config (the safe subset: no Python objects), refusing in one line
    naming ``p`` and the line: bad syntax, a mapping that repeats a key (TOML refuses it;
    PyYAML would keep the last one), and aliases that expand to more than
    :data:`MAX_ALIAS_VALUES` values or into themselves (a "billion laughs" of a few hundred
    bytes expands to gigabytes). The document is composed (aliases are shared nodes, so
    this is cheap), checked, and only then built.
    """
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        distinct, expanded = _yaml_counts(root, p)
        if expanded - distinct > MAX_ALIAS_VALUES:
            fail(
                WHERE,
                f"{p}: its aliases (*name) expand to {expanded:,} values from {distinct:,}",
                f"Write the values out, or use aliases that add at most {MAX_ALIAS_VALUES:,}",
            )
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        fail(WHERE, f"{p}, {line}not valid YAML ({problem})", "Fix the syntax")
    except RecursionError:
        fail(WHERE, f"{p} nests its values too deeply", "Write a flat table of keys")
    finally:
        loader.dispose()


def _yaml_counts(root: Any, p: Path) -> tuple[int, int]:
    """``(distinct nodes, nodes once every alias is expanded)`` of a composed YAML document,
    refusing a mapping that repeats a key and an alias inside its own anchor."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            line = node.start_mark.line + 1
            fail(WHERE, f"{p}, line {line}: an alias refers to itself", "Remove the alias")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(x) for x in node.value)
        elif isinstance(node, yaml.MappingNode):
            seen: set = set()
            for k, v in node.value:
                name = (k.tag, k.value) if isinstance(k, yaml.ScalarNode) else None
                if name is not None and k.tag != "tag:yaml.org,2002:merge":
                    if name in seen:
                        fail(
                            WHERE,
                            f"{p}, line {k.start_mark.line + 1}: the key {shown(k.value)} "
                            "appears twice in one table",
                            "Keep one of them",
                        )
                    seen.add(name)
                total += size(k) + size(v)
        open_nodes.discard(key)
        sizes[key] = total
        return total

    expanded = size(root)
    return len(sizes), expanded


def _toml_position(exc: Exception) -> str:
    """``"line L, column C: "`` of a TOML error (``lineno`` on Python >= 3.14, else parsed
    from the message ``"... (at line L, column C)"``)."""
    import re

    line = getattr(exc, "lineno", None)
    col = getattr(exc, "colno", None)
    if line is None:
        m = re.search(r"at line (\d+), column (\d+)", str(exc))
        if not m:
            return ""
        line, col = int(m.group(1)), int(m.group(2))
    return f"line {line}, column {col}: "
