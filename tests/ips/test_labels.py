"""Slicing a run by name: pair labels stored and in every output, order bands, tidy rows,
plots of results; runs written with integer pairs still open labelled."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import psens
from psens.ips import interaction_classes, ips_pairs, order_masks, sample_ips
from psens.ips.labels import order_bands
from psens.store import open_run, save, to_netcdf
from psens.synthetic import synthetic_run
from tests.support import ROOT


@pytest.fixture(scope="module")
def run():
    return synthetic_run(n_samples=4, n_vars=(3, 5), shots=[0, 1], seed=5)


def _legacy(ds):
    """``ds`` as psens wrote runs before pairs were labelled: ``pair`` = 0 .. P-1."""
    ds = ds.drop_vars("order_band").drop_indexes("pair").drop_vars("pair")
    return ds.assign_coords(pair=np.arange(ds.sizes["pair"], dtype=np.int64))


def _expected_labels(ds) -> list[str]:
    t = [str(x) for x in ds["template"].values]
    return [f"{t[i]}|{t[j]}" for i in range(len(t)) for j in range(i + 1, len(t))]


def test_a_built_run_selects_pairs_by_name_without_open_run(run):
    assert list(run["pair"].values) == _expected_labels(run)
    one = run.sel(pair="ips1-ips4")
    assert (str(one["template_a"].values), str(one["template_b"].values)) == ("ips1", "ips4")
    for spelling in ("ips1|ips4", "ips4|ips1", "ips4-ips1", "ips1 vs ips4", ("ips4", "ips1")):
        xr.testing.assert_identical(run.sel(pair=spelling), one)
    with pytest.raises(KeyError, match="no template pair"):
        run.sel(pair="ips1-ips9")


def test_the_store_holds_the_labels(run, tmp_path):
    import zarr

    path = save(run, tmp_path / "run.zarr")
    group = zarr.open_group(str(path), mode="r")
    assert [str(x) for x in group["pair"][...]] == _expected_labels(run)
    assert "order_band" not in group  # derived, never stored
    ds = open_run(path)
    assert list(ds["pair"].values) == _expected_labels(run)
    assert float(ds["hidden_cosine"].sel(pair="ips2-ips1").isel(model=0, sample=0, shot=0)) == (
        float(run["hidden_cosine"].isel(pair=0, model=0, sample=0, shot=0))
    )


@pytest.mark.parametrize("engine", ["zarr", "netcdf"])
def test_runs_written_with_integer_pairs_open_with_labels(run, tmp_path, engine):
    old = _legacy(run)
    assert old["pair"].dtype.kind == "i"
    if engine == "zarr":
        path = save(old, tmp_path / "old.zarr")
    else:
        path = to_netcdf(old, tmp_path / "old.nc")
    ds = open_run(path)
    assert list(ds["pair"].values) == _expected_labels(run)
    assert ds.sel(pair="ips5-ips3")["template_a"].item() == "ips3"
    assert "order_band" in ds.coords


@pytest.mark.parametrize(
    "path", sorted((ROOT / "data" / "runs").glob("*.nc")), ids=lambda p: p.name
)
def test_the_shipped_runs_hold_pair_labels_on_disk(path):
    """Sliced by name without psens: ``xarray.open_dataset(FILE).sel(pair="ips1|ips4")``."""
    raw = xr.open_dataset(path)
    if "pair" not in raw.dims:
        return  # a method run without template pairs (EAS, DBSA, subjective PSS)
    ds = psens.open_run(path)
    assert list(raw["pair"].values) == list(ds["pair"].values) == _expected_labels(ds)
    a, b = str(ds["template"].values[0]), str(ds["template"].values[-1])
    assert raw.sel(pair=f"{a}|{b}")["template_b"].item() == b


def test_one_spelling_in_every_output(run):
    labels = _expected_labels(run)
    assert run.psens.pair_labels() == labels
    assert psens.ips.pair_labels([str(t) for t in run["template"].values]) == labels
    assert list(ips_pairs(run, tau=0.1)["pair"].values) == labels
    assert list(interaction_classes(run)["pair"].values) == labels
    assert list(sample_ips(run, per_pair=True, orders="all")["pair"].values) == labels
    res = ips_pairs(run, tau=0.1)
    xr.testing.assert_identical(res.sel(pair="ips2-ips1"), res.sel(pair="ips1|ips2"))


def test_order_band_names_the_bands_of_each_sample(run):
    """Against the literal §4.3 rule: low 1..floor(n/3), mid ..floor(2n/3), high above."""
    band = run["order_band"]
    assert band.dims == ("sample", "subset")
    for s, n in enumerate(run["n_vars"].values):
        for subset in range(run.sizes["subset"]):
            k = bin(subset).count("1")
            if subset == 0 or subset >= 1 << int(n):
                want = ""
            elif k <= n // 3:
                want = "low"
            elif k <= 2 * n // 3:
                want = "mid"
            else:
                want = "high"
            assert band.values[s, subset] == want, (n, subset)


def test_order_band_selects_what_the_order_argument_selects(run):
    a = run["I_and"].transpose("model", "sample", "shot", "template", "subset")
    for name in ("low", "mid", "high"):
        kept = np.isfinite(a.where(run["order_band"] == name).values)
        n = np.broadcast_to(run["n_vars"].values[None, :, None, None], a.shape[:-1])
        want = order_masks(n, run.sizes["subset"], name) & np.isfinite(a.values)
        np.testing.assert_array_equal(kept, want)
    frame = run.psens.to_frame(order="high")
    assert set(frame["order"]) == {"high"}


def test_a_lazily_opened_run_gets_a_lazy_band_coordinate(run, tmp_path):
    ds = open_run(save(run, tmp_path / "run.zarr"))
    assert hasattr(ds["order_band"].data, "dask")
    np.testing.assert_array_equal(ds["order_band"].values, run["order_band"].values)
    assert order_bands([6], 64)[0, 0b111] == "mid"


def test_to_frame_of_a_result_has_no_repeated_metadata(run):
    res = ips_pairs(run, tau=0.1, order="low")
    assert {"family", "series", "kind", "arch", "params", "active_params"} <= set(res.coords)
    rows = res.psens.to_frame()
    assert rows.columns.tolist() == ["model", "sample", "shot", "pair", res.name]
    assert len(rows) == res.size
    back = rows.set_index(["model", "sample", "shot", "pair"])[res.name]
    m, s, h, p = (str(res[d].values[1]) for d in ("model", "sample", "shot", "pair"))
    assert back[(m, s, int(h), p)] == pytest.approx(
        float(res.sel(model=m, sample=s, shot=int(h), pair=p))
    )
    full = res.psens.to_frame(metadata=True)
    assert {"family", "pair_a", "pair_b"} <= set(full.columns)
    counts = interaction_classes(run).psens.to_frame()
    assert counts.columns.tolist() == [
        "model",
        "sample",
        "shot",
        "pair",
        "class",
        "counts",
        "changed",
    ]


def test_results_plot(run):
    """xarray's .plot() on ips_pairs and interaction_classes results (text coordinates)."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = ips_pairs(run, tau=0.1, order="low")
    try:
        res.plot()
        res.mean(["sample", "shot"]).plot()
        res.isel(model=0, shot=0).mean("sample").plot()
        res.mean(["sample", "shot"]).plot.line(x="pair")
        interaction_classes(run)["counts"].sum(["sample", "shot", "model"]).plot()
    finally:
        plt.close("all")


def test_the_shipped_run_check_compares_under_todays_labels(tmp_path, monkeypatch):
    """scripts/shipped_run.py --check: a committed file (pair numbers, coded format ids)
    and today's export of the same run differ in nothing but the exporting version."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from tests.support import script_module

    compare = script_module("shipped_run").compare
    committed = ROOT / "data" / "runs" / "formats.nc"
    again = to_netcdf(open_run(committed), tmp_path / "again.nc")
    assert set(compare(committed, again)) <= {"attrs['psens_export']"}
