"""A served-model entry: its keys, their checks, its tokenizer, and whether its servers answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from psens._validation import check_positive_int, fail

__all__ = [
    "ENTRY_KEYS",
    "IDENTITY_KEYS",
    "MODES",
    "NATIVE_TOP_K",
    "TOP_K",
    "WHERE",
    "ServedError",
    "ServedModel",
    "check_reachable",
    "load_tokenizer",
]

WHERE = "psens served model"
#: The ways of asking a server for log-probabilities, in the order they are probed.
MODES = ("prompt_logprobs", "native", "tgi", "echo", "next")
#: Keys of a served model entry.
ENTRY_KEYS = (
    "name",
    "base_url",
    "model",
    "tokenizer",
    "endpoints",
    "concurrency",
    "timeout",
    "max_retries",
    "api_key_env",
    "cache_dir",
    "top_logprobs",
)
#: Keys of an entry that its numbers depend on (the others say where and how to ask).
IDENTITY_KEYS = ("name", "model", "tokenizer")
#: Top-k asked first in the ``next`` and ``native`` modes (the whole vocabulary when the
#: wanted token is not among them).
TOP_K = 20
#: Top-k asked first of llama.cpp's ``llama-server``, which sets no limit: a reply of 1,000
#: entries costs little, and the whole-vocabulary re-ask (evaluated afresh) becomes rare.
NATIVE_TOP_K = 1000


class ServedError(RuntimeError):
    """A request to a served model failed (after its retries) or gave an unusable reply."""


@dataclass(frozen=True)
class ServedModel:
    """A validated served-model entry (see the module docstring).

    Attributes
    ----------
    name : str
        The model's name in the store.
    base_url : str
        The OpenAI-compatible root of the first server, e.g. ``http://127.0.0.1:8000/v1``.
    model : str
        The model name sent to the server.
    tokenizer : str
        Packaged name, folder, GGUF file or hub id of the tokenizer.
    endpoints : tuple of str
        All replicas (``base_url`` first); requests are shared between them.
    concurrency : int
        Requests in flight per endpoint (1: a single-slot server such as llama-cpp-python).
    """

    name: str
    base_url: str
    model: str
    tokenizer: str
    endpoints: tuple[str, ...] = ()
    concurrency: int = 1
    timeout: float = 120.0
    max_retries: int = 3
    api_key_env: str | None = None
    cache_dir: str | None = None
    top_logprobs: int = TOP_K

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], where: str = WHERE) -> ServedModel:
        """Check a config entry (types, keys, URLs; no request) and build the spec."""
        if not isinstance(entry, Mapping):
            fail(where, f"a served model entry must be a table, got {entry!r}", "Use {...}")
        unknown = [k for k in entry if k not in ENTRY_KEYS]
        if unknown:
            fail(
                where,
                f"served model entry has unknown key(s) {unknown}",
                f"Use keys from {list(ENTRY_KEYS)}",
            )
        for key in ("name", "base_url", "model", "tokenizer"):
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                fail(
                    where,
                    f"served model entry {dict(entry)!r} has no {key!r} string",
                    f'Add {key} = "..." (name, base_url, model and tokenizer are required)',
                )
        raw_endpoints = entry.get("endpoints")
        if raw_endpoints is None:
            endpoints = [entry["base_url"]]
        elif isinstance(raw_endpoints, list | tuple) and all(
            isinstance(e, str) for e in raw_endpoints
        ):
            endpoints = [entry["base_url"], *[e for e in raw_endpoints if e != entry["base_url"]]]
        else:
            fail(
                where,
                f"'endpoints' of {entry['name']!r} must be a list of URLs, got {raw_endpoints!r}",
                'Write endpoints = ["http://127.0.0.1:8001/v1", ...]',
            )
        for url in endpoints:
            _check_url(url, entry["name"], where)
        norm = [_norm(u) for u in endpoints]
        if len(set(norm)) != len(norm):
            fail(where, f"'endpoints' of {entry['name']!r} lists a server twice", "Remove it")
        out = {k: entry[k] for k in ("name", "base_url", "model", "tokenizer")}
        out["endpoints"] = tuple(endpoints)
        for key in ("concurrency", "max_retries", "top_logprobs"):
            if key in entry:
                minimum = 0 if key == "max_retries" else 1
                out[key] = check_positive_int(entry[key], where, key, minimum=minimum)
        if "timeout" in entry:
            t = entry["timeout"]
            if isinstance(t, bool) or not isinstance(t, int | float) or not t > 0:
                fail(where, f"timeout = {t!r}", "Give a positive number of seconds")
            out["timeout"] = float(t)
        for key in ("api_key_env", "cache_dir"):
            if entry.get(key) is not None:
                if not isinstance(entry[key], str):
                    fail(where, f"{key} = {entry[key]!r} is not a string", f"Quote {key}")
                out[key] = entry[key]
        return cls(**out)

    def attrs(self) -> dict[str, Any]:
        """What a store records about the model."""
        return {
            "kind": "served",
            "base_url": self.base_url,
            "endpoints": list(self.endpoints),
            "served_model": self.model,
            "tokenizer": self.tokenizer,
        }


def _norm(url: str) -> str:
    from psens.backends import normalise_server

    return normalise_server(url)


def _check_url(url: str, name: str, where: str) -> None:
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port
    except ValueError:
        ok = False
    if not ok:
        fail(
            where,
            f"served model {name!r}: {url!r} is not an http(s) URL",
            "Write the server's OpenAI root, e.g. base_url = 'http://127.0.0.1:8000/v1'",
        )


def _root(base_url: str) -> str:
    """The server root beside its OpenAI prefix (``.../v1`` -> ``...``)."""
    b = base_url.rstrip("/")
    return b[: -len("/v1")] if b.endswith("/v1") else b


def load_tokenizer(name_or_path: str, cache_dir=None, *, trust_remote_code: bool = False):
    """The tokenizer the local scorer of ``name_or_path`` uses, without loading weights.

    A packaged name or GGUF file gives the tokenizer of its converted folder when it exists
    (the very files the local scorer reads), else the one transformers reads from the GGUF
    file (what the conversion saves); a folder or hub id gives its own.
    """
    from transformers import AutoTokenizer

    from psens.models.loading import _packaged_gguf, file_digest, resolve_source

    src = resolve_source(name_or_path, cache_dir)
    remote = {"trust_remote_code": bool(trust_remote_code)}  # never None: it would prompt
    if src["kind"] == "gguf":
        gguf = src["path"] or _packaged_gguf(src["name"], src["cache"])
        entry = f"{src['name'] if src['path'] is None else gguf.stem}-{file_digest(gguf)[:16]}"
        folder = src["cache"] / entry
        if (folder / "tokenizer_config.json").exists():
            return AutoTokenizer.from_pretrained(folder, **remote), src
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **remote), src
    return AutoTokenizer.from_pretrained(str(src["path"]), **remote), src


def check_reachable(spec: ServedModel, timeout: float = 5.0) -> None:
    """Refuse a served model whose endpoints nobody answers at (a TCP connect to each
    host and port; no request), before a run creates its store."""
    import socket

    for url in spec.endpoints:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname, port), timeout=timeout):
                pass
        except OSError as exc:
            fail(
                "psens run",
                f"the server of {spec.name!r} at {url} does not answer ({exc.strerror or exc})",
                "Start it, or fix 'base_url'/'endpoints' of the model entry",
            )
