"""The cloze run configs (data/runs/cloze-*.toml, shipped or pending) load and check as psens
run configs."""

from __future__ import annotations

import pytest

from psens.config import load_config
from tests.support import ROOT

RUNS = ROOT / "data" / "runs"
CONFIGS = sorted([*RUNS.glob("cloze-*.toml"), *(RUNS / "pending").glob("cloze-*.toml")])


def test_there_are_cloze_runs():
    assert {p.stem for p in CONFIGS} >= {"cloze-arc-easy", "cloze-piqa", "cloze-formats"}


def test_every_cloze_run_covers_both_offline_models():
    """A run too long for one sitting is split by model (cloze-formats, -gemma): together
    the configs of a run still score both models."""
    runs: dict[str, list[str]] = {}
    for path in CONFIGS:
        runs.setdefault(path.stem.removesuffix("-gemma"), []).extend(load_config(path).models)
    for name, models in runs.items():
        assert sorted(models) == ["gemma3-270m", "smollm2-135m-instruct"], name


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_a_cloze_config_is_a_valid_cloze_run(path):
    cfg = load_config(path)
    cfg.check()
    assert cfg.answer == "cloze" and cfg.cloze_norm == "sum"
    assert set(cfg.models) <= {"smollm2-135m-instruct", "gemma3-270m"}
    assert str(cfg.store) == f"runs/shipped/{path.stem}.zarr"
