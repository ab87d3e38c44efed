"""The copy-free tree attention (psens.models.tree) against the model's own forward."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from psens import models, prompts  # noqa: E402
from psens.models.tree import TreeForward, _grouping, supports  # noqa: E402
from tests.support import LONG, bpe_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return bpe_tokenizer(unk="<|endoftext|>", pad="<|im_end|>")


def _config(kind: str, tok, **extra):
    import transformers as tf

    base = {
        "vocab_size": len(tok),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "initializer_range": 0.3,
    }
    cls = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM),
        "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
    }[kind]
    torch.manual_seed(3)
    return cls[1](cls[0](**{**base, **extra})).eval()


def _all_masks_agree(model, tok, **scorer_kw):
    n = len(prompts.variables(LONG, n_max=6))
    masks = np.arange(2**n)
    s = models.Scorer(model, tok, name="tiny", progress=False, n_max=6, **scorer_kw)
    ref = s.value(LONG, "ips1", masks, method="naive")
    np.testing.assert_allclose(s.value(LONG, "ips1", masks), ref, atol=1e-4)
    return s, masks, ref


@pytest.mark.parametrize(
    "kind, extra",
    [
        ("llama", {}),
        ("llama", {"num_key_value_heads": 4}),  # no grouped-query heads
        ("qwen2", {}),  # biases on q, k, v
        ("qwen3", {"head_dim": 16}),  # per-head q_norm / k_norm, head_dim != hidden / heads
        ("mistral", {"sliding_window": None}),
    ],
)
def test_tree_matches_one_at_a_time(tok, kind, extra):
    model = _config(kind, tok, **extra)
    assert supports(model)
    s, masks, ref = _all_masks_agree(model, tok)
    assert s.tree is not None
    # a random subset with repeats (unequal fanout: gathered prefixes) and tiny slices
    rng = np.random.default_rng(0)
    sub = rng.choice(masks, size=23, replace=True)
    small = models.Scorer(model, tok, progress=False, n_max=6, batch_size=3)
    small.level_overhead = 0
    np.testing.assert_allclose(small.value(LONG, "ips1", sub), ref[sub], atol=1e-4)
    # the generic key/value-cache walk gives the same numbers
    generic = models.Scorer(model, tok, progress=False, n_max=6, tree_attention=False)
    assert generic.tree is None
    np.testing.assert_allclose(generic.value(LONG, "ips1", masks), ref, atol=1e-4)


def test_sliding_window_shorter_than_the_prompt_uses_the_generic_path(tok):
    model = _config("mistral", tok, sliding_window=8)
    assert not supports(model, 100) and supports(model, 8) and supports(model)
    s, _, _ = _all_masks_agree(model, tok)  # falls back inside _score_rows
    assert s.tree is not None and s.tree.window == 8


def test_unsupported_architectures_use_the_generic_path(tok):
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4)).eval()
    assert not supports(model)
    s = models.Scorer(model, tok, progress=False, n_max=6)
    assert s.tree is None


def test_bfloat16_tree_is_close_to_float32(tok):
    model = _config("llama", tok)
    n = len(prompts.variables(LONG, n_max=6))
    masks = np.arange(2**n)
    ref = models.Scorer(model, tok, progress=False, n_max=6).value(LONG, "ips1", masks)
    half = models.Scorer(model.to(torch.bfloat16), tok, progress=False, n_max=6)
    assert half.tree is not None
    v = half.value(LONG, "ips1", masks)
    assert np.abs(v - ref).max() < 0.1  # bfloat16 rounding, not a different computation


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 5),
    st.integers(1, 6),
    st.integers(1, 5),
    st.lists(st.integers(0, 3), max_size=6),
)
def test_grouping_detects_equal_fanout(start, groups, fanout, extra):
    anc = np.repeat(np.arange(start, start + groups), fanout)
    assert _grouping(anc) == (start, groups, fanout)
    uneven = np.sort(np.concatenate([anc, start + np.asarray(extra, dtype=int) % groups]))
    got = _grouping(uneven)
    if got is not None:
        a0, g, f = got
        assert np.array_equal(uneven, np.repeat(np.arange(a0, a0 + g), f))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=12), st.integers(1, 9))
def test_slices_cover_the_range_in_order(children, cap):
    parents = np.repeat(np.arange(len(children)), children)
    sl = TreeForward._slices(parents, 0, len(parents), cap)
    assert sl[0][0] == 0 and sl[-1][1] == len(parents)
    assert all(a < b <= a + cap for a, b in sl)
    assert all(sl[i][1] == sl[i + 1][0] for i in range(len(sl) - 1))
    if len(sl) > 1 and max(children) <= cap:  # cuts fall where the parent changes
        for a, _ in sl:
            assert a == 0 or parents[a] != parents[a - 1]


def test_a_small_memory_budget_slices_finer_and_changes_nothing(tok, monkeypatch):
    import psens.models.scorer as scorer_module

    model = _config("llama", tok)
    s, masks, ref = _all_masks_agree(model, tok)
    roomy, roomy_rows = s._tree_nodes(60), s._budget_rows(60)
    monkeypatch.setattr(scorer_module, "_available_ram", lambda: 2e5)
    tight = s._tree_nodes(60)
    assert 1 <= s._budget_rows(60) < roomy_rows  # the generic walk's chunks shrink too
    # fewer nodes per call, and fewer still when each keeps a longer prefix
    assert tight(4, 10) < roomy(4, 10) and tight(4, 50) <= tight(4, 10) and tight(4, 50) >= 1
    np.testing.assert_allclose(s.value(LONG, "ips1", masks), ref, atol=1e-4)
    fixed = models.Scorer(model, tok, progress=False, n_max=6, batch_size=5)
    assert fixed._tree_nodes(60)(4, 50) == 5  # an explicit batch size wins (reproducible runs)


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0},
        {
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "short_factor": [1.0] * 4,
            "long_factor": [4.0] * 4,
        },
    ],
)
def test_length_dependent_rotary_scalings_match_one_at_a_time(tok, rope):
    # angles scaled for the longest position: computed once per row, never per level
    model = _config("llama", tok, max_position_embeddings=32, rope_parameters=rope)
    _all_masks_agree(model, tok)  # tree path
    _all_masks_agree(model, tok, tree_attention=False)  # generic path: whole rows


def test_tree_forward_can_be_called_outside_inference_mode(tok):
    model = _config("llama", tok)
    rows = np.asarray([[5, 6, 7, 8], [5, 6, 9, 8]])
    got = TreeForward(model).score(rows, [2, 4], np.asarray([3]), lambda seg, end: 8)
    with torch.inference_mode():
        logits = model(input_ids=torch.as_tensor(rows)).logits[:, -1].double()
    want = torch.log_softmax(logits, -1)[:, 3].numpy()
    np.testing.assert_allclose(got[:, 0], want, atol=1e-5)


def test_stacks_stay_small_when_one_parent_has_many_children(tok, monkeypatch):
    # method="prefix": one parent, every mask a child — split into sub-groups
    model = _config("llama", tok)
    n = len(prompts.variables(LONG, n_max=8))
    masks = np.arange(2**n)
    s = models.Scorer(model, tok, progress=False, n_max=8)
    ref = s.value(LONG, "ips1", masks, method="trie")
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        calls.append((q.shape[-2], k.shape[-2]))
        return real(q, k, v, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    got = s.value(LONG, "ips1", masks, method="prefix")
    np.testing.assert_allclose(got, ref, atol=1e-4)
    length = len(s.encode(LONG, "ips1").ids)
    assert calls and max(keys for _, keys in calls) <= 2 * length + 64


def test_target_log_probs_in_slices_equals_one_call(monkeypatch):
    """The float64 log-softmax taken a slice of rows at a time gives exactly the values of
    one call over every row (shared and per-row targets)."""
    import torch

    import psens.models.tree as tree

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 3, 50, generator=gen) * 5
    shared = torch.tensor([3, 17, 49])
    own = torch.randint(0, 50, (7, 3), generator=gen)
    for targets in (shared, own):
        idx = targets.view(1, 3, 1).expand(7, 3, 1) if targets.dim() == 1 else targets[..., None]
        literal = torch.log_softmax(logits.double(), dim=-1).gather(-1, idx)[..., 0]
        monkeypatch.setattr(tree, "LOG_SOFTMAX_ELEMENTS", 2 * 3 * 50)  # two rows a slice
        assert torch.equal(tree.target_log_probs(logits, targets), literal)
        monkeypatch.setattr(tree, "LOG_SOFTMAX_ELEMENTS", 1)  # one row a slice
        assert torch.equal(tree.target_log_probs(logits, targets), literal)


def test_the_generic_walk_budgets_the_logits_of_every_scored_position(tok, monkeypatch):
    """Cloze options keep logits at k positions: the rows per chunk of the generic walk
    fall with k (over Gemma-3's 262,144-token vocabulary, 64 rows of 40 option tokens
    were 26 GB of float64 log-softmax)."""
    import psens.models.scorer as scorer_module

    model = _config("llama", tok)
    s, _, _ = _all_masks_agree(model, tok)
    # a fixed budget, below the cap of 128 rows
    monkeypatch.setattr(scorer_module, "_available_ram", lambda: 2e7)
    assert s._budget_rows(60, 40) < s._budget_rows(60, 1)
    vocab = s._text_config().vocab_size
    per_row = 3 * s._kv_bytes_per_token() * 60 + vocab * (16 + 4 * 40)
    assert s._budget_rows(60, 40) == max(1, min(128, int(s._memory_budget() // per_row)))
