"""psens.ips.factors.charts: every chart builds from the factor tables, never displays."""

from __future__ import annotations

import pytest

alt = pytest.importorskip("altair")

import psens.factors as F  # noqa: E402
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


CHARTS = (alt.Chart, alt.LayerChart, alt.FacetChart)


@pytest.mark.parametrize(
    "factor", ["instruct_vs_base", "scale", "dense_vs_moe", "matched_active", "few_shot", "custom"]
)
def test_factor_charts(results, factor):
    r = results[factor]
    for chart in (r.chart(), r.delta_chart(), plots.delta_orders_chart(r, per_pair=True)):
        assert isinstance(chart, CHARTS)
        assert _values(chart)
    rows = _values(plots.order_ips_chart(r.models))
    assert {row["order"] for row in rows} == {"low", "mid", "high"}


def test_instruct_chart_has_both_roles(results):
    rows = _values(results["instruct_vs_base"].chart())
    assert {r["role"] for r in rows} == {"Base models", "Instruct / Chat models"}
    n_pairs = (results["instruct_vs_base"].pairs["order"] == "all").sum()
    assert len(rows) == 2 * n_pairs


def test_delta_chart_is_in_percent(results):
    r = results["few_shot"]
    rows = _values(r.delta_chart())
    want = r.summary[r.summary.order == "low"]["rel_change"].iloc[0] * 100
    got = next(x["rel_change"] for x in rows if x["order"] == "low")
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
