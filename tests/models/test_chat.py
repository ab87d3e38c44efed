"""An instruct model asked with and without its chat template (psens.models.chat), on a
tiny random-weight model: the chat prompt is the template's user turn, the option answer
tokens follow the opened assistant turn, and the raw path is the scorer's own prediction."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import psens.models as M
from psens import datasets
from psens.models import chat
from tests.support import ROOT, run_notebook_cells, write_tiny_dataset, write_tiny_model

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("chat")
    scorer = M.load(write_tiny_model(root / "model"), progress=False)
    items = datasets.load("arc-challenge", path=write_tiny_dataset(root / "q.jsonl"))
    return scorer, items[:4]


def test_raw_prompts_are_the_scorers_own_predictions(setup):
    scorer, items = setup
    res = chat.chat_comparison(scorer, items, ["ips1", "ips4"])
    assert dict(res.sizes) == {"asked": 2, "sample": 4, "template": 2, "option": 3}
    raw = res.sel(asked="raw prompt")
    for i, item in enumerate(items):
        p = scorer.predict(item, "ips4", generate=False)
        assert raw["choice"].values[i, 1] == p.choice
        np.testing.assert_allclose(
            raw["option_prob"].values[i, 1], [p.option_probs[k] for k, _ in item.options]
        )
    np.testing.assert_allclose(res["option_prob"].sum("option"), 1.0, atol=1e-9)


def test_the_chat_path_asks_through_the_template(setup):
    scorer, items = setup
    tok = scorer.tokenizer
    old = getattr(tok, "chat_template", None)
    tok.chat_template = TEMPLATE
    try:
        item = items[0]
        p = scorer.predict(item, "ips1", generate=False, chat=True)
        enc = scorer._chat_encoded(scorer.encode(item, "ips1", variables=()), item, _tpl("ips1"))
        assert enc.text.startswith("<|im_start|>user\n") and enc.text.endswith("assistant\n")
        assert int(enc.ids[0]) == tok.convert_tokens_to_ids("<|im_start|>")
        # the literal reference: one forward pass over the chat text, softmax over the labels
        import torch

        with torch.inference_mode():
            logits = scorer.model(torch.as_tensor(enc.ids[None, :])).logits[0, -1].double()
        lp = torch.log_softmax(logits, -1).numpy()
        labels = [k for k, _ in item.options]
        ids = [tok(k, add_special_tokens=False)["input_ids"][0] for k in labels]
        q = np.exp(lp[ids] - lp[ids].max())
        np.testing.assert_allclose([p.option_probs[k] for k in labels], q / q.sum(), rtol=1e-6)
        assert p.choice == labels[int(np.argmax(q))]
        res = chat.chat_comparison(scorer, items)
        table = chat.majority(res)
        assert list(table.index) == list(chat.ASKED)
        assert ((table["majority_share"] > 0) & (table["majority_share"] <= 1)).all()
        assert chat.chart(res).to_dict()["mark"]["type"] == "bar"
    finally:
        tok.chat_template = old


def test_bad_input_is_refused(setup):
    scorer, _ = setup
    with pytest.raises(ValueError, match="no items or no templates"):
        chat.chat_comparison(scorer, [], ["ips1"])


def _tpl(name):
    from psens import prompts

    return prompts.get_template(name)


def test_the_notebook_check_asks_the_flagged_instruct_model(setup, monkeypatch):
    """Notebook 03's cell on the shipped run: SmolLM2 is flagged "majority answer A", so
    it is asked again both ways (here through a stand-in tiny model)."""
    import psens
    import psens.widgets as pw
    from psens.synthetic import synthetic_run
    from tests.support import ROOT

    scorer, _ = setup
    asked = []
    monkeypatch.setattr(psens.models, "load", lambda name, **kw: asked.append(name) or scorer)
    arc = psens.open_run(ROOT / "data" / "runs" / "arc.nc")
    message, table, chart = pw.chat_check(arc, arc.psens.headline(n_boot=100), limit=3)
    assert asked == ["smollm2-135m-instruct"]
    assert message.startswith("smollm2-135m-instruct (majority answer on 95 %")
    assert "through its chat template majority" in message
    # the confound the 0-shot check cannot see: with examples the letter follows theirs
    assert "1-shot C on 98 % (examples answer C)" in message
    assert "3-shot C on 82 % (examples answer C, A)" in message
    assert table.shape[0] == 6 and {"correct answer", "answer", "A", "D"} <= set(table.columns)
    assert chart is not None
    toy = synthetic_run(n_samples=3)
    message, table, chart = pw.chat_check(toy, toy.psens.headline(n_boot=50))
    assert "synthetic run" in message and table is None and chart is None


def test_notebook_03s_own_chat_check_sees_the_few_shot_confound(setup, monkeypatch):
    """Notebook 03's cells as they run on the shipped run (model loading stubbed): the
    notebook compares IPS at 0 shots, but its chat check gets the whole run, so it says that
    SmolLM2's letter follows the few-shot examples' C."""
    import psens

    scorer, _ = setup
    asked = []
    monkeypatch.setattr(psens.models, "load", lambda name, **kw: asked.append(name) or scorer)
    scope = {"PSENS_RUN": str(ROOT / "data" / "runs" / "arc.nc"), "PSENS_SIZE": ""}
    run_notebook_cells(
        "03_ips_across_models",
        scope,
        "ds = pw.load_run(",
        "per_sample = psens.ips.ips(",
        "head = ds.psens.headline()",
        "pw.chat_check(",
    )
    assert asked == ["smollm2-135m-instruct"]
    assert "shot" not in scope["ds"].dims  # the notebook's IPS cells: 0 shots
    message = scope["message"]
    assert message.startswith("smollm2-135m-instruct (majority answer on 95 %")
    assert "1-shot C on 98 %" in message
    assert "its answer follows their letter" in message
