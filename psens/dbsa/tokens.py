"""Tokenisation of the input text for DBSA (paper appendix B.2).

The paper splits the input with one regular expression into money/number tokens,
word tokens and single punctuation characters, then groups equal tokens and keeps
all their positions (algorithm 1, lines 1 and 3). We keep the same three classes
and additionally record each token's character span, so that a perturbed prompt
replaces exactly one span of the *original* text (whitespace and layout are kept)
instead of re-joining the tokens with spaces as the published code does.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .._validation import fail

__all__ = [
    "TOKEN_PATTERN",
    "Token",
    "perturb",
    "tokenize",
    "unique_tokens",
]

#: Money / numbers with thousands separators and decimals, then words, then any single
#: non-space, non-word character (appendix B.2, same three alternatives).
TOKEN_PATTERN = re.compile(r"\$?\d+(?:,\d+)*(?:\.\d+)?|\w+|[^\w\s]")

TokenKind = Literal["word", "number", "punct"]


@dataclass(frozen=True)
class Token:
    """One token of the input.

    Attributes
    ----------
    text : str
        The token as it appears in the input.
    index : int
        Its position in the token sequence (``t_i`` of algorithm 1).
    start, end : int
        Its character span in the input text (``text[start:end] == token.text``).
    kind : {"word", "number", "punct"}
        The class of the regular expression that matched it.
    """

    text: str
    index: int
    start: int
    end: int
    kind: TokenKind


def _kind(tok: str) -> TokenKind:
    if tok[0] == "$" or tok[0].isdigit():
        return "number"
    if re.fullmatch(r"\w+", tok):
        return "word"
    return "punct"


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into word, number and punctuation tokens with their spans.

    Parameters
    ----------
    text : str
        The input prompt ``x``.

    Returns
    -------
    list of Token
        In reading order; ``tokens[i].index == i``.

    Raises
    ------
    ValueError
        If ``text`` is empty or holds only whitespace.

    Examples
    --------
    >>> [t.text for t in tokenize("Pay $10,000.50 by 12 May.")]
    ['Pay', '$10,000.50', 'by', '12', 'May', '.']
    """
    if not isinstance(text, str):
        fail("tokenize", f"text is a {type(text).__name__}", "Pass the prompt as a str", TypeError)
    tokens = [
        Token(m.group(0), i, m.start(), m.end(), _kind(m.group(0)))
        for i, m in enumerate(TOKEN_PATTERN.finditer(text))
    ]
    if not tokens:
        fail(
            "tokenize",
            "the input text has no tokens (it is empty or only whitespace)",
            "Pass a non-empty prompt",
        )
    return tokens


def unique_tokens(tokens: list[Token]) -> dict[str, list[int]]:
    """Group equal tokens: ``{token text: [positions]}`` in order of first appearance.

    This is ``T`` and ``I_w`` of algorithm 1 (lines 1 and 3). Matching is exact
    (case-sensitive), as in the published code.
    """
    out: dict[str, list[int]] = {}
    for t in tokens:
        out.setdefault(t.text, []).append(t.index)
    return out


def perturb(text: str, tokens: list[Token], index: int, replacement: str) -> str:
    """Return ``text`` with token ``index`` replaced by ``replacement`` (algorithm 1, line 7).

    Only the token's character span changes; the rest of the text is kept byte for byte.
    """
    if not 0 <= index < len(tokens):
        fail(
            "perturb",
            f"index {index} is outside 0..{len(tokens) - 1}",
            "Pass a token position of this text",
        )
    t = tokens[index]
    return text[: t.start] + replacement + text[t.end :]
