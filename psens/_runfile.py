"""The run files of the output-level methods (EAS, DBSA, subjective PSS): the config base
class and its checks, the attrs, writing and opening. :mod:`psens.method_runs` is the entry
point (load, run, summarize).

A method run is written in one go as a netCDF file marked with the attrs ``psens_method``
(``"eas"``, ``"dbsa"``, ``"subjective"``) and ``psens_method_version``; :func:`open_run`
opens an EAS or subjective PSS file as an :class:`xarray.Dataset` and a DBSA file as an
:class:`xarray.DataTree` (one group per prompt and model).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from psens._validation import check_positive_int, fail

__all__ = [
    "METHODS",
    "MethodConfig",
    "check_dataset_names",
    "check_models",
    "is_method_run",
    "method_attrs",
    "method_of",
    "open_run",
    "set_threads",
    "write",
]

METHOD_ATTR = "psens_method"
VERSION_ATTR = "psens_method_version"
VERSION = 1
#: the methods with a stored run of their own (IPS runs are psens.store stores)
METHODS = ("eas", "dbsa", "subjective")


@dataclass
class MethodConfig:
    """Shared construction and checks of the EAS and DBSA run configs."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("store",)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]):
        """Build from a mapping, refusing unknown keys (with the closest valid key) and
        missing required keys, then :meth:`check`."""
        from psens.config import check_keys

        where = f"psens {raw.get('method', '?') if isinstance(raw, dict) else '?'} config"
        check_keys(raw, [f.name for f in dataclasses.fields(cls)], cls.REQUIRED, where)
        cfg = cls(**raw)
        cfg.check()
        return cfg

    def check(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def check_common(self, where: str) -> None:
        """``store`` a non-empty path ending in ``.nc``, ``models`` a non-empty list of
        distinct names, ``seed`` an int, ``threads`` positive or None."""
        store = getattr(self, "store", "")
        if not isinstance(store, str | os.PathLike) or not str(store).strip():
            fail(
                where,
                f"store = {store!r}",
                'Give the netCDF file to write, e.g. store = "runs/x.nc"',
            )
        if Path(store).suffix != ".nc":
            fail(where, f"store = {str(store)!r} is not a .nc file", "End the path in .nc")
        models = getattr(self, "models", None)
        if (
            not isinstance(models, list | tuple)
            or not models
            or not all(isinstance(m, str) and m.strip() for m in models)
        ):
            fail(where, f"models = {models!r}", 'Write models = ["smollm2-135m-instruct", ...]')
        if len(set(models)) != len(models):
            fail(where, "'models' lists a model twice", "Remove the duplicate")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            fail(where, f"seed = {self.seed!r}", "Use an integer seed")
        if self.threads is not None:
            check_positive_int(self.threads, where, "threads")

    def check_judge(self, where: str) -> None:
        """``judge`` a non-empty model name (the EAS and subjective PSS judges)."""
        judge = getattr(self, "judge", None)
        if not isinstance(judge, str) or not judge.strip():
            fail(
                where, f"judge = {judge!r}", 'Name the judge, e.g. judge = "smollm2-135m-instruct"'
            )


def check_models(names: list[str], where: str) -> None:
    """Every name must be a local model psens can load (packaged, table, path or hub id);
    nothing is loaded."""
    from psens.models.spec import ModelSpec

    for name in names:
        ModelSpec.from_entry(name, where=where)  # resolved as a run's models are


def check_dataset_names(names: Any, where: str) -> None:
    """A non-empty list of distinct dataset names :func:`psens.datasets.load` knows."""
    from psens.datasets import _canonical

    if (
        not isinstance(names, list | tuple)
        or not names
        or not all(isinstance(n, str) for n in names)
    ):
        fail(where, f"datasets = {names!r}", 'Write datasets = ["arc-challenge", "boolq", "squad"]')
    if len(set(names)) != len(names):
        fail(where, "'datasets' lists a dataset twice", "Remove the duplicate")
    for name in names:
        _canonical(name)


def method_attrs(method: str, cfg: MethodConfig) -> dict[str, Any]:
    """The attrs every method run carries: its method and version, the psens version, and
    the config (JSON-able values, lists as JSON text)."""
    import json

    from psens._version import __version__

    attrs: dict[str, Any] = {
        METHOD_ATTR: method,
        VERSION_ATTR: VERSION,
        "psens_version": __version__,
    }
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name == "store":
            continue
        if isinstance(value, list | tuple | dict):
            value = json.dumps(value, sort_keys=True)
        attrs[f.name] = "" if value is None else value
    return attrs


def set_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` when given (runs are identical for a fixed count)."""
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))


def _encoding(ds) -> dict[str, dict]:
    """zlib compression of every numeric variable (NaN padding compresses to nothing)."""
    return {
        name: {"zlib": True, "complevel": 4}
        for name, var in ds.data_vars.items()
        if var.dtype.kind in "fiub"
    }


def _text_as_str(ds):
    for name in list(ds.variables):
        if ds[name].dtype == object:
            ds[name] = ds[name].astype(str)
    return ds


def write(obj, path: str | os.PathLike) -> Path:
    """Write a method run (a Dataset, or a DataTree for DBSA) to netCDF: into a hidden
    sibling first, then renamed into place, so a killed run leaves no half-written file."""
    import xarray as xr

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.writing")
    try:
        if isinstance(obj, xr.DataTree):
            tree = obj.copy()
            enc = {}
            for node in tree.subtree:
                ds = _text_as_str(node.to_dataset())
                node.dataset = ds
                enc[node.path] = _encoding(ds)
            tree.to_netcdf(tmp, engine="h5netcdf", encoding=enc)
        else:
            ds = _text_as_str(obj.copy())
            ds.to_netcdf(tmp, engine="h5netcdf", encoding=_encoding(ds))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def method_of(path: str | os.PathLike) -> str | None:
    """The method of a stored method run (``"eas"``, ``"dbsa"``), or None for anything else
    (an IPS store or export, a missing file, a file that is not netCDF)."""
    import h5py

    path = Path(path)
    if not path.is_file():
        return None
    try:
        with h5py.File(path, "r") as f:
            value = f.attrs.get(METHOD_ATTR)
    except Exception:  # not HDF5 / netCDF4
        return None
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, np.ndarray):
        value = value.item()
    return str(value) if value is not None else None


def is_method_run(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an EAS, DBSA or subjective PSS run file."""
    return method_of(path) in METHODS


def _object_text(ds):
    text = [k for k in ds.variables if ds[k].dtype.kind in "OSUT"]
    ds = ds.assign({k: ds[k].astype(object) for k in text if k in ds.data_vars})
    coords = {k: (ds[k].astype(object) if k in text else ds[k]) for k in ds.coords}
    ds = ds.assign_coords(coords)
    ds.attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in ds.attrs.items()}
    return ds


def open_run(path: str | os.PathLike):
    """Open an EAS or subjective PSS run (Dataset) or a DBSA run (DataTree), loaded into
    memory, text as object arrays; anything else is refused with the fix, and so is a file
    with a dataset stored externally or virtual or an encoding psens never writes
    (:func:`psens.store.schema.check_netcdf_storage`, before any value is read)."""
    import xarray as xr

    from psens.store.schema import check_netcdf_storage

    where = "psens.method_runs.open_run"
    path = Path(path)
    if not path.is_file():
        fail(where, f"{path} does not exist", "Check the path, or write it with psens run CONFIG")
    method = method_of(path)
    if method not in METHODS:
        fail(
            where,
            f"{path} is not an EAS, DBSA or subjective PSS run (no {METHOD_ATTR} attr)",
            "Open IPS runs with psens.open_run; write method runs with psens run CONFIG",
        )
    check_netcdf_storage(path, where)
    if method != "dbsa":  # EAS and subjective PSS runs are one Dataset
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            out = _object_text(ds.load())
    else:
        with xr.open_datatree(path, engine="h5netcdf") as tree:
            tree = tree.load()
        out = xr.DataTree.from_dict(
            {node.path: _object_text(node.to_dataset()) for node in tree.subtree}
        )
    version = out.attrs.get(VERSION_ATTR)
    if version != VERSION:
        fail(
            where,
            f"{path} is a {method} run of version {version!r}; this psens reads version {VERSION}",
            "Run its config again with this psens",
        )
    return out
