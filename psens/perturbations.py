"""Appendix L of the IPS paper: paraphrased and reordered open-ended instructions.

Beyond template changes, appendix L perturbs the instruction itself: a **semantic paraphrase**
("Identify from the following list characters ..." → "Select from the list below figures
...") and an **instruction reordering** ("From The X-Files, identify characters ... from
the following list"). The input variables are selected as in appendix K.2 (meaningful words
and phrases; stop words, punctuation and the template are background) and must be the
*same* variables in every version, so that the interactions :math:`I_S` of the original and
of a rewrite are indexed by the same sets :math:`S` and IPS can compare them.

Alignment (:func:`align_variables`): the appendix K.2 units of the original instruction
(:func:`psens.prompts.variables` with ``content_only=True``: capitalised runs and the user's
phrases merged, stop words dropped) are looked up in every rewrite, as whole words matched
case-insensitively, each unit at its first occurrence not taken by an earlier unit. A unit
that a rewrite words differently can be paired by an explicit ``mapping`` ``{unit:
{rewrite: text}}``. The variables are the units found in every rewrite, capped at ``n_max``
by the seeded choice of :func:`psens.prompts.variables` (step 4). A mapping naming a unit
that is not a unit of the original, or a text that is not in its rewrite, and a set of
rewrites with no unit in common, are errors.

A perturbation file (JSON) lists the items:
``{"source": ..., "items": [{"id": ..., "original": ..., "paraphrase": ...,
"reorder": ..., "mapping": {...}}, ...]}``; ``original`` must be the dataset item's
instruction, verbatim. A run config names it with ``perturbations = "path.json"``: the
run's template axis then holds every template shown with the original and with each
rewrite (``"open"``, ``"open:paraphrase"``, ``"open:reorder"``, …; :data:`psens.prompts.
REWRITES`), and :func:`psens.ips.factors.pair_kinds` tells the template pairs
(``altering``), the paraphrase pairs and the reorder pairs apart.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`. Appendices
   K.2 (variable selection) and L (paraphrase and reordering).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from psens._validation import check_positive_int, fail
from psens.datasets import Item
from psens.prompts import MAX_VARIABLES, REWRITES, Variable, variables

__all__ = ["PerturbedItem", "align_variables", "load_perturbations", "variants"]

WHERE = "psens.perturbations"
#: cap on the units looked at before alignment (the sparse path's cap)
_MAX_UNITS = 64


@dataclass(frozen=True)
class PerturbedItem:
    """One instruction and its rewrites.

    Attributes
    ----------
    id : the dataset item's id.
    original : the instruction as the dataset has it.
    rewrites : ``{"paraphrase": text, "reorder": text}`` (kinds of
        :data:`psens.prompts.REWRITES`).
    mapping : ``{unit of the original: {rewrite: its text there}}`` for units a rewrite
        words differently (optional).
    """

    id: str
    original: str
    rewrites: Mapping[str, str]
    mapping: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def _find(text: str, phrase: str, taken: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The first whole-word, case-insensitive occurrence of ``phrase`` in ``text`` that
    overlaps no span of ``taken``."""
    pat = re.compile(r"(?<!\w)" + re.escape(phrase.strip()) + r"(?!\w)", re.IGNORECASE)
    for m in pat.finditer(text):
        if all(m.end() <= a or m.start() >= b for a, b in taken):
            return m.start(), m.end()
    return None


def align_variables(
    item: Item,
    rewrites: Mapping[str, str],
    *,
    mapping: Mapping[str, Mapping[str, str]] | None = None,
    n_max: int = 10,
    seed: int = 0,
    phrases: Sequence[str] | None = None,
    stop_words: Sequence[str] | None = None,
    rule: str = "psens",
) -> dict[str, list[Variable]]:
    """The input variables of ``item`` and of each rewrite of its instruction, aligned.

    Parameters
    ----------
    item
        The original item (its ``question`` is the instruction).
    rewrites
        ``{rewrite name: rewritten instruction}``.
    mapping
        ``{unit: {rewrite: text}}``: how a unit of the original is worded in a rewrite
        (units not named are matched by their own text, case-insensitively).
    n_max, seed, phrases, stop_words, rule
        As in :func:`psens.prompts.variables` (the appendix K.2 selection and its cap).

    Returns
    -------
    dict
        ``{"original": [...], rewrite: [...], ...}``: lists of the same length ``n``;
        entry ``i`` of every list is variable ``i`` (bit ``i`` of a mask), as a
        :class:`~psens.prompts.Variable` with its span in that version's instruction.

    Raises
    ------
    ValueError
        A mapping key that is not a unit of the original, a mapping text not in its
        rewrite, or no unit present in every rewrite.
    """
    n_max = check_positive_int(n_max, WHERE, "n_max")
    if n_max > MAX_VARIABLES:
        fail(
            WHERE,
            f"n_max={n_max} is above the cap of {MAX_VARIABLES}",
            f"Use n_max <= {MAX_VARIABLES}",
        )
    units = variables(
        item,
        n_max=_MAX_UNITS,
        content_only=True,
        max_variables=_MAX_UNITS,
        phrases=phrases,
        stop_words=stop_words,
        seed=seed,
        rule=rule,
    )
    units = [u for u in units if u.field == "question"]
    mapping = {str(k): dict(v) for k, v in (mapping or {}).items()}
    by_text = {str(u).lower(): u for u in units}
    unknown = [k for k in mapping if k.lower() not in by_text]
    if unknown:
        fail(
            WHERE,
            f"item {item.id!r}: the mapping names {unknown}, which are not input variables of "
            f"the original (its variables: {[str(u) for u in units]})",
            "Key the mapping by variables of the original instruction",
        )
    lower = {k.lower(): v for k, v in mapping.items()}
    spans: dict[str, list[tuple[int, int] | None]] = {}
    for name, text in rewrites.items():
        taken: list[tuple[int, int]] = []
        found: list[tuple[int, int] | None] = []
        for u in units:
            target = lower.get(str(u).lower(), {}).get(name)
            span = _find(text, target if target is not None else str(u), taken)
            if target is not None and span is None:
                fail(
                    WHERE,
                    f"item {item.id!r}: the mapping says {str(u)!r} is {target!r} in the "
                    f"{name} version, which does not contain it",
                    f"Fix the mapping or the {name} text",
                )
            if span is not None:
                taken.append(span)
            found.append(span)
        spans[name] = found
    keep = [i for i in range(len(units)) if all(spans[r][i] is not None for r in rewrites)]
    if not keep:
        missing = {
            r: [str(u) for u, sp in zip(units, spans[r], strict=True) if sp is None]
            for r in rewrites
        }
        fail(
            WHERE,
            f"item {item.id!r}: no input variable of the original appears in every rewrite "
            f"(missing per rewrite: {missing})",
            "Keep some words of the original in the rewrites, or pair them with a mapping "
            "{variable: {rewrite: text}}",
        )
    if len(keep) > n_max:
        rng = np.random.default_rng(seed)
        keep = sorted(int(keep[i]) for i in rng.choice(len(keep), size=n_max, replace=False))
    out = {"original": [units[i] for i in keep]}
    for name, text in rewrites.items():
        out[name] = [
            Variable(text[a:b], "question", a, b)
            for a, b in (spans[name][i] for i in keep)  # type: ignore[misc]
        ]
    return out


def variants(
    item: Item, perturbed: PerturbedItem, *, n_max: int = 10, seed: int = 0, rule: str = "psens"
) -> dict[str, tuple[Item, list[Variable]]]:
    """``{"original" | rewrite: (item with that instruction, its aligned variables)}``."""
    if item.question != perturbed.original:
        fail(
            WHERE,
            f"item {item.id!r}: the perturbation file's original instruction is not the dataset's",
            "Copy the instruction verbatim into 'original'",
        )
    aligned = align_variables(
        item, perturbed.rewrites, mapping=perturbed.mapping, n_max=n_max, seed=seed, rule=rule
    )
    out = {"original": (item, aligned["original"])}
    for name, text in perturbed.rewrites.items():
        out[name] = (dataclasses.replace(item, question=text), aligned[name])
    return out


def load_perturbations(path: str | os.PathLike) -> list[PerturbedItem]:
    """The items of a perturbation file (see the module docstring), checked."""
    p = Path(path)
    if not p.is_file():
        fail(WHERE, f"perturbation file {p} not found", "Check the path of 'perturbations'")
    try:
        raw: Any = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        fail(WHERE, f"{p} is not valid JSON ({exc})", "Fix the file")
    entries = raw.get("items") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        fail(WHERE, f"{p} has no 'items' list", 'Write {"items": [{"id": ..., "original": ...}]}')
    out = []
    for k, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("id"), str):
            fail(WHERE, f"{p}: item {k} has no string 'id'", "Give every item its dataset id")
        for key in ("original", *REWRITES):
            if not isinstance(e.get(key), str) or not e[key].strip():
                fail(WHERE, f"{p}: item {e['id']!r} has no {key!r} text", f"Add {key!r}")
        extra = set(e) - {"id", "original", *REWRITES, "mapping", "note"}
        if extra:
            fail(WHERE, f"{p}: item {e['id']!r} has unknown keys {sorted(extra)}", "Remove them")
        mapping = e.get("mapping", {})
        if not isinstance(mapping, dict) or not all(
            isinstance(v, dict) and set(v) <= set(REWRITES) for v in mapping.values()
        ):
            fail(
                WHERE,
                f"{p}: item {e['id']!r} has a malformed mapping",
                f"Write mapping = {{variable: {{rewrite: text}}}} with rewrites {list(REWRITES)}",
            )
        out.append(PerturbedItem(e["id"], e["original"], {r: e[r] for r in REWRITES}, mapping))
    ids = [e.id for e in out]
    if len(set(ids)) != len(ids):
        fail(WHERE, f"{p} lists an item id twice", "Remove the duplicate")
    return out
