"""Widgets on runs with several solvers (the solver dropdown) and with the noise floor."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

import psens.widgets as W
from psens.ips.floor import floor_test, noise_floor
from psens.ips.tables import model_meta, order_ips_table, per_sample_ips
from psens.synthetic import synthetic_run
from tests.support import two_solver_run


@pytest.fixture(scope="module")
def runs():
    return two_solver_run(n_samples=4)


def test_order_ips_table_puts_the_floor_next_to_ips():
    ds = synthetic_run(n_samples=5, n_vars=(4,), seed=2)
    per = per_sample_ips(ds)
    floor = noise_floor(ds, sigma=0.05)
    table = order_ips_table(per, model_meta(ds), floor=floor, n_boot=200)
    test = floor_test(per, floor, n_boot=200, n_perm=400).set_index(["model", "order"])
    row = table.query("order == 'low'").iloc[0]
    ref = test.loc[(row["model"], "low")]
    assert row["floor_kind"] == "jitter" and row["n_paired"] == ref["n"]
    for col in ("floor", "diff", "diff_lo", "diff_hi", "p_value", "effect_size"):
        assert row[col] == pytest.approx(ref[col]), col
    # the floor is the mean over samples of the floor averaged over templates
    m = list(ds["model"].values).index(row["model"])
    per_sample_floor = floor.isel(model=m).sel(order="low").mean("template").values
    assert row["floor"] == pytest.approx(np.nanmean(per_sample_floor))
    spec = W.charts.order_ips_chart(table).to_dict()
    assert any(layer.get("mark", {}).get("type") == "tick" for layer in spec["layer"])
    plain = order_ips_table(per, model_meta(ds), n_boot=200)
    assert "floor" not in plain.columns
    assert not any(
        layer.get("mark", {}).get("type") == "tick"
        for layer in W.charts.order_ips_chart(plain).to_dict()["layer"]
    )


def test_order_ips_shows_the_floor_labelled_by_kind():
    ds = synthetic_run(n_samples=4, n_vars=(4,), seed=3)
    w = W.OrderIPS(ds)
    assert w.floor  # a small run: the jitter floor is on by default
    assert "Noise floor (jitter" in w.status.value and "IPS − floor" in w.status.value
    assert "floor" in w.tables["ips"].columns
    w.floor = False
    assert "Noise floor off" in w.status.value and "floor" not in w.tables["ips"].columns
    measured = ds.assign(floor=noise_floor(ds, sigma=0.05).rename(order="band"))
    measured = measured.assign_coords(band=list(measured["band"].values))
    measured.attrs["noise_floor"] = "bfloat16"
    w = W.OrderIPS(measured)
    assert "Noise floor (measured: float32 vs bfloat16" in w.status.value
    with pytest.raises(ValueError, match="kind"):
        noise_floor(ds, kind="nope")


def test_ips_widgets_pick_a_solver(runs):
    ds, a, b = runs
    w = W.OrderIPS(ds, floor=False)
    assert w.solver == "exact" and "solver" in w.controls
    np.testing.assert_array_equal(w.per_sample().values, per_sample_ips(a).values)
    first = w.tables["ips"]["ips"].to_numpy()
    w.controls["solver"].value = "sgd"
    np.testing.assert_array_equal(w.per_sample().values, per_sample_ips(b).values)
    assert not np.allclose(w.tables["ips"]["ips"].to_numpy(), first)
    assert "solver sgd" in str(w.chart().to_dict())
    with pytest.raises(ValueError, match="Use one of"):
        w.solver = "canonical"
    assert "solver" not in W.OrderIPS(a, floor=False).controls  # one solver: no dropdown
    classes = W.InteractionClasses(ds, solver="sgd")
    again = W.InteractionClasses(b)
    assert classes.tables["classes"].equals(again.tables["classes"])
    model = str(ds["model"].values[0])
    case = W.CaseStudy(ds, model=model, solver="sgd")
    assert case.tables["case"].equals(W.CaseStudy(b, model=model).tables["case"])
    factor = W.FactorCompare(ds)
    assert factor.solver == "exact" and "solver" in factor.controls
    sparsity = W.Sparsity(ds, solver="sgd")
    assert sparsity.tables["curve"].equals(W.Sparsity(b).tables["curve"])


def test_notebook_12s_floor_test_is_the_headlines(capsys):
    """Notebook 12's floor cell on the shipped run: its measured-floor row is the headline's
    (the p and the verdict `psens summary` prints), under the headline's rule."""
    import psens
    from tests.support import ROOT, run_notebook_cells

    arc = ROOT / "data" / "runs" / "arc.nc"
    scope = run_notebook_cells(
        "12_solvers_and_noise",
        {"PSENS_RUN": str(arc), "PSENS_SIZE": ""},
        "ds = pw.load_run(",
        "head = headline(ds)",
    )
    head = psens.open_run(arc).psens.headline()  # 0 shots, psens summary's settings
    want = head[head["order"] == "all"].set_index("model")
    floors = scope["floors"]
    rows = floors[floors["noise"].str.startswith("measured") & (floors["order"] == "all")]
    got = rows.set_index("model")
    assert sorted(got.index) == sorted(want.index)
    for model, r in want.iterrows():
        assert got.loc[model, "p_value"] == r["p_value"]
        assert got.loc[model, "diff_lo"] == r["diff_lo"]
        assert bool(got.loc[model, "exceeds"]) == bool(r["above_floor"])
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct, floor measured" in out
    assert "p = 0.0065" in out and "p = 0.009 " not in out
    # the simulated floors are judged by the same rule: CI lower end above 0 and p < 0.05
    sim = floors[~floors["noise"].str.startswith("measured")]
    assert (sim["exceeds"] == ((sim["diff_lo"] > 0) & (sim["p_value"] < 0.05))).all()


def test_notebook_12s_numbers_are_the_other_notebooks(capsys):
    """Notebook 12 on the shipped run states each quantity as the other notebooks do: its
    solver table (per shot setting, never pooled) gives the canonical split the headline's
    IPS, and its few-shot lines are few_shot_claim's (notebook 05's, data/runs/README.md's);
    no few-shot change of its own."""
    import re

    import psens
    from psens.ips.claims import few_shot_claim
    from psens.ips.headline import headline
    from tests.support import ROOT, run_notebook_cells

    arc = ROOT / "data" / "runs" / "arc.nc"
    scope = run_notebook_cells(
        "12_solvers_and_noise",
        {"PSENS_RUN": str(arc), "PSENS_SIZE": ""},
        "ds = pw.load_run(",
        "sens = solver_sensitivity(",
        "ips_first = ",
        "why = findings_models(",
    )
    out = capsys.readouterr().out
    # the chart: one row of panels per model, the first shot setting (not pooled)
    spec = scope["chart"].to_dict()
    assert spec["encoding"]["row"]["field"] == "model" and "0-shot" in spec["title"]
    long = scope["long"].set_index(["model", "solver", "order"])["ips"]
    head0 = headline(psens.open_run(arc), shot=0).query("order == 'all'").set_index("model")
    for model, r in head0.iterrows():
        assert long[(model, "canonical", "all")] == pytest.approx(r["ips"], abs=1e-12)
    full = psens.open_run(arc).load()
    table = scope["table"]
    assert table.index.names[0] == "shot"
    for k in [int(s) for s in scope["ds"]["shot"].values]:
        head = headline(full, shot=k).query("order == 'all'").set_index("model")
        for model, r in head.iterrows():
            got = table.loc[(k, model, "canonical"), "all"]
            assert got == pytest.approx(r["ips"], abs=1e-12), (k, model)
            assert f"{k}-shot {r['ips']:.3f}" in out
    claim = few_shot_claim(full)
    for r in claim[claim["shot"].isin(scope["ds"]["shot"].values)].itertuples():
        assert f"{r.model}: {r.measured}" in out, r.measured
    percents = re.compile(r"[+−-]?\d+\.\d+ ?%")  # a change, or the end of its CI
    quoted = set(percents.findall(" ".join(claim["measured"])))
    assert set(percents.findall(out)) <= quoted, set(percents.findall(out)) - quoted
