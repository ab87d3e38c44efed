"""Resuming a run whose sample ids are not in sorted order (the demo's ARC ids are not)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from psens import store
from psens.pipeline import run
from tests.support import QUESTIONS, write_tiny_model


def test_resume_with_unsorted_ids_is_not_refused(tmp_path):
    data = tmp_path / "data.jsonl"
    ids = ["zeta", "alpha", "mid"]  # dataset order, not sorted order
    with open(data, "w") as f:
        for qid, (_, q, opts, ans) in zip(ids, QUESTIONS, strict=False):
            f.write(json.dumps({"id": qid, "question": q, "options": opts, "answer": ans}) + "\n")
    cfg = {
        "store": str(tmp_path / "run.zarr"),
        "models": [str(write_tiny_model(tmp_path / "model"))],
        "dataset": "arc-challenge",
        "dataset_path": str(data),
        "samples": 3,  # all three, kept in dataset order
        "templates": ["ips1", "ips2"],
        "n_vars": 3,
        "solver": "exact",
        "threads": 1,
        "generate": False,
    }
    first = run(cfg, progress=False, quiet=True)
    assert [str(s) for s in first["sample"].values] == ids
    store.write_block(cfg["store"], 0, 1, {"status": store.PENDING}, run_id=first.attrs["run_id"])
    again = run(cfg, progress=False, quiet=True)  # resumes: the recorded items match
    assert (again["status"].values == store.DONE).all()
    # a reordered dataset is still refused
    lines = data.read_text().splitlines()
    data.write_text("\n".join([lines[1], lines[0], lines[2]]) + "\n")
    with pytest.raises(ValueError, match="another order"):
        run(cfg, progress=False, quiet=True)
