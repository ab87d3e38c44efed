"""Exporting a run to one netCDF file (``psens export``) without ever overwriting a file that
is not an export.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import numpy as np

from psens._validation import fail
from psens.store.read import open_run
from psens.store.schema import DERIVED_COORDS, EXPORT_ATTR, SCHEMA

__all__ = ["check_export_target", "to_netcdf"]


def _is_export(path: Path) -> bool:
    """Whether ``path`` is a netCDF file written by :func:`to_netcdf` (its marker attr, or
    the run schema attr of an export of an older psens)."""
    try:
        import h5py

        with h5py.File(path, "r") as f:
            attrs = dict(f.attrs)
    except Exception:  # not HDF5 at all
        return False
    schema = attrs.get("psens_schema")
    schema = schema.decode() if isinstance(schema, bytes) else schema
    return EXPORT_ATTR in attrs or schema == SCHEMA


def check_export_target(
    path: str | os.PathLike, *, overwrite: bool = False, source: str | os.PathLike | None = None
) -> Path:
    """Refuse an export path that would destroy something: an existing file unless
    ``overwrite`` and it is a psens export, a folder, a path inside the store ``source``,
    or a folder that does not exist or cannot be written. Returns the path."""
    where = "psens export"
    out = Path(path)
    full = Path(os.path.realpath(out))
    if source is not None:
        src = Path(os.path.realpath(source))
        if full == src or src in full.parents:
            fail(where, f"{out} is inside the store {source}", "Export to a path outside the store")
    if out.is_dir():
        fail(where, f"{out} is a folder", "Name the .nc file to write, e.g. run.nc")
    if out.exists() or out.is_symlink():
        if not overwrite:
            fail(where, f"{out} exists", "Choose another path, or pass --overwrite to replace it")
        if not _is_export(out):
            fail(
                where,
                f"{out} exists and is not a psens export (--overwrite replaces only those)",
                "Choose another path, or move that file away",
            )
    parent = full.parent
    if not parent.is_dir():
        fail(where, f"the folder {out.parent} does not exist", f"Create it (mkdir -p {out.parent})")
    if not os.access(parent, os.W_OK):
        fail(where, f"the folder {out.parent} cannot be written", "Export to a writable folder")
    return out


def to_netcdf(run, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Export a run (Dataset or store path) to netCDF for exchange.

    The file is written beside ``path`` and renamed into place, and carries the attr
    :data:`EXPORT_ATTR`. Nothing is overwritten but an earlier export, and only with
    ``overwrite`` (:func:`check_export_target`).
    """
    source = run if isinstance(run, str | os.PathLike) else None
    out = check_export_target(path, overwrite=overwrite, source=source)
    ds = open_run(run) if source is not None else run
    ds = ds.drop_vars(DERIVED_COORDS, errors="ignore").load()
    for name in list(ds.variables):
        if ds[name].dtype == object:
            ds[name] = ds[name].astype(str)
    ds.attrs = {k: int(v) if isinstance(v, bool | np.bool_) else v for k, v in ds.attrs.items()}
    from psens._version import __version__

    ds.attrs[EXPORT_ATTR] = __version__
    tmp = out.with_name(f".{out.name}.writing-{uuid.uuid4().hex[:12]}")
    try:
        ds.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        fail("psens export", f"{out} could not be written ({exc})", "Check the disk and folder")
    return out
