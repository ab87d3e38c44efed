"""Notebook 14 runs its own cells on the shipped format-space runs: by default it opens the
cloze oracle ``data/runs/cloze-formats.nc``, prints ``accuracy_spread``'s line and verdict
for it, and replays the budgeted search on it with each seed's reported spread (the
full-data accuracy of the returned best minus that of the returned worst)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support import ROOT, run_notebook_cells

NOTEBOOK = "14_format_space"
RUNS = ROOT / "data" / "runs"
#: the cells that import, open the runs and print the oracle's spread
OPEN = ("from psens.formats.analysis import (", "ORACLE_RUN = ")


def _opened(run: str = "") -> dict:
    return run_notebook_cells(NOTEBOOK, {"PSENS_RUN": run, "PSENS_SIZE": "tiny"}, *OPEN)


def test_it_opens_the_cloze_oracle_and_prints_accuracy_spreads_verdict(capsys):
    import psens
    from psens.formats.analysis import accuracy_spread, spread_line

    scope = _opened()
    assert scope["ORACLE_RUN"] == RUNS / "cloze-formats.nc"
    assert scope["LETTER_RUN"] == RUNS / "formats-acc.nc"
    assert scope["RUN"] == RUNS / "formats.nc"
    n = scope["N_BOOT"]
    want = accuracy_spread(psens.open_run(RUNS / "cloze-formats.nc"), n_boot=n, n_perm=n)
    got = scope["spread"]
    assert (got["run"] == "cloze-formats.nc").all() and (got["answers"] == "cloze").all()
    assert got.drop(columns=["run", "answers"]).equals(want)
    out = capsys.readouterr().out
    assert "cloze-formats.nc: cloze answers" in out and "570 arc-easy items x 16 formats" in out
    for _, row in want.iterrows():
        assert spread_line(row) in out
        assert not row["within_noise"]  # the shipped oracle's formats differ measurably
        assert f"    verdict: {scope['verdict'](row)}" in out
    assert "verdict: the formats differ measurably" in out
    assert "verdict: the formats tie" not in out


def test_psens_run_replaces_the_oracle(capsys):
    """``PSENS_RUN`` names the oracle (and the run of sections 4–5); the verdict follows the
    run: the letter run's formats tie."""
    path = RUNS / "formats-acc.nc"
    scope = _opened(str(path))
    assert scope["ORACLE_RUN"] == path and scope["RUN"] == path
    assert scope["spread"]["within_noise"].all()
    out = capsys.readouterr().out
    assert "formats-acc.nc: letter answers" in out
    assert out.count("verdict: the formats tie") == 2
    assert "verdict: the formats differ measurably" not in out


def test_each_seeds_reported_spread_is_the_full_data_accuracy_gap(capsys):
    """Section 3 on the cloze oracle, one seed: the reported spread is the full-data accuracy
    of the format each search returns as best minus that of the one it returns as worst, and
    the printed count of seeds meeting the share is ``hit_rates``'."""
    from psens.formats.analysis import correctness
    from psens.formats.search import paired_search, thompson_search

    scope = _opened()
    scope["SEEDS"] = 1
    run_notebook_cells(NOTEBOOK, scope, "search_rows, seed_rows = replay(ORACLE_RUN, oracle)")
    out = capsys.readouterr().out
    ((model, x),) = correctness(scope["oracle"]).items()
    acc = x.mean(axis=0)
    true = acc.max() - acc.min()
    seeds = scope["per_seed"]
    assert len(seeds) == 2
    for name, search in (("paired", paired_search), ("Thompson", thompson_search)):
        r = search(x, int(np.floor(0.3 * x.size)), seed=0)
        row = seeds[seeds["search"] == name].iloc[0]
        assert (row["run"], row["model"], row["seed"]) == ("cloze-formats.nc", model, 0)
        assert row["reported spread"] == pytest.approx(acc[r.best] - acc[r.worst])
        assert row["true spread"] == pytest.approx(true)
        assert row["share"] == pytest.approx((acc[r.best] - acc[r.worst]) / true)
        assert row["meets target"] == (row["share"] >= 0.9 - 1e-12)
        assert (
            f"cloze-formats.nc, {model}, {name} search: reported spread ≥ 90 % of the true "
            f"spread ({true:.3f}) in {int(row['meets target'])} of 1 seeds" in out
        )
    assert out.count("the target is judged over 10 seeds (PSENS_SIZE=full)") == 2
