"""Hostile and careless use of stores, exports, locks and the command line: each test
reproduces one probe that once kept a wrong number, destroyed data or printed a traceback."""

from __future__ import annotations

import errno
import json
import os

import pytest

from psens import store
from psens.cli import main
from psens.synthetic import synthetic_run
from tests.test_runner import _config, _hold_lock, _toml, assets  # noqa: F401


@pytest.fixture
def saved(tmp_path):
    return store.save(synthetic_run(n_samples=3, n_vars=(3,)), tmp_path / "r.zarr")


def _one_line(err: str) -> str:
    """The one error line of a refused command (``psens run`` prints its estimate first)."""
    lines = [x for x in err.strip().splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error: ")]
    others = [x for x in lines if not x.startswith(("error: ", "psens run: 1 model(s)"))]
    assert len(errors) == 1 and not others and "Traceback" not in err, err
    return errors[0]


# ----------------------------------------------------------------------------- export


def test_export_refuses_to_overwrite_a_file_it_did_not_write(saved, tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('store = "x.zarr"\n')
    assert main(["export", str(saved), str(cfg)]) == 2
    assert "exists" in _one_line(capsys.readouterr().err)
    assert main(["export", str(saved), str(cfg), "--overwrite"]) == 2
    assert "not a psens run" in _one_line(capsys.readouterr().err)
    assert cfg.read_text() == 'store = "x.zarr"\n'  # untouched


def test_export_into_the_store_is_refused(saved, capsys):
    before = (saved / "zarr.json").read_bytes()
    for out in (saved / "zarr.json", saved, saved / "new.nc"):
        assert main(["export", str(saved), str(out), "--overwrite"]) == 2
        assert "inside the store" in _one_line(capsys.readouterr().err)
    assert (saved / "zarr.json").read_bytes() == before
    assert not (saved / "new.nc").exists()
    assert store.verify(saved).ok


def test_export_replaces_an_earlier_export_only_with_overwrite(saved, tmp_path, capsys):
    out = tmp_path / "r.nc"
    assert main(["export", str(saved), str(out)]) == 0
    capsys.readouterr()
    assert store.open_run(out).sizes["sample"] == 3
    assert store.EXPORT_ATTR not in store.open_run(out).attrs  # the marker stays on disk
    assert main(["export", str(saved), str(out)]) == 2
    assert "--overwrite" in _one_line(capsys.readouterr().err)
    assert main(["export", str(saved), str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc", "r.zarr"]  # no leftovers


def test_export_into_a_missing_folder_says_how_to_fix_it(saved, tmp_path, capsys):
    out = tmp_path / "nonexistent" / "dir" / "out.nc"
    assert main(["export", str(saved), str(out)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "does not exist" in line and "mkdir -p" in line


def test_export_into_a_read_only_folder_is_one_line(saved, tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(ro) else real(p, mode))
    assert main(["export", str(saved), str(ro / "out.nc")]) == 2
    assert "cannot be written" in _one_line(capsys.readouterr().err)


def test_export_write_error_is_one_line(saved, tmp_path, capsys, monkeypatch):
    import xarray as xr

    def erofs(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", erofs)
    assert main(["export", str(saved), str(tmp_path / "out.nc")]) == 2
    assert "Read-only file system" in _one_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zarr"]


# ----------------------------------------------------------------------------- locks


def test_the_lock_of_a_store_named_through_a_symlink_is_the_same_lock(tmp_path):
    real = store.save(synthetic_run(n_samples=2, n_vars=(3,)), tmp_path / "real.zarr")
    (tmp_path / "link.zarr").symlink_to(real)  # the store itself named through a link
    proc = _hold_lock(real)
    try:
        with pytest.raises(ValueError, match=f"in use by PID {proc.pid}"):
            with store.lock(tmp_path / "link.zarr"):
                pass
    finally:
        proc.kill()
        proc.wait(30)


def test_a_stale_lock_is_taken_over_with_a_word(tmp_path):
    path = tmp_path / "r.zarr"
    (tmp_path / "r.zarr.lock").write_text("999999 on elsewhere\n")  # a killed holder's
    with pytest.warns(UserWarning, match="took over the lock left by PID 999999"):
        with store.lock(path):
            pass
    with store.lock(path):  # released normally: no word
        pass


def test_a_read_only_store_folder_is_one_line(saved, capsys, monkeypatch):
    real = os.open

    def erofs(path, *a, **k):
        if str(path).endswith(".lock"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "open", erofs)
    with pytest.raises(ValueError, match=r"cannot write the lock file .*Read-only file system"):
        with store.lock(saved):
            pass
    monkeypatch.setattr(os, "open", real)
    access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(saved) else access(p, mode)
    )
    with pytest.raises(ValueError, match="cannot be written"):
        with store.lock(saved):
            pass


def test_run_in_a_read_only_folder_is_one_line(assets, tmp_path, capsys, monkeypatch):  # noqa: F811
    real = os.open

    def erofs(path, *a, **k):
        if str(path).endswith(".lock"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, *a, **k)

    cfg = _toml(_config(assets, tmp_path / "r.zarr", samples=1), tmp_path / "c.toml")
    monkeypatch.setattr(os, "open", erofs)
    assert main(["run", str(cfg), "--no-progress"]) == 2
    assert "Read-only file system" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "r.zarr").exists()


# ----------------------------------------------------------------------------- run checks


def test_an_absent_device_is_refused_before_the_store(assets, tmp_path, capsys):  # noqa: F811
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    cfg = _toml(_config(assets, tmp_path / "r.zarr", device="cuda:7"), tmp_path / "c.toml")
    assert main(["run", str(cfg), "--no-progress"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "cuda:7" in line and "not available" in line and 'device = "cpu"' in line
    assert not (tmp_path / "r.zarr").exists()


def test_no_free_space_names_the_sizes_it_compared(tmp_path, monkeypatch):
    import shutil

    from psens import runner

    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(0, 0, 0))
    want = r"needs about 48\.0 KiB but only 0 B is free at .*virtual"
    with pytest.raises(ValueError, match=want):
        runner.check_disk(tmp_path / "a" / "b.zarr", 48 * 1024)


# ----------------------------------------------------------------------------- verify


def test_verify_catches_an_edited_tau(saved, capsys):
    meta = saved / "zarr.json"
    doc = json.loads(meta.read_text())
    assert doc["attributes"]["tau"] == 0.1
    doc["attributes"]["tau"] = 0.3  # moves every IPS
    meta.write_text(json.dumps(doc))
    found = store.verify(saved)
    assert not found.ok and "attributes" in found.brief() and "tau" in found.brief()
    assert main(["verify", str(saved)]) == 1
    assert "tau" in capsys.readouterr().out
    with pytest.raises(ValueError, match="damaged"):
        store.open_run(saved, verify=True)
    assert main(["summary", str(saved)]) == 2


def test_verify_does_not_call_a_run_with_pending_blocks_ok(tmp_path, capsys):
    run = synthetic_run(n_samples=3, n_vars=(3,))
    run["status"].values[0, 1] = store.PENDING
    path = store.save(run, tmp_path / "r.zarr")
    found = store.verify(path)
    total = run.sizes["model"] * run.sizes["sample"]
    assert found.ok and found.pending == 1 and found.checked == total - 1
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert " ok:" not in out and f"1 of {total} blocks pending" in out


# ----------------------------------------------------------------------------- config checks


def test_a_dataset_path_that_is_a_plain_folder_is_one_line(assets, tmp_path, capsys):  # noqa: F811
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "notes.txt").write_text("x")
    cfg = _config(assets, tmp_path / "r.zarr", dataset_path=str(folder))
    assert main(["run", str(_toml(cfg, tmp_path / "c.toml")), "--no-progress"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "not a dataset saved with save_to_disk" in line and ".jsonl" in line
    assert not (tmp_path / "r.zarr").exists()


def test_a_huge_batch_size_is_refused(assets, tmp_path):  # noqa: F811
    from psens.config import MAX_BATCH, RunConfig

    with pytest.raises(ValueError, match=f"batch_size <= {MAX_BATCH}"):
        RunConfig.from_dict(_config(assets, tmp_path / "r.zarr", batch_size=10**9))
    RunConfig.from_dict(_config(assets, tmp_path / "r.zarr", batch_size=MAX_BATCH))


def test_max_retries_says_zero_is_allowed():
    from psens.models.served import ServedModel

    good = {"name": "x", "base_url": "http://127.0.0.1:9/v1", "model": "m", "tokenizer": "t"}
    assert ServedModel.from_entry({**good, "max_retries": 0}).max_retries == 0
    with pytest.raises(ValueError, match="Pass max_retries >= 0"):
        ServedModel.from_entry({**good, "max_retries": -1})
    with pytest.raises(ValueError, match="Pass concurrency >= 1"):
        ServedModel.from_entry({**good, "concurrency": 0})
