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
    "parse_verdict",
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

_NEG = re.compile(r"\b(incorrect|not\s+correct|wrong|false|no)\b", re.IGNORECASE)
_POS = re.compile(r"\b(correct|right|true|yes)\b", re.IGNORECASE)
_NUM = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?")


def parse_verdict(
    text: str | None, *, mode: Literal["binary", "graded"] = "binary", scale: float = 10.0
) -> Verdict:
    """Read a verdict from a judge's reply.

    binary: the earliest of a negative word ("incorrect", "not correct", "wrong", "false",
    "no") or a positive word ("correct", "right", "true", "yes") decides. graded: the first
    number ``x`` (or ``x/y``, read as ``x/y·scale``) with ``0 ≤ x ≤ scale`` gives
    ``score = x / scale``. Nothing readable → status "unparsed".
    """
    if text is None:
        return Verdict("failed", error="the judge returned no text")
    if mode == "binary":
        neg, pos = _NEG.search(text), _POS.search(text)
        if neg is None and pos is None:
            return Verdict("unparsed", raw_text=text)
        if neg is not None and (pos is None or neg.start() <= pos.start()):
            return Verdict("ok", correct=False, score=None, raw_text=text)
        return Verdict("ok", correct=True, score=None, raw_text=text)
    if mode != "graded":
        fail("parse_verdict", f"mode={mode!r}", 'Use mode="binary" or mode="graded"')
    for m in _NUM.finditer(text):
        x = float(m.group(1))
        if m.group(2):
            den = float(m.group(2))
            if den <= 0:
                continue
            x = x / den * scale
        if 0 <= x <= scale:
            s = x / scale
            return Verdict("ok", correct=s >= 0.5, score=s, raw_text=text)
    return Verdict("unparsed", raw_text=text)


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
    its verdict is "failed". If ``generate`` raises, or returns ``None`` or a wrong number of
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
        self.template = template or (
            DEFAULT_JUDGE_TEMPLATE if mode == "binary" else GRADED_JUDGE_TEMPLATE
        )
        self.batch_size = check_positive_int(batch_size, "CallableJudge", "batch_size")

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
                    verdicts[i] = parse_verdict(text, mode=self.mode, scale=self.scale)
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
