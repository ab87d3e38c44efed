"""Checksums of a store's blocks, coordinates, root attributes and array metadata, and
:func:`verify`.

Checksum format 2 (root attr :data:`CHECKSUM_VERSION_ATTR`) also records a digest of every
array's metadata document (its data type, fill value, codecs and attributes: everything
that decides how its bytes decode). Stores of older psens (format 1, no such attr) are
verified by their own rule. In every format the arrays' encodings must be those psens writes
(:func:`psens.store.schema.zarr_array_problem`) and the root's consolidated copy of the
metadata must equal each array's own: :func:`metadata_problems`, which :func:`open_run`
applies before it reads anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from psens._validation import fail
from psens.store.schema import (
    _SLAB_BYTES,
    CHECKSUM_ATTR,
    CHECKSUM_VAR,
    CHECKSUM_VERSION,
    CHECKSUM_VERSION_ATTR,
    DATA_VARS,
    PENDING,
    _open_group,
    zarr_array_problem,
)

__all__ = ["Verification", "metadata_problems", "verify"]


def _digest(name: str, value: Any) -> str:
    """blake2b of one array as stored: NaN made canonical (sign and payload vary), text as
    UTF-8 JSON; the name and shape are part of the hash."""
    a = np.asarray(value)
    h = hashlib.blake2b(f"{name}:{a.shape}:".encode(), digest_size=16)
    if a.dtype.kind == "f":
        h.update(np.where(np.isnan(a), np.nan, a).astype("<f8").tobytes())
    elif a.dtype.kind in "iub":
        h.update(a.astype("<i8").tobytes())
    else:
        items = ["" if x is None else str(x) for x in a.ravel().tolist()]
        h.update(json.dumps(items, ensure_ascii=False).encode())
    return h.hexdigest()


def _block_checksum(digests: Mapping[str, str]) -> str:
    return json.dumps(dict(digests), separators=(",", ":"))


def _slabs(samples: Sequence[int], step: int) -> Iterator[list[int]]:
    """Sorted sample indices cut into runs spanning at most ``step`` samples."""
    run: list[int] = []
    for s in sorted(samples):
        if run and s - run[0] >= step:
            yield run
            run = []
        run.append(s)
    if run:
        yield run


def _block_digests(group, blocks: Sequence[tuple[int, int]]):
    """Per-variable digests of the given blocks as they are on disk.

    Reads one slab of samples of one model at a time (falling back to single blocks when a
    slab has an unreadable chunk). Returns ``(digests, unreadable)``: ``{block: {name:
    digest}}`` and ``{block: reason}``.
    """
    by_model: dict[int, list[int]] = {}
    for m, s in blocks:
        by_model.setdefault(int(m), []).append(int(s))
    digests: dict[tuple[int, int], dict[str, str]] = {(m, s): {} for m, s in blocks}
    unreadable: dict[tuple[int, int], str] = {}
    names = [n for n in DATA_VARS if n in group]
    for name in names:
        arr = group[name]
        per_block = int(np.prod(arr.shape[2:], dtype=np.int64)) * max(arr.dtype.itemsize, 8)
        step = max(1, _SLAB_BYTES // max(per_block, 1))
        for m, samples in by_model.items():
            for run in _slabs(samples, step):
                lo = run[0]
                try:
                    slab = arr[m, lo : run[-1] + 1]
                except Exception:  # a damaged chunk (codec errors vary): find it block by block
                    slab = None
                for s in run:
                    if (m, s) in unreadable:
                        continue
                    if slab is not None:
                        value = slab[s - lo]
                    else:
                        try:
                            value = arr[m, s]
                        except Exception as exc:
                            unreadable[(m, s)] = f"{name}: chunk unreadable ({type(exc).__name__})"
                            continue
                    digests[(m, s)][name] = _digest(name, value)
    return {b: d for b, d in digests.items() if b not in unreadable}, unreadable


#: the key of :data:`CHECKSUM_ATTR` under which the root attributes' digests are recorded
#: (``tau``, the solver settings, ``config``, ...: they change the numbers a run reports)
ATTRS_KEY = "@attrs"


#: the key of :data:`CHECKSUM_ATTR` under which every array's metadata digest is recorded
#: (checksum format 2)
METADATA_KEY = "@metadata"


def _json_digest(value: Any) -> str:
    """blake2b of ``value`` as canonical JSON (sorted keys)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _array_documents(path: Path, group) -> dict[str, Any]:
    """Every array's own metadata document as stored (``NAME/zarr.json``; None when it
    cannot be read)."""
    docs: dict[str, Any] = {}
    for name in sorted(group.array_keys()):
        try:
            docs[name] = json.loads((path / name / "zarr.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            docs[name] = None
    return docs


def metadata_problems(path: str | os.PathLike, group=None) -> list[tuple[str, str]]:
    """``(array, reason)`` for every array whose metadata would decode its values otherwise
    than psens wrote them (reads only the metadata documents).

    * an encoding psens never writes (:func:`psens.store.schema.zarr_array_problem`: a
      ``scale_factor`` or ``add_offset`` attribute, another data type or fill value, ...);
    * a consolidated copy in the root metadata that differs from the array's own document
      (readers that use the copy would decode other values);
    * checksum format 2: a metadata document whose digest differs from the one recorded
      when the store was written, or an array added or removed since;
    * a checksum format this psens does not know (reason given for ``attributes``).
    """
    path = Path(path)
    if group is None:
        group = _open_group(path, "psens verify")
    docs = _array_documents(path, group)
    out: dict[str, str] = {}  # one reason per array, the most telling first

    def add(name: str, why: str) -> None:
        out.setdefault(name, why)

    for name, doc in docs.items():
        why = "metadata unreadable" if doc is None else zarr_array_problem(name, doc)
        if why:
            add(name, why)
    try:
        root = json.loads((path / "zarr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        root = {}
    copy = (root.get("consolidated_metadata") or {}) if isinstance(root, dict) else {}
    copies = copy.get("metadata") if isinstance(copy, dict) else None
    if isinstance(copies, dict):
        for name in sorted(set(copies) | set(docs)):
            if _json_digest(copies.get(name)) != _json_digest(docs.get(name)):
                add(name, "the root's consolidated copy of its metadata differs")
    version = group.attrs.get(CHECKSUM_VERSION_ATTR)
    sums = group.attrs.get(CHECKSUM_ATTR)
    if version is not None and version != CHECKSUM_VERSION:
        add("attributes", f"checksum format {version!r} unknown to this psens")
    elif version == CHECKSUM_VERSION:
        recorded = sums.get(METADATA_KEY) if isinstance(sums, Mapping) else None
        if not isinstance(recorded, Mapping):
            add("attributes", "the metadata checksums of format 2 are missing")
        else:
            for name in sorted(set(recorded) | set(docs)):
                if name not in docs:
                    add(name, "missing")
                elif name not in recorded:
                    add(name, "an array added after the store was written")
                elif _json_digest(docs[name]) != recorded[name]:
                    add(name, "metadata changed (data type, fill value, codecs or attrs)")
    return list(out.items())


def _attr_digests(attrs: Mapping[str, Any]) -> dict[str, str]:
    """One blake2b digest per root attribute (the checksums themselves left out)."""
    return {
        k: hashlib.blake2b(
            json.dumps(v, sort_keys=True, default=str).encode(), digest_size=16
        ).hexdigest()
        for k, v in attrs.items()
        if k != CHECKSUM_ATTR
    }


def _attr_changes(recorded: Mapping[str, str], attrs: Mapping[str, Any]) -> list[str]:
    """The root attributes that differ from those recorded at creation."""
    now = _attr_digests(attrs)
    out = [f"{k} changed" for k in recorded if k in now and now[k] != recorded[k]]
    out += [f"{k} removed" for k in recorded if k not in now]
    out += [f"{k} added" for k in now if k not in recorded]
    return out


def _static_arrays(group) -> list[str]:
    """The arrays written once at creation: coordinates, ``prompt`` and ``target``."""
    per_block = {*DATA_VARS, "status", CHECKSUM_VAR}
    return sorted(set(group.array_keys()) - per_block)


def _read_per_block(arr, shape: tuple[int, int], fill):
    """A (model, sample) array read whole, or block by block when some chunks are damaged;
    returns the values and the set of unreadable blocks (holding ``fill``)."""
    try:
        return np.asarray(arr[...]), set()
    except Exception:
        out = np.full(shape, fill, dtype=object)
        bad = set()
        for m in range(shape[0]):
            for s in range(shape[1]):
                try:
                    out[m, s] = arr[m, s].item()
                except Exception:
                    bad.add((m, s))
        return out, bad


def _seal(path: Path) -> None:
    """Record the checksums of the coordinate arrays and of every block that is not pending."""
    import zarr

    group = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    group.attrs[CHECKSUM_VERSION_ATTR] = CHECKSUM_VERSION
    sums = {name: _digest(name, group[name][...]) for name in _static_arrays(group)}
    status = np.asarray(group["status"][...])
    blocks = [(int(m), int(s)) for m, s in zip(*np.nonzero(status != PENDING), strict=True)]
    if blocks:
        digests, unreadable = _block_digests(group, blocks)
        if unreadable:  # just written: a disk or codec problem, not something to record
            fail(
                "psens.store.save",
                f"{path} could not be read back ({next(iter(unreadable.values()))})",
                "Check the disk and save again",
            )
        table = np.full(status.shape, "", dtype=object)
        for (m, s), d in digests.items():
            table[m, s] = _block_checksum(d)
        group[CHECKSUM_VAR][...] = table
    sums[ATTRS_KEY] = _attr_digests(dict(group.attrs))
    sums[METADATA_KEY] = {
        name: _json_digest(doc) for name, doc in _array_documents(path, group).items()
    }
    group.attrs[CHECKSUM_ATTR] = sums
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))


@dataclass
class Verification:
    """What :func:`verify` found in a store.

    Attributes
    ----------
    path : the store.
    has_checksums : whether the store records checksums (older stores do not; then only
        unreadable chunks and metadata psens never writes can be found).
    checksum_version : the checksum format (2: the arrays' metadata too; 1: stores of an
        older psens, whose metadata is checked only for encodings psens never writes).
    checked : blocks (done or failed) whose chunks were read.
    pending : blocks not computed yet (not damage; a run computes them).
    damaged : ``(model index, sample index, reason)`` of every damaged block.
    damaged_arrays : ``(name, reason)`` of every damaged coordinate array.
    models, samples : the names of the blocks' models and samples (indices as text when
        those coordinates are themselves damaged).
    """

    path: Path
    has_checksums: bool
    checksum_version: int = 1
    checked: int = 0
    pending: int = 0
    damaged: list[tuple[int, int, str]] = field(default_factory=list)
    damaged_arrays: list[tuple[str, str]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No damaged block and no damaged coordinate array."""
        return not self.damaged and not self.damaged_arrays

    @property
    def damaged_index(self) -> list[tuple[int, int]]:
        """Positional ``(model, sample)`` indices of the damaged blocks."""
        return [(m, s) for m, s, _ in self.damaged]

    @property
    def damaged_blocks(self) -> list[tuple[str, str]]:
        """``(model, sample)`` names of the damaged blocks."""
        return [(self.models[m], self.samples[s]) for m, s, _ in self.damaged]

    def brief(self, limit: int = 5) -> str:
        """One line: the damaged blocks (first ``limit``) and arrays."""
        parts = []
        if self.damaged:
            names = [f"({m}, {s})" for m, s in self.damaged_blocks]
            more = f" and {len(names) - limit} more" if len(names) > limit else ""
            n = len(names)
            parts.append(
                f"{n} damaged block{'s' if n != 1 else ''} {', '.join(names[:limit])}{more}"
            )
        if self.damaged_arrays:
            arrays = ", ".join(f"{name} ({why})" for name, why in self.damaged_arrays)
            parts.append(f"damaged arrays or metadata {arrays}")
        return "; ".join(parts) or "no damage found"

    def report(self) -> str:
        """Several lines for the command line (``psens verify``)."""
        head = f"psens verify: {self.path}:"
        if self.ok:
            if not self.has_checksums:
                return (
                    f"{head} no checksums recorded (a store written by an older psens); all "
                    f"{self.checked} done or failed blocks could be read"
                )
            what = (
                "the coordinates, the attributes and the arrays' metadata"
                if self.checksum_version == 2
                else "the coordinates and the attributes (checksum format 1: the arrays' "
                "metadata only checked for encodings psens never writes)"
            )
            if self.pending:
                total = self.checked + self.pending
                return (
                    f"{head} no damage: {self.checked} finished blocks, {what} match their "
                    f"checksums; {self.pending} of {total} blocks pending "
                    "(run the same config again to finish them)"
                )
            return f"{head} ok: {self.checked} blocks, {what} match their checksums"
        lines = []
        if self.damaged:
            n = len(self.damaged)
            lines.append(
                f"{head} {n} damaged block{'s' if n != 1 else ''} (of {self.checked} checked):"
            )
            for (m, s), (_, _, why) in zip(self.damaged_blocks, self.damaged, strict=True):
                lines.append(f"  model {m}, sample {s}: {why}")
            lines.append("Run the same config again (psens run) to recompute them.")
        if self.damaged_arrays:
            lines.append(f"{head} damaged arrays or metadata:")
            lines += [f"  {name}: {why}" for name, why in self.damaged_arrays]
            lines.append("Start the run over (psens run --overwrite).")
        if not self.has_checksums:
            lines.append("(no checksums recorded: only unreadable chunks can be found)")
        return "\n".join(lines)


def verify(path: str | os.PathLike) -> Verification:
    """Check a store against the checksums written with it; name the damaged blocks.

    Every done or failed block is read back and its per-variable digests compared with
    those written with the block; every coordinate array (and ``prompt``, ``target``) with
    those recorded at creation. A missing chunk, a chunk cut short and altered bytes are
    all found (an unreadable chunk is reported as such, never raised). Pending blocks are
    not checked: a run recomputes them anyway.

    Parameters
    ----------
    path : a store written by :func:`psens.run` (or :func:`save`).

    Returns
    -------
    Verification
        ``ok``, ``damaged_blocks`` (model, sample names), ``damaged_arrays``, ``report()``.
    """
    where = "psens verify"
    path = Path(path)
    group = _open_group(path, where)
    sums = group.attrs.get(CHECKSUM_ATTR)
    has = isinstance(sums, Mapping) and CHECKSUM_VAR in group
    version = group.attrs.get(CHECKSUM_VERSION_ATTR, 1)
    out = Verification(path=path, has_checksums=has, checksum_version=version)
    out.damaged_arrays += metadata_problems(path, group)
    for name in _static_arrays(group):
        try:
            value = group[name][...]
        except Exception as exc:
            out.damaged_arrays.append((name, f"unreadable ({type(exc).__name__})"))
            continue
        if has and name in sums and _digest(name, value) != sums[name]:
            out.damaged_arrays.append((name, "values changed"))
    if has:
        names = set(sums) - {ATTRS_KEY, METADATA_KEY}
        gone = [(n, "missing") for n in sorted(names - set(group.array_keys()))]
        out.damaged_arrays += [p for p in gone if p not in out.damaged_arrays]
        if isinstance(sums.get(ATTRS_KEY), Mapping):
            changes = _attr_changes(sums[ATTRS_KEY], dict(group.attrs))
            if changes:
                out.damaged_arrays.append(("attributes", ", ".join(changes)))
    status_arr = group["status"]
    shape = status_arr.shape[:2]
    for dim, names in (("model", out.models), ("sample", out.samples)):
        try:
            names += [str(x) for x in np.asarray(group[dim][...]).tolist()]
        except Exception:
            names += [str(k) for k in range(shape[0 if dim == "model" else 1])]
    status, bad_status = _read_per_block(status_arr, shape, PENDING)
    for m, s in sorted(bad_status):
        out.damaged.append((m, s, "status: chunk unreadable"))
    blocks = [
        (m, s)
        for m in range(shape[0])
        for s in range(shape[1])
        if (m, s) not in bad_status and int(status[m, s]) != PENDING
    ]
    out.checked = len(blocks)
    out.pending = shape[0] * shape[1] - len(blocks) - len(bad_status)
    digests, unreadable = _block_digests(group, blocks)
    recorded: Any = None
    bad_sums: set = set()
    if has:
        recorded, bad_sums = _read_per_block(group[CHECKSUM_VAR], shape, "")
    for m, s in blocks:
        if (m, s) in unreadable:
            out.damaged.append((m, s, unreadable[(m, s)]))
        elif has:
            why = _compare(path, group, (m, s), digests[(m, s)], recorded[m, s], bad_sums)
            if why:
                out.damaged.append((m, s, why))
    out.damaged.sort()
    return out


def _compare(path: Path, group, block, digests: Mapping[str, str], recorded, bad_sums) -> str:
    """Why a block's digests differ from those recorded with it ('' when they match)."""
    if block in bad_sums:
        return f"{CHECKSUM_VAR}: chunk unreadable"
    try:
        want = json.loads(str(recorded)) if str(recorded) else None
    except ValueError:
        want = None
    if not isinstance(want, dict):
        return "no checksum recorded for a done block (its checksum chunk is missing or altered)"
    reasons = []
    for name in DATA_VARS:
        if name not in want and name not in digests:
            continue
        if want.get(name) == digests.get(name):
            continue
        key = group[name].metadata.encode_chunk_key((*block, *(0,) * (group[name].ndim - 2)))
        missing = not (path / name / key).exists()
        reasons.append(f"{name}: {'chunk missing' if missing else 'values changed'}")
    return "; ".join(reasons)
