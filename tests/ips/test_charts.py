"""psens.ips.factors.charts and the fig. 9 / fig. 10 charts of psens.ips.charts: every chart
builds from its tables, never displays."""

from __future__ import annotations

import pytest

alt = pytest.importorskip("altair")

import psens.factors as F  # noqa: E402
from psens.ips import charts as ips_charts  # noqa: E402
from psens.ips import tables  # noqa: E402
from psens.ips.factors import charts as plots  # noqa: E402


@pytest.fixture(scope="module")
def run():
    return F.paper_run(n_samples=6, shots=(0, 1))


@pytest.fixture(scope="module")
def results(run):
    kw = {"n_boot": 30, "n_perm": 30}
    return {
        "instruct_vs_base": F.instruct_vs_base(run, **kw),
        "scale": F.scale_series(run, **kw),
        "dense_vs_moe": F.dense_vs_moe(run, **kw),
        "matched_active": F.matched_active(run, **kw),
        "few_shot": F.few_shot(run, **kw),
        "custom": F.compare_models(run, [("qwen3-4b-instruct", "qwen3-4b")], **kw),
    }


def _values(chart) -> list[dict]:
    spec = chart.to_dict()
    data = spec.get("datasets", {})
    return next(iter(data.values())) if data else spec["data"]["values"]


def _all_values(chart) -> list[dict]:
    return [row for rows in chart.to_dict()["datasets"].values() for row in rows]


@pytest.fixture(scope="module")
def per_sample(run):
    return tables.per_sample_ips(run), tables.model_meta(run)


CHARTS = (alt.Chart, alt.LayerChart, alt.FacetChart)


@pytest.mark.parametrize(
    "factor", ["instruct_vs_base", "scale", "dense_vs_moe", "matched_active", "few_shot", "custom"]
)
def test_factor_charts(results, factor):
    chart = results[factor].chart()
    assert isinstance(chart, CHARTS)
    assert _values(chart)


def test_order_ips_chart_has_the_bands_and_cis(per_sample):
    table = tables.order_ips_table(*per_sample, n_boot=30)
    rows = _values(ips_charts.order_ips_chart(table))
    assert {row["order"] for row in rows} == {"low", "mid", "high"}
    assert all(r["ips_lo"] <= r["ips"] <= r["ips_hi"] for r in rows if r["n_used"] > 1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"by": "kind", "a": ["chat", "instruct"], "b": ["base"], "match": "series+params"},
        {"by": "arch", "a": ["dense"], "b": ["moe"], "match": "family"},
        {"by": "shot", "a": [1], "b": [0]},
    ],
)
def test_factor_chart_draws_both_tables(per_sample, kwargs):
    groups, delta = tables.factor_table(*per_sample, **kwargs, n_boot=30)
    chart = ips_charts.factor_chart(groups, delta)
    assert isinstance(chart, alt.HConcatChart)
    rows = _all_values(chart)
    assert {r["order"] for r in rows if "rel_change" in r} == {"all", "low", "mid", "high"}
    assert {r["group"] for r in rows if "group" in r} == set(groups["group"])


def test_instruct_chart_has_both_roles(results):
    rows = _values(results["instruct_vs_base"].chart())
    assert {r["role"] for r in rows} == {"Base models", "Instruct / Chat models"}
    n_pairs = (results["instruct_vs_base"].pairs["order"] == "all").sum()
    assert len(rows) == 2 * n_pairs


def test_delta_chart_shows_the_table(per_sample):
    groups, delta = tables.factor_table(*per_sample, by="shot", a=[1], b=[0], n_boot=30)
    rows = _all_values(ips_charts.factor_chart(groups, delta))
    want = delta.loc[delta.order == "low", "rel_change"].iloc[0]
    got = next(x["rel_change"] for x in rows if x.get("order") == "low" and "rel_change" in x)
    assert got == pytest.approx(want)


def test_other_charts(run):
    scores = F.ips_by_threshold(run, [0.05, 0.1, 0.15])
    assert len(_values(plots.threshold_chart(scores))) == len(scores)
    heat = plots.threshold_heatmap(F.threshold_table(scores, taus=None))
    assert len(_values(heat)) == len(scores)
    table = F.ips_vs_consistency(run, n_boot=20)
    assert isinstance(plots.consistency_chart(table), CHARTS)
    pert = F.ips_by_perturbation(run, n_boot=20, n_perm=20)
    rows = _values(plots.perturbation_chart(pert))
    assert {r["kind"] for r in rows} == {"altering tokens", "adding tokens"}
    rep = F.representation_table(run, n_boot=20, n_perm=20)
    rows = _values(plots.representation_chart(rep))
    assert len(rows) == 6 * len(rep)


def test_chart_input_errors(results):
    with pytest.raises(ValueError, match="lacks columns"):
        plots.threshold_chart(results["scale"].pairs)
    with pytest.raises(ValueError, match="order"):
        plots.pair_bars(results["custom"], order="nope")


def _legend_labels(chart) -> list[str]:
    """The legend entries of ``chart`` as drawn (rendered to SVG by vl-convert)."""
    import re

    vlc = pytest.importorskip("vl_convert")
    svg = vlc.vegalite_to_svg(chart.to_dict())
    return re.findall(r'role-legend-label"[^>]*><text[^>]*>([^<]*)</text>', svg)


def test_consistency_charts_have_no_undefined_legend_entry(run):
    """The fitted line has no colour field: it must not add an "undefined" entry; a model
    without metadata shows as "unknown", not "null"."""
    table = F.ips_vs_consistency(run, n_boot=20)
    labels = _legend_labels(plots.consistency_chart(table))
    assert labels and set(table["family"]) <= set(labels)
    assert not {"undefined", "null", "NaN", ""} & set(labels)
    table.loc[table.index[0], "family"] = None
    assert "unknown" in _legend_labels(plots.consistency_chart(table))

    per = tables.per_sample_ips(run, 0.1)
    orders = tables.order_ips_table(per.isel(shot=0), tables.model_meta(run))
    rows = orders[orders["order"] == "all"][["model", "ips", "kind"]].reset_index(drop=True)
    rows["output_consistency"] = tables.output_consistency(run, shot=0).loc[rows["model"]].values
    rows.loc[0, "kind"] = float("nan")
    labels = _legend_labels(ips_charts.ips_consistency_chart(rows))
    assert "unknown" in labels and not {"undefined", "null", "NaN", ""} & set(labels)


def _title(chart) -> str:
    title = chart.to_dict().get("title") or ""
    return title if isinstance(title, str) else str(title.get("text", ""))


def _every_chart(run) -> dict[str, object]:
    """Every chart of the IPS analyses (functions and widgets) drawn from ``run``."""
    import psens.widgets as pw

    kw = {"n_boot": 20, "n_perm": 20}
    per_sample, meta = tables.per_sample_ips(run), tables.model_meta(run)
    groups, delta = tables.factor_table(
        per_sample, meta, by="kind", a=["instruct", "chat"], b=["base"], n_boot=20
    )
    scores = F.ips_by_threshold(run, n_boot=20)
    charts = {
        "order_ips": ips_charts.order_ips_chart(tables.order_ips_table(per_sample, meta)),
        "factor": ips_charts.factor_chart(groups, delta),
        "threshold": plots.threshold_chart(scores),
        "heatmap": plots.threshold_heatmap(F.threshold_table(scores)),
        "consistency": plots.consistency_chart(F.ips_vs_consistency(run, n_boot=20)),
        "perturbation": plots.perturbation_chart(F.ips_by_perturbation(run, **kw)),
        "representation": plots.representation_chart(F.representation_table(run, **kw)),
        "few_shot": F.few_shot(run, **kw).chart(),
        "instruct_vs_base": F.instruct_vs_base(run, **kw).chart(),
    }
    for widget in (pw.OrderIPS, pw.InteractionClasses, pw.CaseStudy, pw.Sparsity):
        w = widget(run)
        charts[widget.__name__] = w.jchart.chart
        charts[f"{widget.__name__}.chart()"] = w.chart()
    return charts


def test_charts_of_a_synthetic_run_say_synthetic_in_their_title(run):
    assert run.attrs["synthetic"]
    for name, chart in _every_chart(run).items():
        assert "synthetic" in _title(chart), name


def test_charts_of_a_real_run_do_not(run):
    real = run.copy()
    real.attrs = {k: v for k, v in run.attrs.items() if k != "synthetic"}
    for name, chart in _every_chart(real).items():
        assert "synthetic" not in _title(chart), name


def test_label_synthetic_keeps_titles_and_labels_once():
    import pandas as pd

    from psens._charts import SYNTHETIC_NOTE, label_synthetic

    table = pd.DataFrame({"x": [1.0]})
    table.attrs["synthetic"] = True
    bare = alt.Chart(table).mark_bar().encode(x="x:Q")
    assert _title(label_synthetic(bare, table)) == SYNTHETIC_NOTE
    titled = label_synthetic(label_synthetic(bare.properties(title="IPS"), table), table)
    assert _title(titled) == f"IPS ({SYNTHETIC_NOTE})"
    sub = alt.TitleParams(text="case", subtitle=["T: A", "T-hat: B"])
    params = label_synthetic(bare.properties(title=sub), table).to_dict()["title"]
    assert params["text"] == f"case ({SYNTHETIC_NOTE})"
    assert params["subtitle"] == ["T: A", "T-hat: B"]
    assert _title(label_synthetic(bare, pd.DataFrame())) == ""
