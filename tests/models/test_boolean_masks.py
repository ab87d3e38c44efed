"""Scorer.value with boolean masks [m, n] (any n; the sparse path of psens.ips.sparse)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from psens import models, prompts  # noqa: E402
from psens.datasets import Item  # noqa: E402
from tests.support import LONG, bpe_tokenizer, tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def scorer():
    tok = bpe_tokenizer(unk="<|endoftext|>", pad="<|im_end|>")
    model = tiny_llama(tok, max_position_embeddings=1024, bos_token_id=1, eos_token_id=2)
    return models.Scorer(model, tok, name="tiny", progress=False, n_max=6)


def test_boolean_masks_equal_bitmasks(scorer):
    words = prompts.variables(LONG, n_max=6)
    ints = np.array([0, 5, 17, 63, 42])
    bits = ((ints[:, None] >> np.arange(len(words))) & 1).astype(bool)
    a = scorer.value(LONG, "ips1", ints, variables=words)
    b = scorer.value(LONG, "ips1", bits, variables=words)
    assert np.array_equal(a, b)
    assert np.array_equal(scorer.value(LONG, "ips1", bits.astype(int), variables=words), a)


def test_more_than_62_words_need_boolean_masks(scorer):
    text = " ".join(f"w{i}x" for i in range(70))
    item = Item("many", text, (("A", "yes"), ("B", "no")), "A")
    words = prompts.variables(item, n_max=70, max_variables=70)
    assert len(words) == 70
    with pytest.raises(ValueError, match="integer bitmasks cannot hold n=70"):
        scorer.value(item, "ips1", [0, 1], variables=words)
    bits = np.ones((2, 70), bool)
    bits[1, 64:] = False  # words beyond bit 63 masked
    v = scorer.value(item, "ips1", bits, variables=words)
    assert v.shape == (2,) and np.isfinite(v).all() and v[0] != v[1]
    with pytest.raises(ValueError, match=r"booleans of shape \(m, 70\)"):
        scorer.value(item, "ips1", np.ones((2, 69), bool), variables=words)
