"""netCDF files whose values would come from elsewhere: a dataset in HDF5 external storage
(pointing at any local file), a virtual dataset (mapped from another file), a link to another
file, or an encoding psens never writes. Every netCDF reader of psens (IPS exports, method
runs, query logs) refuses them in one line before reading a value."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import psens
from psens import store
from psens.pss import subjective
from psens.synthetic import synthetic_run

h5py = pytest.importorskip("h5py")

SECRET = "TOP-SECRET-CONTENTS-" * 8


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A netCDF export of a small IPS run."""
    folder = tmp_path_factory.mktemp("export")
    path = store.save(synthetic_run(n_samples=2, n_vars=(3,)), folder / "r.zarr")
    return store.to_netcdf(path, folder / "r.nc")


@pytest.fixture(scope="module")
def method_run(tmp_path_factory):
    """A subjective PSS run file (a method run)."""
    ds = subjective.synthetic_run(n_samples=3)
    ds.attrs["synthetic"] = 1  # netCDF has no booleans
    return store.write_method_run(ds, tmp_path_factory.mktemp("m") / "s.nc")


def _craft(src: Path, out: Path, name: str, kind: str) -> Path:
    """A copy of ``src`` whose dataset ``name`` (2-D text) now reads a local file: through
    HDF5 external storage, a virtual dataset, or an external link; dimension scales and
    attributes kept, so xarray opens it as before."""
    shutil.copy(src, out)
    secret = out.with_name("secret.txt")
    secret.write_text(SECRET)
    with h5py.File(out, "r+") as f:
        old = f[name]
        shape = old.shape
        attrs = {k: v for k, v in old.attrs.items() if k != "DIMENSION_LIST"}
        scales = [d[0].name for d in old.dims]
        del f[name]
        width = 8
        if kind == "external":
            new = f.create_dataset(
                name, shape=shape, dtype=f"S{width}", external=[(str(secret), 0, 10_000)]
            )
        elif kind == "virtual":
            source = out.with_name("source.h5")
            with h5py.File(source, "w") as g:
                g["secret"] = np.full(shape, SECRET[:width].encode(), dtype=f"S{width}")
            layout = h5py.VirtualLayout(shape=shape, dtype=f"S{width}")
            layout[...] = h5py.VirtualSource(str(source), "secret", shape=shape)
            new = f.create_virtual_dataset(name, layout)
        else:  # an external link to a file holding the secret
            source = out.with_name("linked.h5")
            with h5py.File(source, "w") as g:
                g["secret"] = np.full(shape, SECRET[:width].encode(), dtype=f"S{width}")
            f[name] = h5py.ExternalLink(str(source), "/secret")
            return out
        for k, v in attrs.items():
            new.attrs[k] = v
        for axis, scale in enumerate(scales):
            new.dims[axis].attach_scale(f[scale])
    return out


def test_without_the_check_xarray_would_read_the_local_file(export, tmp_path):
    """The reason for the refusal: the crafted file's text is the local file's contents."""
    import xarray as xr

    crafted = _craft(export, tmp_path / "x.nc", "prompt", "external")
    with xr.open_dataset(crafted, engine="h5netcdf") as ds:
        assert ds["prompt"].values[0, 0].decode() == SECRET[:8]


@pytest.mark.parametrize("kind", ["external", "virtual", "link"])
def test_an_ips_export_reading_another_file_is_refused(export, tmp_path, kind, capsys):
    from psens.cli import main

    crafted = _craft(export, tmp_path / "x.nc", "prompt", kind)
    words = {"external": "external file", "virtual": "virtual dataset", "link": "link"}[kind]
    for check in (False, True):
        with pytest.raises(ValueError, match=words) as err:
            store.open_run(crafted, verify=check)
        assert "\n" not in str(err.value) and "/prompt" in str(err.value)
        assert SECRET[:8] not in str(err.value)
    assert main(["summary", str(crafted)]) == 2
    out = capsys.readouterr()
    assert SECRET[:8] not in out.out + out.err and words in out.err


@pytest.mark.parametrize("kind", ["external", "virtual"])
def test_a_method_run_reading_another_file_is_refused(method_run, tmp_path, kind):
    crafted = _craft(method_run, tmp_path / "m.nc", "prompt", kind)
    assert store.method_of(crafted) == "subjective"
    with pytest.raises(ValueError, match=r"external file|virtual dataset") as err:
        psens.open_run(crafted)
    assert "\n" not in str(err.value)


def test_a_query_log_in_external_storage_is_refused(tmp_path):
    from psens.ips.sparse import open_log

    log = tmp_path / "log.nc"
    with h5py.File(log, "w") as f:
        f.attrs["psens_schema"] = "psens.sparse_queries"
        f.create_dataset("v", shape=(4,), dtype="<f8", external=[(str(log), 0, 32)])
    with pytest.raises(ValueError, match="external file"):
        open_log(log)


@pytest.mark.parametrize(
    ("attr", "value", "needle"),
    [
        ("scale_factor", 0.0, "scale_factor"),
        ("add_offset", 0.3, "add_offset"),
        ("units", "days since 2000-01-01", "units"),
        ("_FillValue", np.array([0.3]), "_FillValue"),
    ],
)
def test_an_export_with_an_encoding_psens_never_writes_is_refused(
    export, tmp_path, attr, value, needle
):
    crafted = tmp_path / "e.nc"
    shutil.copy(export, crafted)
    with h5py.File(crafted, "r+") as f:
        if attr in f["correct"].attrs:
            del f["correct"].attrs[attr]
        f["correct"].attrs[attr] = value
    with pytest.raises(ValueError, match=needle) as err:
        store.open_run(crafted)
    assert "/correct" in str(err.value) and "\n" not in str(err.value)


def test_the_files_psens_writes_pass(export, method_run):
    """The export and method run above, and every shipped run, hold nothing refused."""
    from psens.store.schema import check_netcdf_storage

    shipped = sorted((Path(__file__).parents[1] / "data" / "runs").glob("*.nc"))
    assert shipped
    for path in [export, method_run, *shipped]:
        check_netcdf_storage(path, "test")  # raises on a refusal
    assert store.open_run(export, verify=True)["prompt"].values[0, 0]
    assert psens.open_run(method_run)["prompt"].values[0, 0]
