"""ProSA's published prompt variants: the shipped data file, layout templates, PSS runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from psens import prompts
from psens.datasets import Item
from psens.pss.published import (
    load_published_prompts,
    published_groups,
    published_templates,
    register_published,
)
from tests.support import ROOT

PROMPTS = ROOT / "data" / "reference" / "prosa" / "objective_prompts.json"
ITEM4 = Item(
    "x",
    "Which gas do plants take in?",
    (("A", "oxygen"), ("B", "carbon dioxide"), ("C", "helium"), ("D", "neon")),
    "B",
)


def test_the_file_holds_twelve_prompts_per_benchmark_with_provenance():
    raw = load_published_prompts()
    assert sorted(raw["datasets"]) == ["arc-challenge", "commonsenseqa", "humaneval", "math"]
    assert all(len(d["prompts"]) == 12 for d in raw["datasets"].values())
    assert "open-compass/ProSA" in raw["source"] and "Apache-2.0" in raw["licence"]
    assert published_groups("math")["prosa-math-07"] == 3


def test_arc_prompts_render_as_published():
    register_published("arc-challenge")
    # the literal published string of prompt 3, filled by hand
    want = (
        "Question:\nWhich gas do plants take in? A. oxygen B. carbon dioxide C. helium D. neon"
        "\nAnswer:"
    )
    r = prompts.render_spans(ITEM4, "prosa-arc-03")
    assert r.text == want
    assert r.target == " B"
    for role, value in [("question", ITEM4.question), ("option:C", "helium")]:
        assert r.text[r.fields[role] : r.fields[role] + len(value)] == value
    # the CommonsenseQA quirk is kept: a space before option E in prompt 5
    (t5,) = [t for t in published_templates("commonsenseqa") if t.name == "prosa-csqa-05"]
    assert "\n E. {E}" in t5.layout


def test_few_shot_examples_repeat_the_layout_with_their_answer():
    register_published("arc-challenge")
    shot = Item(
        "s", "What is ice?", (("A", "gas"), ("B", "solid"), ("C", "plasma"), ("D", "x")), "B"
    )
    text = prompts.render(ITEM4, "prosa-arc-03", shots=[shot])
    assert text.startswith("Question:\nWhat is ice? A. gas B. solid C. plasma D. x\nAnswer: B\n\n")
    text = prompts.render(ITEM4, "prosa-arc-04", shots=[shot])  # no answer slot in prompt 4
    assert text.startswith(
        "Could you provide a response to the following question: What is ice? A. gas B. solid "
        "C. plasma D. x\nAnswer: B\n\n"
    )


def test_a_variant_file_with_a_missing_placeholder_is_refused(tmp_path):
    raw = json.loads(PROMPTS.read_text())
    raw["datasets"]["arc-challenge"]["prompts"][2]["text"] = "Question:\n{question} A. {textA}"
    bad = tmp_path / "objective_prompts.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"prompt_3.*no \{textB\} placeholder"):
        load_published_prompts(bad)
    raw["datasets"]["arc-challenge"]["prompts"][2]["text"] = (
        "{question} {textA}{textB}{textC}{textD} {oops}"
    )
    bad.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"placeholders \['oops'\] that name no field"):
        load_published_prompts(bad)
    raw["datasets"]["arc-challenge"]["prompts"].pop()
    bad.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="11 prompts, not 12"):
        load_published_prompts(bad)


def test_an_item_with_other_options_is_refused():
    register_published("arc-challenge")
    three = Item("t", "Pick one.", (("A", "a"), ("B", "b"), ("C", "c")), "A")
    with pytest.raises(ValueError, match="shows the options A, B, C, D but item 't' has A, B, C"):
        prompts.render(three, "prosa-arc-01")


def test_layout_template_checks():
    with pytest.raises(ValueError, match="no 'question' role"):
        prompts.Template("x", layout="{q}", layout_fields=(("option:A", "q"),))
    with pytest.raises(ValueError, match="repeats the placeholders"):
        prompts.Template("x", kind="open", layout="{q} {q}", layout_fields=(("question", "q"),))
    t = prompts.Template("x", kind="open", layout="Q: {q}", layout_fields=(("question", "q"),))
    assert prompts.Template.from_dict(t.to_dict()) == t


def test_config_prosa_templates_and_predictions_only(tmp_path):
    from psens.config import RunConfig

    base = {"store": str(tmp_path / "s.zarr"), "models": ["smollm2-135m-instruct"]}
    cfg = RunConfig.from_dict(
        {**base, "dataset": "commonsenseqa", "templates": "prosa", "n_vars": 0}
    )
    assert cfg.template_names == [f"prosa-csqa-{k:02d}" for k in range(1, 13)]
    assert cfg.predictions_only
    with pytest.raises(ValueError, match="ProSA published no prompts for 'boolq'"):
        RunConfig.from_dict({**base, "dataset": "boolq", "templates": "prosa"})
    with pytest.raises(ValueError, match="noise_floor is set but n_vars = 0"):
        RunConfig.from_dict({**base, "dataset": "arc-challenge", "n_vars": 0, "noise_floor": True})
    with pytest.raises(ValueError, match="n_vars=-1 is below 0"):
        RunConfig.from_dict({**base, "dataset": "arc-challenge", "n_vars": -1})


def test_a_run_keeps_only_items_with_the_layouts_options(tmp_path):
    from psens.config import RunConfig
    from psens.runner import select_items

    rows = [
        {"id": "four", "question": "q4?", "options": ["a", "b", "c", "d"], "answer": "A"},
        {"id": "three", "question": "q3?", "options": ["a", "b", "c"], "answer": "A"},
        {"id": "four2", "question": "q5?", "options": ["a", "b", "c", "e"], "answer": "B"},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = RunConfig.from_dict(
        {
            "store": str(tmp_path / "s.zarr"),
            "models": ["smollm2-135m-instruct"],
            "dataset": "arc-challenge",
            "dataset_path": str(path),
            "templates": "prosa",
            "n_vars": 0,
            "samples": 2,
        }
    )
    assert [it.id for it in select_items(cfg)] == ["four", "four2"]


@pytest.fixture(scope="module")
def pss_run(tmp_path_factory):
    """A predictions-only run of the tiny random model with two three-option layouts."""
    pytest.importorskip("torch")
    import psens
    from tests.support import write_tiny_dataset, write_tiny_model

    d = tmp_path_factory.mktemp("pssrun")
    fields = (("question", "q"), ("option:A", "a"), ("option:B", "b"), ("option:C", "c"))
    for name, layout in [
        ("t-lay1", "{q}\nA. {a}\nB. {b}\nC. {c}\nAnswer:"),
        ("t-lay2", "Please answer: {q} A. {a} B. {b} C. {c}"),
    ]:
        prompts.register(
            prompts.Template(name, layout=layout, layout_fields=fields), overwrite=True
        )
    ds = psens.run(
        {
            "store": str(d / "pss.zarr"),
            "models": [str(write_tiny_model(d / "model"))],
            "dataset": "arc-challenge",
            "dataset_path": str(write_tiny_dataset(d / "data.jsonl")),
            "samples": 4,
            "templates": ["t-lay1", "t-lay2"],
            "n_vars": 0,
            "shots": [0, 1],
            "seed": 0,
            "threads": 1,
            "generate": False,
        },
        progress=False,
        quiet=True,
    )
    return ds, d


def test_predictions_only_run_stores_answers_and_no_games(pss_run):
    from psens.pss.runs import is_pss_run

    ds, _ = pss_run
    assert is_pss_run(ds)
    assert (ds["status"].values == 1).all()
    assert ds.sizes["subset"] == 1 and np.isnan(ds["v"].values).all()
    assert np.isin(ds["correct"].values, [0.0, 1.0]).all()
    c = ds["confidence"].values
    assert ((c > 0) & (c <= 1)).all()
    assert set(np.unique(ds["prediction"].values)) <= {"A", "B", "C"}
    # the stored correctness is the stored prediction against the gold label
    gold = np.array([t.strip() for t in ds["target"].values])[None, :, None, None]
    assert np.array_equal(ds["correct"].values, (ds["prediction"].values == gold).astype(float))


def test_psens_summary_reads_a_pss_run(pss_run, capsys):
    from psens.cli import main

    _, d = pss_run
    assert main(["summary", str(d / "pss.zarr")]) == 0
    out = capsys.readouterr().out
    assert "0-shot PSS" in out and "1-shot PSS" in out and "IPS" not in out


def test_reusing_the_few_shot_prefix_gives_the_same_prediction(pss_run):
    import psens
    from tests.support import QUESTIONS

    _, d = pss_run
    scorer = psens.models.load(str(d / "model"), n_max=1, progress=False)
    items = [
        Item(q, text, tuple(zip("ABC", opts, strict=True)), a) for q, text, opts, a in QUESTIONS
    ]
    for name in ("t-lay1", "t-lay2"):
        for it in items[2:4]:
            a = scorer.predict(it, name, shots=items[:2], generate=False)
            b = scorer.predict(it, name, shots=items[:2], generate=False, reuse_prefix=True)
            assert a.choice == b.choice
            assert abs(a.confidence - b.confidence) < 1e-5
            assert abs(a.p_target - b.p_target) < 1e-5
            assert np.allclose(a.hidden, b.hidden, atol=1e-4)
    assert len(scorer._prefixes) == 2  # one cached prefix per template, reused across items
