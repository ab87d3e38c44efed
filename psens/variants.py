"""Prompt variants for output-level sensitivity: the EAS 2^3 design and ProSA's 12 variants.

Everything here is data plus one renderer, :func:`render_variant`. Items are
:class:`psens.datasets.Item` (re-exported here as ``Item``); :func:`as_item` makes one
template-ready (its ``task_type`` set) from a loaded item or a dict.

EAS (Muthukumarana et al., "Methodology Overview"): three binary factors — role framing, format
directive, answer prefix — give 8 templates with ids ``T{role}{fmt}{prefix}`` (``T000`` …
``T111``). Layout (as in the published prompts)::

    [role line]
    <task body: question + options | passage + question | context + question>
    [format directive]
    [answer prefix "Answer:"]

The format directive names the item's own option labels: "(A, B, or C)" for three options,
"(A, B, C, D, or E)" for five, "the number of the correct option (1, 2, 3, or 4)" for ARC items
with numeric labels.

ProSA (Zhuo et al., 2024, §3.1): 12 variants in four styles of three — simple inputs
(``P01``–``P03``),
role player (``P04``–``P06``), emotional support (``P07``–``P09``), output requirement
(``P10``–``P12``) — for multiple choice (CommonsenseQA, ARC-Challenge), MATH and HumanEval-style
items. Written for this project; every mention of the options is generated from the item's
labels, so five-option CommonsenseQA items say "A, B, C, D or E" (ProSA's published prompts
10–12 say "A, B, C or D").

Few-shot (ProSA §3.4, app. F): ``shots`` is one fixed list of solved examples and a ``k``-shot
prompt uses its first ``k``, so the settings k ∈ {0, 1, 3, 5, 7} share examples. The
instruction comes once, then the examples (body + "Answer: <answer>"), then the target item.

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
.. [2] Muthukumarana et al., "Prompt Sensitivity or Evaluation Artifact?"; the full
   reference is in :mod:`psens.eas`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from psens._validation import fail
from psens.datasets import Item

__all__ = [
    "EAS_TEMPLATE_IDS",
    "PROSA_STYLES",
    "PROSA_TEMPLATE_IDS",
    "SHOT_COUNTS",
    "Item",
    "as_item",
    "eas_factors",
    "label_list",
    "render_messages",
    "render_variant",
    "task_kind",
    "template_ids",
]

EAS_TEMPLATE_IDS = tuple(f"T{r}{f}{p}" for r in (0, 1) for f in (0, 1) for p in (0, 1))
PROSA_TEMPLATE_IDS = tuple(f"P{i:02d}" for i in range(1, 13))
PROSA_STYLES = {
    "simple": ("P01", "P02", "P03"),
    "role": ("P04", "P05", "P06"),
    "emotional": ("P07", "P08", "P09"),
    "output": ("P10", "P11", "P12"),
}
SHOT_COUNTS = (0, 1, 3, 5, 7)
KINDS = ("mcq", "boolean", "open_ended", "math", "code")


def _text(value: Any) -> str:
    """A text field: None and NaN (a missing cell of a DataFrame row) are empty."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def _infer_kind(item: Item) -> str:
    if item.options:
        return "mcq"
    if item.passage:
        return "boolean"
    if item.context:
        return "open_ended"
    return "math"


def _with_kind(item: Item) -> Item:
    """``item`` with its ``task_type`` set (checked when given, inferred otherwise)."""
    if item.task_type:
        if item.task_type not in KINDS:
            fail("task_kind", f"task_type {item.task_type!r} is not known", f"Use one of {KINDS}")
        return item
    return replace(item, task_type=_infer_kind(item))


def as_item(obj: Item | Mapping[str, Any]) -> Item:
    """A template-ready :class:`Item` (``task_type`` set) from an item or a dict.

    An :class:`Item` with a ``task_type`` is used as it is; one without is read as the loaders
    lay items out: a context with yes/no options (BoolQ) becomes a boolean item with that
    passage and a "yes"/"no" answer, a context without options (SQuAD) an open_ended item
    with all gold spans (``answers``, else ``metadata["answers"]``), anything else keeps its
    fields and gets its kind inferred. Other objects with ``id`` and ``question`` attributes
    are read the same way. A dict
    gives ``options`` as pairs or as published "A) text" strings, ``answer`` (or
    ``gold_answer``), ``answers`` (or ``all_gold_answers``), ``passage``, ``context``,
    ``dataset`` (kept in ``metadata``) and ``task_type``; missing or NaN values are empty.
    """
    if isinstance(obj, Item):
        return _with_kind(obj) if obj.task_type else _from_dataset_item(obj)
    if not isinstance(obj, Mapping) and hasattr(obj, "question") and hasattr(obj, "id"):
        return _from_dataset_item(obj)
    if not isinstance(obj, Mapping):
        fail("as_item", f"got a {type(obj).__name__}", "Pass an Item or a dict", TypeError)
    for key in ("id", "question"):
        if key not in obj:
            fail("as_item", f"the item has no {key!r}", f"Add {key!r} to every item")
    opts = []
    for opt in obj.get("options") or ():
        if isinstance(opt, str):
            label, _, text = opt.partition(")")
            opts.append((label.strip(), text.strip()))
        else:
            opts.append((str(opt[0]), str(opt[1])))
    answer = obj.get("answer", obj.get("gold_answer"))
    answers = obj.get("answers", obj.get("all_gold_answers")) or ()
    meta = {} if obj.get("dataset") is None else {"dataset": obj["dataset"]}
    return _with_kind(
        Item(
            id=str(obj["id"]),
            question=str(obj["question"]),
            options=tuple(opts),
            answer=_text(answer),
            passage=_text(obj.get("passage")),
            context=_text(obj.get("context")),
            metadata=meta,
            task_type=_text(obj.get("task_type")),
            answers=tuple(str(a) for a in answers),
        )
    )


def _from_dataset_item(obj: Any) -> Item:
    """Convert an item laid out as the loaders do (``context`` for both BoolQ and SQuAD; BoolQ
    as options A=yes/B=no) into a template item: BoolQ → boolean with a passage and a yes/no
    answer, SQuAD-like (no options, a context) → open_ended with all gold spans; anything else
    keeps its fields and gets its kind inferred (``metadata["task_type"]`` if set)."""
    meta = dict(getattr(obj, "metadata", {}) or {})
    options = tuple((str(a), str(b)) for a, b in (getattr(obj, "options", ()) or ()))
    context = _text(getattr(obj, "context", ""))
    passage = _text(getattr(obj, "passage", ""))
    answer = _text(getattr(obj, "answer", ""))
    answers = tuple(str(a) for a in getattr(obj, "answers", ()) or ())
    base = {"id": str(obj.id), "question": str(obj.question), "metadata": meta}
    if context and not passage and [t.lower() for _, t in options] == ["yes", "no"]:
        yes = options[0][0]
        return Item(
            **base, passage=context, answer="yes" if answer == yes else "no", task_type="boolean"
        )
    if context and not passage and not options:
        answers = answers or tuple(str(a) for a in meta.get("answers", ()) or ())
        answers = answers or ((answer,) if answer else ())
        return Item(**base, context=context, answer=answer, answers=answers, task_type="open_ended")
    return _with_kind(
        Item(
            **base,
            options=options,
            answer=answer,
            context=context,
            passage=passage,
            answers=answers,
            task_type=_text(getattr(obj, "task_type", "")) or _text(meta.get("task_type")),
        )
    )


def task_kind(item: Item | Mapping[str, Any]) -> str:
    """The item's kind: its ``task_type`` if set, else mcq (options), boolean (passage, or a
    context with yes/no options as the BoolQ loader gives), open_ended (context), math
    otherwise."""
    return as_item(item).task_type


def label_list(labels: Sequence[str], *, oxford: bool = True) -> str:
    """Human list of labels: "A, B, C, or D" (``oxford``) or "A, B, C or D"; "A or B" for two."""
    labels = list(labels)
    if not labels:
        return ""
    if len(labels) == 1:
        return labels[0]
    if len(labels) == 2:
        return f"{labels[0]} or {labels[1]}"
    sep = ", or " if oxford else " or "
    return ", ".join(labels[:-1]) + sep + labels[-1]


def _numeric(labels: Sequence[str]) -> bool:
    return all(lab.isdigit() for lab in labels)


def _require(item: Item, attr: str, kind: str) -> str:
    value = getattr(item, attr)
    if not value:
        fail("render_variant", f"{kind} item {item.id!r} has no {attr}", f"Give it a {attr}")
    return value


# --------------------------------------------------------------------------------------------
# task bodies
# --------------------------------------------------------------------------------------------


def _body(item: Item, kind: str, style: str) -> str:
    """The task text without instructions. ``style`` "eas" follows the published EAS layout."""
    if kind == "mcq":
        if not item.options:
            fail("render_variant", f"mcq item {item.id!r} has no options", "Give it options")
        sep = ") " if style == "eas" else ". "
        opts = "\n".join(f"{lab}{sep}{text}" for lab, text in item.options)
        return f"Question: {item.question}\n{opts}"
    if kind == "boolean":
        passage = _require(item, "passage", kind)
        question = item.question.rstrip("?") + "?"
        return f"Passage: {passage}\nQuestion: {question}"
    if kind == "open_ended":
        context = _require(item, "context", kind)
        return f"Context: {context}\nQuestion: {item.question}"
    if kind == "math":
        return f"Problem: {item.question}"
    return item.question  # code: the function signature and docstring


# --------------------------------------------------------------------------------------------
# EAS 2^3 design
# --------------------------------------------------------------------------------------------

EAS_ROLE = "You are a careful and accurate assistant."
EAS_PREFIX = "Answer:"


def eas_factors(template_id: str) -> dict[str, int]:
    """``{"role": r, "fmt": f, "prefix": p}`` of an EAS template id ``T{r}{f}{p}``."""
    if template_id not in EAS_TEMPLATE_IDS:
        fail("eas_factors", f"{template_id!r} is not an EAS template id", "Use T000 ... T111")
    r, f, p = (int(c) for c in template_id[1:])
    return {"role": r, "fmt": f, "prefix": p}


def _eas_directive(item: Item, kind: str) -> str:
    if kind == "mcq":
        labels = [lab for lab, _ in item.options]
        what = "number" if _numeric(labels) else "letter"
        return f"Respond with only the {what} of the correct option ({label_list(labels)})."
    return {
        "boolean": "Respond with only yes or no.",
        "open_ended": "Respond with only the short answer span from the context.",
        "math": "Respond with only the final answer.",
        "code": "Respond with only the code of the function.",
    }[kind]


def _render_eas(item: Item, kind: str, template_id: str, shots: Sequence[Item]) -> str:
    fac = eas_factors(template_id)
    lines = [EAS_ROLE] if fac["role"] else []
    for shot in shots:
        lines.append(f"{_body(shot, kind, 'eas')}\n{EAS_PREFIX} {_answer_text(shot, kind)}\n")
    lines.append(_body(item, kind, "eas"))
    if fac["fmt"]:
        lines.append(_eas_directive(item, kind))
    text = "\n".join(lines) + "\n"
    return text + EAS_PREFIX if fac["prefix"] else text


# --------------------------------------------------------------------------------------------
# ProSA 12 variants (written for psens)
# --------------------------------------------------------------------------------------------

# Each variant: (style, text before the task, text after the task). Placeholders: {labels}
# (the item's option labels, e.g. "A, B, C, D or E"), {what} ("letter" or "number").
_PROSA_MCQ = (
    ("simple", "", "Answer:"),
    ("simple", "Answer the following multiple-choice question.", "Answer:"),
    ("simple", "Choose the best option.", "The best option is"),
    ("role", "You are an expert in commonsense reasoning and science.", "Answer:"),
    ("role", "As a patient teacher, pick the correct option for your student.", "Answer:"),
    ("role", "You are a quiz champion known for never missing a question.", "Your choice:"),
    ("emotional", "This question matters a lot to me, please get it right.", "Answer:"),
    ("emotional", "I am nervous about my exam tomorrow; please help me with this one.", "Answer:"),
    ("emotional", "Take a deep breath and think it through; you can do this.", "Answer:"),
    ("output", "", "Reply with the {what} of the correct option only ({labels}).\nAnswer:"),
    ("output", "Give only one {what} from {labels}, nothing else.", "Answer:"),
    ("output", "", 'End your reply with "The answer is X", where X is one of {labels}.'),
)
_PROSA_MATH = (
    ("simple", "", "Solution:"),
    ("simple", "Solve the following math problem.", "Solution:"),
    ("simple", "Work out the answer to this problem.", "Answer:"),
    ("role", "You are a mathematician who writes clear solutions.", "Solution:"),
    ("role", "As a math olympiad coach, solve this for your team.", "Solution:"),
    ("role", "You are a careful calculator that never makes arithmetic slips.", "Answer:"),
    ("emotional", "I really need this solved correctly, it means a lot to me.", "Solution:"),
    ("emotional", "I've been stuck on this for hours; please help me.", "Solution:"),
    ("emotional", "Stay calm and go step by step; you are great at this.", "Solution:"),
    ("output", "", "Put the final answer in \\boxed{{}}.\nSolution:"),
    ("output", "Give the final answer only, with no explanation.", "Answer:"),
    ("output", "", 'Finish with a line "Final answer: <answer>".\nSolution:'),
)
_PROSA_CODE = (
    ("simple", "", ""),
    ("simple", "Complete the following Python function.", ""),
    ("simple", "Write the body of this function.", ""),
    ("role", "You are an experienced Python developer.", ""),
    ("role", "As a senior engineer doing a code review, implement this function.", ""),
    ("role", "You are a programming tutor writing a model solution.", ""),
    ("emotional", "My job depends on this function working, please get it right.", ""),
    ("emotional", "I have been debugging all night; please help me finish this.", ""),
    ("emotional", "Relax and take your time; careful code matters here.", ""),
    ("output", "", "Return only the complete function in a Python code block."),
    ("output", "Write only code, no explanation.", ""),
    ("output", "", "Do not change the signature; reply with the full function."),
)
PROSA_VARIANTS = {"mcq": _PROSA_MCQ, "math": _PROSA_MATH, "code": _PROSA_CODE}


def _render_prosa(item: Item, kind: str, template_id: str, shots: Sequence[Item]) -> str:
    if kind not in PROSA_VARIANTS:
        fail(
            "render_variant",
            f"ProSA variants are defined for {sorted(PROSA_VARIANTS)}, not {kind!r}",
            "Use EAS templates (T000 ... T111) for boolean and open_ended items",
        )
    _, before, after = PROSA_VARIANTS[kind][PROSA_TEMPLATE_IDS.index(template_id)]
    labels = [lab for lab, _ in item.options]
    fill = {
        "labels": label_list(labels, oxford=False),
        "what": "number" if labels and _numeric(labels) else "letter",
    }
    parts = [before.format(**fill)] if before else []
    for shot in shots:
        parts.append(f"{_body(shot, kind, 'prosa')}\nAnswer: {_answer_text(shot, kind)}\n")
    parts.append(_body(item, kind, "prosa"))
    if after:
        parts.append(after.format(**fill))
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# public renderer
# --------------------------------------------------------------------------------------------


def _answer_text(shot: Item, kind: str) -> str:
    if not shot.answer:
        fail("render_variant", f"shot {shot.id!r} has no answer", "Give few-shot items answers")
    return str(shot.answer)


def template_ids(family: str) -> tuple[str, ...]:
    """All template ids of ``"eas"`` (8) or ``"prosa"`` (12)."""
    if family == "eas":
        return EAS_TEMPLATE_IDS
    if family == "prosa":
        return PROSA_TEMPLATE_IDS
    fail("template_ids", f"family={family!r} is not known", 'Use "eas" or "prosa"')
    raise AssertionError  # unreachable


def render_variant(
    item: Item | Mapping[str, Any],
    template_id: str,
    shots: Sequence[Item | Mapping[str, Any]] = (),
    k: int | None = None,
) -> str:
    """Render one prompt variant of an item.

    Parameters
    ----------
    item
        An :class:`Item` or dict (see :func:`as_item`).
    template_id
        ``T000``–``T111`` (EAS factorial) or ``P01``–``P12`` (ProSA).
    shots
        Solved examples of the same task; the first ``k`` are used (all if ``k`` is None), so
        every k shares its examples with every larger k (ProSA §3.4).
    """
    it = as_item(item)
    kind = task_kind(it)
    shot_items = [as_item(s) for s in shots]
    if k is not None:
        if not isinstance(k, int) or k < 0:
            fail("render_variant", f"k={k!r}", "Pass a shot count k >= 0")
        if k > len(shot_items):
            fail(
                "render_variant",
                f"k={k} but only {len(shot_items)} shots were given",
                "Pass at least k solved examples",
            )
        shot_items = shot_items[:k]
    if template_id in EAS_TEMPLATE_IDS:
        return _render_eas(it, kind, template_id, shot_items)
    if template_id in PROSA_TEMPLATE_IDS:
        return _render_prosa(it, kind, template_id, shot_items)
    fail(
        "render_variant",
        f"template id {template_id!r} is not known",
        "Use T000 ... T111 (EAS) or P01 ... P12 (ProSA)",
    )
    raise AssertionError  # unreachable


def render_messages(
    item: Item | Mapping[str, Any],
    template_id: str,
    shots: Sequence[Item | Mapping[str, Any]] = (),
    k: int | None = None,
) -> list[dict[str, str]]:
    """The variant as one chat user message (the role framing stays in the user text, as in
    the published EAS prompts, so chat and completion runs see the same words)."""
    return [{"role": "user", "content": render_variant(item, template_id, shots, k)}]
