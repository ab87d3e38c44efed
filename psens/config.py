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
                    false; passed to transformers only when true)
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
``mask_tokens``     per-model mask-token overrides, ``{model: token}``
``generate``        store the greedy generated text (default true), ``max_new_tokens`` (8)
``scheduler``       ``None`` (serial), ``"local:N"`` (dask LocalCluster), ``"cuda"`` (one dask
                    worker per GPU: dask-cuda's LocalCUDACluster, ``pip install dask-cuda``)
                    or ``"tcp://host:port"``
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

from psens._validation import check_in_interval, check_keys, check_positive_int, fail
from psens.models.loading import DTYPE_NAMES  # the one table of dtype names
from psens.prompts import VARIABLE_RULES
from psens.settings import DEFAULT_NORMALIZATION, DEFAULT_SOLVER, DEFAULT_TAU, NORMALIZATIONS

if TYPE_CHECKING:
    from psens.models.spec import ModelSpec

__all__ = ["PRESETS", "TEMPLATE_SETS", "RunConfig", "load_config", "read_config_file"]

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
        """The templates to run, with a set name expanded."""
        if self.templates == "prosa":
            from psens.pss.published import PUBLISHED_KEYS, register_published

            if self.dataset not in PUBLISHED_KEYS:
                fail(
                    WHERE,
                    f'templates = "prosa" but ProSA published no prompts for {self.dataset!r}',
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
        """The :class:`psens.formats.Format` points of a format-space ``templates``, or None."""
        t = self.templates
        if isinstance(t, dict) or (isinstance(t, list | tuple) and t and isinstance(t[0], dict)):
            return _formats(json.dumps(t, sort_keys=True))
        return None

    @property
    def template_coords(self) -> dict[str, list[str]] | None:
        """``{dimension: value per template}`` of a format-space run, or None."""
        formats = self.formats
        if formats is None:
            return None
        return {k: [f.coords[k] for f in formats] for k in formats[0].coords}

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
        names = self.template_names
        _check_unique(names, "templates")
        if isinstance(self.samples, list | tuple):
            _check_unique(self.samples, "samples")
        if self.shots is not None:
            _check_unique(self.shots, "shots")
        for t in names:
            if t not in prompts.TEMPLATES and self.formats is None:
                fail(
                    WHERE,
                    f"unknown template {t!r} in 'templates'",
                    f"Use a set name {sorted(TEMPLATE_SETS)} or templates from "
                    f"{sorted(prompts.TEMPLATES)}",
                )
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
                fail(WHERE, f"'shots' = {self.shots!r}", "Use a list of shot counts like [0, 1, 3]")
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
            fail(WHERE, f"'samples' = {self.samples!r}", "Give a count or a list of item ids")
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
            _check_scheduler(self.scheduler)
        _check_device(self.device)
        if self.dtype is not None and self.dtype not in DTYPES:
            fail(WHERE, f"dtype = {self.dtype!r} is not known", f"Use one of {list(DTYPES)}")
        self._check_noise_floor()
        self._check_code_execution()
        if self.cache_dir is not None:
            folder = Path(self.cache_dir).expanduser()
            if folder.exists() and not folder.is_dir():
                fail(
                    WHERE,
                    f"cache_dir = {self.cache_dir!r} is a file, not a folder",
                    "Point cache_dir at a folder (it is created if missing)",
                )
        unknown_overrides = set(self.mask_tokens) - set(names)
        if unknown_overrides:
            fail(
                WHERE,
                f"'mask_tokens' names models not in 'models': {sorted(unknown_overrides)}",
                "Key the overrides by the names used in 'models'",
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
        """``variables``, ``shots_from`` and ``normalization`` name known choices."""
        for key, known in (
            ("variables", VARIABLE_RULES),
            ("shots_from", SHOT_SOURCES),
            ("normalization", NORMALIZATIONS),
        ):
            value = getattr(self, key)
            if value not in known:
                fail(WHERE, f"{key} = {value!r} is not known", f"Use one of {list(known)}")
        from psens.prompts import PAPER_SHOTS

        n_paper = len(PAPER_SHOTS)
        if self.shots_from == "paper" and self.shots and max(self.shots) > n_paper:
            fail(
                WHERE,
                f"shots = {self.shots} but the IPS paper gives {n_paper} examples "
                '(shots_from = "paper")',
                f'Use shot counts <= {n_paper}, or shots_from = "dataset"',
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
                    f"template {t!r} with 'perturbations': the rewrites are for open-ended "
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
                f"noise_floor = {value!r} is not a half-precision dtype",
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
                f"noise_floor = {value!r} is the run's own dtype ({self.dtype}): the two "
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
                f"{self.models!r}",
                'Write models = ["name", {name = "...", base_url = "http://...", ...}]',
            )
        if isinstance(self.samples, list | tuple):
            if not self.samples:
                fail(WHERE, "'samples' is an empty list", "Give a count or a list of item ids")
            if not all(isinstance(x, str) for x in self.samples):
                fail(
                    WHERE,
                    f"'samples' lists {self.samples!r}; item ids are strings",
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
                    f"'{key}' must be true or false, got {value!r}",
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
        ):
            if d[k] == default:  # absent at the default: older stores keep their hash
                d.pop(k)
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
def _formats(spec: str) -> list:
    """The formats of a ``templates`` format space (cached: sampling is deterministic)."""
    from psens.formats import formats_from_spec

    return formats_from_spec(json.loads(spec), WHERE)


def _wrong_type(key: str, value: Any, expected: str) -> None:
    fail(
        WHERE,
        f"'{key}' must be {expected}, got {value!r} ({type(value).__name__})",
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
            fail(WHERE, f"'{key}' lists {x!r} twice", f"Remove the duplicate from {key}")


def _check_device(device: str) -> None:
    """``cpu``, ``mps``, ``cuda`` or ``cuda:N`` (availability is checked when loading)."""
    kind, _, index = device.partition(":")
    ok = kind in DEVICES and (not index or (kind == "cuda" and index.isdigit()))
    if not ok:
        fail(
            WHERE,
            f"device = {device!r} is not known",
            "Use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'",
        )


def _check_scheduler(scheduler: str) -> None:
    """``local:N`` (N >= 1), ``cuda`` or ``tcp://host:port`` (whether dask-cuda and a GPU are
    there is checked before the run, :func:`psens.runner.check_scheduler`)."""
    s = str(scheduler)
    if s == "cuda":
        ok = True
    elif s.startswith("local:"):
        ok = s[6:].isdigit() and int(s[6:]) > 0
    elif s.startswith("tcp://"):
        host, _, port = s[6:].rpartition(":")
        ok = bool(host) and port.isdigit() and 0 < int(port) < 65536
    else:
        ok = False
    if not ok:
        fail(
            WHERE,
            f"scheduler = {s!r} is not a scheduler address",
            "Use 'local:N' (N worker processes), 'cuda' (one worker per GPU) or 'tcp://host:port'",
        )


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
        fail(WHERE, f"preset = {name!r} is not known", f"Use one of {sorted(PRESETS)}")
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
        import yaml

        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            fail(WHERE, f"{p}, {line}not valid YAML ({problem})", "Fix the syntax")
    else:
        fail(WHERE, f"{p} has suffix {p.suffix!r}", "Use a .toml, .yaml or .yml file")
    if not isinstance(raw, dict):
        fail(
            WHERE,
            f"{p} holds a {type(raw).__name__}, not a table of keys",
            "Write one key per line (store = ..., models = [...], dataset = ...)",
        )
    return raw


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
