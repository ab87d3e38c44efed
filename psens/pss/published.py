"""ProSA's published prompt variants: the twelve prompts per objective benchmark, as data.

``data/reference/prosa/objective_prompts.json`` holds the twelve prompt strings of each of
ProSA's four objective benchmarks (ARC-Challenge, CommonsenseQA, MATH, HumanEval) copied
verbatim from the authors' repository, with the name of each placeholder (provenance and
licence in ``data/reference/README.md``). :func:`published_templates` turns one benchmark's
prompts into :class:`psens.prompts.Template` objects with a ``layout`` (the prompt string
itself), so the IPS scorer, the run store and ``psens run`` use them like any template;
:func:`register_published` adds them to :data:`psens.prompts.TEMPLATES` as
``prosa-<key>-01`` … ``prosa-<key>-12`` (``templates = "prosa"`` in a run config).

A file whose prompt lost a placeholder (``{textC}``), names an unknown one or has not twelve
prompts is refused, naming the benchmark and the prompt, before any store is created.

psens's own variants ``P01``–``P12`` (:func:`psens.variants.render_variant`, written so that
the option list always matches the item) stay available next to these.

The published strings keep two of their quirks, reported as they are: CommonsenseQA prompts
10–12 ask for "A, B, C or D" although the items have five options, and prompt 5 has a space
before option E. The repository groups the prompts in four blank-line-separated groups of
three; the paper names four styles but does not say which group is which, so the groups
are kept as numbers (``group`` 1–4), not style names.

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
"""

from __future__ import annotations

import json
from pathlib import Path

from psens._validation import fail

__all__ = [
    "PUBLISHED_KEYS",
    "load_published_prompts",
    "published_groups",
    "published_templates",
    "register_published",
]

#: psens dataset name -> the short key of its template names (``prosa-arc-01``)
PUBLISHED_KEYS = {
    "arc-challenge": "arc",
    "commonsenseqa": "csqa",
    "math": "math",
    "humaneval": "humaneval",
}
N_PROMPTS = 12
WHERE = "psens.pss.load_published_prompts"


def _default_path() -> Path:
    from psens.models.registry import data_dir

    return data_dir() / "reference" / "prosa" / "objective_prompts.json"


def load_published_prompts(path: str | Path | None = None) -> dict:
    """Read and check the published prompt file.

    Parameters
    ----------
    path
        The JSON file (default: the copy shipped in ``data/reference/prosa/``).

    Returns
    -------
    dict
        ``{dataset: {"question": placeholder, "options": {label: placeholder}, "prompts":
        [{"id", "text", "group"}, ...]}}`` plus the file's ``source`` and ``licence``.

    Raises
    ------
    ValueError
        A missing file, a benchmark without twelve prompts, or a prompt that lost one of
        its placeholders (checked by building its template).
    """
    p = Path(path) if path is not None else _default_path()
    if not p.is_file():
        fail(WHERE, f"{p} not found", "Pass the path of objective_prompts.json", FileNotFoundError)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        fail(WHERE, f"{p} is not valid JSON ({exc})", "Restore the file")
    if not isinstance(raw, dict) or not isinstance(raw.get("datasets"), dict):
        fail(WHERE, f"{p} has no 'datasets' table", "Restore the file")
    for name, spec in raw["datasets"].items():
        prompts = spec.get("prompts") if isinstance(spec, dict) else None
        if not isinstance(prompts, list) or len(prompts) != N_PROMPTS:
            n = len(prompts) if isinstance(prompts, list) else 0
            fail(WHERE, f"{p}: {name} has {n} prompts, not {N_PROMPTS}", "Restore the file")
        _templates(name, spec, p.name)  # every placeholder present and known
    return raw


def _templates(dataset: str, spec: dict, source: str):
    from psens.prompts import Template

    key = PUBLISHED_KEYS.get(dataset, dataset)
    fields = [("question", spec["question"])]
    fields += [(f"option:{lab}", ph) for lab, ph in spec.get("options", {}).items()]
    kind = "mcq" if spec.get("options") else "open"
    return tuple(
        Template(
            f"prosa-{key}-{k + 1:02d}",
            kind=kind,
            layout=pr["text"],
            layout_fields=tuple(fields),
            description=f"ProSA {dataset} {pr['id']} (group {pr['group']}), {source}",
        )
        for k, pr in enumerate(spec["prompts"])
    )


def published_templates(dataset: str, path: str | Path | None = None) -> tuple:
    """The twelve published ProSA prompts of ``dataset`` as layout templates.

    Parameters
    ----------
    dataset
        ``"arc-challenge"``, ``"commonsenseqa"``, ``"math"`` or ``"humaneval"``.
    path
        The prompt file (default: the shipped copy).

    Returns
    -------
    tuple of :class:`psens.prompts.Template`, named ``prosa-<key>-01`` … ``-12``.
    """
    raw = load_published_prompts(path)
    if dataset not in raw["datasets"]:
        fail(
            "psens.pss.published_templates",
            f"ProSA published no prompts for {dataset!r}",
            f"Use one of {sorted(raw['datasets'])}",
        )
    source = Path(path).name if path is not None else _default_path().name
    return _templates(dataset, raw["datasets"][dataset], source)


def published_groups(dataset: str, path: str | Path | None = None) -> dict[str, int]:
    """``{template name: group (1-4)}``: the repository's blank-line groups of three."""
    raw = load_published_prompts(path)
    key = PUBLISHED_KEYS.get(dataset, dataset)
    prompts = raw["datasets"][dataset]["prompts"]
    return {f"prosa-{key}-{k + 1:02d}": int(pr["group"]) for k, pr in enumerate(prompts)}


def register_published(dataset: str, path: str | Path | None = None) -> list[str]:
    """Register the published templates of ``dataset`` (idempotent) and return their names."""
    from psens.prompts import TEMPLATES, register

    names = []
    for t in published_templates(dataset, path):
        if TEMPLATES.get(t.name) != t:
            register(t, overwrite=True)
        names.append(t.name)
    return names
