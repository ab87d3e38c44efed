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


def test_open_run_reads_a_netcdf_export_as_the_store(tmp_path):
    import psens

    run = synthetic_run(n_samples=4, n_vars=(3, 4), shots=[0, 1], seed=2)
    path = store.save(run, tmp_path / "r.zarr")
    nc = store.to_netcdf(path, tmp_path / "r.nc")
    zarr_run, nc_run = store.open_run(path), store.open_run(nc)
    assert_run_equal(zarr_run, nc_run, check_attrs=False)
    assert nc_run.attrs["synthetic"] is True and nc_run.attrs["tau"] == 0.1
    for order in ("all", "low", "high"):
        a, b = psens.ips.ips(zarr_run, order=order), psens.ips.ips(nc_run, order=order)
        np.testing.assert_array_equal(a.values, b.values)
    assert store.open_run(nc, verify=True)["v"].shape == run["v"].shape


def test_summary_reads_a_netcdf_export(tmp_path, capsys):
    from psens.cli import main

    path = store.save(synthetic_run(n_samples=3, n_vars=(3,)), tmp_path / "r.zarr")
    assert main(["summary", str(path)]) == 0
    from_zarr = capsys.readouterr().out
    nc = store.to_netcdf(path, tmp_path / "r.nc")
    assert main(["summary", str(nc)]) == 0
    assert capsys.readouterr().out == from_zarr and "toy-7b: IPS" in from_zarr


@pytest.mark.parametrize("content", [b"not a netcdf file", "foreign"])
def test_open_run_refuses_a_file_that_is_no_run_export(tmp_path, content):
    xr = pytest.importorskip("xarray")
    bad = tmp_path / "x.nc"
    if content == "foreign":
        xr.Dataset({"a": ("x", [1.0])}).to_netcdf(bad, engine="h5netcdf")
    else:
        bad.write_bytes(content)
    with pytest.raises(ValueError, match="psens export"):
        store.open_run(bad)


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


# ----------------------------------------------------------------------------- safety


def _schema(**extra):
    schema = {
        "models": ["m"],
        "samples": ["a", "b"],
        "templates": ["ips1", "ips2"],
        "words": [["x", "y"], ["z"]],
        "prompts": np.array([["p1", "p2"], ["q1", "q2"]], dtype=object),
        "targets": [" A", " B"],
        "n_max": 2,
    }
    schema.update(extra)
    return schema


def _block(fill: float = 1.0) -> dict:
    """A complete block of the store of :func:`_schema`."""
    return {
        "v": np.full((2, 4), fill),
        "I_and": np.full((2, 4), fill),
        "I_or": np.zeros((2, 4)),
        "gamma": np.zeros((2, 4)),
        "p_target": np.full(2, 0.5),
        "confidence": np.full(2, 0.5),
        "correct": np.ones(2),
        "prediction": np.array(["A", "B"], object),
        "generated": np.array(["A", "B"], object),
        "hidden_cosine": np.ones(1),
        "hidden_l2": np.zeros(1),
        "matching_error": np.float64(0.0),
    }


def _forbid_deletion(monkeypatch):
    """From now on any folder deletion or rename fails the test: a refusal must come first."""
    import os
    import shutil

    def guard(*args, **kwargs):
        raise AssertionError(f"would delete or move {args[0]}")

    monkeypatch.setattr(shutil, "rmtree", guard)
    monkeypatch.setattr(os, "rename", guard)
    monkeypatch.setattr(os, "replace", guard)


def _fill(folder, n: int = 3):
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        (folder / f"notes{k}.txt").write_text("precious")
    return folder


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ("", "current folder"),
        (".", "current folder"),
        ("home", "home folder"),
        ("/", "filesystem root"),
        ("files", "holds 3 files that are not a psens store"),
        ("file", "is a file, not a psens store"),
        ("zarr", "zarr store but not a psens run"),
    ],
)
def test_overwrite_refuses_what_is_not_a_psens_store(tmp_path, monkeypatch, target, match):
    zarr = pytest.importorskip("zarr")
    cwd = _fill(tmp_path / "cwd")
    monkeypatch.chdir(cwd)
    home = _fill(tmp_path / "home")
    monkeypatch.setenv("HOME", str(home))
    if target == "home":
        path = home
    elif target == "files":
        path = _fill(tmp_path / "results")
    elif target == "file":
        path = tmp_path / "run.zarr"
        path.write_text("not a store")
    elif target == "zarr":
        path = tmp_path / "other.zarr"
        zarr.open_group(str(path), mode="w").attrs["hello"] = 1
    else:
        path = target
    _forbid_deletion(monkeypatch)
    with pytest.raises(ValueError, match=match):
        store.create(path, overwrite=True, **_schema())
    assert sorted(p.name for p in cwd.iterdir()) == ["notes0.txt", "notes1.txt", "notes2.txt"]
    assert len(list(home.iterdir())) == 3
    if target == "files":
        assert len(list(path.iterdir())) == 3


def test_overwrite_replaces_a_psens_store_or_an_empty_folder(tmp_path):
    path = tmp_path / "r.zarr"
    first = store.create(path, **_schema())
    store.write_block(path, 0, 1, _block())
    again = store.create(path, overwrite=True, **_schema())
    assert (again.status.values == store.PENDING).all()
    assert again.attrs["run_id"] != first.attrs["run_id"]
    empty = tmp_path / "empty"
    empty.mkdir()
    ds = store.create(empty, overwrite=True, **_schema())
    assert ds.sizes["sample"] == 2
    # nothing is left beside the stores (temporary folders, lock files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "r.zarr"]


def test_stale_writer_is_refused_after_the_store_is_recreated(tmp_path):
    path = tmp_path / "r.zarr"
    old_id = store.create(path, **_schema()).attrs["run_id"]
    store.write_block(path, 0, 0, _block(), run_id=old_id)  # the writer of this run: fine
    new_id = store.create(path, overwrite=True, **_schema()).attrs["run_id"]
    assert new_id != old_id
    with pytest.raises(ValueError, match="run id"):
        store.write_block(path, 0, 1, _block(7.0), run_id=old_id)
    back = store.open_run(path)
    assert (back.status.values == store.PENDING).all()
    assert np.isnan(back.v.values).all()


def test_second_holder_of_the_lock_is_refused(tmp_path):
    import os
    import subprocess
    import sys

    from tests.support import ROOT

    path = tmp_path / "r.zarr"
    code = (
        "import sys, time\nfrom psens import store\n"
        "with store.lock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout.readline().strip() == b"locked"
        with pytest.raises(ValueError, match=f"in use by PID {proc.pid}"):
            with store.lock(path):
                pass
    finally:
        proc.kill()
        proc.wait(30)
    with pytest.warns(UserWarning, match=f"took over the lock left by PID {proc.pid}"):
        with store.lock(path):  # the OS released the lock of the killed holder
            pass


class _Crash(BaseException):
    """Stands for a kill: not an Exception, so nothing in psens handles it."""


def test_crash_during_creation_leaves_no_half_store(tmp_path, monkeypatch):
    zarr = pytest.importorskip("zarr")
    path = tmp_path / "r.zarr"

    def crash(*args, **kwargs):
        raise _Crash

    with monkeypatch.context() as patch:  # the arrays are written, the metadata is not
        patch.setattr(zarr, "consolidate_metadata", crash)
        with pytest.raises(_Crash):
            store.create(path, **_schema())
    assert not path.exists()
    ds = store.create(path, **_schema())
    assert (ds.status.values == store.PENDING).all()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zarr"]


def test_a_failed_block_holds_nan(tmp_path):
    path = tmp_path / "r.zarr"
    store.create(path, **_schema())
    # an earlier attempt wrote its numbers and was killed before its status
    store.write_block(path, 0, 1, {**_block(), "status": store.PENDING})
    store.write_block(path, 0, 1, {"error": "RuntimeError: boom", "status": store.FAILED})
    back = store.open_run(path).load()
    assert back.status.values.tolist() == [[store.PENDING, store.FAILED]]
    assert str(back.error.values[0, 1]) == "RuntimeError: boom"
    for name in ("v", "I_and", "I_or", "gamma", "p_target", "hidden_l2", "matching_error"):
        assert np.isnan(back[name].values[0, 1]).all(), name
    assert back.prediction.values[0, 1].tolist() == ["", ""]


def test_ips_and_summary_skip_failed_and_pending_blocks(run):
    from psens.ips import ips, sample_ips
    from psens.runner import summarize

    ds = run.copy(deep=True)
    full = sample_ips(ds, 0.1, orders="all").values
    status = ds["status"].values
    status[0, 1] = status[0, 2] = store.PENDING  # finite numbers of an interrupted attempt
    status[0, 3] = store.FAILED  # an old store: a failed block with finite numbers
    out = sample_ips(ds, 0.1, orders="all")
    skipped = status != store.DONE
    assert np.isnan(out.values[skipped]).all()
    np.testing.assert_array_equal(out.values[~skipped], full[~skipped])
    assert (out.attrs["blocks_pending"], out.attrs["blocks_failed"]) == (2, 1)
    plain = ips(ds)
    assert np.isnan(plain.values[skipped]).all()
    np.testing.assert_array_equal(plain.values[~skipped], full[~skipped])
    assert (plain.attrs["blocks_pending"], plain.attrs["blocks_failed"]) == (2, 1)
    lines = summarize(ds).splitlines()
    first, second = (f"  {m}:" for m in ds["model"].values[:2])
    assert "2 blocks pending, 1 failed" in next(x for x in lines if x.startswith(first))
    other = next(x for x in lines if x.startswith(second))
    assert "pending" not in other and "failed" not in other


def _damage(path, run):
    """Delete, truncate and flip one chunk each, in three blocks; returns their names."""
    from tests.support import chunk_file, tamper

    cases = [("I_and", 0, 1, "delete"), ("v", 0, 3, "truncate"), ("gamma", 1, 2, "flip")]
    for name, m, s, how in cases:
        tamper(chunk_file(path, name, m, s), how)
    return sorted((str(run.model.values[m]), str(run.sample.values[s])) for _, m, s, _ in cases)


def test_verify_names_deleted_truncated_and_flipped_chunks(tmp_path, run, capsys):
    from psens.cli import main

    path = store.save(run, tmp_path / "r.zarr")
    report = store.verify(path)
    assert report.ok and report.checked == run.status.size
    assert main(["verify", str(path)]) == 0
    assert "ok" in capsys.readouterr().out
    damaged = _damage(path, run)
    report = store.verify(path)
    assert not report.ok
    assert sorted(report.damaged_blocks) == damaged
    with pytest.raises(ValueError, match="damaged") as err:
        store.open_run(path, verify=True)
    for model, sample in damaged:
        assert f"({model}, {sample})" in str(err.value)
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    for model, sample in damaged:
        assert f"model {model}, sample {sample}" in out
    assert main(["summary", str(path)]) == 2  # a clean message, no traceback
    assert "damaged" in capsys.readouterr().err


def test_verify_checks_the_coordinates(tmp_path, run):
    from tests.support import tamper

    path = store.save(run, tmp_path / "r.zarr")
    tamper(path / "word" / "c" / "0" / "0", "flip")
    report = store.verify(path)
    assert not report.ok and [name for name, _ in report.damaged_arrays] == ["word"]
    with pytest.raises(ValueError, match="word"):
        store.open_run(path, verify=True)


def test_verify_an_old_store_without_checksums(tmp_path, run, capsys):
    import shutil
    import warnings

    zarr = pytest.importorskip("zarr")
    from psens.cli import main

    path = store.save(run, tmp_path / "r.zarr")
    shutil.rmtree(path / store.CHECKSUM_VAR)
    group = zarr.open_group(str(path), mode="r+")
    group.attrs.pop(store.CHECKSUM_ATTR)
    group.attrs.pop(store.CHECKSUM_VERSION_ATTR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))
    report = store.verify(path)
    assert report.ok and not report.has_checksums
    assert main(["verify", str(path)]) == 0
    assert "no checksums recorded" in capsys.readouterr().out
    assert_run_equal(run, store.open_run(path, verify=True))
