"""Writing a store safely: refusing to replace what is not a run, the lock one run holds, the
siblings of an atomic write, and who may write a block.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

from psens._validation import fail
from psens.store.schema import _SIBLING_TAGS, RUN_ID_ATTR, SCHEMA

__all__ = ["lock", "remove_leftovers"]


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


_WRITABLE = "Put the store in a folder you can write to (a run writes its blocks and a lock)"


def _lock_file(path: Path, where: str) -> Path:
    full = Path(os.path.realpath(path))  # one lock however the store is named (symlinks)
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
    if path.is_dir() and not os.access(path, os.W_OK):
        fail(where, f"{path} cannot be written (read-only)", _WRITABLE)
    while True:
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            fail(
                where,
                f"cannot write the lock file {lock_path} ({exc.strerror or exc})",
                _WRITABLE,
            )
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
    stale = os.pread(fd, 256, 0).decode(errors="replace").strip()
    if stale:  # the last holder ended without removing its lock file (it was killed)
        warnings.warn(
            f"{path}: took over the lock left by PID {stale}, which has ended (a killed run); "
            "its finished blocks are kept and the rest are redone",
            stacklevel=3,
        )
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
