"""The headline (``ds.psens.headline()``): literal references for accuracy, chance, the
majority answer and the caveats; the shipped runs' figures as every surface prints them."""

from __future__ import annotations

import re

import numpy as np
import pytest

import psens
from psens.ips.headline import NOT_ABOVE_FLOOR, chance_level, headline, headline_lines
from tests.support import ROOT

ARC = ROOT / "data" / "runs" / "arc.nc"
MMLU = ROOT / "data" / "runs" / "mmlu.nc"


@pytest.fixture(scope="module")
def arc():
    return psens.open_run(ARC).load()


@pytest.fixture(scope="module")
def arc_head(arc):
    return headline(arc)


def _fmt(x, digits):
    return f"{x:.{digits}f}"


def test_headline_matches_literal_references(arc, arc_head):
    from psens.ips import sample_ips

    x = arc.isel(shot=0)
    per = sample_ips(arc, 0.1, orders=("all", "low", "mid", "high")).isel(shot=0)
    for m, name in enumerate(arc.model.values):
        rows = arc_head[arc_head.model == str(name)].set_index("order")
        # IPS: the mean over items of per-item IPS
        for order in ("all", "low", "mid", "high"):
            ref = float(np.nanmean(per.isel(model=m).sel(order=order).values))
            assert rows.loc[order, "ips"] == pytest.approx(ref, abs=1e-12)
        # accuracy, majority answer: counted by hand over (item, template)
        pred = [str(p).strip() for p in x.prediction.isel(model=m).values.ravel()]
        top = max(set(pred), key=pred.count)
        assert rows.loc["all", "majority_answer"] == top
        assert rows.loc["all", "majority_share"] == pytest.approx(pred.count(top) / len(pred))
        acc = float(np.mean(x.correct.isel(model=m).values))
        assert rows.loc["all", "accuracy"] == pytest.approx(acc)
        # output consistency: the same answer under every template
        p = x.prediction.isel(model=m).values
        assert rows.loc["all", "output_consistency"] == pytest.approx(
            np.mean([len(set(r)) == 1 for r in p])
        )
    assert chance_level(arc) == pytest.approx(0.25)  # four options per shipped ARC item


def test_headline_states_what_it_pools(arc_head):
    pools = "0-shot, 5 templates (10 pairs), 8 items of arc-challenge validation"
    assert arc_head.attrs["pools"] == pools
    assert arc_head.attrs["pooled"]["shot"] == 0 and arc_head.attrs["tau"] == 0.1
    assert set(arc_head["order"]) == {"all", "low", "mid", "high"}


def test_caveats_flag_the_shipped_models(arc_head):
    cav = arc_head.groupby("model")["caveats"].first()
    assert NOT_ABOVE_FLOOR in cav["gemma3-270m"]
    assert NOT_ABOVE_FLOOR not in cav["smollm2-135m-instruct"]
    assert "majority answer A on 95 %" in cav["smollm2-135m-instruct"]
    assert "accuracy at or below chance" in cav["smollm2-135m-instruct"]
    gemma = arc_head[(arc_head.model == "gemma3-270m") & (arc_head.order == "all")].iloc[0]
    assert gemma["diff_lo"] <= 0 and not gemma["above_floor"]


def test_caveats_follow_the_thresholds(arc):
    """A model answering the right letter everywhere: no chance caveat, a majority one;
    one far above its floor: no floor caveat."""
    x = arc.copy(deep=True)
    target = np.array([str(t).strip() for t in x.target.values])
    pred = np.broadcast_to(target[None, :, None, None], x.prediction.shape).copy()
    x["prediction"] = (x.prediction.dims, pred.astype(object))
    x["correct"] = x.correct * 0 + 1.0
    x["floor"] = x.floor * 0.0
    cav = headline(x, n_boot=200).groupby("model")["caveats"].first()
    for c in cav:
        assert "chance" not in c and NOT_ABOVE_FLOOR not in c
        assert "majority answer" not in c  # the targets: D on 4 of 8 items, 50 %
    x["prediction"] = x.prediction.where(False, "B")
    assert all("majority answer B on 100 %" in c for c in headline(x, n_boot=200)["caveats"])


def test_a_bad_shot_is_refused(arc):
    with pytest.raises(ValueError, match=r"shot = 2 is not in the run.*Use one of \[0, 1, 3\]"):
        headline(arc, shot=2)


def test_summary_and_report_print_the_headline(arc, arc_head, tmp_path):
    from psens.report import write_report
    from psens.runner import summarize

    lines = headline_lines(arc_head)
    text = summarize(arc)
    for line in lines:
        assert line in text
    html = write_report(arc, tmp_path / "r.html").read_text()
    assert "not above the noise floor" in html and "majority answer A on 95 %" in html
    assert arc_head.attrs["pools"] in html


def test_cli_summary_names_pools_and_caveats(capsys):
    from psens.cli import main

    assert main(["summary", str(ARC)]) == 0
    out = capsys.readouterr().out
    assert "0-shot, 5 templates (10 pairs), 8 items" in out
    assert "gemma3-270m" in out and NOT_ABOVE_FLOOR in out and "majority answer A on 95 %" in out


def test_the_notebooks_print_the_headline():
    for name in ("00_start_here", "03_ips_across_models", "04_orders", "05_factors"):
        text = (ROOT / "notebooks" / f"{name}.py").read_text()
        assert "ds.psens.headline()" in text or "headlines(ds)" in text, name
        assert "headline_lines(head" in text, name


def _readme_figures():
    """The README sentence that quotes the shipped runs' headline, as numbers."""
    text = (ROOT / "README.md").read_text()
    found = re.findall(r"<!-- headline ([\w-]+) -->(.*?)<!-- /headline -->", text, flags=re.S)
    assert found, "the README quotes no headline"
    return found


@pytest.mark.parametrize("run", ["arc", "mmlu", "cloze-arc-easy"])
def test_readme_headline_figures_are_the_runs(run):
    """Every number of the README's headline sentence of a run is that run's headline,
    as ``headline`` computes it now (fails when either drifts)."""
    quoted = dict(_readme_figures())
    assert run in quoted, f"the README has no headline of {run}"
    head = headline(psens.open_run(ROOT / "data" / "runs" / f"{run}.nc"))
    sentence = " ".join(quoted[run].split())
    assert head.attrs["pools"] in sentence
    for model, rows in head.groupby("model"):
        r = rows.set_index("order")
        bands = "/".join(_fmt(r.loc[o, "ips"], 2) for o in ("low", "mid", "high"))
        assert f"IPS {_fmt(r.loc['all', 'ips'], 2)}" in sentence, (model, sentence)
        assert bands in sentence, (model, bands, sentence)
        for caveat in filter(None, r.loc["all", "caveats"].split("; ")):
            assert caveat in sentence, (model, caveat)


def test_the_runs_readme_few_shot_figures_are_the_shipped_runs():
    """data/runs/README.md quotes SmolLM2's few-shot change as confounded, with the figures
    psens.ips.factors.few_shot gives and the letters answer_confound finds."""
    import psens.ips.factors as F
    from psens.ips.verdicts import answer_confound

    ds = psens.open_run(ROOT / "data" / "runs" / "arc.nc").load()
    s = F.few_shot(ds, models=["smollm2-135m-instruct"]).summary
    s = s[s.order == "all"].set_index("group")
    text = " ".join((ROOT / "data" / "runs" / "README.md").read_text().split())

    def pct(x: float) -> str:
        return f"{100 * x:.1f}".replace("-", "−")

    for k in ("1-shot", "3-shot"):
        r = s.loc[k]
        quoted = (
            f"{k} {pct(r.rel_change)} % ({pct(r.rel_lo)} … {pct(r.rel_hi)} %, p = {r.p_value:.3f})"
        )
        assert quoted in text, quoted
    conf = answer_confound(ds).set_index(["model", "shot"]).loc["smollm2-135m-instruct"]
    shares = ", ".join(
        f"{r.majority_answer} on {100 * r.majority_share:.0f} % at {k} shot{'s' if k != 1 else ''}"
        for k, r in conf.iterrows()
    )
    assert shares in text, shares
    assert "is therefore the change of the letter it copies, not a finding" in text


def test_the_runs_readme_table_by_shot_is_the_headline():
    """Every row of data/runs/README.md's per-shot table is headline(shot=k) and its verdict."""
    from psens.ips.verdicts import findings

    ds = psens.open_run(ROOT / "data" / "runs" / "arc.nc").load()
    text = (ROOT / "data" / "runs" / "README.md").read_text()
    block = text.split("<!-- arc by shot -->")[1].split("<!-- /arc by shot -->")[0]
    rows = [ln for ln in block.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    want = []

    def f(x: float) -> str:
        return f"{x:+.3f}".replace("-", "−")

    for k in (0, 1, 3):
        h = headline(ds, shot=k)
        why = findings(h)
        for model, g in h.groupby("model", sort=False):
            r = g.set_index("order")
            a = r.loc["all"]
            verdict = f"not a finding: {why[model]}" if why[model] else "a finding"
            want.append(
                f"| {model} | {k} | {a.ips:.3f} | {r.loc['low', 'ips']:.3f} | "
                f"{r.loc['mid', 'ips']:.3f} | {r.loc['high', 'ips']:.3f} | {a.floor:.3f} | "
                f"{f(a['diff'])} [{f(a.diff_lo)}, {f(a.diff_hi)}] | {a.accuracy:.2f} | {verdict} |"
            )
    assert rows == want


def test_chance_level_of_a_cloze_run_counts_the_scored_options():
    """A cloze prompt lists no options: chance is the mean of 1/k over the items' scored
    options (padding labels are empty)."""
    import xarray as xr

    labels = np.array([["A", "B", "C", "D"], ["A", "B", "C", ""], ["1", "2", "", ""]], object)
    ds = xr.Dataset(
        coords={"option_label": (("sample", "option"), labels), "sample": ["a", "b", "c"]}
    )
    assert chance_level(ds) == pytest.approx(np.mean([1 / 4, 1 / 3, 1 / 2]))


def test_above_the_floor_needs_the_ci_and_the_paired_test(arc):
    """A CI of IPS − floor above 0 is not enough when the sign-flip p is 0.05 or more
    (three items: p ≥ 2/8 whatever the margins)."""
    from psens.ips.headline import FLOOR_ALPHA

    head = headline(arc.isel(sample=slice(0, 3)), shot=0)
    smol = head[head["model"] == "smollm2-135m-instruct"]
    assert (smol["diff_lo"] > 0).all() and (smol["p_value"] > 0.2).all()  # CI alone: above
    assert not head["above_floor"].any()
    full = headline(arc, shot=0)
    expect = (full["diff_lo"] > 0) & (full["p_value"] < FLOOR_ALPHA)
    assert (full["above_floor"] == expect).all()


def test_the_runs_readme_cloze_figures_are_the_shipped_run():
    """data/runs/README.md's cloze section quotes each model's IPS, floor, IPS − floor with
    its CI, p and accuracy as headline computes them from cloze-arc-easy.nc."""
    ds = psens.open_run(ROOT / "data" / "runs" / "cloze-arc-easy.nc")
    head = headline(ds)
    text = " ".join((ROOT / "data" / "runs" / "README.md").read_text().split())
    for model, rows in head.groupby("model"):
        r = rows.set_index("order").loc["all"]
        quoted = (
            f"IPS {r['ips']:.3f}, floor {r['floor']:.3f}, IPS − floor {r['diff']:.3f} "
            f"[{r['diff_lo']:.3f}, {r['diff_hi']:.3f}], p = {r['p_value']:.2g}"
        )
        assert quoted in text, (model, quoted)
        assert f"{r['accuracy']:.2f}" in text
        assert bool(r["above_floor"])
