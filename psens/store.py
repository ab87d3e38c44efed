"""The run store: one xarray Dataset per run, persisted as zarr (schema below and in the README).

Only this module imports zarr. It owns the schema: the dimension, coordinate and
variable names below, the schema version, and the checks that refuse a store that is
not a psens run (or of an unknown version) before anything is read.

Schema (version 1)
------------------
dims
    ``model``, ``sample``, ``template``, ``subset`` (``2**n_max``), ``var`` (``n_max``),
    ``pair`` (unordered template pairs); ``shot`` when a run has few-shot settings.
coords
    ``order(subset)`` popcount; ``word(sample, var)`` the variables ('' beyond n);
    ``n_vars(sample)``; model metadata ``family, series, kind, arch, params,
    active_params, mask_token`` (model); ``perturbation(template)``;
    ``template_a(pair)``, ``template_b(pair)``.
data variables
    ``v, I_and, I_or, gamma`` (model, sample, [shot,] template, subset) float64, NaN on
    subsets beyond a sample's ``n``; ``p_target, confidence, correct`` (… template)
    float64; ``prediction`` (… template) the option letter chosen (open items: the
    generated text); ``generated`` (… template) the greedy generated text;
    ``hidden_cosine, hidden_l2`` (model, sample, [shot,] pair) final-layer hidden-state
    similarity between the two templates of a pair (appendix H);
    ``matching_error`` (model, sample) the largest universal-matching error of the block;
    ``status`` (model, sample) 0 pending / 1 done / 2 failed, with ``error`` text;
    ``prompt`` (sample, [shot,] template) and ``target`` (sample) the answer text that
    follows the prompt.
attrs
    ``psens_schema = "psens.run"``, ``psens_schema_version``, ``psens_version``, ``tau``,
    the solver settings (``solver_*``), ``config`` (JSON) and ``config_hash``.

One (model, sample) block is one chunk of every per-block variable, so a block is
written (and re-written on resume) without touching any other block; that is what lets
dask workers write regions in parallel.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from psens._validation import fail

__all__ = [
    "BLOCK_VARS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "build",
    "create",
    "open_run",
    "save",
    "to_netcdf",
    "write_block",
]

SCHEMA = "psens.run"
SCHEMA_VERSION = 1

PENDING, DONE, FAILED = 0, 1, 2

GAME_VARS = ("v", "I_and", "I_or", "gamma")
TEMPLATE_VARS = ("p_target", "confidence", "correct")
TEXT_VARS = ("prediction", "generated")
PAIR_VARS = ("hidden_cosine", "hidden_l2")
#: every variable written per (model, sample) block
BLOCK_VARS = (*GAME_VARS, *TEMPLATE_VARS, *TEXT_VARS, *PAIR_VARS, "matching_error", "status")
MODEL_META = ("family", "series", "kind", "arch", "params", "active_params", "mask_token")


def _obj(values) -> np.ndarray:
    """Strings as object arrays (zarr v3 variable-length UTF-8)."""
    return np.asarray(values, dtype=object)


def _dims(shots: bool, *tail: str) -> tuple[str, ...]:
    return ("model", "sample", *(("shot",) if shots else ()), *tail)


def build(
    *,
    models: Sequence[str],
    samples: Sequence[str],
    templates: Sequence[str],
    words: Sequence[Sequence[str]],
    prompts: np.ndarray,
    targets: Sequence[str],
    n_max: int,
    shots: Sequence[int] | None = None,
    model_meta: Mapping[str, Sequence[Any]] | None = None,
    perturbation: Sequence[str] | None = None,
    attrs: Mapping[str, Any] | None = None,
    lazy: bool = False,
):
    """An empty run Dataset of the schema (all blocks pending, values NaN).

    ``prompts`` has shape ``(sample, template)`` or ``(sample, shot, template)``.
    ``lazy=True`` backs the large variables with chunked dask arrays (one chunk per
    (model, sample) block) so that :func:`create` writes the store without allocating it.
    """
    import xarray as xr

    has_shots = shots is not None
    n_m, n_s, n_t = len(models), len(samples), len(templates)
    n_shot = len(shots) if has_shots else 0
    size = 1 << n_max
    i, j = np.triu_indices(n_t, k=1)
    lead = (n_m, n_s, *((n_shot,) if has_shots else ()))
    block = (1, 1, *((n_shot,) if has_shots else ()))

    def full(shape, chunks, dtype=np.float64, fill=np.nan):
        if lazy:
            import dask.array as da

            return da.full(shape, fill, dtype=dtype, chunks=chunks)
        return np.full(shape, fill, dtype=dtype)

    data = {}
    for name in GAME_VARS:
        data[name] = (
            _dims(has_shots, "template", "subset"),
            full((*lead, n_t, size), (*block, n_t, size)),
        )
    for name in TEMPLATE_VARS:
        data[name] = (_dims(has_shots, "template"), full((*lead, n_t), (*block, n_t)))
    for name in TEXT_VARS:
        data[name] = (_dims(has_shots, "template"), np.full((*lead, n_t), "", object))
    for name in PAIR_VARS:
        data[name] = (_dims(has_shots, "pair"), full((*lead, len(i)), (*block, len(i))))
    data["matching_error"] = (("model", "sample"), full((n_m, n_s), (1, 1)))
    data["status"] = (("model", "sample"), full((n_m, n_s), (1, 1), np.int8, PENDING))
    data["error"] = (("model", "sample"), np.full((n_m, n_s), "", object))
    prompt_dims = ("sample", "shot", "template") if has_shots else ("sample", "template")
    data["prompt"] = (prompt_dims, _obj(prompts))
    data["target"] = (("sample",), _obj(targets))

    word = np.full((n_s, n_max), "", dtype=object)
    for s, ws in enumerate(words):
        word[s, : len(ws)] = list(ws)
    order = np.array([bin(k).count("1") for k in range(size)], dtype=np.int64)
    coords: dict[str, Any] = {
        "model": _obj(models),
        "sample": _obj(samples),
        "template": _obj(templates),
        "subset": np.arange(size, dtype=np.int64),
        "var": np.arange(n_max, dtype=np.int64),
        "pair": np.arange(len(i), dtype=np.int64),
        "order": ("subset", order),
        "word": (("sample", "var"), word),
        "n_vars": ("sample", np.array([len(ws) for ws in words], dtype=np.int64)),
        "template_a": ("pair", _obj([templates[k] for k in i])),
        "template_b": ("pair", _obj([templates[k] for k in j])),
        "perturbation": ("template", _obj(perturbation or [""] * n_t)),
    }
    if has_shots:
        coords["shot"] = np.asarray(shots, dtype=np.int64)
    meta = dict(model_meta or {})
    for key in MODEL_META:
        values = meta.get(key, [None] * n_m)
        if key in ("params", "active_params"):
            coords[key] = ("model", np.array([np.nan if x is None else float(x) for x in values]))
        else:
            coords[key] = ("model", _obj(["" if x is None else str(x) for x in values]))
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        {
            "psens_schema": SCHEMA,
            "psens_schema_version": SCHEMA_VERSION,
            **{k: _attr(v) for k, v in (attrs or {}).items()},
        }
    )
    return ds


def create(path: str | os.PathLike, *, overwrite: bool = False, **schema: Any):
    """Create an empty run store (all blocks pending) and return its lazy Dataset.

    Keyword arguments are those of :func:`build`. Nothing large is allocated: the game
    variables are written as chunked NaN templates, one chunk per (model, sample) block.
    """
    path = Path(path)
    if path.exists():
        if not overwrite:
            fail("psens.store.create", f"{path} exists", "Open it with open_run or pass overwrite")
        shutil.rmtree(path)
    ds = build(lazy=True, **schema)
    save(ds, path)
    return open_run(path)


def save(ds, path: str | os.PathLike) -> Path:
    """Write a whole run Dataset (e.g. from :func:`build` or a synthetic run) as a zarr store."""
    path = Path(path)
    block = (1, 1, *((ds.sizes["shot"],) if "shot" in ds.dims else ()))
    n_t = ds.sizes["template"]
    encoding = {name: {"chunks": (*block, n_t)} for name in TEXT_VARS}
    encoding["error"] = {"chunks": (1, 1)}
    if not hasattr(ds["v"].data, "chunks"):
        ds = ds.chunk({"model": 1, "sample": 1})
        for name in ("prompt", "target"):
            ds[name] = ds[name].compute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, mode="w", compute=True, encoding=encoding, consolidated=True)
    return path


def _attr(value):
    """attrs must be JSON-able scalars/strings; dicts and lists go in as JSON text."""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    if value is None:
        return ""
    return value


def open_run(path: str | os.PathLike):
    """Open a run store lazily, refusing anything that is not a psens run of a known schema.

    Parameters
    ----------
    path : path to a ``.zarr`` folder written by :func:`psens.run`.

    Returns
    -------
    xarray.Dataset (dask-backed)
    """
    import xarray as xr

    path = Path(path)
    where = "psens.open_run"
    if not path.exists():
        fail(where, f"{path} does not exist", "Check the path, or create it with psens.run")
    try:
        import zarr

        group = zarr.open_group(str(path), mode="r", use_consolidated=False)
        attrs = dict(group.attrs)
        on_disk = set(group.array_keys())
    except Exception as exc:  # not a zarr group at all
        fail(
            where,
            f"{path} is not a zarr store ({type(exc).__name__}: {exc})",
            "Pass the folder written by psens.run",
        )
    if attrs.get("psens_schema") != SCHEMA:
        fail(
            where,
            f"{path} is a zarr store but not a psens run (no psens_schema attr)",
            "Pass a store written by psens.run",
        )
    version = attrs.get("psens_schema_version")
    if version != SCHEMA_VERSION:
        fail(
            where,
            f"{path} has psens schema version {version!r}; this psens reads "
            f"version {SCHEMA_VERSION}",
            "Upgrade psens, or re-run with this version",
        )
    lost = [v for v in (*BLOCK_VARS, "prompt", "target") if v not in on_disk]
    if lost:
        fail(
            where,
            f"{path} is damaged: the arrays {lost} are missing on disk",
            "Delete the store and run again (a run resumes block by block)",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ds = xr.open_zarr(path, consolidated=True)
        except Exception as exc:
            fail(
                where,
                f"{path} could not be read ({type(exc).__name__}: {exc})",
                "The store is damaged: delete it and run again (a run resumes block by block)",
            )
    missing = [v for v in (*BLOCK_VARS, "prompt", "target") if v not in ds]
    if missing:
        fail(where, f"{path} lacks the variables {missing}", "The store is damaged: run again")
    # numpy's StringDType (how zarr v3 returns text) becomes object, as in built runs
    text = [k for k in ds.variables if ds[k].dtype.kind == "T"]
    ds = ds.assign({k: ds[k].astype(object) for k in text if k in ds.data_vars})
    return ds.assign_coords(
        {k: (ds[k].astype(object) if k in text else ds[k]).load() for k in ds.coords}
    )


def write_block(path: str | os.PathLike, model: int, sample: int, values: Mapping[str, Any]):
    """Write one (model, sample) block (positional indices) into an existing store.

    ``values`` maps variable names to arrays shaped like one block of that variable
    (without the model and sample axes). ``status`` is written last, so a block killed
    half-way stays pending and is redone on resume.
    """
    import xarray as xr

    ds = open_run(path)
    region = {"model": slice(model, model + 1), "sample": slice(sample, sample + 1)}
    payload = {}
    for name, value in values.items():
        if name == "status":
            continue
        dims = ds[name].dims
        arr = np.asarray(value, dtype=object if ds[name].dtype == object else ds[name].dtype)
        payload[name] = (dims, arr.reshape((1, 1, *arr.shape)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if payload:
            xr.Dataset(payload).to_zarr(path, region=region, consolidated=False)
        status = np.int8(values.get("status", DONE))
        xr.Dataset({"status": (("model", "sample"), np.full((1, 1), status))}).to_zarr(
            path, region=region, consolidated=False
        )


def to_netcdf(run, path: str | os.PathLike) -> Path:
    """Export a run (Dataset or store path) to netCDF for exchange."""
    ds = open_run(run) if isinstance(run, str | os.PathLike) else run
    out = Path(path)
    ds = ds.load()
    for name in list(ds.variables):
        if ds[name].dtype == object:
            ds[name] = ds[name].astype(str)
    ds.attrs = {k: int(v) if isinstance(v, bool | np.bool_) else v for k, v in ds.attrs.items()}
    ds.to_netcdf(out, engine="h5netcdf")
    return out
