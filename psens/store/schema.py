"""The run store's schema, shared by both engines: names, the in-memory Dataset of a run
(:func:`build`), attribute encoding, and the one schema check of zarr stores and netCDF
exports (the "common" module beside one module per engine, as xarray lays out its backends).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from psens._validation import fail

__all__ = [
    "BLOCK_VARS",
    "CHECKSUM_ATTR",
    "CHECKSUM_VAR",
    "CLOZE_VARS",
    "DATA_VARS",
    "DERIVED_COORDS",
    "FLOOR_BANDS",
    "FLOOR_VARS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "build",
]


SCHEMA = "psens.run"


SCHEMA_VERSION = 1


PENDING, DONE, FAILED = 0, 1, 2


GAME_VARS = ("v", "I_and", "I_or", "gamma")


TEMPLATE_VARS = ("p_target", "confidence", "correct")


TEXT_VARS = ("prediction", "generated")


PAIR_VARS = ("hidden_cosine", "hidden_l2")


#: the noise floor's variables (only in runs with ``noise_floor``) and its ``band`` labels
FLOOR_VARS = ("v_floor", "floor")


FLOOR_BANDS = ("all", "low", "mid", "high")


#: the cloze formulation's variables (only in runs with ``answer = "cloze"``): each option's
#: summed log-likelihood per mask and its continuation's tokens (:mod:`psens.cloze`)
CLOZE_VARS = ("option_loglik", "option_tokens")
#: coordinates derived when a run is read or built (:func:`psens.store.labels.label_run`),
#: never written to a store or an export
DERIVED_COORDS = ("order_band",)


#: every variable written per (model, sample) block (all runs have them)
BLOCK_VARS = (*GAME_VARS, *TEMPLATE_VARS, *TEXT_VARS, *PAIR_VARS, "matching_error", "status")


#: the values of a block, in checksum order (``status`` is the commit flag, written last);
#: a variable the store does not have (the floor's, or in an older store) is left out
DATA_VARS = (
    *GAME_VARS,
    *TEMPLATE_VARS,
    *TEXT_VARS,
    *PAIR_VARS,
    "matching_error",
    "error",
    *FLOOR_VARS,
    *CLOZE_VARS,
)


#: per-block checksums (on disk only) and the root attr with the coordinates' checksums
CHECKSUM_VAR = "block_checksum"


CHECKSUM_ATTR = "psens_checksums"


#: the root attr with the checksum format: 2 records a digest of every array's metadata
#: document as well; stores of older psens lack it (format 1: values and root attrs only)
CHECKSUM_VERSION_ATTR = "psens_checksum_version"


CHECKSUM_VERSION = 2


#: the array attributes psens writes: xarray's ``coordinates``, ``_FillValue`` (NaN, on float
#: arrays only) and ``dtype = "bool"`` (a boolean in netCDF). Any other attribute
#: (``scale_factor``, ``add_offset``, ``missing_value``, ``units``, ...) would change what
#: xarray decodes, and is refused
ARRAY_ATTRS = ("coordinates", "_FillValue", "dtype")


#: netCDF-4's own bookkeeping attributes (dimension scales) in the HDF5 files it writes
_NETCDF_INTERNAL_ATTRS = (
    "_Netcdf4Dimid",
    "_Netcdf4Coordinates",
    "DIMENSION_LIST",
    "REFERENCE_LIST",
    "CLASS",
    "NAME",
    "_nc3_strict",
)


#: the zarr data types psens writes, each with the chunk fill value it writes
_ZARR_FILL = {"float64": "NaN", "int64": 0, "int8": 0, "bool": False, "string": ""}


#: the zarr codecs psens writes (``bytes``/``vlen-utf8`` serialise, ``zstd`` compresses) and
#: the lossless compressors of other zarr versions; none changes a decoded value
_ZARR_CODECS = ("bytes", "vlen-utf8", "zstd", "blosc", "gzip")


#: the float variables (float64 in every store) and the commit flag (int8)
_FLOAT_VARS = (*GAME_VARS, *TEMPLATE_VARS, *PAIR_VARS, "matching_error", *FLOOR_VARS)


RUN_ID_ATTR = "run_id"


#: name tags of the hidden sibling folders of a store being created or replaced
_SIBLING_TAGS = ("creating", "replaced")


#: bytes of one array read at once while verifying (a slab of samples of one model)
_SLAB_BYTES = 1 << 26


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
    template_coords: Mapping[str, Sequence[str]] | None = None,
    attrs: Mapping[str, Any] | None = None,
    lazy: bool = False,
    noise_floor: str | None = None,
    solvers: Sequence[str] | None = None,
    cloze: Mapping[str, Sequence] | None = None,
):
    """An empty run Dataset of the schema (all blocks pending, values NaN).

    ``cloze`` (a run with ``answer = "cloze"``: ``{"labels": per sample its option labels,
    "bytes": per sample its options' UTF-8 bytes, "answer": per sample the position of
    the correct option}``) adds the ``option`` dim (the most options of a sample), the
    block variables ``option_loglik`` (…, template, subset, option) and ``option_tokens``
    (…, template, option), and the coordinates ``option_label`` and ``option_bytes``
    (sample, option; ``''`` and 0 beyond a sample's options) and ``answer_option``
    (sample).

    ``prompts`` has shape ``(sample, template)`` or ``(sample, shot, template)``.
    ``noise_floor`` (a dtype name) adds ``v_floor``, ``floor`` and the ``band`` dim, and
    the attr ``noise_floor``. ``template_coords`` (``{dimension: value per template}``, a
    format-space run) adds one coordinate ``fmt_<dimension>`` along ``template`` each, so
    ``ds.where(ds.fmt_case == "upper", drop=True)`` keeps the upper-case formats.
    ``solvers`` (a list of solver names) adds the ``solver`` dim
    to the interactions (``I_and``, ``I_or``, ``gamma``, ``floor``).
    ``lazy=True`` backs the large variables with chunked dask arrays (one chunk per
    (model, sample) block) so that :func:`create` writes the store without allocating it.
    """
    import xarray as xr

    from psens.store.labels import label_run
    from psens.store.pairs import pair_label

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
    mid = ("solver",) if solvers is not None else ()  # the solver dim of the interactions
    n_sv = (len(solvers),) if solvers is not None else ()
    for name in GAME_VARS:
        by = () if name == "v" else mid
        n_by = () if name == "v" else n_sv
        data[name] = (
            _dims(has_shots, *by, "template", "subset"),
            full((*lead, *n_by, n_t, size), (*block, *n_by, n_t, size)),
        )
    for name in TEMPLATE_VARS:
        data[name] = (_dims(has_shots, "template"), full((*lead, n_t), (*block, n_t)))
    for name in TEXT_VARS:
        data[name] = (_dims(has_shots, "template"), np.full((*lead, n_t), "", object))
    for name in PAIR_VARS:
        data[name] = (_dims(has_shots, "pair"), full((*lead, len(i)), (*block, len(i))))
    if noise_floor:
        n_b = len(FLOOR_BANDS)
        data["v_floor"] = (
            _dims(has_shots, "template", "subset"),
            full((*lead, n_t, size), (*block, n_t, size)),
        )
        data["floor"] = (
            _dims(has_shots, *mid, "template", "band"),
            full((*lead, *n_sv, n_t, n_b), (*block, *n_sv, n_t, n_b)),
        )
    if cloze is not None:
        n_o = max(len(x) for x in cloze["labels"])
        data["option_loglik"] = (
            _dims(has_shots, "template", "subset", "option"),
            full((*lead, n_t, size, n_o), (*block, n_t, size, n_o)),
        )
        data["option_tokens"] = (
            _dims(has_shots, "template", "option"),
            full((*lead, n_t, n_o), (*block, n_t, n_o)),
        )
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
        "pair": _obj([pair_label(templates[a], templates[b]) for a, b in zip(i, j, strict=True)]),
        "order": ("subset", order),
        "word": (("sample", "var"), word),
        "n_vars": ("sample", np.array([len(ws) for ws in words], dtype=np.int64)),
        "template_a": ("pair", _obj([templates[k] for k in i])),
        "template_b": ("pair", _obj([templates[k] for k in j])),
        "perturbation": ("template", _obj(perturbation or [""] * n_t)),
    }
    for dim, values in (template_coords or {}).items():
        coords[f"fmt_{dim}"] = ("template", _obj(values))
    if has_shots:
        coords["shot"] = np.asarray(shots, dtype=np.int64)
    if noise_floor:
        coords["band"] = _obj(FLOOR_BANDS)
    if solvers is not None:
        coords["solver"] = _obj(solvers)
    if cloze is not None:
        labels = np.full((n_s, n_o), "", dtype=object)
        nbytes = np.zeros((n_s, n_o), dtype=np.int64)
        for s, (lab, b) in enumerate(zip(cloze["labels"], cloze["bytes"], strict=True)):
            labels[s, : len(lab)] = list(lab)
            nbytes[s, : len(b)] = list(b)
        coords["option"] = np.arange(n_o, dtype=np.int64)
        coords["option_label"] = (("sample", "option"), labels)
        coords["option_bytes"] = (("sample", "option"), nbytes)
        coords["answer_option"] = ("sample", np.asarray(cloze["answer"], dtype=np.int64))
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
    if noise_floor:
        ds.attrs["noise_floor"] = str(noise_floor)
    return label_run(ds)


def _attr(value):
    """attrs must be JSON-able scalars/strings; dicts and lists go in as JSON text."""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    if value is None:
        return ""
    return value


#: what the schema check says of each engine's file: what it is, what writes one, how to
#: write one of this version, what to do when arrays are lost
_ENGINE_WORDS = {
    "zarr": (
        "a zarr store",
        "a store written by psens.run",
        "re-run",
        "Delete the store and run again (a run resumes block by block)",
    ),
    "netcdf": (
        "a netCDF file",
        "a .zarr store or .nc file written by psens (psens run, psens export)",
        "export the run again",
        "Export the run again",
    ),
}


def _check_schema(path: Path, attrs, present, where: str, engine: str) -> None:
    """Refuse a zarr store or netCDF export (``engine``) that is not a psens run of this
    schema version, or that lacks block or coordinate arrays (``present``: the names it
    holds): the one schema check of both engines."""
    kind, written_by, again, lost_fix = _ENGINE_WORDS[engine]
    if attrs.get("psens_schema") != SCHEMA:
        fail(
            where,
            f"{path} is {kind} but not a psens run (no psens_schema attr)",
            f"Pass {written_by}",
        )
    version = attrs.get("psens_schema_version")
    if version != SCHEMA_VERSION:
        fail(
            where,
            f"{path} has psens schema version {version!r}; this psens reads "
            f"version {SCHEMA_VERSION}",
            f"Upgrade psens, or {again} with this version",
        )
    lost = [v for v in (*BLOCK_VARS, "prompt", "target") if v not in present]
    if lost:
        fail(where, f"{path} is damaged: the arrays {lost} are missing on disk", lost_fix)


def _is_nan(value: Any) -> bool:
    """Whether a stored ``_FillValue`` is NaN: a number, ``"NaN"``, or (zarr v3 through
    xarray) the base64 of a float's bytes."""
    if isinstance(value, str):
        import base64
        import binascii

        if value.lower() == "nan":
            return True
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
        if len(raw) not in (4, 8):
            return False
        value = np.frombuffer(raw, dtype="<f8" if len(raw) == 8 else "<f4")
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return a.size == 1 and bool(np.isnan(a).all())


def attrs_problem(attrs: Mapping[str, Any], kind: str, *, internal: bool = False) -> str:
    """Why an array's attributes are not those psens writes ('' when they are).

    ``kind`` is the array's numpy dtype kind; ``internal`` allows netCDF-4's bookkeeping
    attributes (HDF5 files). Allowed: :data:`ARRAY_ATTRS`, with ``_FillValue`` NaN on a float
    array and ``dtype`` only ``"bool"``.
    """
    allowed = {*ARRAY_ATTRS, *(_NETCDF_INTERNAL_ATTRS if internal else ())}
    extra = sorted(set(attrs) - allowed)
    if extra:
        return f"the attributes {extra}, an encoding psens never writes"
    if "_FillValue" in attrs and (kind != "f" or not _is_nan(attrs["_FillValue"])):
        return f"_FillValue {attrs['_FillValue']!r} (psens writes NaN, on float arrays only)"
    dtype = attrs.get("dtype", "bool")
    if (dtype.decode() if isinstance(dtype, bytes) else dtype) != "bool":
        return f"the attribute dtype = {dtype!r} (psens writes only 'bool')"
    return ""


def zarr_array_problem(name: str, doc: Any) -> str:
    """Why an array's zarr metadata document is not one psens writes ('' when it is): zarr
    format 3, a data type of :data:`_ZARR_FILL` (float64 for the float variables, int8 for
    ``status``) with its fill value, the codecs of :data:`_ZARR_CODECS` (little-endian),
    no storage transformer, and the attributes of :func:`attrs_problem`."""
    if not isinstance(doc, Mapping) or doc.get("zarr_format") != 3:
        return "not a zarr format 3 array (psens writes format 3)"
    dtype = doc.get("data_type")
    want = "float64" if name in _FLOAT_VARS else "int8" if name == "status" else None
    if not isinstance(dtype, str) or dtype not in _ZARR_FILL or want not in (None, dtype):
        return f"data type {dtype!r} (psens writes {want or ', '.join(_ZARR_FILL)})"
    fill = doc.get("fill_value")
    if not (_is_nan(fill) if dtype == "float64" else fill == _ZARR_FILL[dtype]):
        return f"fill value {fill!r} (psens writes {_ZARR_FILL[dtype]!r})"
    codecs = doc.get("codecs")
    names = [c.get("name") if isinstance(c, Mapping) else c for c in codecs or []]
    if not names or any(n not in _ZARR_CODECS for n in names):
        return f"codecs {names} (psens writes {', '.join(_ZARR_CODECS)})"
    for c in codecs:
        endian = (c.get("configuration") or {}).get("endian") if isinstance(c, Mapping) else None
        if endian not in (None, "little"):
            return f"{endian!r}-endian bytes (psens writes little-endian)"
    if doc.get("storage_transformers"):
        return "a storage transformer (psens writes none)"
    attrs = doc.get("attributes", {})
    if not isinstance(attrs, Mapping):
        return "attributes that are not a mapping"
    return attrs_problem(attrs, np.dtype(dtype).kind if dtype != "string" else "T")


def check_netcdf_storage(path: Path, where: str) -> None:
    """Refuse an HDF5 (netCDF-4) file whose values would come from elsewhere or be decoded
    otherwise than psens writes them, before any value is read: a dataset stored in an
    external file or virtual (mapped from other datasets or files), an external or soft
    link, the lossy scale-offset filter, or array attributes :func:`attrs_problem` refuses.
    Only metadata is read."""
    import h5py

    fix = "Use a file written by psens (psens export, psens run), not an edited one"
    try:
        f = h5py.File(path, "r")
    except Exception:  # not HDF5: the reader that follows says so
        return
    with f:
        todo = [f]
        while todo:
            group = todo.pop()
            for key in group:
                link = group.get(key, getlink=True)
                name = f"{group.name.rstrip('/')}/{key}"
                if isinstance(link, h5py.ExternalLink | h5py.SoftLink):
                    fail(where, f"{path}: {name} is a link to {link.path!r}", fix)
                obj = group[key]
                if isinstance(obj, h5py.Group):
                    todo.append(obj)
                    continue
                if not isinstance(obj, h5py.Dataset):
                    continue
                if obj.external:
                    fail(where, f"{path}: {name} is stored in an external file", fix)
                if obj.is_virtual:
                    fail(where, f"{path}: {name} is a virtual dataset", fix)
                if obj.scaleoffset is not None:
                    fail(where, f"{path}: {name} uses the lossy scale-offset filter", fix)
                why = attrs_problem(obj.attrs, obj.dtype.kind, internal=True)
                if why:
                    fail(where, f"{path}: {name} has {why}", fix)


def _open_group(path: Path, where: str):
    """The store's zarr group, after refusing anything that is not a psens run of a known
    schema with all its arrays."""
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
    _check_schema(path, attrs, on_disk, where, "zarr")
    return group


#: the root attr that marks a netCDF file written by :func:`to_netcdf` (the psens version)
EXPORT_ATTR = "psens_export"
