"""The run store: one xarray Dataset per run, persisted as zarr (the schema below, written once).

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
    With a noise floor (config ``noise_floor``): ``v_floor`` (like ``v``) the log-odds
    scored again with the model in half precision, and ``floor`` (model, sample, [shot,]
    template, band) the IPS between the two scorings, per ``band`` = all / low / mid /
    high (the dim is not called ``order``: that is the popcount coordinate of ``subset``).
    With a list of solvers (config ``solver = [...]``): ``I_and, I_or, gamma`` (and
    ``floor``) have a ``solver`` dim before ``template``, one entry per solver, and the
    attr ``solvers`` holds each solver's settings; ``psens.ips.select_solver`` picks one.
attrs
    ``psens_schema = "psens.run"``, ``psens_schema_version``, ``psens_version``, ``tau``,
    the solver settings (``solver_*``), ``config`` (JSON) and ``config_hash``;
    ``noise_floor`` (the dtype of the second scoring, only in runs with a floor);
    ``run_id`` (a uuid drawn when :func:`create` makes the store).
integrity (on disk only; :func:`open_run` leaves them out of the Dataset)
    ``block_checksum`` (model, sample): per block, a JSON object of one blake2b digest per
    data variable, written with the block; the root attr ``psens_checksums``: a digest of
    every coordinate array (and ``prompt``, ``target``), written at creation. Stores
    without them (older psens) still open; :func:`verify` then says so.

One (model, sample) block is one chunk of every per-block variable, so a block is
written (and re-written on resume) without touching any other block; that is what lets
dask workers write regions in parallel.

Safety
------
* :func:`create` writes the new store into a hidden sibling folder and renames it into
  place, so a kill during creation never leaves a half-made store; ``overwrite`` replaces
  only a psens store or an empty folder.
* :func:`lock` holds an OS lock (``flock`` on ``<store>.lock`` beside the store) for a whole
  run; a second holder is refused with the first one's PID.
* :func:`write_block` replaces a whole block (variables not given are written empty, a
  failed block is all NaN) and refuses a writer whose ``run_id`` is not the store's.
* :func:`verify` re-reads every block and coordinate array and compares the checksums.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import threading
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from psens._validation import fail

__all__ = [
    "BLOCK_VARS",
    "CHECKSUM_ATTR",
    "CHECKSUM_VAR",
    "DATA_VARS",
    "FLOOR_BANDS",
    "FLOOR_VARS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Verification",
    "build",
    "create",
    "lock",
    "open_run",
    "remove_leftovers",
    "save",
    "to_netcdf",
    "verify",
    "write_block",
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
)
#: per-block checksums (on disk only) and the root attr with the coordinates' checksums
CHECKSUM_VAR = "block_checksum"
CHECKSUM_ATTR = "psens_checksums"
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
    attrs: Mapping[str, Any] | None = None,
    lazy: bool = False,
    noise_floor: str | None = None,
    solvers: Sequence[str] | None = None,
):
    """An empty run Dataset of the schema (all blocks pending, values NaN).

    ``prompts`` has shape ``(sample, template)`` or ``(sample, shot, template)``.
    ``noise_floor`` (a dtype name) adds ``v_floor``, ``floor`` and the ``band`` dim, and
    the attr ``noise_floor``. ``solvers`` (a list of solver names) adds the ``solver`` dim
    to the interactions (``I_and``, ``I_or``, ``gamma``, ``floor``).
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
    if noise_floor:
        coords["band"] = _obj(FLOOR_BANDS)
    if solvers is not None:
        coords["solver"] = _obj(solvers)
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
    return ds


# ----------------------------------------------------------------------------- safety


def _refuse_replacing(path: Path, where: str) -> None:
    """Refuse to overwrite anything but a psens store or an empty folder, saying what is there."""
    fix = "Choose another 'store' path: overwrite only replaces a psens store or an empty folder"
    resolved = path.resolve()
    if str(path) in ("", ".") or resolved == Path.cwd().resolve():
        fail(where, f"{str(path)!r} is the current folder", fix)
    if resolved == Path.home().resolve():
        fail(where, f"{path} is the home folder", fix)
    if resolved.parent == resolved:
        fail(where, f"{path} is a filesystem root", fix)
    if path.is_symlink():
        fail(where, f"{path} is a symbolic link", "Point 'store' at the store folder itself")
    if not path.is_dir():
        fail(where, f"{path} is a file, not a psens store", fix)
    entries = sorted(path.iterdir())
    if not entries:
        return
    kind = _store_kind(path)
    if kind == "psens":
        foreign = [p.name for p in entries if p.name != "zarr.json" and not _is_zarr_node(p)]
        if foreign:
            fail(
                where,
                f"{path} is a psens store but also holds {', '.join(foreign[:5])}"
                + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""),
                "Move those out of the store first",
            )
        return
    if kind == "zarr":
        fail(where, f"{path} is a zarr store but not a psens run", fix)
    files, folders = _count_entries(path)
    what = " and ".join(
        f"{n}{'+' if n >= 10_000 else ''} {word}{'s' if n != 1 else ''}"
        for n, word in ((files, "file"), (folders, "folder"))
        if n
    )
    fail(where, f"{path} holds {what} that are not a psens store", fix)


def _is_zarr_node(path: Path) -> bool:
    return path.is_dir() and (path / "zarr.json").is_file()


def _store_kind(path: Path) -> str | None:
    """``"psens"``, ``"zarr"`` (another zarr store) or None, from the folder's metadata.

    A psens store whose root metadata is lost or unreadable is still recognised by its
    arrays, so that a damaged store can be started over.
    """
    try:
        doc = json.loads((path / "zarr.json").read_text())
    except (OSError, ValueError):
        doc = None
    if isinstance(doc, dict):
        if doc.get("attributes", {}).get("psens_schema") == SCHEMA:
            return "psens"
        return "zarr"
    if all(_is_zarr_node(path / name) for name in ("status", "v", "I_and")):
        return "psens"
    if (path / ".zgroup").is_file() or (path / "zarr.json").exists():
        return "zarr"
    return None


def _count_entries(path: Path, cap: int = 10_000) -> tuple[int, int]:
    """Files and folders below ``path`` (counting stops at ``cap``)."""
    files = folders = 0
    for _, dirs, names in os.walk(path):
        files += len(names)
        folders += len(dirs)
        if files + folders >= cap:
            break
    return files, folders


def _sibling(path: Path, tag: str) -> Path:
    """A fresh hidden folder name beside ``path`` (``.<name>.<tag>-<random>``)."""
    return path.parent / f".{path.name}.{tag}-{uuid.uuid4().hex[:12]}"


def remove_leftovers(path: str | os.PathLike) -> list[Path]:
    """Delete the hidden sibling folders that a killed :func:`create` or :func:`save` left
    beside ``path`` (a store being created or the old store being replaced); call it while
    holding :func:`lock`. Returns the deleted folders."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    gone = []
    for tag in _SIBLING_TAGS:
        for leftover in path.parent.glob(f".{path.name}.{tag}-*"):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
                gone.append(leftover)
    return gone


def _move_into_place(tmp: Path, path: Path) -> None:
    """Rename the complete store ``tmp`` to ``path``; an old store there is renamed aside
    first and deleted last, so ``path`` is always either the old or the new store (or,
    after a kill between the two renames, absent)."""
    if path.exists() or path.is_symlink():
        aside = _sibling(path, "replaced")
        os.rename(path, aside)
        os.rename(tmp, path)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.rename(tmp, path)


_HELD: set[tuple[str, int]] = set()


def _lock_file(path: Path, where: str) -> Path:
    full = Path(os.path.abspath(path))
    if not full.name:
        fail(where, f"{path} is a filesystem root", "Point 'store' at a folder for the run")
    return full.with_name(full.name + ".lock")


@contextlib.contextmanager
def lock(path: str | os.PathLike, where: str = "psens.store.lock") -> Iterator[Path]:
    """Hold the store's OS lock (``flock`` on ``<store>.lock`` beside it) for a block of code.

    Another process (or thread) that asks for the lock of the same store is refused at
    once with this one's PID; the OS releases the lock when the holder ends, even when it
    is killed. Nested use in one thread is allowed. Without ``fcntl`` (Windows) nothing is
    locked.

    Parameters
    ----------
    path : the store (it need not exist yet).
    where : the name used in the refusal message.

    Yields
    ------
    Path
        The lock file (deleted when the lock is released).
    """
    path = Path(path)
    lock_path = _lock_file(path, where)
    key = (str(lock_path), threading.get_ident())
    if key in _HELD:
        yield lock_path
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock on this platform
        yield lock_path
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            fail(
                where,
                f"{path} is in use by PID {holder} (lock file {lock_path})",
                "Wait for that run to end or stop it; two runs on one store would mix their blocks",
            )
        try:  # the previous holder may have deleted the file between our open and flock
            same = os.path.samestat(os.fstat(fd), os.stat(lock_path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    _HELD.add(key)
    try:
        yield lock_path
    finally:
        _HELD.discard(key)
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        os.close(fd)


def _run_id_on_disk(path: Path) -> str | None:
    """The store's run id, straight from its root metadata (cheap: one small file)."""
    try:
        doc = json.loads((path / "zarr.json").read_text())
    except (OSError, ValueError):
        return None
    return doc.get("attributes", {}).get(RUN_ID_ATTR)


def _check_writer(path: Path, run_id: str | None, where: str) -> None:
    if run_id is None:
        return
    current = _run_id_on_disk(path)
    if current != run_id:
        fail(
            where,
            f"{path} now holds another run (run id {current or 'none'}; this writer belongs to "
            f"run id {run_id})",
            "This process is left over from a run that was started over: stop it (its block "
            "is not written)",
        )


# ----------------------------------------------------------------------------- checksums


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
        unreadable chunks can be found).
    checked : blocks (done or failed) whose chunks were read.
    damaged : ``(model index, sample index, reason)`` of every damaged block.
    damaged_arrays : ``(name, reason)`` of every damaged coordinate array.
    models, samples : the names of the blocks' models and samples (indices as text when
        those coordinates are themselves damaged).
    """

    path: Path
    has_checksums: bool
    checked: int = 0
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
            parts.append(f"damaged coordinate arrays {arrays}")
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
            return f"{head} ok: {self.checked} blocks and the coordinates match their checksums"
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
            lines.append(f"{head} damaged coordinate arrays:")
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
    out = Verification(path=path, has_checksums=has)
    for name in _static_arrays(group):
        try:
            value = group[name][...]
        except Exception as exc:
            out.damaged_arrays.append((name, f"unreadable ({type(exc).__name__})"))
            continue
        if has and name in sums and _digest(name, value) != sums[name]:
            out.damaged_arrays.append((name, "values changed"))
    if has:
        out.damaged_arrays += [(n, "missing") for n in sorted(set(sums) - set(group.array_keys()))]
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


# ----------------------------------------------------------------------------- create / save


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
    ds = ds.drop_vars(CHECKSUM_VAR, errors="ignore")
    ds = ds.assign({CHECKSUM_VAR: (("model", "sample"), np.full((n_m, n_s), "", object))})
    if not hasattr(ds["v"].data, "chunks"):
        ds = ds.chunk({"model": 1, "sample": 1})
        for name in ("prompt", "target"):
            ds[name] = ds[name].compute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, mode="w", compute=True, encoding=encoding, consolidated=True)


def _attr(value):
    """attrs must be JSON-able scalars/strings; dicts and lists go in as JSON text."""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    if value is None:
        return ""
    return value


# ----------------------------------------------------------------------------- open


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
    return group


def _open_netcdf(path: Path, where: str, verify: bool):
    """A netCDF file written by :func:`to_netcdf`, as the Dataset :func:`open_run` gives for
    the zarr store it came from (text as object arrays, the same checks)."""
    import xarray as xr

    try:
        ds = xr.open_dataset(path, engine="h5netcdf", chunks={})
    except Exception as exc:
        fail(
            where,
            f"{path} is a file but not a netCDF export of a run ({type(exc).__name__}: {exc})",
            "Pass a .zarr folder written by psens.run or a .nc file written by psens export",
        )
    if ds.attrs.get("psens_schema") != SCHEMA:
        fail(
            where,
            f"{path} is a netCDF file but not a psens run (no psens_schema attr)",
            "Pass a file written by psens export",
        )
    version = ds.attrs.get("psens_schema_version")
    if version != SCHEMA_VERSION:
        fail(
            where,
            f"{path} has psens schema version {version!r}; this psens reads "
            f"version {SCHEMA_VERSION}",
            "Upgrade psens, or export the run again with this version",
        )
    missing = [v for v in (*BLOCK_VARS, "prompt", "target") if v not in ds]
    if missing:
        fail(where, f"{path} lacks the variables {missing}", "Export the run again")
    if verify:  # an export carries no checksums: read every value once
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
    return ds


def open_run(path: str | os.PathLike, *, verify: bool = False):
    """Open a run lazily, refusing anything that is not a psens run of a known schema.

    Parameters
    ----------
    path : path to a ``.zarr`` folder written by :func:`psens.run`, or a netCDF file
        written by :func:`to_netcdf` (``psens export``).
    verify : bool
        First check every block and coordinate array against its checksum
        (:func:`psens.store.verify`, which reads the whole store) and refuse a damaged
        store, naming the damaged (model, sample) blocks. A netCDF export has no checksums:
        every value is read once, and a file that cannot be read is refused.

    Returns
    -------
    xarray.Dataset (dask-backed)
    """
    import xarray as xr

    path = Path(path)
    where = "psens.open_run"
    if path.is_file():
        from psens.ips.pairs import index_run_pairs

        return index_run_pairs(_open_netcdf(path, where, verify))
    _open_group(path, where)
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
            ds = xr.open_zarr(path, consolidated=True)
        except Exception as exc:
            fail(
                where,
                f"{path} could not be read ({type(exc).__name__}: {exc})",
                "The store is damaged: delete it and run again (a run resumes block by block)",
            )
    ds = ds.drop_vars(CHECKSUM_VAR, errors="ignore")
    ds.attrs.pop(CHECKSUM_ATTR, None)
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
    from psens.ips.pairs import index_run_pairs

    return index_run_pairs(ds.assign_coords(coords))  # ds.sel(pair="ips1|ips4") works


_verify = verify


# ----------------------------------------------------------------------------- blocks


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
