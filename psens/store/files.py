"""Run files: one netCDF file per run (an IPS export, or an EAS, DBSA or subjective PSS run).

An IPS run lives in a resumable zarr store while it runs and is exchanged as one netCDF
export (:func:`psens.store.to_netcdf`); the output-level methods (EAS, DBSA, subjective
PSS) are small and are written in one go as a netCDF file marked with the attrs
``psens_method`` (a key of :data:`psens.config_schema.RUN_MODULES`: ``"eas"``, ``"dbsa"``,
``"subjective"``) and ``psens_method_version``.
Both kinds of file are written the same way (:func:`write_file`): into a hidden sibling,
sealed with a digest of every variable, coordinate and attribute (the root attr
``psens_checksums``, the digests of :mod:`psens.store.checksums`), then renamed into place;
nothing but an earlier psens file is replaced, and only when asked (:func:`check_target`).
:func:`verify_file` compares a file with its digests; :func:`open_method_run` opens a
method run (:func:`psens.open_run` opens every kind): a file with groups as an
:class:`xarray.DataTree` (DBSA), one without as an :class:`xarray.Dataset`, whatever the
method.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from psens._validation import fail
from psens.config_schema import RUNS
from psens.store.checksums import ATTRS_KEY, Verification, _attr_changes, _attr_digests, _digest
from psens.store.checksums import verify as verify_store
from psens.store.schema import CHECKSUM_ATTR, EXPORT_ATTR, SCHEMA, check_netcdf_storage

__all__ = [
    "METHODS",
    "METHOD_ATTR",
    "METHOD_VERSION",
    "METHOD_VERSION_ATTR",
    "FileVerification",
    "check_target",
    "is_method_run",
    "method_of",
    "open_method_run",
    "verify",
    "verify_file",
    "write_file",
    "write_method_run",
]

#: the root attr naming the method of a method run file
METHOD_ATTR = "psens_method"
#: the root attr holding the version of the method run file layout
METHOD_VERSION_ATTR = "psens_method_version"
METHOD_VERSION = 1
#: the methods with a run file of their own (IPS runs are zarr stores and their exports):
#: the keys of :data:`psens.config_schema.RUN_MODULES`
METHODS: tuple[str, ...] = RUNS


def _root_attrs(path: Path) -> dict[str, Any] | None:
    """The root attrs of an HDF5 / netCDF4 file (text decoded), None when it is not one."""
    try:
        import h5py

        with h5py.File(path, "r") as f:
            attrs = dict(f.attrs)
    except Exception:  # not HDF5 at all
        return None
    out = {}
    for k, v in attrs.items():
        if isinstance(v, bytes):
            v = v.decode()
        if isinstance(v, np.ndarray) and v.size == 1:
            v = v.item()
        out[k] = v.decode() if isinstance(v, bytes) else v
    return out


def _has_groups(path: Path) -> bool:
    """Whether an HDF5 / netCDF4 file holds groups below its root (a DataTree's nodes)."""
    import h5py

    with h5py.File(path, "r") as f:
        return any(isinstance(node, h5py.Group) for node in f.values())


def method_of(path: str | os.PathLike) -> str | None:
    """The method of a method run file (its ``psens_method`` attr: a key of
    :data:`METHODS`), or None for anything else (an IPS store or export, a missing file, a
    file that is not netCDF)."""
    path = Path(path)
    attrs = _root_attrs(path) if path.is_file() else None
    value = (attrs or {}).get(METHOD_ATTR)
    return str(value) if value is not None else None


def is_method_run(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a method run file (EAS, DBSA, subjective PSS: :data:`METHODS`)."""
    return method_of(path) in METHODS


def _is_psens_file(path: Path) -> bool:
    """Whether ``path`` is a run file psens wrote: an export (its marker attr, or the run
    schema attr of an export of an older psens) or a method run."""
    attrs = _root_attrs(path)
    if attrs is None:
        return False
    return EXPORT_ATTR in attrs or attrs.get("psens_schema") == SCHEMA or METHOD_ATTR in attrs


def check_target(
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    source: str | os.PathLike | None = None,
    where: str = "psens export",
) -> Path:
    """Refuse a run file path that would destroy something: an existing file unless
    ``overwrite`` and it is a run file psens wrote (an export or a method run), a folder,
    a path inside the store ``source``, or a folder that does not exist or cannot be
    written. Returns the path."""
    out = Path(path)
    full = Path(os.path.realpath(out))
    if source is not None:
        src = Path(os.path.realpath(source))
        if full == src or src in full.parents:
            fail(where, f"{out} is inside the store {source}", "Write to a path outside the store")
    if out.is_dir():
        fail(where, f"{out} is a folder", "Name the .nc file to write, e.g. run.nc")
    if out.exists() or out.is_symlink():
        if not _is_psens_file(out):
            fail(
                where,
                f"{out} exists and is not a psens run (only those are ever replaced)",
                "Choose another path, or move that file away",
            )
        if not overwrite:
            fail(where, f"{out} exists", "Choose another path, or pass --overwrite to replace it")
    parent = full.parent
    if not parent.is_dir():
        fail(where, f"the folder {out.parent} does not exist", f"Create it (mkdir -p {out.parent})")
    if not os.access(parent, os.W_OK):
        fail(where, f"the folder {out.parent} cannot be written", "Write to a writable folder")
    return out


def _plain(value: Any) -> Any:
    """An attribute value as JSON-able Python (netCDF gives numpy scalars and arrays)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value


def _file_values(path: Path) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Digests of every variable and coordinate (``"name"`` at the root, ``"group/name"``
    in a group) and the attributes of every group (keyed ``"@attrs"``, ``"group/@attrs"``),
    as read back from the file."""
    import xarray as xr

    digests: dict[str, str] = {}
    attrs: dict[str, dict[str, Any]] = {}
    with xr.open_datatree(path, engine="h5netcdf") as tree:
        for node in tree.subtree:
            prefix = node.path.strip("/")
            prefix = f"{prefix}/" if prefix else ""
            ds = node.to_dataset(inherit=False)
            for name in ds.variables:
                digests[f"{prefix}{name}"] = _digest(str(name), ds[name].values)
            attrs[f"{prefix}{ATTRS_KEY}"] = {k: _plain(v) for k, v in ds.attrs.items()}
    return digests, attrs


def _seal(path: Path) -> None:
    """Record the digests of a just-written file in its root attr :data:`CHECKSUM_ATTR`."""
    import h5py

    digests, attrs = _file_values(path)
    sums = {**digests, **{key: _attr_digests(a) for key, a in attrs.items()}}
    with h5py.File(path, "r+") as f:
        f.attrs[CHECKSUM_ATTR] = json.dumps(sums, sort_keys=True)


def write_file(
    write: Callable[[Path], Any],
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    where: str = "psens export",
) -> Path:
    """Write a run file with ``write(tmp)`` into a hidden sibling, seal it with its
    checksums, then rename it into place (a killed write leaves no file behind). The
    target is checked first (:func:`check_target`)."""
    out = check_target(path, overwrite=overwrite, where=where)
    tmp = out.with_name(f".{out.name}.writing-{uuid.uuid4().hex[:12]}")
    try:
        write(tmp)
        _seal(tmp)
        os.replace(tmp, out)
    except OSError as exc:
        fail(where, f"{out} could not be written ({exc})", "Check the disk and folder")
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return out


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


def write_method_run(obj, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a method run (a Dataset, or a DataTree for DBSA) to netCDF with its checksums
    (:func:`write_file`): an existing file is replaced only when it is a psens run file and
    ``overwrite`` is given."""
    import xarray as xr

    def write(tmp: Path) -> None:
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

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_file(write, path, overwrite=overwrite, where="psens method run")


def _object_text(ds):
    text = [k for k in ds.variables if ds[k].dtype.kind in "OSUT"]
    ds = ds.assign({k: ds[k].astype(object) for k in text if k in ds.data_vars})
    coords = {k: (ds[k].astype(object) if k in text else ds[k]) for k in ds.coords}
    ds = ds.assign_coords(coords)
    ds.attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in ds.attrs.items()}
    ds.attrs.pop(CHECKSUM_ATTR, None)
    return ds


def open_method_run(
    path: str | os.PathLike, *, verify: bool = False, where: str = "psens.open_run"
):
    """Open a method run, loaded into memory, text as object arrays: a file with groups
    (DBSA: one per prompt and model) as a DataTree, one without (EAS, subjective PSS) as a
    Dataset; ``verify`` first compares it with its checksums. A file
    with a dataset stored externally or virtual or an encoding psens never writes is refused
    before any value is read (:func:`psens.store.schema.check_netcdf_storage`)."""
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        fail(where, f"{path} does not exist", "Check the path, or write it with psens run CONFIG")
    method = method_of(path)
    if method not in METHODS:
        fail(
            where,
            f"{path} is not a run of a method psens knows ({list(METHODS)}): "
            + (f"{METHOD_ATTR} = {method!r}" if method else f"no {METHOD_ATTR} attr"),
            "Pass a run file written by psens run or psens export",
        )
    check_netcdf_storage(path, where)  # before any value is read
    if verify:
        _refuse_damage(path, where)
    if not _has_groups(path):  # one Dataset (EAS, subjective PSS)
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            out = _object_text(ds.load())
    else:  # a DataTree (DBSA: a group per prompt and model)
        with xr.open_datatree(path, engine="h5netcdf") as tree:
            tree = tree.load()
        out = xr.DataTree.from_dict(
            {node.path: _object_text(node.to_dataset(inherit=False)) for node in tree.subtree}
        )
    version = out.attrs.get(METHOD_VERSION_ATTR)
    if version != METHOD_VERSION:
        fail(
            where,
            f"{path} is a {method} run of version {version!r}; this psens reads version "
            f"{METHOD_VERSION}",
            "Run its config again with this psens",
        )
    return out


@dataclass
class FileVerification:
    """What :func:`verify_file` found in a run file.

    Attributes
    ----------
    path : the file.
    has_checksums : whether the file records checksums (files of an earlier psens do not;
        then only unreadable values can be found).
    checked : the variables, coordinates and attribute sets read.
    damaged : ``(name, reason)`` of every damaged variable, coordinate or attribute set.
    """

    path: Path
    has_checksums: bool
    checked: int = 0
    damaged: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing damaged."""
        return not self.damaged

    def brief(self, limit: int = 5) -> str:
        """One line: the damaged variables (first ``limit``)."""
        names = [f"{name} ({why})" for name, why in self.damaged]
        more = f" and {len(names) - limit} more" if len(names) > limit else ""
        return f"damaged {', '.join(names[:limit])}{more}" if names else "no damage found"

    def report(self) -> str:
        """One or more lines for the command line (``psens verify``)."""
        head = f"psens verify: {self.path}:"
        if self.ok and not self.has_checksums:
            return (
                f"{head} no checksums recorded (written by an earlier psens); all "
                f"{self.checked} variables, coordinates and attribute sets could be read"
            )
        if self.ok:
            return (
                f"{head} ok: {self.checked} variables, coordinates and attribute sets match "
                "their checksums"
            )
        lines = [f"{head} {len(self.damaged)} damaged (of {self.checked} checked):"]
        lines += [f"  {name}: {why}" for name, why in self.damaged]
        lines.append("Write the file again (psens run CONFIG, or psens export STORE OUT).")
        return "\n".join(lines)


def verify_file(path: str | os.PathLike) -> FileVerification:
    """Check a run file (an IPS export or a method run) against the checksums written with
    it: every variable, coordinate and attribute set is read back and its digest compared;
    a file without checksums (an earlier psens) is read whole and only unreadable values
    are found. Anything that is not a psens run file is refused."""
    where = "psens verify"
    path = Path(path)
    attrs = _root_attrs(path) if path.is_file() else None
    if attrs is None or not _is_psens_file(path):
        fail(
            where,
            f"{path} is not a psens run file",
            "Pass a .zarr store written by psens run or a .nc file written by psens",
        )
    recorded = attrs.get(CHECKSUM_ATTR)
    try:
        recorded = json.loads(recorded) if isinstance(recorded, str) else None
    except ValueError:
        recorded = {}  # an altered checksum attr: every entry then differs
    out = FileVerification(path=path, has_checksums=recorded is not None)
    try:
        now, attrs_now = _file_values(path)
    except Exception as exc:  # a damaged file (HDF5 errors vary)
        out.damaged.append(("file", f"unreadable ({type(exc).__name__}: {exc})"))
        return out
    out.checked = len(now) + len(attrs_now)
    if recorded is None:
        return out
    for name in sorted(set(recorded) | set(now) | set(attrs_now)):
        if name not in now and name not in attrs_now:
            out.damaged.append((name, "missing"))
        elif name not in recorded:
            out.damaged.append((name, "no checksum recorded"))
        elif name in attrs_now:
            want = recorded[name] if isinstance(recorded[name], Mapping) else {}
            changes = _attr_changes(want, attrs_now[name])
            if changes:
                out.damaged.append((name, ", ".join(changes)))
        elif recorded[name] != now[name]:
            out.damaged.append((name, "values changed"))
    return out


def verify(path: str | os.PathLike) -> Verification | FileVerification:
    """Check any run against the checksums written with it: a zarr store block by block
    (:func:`psens.store.checksums.verify`), a run file (an export or a method run) variable
    by variable (:func:`verify_file`)."""
    return verify_file(path) if Path(path).is_file() else verify_store(path)


def _refuse_damage(path: Path, where: str) -> None:
    """Refuse a run file whose values differ from its checksums (or cannot be read)."""
    found = verify_file(path)
    if not found.ok:
        fail(where, f"{path} is damaged: {found.brief()}", "psens verify FILE lists what is wrong")
