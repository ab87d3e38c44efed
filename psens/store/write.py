"""The zarr engine's writing side: creating a store (:func:`create`, :func:`save`) and writing
one (model, sample) block (:func:`write_block`).
"""

from __future__ import annotations

import os
import shutil
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from psens._validation import fail
from psens.store.checksums import _block_checksum, _digest, _seal
from psens.store.read import open_run
from psens.store.safety import (
    _check_writer,
    _move_into_place,
    _refuse_replacing,
    _sibling,
    lock,
    remove_leftovers,
)
from psens.store.schema import (
    CHECKSUM_VAR,
    DATA_VARS,
    DERIVED_COORDS,
    DONE,
    FAILED,
    PENDING,
    RUN_ID_ATTR,
    SCHEMA,
    TEXT_VARS,
    build,
)

__all__ = ["create", "save", "write_block"]


def create(path: str | os.PathLike, *, overwrite: bool = False, **schema: Any):
    """Create an empty run store (all blocks pending) and return its lazy Dataset.

    Keyword arguments are those of :func:`build`. Nothing large is allocated: the game
    variables are written as chunked NaN templates, one chunk per (model, sample) block.
    The store is written into a hidden sibling folder and renamed into place, so a kill
    during creation leaves no half-made store; it gets a new ``run_id`` attr.

    Parameters
    ----------
    path : where the store goes.
    overwrite : bool
        Replace what is at ``path``, which must be a psens store or an empty folder
        (anything else, the current or home folder and a filesystem root are refused).
    """
    path = Path(path)
    where = "psens.store.create"

    def check() -> None:
        if path.exists() or path.is_symlink():
            if not overwrite:
                fail(where, f"{path} exists", "Open it with open_run or pass overwrite")
            _refuse_replacing(path, where)

    check()  # before the lock: nothing (not even a lock file) is made for a refused path
    with lock(path, where):
        check()
        ds = build(lazy=True, **schema)
        ds.attrs[RUN_ID_ATTR] = uuid.uuid4().hex
        _write_atomically(ds, path)
    return open_run(path)


def save(ds, path: str | os.PathLike) -> Path:
    """Write a whole run Dataset (e.g. from :func:`build` or a synthetic run) as a zarr store.

    Like :func:`create`, the store is written beside ``path`` and renamed into place, and
    only a psens store or an empty folder at ``path`` is replaced. Checksums of the
    coordinates and of every block that is not pending are recorded.
    """
    path = Path(path)
    where = "psens.store.save"
    if path.exists() or path.is_symlink():
        _refuse_replacing(path, where)
    with lock(path, where):
        if path.exists() or path.is_symlink():
            _refuse_replacing(path, where)
        _write_atomically(ds, path)
    return path


def _write_atomically(ds, path: Path) -> None:
    """Write into a hidden sibling, record the checksums, rename into place (lock held)."""
    remove_leftovers(path)
    tmp = _sibling(path, "creating")
    try:
        _write(ds, tmp)
        _seal(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _move_into_place(tmp, path)


def _write(ds, path: Path) -> None:
    n_m, n_s = ds.sizes["model"], ds.sizes["sample"]
    block = (1, 1, *((ds.sizes["shot"],) if "shot" in ds.dims else ()))
    n_t = ds.sizes["template"]
    encoding = {name: {"chunks": (*block, n_t)} for name in TEXT_VARS}
    encoding["error"] = {"chunks": (1, 1)}
    encoding[CHECKSUM_VAR] = {"chunks": (1, 1)}
    ds = ds.drop_vars([CHECKSUM_VAR, *DERIVED_COORDS], errors="ignore")
    # text as psens writes it (variable-length strings), whatever numpy dtype it came in
    fixed = [k for k, var in ds.variables.items() if var.dtype.kind == "U"]
    ds = ds.assign_coords({k: ds[k].astype(object) for k in fixed if k in ds.coords})
    ds = ds.assign({k: ds[k].astype(object) for k in fixed if k in ds.data_vars})
    ds = ds.assign({CHECKSUM_VAR: (("model", "sample"), np.full((n_m, n_s), "", object))})
    if not hasattr(ds["v"].data, "chunks"):
        ds = ds.chunk({"model": 1, "sample": 1})
        for name in ("prompt", "target"):
            ds[name] = ds[name].compute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, mode="w", compute=True, encoding=encoding, consolidated=True)


def write_block(
    path: str | os.PathLike,
    model: int,
    sample: int,
    values: Mapping[str, Any],
    *,
    run_id: str | None = None,
) -> str:
    """Write one (model, sample) block (positional indices) into an existing store.

    ``values`` maps variable names (of :data:`DATA_VARS`, and ``status``, default done) to
    arrays shaped like one block of that variable (without the model and sample axes). The
    whole block is replaced: a variable not given is written empty (NaN, or '' for text),
    and a failed block (``status`` failed) is written all NaN with only its ``error`` text,
    so it never keeps numbers of an earlier attempt.

    Order on disk: ``status`` pending first, then the values and their checksum, then
    ``status``; a block killed half-way is pending and is redone on resume.

    Parameters
    ----------
    run_id : str, optional
        The run id the writer started with (the store's ``run_id`` attr): the write is
        refused when the store now holds another run (re-created with overwrite), so a
        stale process never writes into it. None skips the check.

    Returns
    -------
    str
        The block's checksum record.
    """
    import zarr

    path = Path(path)
    where = "psens.store.write_block"
    _check_writer(path, run_id, where)
    try:
        group = zarr.open_group(str(path), mode="r+")
    except Exception as exc:
        fail(
            where,
            f"{path} is not a zarr store ({type(exc).__name__}: {exc})",
            "Pass a store made by psens.store.create",
        )
    if group.attrs.get("psens_schema") != SCHEMA:
        fail(where, f"{path} is not a psens run", "Pass a store made by psens.store.create")
    unknown = sorted(set(values) - {*DATA_VARS, "status"})
    if unknown:
        fail(where, f"unknown block variables {unknown}", f"Use some of {list(DATA_VARS)}")
    st = group["status"]
    n_m, n_s = st.shape
    if not (0 <= model < n_m and 0 <= sample < n_s):
        fail(
            where,
            f"block ({model}, {sample}) is outside the store's {n_m} x {n_s} blocks",
            "Pass positional (model, sample) indices",
        )
    status = int(values.get("status", DONE))
    payload = {}
    for name in DATA_VARS:
        if name not in group:  # an older store
            continue
        arr = group[name]
        shape = tuple(arr.shape[2:])
        given = values.get(name) if (status != FAILED or name == "error") else None
        if arr.dtype.kind in "fiu":
            value = np.full(shape, np.nan) if given is None else np.asarray(given, dtype=arr.dtype)
        else:
            raw = np.asarray("" if given is None else given, dtype=object)
            raw = np.broadcast_to(raw, shape) if given is None else raw
            flat = ["" if x is None else str(x) for x in raw.ravel().tolist()]
            value = np.array(flat, dtype=object).reshape(raw.shape)
        if value.shape != shape:
            if value.size != int(np.prod(shape, dtype=np.int64)):
                fail(
                    where,
                    f"{name} has shape {value.shape}; one block of it has shape {shape}",
                    "Pass one block's values",
                )
            value = value.reshape(shape)
        payload[name] = value
    checksum = _block_checksum({name: _digest(name, v) for name, v in payload.items()})
    st[model, sample] = PENDING
    for name, value in payload.items():
        group[name][model, sample] = value
    if CHECKSUM_VAR in group:
        group[CHECKSUM_VAR][model, sample] = np.asarray(checksum, dtype=object)
    _check_writer(path, run_id, where)
    st[model, sample] = np.int8(status)
    return checksum
