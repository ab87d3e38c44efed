"""Opening a run: a zarr store, a netCDF export or a method run file, checked, as one
Dataset (a DataTree for DBSA)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from psens._validation import fail
from psens.store.checksums import metadata_problems, verify
from psens.store.files import _refuse_damage, is_method_run, open_method_run
from psens.store.schema import (
    BLOCK_VARS,
    CHECKSUM_ATTR,
    CHECKSUM_VAR,
    CHECKSUM_VERSION_ATTR,
    EXPORT_ATTR,
    _check_schema,
    _open_group,
    check_netcdf_storage,
)

__all__ = ["item_targets", "open_run"]


def _open_netcdf(path: Path, where: str, verify: bool):
    """A netCDF file written by :func:`to_netcdf`, as the Dataset :func:`open_run` gives for
    the zarr store it came from (text as object arrays, the same checks)."""
    import xarray as xr

    check_netcdf_storage(path, where)  # before any value is read
    try:
        ds = xr.open_dataset(path, engine="h5netcdf", chunks={})
    except Exception as exc:
        fail(
            where,
            f"{path} is a file but not a psens run ({type(exc).__name__}: {exc})",
            "Pass a .zarr store or .nc file written by psens (psens run, psens export)",
        )
    _check_schema(path, ds.attrs, set(ds.variables), where, "netcdf")
    if verify and CHECKSUM_ATTR in ds.attrs:
        _refuse_damage(path, where)
    elif verify:  # an export of an earlier psens carries no checksums: read every value once
        try:
            ds = ds.load()
        except Exception as exc:
            fail(where, f"{path} is damaged ({type(exc).__name__}: {exc})", "Export it again")
    text = [k for k in ds.variables if ds[k].dtype.kind in "OSUT"]
    ds = ds.assign({k: ds[k].astype(object) for k in text if k in ds.data_vars})
    coords = {k: (ds[k].astype(object) if k in text else ds[k]).load() for k in ds.coords}
    ds = ds.assign_coords(coords)
    # netCDF attrs come back as numpy scalars, and bools (which netCDF lacks) as 0/1
    ds.attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in ds.attrs.items()}
    if "synthetic" in ds.attrs:
        ds.attrs["synthetic"] = bool(ds.attrs["synthetic"])
    ds.attrs.pop(EXPORT_ATTR, None)
    ds.attrs.pop(CHECKSUM_ATTR, None)
    return ds


def open_run(path: str | os.PathLike, *, verify: bool = False):
    """Open any run psens writes or ships, refusing anything that is not a psens run of a
    known schema.

    Parameters
    ----------
    path : path to a ``.zarr`` folder written by :func:`psens.run`, a netCDF file written
        by :func:`to_netcdf` (``psens export``), or an EAS, DBSA or subjective PSS run file
        (``psens run`` of a config with ``method = ...``).
    verify : bool
        First check the run against its checksums (:func:`psens.store.verify`, which
        reads the whole run) and refuse a damaged one, naming the damaged (model, sample)
        blocks of a store or the damaged variables of a file. A file of an earlier psens
        has no checksums: every value is read once, and a file that cannot be read is
        refused.

    Whatever ``verify`` says, a store is refused before any value is read when an array's
    metadata is not what psens writes or differs from its checksum, or the root's
    consolidated copy differs from it (:func:`psens.store.metadata_problems`); the values
    are read through each array's own metadata. A netCDF file is refused when a dataset is
    stored externally or virtual, or carries an encoding psens never writes
    (:func:`psens.store.schema.check_netcdf_storage`).

    Returns
    -------
    xarray.Dataset
        An IPS run (dask-backed) or an EAS or subjective PSS run (in memory); a DBSA run
        is an :class:`xarray.DataTree`, one group per prompt and model.
    """
    import xarray as xr

    path = Path(path)
    where = "psens.open_run"
    if path.is_file() and is_method_run(path):
        return open_method_run(path, verify=verify, where=where)
    if path.is_file():
        from psens.store.labels import label_run

        return label_run(_open_netcdf(path, where, verify))
    problems = metadata_problems(path, _open_group(path, where))
    if problems:
        shown = "; ".join(f"{name}: {why}" for name, why in problems[:3])
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        fail(
            where,
            f"{path} has metadata psens did not write ({shown}{more})",
            "psens verify STORE lists it; start the run over (psens run --overwrite)",
        )
    if verify:
        found = _verify(path)
        if not found.ok:
            fix = (
                "Start the run over (psens run --overwrite)"
                if found.damaged_arrays
                else "Run the same config again (psens run) to recompute them; "
                "psens verify STORE lists what is wrong"
            )
            fail(where, f"{path} is damaged: {found.brief()}", fix)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ds = xr.open_zarr(path, consolidated=False)  # each array's own metadata
        except Exception as exc:
            fail(
                where,
                f"{path} could not be read ({type(exc).__name__}: {exc})",
                "The store is damaged: delete it and run again (a run resumes block by block)",
            )
    ds = ds.drop_vars(CHECKSUM_VAR, errors="ignore")
    ds.attrs.pop(CHECKSUM_ATTR, None)
    ds.attrs.pop(CHECKSUM_VERSION_ATTR, None)
    missing = [v for v in (*BLOCK_VARS, "prompt", "target") if v not in ds]
    if missing:
        fail(where, f"{path} lacks the variables {missing}", "The store is damaged: run again")
    # numpy's StringDType (how zarr v3 returns text) becomes object, as in built runs
    text = [k for k in ds.variables if ds[k].dtype.kind == "T"]
    ds = ds.assign({k: ds[k].astype(object) for k in text if k in ds.data_vars})
    try:
        coords = {k: (ds[k].astype(object) if k in text else ds[k]).load() for k in ds.coords}
    except Exception as exc:  # a damaged coordinate chunk (codec errors vary)
        fail(
            where,
            f"{path} is damaged: its coordinates could not be read ({type(exc).__name__})",
            "See psens verify STORE; start the run over (psens run --overwrite)",
        )
    from psens.store.labels import label_run

    return label_run(ds.assign_coords(coords))  # ds.sel(pair="ips1|ips4"), order_band


_verify = verify


def item_targets(ds) -> np.ndarray:
    """Each sample's target as the run's predictions name options: an MCQ target is the
    correct option's label in the item's own labels (``prediction``'s label space), an
    open-ended one the reference answer; stripped of the answer prefix.

    Exports of format-space runs made before the target was stored in the item's labels
    hold it in the first format's labels (``" a"`` or ``" 1"`` where the item says ``"A"``):
    such a target at position :math:`p` of that label style reads as the :math:`p`-th of the
    item's own labels, which are digits or lowercase letters when the sample's predictions
    are, else ``A, B, C, ...``. A target already in the item's labels reads as itself.

    Examples
    --------
    >>> import xarray as xr
    >>> old = xr.Dataset(
    ...     {"target": ("sample", [" b", " a"]),
    ...      "prediction": (("model", "sample", "template"), [[["B", "A"], ["C", "A"]]])},
    ...     coords={"template": ["fmt-000000070000", "ips1"]})
    >>> item_targets(old).tolist()
    ['B', 'A']
    """
    from psens import prompts

    raw = np.asarray([str(x).strip() for x in np.ravel(ds["target"].values)], dtype=object)
    try:
        first = prompts.get_template(str(ds["template"].values[0]))
    except (ValueError, KeyError):
        return raw
    alphabet = prompts.LABEL_STYLES.get(first.labels, "")
    if first.kind != "mcq" or first.labels not in ("a", "1") or "prediction" not in ds:
        return raw
    preds = np.asarray(ds["prediction"].transpose("sample", ...).values, dtype=object)
    preds = preds.reshape(len(raw), -1)  # [sample, everything else]
    out = raw.copy()
    for s, target in enumerate(raw):
        if len(target) != 1 or target not in alphabet:
            continue
        seen = [str(x) for x in preds[s] if str(x)]
        if seen and all(x.isdigit() for x in seen):
            own = prompts.LABEL_STYLES["1"]
        elif seen and all(x.islower() for x in seen):
            own = prompts.LABEL_STYLES["a"]
        else:
            own = prompts.LABEL_STYLES["A"]
        out[s] = own[alphabet.index(target)]
    return out
