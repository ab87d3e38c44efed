"""Exporting a run to one netCDF file (``psens export``) without ever overwriting a file that
is not a psens run file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from psens.store.files import METHOD_ATTR, check_target, write_file, write_method_run
from psens.store.read import open_run
from psens.store.schema import DERIVED_COORDS, EXPORT_ATTR

__all__ = ["check_export_target", "to_netcdf"]


def check_export_target(
    path: str | os.PathLike, *, overwrite: bool = False, source: str | os.PathLike | None = None
) -> Path:
    """Refuse an export path that would destroy something (:func:`check_target`): an
    existing file unless ``overwrite`` and it is a psens run file, a folder, a path inside
    the store ``source``, or a folder that does not exist or cannot be written."""
    return check_target(path, overwrite=overwrite, source=source, where="psens export")


def to_netcdf(run, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Export a run (Dataset, DataTree or path of a store or run file) to netCDF for
    exchange.

    The file is written beside ``path``, sealed with its checksums and renamed into place
    (:func:`psens.store.files.write_file`); an IPS export carries the attr
    :data:`EXPORT_ATTR`, a method run (EAS, DBSA, subjective PSS) is written as such.
    Nothing is overwritten but an earlier psens run file, and only with ``overwrite``
    (:func:`check_export_target`).
    """
    source = run if isinstance(run, str | os.PathLike) else None
    check_export_target(path, overwrite=overwrite, source=source)
    ds = open_run(run) if source is not None else run
    if METHOD_ATTR in ds.attrs:
        return write_method_run(ds, path, overwrite=overwrite)
    ds = ds.drop_vars(DERIVED_COORDS, errors="ignore").load()
    for name in list(ds.variables):
        if ds[name].dtype == object:
            ds[name] = ds[name].astype(str)
    ds.attrs = {k: int(v) if isinstance(v, bool | np.bool_) else v for k, v in ds.attrs.items()}
    from psens._version import __version__

    ds.attrs[EXPORT_ATTR] = __version__
    return write_file(lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"), path, overwrite=overwrite)
