"""The mask token of a model (IPS paper, appendix A and E.4).

Rule, in order (the first usable one wins):

1. ``override`` (a token string or an id) — a per-model override always wins;
2. the model table's ``mask_token_id`` / ``mask_token`` for ``model_name``
   (``data/models.csv``, from appendix E.4);
3. the tokenizer's unknown token (``unk``);
4. the tokenizer's padding token (``pad``);
5. fallback: a token literally named ``<unk>``, ``<pad>``, ``<|pad|>``, ``[PAD]``,
   ``<|padding|>``, ``[MASK]`` or ``<mask>`` in the vocabulary, in that order.
   The end-of-sequence token is **not** used: it would cut the prompt short in the
   model's eyes.

A token is usable when it maps to a single id inside the vocabulary. When none is
usable, :func:`mask_token` raises and says to pass ``mask_token=``.
"""

from __future__ import annotations

from dataclasses import dataclass

from psens._validation import fail

__all__ = ["FALLBACK_TOKENS", "MaskToken", "mask_token"]

#: Token strings tried, in order, when neither unk nor pad is set.
FALLBACK_TOKENS = ("<unk>", "<pad>", "<|pad|>", "[PAD]", "<|padding|>", "[MASK]", "<mask>")


@dataclass(frozen=True)
class MaskToken:
    """A resolved mask token: its id, its string, and which rule chose it."""

    id: int
    token: str
    rule: str  # "override", "table", "unk", "pad" or "fallback"

    def __int__(self) -> int:
        return self.id


def _vocab_size(tokenizer) -> int:
    return len(tokenizer)


def _as_id(tokenizer, tok) -> int | None:
    """Map a token string or id to an id in the vocabulary, or None."""
    if tok is None:
        return None
    if isinstance(tok, int) and not isinstance(tok, bool):
        return tok if 0 <= tok < _vocab_size(tokenizer) else None
    s = str(tok)
    if s.lstrip("-").isdigit():
        return _as_id(tokenizer, int(s))
    tid = tokenizer.convert_tokens_to_ids(s)
    if isinstance(tid, list) or tid is None:
        return None
    unk = getattr(tokenizer, "unk_token_id", None)
    if tid == unk and s != getattr(tokenizer, "unk_token", None):
        return None  # the string is not in the vocabulary (mapped to unk)
    if not 0 <= tid < _vocab_size(tokenizer):
        return None
    if tokenizer.convert_ids_to_tokens(tid) != s:
        return None
    return int(tid)


def mask_token(tokenizer, model_name: str | None = None, override=None) -> MaskToken:
    """Choose the mask token for a model (appendix E.4; see the module docstring).

    Parameters
    ----------
    tokenizer : transformers tokenizer
    model_name : str, optional
        Short name or hub id looked up in :func:`psens.models.model_table`.
    override : str or int, optional
        Token string or id; wins over everything else.

    Returns
    -------
    MaskToken

    Raises
    ------
    ValueError
        When ``override`` is not in the vocabulary, or no rule gives a usable token.
    """
    where = "psens.models.mask_token"
    if override is not None:
        tid = _as_id(tokenizer, override)
        if tid is None:
            fail(
                where,
                f"the override mask token {override!r} is not a single token of this tokenizer",
                f"Pass a token string from its vocabulary or an id below {_vocab_size(tokenizer)}",
            )
        return MaskToken(tid, tokenizer.convert_ids_to_tokens(tid), "override")
    if model_name is not None:
        from psens.models.registry import lookup

        row = lookup(model_name)
        if row is not None:
            tid = None
            if row.get("mask_token") is not None:
                tid = _as_id(tokenizer, row["mask_token"])
            if tid is None and row.get("mask_token_id") is not None:
                tid = _as_id(tokenizer, int(row["mask_token_id"]))
            if tid is not None:
                return MaskToken(tid, tokenizer.convert_ids_to_tokens(tid), "table")
    for rule, attr in (("unk", "unk_token"), ("pad", "pad_token")):
        tok = getattr(tokenizer, attr, None)
        tid = _as_id(tokenizer, tok) if tok else None
        if tid is not None:
            return MaskToken(tid, tok, rule)
    for tok in FALLBACK_TOKENS:
        tid = _as_id(tokenizer, tok)
        if tid is not None:
            return MaskToken(tid, tok, "fallback")
    fail(
        where,
        f"the tokenizer of {model_name or 'this model'} has no unk or pad token and none of "
        f"{list(FALLBACK_TOKENS)}",
        "Pass mask_token= (a token string or id) to psens.models.load",
    )
    raise AssertionError
