"""Local generation through the model layer (psens.models.LocalGenerator) on a tiny
random-weight model: batching and left padding, the client interface of EAS, judges,
failures and resume, next-token probabilities."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

import psens.models as M
from psens.backends import CallableJudge, Response
from psens.eas import build_rows, generate_responses, instance_metrics, judge_responses
from psens.models.generation import generate
from psens.pss import top_token_probability
from tests.support import QUESTIONS, write_tiny_model

PROMPTS = [
    "Question: What do bees make?",
    "Q",
    "Question: Which planet is closest to the sun? Answers: A. Venus B. Mars C. Mercury",
    "Which tool measures temperature?",
    "What falls from clouds? A. rain",
]


@pytest.fixture(scope="module")
def scorer(tmp_path_factory):
    folder = write_tiny_model(tmp_path_factory.mktemp("gen") / "model")
    return M.load(folder, progress=False)


@pytest.fixture
def gen(scorer):
    return M.LocalGenerator(scorer, max_new_tokens=6, batch_size=4, chat=False)


def _one_by_one(scorer, prompts, n):
    """Reference: each prompt alone, no padding, plain greedy loop with full forwards."""
    out = []
    for p in prompts:
        ids = scorer.tokenizer(p)["input_ids"]
        new = []
        with torch.inference_mode():
            for _ in range(n):
                logits = scorer.model(input_ids=torch.tensor([ids + new])).logits[0, -1]
                t = int(logits.argmax())
                if t == scorer.tokenizer.eos_token_id:
                    break
                new.append(t)
        out.append(scorer.tokenizer.decode(new, skip_special_tokens=True).strip())
    return out


def test_exported_from_the_model_layer():
    assert "LocalGenerator" in M.__all__
    assert M.LocalGenerator.__module__ == "psens.models.generation"


def test_batched_left_padded_greedy_equals_one_prompt_at_a_time(scorer, gen):
    assert gen.generate(PROMPTS) == _one_by_one(scorer, PROMPTS, 6)
    gen.batch_size = 1
    assert gen.generate(PROMPTS) == _one_by_one(scorer, PROMPTS, 6)


def test_left_padding(gen):
    ids, mask = gen._encode(["Q", "Question: What do bees make?"])
    assert mask[0, -1] == 1 and mask[0, 0] == 0  # short row padded on the left
    assert (ids[0][mask[0] == 0] == gen._pad_id).all()
    assert mask[1].all()


def test_order_is_kept_and_calls_are_counted(gen):
    before = gen.n_calls
    a = gen.generate(PROMPTS)
    b = gen.generate(PROMPTS[::-1])
    assert b == a[::-1]
    assert gen.n_calls - before == 2 * len(PROMPTS)


def test_max_new_tokens_bounds_the_length(scorer, gen):
    two = gen.generate(PROMPTS, max_new_tokens=2)
    assert two == _one_by_one(scorer, PROMPTS, 2)


def test_sampling_is_reproducible_with_a_seed(gen):
    a = gen.generate(PROMPTS, temperature=1.5, seed=3)
    b = gen.generate(PROMPTS, temperature=1.5, seed=3)
    c = gen.generate(PROMPTS, temperature=1.5, seed=4)
    assert a == b
    assert a != c  # random weights, 5 prompts × 6 tokens: a collision is practically impossible


def test_bad_arguments(gen):
    with pytest.raises(TypeError):
        gen.generate("one prompt")
    with pytest.raises(ValueError):
        gen.generate(PROMPTS, temperature=-1)
    with pytest.raises(ValueError):
        gen.complete_many(PROMPTS, frequency_penalty=0, banana=1)
    with pytest.raises(TypeError):
        M.LocalGenerator(object())


def test_function_form(scorer, gen):
    assert generate(scorer, PROMPTS, max_new_tokens=6, chat=False) == gen.generate(PROMPTS)


def test_chat_without_a_template_is_plain_text(gen):
    assert not getattr(gen.tokenizer, "chat_template", None)
    text = gen.render_chat([{"role": "user", "content": "Hi there"}])
    assert text == "Hi there\n"
    assert gen.generate(["Hi there"], chat=True) == gen.generate(["Hi there\n"], chat=False)


def test_chat_template_is_applied(scorer):
    tok = scorer.tokenizer
    old = getattr(tok, "chat_template", None)
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    try:
        g = M.LocalGenerator(scorer, max_new_tokens=3)
        text = g.render_chat([{"role": "user", "content": "Hi"}])
        assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        ids, _ = g._encode([text])
        assert int(ids[0, 0]) == tok.convert_tokens_to_ids("<|im_start|>")
        assert len(g.generate(["Hi"])) == 1
    finally:
        tok.chat_template = old


def test_client_interface_returns_responses(gen):
    res = gen.complete_many(PROMPTS, max_tokens=6, temperature=0, stop=["\n"])
    assert all(isinstance(r, Response) and r.ok for r in res)
    assert [r.text for r in res] == gen.generate(PROMPTS)
    chat = gen.chat_many([[{"role": "user", "content": p}] for p in PROMPTS], max_tokens=6)
    assert [r.text for r in chat] == gen.generate(PROMPTS, chat=True)
    assert len({r.key for r in chat}) == len(PROMPTS)


def _items():
    return [
        {"id": qid, "question": q, "options": list(zip("ABC", opts, strict=True)), "answer": a}
        for qid, q, opts, a in QUESTIONS[:2]
    ]


def test_eas_runs_end_to_end_offline(scorer):
    gen = M.LocalGenerator(scorer, max_new_tokens=4, batch_size=8)
    rows = build_rows(_items(), dataset="tiny", model_name="tiny")
    rows = generate_responses(rows, gen, max_tokens=4)
    assert (rows["status"] == "ok").all() and rows["raw_response"].map(type).eq(str).all()
    judge = CallableJudge(M.LocalGenerator(scorer, max_new_tokens=3), batch_size=8)
    judged = judge_responses(rows, judge)
    assert set(judged["judge_status"]) <= {"ok", "unparsed"}
    assert judged["judge_raw"].notna().all()  # the judge's text is kept either way
    judged["judge_correct"] = [i % 2 == 0 for i in range(len(judged))]  # a stand-in verdict
    inst = instance_metrics(judged)
    assert len(inst) == 2 and inst["n_templates"].eq(8).all()


class _Flaky:
    """Wraps a model: raises on the first ``fail_calls`` generate calls."""

    def __init__(self, model, fail_calls: int) -> None:
        self._model, self.left = model, fail_calls
        self.generation_config = model.generation_config

    def parameters(self):
        return self._model.parameters()

    def generate(self, *args, **kwargs):
        if self.left > 0:
            self.left -= 1
            raise RuntimeError("out of memory (simulated)")
        return self._model.generate(*args, **kwargs)


class _Holder:
    def __init__(self, model, tokenizer) -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, "flaky"


def test_a_failed_batch_is_recorded_and_retried(scorer):
    flaky = _Flaky(scorer.model, fail_calls=1)
    gen = M.LocalGenerator(_Holder(flaky, scorer.tokenizer), max_new_tokens=3, batch_size=8)
    rows = build_rows(_items(), dataset="tiny", model_name="tiny")  # 16 rows: 2 batches
    first = generate_responses(rows, gen)
    failed = first["status"] == "failed"
    assert failed.sum() == 8
    assert first.loc[failed, "raw_response"].isna().all()  # None, never ""
    assert first.loc[failed, "error"].str.contains("out of memory").all()
    n = gen.n_calls
    second = generate_responses(first, gen)
    assert (second["status"] == "ok").all()
    assert gen.n_calls - n == 8  # only the failures were sent again
    pd.testing.assert_series_equal(
        second.loc[~failed, "raw_response"], first.loc[~failed, "raw_response"]
    )


def test_callable_judge_records_a_failed_local_call(scorer):
    flaky = _Flaky(scorer.model, fail_calls=10)
    judge = CallableJudge(M.LocalGenerator(_Holder(flaky, scorer.tokenizer), max_new_tokens=2))
    v = judge.judge_many([("q", "ref", "resp"), ("q", "ref", None)])
    assert [x.status for x in v] == ["failed", "failed"]
    assert np.isnan(v[0].value)


def test_next_token_probs_match_a_direct_forward(scorer, gen):
    probs = gen.next_token_probs(PROMPTS[:3], suffix=" Answer:")
    assert probs.shape == (3, scorer.model.config.vocab_size)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    for i, p in enumerate(PROMPTS[:3]):
        ids = torch.tensor([scorer.tokenizer(p + " Answer:")["input_ids"]])
        with torch.inference_mode():
            direct = torch.softmax(scorer.model(input_ids=ids).logits[0, -1].double(), -1)
        np.testing.assert_allclose(probs[i], direct.numpy(), atol=1e-5)
    ids = gen.label_token_ids(["A", "B", "C"])
    full = top_token_probability(probs, over="full")
    opts = top_token_probability(probs, over="options", option_ids=ids)
    assert (opts <= full + 1e-12).all() and ids.size >= 3
