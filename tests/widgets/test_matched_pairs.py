"""Paired verdicts only from matched pairs: one rule (``matched_pairs``) behind the factor
functions, the FactorCompare widget and notebook 04's verdict code."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import psens
import psens.ips.factors as F
import psens.widgets as pw
from psens.synthetic import synthetic_run
from tests.support import ROOT, run_notebook_cells

ARC = ROOT / "data" / "runs" / "arc.nc"


def _notebook_04_factors(ds) -> dict:
    """Run notebook 04's factor-selection cell on ``ds``: the comparisons it gives."""
    text = (ROOT / "notebooks" / "04_orders.py").read_text()
    cell = re.search(r"^FACTORS = \{.*?^print\(\"comparisons this run supports", text, re.S | re.M)
    assert cell, "notebook 04 has no FACTORS cell"
    from psens.ips.headline import headlines

    scope = {"pw": pw, "ds": ds, "heads": headlines(ds, n_boot=200)}
    exec(cell.group(0) + ': ", list(compare))', scope)
    return scope["compare"]


@pytest.fixture(scope="module")
def arc():
    return psens.open_run(ARC).load()


def test_the_shipped_run_has_no_matched_instruct_pair(arc):
    # SmolLM2-135M-Instruct and Gemma-3-270M (base): two families, two sizes
    with pytest.raises(ValueError, match="no instruct/chat model with its base model"):
        F.matched_pairs(arc, "instruct_vs_base")
    with pytest.raises(ValueError, match="no instruct/chat model with its base model"):
        F.instruct_vs_base(arc, n_boot=20, n_perm=20)
    w = pw.FactorCompare(arc, by="kind", match="series+params")
    assert "no instruct/chat model with its base model" in w.refusal()
    assert "No verdict: instruct_vs_base: the run has no" in w.status.value
    assert np.isnan(w.tables["delta"]["rel_change"]).all()
    w.match = "none"  # group means of two unrelated models: still no ΔIPS
    assert "No verdict" in w.status.value


def test_notebook_04_gives_no_instruct_verdict_on_the_shipped_run(arc, capsys):
    compare = _notebook_04_factors(arc)
    assert "instruct vs base" not in compare
    assert "few-shot vs 0-shot" in compare  # each model with itself: a matched comparison
    out = capsys.readouterr().out
    # no model is a finding: the run stays whole, and its two models are no matched pair
    assert "no model of this run is a finding" in out
    assert "instruct vs base: not on this run — " in out


def test_a_matched_pair_gets_a_verdict():
    ds = synthetic_run(n_samples=4)  # toy-7b-instruct and its base toy-7b
    pairs, source = F.matched_pairs(ds, "instruct_vs_base")
    assert [p[:2] for p in pairs] == [("toy-7b-instruct", "toy-7b")] and "metadata" in source
    compare = _notebook_04_factors(ds)
    assert "instruct vs base" in compare
    w = compare["instruct vs base"]
    assert w.refusal() is None and np.isfinite(w.tables["delta"]["rel_change"]).all()
    assert "ΔIPS (A vs B)" in w.status.value


def test_matched_pairs_refuses_unknown_factors_and_unmatched_scale(arc):
    with pytest.raises(ValueError, match="factor='size' is unknown"):
        F.matched_pairs(arc, "size")
    with pytest.raises(ValueError, match="no series with two models of different size"):
        F.matched_pairs(arc, "scale")
    with pytest.raises(ValueError, match="no family has both a dense and a MoE model"):
        F.matched_pairs(arc, "dense_vs_moe")


def test_models_that_are_not_findings_are_left_out_of_factor_verdicts(arc, capsys):
    head = arc.psens.headline(n_boot=200)
    head["caveats"] = head["caveats"].where(head["model"] != "smollm2-135m-instruct", "")
    fds, note = pw.findings_run(arc, head)  # as if SmolLM2 were a finding at 0 shots
    assert list(fds["model"].values) == ["smollm2-135m-instruct"]
    assert note.startswith("gemma3-270m: not a finding (not above the noise floor")
    assert "left out of every factor verdict" in note
    # notebook 05: what the findings run lacks counts the models that are findings
    why = pw.lacks(fds, "a correlation across models", models=3)
    assert why.startswith("this run has 1 model that is a finding (gemma3-270m not);")
    assert pw.lacks(arc, "a correlation across models", models=3).startswith(
        "this run has 2 models;"
    )


def test_the_shipped_run_has_no_finding_so_no_factor_verdict(arc, capsys):
    fds, note = pw.findings_run(arc)  # every shot setting: SmolLM2 copies the examples' C
    assert fds.sizes["model"] == 2 and fds.attrs[pw.NOT_FINDINGS] == note
    assert "no model of this run is a finding" in note
    assert "answer follows the few-shot examples (C)" in note
    assert "gemma3-270m: not a finding (0-shot: not above the noise floor" in note
    assert "this run cannot test the claim" in pw.verdict("few-shot: -10 %", True, fds)
    assert "the paper's claim holds here" in pw.verdict("few-shot: -10 %", True, arc)
    compare = _notebook_04_factors(arc)  # notebook 04 shows the comparison, gives no verdict
    assert "few-shot vs 0-shot" in compare
    assert "no model of this run is a finding" in capsys.readouterr().out


def test_a_real_runs_caveats_are_shown_in_full(arc):
    """Notebook 03's table of the headline: pandas cuts text at 50 characters, the caveats
    are longer; the table shows them whole."""
    head = arc.psens.headline(n_boot=200)
    table = head[head["order"] == "all"][["model", "ips", "caveats"]].reset_index(drop=True)
    longest = max(table["caveats"], key=len)
    assert len(longest) > pd.get_option("display.max_colwidth")
    assert longest not in table._repr_html_()  # what a bare DataFrame shows: cut
    assert longest in pw.show(table, arc)._repr_html_()  # what the notebook shows: whole
    as_str = table.astype({"caveats": "str"})  # pandas 3's text dtype is not object
    assert longest in pw.show(as_str, arc)._repr_html_()
    short = table[["model", "ips"]]
    assert pw.show(short, arc) is short


def test_notebook_05s_few_shot_verdict_on_the_shipped_run(capsys):
    """Notebook 05's few-shot cells on the shipped run: per model (not averaged over the
    two), the figures data/runs/README.md quotes for SmolLM2, the confound named, and no
    verdict — no model is a finding."""
    scope = run_notebook_cells(
        "05_factors",
        {"PSENS_RUN": str(ARC), "PSENS_SIZE": ""},
        "ds = F.attach_metadata(",
        "heads = headlines(ds)",
        "fds, note = pw.findings_run(ds, heads)",
        "claim = attempt(",
    )
    out = capsys.readouterr().out
    verdict = [ln for ln in out.splitlines() if ln.startswith("This run: few-shot ΔIPS")]
    assert len(verdict) == 1, out
    line = verdict[0]
    assert line.endswith("this run cannot test the claim.")
    assert "for smollm2-135m-instruct, gemma3-270m" in line  # the models it covers
    assert "one model at a time, templates ips1, ips4, its items pooled" in line
    assert "smollm2-135m-instruct: the answer follows the few-shot examples" in line
    assert "the change of the letter it copies" in line
    who = "  smollm2-135m-instruct: "
    smol = [ln for ln in out.splitlines() if ln.startswith((f"{who}1-shot", f"{who}3-shot"))]
    assert "1-shot −7.3 % (−10.9 … −3.9 %, p = 0.014)" in smol[0]
    assert "3-shot −7.1 % (−12.1 … −2.3 %, p = 0.016)" in smol[1]
    assert "answer follows the few-shot examples: C on 98 % at 1 shot" in smol[0]
    assert all("cannot test" in ln for ln in smol)
    assert "−18.2" not in out and "-18.2" not in out  # no average over the two models
    readme = " ".join((ROOT / "data" / "runs" / "README.md").read_text().split())
    for row in scope["claim"][scope["claim"]["model"] == "smollm2-135m-instruct"].itertuples():
        assert row.measured.split("),")[0] + ")" in readme
