"""Run configuration: one declarative object, read from TOML/YAML or a dict, checked up front.

Every mistake a config can hold (a typo'd key, an unknown model, template or dataset, an
out-of-range number) is reported before any model is loaded, naming the key and the fix.
The keys, their types, defaults, allowed values and docs are the rows of
:data:`psens.config_schema.FIELDS` (the table of docs/runs.md); the checks that read several
keys are :data:`CROSS_CHECKS`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psens._validation import check_keys, fail, shown
from psens.config_files import read_config_file, read_yaml
from psens.config_schema import (
    FLOOR_DTYPES,
    MAX_BATCH,
    PRESETS,
    TEMPLATE_SETS,
    WHERE,
    check_field,
    check_fields,
    check_unique,
    declare,
    defaults,
    parse_scheduler,
    required,
)
from psens.models.loading import DTYPE_NAMES
from psens.settings import ANSWERS, DEFAULT_ANSWER, DEFAULT_CLOZE_NORM, DEFAULT_NORMALIZATION

if TYPE_CHECKING:
    from psens.models.spec import ModelSpec

__all__ = [
    "CROSS_CHECKS",
    "MAX_BATCH",
    "PRESETS",
    "TEMPLATE_SETS",
    "RunConfig",
    "load_config",
    "parse_scheduler",
    "read_config_file",
    "read_yaml",
]


@declare("ips")
class RunConfig:
    """A run's configuration: the ``"ips"`` rows of :data:`psens.config_schema.FIELDS`
    (docs/runs.md lists every key)."""

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunConfig:
        """Build from a mapping, refusing unknown keys (with the closest valid key).

        With ``preset``, the preset's values (:data:`PRESETS`) fill the keys the mapping
        does not give; keys it gives win (:func:`apply_preset`).
        """
        check_keys(raw, [f.name for f in dataclasses.fields(cls)], required("ips"))
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
        return defaults("ips")

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
        """Cheap checks that need no model and no dataset (the runner loads the items next):
        every key's row (:func:`psens.config_schema.check_fields`), then
        :data:`CROSS_CHECKS`.

        A RunConfig built directly (not through :meth:`from_dict`) with ``preset`` gets the
        preset's values here, for the fields still at their defaults.
        """
        if self.preset is not None and not self.__dict__.get("_preset_applied"):
            start = self.defaults()
            given = {
                f.name: getattr(self, f.name)
                for f in dataclasses.fields(self)
                if getattr(self, f.name) != start[f.name]
            }
            for key, value in apply_preset(given).items():
                setattr(self, key, value)
            self.__dict__["_preset_applied"] = True
        check_fields(self, "ips", WHERE)
        for check in CROSS_CHECKS:
            check(self)

    @property
    def predictions_only(self) -> bool:
        """``n_vars = 0``: only the unmasked prompts are answered (the PSS design)."""
        return type(self.n_vars) is int and self.n_vars == 0

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
                check_field("models", self.models)
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


# --------------------------------------------------------------------------- cross checks
# The checks that read several keys, in the order :meth:`RunConfig.check` runs them.


def _check_cloze_norm(cfg: RunConfig) -> None:
    """``cloze_norm`` only in a cloze run."""
    if cfg.cloze_norm is not None and cfg.answer != "cloze":
        fail(
            WHERE,
            f'cloze_norm = {shown(cfg.cloze_norm)} but answer = "{cfg.answer}": it '
            "normalises the options' scores of cloze runs",
            'Set answer = "cloze", or drop cloze_norm',
        )


def _check_paper_shots(cfg: RunConfig) -> None:
    """``shots_from = "paper"`` has as many examples as the paper prints."""
    from psens.prompts import PAPER_SHOTS

    n_paper = len(PAPER_SHOTS)
    if cfg.shots_from == "paper" and cfg.shots and max(cfg.shots) > n_paper:
        fail(
            WHERE,
            f"shots = {cfg.shots} but the IPS paper gives {n_paper} examples "
            '(shots_from = "paper")',
            f'Use shot counts <= {n_paper}, or shots_from = "dataset"',
        )


def _check_split(cfg: RunConfig) -> None:
    """The dataset has the split (a local copy, ``dataset_path``, may hold other splits)."""
    if cfg.dataset_path is None:
        from psens.datasets import check_split

        check_split(cfg.dataset, cfg.split, WHERE)


def _check_models(cfg: RunConfig) -> None:
    """Every ``models`` entry resolves (:meth:`RunConfig.model_specs`), each name once."""
    names = cfg.model_names
    if len(set(names)) != len(names):
        fail(WHERE, "'models' lists a model twice", "Remove the duplicate")


def _check_templates(cfg: RunConfig) -> None:
    """The templates are distinct and known, fit the answer formulation
    (:func:`_check_answer`) and the ``perturbations``, and there are at least two."""
    from psens import prompts

    names = cfg._listed_templates
    check_unique(names, "templates")
    for t in names:
        if t not in prompts.TEMPLATES and cfg.formats is None:
            fail(
                WHERE,
                f"unknown template {shown(t)} in 'templates'",
                f"Use a set name {sorted(TEMPLATE_SETS)} or templates from "
                f"{sorted(prompts.TEMPLATES)}",
            )
    _check_answer(cfg, names)
    rewritten = [t for t in names if prompts.rewrite_of(t)]
    if rewritten and cfg.perturbations is None:
        fail(
            WHERE,
            f"templates {rewritten} show a rewritten instruction, but no 'perturbations' "
            "file gives the rewrites",
            'Add perturbations = "file.json" and list the templates without ":<rewrite>"',
        )
    if cfg.perturbations is not None:
        _check_perturbations(cfg, names)
    elif len(names) < 2:
        fail(
            WHERE,
            "'templates' names fewer than two templates",
            'IPS compares templates: give at least two (e.g. templates = "ips5")',
        )


def _check_answer(cfg: RunConfig, names: list[str]) -> None:
    """The listed templates fit the answer formulation: a letter run lists no cloze
    template; a cloze run lists templates that have a cloze form (multiple-choice,
    not a fixed layout)."""
    from psens import prompts

    if cfg.formats is not None:
        return
    for n in names:
        if n not in prompts.TEMPLATES:
            return  # reported as unknown
        t = prompts.TEMPLATES[n]
        if cfg.answer != "cloze" and t.kind == "cloze":
            fail(
                WHERE,
                f"template {n!r} is a cloze prompt (the options are not shown) but "
                f'answer = "{cfg.answer}"',
                'Set answer = "cloze" (the templates are shown in cloze form)',
            )
        if cfg.answer == "cloze" and ((t.kind != "mcq" and t.kind != "cloze") or t.layout):
            what = "an open-ended template" if t.kind == "open" else "a fixed layout"
            fail(
                WHERE,
                f'answer = "cloze" but template {n!r} is {what}: it has no cloze form',
                'Use multiple-choice templates (templates = "ips5", "cloze", a format '
                'space), or answer = "letter"',
            )


def _check_perturbations(cfg: RunConfig, names: list[str]) -> None:
    """With ``perturbations``: a readable file, templates for open-ended items given
    without a rewrite (the run adds the rewrites)."""
    from psens import prompts
    from psens.perturbations import load_perturbations

    for t in names:
        if prompts.get_template(t).kind != "open" or prompts.rewrite_of(t):
            fail(
                WHERE,
                f"template {shown(t)} with 'perturbations': the rewrites are for open-ended "
                "templates given without a rewrite",
                'Use templates = ["open", "open-case"]; the run adds ":paraphrase" and ":reorder"',
            )
    load_perturbations(cfg.perturbations)


def _check_solver_settings(cfg: RunConfig) -> None:
    """``solver_settings`` are fields of :class:`psens.interactions.SolverSettings` that
    every solver of the run accepts."""
    from psens.interactions import SolverSettings

    try:
        for method in cfg.solvers:
            SolverSettings(method=method, **cfg.settings_for(method))
    except TypeError as exc:
        fail(
            WHERE,
            f"'solver_settings' has an unknown field ({exc})",
            f"Use fields of SolverSettings: "
            f"{[f.name for f in dataclasses.fields(SolverSettings)][1:]}",
        )
    except ValueError as exc:
        fail(WHERE, f"'solver'/'solver_settings': {exc}", "Fix the solver settings")


def _check_noise_floor(cfg: RunConfig) -> None:
    """A run with ``n_vars = 0`` has one solver and no floor; the floor's dtype is not the
    run's own."""
    if cfg.predictions_only and not isinstance(cfg.solver, str):
        fail(
            WHERE,
            "n_vars = 0 (predictions only) computes no interactions, but 'solver' is a list",
            "Drop the solver list (leave solver at its default)",
        )
    if cfg.floor_dtype is not None and cfg.predictions_only:
        fail(
            WHERE,
            "noise_floor is set but n_vars = 0 (no masked prompts to score twice)",
            "Drop noise_floor, or set n_vars > 0 for an IPS run",
        )
    if cfg.floor_dtype is not None and cfg.floor_dtype == DTYPE_NAMES.get(cfg.dtype or "float32"):
        fail(
            WHERE,
            f"noise_floor = {shown(cfg.noise_floor)} is the run's own dtype ({cfg.dtype}): the "
            "two scorings would be the same",
            "Use another dtype for noise_floor (bfloat16 or float16) or for 'dtype'",
        )


def _check_code_execution(cfg: RunConfig) -> None:
    """A run that would score generated code (the ``humaneval`` dataset with ``generate``)
    needs ``allow_code_execution = true``."""
    from psens.datasets import canonical_name

    if cfg.generate and not cfg.allow_code_execution:
        if canonical_name(str(cfg.dataset), WHERE)[0] == "humaneval":
            fail(
                WHERE,
                f"dataset = {cfg.dataset!r} is scored by running the generated code, and "
                "code execution is off",
                "Add allow_code_execution = true to run it in the sandbox "
                "(psens.pss.sandbox), or set generate = false",
            )


def _check_mask_tokens(cfg: RunConfig) -> None:
    """``mask_tokens`` is keyed by names in ``models``."""
    models = cfg.model_names
    unknown = [k for k in cfg.mask_tokens if k not in models]
    if unknown:
        fail(
            WHERE,
            f"'mask_tokens' is keyed by models, and {shown(unknown)} are not in 'models'",
            f"Key the overrides by the names in 'models': {shown(models)}",
        )


#: the checks of :meth:`RunConfig.check` that read several keys, run in this order after
#: every key's own row (:func:`psens.config_schema.check_fields`)
CROSS_CHECKS = (
    _check_cloze_norm,
    _check_paper_shots,
    _check_split,
    _check_models,
    _check_templates,
    _check_solver_settings,
    _check_noise_floor,
    _check_code_execution,
    _check_mask_tokens,
)


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
    check_field("preset", name)
    out = dict(raw)
    for key, value in PRESETS[name].items():
        if key in raw or (key == "solver_settings" and "solver" in raw):
            continue
        out[key] = copy.deepcopy(value)
    return out


def load_config(path: str | os.PathLike) -> RunConfig:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``) config file."""
    return RunConfig.from_dict(read_config_file(path))
