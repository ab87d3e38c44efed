"""Heuristic scorers for output-level sensitivity (PSS and EAS).

Three task-aware heuristics turn a model's free-text response into a score in [0, 1]:

* multiple choice (``task_type="mcq"``): extract the option label, exact match with the gold
  label;
* yes/no (``task_type="boolean"``): extract a yes/no verdict at word level, exact match;
* extractive QA (``task_type="open_ended"``): SQuAD token F1, maximum over the references.

The default scorers are written to be correct. ``compat="eas"`` reproduces the scorers of the
published EAS code (``study/metrics.py`` of the EAS repository, see
``data/reference/README.md``) exactly, bugs included, so that its published per-instance
numbers can be matched:

* MCQ: the response is upper-cased and the first single capital letter at a word boundary that
  is a valid option letter is taken (so the article "a" of "a chemical reaction" is read as the
  answer A), else the first single capital letter, else the first character;
* yes/no: the first word equal to "yes" or "no", else the *substring* "yes", else the
  substring "no" (which matches inside "not" and "know"), else the first word;
* F1: the overlap is counted on token *sets* (not multisets) and articles are kept.

A missing response (``None``/NaN: a failed model call) scores NaN by default, so that it is
never counted as a wrong answer; in compat mode it scores as the empty string, as published.

References
----------
.. [1] Muthukumarana et al., "Prompt Sensitivity or Evaluation Artifact?"; the full
   reference is in :mod:`psens.eas`.
"""

from __future__ import annotations

import ast
import json
import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from psens._validation import fail

__all__ = [
    "Compat",
    "eas_normalize",
    "extract_option_label",
    "extract_yes_no",
    "heuristic_score",
    "heuristic_scores",
    "option_labels",
    "score_boolean",
    "score_mcq",
    "squad_f1",
    "squad_normalize",
    "token_f1",
]

Compat = Literal["eas"] | None
TASK_TYPES = ("mcq", "boolean", "open_ended")

# Words that may follow a capital "A" that *is* an answer ("A is correct"); any other
# lower-case word after a bare "A" makes it the indefinite article.
_VERBS_AFTER_LABEL = frozenset(
    "is was would seems appears and or because since as best fits matches correctly".split()
)


def _check_compat(compat: Compat, where: str) -> None:
    if compat not in (None, "eas"):
        fail(where, f"compat={compat!r} is not known", 'Pass compat=None or compat="eas"')


def _missing(response: Any) -> bool:
    """True for a failed call: ``None`` or a float NaN (pandas' missing value)."""
    if response is None:
        return True
    if isinstance(response, float) and math.isnan(response):
        return True
    return response is pd.NA


# --------------------------------------------------------------------------------------------
# option labels
# --------------------------------------------------------------------------------------------


def option_labels(options: Any) -> list[str]:
    """The option labels of an item.

    Accepts ``[(label, text), ...]`` pairs, published EAS strings ``["A) text", ...]`` (the
    label is the text before the first ")"), a dict ``{label: text}``, or such a list
    serialised as JSON/Python text (as it comes back from a CSV file).
    """
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except ValueError:
            try:
                options = ast.literal_eval(options)
            except (ValueError, SyntaxError):
                fail(
                    "option_labels",
                    f"options {options[:60]!r} is a string that is not a list",
                    'Pass a list of (label, text) pairs or "A) text" strings',
                )
    if isinstance(options, Mapping):
        return [str(k).strip() for k in options]
    labels = []
    for opt in options:
        if isinstance(opt, str):
            labels.append(opt.split(")")[0].strip())
        elif isinstance(opt, Sequence) and len(opt) == 2:
            labels.append(str(opt[0]).strip())
        else:
            fail(
                "option_labels",
                f"option {opt!r} is neither a (label, text) pair nor an 'A) text' string",
                "Pass options as [(label, text), ...]",
                TypeError,
            )
    return labels


def _option_texts(options: Any) -> list[str]:
    if isinstance(options, str):
        options = json.loads(options)
    if isinstance(options, Mapping):
        return [str(v) for v in options.values()]
    out = []
    for opt in options:
        if isinstance(opt, str):
            out.append(opt.split(")", 1)[1] if ")" in opt else opt)
        else:
            out.append(str(opt[1]))
    return out


# --------------------------------------------------------------------------------------------
# normalisation
# --------------------------------------------------------------------------------------------

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: str) -> str:
    """SQuAD's official answer normalisation.

    Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse white space
    (Rajpurkar et al. 2016, official ``evaluate-v2.0.py``).
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def eas_normalize(text: str) -> str:
    """The published EAS normalisation (compat): lower-case and strip, keep ``[a-z0-9\\s]``,
    collapse white-space runs to one space (no final strip, articles kept)."""
    text = text.lower().strip()
    text = re.sub(r"[^a-z0-9\s]", "", text)
    return re.sub(r"\s+", " ", text)


# --------------------------------------------------------------------------------------------
# multiple choice
# --------------------------------------------------------------------------------------------


def _is_article(text: str, start: int, end: int) -> bool:
    """A capital "A" at ``text[start:end]`` used as the indefinite article ("A chemical ...")."""
    if text[start:end] != "A":
        return False
    m = re.match(r"\s+([a-z][a-z'-]*)", text[end:])
    return bool(m) and m.group(1) not in _VERBS_AFTER_LABEL


def _label_alt(labels: Sequence[str]) -> str:
    return "|".join(re.escape(lab) for lab in sorted(labels, key=len, reverse=True))


def extract_option_label(response: str, options: Any) -> str | None:
    """Extract the chosen option label from a free-text response (robust default).

    Rules, first match wins:

    1. an explicit statement, the last one in the text: "answer is (C)", "Answer: B",
       "the correct option is 3", "choice D";
    2. a label opening the response: "B", "B) endothermic", "(B).", "3.";
    3. a bracketed or closed label anywhere: "(C)", "[C]", "C)";
    4. a stand-alone label token, if exactly one distinct label occurs as a token;
    5. the text of exactly one option contained in the response.

    A capital "A" followed by a lower-case word ("A chemical reaction") is the article, not an
    answer; lower-case letters never count as labels. Labels are those of ``options``: letters
    (any number of options) or numerals ("1"–"4").

    Returns ``None`` when no label can be read (the response scores 0, not NaN: the call
    succeeded but gave no readable answer).
    """
    labels = option_labels(options)
    if not labels or not isinstance(response, str):
        return None
    alt = _label_alt(labels)
    tail = r"(?![A-Za-z0-9])"
    explicit = re.compile(
        r"\b(?i:answer|option|choice)\b(?:\s+(?i:is|would\s+be|should\s+be|will\s+be))?"
        r"\s*[:\-]?\s*(?i:option\s+|choice\s+)?[\(\[]?\s*(" + alt + r")\s*[\)\]]?" + tail
    )
    hits = [m for m in explicit.finditer(response) if not _is_article(response, *m.span(1))]
    if hits:
        return hits[-1].group(1)
    opening = re.match(r"\s*[\(\[]?\s*(" + alt + r")\s*(?:[\)\]\.:,]|$|\s)", response)
    if opening and not _is_article(response, *opening.span(1)):
        return opening.group(1)
    closed = re.search(r"(?:[\(\[]\s*(" + alt + r")\s*[\)\]])|(?:\b(" + alt + r")\))", response)
    if closed:
        return closed.group(1) or closed.group(2)
    tokens = {
        m.group(1)
        for m in re.finditer(r"(?<![A-Za-z0-9])(" + alt + r")" + tail, response)
        if not _is_article(response, *m.span(1))
    }
    if len(tokens) == 1:
        return tokens.pop()
    norm = squad_normalize(response)
    found = [
        lab
        for lab, txt in zip(labels, _option_texts(options), strict=False)
        if (t := squad_normalize(txt)) and re.search(r"\b" + re.escape(t) + r"\b", norm)
    ]
    return found[0] if len(found) == 1 else None


def _eas_extract_letter(response: str, options: Any) -> str:
    upper = response.upper().strip()
    valid = set(option_labels(options))
    caps = re.findall(r"\b([A-Z])\b", upper)
    for letter in caps:
        if letter in valid:
            return letter
    return caps[0] if caps else upper[:1]


def score_mcq(response: Any, gold: Any, options: Any, *, compat: Compat = None) -> float:
    """Exact-match score of a multiple-choice response: 1.0 if the extracted label is ``gold``.

    Default: :func:`extract_option_label`, labels compared after stripping and upper-casing; a
    missing response (failed call) is NaN. ``compat="eas"``: the published extractor (see the
    module docstring) and its normalised comparison.
    """
    _check_compat(compat, "score_mcq")
    if compat == "eas":
        text = "" if _missing(response) else str(response)
        pred = _eas_extract_letter(text, options)
        return float(eas_normalize(pred) == eas_normalize(str(gold)))
    if _missing(response):
        return math.nan
    pred = extract_option_label(str(response), options)
    return float(pred is not None and pred.strip().upper() == str(gold).strip().upper())


# --------------------------------------------------------------------------------------------
# yes / no
# --------------------------------------------------------------------------------------------

_YES = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}


def extract_yes_no(response: str) -> str | None:
    """Extract a yes/no verdict at word level (default scorer).

    The first *word* "yes" or "no" wins (case-insensitive, punctuation ignored); if neither
    occurs, the first word "true"/"false" maps to yes/no. "not", "know", "nobody" are not
    "no". Returns ``None`` when there is no verdict.
    """
    words = re.findall(r"[a-z]+", str(response).lower())
    for word in words:
        if word in ("yes", "no"):
            return word
    for word in words:
        if word in ("true", "false"):
            return _YES[word]
    return None


def _eas_extract_yes_no(response: str) -> str:
    norm = eas_normalize(response)
    for word in norm.split():
        if word in ("yes", "no"):
            return word
    if "yes" in norm:
        return "yes"
    if "no" in norm:
        return "no"
    return norm.split()[0] if norm.split() else ""


def _gold_yes_no(gold: Any) -> str:
    if isinstance(gold, bool | np.bool_):
        return "yes" if gold else "no"
    g = str(gold).strip().lower()
    return _YES.get(g, g)


def score_boolean(response: Any, gold: Any, *, compat: Compat = None) -> float:
    """Exact-match score of a yes/no response (gold "yes"/"no" or a bool).

    Default: :func:`extract_yes_no`; NaN for a missing response. ``compat="eas"``: the
    published extractor with its substring fallback.
    """
    _check_compat(compat, "score_boolean")
    if compat == "eas":
        text = "" if _missing(response) else str(response)
        return float(eas_normalize(_eas_extract_yes_no(text)) == eas_normalize(str(gold)))
    if _missing(response):
        return math.nan
    return float(extract_yes_no(str(response)) == _gold_yes_no(gold))


# --------------------------------------------------------------------------------------------
# SQuAD F1
# --------------------------------------------------------------------------------------------


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 of one prediction against one reference.

    ``F1 = 2PR/(P+R)`` with ``P = |p ∩ r| / |p|``, ``R = |p ∩ r| / |r|`` where ``∩`` is the
    *multiset* overlap of the normalised tokens (:func:`squad_normalize`). As in the official
    v2.0 script, two empty token lists score 1.0 and one empty list scores 0.0.
    """
    p = squad_normalize(prediction).split()
    r = squad_normalize(reference).split()
    if not p or not r:
        return float(p == r)
    same = sum((Counter(p) & Counter(r)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(r)
    return 2 * precision * recall / (precision + recall)


def _eas_token_f1(prediction: str, reference: str) -> float:
    p = eas_normalize(prediction).split()
    r = eas_normalize(reference).split()
    if not p or not r:
        return 0.0
    common = set(p) & set(r)
    if not common:
        return 0.0
    precision, recall = len(common) / len(p), len(common) / len(r)
    return 2 * precision * recall / (precision + recall)


def _references(references: Any) -> list[str]:
    if isinstance(references, str):
        stripped = references.strip()
        if stripped.startswith("["):
            try:
                return [str(x) for x in json.loads(stripped)]
            except ValueError:
                return [str(x) for x in ast.literal_eval(stripped)]
        return [references]
    if isinstance(references, np.ndarray):
        references = references.tolist()
    return [str(x) for x in references]


def squad_f1(prediction: Any, references: Any, *, compat: Compat = None) -> float:
    """Maximum token F1 of ``prediction`` over the reference answers (SQuAD).

    Default: :func:`token_f1` (official normalisation, multiset overlap); NaN for a missing
    prediction. ``compat="eas"``: the published set-based F1 with its normalisation (articles
    kept); a missing prediction counts as "".
    """
    _check_compat(compat, "squad_f1")
    refs = _references(references)
    if not refs:
        fail("squad_f1", "there are no reference answers", "Pass at least one reference answer")
    if compat == "eas":
        text = "" if _missing(prediction) else str(prediction)
        return max(_eas_token_f1(text, ref) for ref in refs)
    if _missing(prediction):
        return math.nan
    return max(token_f1(str(prediction), ref) for ref in refs)


# --------------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------------


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return not (isinstance(value, list | tuple | np.ndarray) and len(value) == 0)


def heuristic_score(row: Mapping[str, Any], *, compat: Compat = None) -> float:
    """Score one response row with the heuristic of its ``task_type``.

    ``row`` has the published judged-file keys: ``task_type`` ("mcq", "boolean",
    "open_ended"), ``gold_answer``, ``raw_response``, and ``options`` (mcq) or
    ``all_gold_answers`` (open-ended; falls back to ``[gold_answer]``). With
    ``compat="eas"`` any task type other than mcq/boolean is scored as open-ended, as
    published; by default an unknown task type is an error.
    """
    _check_compat(compat, "heuristic_score")
    task = row.get("task_type")
    response = row.get("raw_response")
    gold = row.get("gold_answer")
    if task == "mcq":
        return score_mcq(response, gold, row.get("options", []), compat=compat)
    if task == "boolean":
        return score_boolean(response, gold, compat=compat)
    if task != "open_ended" and compat is None:
        fail(
            "heuristic_score",
            f"task_type={task!r} has no heuristic",
            f"Use one of {TASK_TYPES}",
        )
    refs = row.get("all_gold_answers")
    return squad_f1(response, refs if _present(refs) else [gold], compat=compat)


def heuristic_scores(rows: pd.DataFrame | Iterable[Mapping[str, Any]], *, compat: Compat = None):
    """:func:`heuristic_score` of every row; a ``pd.Series`` aligned with a DataFrame input,
    else a float array."""
    _check_compat(compat, "heuristic_scores")
    if isinstance(rows, pd.DataFrame):
        if "task_type" not in rows.columns:
            fail(
                "heuristic_scores",
                "the rows have no task_type column",
                "Add task_type (mcq, boolean or open_ended) to every row",
            )
        records = rows.to_dict("records")
        values = [heuristic_score(r, compat=compat) for r in records]
        return pd.Series(values, index=rows.index, dtype=float, name="heuristic_score")
    return np.array([heuristic_score(r, compat=compat) for r in rows], dtype=float)
