"""One way to open, summarise, verify and export every run file psens writes or ships: the
IPS exports and the EAS, DBSA and subjective PSS runs in data/runs, their checksums, and
the refusal to write a method run over a file psens did not write."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

import psens
from psens import method_runs, store
from psens.cli import main
from tests.eas.test_run import _config, fake_models  # noqa: F401 (a fixture)

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
SHIPPED = sorted(RUNS.glob("*.nc"))
#: the first line of each method run's summary: its method's headline
HEADLINES = {"eas": "EAS run:", "dbsa": "DBSA run:", "subjective": "PSS"}


def test_every_kind_of_run_is_shipped():
    kinds = {store.method_of(p) for p in SHIPPED}
    assert {None, "eas", "dbsa", "subjective"} <= kinds  # None: the IPS exports
    assert kinds <= {None, *store.METHODS}  # every shipped method run is a declared method


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_run_opens_summarises_verifies_and_exports(path, tmp_path, capsys):
    run = psens.open_run(path)
    method = store.method_of(path)
    assert isinstance(run, xr.DataTree if method == "dbsa" else xr.Dataset)
    assert store.CHECKSUM_ATTR not in run.attrs

    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    if method:  # the method's own summary (its declared RUN), headline first
        first = method_runs.summarize(run).splitlines()[0]
        assert HEADLINES.get(method, first) in out and first in out
    else:
        assert out.startswith("psens run summary:")

    assert main(["verify", str(path)]) == 0  # every shipped file is sealed
    line = capsys.readouterr().out
    assert " ok: " in line and "match their checksums" in line, line

    copy = tmp_path / path.name
    assert main(["export", str(path), str(copy)]) == 0
    capsys.readouterr()
    assert main(["verify", str(copy)]) == 0
    assert " ok: " in capsys.readouterr().out
    assert store.method_of(copy) == method
    again = psens.open_run(copy, verify=True)
    xr.testing.assert_equal(again, run)  # every variable and coordinate, as shipped


def test_verify_names_a_changed_variable_of_a_run_file(tmp_path, capsys):
    copy = store.to_netcdf(RUNS / "eas.nc", tmp_path / "eas.nc")
    with h5py.File(copy, "r+") as f:
        f["sens_judge"][0] = f["sens_judge"][0] + 1.0
    assert main(["verify", str(copy)]) == 1
    report = capsys.readouterr().out
    assert "sens_judge: values changed" in report
    with pytest.raises(ValueError, match="is damaged: damaged sens_judge"):
        psens.open_run(copy, verify=True)
    assert main(["summary", str(copy)]) == 2  # the summary verifies first


def test_verify_names_a_changed_attribute_of_an_export(tmp_path, capsys):
    copy = store.to_netcdf(RUNS / "arc.nc", tmp_path / "arc.nc")
    with h5py.File(copy, "r+") as f:
        f.attrs["tau"] = 0.3
    assert main(["verify", str(copy)]) == 1
    assert "tau changed" in capsys.readouterr().out


def test_verify_refuses_a_file_psens_did_not_write(tmp_path, capsys):
    other = tmp_path / "other.nc"
    xr.Dataset({"x": ("a", np.arange(3.0))}).to_netcdf(other, engine="h5netcdf")
    assert main(["verify", str(other)]) == 2
    assert "is not a psens run file" in capsys.readouterr().err


def test_method_runs_write_their_checksums(tmp_path, fake_models):  # noqa: F811
    cfg = _config(tmp_path)
    method_runs.run(cfg, progress=False)
    found = store.verify(cfg.store)
    assert found.ok and found.has_checksums and found.checked > 10


def test_a_method_run_onto_a_foreign_file_is_refused(tmp_path, fake_models):  # noqa: F811
    cfg = _config(tmp_path)
    Path(cfg.store).write_text("my notes\n")
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="exists and is not a psens run"):
            method_runs.run(cfg, progress=False, overwrite=overwrite)
    assert Path(cfg.store).read_text() == "my notes\n"
    assert not fake_models  # refused before any model was made


def test_a_method_run_onto_a_psens_run_needs_overwrite(tmp_path, fake_models, capsys):  # noqa: F811
    config = tmp_path / "eas.toml"
    config.write_text(
        f'method = "eas"\nstore = "{tmp_path / "eas.nc"}"\n'
        'models = ["smollm2-135m-instruct"]\njudge = "smollm2-135m-instruct"\n'
        'datasets = ["arc-challenge"]\nsamples = 2\n'
    )
    assert main(["run", str(config), "--no-progress"]) == 0
    first = (tmp_path / "eas.nc").read_bytes()
    capsys.readouterr()
    fake_models.clear()
    assert main(["run", str(config), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "eas.nc exists" in err and "--overwrite" in err and len(err.splitlines()) == 1
    assert (tmp_path / "eas.nc").read_bytes() == first and not fake_models
    assert main(["run", str(config), "--no-progress", "--overwrite"]) == 0
    assert store.verify(tmp_path / "eas.nc").ok
    # an IPS export at the target is a psens run too: replaced only with --overwrite
    store.to_netcdf(RUNS / "arc.nc", tmp_path / "eas.nc", overwrite=True)
    assert main(["run", str(config), "--no-progress"]) == 2
    assert main(["run", str(config), "--no-progress", "--overwrite"]) == 0
    assert store.method_of(tmp_path / "eas.nc") == "eas"


def test_method_run_progress_goes_to_stderr(tmp_path, fake_models, capsys):  # noqa: F811
    method_runs.run(_config(tmp_path), progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "eas: smollm2-135m-instruct: " in err and "eas: judge " in err
    method_runs.run(_config(tmp_path), progress=False, overwrite=True)
    assert capsys.readouterr() == ("", "")


def test_a_file_of_an_earlier_psens_without_checksums_still_opens_and_verifies(tmp_path, capsys):
    """The shipped files were sealed in place (their arrays unchanged); a file written
    before psens sealed its exports has no checksum attr and keeps opening."""
    copy = tmp_path / "arc.nc"
    copy.write_bytes((RUNS / "arc.nc").read_bytes())
    with h5py.File(copy, "r+") as f:
        del f.attrs[store.CHECKSUM_ATTR]
    assert main(["verify", str(copy)]) == 0
    assert "no checksums recorded (written by an earlier psens)" in capsys.readouterr().out
    xr.testing.assert_equal(psens.open_run(copy), psens.open_run(RUNS / "arc.nc"))
