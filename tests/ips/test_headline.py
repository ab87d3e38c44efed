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


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def _readme_figures():
    """The README sentence that quotes the shipped runs' headline, as numbers."""
    text = _readme()
    found = re.findall(r"<!-- headline ([\w-]+) -->(.*?)<!-- /headline -->", text, flags=re.S)
    assert found, "the README quotes no headline"
    return found


@pytest.mark.parametrize("run", ["arc", "mmlu", "cloze-arc-easy", "cloze-piqa"])
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


def _model_parts(sentence: str, head) -> dict[str, str]:
    """The README's headline sentence of a run cut per model: after what it pools, one part
    per model in the headline's order, "; " between them, each naming its model."""
    models = list(dict.fromkeys(head["model"]))
    parts = sentence.split(head.attrs["pools"], 1)[1].split("; ")
    assert len(parts) == len(models), (models, parts)
    for model, part in zip(models, parts, strict=True):
        assert model.split("-")[0].rstrip("0123456789") in part.lower(), (model, part)
    return dict(zip(models, parts, strict=True))


@pytest.mark.parametrize("run", ["arc", "mmlu", "cloze-arc-easy", "cloze-piqa"])
def test_every_number_of_the_readme_headline_is_the_runs(run):
    """Each decimal and percentage the README's headline sentence gives a model is one of that
    model's headline figures (IPS and its bands to 2 decimals, accuracy to 2, the floor test's
    p as ``headline_lines`` prints it, a caveat's share), each quoted accuracy and p is the
    model's, and "above its noise floor" is said only of a model the headline puts above it."""
    quoted = dict(_readme_figures())
    head = headline(psens.open_run(ROOT / "data" / "runs" / f"{run}.nc"))
    parts = _model_parts(" ".join(quoted[run].split()), head)
    for model, part in parts.items():
        r = head[head["model"] == model].set_index("order")
        a = r.loc["all"]
        figures = {_fmt(r.loc[o, "ips"], 2) for o in ("all", "low", "mid", "high")}
        figures |= {_fmt(a["accuracy"], 2), f"{a['p_value']:.2g}"}
        figures |= set(re.findall(r"\d+(?:\.\d+)? %", a["caveats"]))
        numbers = re.findall(r"\d+\.\d+|\d+ %", part)
        assert set(numbers) <= figures, (model, part, figures)
        for acc in re.findall(r"accuracy (\d\.\d+)", part):
            assert acc == _fmt(a["accuracy"], 2), (model, part)
        for p in re.findall(r"p = (\d\.\d+)", part):
            assert p == f"{a['p_value']:.2g}", (model, part)
        said_above = "above its noise floor" in part and "not above" not in part
        assert not said_above or bool(a["above_floor"]), (model, part)
    after = _readme().split(f"<!-- headline {run} -->")[1].split("<!-- /headline -->")[1]
    after = " ".join(after.split("<!--")[0].split("\n\n")[0].split())  # to the paragraph's end
    assert set(re.findall(r"\d+\.\d+", after)) <= {f"{head['chance'].iloc[0]:.2f}"}, after


#: what a verdict sentence of the README or data/runs/README.md says: which models are findings
SAYS = {
    "neither model's sensitivity is a finding": "none",
    "both are findings": "all",
    "both IPS are **findings**": "all",
    "No model of this run is a finding": "none",
    "On the shipped run no model is": "none",
    "neither is a finding": "none",
}
#: each verdict sentence: the document, the run and the shot settings it speaks of
VERDICTS = [
    ("README.md", "neither model's sensitivity is a finding", "arc", [0]),
    ("README.md", "both are findings", "cloze-arc-easy", None),
    ("README.md", "neither is a finding", "cloze-piqa", None),
    ("README.md", "On the shipped run no model is", "arc", [0, 1, 3]),
    ("data/runs/README.md", "No model of this run is a finding", "arc", [0, 1, 3]),
    ("data/runs/README.md", "both IPS are **findings**", "cloze-arc-easy", None),
]


@pytest.mark.parametrize(("doc", "phrase", "run", "shots"), VERDICTS)
def test_each_verdict_the_readmes_state_is_the_verdict_functions(doc, phrase, run, shots):
    """ "Neither model is a finding" / "both are findings" in README.md and data/runs/README.md
    is what :func:`psens.ips.verdicts.findings_models` (the one rule) gives on the shipped run,
    at the shot settings the sentence speaks of; the README states a verdict after the
    headline of each run whose verdict it gives."""
    from psens.ips.verdicts import findings_models

    text = " ".join((ROOT / doc).read_text().split())
    assert phrase in text, (doc, phrase)
    ds = psens.open_run(ROOT / "data" / "runs" / f"{run}.nc")
    why = findings_models(ds, shots)
    are = sorted(m for m, reason in why.items() if not reason)
    assert are == ([] if SAYS[phrase] == "none" else sorted(why)), (phrase, why)
    if doc == "README.md" and phrase in SAYS and shots in (None, [0]):
        tail = text.split(f"<!-- headline {run} -->", 1)[1].split("<!-- /headline -->", 1)[1]
        assert phrase in tail.split("<!--", 1)[0], (run, phrase)


def test_what_the_readme_says_of_each_model_on_the_shipped_run():
    """ "SmolLM2 is above its floor but answers one letter (A at 0 shots, the examples' C with
    examples), Gemma is below it": the headline at each shot setting."""
    ds = psens.open_run(ROOT / "data" / "runs" / "arc.nc").load()
    text = " ".join((ROOT / "README.md").read_text().split())
    assert (
        "SmolLM2 is above its floor but answers one letter (A at 0 shots, the examples' C with "
        "examples), Gemma is below it" in text
    )
    for k in (0, 1, 3):
        r = headline(ds, shot=k).query("order == 'all'").set_index("model")
        assert bool(r.loc["smollm2-135m-instruct", "above_floor"])
        assert not bool(r.loc["gemma3-270m", "above_floor"])
        letter = "A" if k == 0 else "C"
        assert f"majority answer {letter} on" in r.loc["smollm2-135m-instruct", "caveats"], k


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
    acc = " and ".join(f"{a:.2f}" for a in head.query("order == 'all'")["accuracy"])
    assert f"(accuracy {acc} against {chance_level(ds):.2f})" in text
    # the accuracy spread over the templates, inside its noise (psens.formats.analysis)
    from psens.formats.analysis import accuracy_spread

    spread = accuracy_spread(ds, n_boot=500, n_perm=500)
    assert spread["within_noise"].all()
    spreads = " and ".join(f"{x:.2f}" for x in spread["spread"])
    assert f"The accuracy spread over the four templates ({spreads}) is inside its noise" in text
    assert ds.sizes["template"] == 4 and ds.sizes["sample"] == 40


@pytest.mark.parametrize(
    "prompt, k",
    [
        ("Q: 2+2?\nA. 3\nB. 4\nC. 5\nAnswer:", 3),
        ("OPTIONS -\n\na)Put\n\nb)Change\n\nc)Choose\n\nd)Record\n\nCORRECT ANSWER -", 4),
        ("Q?\n(A) x\n(B) y\nAnswer:", 2),
        ("Q?\n1: x\n2: y\n3: z\n4: w\n5: v\nAnswer:", 5),
        # a few-shot example's list first: the item's own list is the last one
        ("Q1?\nA. a\nB. b\nC. c\nD. d\nAnswer: C\n\nQ2?\nA. x\nB. y\nAnswer:", 2),
        ("Summarise the text.\nAnswer:", 0),
    ],
)
def test_the_listed_options_are_the_items_own_list(prompt, k):
    from psens.ips.headline import _listed_options

    assert _listed_options(prompt) == k


def test_chance_of_a_lettered_format_run_with_lowercase_labels_and_blank_lines():
    """formats-acc.nc lists options as ``a)`` … ``d)`` between blank lines: chance is the
    mean of 1/k over its ARC-Challenge items, not NaN."""
    ds = psens.open_run(ROOT / "data" / "runs" / "formats-acc.nc")
    assert 0.24 < chance_level(ds) < 0.26


def test_the_runs_readme_piqa_cloze_figures_are_the_shipped_run():
    """data/runs/README.md's PIQA cloze section: each model's IPS, floor, IPS − floor with its
    CI and p as headline computes them from cloze-piqa.nc, the accuracies against chance,
    the items with an IPS, the template spread, and "neither IPS is a finding" as the one
    verdict rule says."""
    from psens.formats.analysis import accuracy_spread
    from psens.ips.verdicts import findings

    ds = psens.open_run(ROOT / "data" / "runs" / "cloze-piqa.nc")
    head = headline(ds)
    text = " ".join((ROOT / "data" / "runs" / "README.md").read_text().split())
    text = text.replace("−", "-")
    for model, rows in head.groupby("model"):
        r = rows.set_index("order").loc["all"]
        ips_part = f"IPS {r['ips']:.3f}, floor {r['floor']:.3f}, IPS - floor {r['diff']:.3f}"
        assert f"{ips_part} [{r['diff_lo']:.3f}, {r['diff_hi']:.3f}]" in text, model
        assert not bool(r["above_floor"])
    smol = head.query("order == 'all' and model == 'smollm2-135m-instruct'").iloc[0]
    assert f"[{smol['diff_lo']:.3f}, {smol['diff_hi']:.3f}], p = {smol['p_value']:.2g}" in text
    assert smol["diff_lo"] > 0 and smol["p_value"] >= 0.05  # a CI above 0, the test not rejecting
    acc = " and ".join(f"{a:.2f}" for a in head.query("order == 'all'")["accuracy"])
    assert f"(accuracy {acc} against {chance_level(ds):.2f})" in text
    assert all(findings(head).values()) and "**neither IPS is a finding**" in text  # reasons
    n_ips = int(np.isfinite(psens.ips.ips(ds).sel(model="gemma3-270m")).sum())
    assert f"({n_ips} of the {ds.sizes['sample']} items" in text
    spread = accuracy_spread(ds, n_boot=500, n_perm=500)
    assert spread["within_noise"].all()
    spreads = " and ".join(f"{x:.2f}" for x in spread["spread"])
    assert f"(accuracy spread {spreads}, inside its noise)" in text
