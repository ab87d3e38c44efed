"""Judges: a model asked whether (or how well) a response answers, and its verdict parsed.

:class:`CallableJudge` wraps any callable or local generator; :class:`HTTPJudge` asks an
OpenAI-compatible server through :class:`psens.backends.OpenAIClient`. A reply the parser
cannot read is a failed verdict, never a made-up score (EAS, ProSA's subjective PSS).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from psens._validation import check_positive_int, fail
from psens.backends.client import OpenAIClient

__all__ = [
    "DEFAULT_JUDGE_TEMPLATE",
    "GRADED_JUDGE_TEMPLATE",
    "CallableJudge",
    "HTTPJudge",
    "Judge",
    "Verdict",
    "instruction_text",
    "parse_verdict",
    "reread_verdicts",
]


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict.

    ``status``: "ok" (``correct`` and/or ``score`` set), "unparsed" (the judge answered but no
    verdict could be read from ``raw_text``) or "failed" (the call failed; ``error`` says why).
    Only "ok" verdicts carry a score; use :attr:`value` (NaN otherwise) so that a failure is
    never counted as a wrong answer.
    """

    status: Literal["ok", "unparsed", "failed"]
    correct: bool | None = None
    score: float | None = None
    raw_text: str | None = None
    error: str | None = None

    @property
    def value(self) -> float:
        """The score in [0, 1] (binary: 1.0/0.0), NaN unless ``status == "ok"``."""
        if self.status != "ok":
            return float("nan")
        if self.score is not None:
            return float(self.score)
        return float(bool(self.correct))

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (for DataFrame rows)."""
        return asdict(self)


DEFAULT_JUDGE_TEMPLATE = (
    "You are grading an answer to a question.\n"
    "Question: {question}\n"
    "Reference answer: {reference}\n"
    "Response to grade: {response}\n"
    "Does the response give the same answer as the reference (wording may differ)? "
    "Reply with exactly one word: correct or incorrect."
)
GRADED_JUDGE_TEMPLATE = (
    "You are grading an answer to a question.\n"
    "Question: {question}\n"
    "Reference answer: {reference}\n"
    "Response to grade: {response}\n"
    "Rate how well the response answers the question compared with the reference, on a scale "
    "from 0 (wrong or useless) to {scale} (fully correct). Reply with the number only."
)

#: verdict words of mode "binary" (DEFAULT_JUDGE_TEMPLATE asks for correct/incorrect, the
#: subjective PSS preference template for yes/no)
_VERDICT_WORD = re.compile(r"\b(correct|right|true|yes|incorrect|wrong|false|no)\b", re.I)
_NEGATIVE = frozenset({"incorrect", "wrong", "false", "no"})
#: words that negate or hedge a following verdict ("I would not say yes", "partially correct")
_NEGATOR = re.compile(
    r"\b(?:not|never|cannot|neither|nor|hardly|barely|partially|partly)\b|\w+n['’]t\b", re.I
)
_REAL = r"\d+(?:\.\d+)?"
#: a range naming the instruction's scale ("0 to 10", "0-10", "between 0 and 10")
_RANGE = re.compile(rf"(?<![\w.+\-−±])0\s*(?:to|-|–|—|and)\s*({_REAL})(?!\w|\.\d)", re.I)
#: a rating with its denominator ("8/10", "8 out of 10")
_FRACTION = re.compile(
    rf"(?<![\w.+\-−±/])({_REAL})\s*,?\s*(?:/|out\s+of)\s*({_REAL})(?!\w|\.\d|/)", re.I
)
#: a piece of text holding a digit, cut at white space and ``:``/``=`` ("Score:8")
_DIGIT_TOKEN = re.compile(r"[^\s:=]*\d[^\s:=]*")
_PLAIN = re.compile(_REAL)
_EDGE = "([{\"'*`_.,;!?)]}"


def instruction_text(template: str, scale: float = 10.0) -> str:
    """The instruction of a judge ``template``: its lines without the ``{question}``,
    ``{reference}`` and ``{response}`` fields, ``{scale}`` filled in (what
    :func:`parse_verdict` recognises as an echo)."""
    from string import Formatter

    scale_text = int(scale) if float(scale).is_integer() else scale
    keep = []
    for line in template.splitlines():
        try:
            fields = {f for _, f, _, _ in Formatter().parse(line) if f is not None}
            if fields <= {"scale"}:
                keep.append(line.format(scale=scale_text))
        except (ValueError, KeyError, IndexError):  # a line that is not a format string
            continue
    return "\n".join(keep)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _echoes(text: str, instruction: str | None) -> bool:
    """Whether ``text`` repeats a clause (three or more words between punctuation) of
    ``instruction``."""
    if not instruction:
        return False
    reply = _norm(text)
    for clause in re.split(r"[.?!:;,](?:\s+|$)|\n+", instruction):
        s = _norm(clause)
        if len(s.split()) >= 3 and s in reply:
            return True
    return False


def _negated(text: str, end: int) -> bool:
    return _NEGATOR.search(text, 0, end) is not None


def _binary(text: str) -> bool | None:
    """The one polarity of the verdict words of ``text``, None if there is none, both, or a
    negation before one."""
    words = list(_VERDICT_WORD.finditer(text))
    polarity = {w.group(1).lower() not in _NEGATIVE for w in words}
    if len(polarity) != 1 or _negated(text, words[-1].start()):
        return None
    return polarity.pop()


def _graded(text: str, scale: float) -> float | None:
    """The one rating of ``text`` in ``[0, scale]``, None unless exactly one plain number
    (or ``x/scale``, ``x out of scale``) is left once the scale's range is removed."""
    masked = list(text)

    def blank(m: re.Match) -> None:
        masked[m.start() : m.end()] = " " * (m.end() - m.start())

    for m in _RANGE.finditer(text):
        if float(m.group(1)) == scale:
            blank(m)
    found: list[tuple[int, float]] = []
    for m in _FRACTION.finditer("".join(masked)):
        if float(m.group(2)) != scale:
            return None  # a rating on another scale
        found.append((m.start(), float(m.group(1))))
        blank(m)
    for m in _DIGIT_TOKEN.finditer("".join(masked)):
        token = m.group(0).strip(_EDGE)
        if not _PLAIN.fullmatch(token):
            return None  # a sign, exponent, percent, decimal comma or digits in a word
        found.append((m.start(), float(token)))
    if len(found) != 1:
        return None
    start, x = found[0]
    if not 0 <= x <= scale or _negated(text, start):
        return None
    return x / scale


def parse_verdict(
    text: str | None,
    *,
    mode: Literal["binary", "graded"] = "binary",
    scale: float = 10.0,
    instruction: str | None = None,
) -> Verdict:
    """Read a verdict from a judge's reply, only where it is unambiguous.

    binary: the reply's verdict words — positive "correct", "right", "true", "yes", negative
    "incorrect", "wrong", "false", "no" — must all have one polarity (``correct`` True or
    False), with no negation or hedge ("not", "never", "…n't", "cannot", "partially", ...)
    before the last of them: "I would not say yes", "yes or no", "No, it is correct" are
    unparsed. graded: once a range naming the scale ("0 to 10", "0-10") is removed, exactly
    one plain number ``x`` (digits with an optional decimal point; or ``x/scale``, ``x out of
    scale``) must be left, with ``0 ≤ x ≤ scale`` and no negation before it; then ``score =
    x / scale``. A sign, an exponent, a percent sign, a decimal comma, another denominator or
    a second number make the reply unparsed ("-5", "1e5", "15 out of 10", "7 or 8"). In both
    modes a reply that repeats a clause (three or more words between punctuation) of
    ``instruction`` (the judge's own instruction, :func:`instruction_text`) is an echo, not a
    verdict: unparsed.
    """
    if text is None:
        return Verdict("failed", error="the judge returned no text")
    if mode not in ("binary", "graded"):
        fail("parse_verdict", f"mode={mode!r}", 'Use mode="binary" or mode="graded"')
    if _echoes(text, instruction):
        return Verdict("unparsed", raw_text=text)
    if mode == "binary":
        correct = _binary(text)
        if correct is None:
            return Verdict("unparsed", raw_text=text)
        return Verdict("ok", correct=correct, score=None, raw_text=text)
    score = _graded(text, float(scale))
    if score is None:
        return Verdict("unparsed", raw_text=text)
    return Verdict("ok", correct=score >= 0.5, score=score, raw_text=text)


def _template(template: str | None, mode: str) -> str:
    """``template``, or the default template of ``mode``."""
    return template or (DEFAULT_JUDGE_TEMPLATE if mode == "binary" else GRADED_JUDGE_TEMPLATE)


def reread_verdicts(
    replies: Sequence[str | None],
    statuses: Sequence[str],
    *,
    template: str | None = None,
    mode: Literal["binary", "graded"] = "binary",
    scale: float = 10.0,
) -> list[Verdict]:
    """The verdicts :func:`parse_verdict` reads from a judge's stored replies: what a
    :class:`CallableJudge` with this ``template``, ``mode`` and ``scale`` gives the same
    replies now (a stored run re-read after the parser changed, without calling the judge).

    A verdict stored as "failed" stays failed (no reply was given: its stored text, if any, is
    the error); every other reply is parsed again, so an "ok" may become "unparsed" and the
    reverse.
    """
    if len(replies) != len(statuses):
        fail(
            "reread_verdicts",
            f"{len(replies)} replies for {len(statuses)} statuses",
            "Pass one status per stored reply",
        )
    instruction = instruction_text(_template(template, mode), float(scale))
    return [
        Verdict("failed", error=text or None)
        if status == "failed"
        else parse_verdict(text, mode=mode, scale=float(scale), instruction=instruction)
        for text, status in zip(replies, statuses, strict=True)
    ]


@runtime_checkable
class Judge(Protocol):
    """Anything with ``judge(question, reference, response) -> Verdict`` and a batch form."""

    def judge(self, question: str, reference: str, response: str | None) -> Verdict:
        """Verdict on one response."""
        ...

    def judge_many(self, triples: Sequence[tuple[str, str, str | None]]) -> list[Verdict]:
        """Verdicts on many (question, reference, response) triples, in order."""
        ...


class CallableJudge:
    """A judge on top of any ``generate(prompts: list[str]) -> list[str | None]`` callable.

    Each triple is rendered with ``template`` (placeholders ``{question}``, ``{reference}``,
    ``{response}``, ``{scale}``), sent in one ``generate`` call per batch, and parsed by
    :func:`parse_verdict`. A response that is ``None`` (the model call failed) is not judged:
    its verdict is "failed"; a reply that echoes the template's instruction is "unparsed".
    If ``generate`` raises, or returns ``None`` or a wrong number of
    replies, the affected verdicts are "failed" with the error text.
    """

    def __init__(
        self,
        generate: Callable[[list[str]], Sequence[str | None]],
        *,
        template: str | None = None,
        mode: Literal["binary", "graded"] = "binary",
        scale: float = 10.0,
        batch_size: int = 32,
    ) -> None:
        if not callable(generate):
            fail("CallableJudge", "generate is not callable", "Pass generate(prompts)->list[str]")
        if mode not in ("binary", "graded"):
            fail("CallableJudge", f"mode={mode!r}", 'Use mode="binary" or mode="graded"')
        self.generate = generate
        self.mode = mode
        self.scale = float(scale)
        self.template = _template(template, mode)
        self.batch_size = check_positive_int(batch_size, "CallableJudge", "batch_size")
        self.instruction = instruction_text(self.template, self.scale)

    def prompt(self, question: str, reference: str, response: str) -> str:
        """The judge prompt of one triple."""
        scale = int(self.scale) if self.scale.is_integer() else self.scale
        return self.template.format(
            question=question, reference=reference, response=response, scale=scale
        )

    def judge(self, question: str, reference: str, response: str | None) -> Verdict:
        """Verdict on one response."""
        return self.judge_many([(question, reference, response)])[0]

    def _replies(self, prompts: list[str]) -> list[tuple[str | None, str | None]]:
        try:
            out = list(self.generate(prompts))
        except Exception as exc:  # the judge model failed: record, do not score
            return [(None, f"judge call failed: {type(exc).__name__}: {exc}")] * len(prompts)
        if len(out) != len(prompts):
            err = f"judge returned {len(out)} replies for {len(prompts)} prompts"
            return [(None, err)] * len(prompts)
        return [(r, None if r is not None else "judge call failed") for r in out]

    def judge_many(self, triples: Sequence[tuple[str, str, str | None]]) -> list[Verdict]:
        """Verdicts on many triples, in order (batches of ``batch_size``)."""
        verdicts: list[Verdict | None] = [None] * len(triples)
        todo = []
        for i, (q, ref, resp) in enumerate(triples):
            if resp is None or (isinstance(resp, float) and resp != resp):
                verdicts[i] = Verdict("failed", error="no response to judge (the call failed)")
            else:
                todo.append((i, self.prompt(str(q), str(ref), str(resp))))
        for s in range(0, len(todo), self.batch_size):
            chunk = todo[s : s + self.batch_size]
            for (i, _), (text, err) in zip(
                chunk, self._replies([p for _, p in chunk]), strict=True
            ):
                if text is None:
                    verdicts[i] = Verdict("failed", error=err)
                else:
                    verdicts[i] = parse_verdict(
                        text, mode=self.mode, scale=self.scale, instruction=self.instruction
                    )
        return [v for v in verdicts if v is not None]


class HTTPJudge(CallableJudge):
    """A judge served by an OpenAI-compatible server (:class:`OpenAIClient`), chat endpoint,
    deterministic by default (``temperature=0``). Failed HTTP calls give "failed" verdicts
    carrying the client's error text; a re-run retries them (successes come from the cache)."""

    def __init__(
        self,
        client: OpenAIClient,
        *,
        template: str | None = None,
        mode: Literal["binary", "graded"] = "binary",
        scale: float = 10.0,
        batch_size: int = 32,
        **params: Any,
    ) -> None:
        self.client = client
        self.params = {"temperature": 0.0, "max_tokens": 16, **params}
        super().__init__(
            self._generate, template=template, mode=mode, scale=scale, batch_size=batch_size
        )

    def _generate(self, prompts: list[str]) -> list[str | None]:
        self._errors = {}
        res = self.client.chat_many(
            [[{"role": "user", "content": p}] for p in prompts], **self.params
        )
        for p, r in zip(prompts, res, strict=True):
            if not r.ok:
                self._errors[p] = r.error
        return [r.text if r.ok else None for r in res]

    def _replies(self, prompts: list[str]) -> list[tuple[str | None, str | None]]:
        out = super()._replies(prompts)
        errors = getattr(self, "_errors", {})
        return [
            (t, errors.get(p, e) if t is None else e)
            for (t, e), p in zip(out, prompts, strict=True)
        ]
