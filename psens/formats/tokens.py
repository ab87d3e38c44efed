"""Which prompt formats a model's tokenizer can score: the option labels of a format must
begin with distinct answer tokens (:func:`psens.models.scorer.labels_apart`). Checked when a
run's formats are sampled (:mod:`psens.config`) and before a format-space run is scored.

It sits above :mod:`psens.formats.grammar` (the data layer) because it asks the models
layer's tokenizers.
"""

from __future__ import annotations

from collections.abc import Sequence

from psens.datasets import Item
from psens.formats.grammar import _BY_NAME, Format

__all__ = ["PROBE", "scorable", "scorable_enums"]


#: The item on which :func:`scorable` checks a format's answer tokens: three options, as
#: few as a tokenizer that splits a label from its space (``" a"`` -> ``" "`` + ``"a"``)
#: needs to collide; an item with more options is checked again by the run.
PROBE = Item(
    "psens-probe", "Which of these is a number?", (("A", "one"), ("B", "red"), ("C", "cat")), "A"
)


def scorable(f: Format, tokenizers: Sequence, item: Item = PROBE) -> bool:
    """Whether every tokenizer gives the option labels of ``f`` distinct answer tokens
    (:func:`psens.models.scorer.labels_apart` on ``item``, :data:`PROBE` by default): a
    tokenizer that reads ``" a"`` as ``" "`` + ``"a"`` cannot score lowercase labels."""
    from psens.models.scorer import labels_apart

    t = f.template()
    return all(labels_apart(tok, item, t) for tok in tokenizers)


def scorable_enums(f: Format, tokenizer, item: Item = PROBE) -> list[str]:
    """The enumerations (``enum`` values) with which ``f``'s option labels begin with
    distinct answer tokens under ``tokenizer`` on ``item``: what a run names when it refuses
    a format it cannot score."""
    enums = _BY_NAME["enum"].names
    return [v for v in enums if scorable(f.replace(enum=v), [tokenizer], item)]
