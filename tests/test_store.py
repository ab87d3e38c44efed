"""The run store: schema, round trips, block writes, refusal of foreign stores."""

from __future__ import annotations

import json

import numpy as np
import pytest

from psens import store
from psens.interactions import reconstruct
from psens.synthetic import assert_run_equal, synthetic_run


@pytest.fixture(scope="module")
def run():
    return synthetic_run(n_samples=5, n_vars=(3, 4))


def test_synthetic_run_satisfies_universal_matching(run):
    for s, n in enumerate(run.n_vars.values):
        a = run.I_and.values[:, s, :, : 1 << n]
        o = run.I_or.values[:, s, :, : 1 << n]
        np.testing.assert_allclose(reconstruct(a, o), run.v.values[:, s, :, : 1 << n], atol=1e-12)
        assert np.isnan(run.v.values[:, s, :, 1 << n :]).all()


def test_round_trip(tmp_path, run):
    path = store.save(run, tmp_path / "r.zarr")
    back = store.open_run(path)
    assert set(back.dims) >= {"model", "sample", "template", "subset", "var", "pair"}
    assert_run_equal(run, back)
    assert back.attrs["psens_schema"] == store.SCHEMA


def test_netcdf_export(tmp_path, run):
    xr = pytest.importorskip("xarray")
    path = store.save(run, tmp_path / "r.zarr")
    nc = store.to_netcdf(path, tmp_path / "r.nc")
    back = xr.open_dataset(nc, engine="h5netcdf")
    np.testing.assert_array_equal(back.v.values, run.v.values)
    assert back.prompt.values[0, 0] == run.prompt.values[0, 0]


def test_create_then_write_block(tmp_path):
    path = tmp_path / "r.zarr"
    ds = store.create(
        path,
        models=["m"],
        samples=["a", "b"],
        templates=["ips1", "ips2"],
        words=[["x", "y"], ["z"]],
        prompts=np.array([["p1", "p2"], ["q1", "q2"]], dtype=object),
        targets=[" A", " B"],
        n_max=2,
        attrs={"config": {"seed": 1}},
    )
    assert (ds.status.values == store.PENDING).all()
    assert np.isnan(ds.v.values).all()
    block = {"v": np.arange(8.0).reshape(2, 4), "prediction": np.array(["A", "B"], object)}
    store.write_block(path, 0, 1, block)
    back = store.open_run(path)
    assert back.status.values.tolist() == [[store.PENDING, store.DONE]]
    np.testing.assert_array_equal(back.v.values[0, 1], block["v"])
    assert np.isnan(back.v.values[0, 0]).all()
    assert back.prediction.values[0, 1].tolist() == ["A", "B"]
    assert json.loads(back.attrs["config"]) == {"seed": 1}
    with pytest.raises(ValueError, match="exists"):
        store.create(
            path,
            models=["m"],
            samples=["a"],
            templates=["t"],
            words=[["x"]],
            prompts=np.array([["p"]], object),
            targets=[" A"],
            n_max=1,
        )


def test_foreign_and_unknown_version_refused(tmp_path, run):
    zarr = pytest.importorskip("zarr")
    foreign = tmp_path / "foreign.zarr"
    zarr.open_group(str(foreign), mode="w").attrs["hello"] = 1
    with pytest.raises(ValueError, match="not a psens run"):
        store.open_run(foreign)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ValueError, match="not a zarr store"):
        store.open_run(plain)
    with pytest.raises(ValueError, match="does not exist"):
        store.open_run(tmp_path / "nothing")
    path = store.save(run, tmp_path / "old.zarr")
    group = zarr.open_group(str(path), mode="r+")
    group.attrs["psens_schema_version"] = 99
    with pytest.raises(ValueError, match="schema version 99"):
        store.open_run(path)


def test_damaged_store_is_refused(tmp_path, run):
    import shutil

    path = store.save(run, tmp_path / "r.zarr")
    shutil.rmtree(path / "I_and")
    with pytest.raises(ValueError, match=r"damaged.*I_and"):
        store.open_run(path)
    bad = store.save(run, tmp_path / "b.zarr")
    (bad / "zarr.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a zarr store"):
        store.open_run(bad)
