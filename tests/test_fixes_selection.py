"""Selecting a run's template pair by name, a mistyped split, the EAS zone explorer's
thresholds and controls, and PSS charts of synthetic scores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import psens
from tests.support import ROOT

ARC = ROOT / "data" / "runs" / "arc.nc"
EAS = ROOT / "data" / "reference" / "eas"


def test_a_runs_pair_is_selected_by_name(tmp_path):
    ds = psens.open_run(ARC)
    want = ds.isel(pair=2)  # ips1 | ips4
    for query in ("ips1|ips4", "ips4-ips1", ("ips4", "ips1"), "ips1 vs ips4"):
        got = ds.sel(pair=query)
        assert got["pair"].item() == "ips1|ips4" and str(got["template_b"].values) == "ips4"
        xr.testing.assert_identical(got["prompt"].load(), want["prompt"].load())
    assert ds.sel(pair=["ips1|ips2", "ips5-ips4"])["pair"].values.tolist() == [
        "ips1|ips2",
        "ips4|ips5",
    ]
    assert ds.sel(pair=3)["pair"].item() == "ips1|ips5"  # the numbers of earlier runs
    assert ds.sel(pair=[0, 9])["pair"].values.tolist() == ["ips1|ips2", "ips4|ips5"]
    with pytest.raises(KeyError, match=r"no template pair 'ips1\|ips9'.*Use two of \['ips1'"):
        ds.sel(pair="ips1|ips9")
    with pytest.raises(KeyError, match="no pair 10"):
        ds.sel(pair=10)
    sub = ds.isel(pair=[3, 5])
    assert sub.sel(pair="ips4|ips2")["pair"].item() == "ips2|ips4"
    # an export stores the labels and reads back the same
    from psens.store import to_netcdf

    out = to_netcdf(ds, tmp_path / "again.nc")
    again = psens.open_run(out)
    assert again["pair"].values.tolist() == ds["pair"].values.tolist()
    assert again.sel(pair="ips3-ips2")["pair"].item() == "ips2|ips3"


def test_a_mistyped_split_is_named_before_any_download():
    with pytest.raises(ValueError, match=r"no split 'validaton' \(did you mean 'validation'\?\)"):
        psens.datasets.load("arc-challenge", split="validaton")
    with pytest.raises(ValueError, match=r"Use one of \['test', 'validation', 'dev'\]"):
        psens.datasets.load("mmlu", split="train")


def test_psens_run_refuses_a_mistyped_split(tmp_path, capsys):
    from psens.cli import main

    cfg = tmp_path / "c.toml"
    store = tmp_path / "r.zarr"
    cfg.write_text(
        f'store = "{store}"\nmodels = ["smollm2-135m-instruct"]\n'
        'dataset = "arc-challenge"\nsplit = "validaton"\nsamples = 2\n'
    )
    assert main(["run", str(cfg), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no split 'validaton'" in err and "Traceback" not in err
    assert not store.exists()


@pytest.fixture(scope="module")
def judged():
    return pd.read_json(EAS / "judged_gpt4o_arc_sample.jsonl", lines=True)


def test_eas_zones_flags_zero_thresholds_and_takes_given_ones(judged):
    import psens.eas as eas
    import psens.widgets as pw

    w = pw.EASZones(rows=judged, scorer="eas")
    assert w.thresholds == (0.0, 0.0)  # the sample's 75th percentiles: most never vary
    assert "t_H and t_J = 0" in w.status.value
    # one dataset and one model: no dropdown that would change nothing
    assert "dataset" not in w.controls and "model" not in w.controls
    published = pd.read_csv(EAS / "metrics_instance.csv")
    th = eas.thresholds(published.sens_heuristic, published.sens_judge)
    w = pw.EASZones(rows=judged, scorer="eas", thresholds_hj=th)
    assert w.thresholds == pytest.approx(th) and min(th) > 0
    assert "= 0" not in w.status.value and "given" in str(w.jchart.chart.title)
    shown = w.tables["instances"]
    ref = eas.zones(shown.sens_heuristic, shown.sens_judge, thresholds_hj=th)
    assert (w.tables["instances"]["zone"].to_numpy() == ref.to_numpy()).all()
    assert w._body().layout.flex_flow == "row wrap"  # the detail panel wraps, never clipped
    with pytest.raises(ValueError, match="Pass two numbers >= 0"):
        pw.EASZones(rows=judged, thresholds_hj=(0.1,))


def test_notebook_10_gives_the_explorer_the_studys_thresholds():
    text = (ROOT / "notebooks" / "10_eas.py").read_text()
    assert 'pw.EASZones(rows=judged, scorer="eas", thresholds_hj=th)' in text


def test_pss_charts_of_synthetic_scores_say_so():
    import psens.widgets as pw
    from psens.pss.charts import pss_by_model, pss_by_shot, pss_by_variant

    rng = np.random.default_rng(0)
    dims = ("model", "sample", "shot", "variant")
    coords = {"model": ["a", "b"], "sample": list("abcde"), "shot": [0, 1]}
    ds = xr.Dataset(
        {"correct": (dims, (rng.random((2, 5, 2, 4)) > 0.5).astype(float))},
        coords={**coords, "variant": list("pqrs")},
    )
    ds.attrs["synthetic"] = True
    w = pw.PSSByVariant(ds)
    for view in w.views:
        w.view = view
        assert "synthetic data" in str(w.jchart.chart.title), view
    t = w.tables
    for chart in (pss_by_model(t["model"]), pss_by_shot(t["shot"]), pss_by_variant(t["variant"])):
        assert "synthetic data" in str(chart.title)
    ds.attrs = {}
    assert "synthetic" not in str(pw.PSSByVariant(ds).jchart.chart.title)
