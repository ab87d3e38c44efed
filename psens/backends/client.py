"""The OpenAI-compatible HTTP client, its replies and its response cache (:mod:`psens.backends`)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from psens._validation import check_positive_int, fail

__all__ = [
    "OpenAIClient",
    "Response",
    "ResponseCache",
    "cache_key",
    "normalise_server",
]

Status = Literal["ok", "failed"]
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: Default bound on the size of one reply body (8 MiB).
MAX_RESPONSE_BYTES = 8 * 2**20
#: Bytes of an error reply (HTTP status other than 200) read for its error text.
_ERROR_BYTES = 4096


# --------------------------------------------------------------------------------------------
# responses and cache
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    """One generation: ``status`` "ok" with ``text``, or "failed" with ``error`` (text None).

    ``cached`` tells whether it came from the disk cache; ``attempts`` how many HTTP requests
    were made for it (0 for a cache hit).
    """

    status: Status
    text: str | None
    key: str
    error: str | None = None
    finish_reason: str | None = None
    cached: bool = False
    attempts: int = 0
    raw: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True for a successful call."""
        return self.status == "ok"


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def normalise_server(base_url: str) -> str:
    """The server part of a cache key: ``base_url`` in one canonical spelling.

    Scheme and host are lower-cased, a default port (80 for http, 443 for https), user
    credentials, a fragment and trailing slashes are dropped; the path (and a query, if any)
    is kept, so ``/v1`` of two servers, or two prefixes of one server, stay apart.

    Examples
    --------
    >>> normalise_server("HTTP://User:pw@LocalHost:80/v1/")
    'http://localhost/v1'
    >>> normalise_server("https://[::1]:8443/v1")
    'https://[::1]:8443/v1'
    """
    try:
        parts = urlsplit(str(base_url).strip())
        port = parts.port
    except ValueError as exc:
        fail(
            "normalise_server", f"base_url={base_url!r} ({exc})", "Pass e.g. 'http://host:8000/v1'"
        )
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port is None or port == default_port else f"{host}:{port}"
    out = f"{scheme}://{netloc}{parts.path.rstrip('/')}"
    return f"{out}?{parts.query}" if parts.query else out


def cache_key(
    kind: str,
    model: str,
    payload: Any,
    params: Mapping[str, Any],
    seed: int | None = None,
    *,
    server: str | None = None,
) -> str:
    """SHA-256 hex key of (server, endpoint kind, model, prompt or messages, params, seed).

    Params are canonicalised (sorted keys, ``None`` values dropped), so argument order does
    not matter. ``server`` is a base URL, normalised by :func:`normalise_server`, so that two
    servers serving a model of the same name have different keys; :class:`OpenAIClient`
    always passes its own. Without a server (local models) the key is the one of earlier
    versions of psens. HTTP answers cached by earlier versions, whose keys had no server,
    are not found any more: they are asked again once and then cached under the new key.
    """
    clean = {k: v for k, v in params.items() if v is not None}
    fields: dict[str, Any] = {
        "kind": kind,
        "model": model,
        "payload": payload,
        "params": clean,
        "seed": seed,
    }
    if server is not None:
        fields["server"] = normalise_server(server)
    return hashlib.sha256(_canonical(fields).encode("utf-8")).hexdigest()


class ResponseCache:
    """JSON records keyed by a hex key: on disk when ``root`` is given, else in memory.

    On disk each key is one file ``<root>/<key[:2]>/<key>.json``, written atomically
    (temporary file in the same folder, fsync, ``os.replace``), so threads and processes can
    share a folder (the last writer of a key wins; all writers hold the same content). A
    torn or unreadable file reads as a miss. ``root=None`` keeps the records in memory for
    the lifetime of the object.

    One cache serves every caller: :class:`OpenAIClient` stores one response per key
    (:func:`cache_key`), :class:`psens.dbsa.CachedSampler` the growing list of samples of a
    (model, prompt, params, seed).
    """

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else None
        self._memory: dict[str, dict[str, Any]] = {}
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        """The file of ``key`` (an on-disk cache only)."""
        if self.root is None:
            fail("ResponseCache.path", "this cache is in memory", "Give the cache a folder")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key``, or None (also for an unreadable file)."""
        if self.root is None:
            rec = self._memory.get(key)
            return None if rec is None else dict(rec)
        try:
            return json.loads(self.path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Store ``record`` under ``key`` (atomically on disk)."""
        if self.root is None:
            self._memory[key] = json.loads(json.dumps(record))  # a copy, as on disk
            return
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(record, fh, ensure_ascii=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        if self.root is None:
            return len(self._memory)
        return sum(1 for _ in self.root.glob("*/*.json"))

    def __contains__(self, key: str) -> bool:
        if self.root is None:
            return key in self._memory
        return self.path(key).exists()


# --------------------------------------------------------------------------------------------
# HTTP client
# --------------------------------------------------------------------------------------------


class _Refused(RuntimeError):
    """A reply the client stopped reading (too large, or past the deadline)."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class _DeadlineStream:
    """A network stream whose reads, writes and TLS handshake end by the thread's deadline."""

    def __init__(self, stream: Any, clock: _Deadlines) -> None:
        self._stream = stream
        self._clock = clock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._clock.clamp(timeout, "read"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._clock.clamp(timeout, "write"))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout=None):
        tls = self._stream.start_tls(
            ssl_context, server_hostname, self._clock.clamp(timeout, "connect")
        )
        return _DeadlineStream(tls, self._clock)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    """An httpcore network backend that hands out :class:`_DeadlineStream` connections."""

    def __init__(self, backend: Any, clock: _Deadlines) -> None:
        self._backend = backend
        self._clock = clock

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = self._backend.connect_tcp(
            host, port, self._clock.clamp(timeout, "connect"), local_address, socket_options
        )
        return _DeadlineStream(stream, self._clock)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        stream = self._backend.connect_unix_socket(
            path, self._clock.clamp(timeout, "connect"), socket_options
        )
        return _DeadlineStream(stream, self._clock)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _Deadlines(threading.local):
    """The deadline (``time.monotonic()`` value) of the request running in this thread.

    Every socket operation of a request gets the smaller of its own timeout and the time
    left, so the total deadline holds however slowly the server trickles bytes; past the
    deadline the operation fails at once with an httpcore timeout (an ``httpx`` timeout for
    the caller).
    """

    end: float | None = None

    def clamp(self, timeout: float | None, op: str) -> float | None:
        """The timeout for one socket operation ``op`` ("read", "write", "connect")."""
        if self.end is None:
            return timeout
        left = self.end - time.monotonic()
        if left <= 0:
            import httpcore

            exc = {"read": httpcore.ReadTimeout, "write": httpcore.WriteTimeout}
            raise exc.get(op, httpcore.ConnectTimeout)("the request deadline has passed")
        return left if timeout is None else min(timeout, left)

    def install(self, http: Any) -> None:
        """Put the deadline on every connection pool of an ``httpx.Client`` (its transport and
        proxy mounts). This reaches into httpx and httpcore internals
        (``HTTPTransport._pool``, ``ConnectionPool._network_backend``); where they differ,
        nothing is changed and the deadline is still checked between the chunks of a body (a
        trickle of headers is then only bounded by ``timeout`` per read)."""
        transports = [getattr(http, "_transport", None)]
        transports += list((getattr(http, "_mounts", None) or {}).values())
        for transport in transports:
            pool = getattr(transport, "_pool", None)
            backend = getattr(pool, "_network_backend", None)
            if backend is not None and not isinstance(backend, _DeadlineBackend):
                pool._network_backend = _DeadlineBackend(backend, self)


def _seconds(retry_after: str | None) -> float | None:
    """The seconds of a ``Retry-After`` header (None when absent or an HTTP date)."""
    try:
        wait = float(retry_after) if retry_after else None
    except ValueError:
        return None
    return wait if wait is not None and math.isfinite(wait) and wait >= 0 else None


class OpenAIClient:
    """Client for an OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp).

    Parameters
    ----------
    base_url
        Server root including the version prefix, e.g. ``http://127.0.0.1:8000/v1``. Its
        normalised form (:func:`normalise_server`) is part of the cache key.
    model
        Model name sent with every request (part of the cache key).
    api_key
        Bearer token, if the server needs one (pass it explicitly; nothing is read from the
        environment).
    timeout
        Seconds allowed for each network step of a request (connecting, each write, each
        read, waiting for a pooled connection).
    deadline
        Seconds allowed for one whole HTTP request, from sending it to the last byte of the
        reply; default ``3 * timeout``. A request past its deadline is abandoned and counts as
        a timeout (retried like one, each attempt with a fresh deadline).
    max_response_bytes
        Largest reply body read, in bytes (default 8 MiB). A larger reply is a failed call
        (not retried); at most this many bytes are read (none when ``Content-Length``
        announces a larger body). Replies are asked for without compression
        (``Accept-Encoding: identity``, unless ``headers`` say otherwise) and the bound
        applies to the decoded body.
    max_retries
        Retries after the first attempt for retryable failures.
    backoff, backoff_max
        Sleep ``min(backoff_max, backoff · 2**attempt)`` seconds between attempts.
    concurrency
        Requests in flight at once for the batch methods.
    cache_dir
        Folder of the :class:`ResponseCache`; None disables caching.
    default_params
        Request params applied to every call (e.g. ``temperature=0, max_tokens=64``); per-call
        params override them.
    headers
        Extra HTTP headers sent with every request.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        deadline: float | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_retries: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        concurrency: int = 4,
        cache_dir: str | os.PathLike | None = None,
        default_params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        import httpx

        where = "OpenAIClient"
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            fail(where, f"base_url={base_url!r}", "Pass e.g. 'http://127.0.0.1:8000/v1'")
        check_positive_int(concurrency, where, "concurrency")
        check_positive_int(max_retries, where, "max_retries", minimum=0)
        self.max_response_bytes = check_positive_int(
            max_response_bytes, where, "max_response_bytes"
        )
        if not timeout or timeout <= 0:
            fail(where, f"timeout={timeout!r}", "Pass a positive number of seconds")
        if deadline is None:
            deadline = 3.0 * float(timeout)
        if isinstance(deadline, bool) or not isinstance(deadline, int | float):
            fail(where, f"deadline={deadline!r}", "Pass a number of seconds", TypeError)
        if not (math.isfinite(deadline) and deadline > 0):
            fail(
                where,
                f"deadline={deadline!r}",
                "Pass a positive, finite number of seconds (or None for 3 × timeout)",
            )
        self.base_url = base_url.rstrip("/")
        self.server = normalise_server(self.base_url)
        self.model = model
        self.timeout = float(timeout)
        self.deadline = float(deadline)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.backoff_max = float(backoff_max)
        self.concurrency = int(concurrency)
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self.default_params = dict(default_params or {"temperature": 0.0})
        hdrs = {"Accept-Encoding": "identity", **dict(headers or {})}
        if api_key:
            hdrs["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(self.timeout),
            headers=hdrs,
            limits=httpx.Limits(max_connections=self.concurrency),
        )
        self._deadlines = _Deadlines()
        self._deadlines.install(self._http)
        self._lock = threading.Lock()
        self.n_requests = 0  # HTTP requests sent (for tests and progress reports)

    # ---------------------------------------------------------------- plumbing

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> OpenAIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def models(self) -> list[str]:
        """Model ids served (``GET /models``); raises on any failure (with the deadline and
        the size bound of every request)."""
        with self._deadline() as end, self._http.stream("GET", "/models") as r:
            r.raise_for_status()
            data = json.loads(self._read(r, end, self.max_response_bytes))
        return [m["id"] for m in data.get("data", [])]

    def _params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.default_params, **params}
        return {k: v for k, v in merged.items() if v is not None}

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff * 2**attempt
        wait = _seconds(retry_after)
        if wait is not None:
            delay = max(delay, wait)
        if delay > 0:
            time.sleep(min(delay, self.backoff_max))

    @contextmanager
    def _deadline(self) -> Iterator[float]:
        """Run one HTTP request of this thread under the deadline; yields its end time."""
        end = time.monotonic() + self.deadline
        self._deadlines.end = end
        try:
            yield end
        finally:
            self._deadlines.end = None

    def _deadline_error(self) -> str:
        return f"deadline of {self.deadline:g} s exceeded (the reply was not complete by then)"

    def _read(self, r: Any, end: float, limit: int, *, truncate: bool = False) -> bytes:
        """The body of the streamed response ``r``: at most ``limit`` bytes (the first
        ``limit`` if ``truncate``, else :class:`_Refused` for a larger body), by ``end``."""
        declared = r.headers.get("content-length", "")
        if not truncate and declared.isdigit() and int(declared) > limit:
            raise _Refused(
                f"response body larger than max_response_bytes={limit} "
                f"(Content-Length: {declared}); not read",
                retryable=False,
            )
        buf = bytearray()
        for chunk in r.iter_bytes():
            if time.monotonic() > end:
                raise _Refused(self._deadline_error(), retryable=True)
            buf += chunk
            if len(buf) > limit:
                if truncate:
                    return bytes(buf[:limit])
                raise _Refused(
                    f"response body larger than max_response_bytes={limit} "
                    f"(stopped reading after {len(buf)} bytes)",
                    retryable=False,
                )
        return bytes(buf)

    def _attempt(self, path: str, body: dict[str, Any]) -> tuple[Any, str | None, bool, str | None]:
        """One POST → (json, error, retryable, retry_after)."""
        import httpx

        with self._deadline() as end:
            try:
                with self._http.stream("POST", path, json=body) as r:
                    if r.status_code != 200:
                        text = self._read(r, end, _ERROR_BYTES, truncate=True)
                        error = f"HTTP {r.status_code}: {text.decode('utf-8', 'replace')[:300]}"
                        retry = r.status_code in RETRY_STATUS
                        return None, error, retry, r.headers.get("retry-after")
                    raw = self._read(r, end, self.max_response_bytes)
            except _Refused as exc:
                return None, str(exc), exc.retryable, None
            except httpx.TimeoutException as exc:
                if time.monotonic() >= end - 1e-3:  # the deadline, not the per-read timeout
                    return None, self._deadline_error(), True, None
                return None, f"timeout after {self.timeout:g} s ({type(exc).__name__})", True, None
            except httpx.TransportError as exc:
                return None, f"connection error: {type(exc).__name__}: {exc}", True, None
            except httpx.HTTPError as exc:  # e.g. a body that cannot be decoded
                return None, f"HTTP error: {type(exc).__name__}: {exc}", True, None
        try:
            return json.loads(raw), None, False, None
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            snippet = raw[:200].decode("utf-8", "replace")
            return None, f"HTTP 200 with a body that is not JSON: {snippet!r}", True, None

    def _post(self, path: str, body: dict[str, Any]) -> tuple[Any, str | None, int]:
        """POST with retries → (json, error, attempts)."""
        error = None
        for attempt in range(self.max_retries + 1):
            with self._lock:
                self.n_requests += 1
            data, error, retryable, retry_after = self._attempt(path, body)
            if error is None:
                return data, None, attempt + 1
            if not retryable:
                return None, error, attempt + 1
            wait = _seconds(retry_after)
            if wait is not None and wait > self.backoff_max and attempt < self.max_retries:
                return (
                    None,
                    f"{error}; the server asked to wait {wait:g} s before retrying, more than "
                    f"backoff_max = {self.backoff_max:g} s: not retried now (run again later)",
                    attempt + 1,
                )
            if attempt < self.max_retries:
                self._sleep(attempt, retry_after)
        return None, f"{error} (after {self.max_retries + 1} attempts)", self.max_retries + 1

    def _call(self, kind: str, payload: Any, params: Mapping[str, Any]) -> Response:
        p = self._params(params)
        seed = p.get("seed")
        clean = {k: v for k, v in p.items() if k != "seed"}
        key = cache_key(kind, self.model, payload, clean, seed, server=self.server)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and hit.get("status") == "ok":
                return Response(
                    "ok", hit["text"], key, finish_reason=hit.get("finish_reason"), cached=True
                )
        field_name = "messages" if kind == "chat" else "prompt"
        path = "/chat/completions" if kind == "chat" else "/completions"
        data, error, attempts = self._post(path, {"model": self.model, field_name: payload, **p})
        if error is not None:
            return Response("failed", None, key, error=error, attempts=attempts)
        raw = data if isinstance(data, Mapping) else None
        text, finish, problem = _extract_text(kind, data)
        if problem:
            return Response("failed", None, key, error=problem, attempts=attempts, raw=raw)
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "status": "ok",
                    "text": text,
                    "finish_reason": finish,
                    "kind": kind,
                    "server": self.server,
                    "model": self.model,
                    field_name: payload,
                    "params": p,
                },
            )
        return Response("ok", text, key, finish_reason=finish, attempts=attempts, raw=raw)

    def _many(self, kind: str, payloads: Sequence[Any], params: Mapping[str, Any]) -> list:
        if len(payloads) <= 1 or self.concurrency == 1:
            return [self._call(kind, x, params) for x in payloads]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda x: self._call(kind, x, params), payloads))

    # ---------------------------------------------------------------- public calls

    def chat(self, messages: Sequence[Mapping[str, str]], **params: Any) -> Response:
        """One chat completion (``POST /chat/completions``); params as in the OpenAI API
        (``temperature``, ``max_tokens``, ``seed``, ``stop``, ...)."""
        _check_messages(messages)
        return self._call("chat", [dict(m) for m in messages], params)

    def complete(self, prompt: str, **params: Any) -> Response:
        """One text completion (``POST /completions``)."""
        if not isinstance(prompt, str):
            fail("complete", f"prompt is a {type(prompt).__name__}", "Pass a string", TypeError)
        return self._call("completions", prompt, params)

    def chat_many(
        self, conversations: Sequence[Sequence[Mapping[str, str]]], **params: Any
    ) -> list[Response]:
        """:meth:`chat` for many conversations, ``concurrency`` at a time, results in order."""
        for m in conversations:
            _check_messages(m)
        return self._many("chat", [[dict(x) for x in m] for m in conversations], params)

    def complete_many(self, prompts: Sequence[str], **params: Any) -> list[Response]:
        """:meth:`complete` for many prompts, ``concurrency`` at a time, results in order."""
        return self._many("completions", list(prompts), params)

    def generate(self, prompts: Sequence[str], *, chat: bool = True, **params: Any) -> list:
        """Texts for ``prompts`` (each as one user message if ``chat``); a failed call gives
        ``None`` in its place. The ``generate(prompts) -> list`` shape of the model layer."""
        if chat:
            res = self.chat_many([[{"role": "user", "content": p}] for p in prompts], **params)
        else:
            res = self.complete_many(prompts, **params)
        return [r.text if r.ok else None for r in res]


def _check_messages(messages: Any) -> None:
    ok = isinstance(messages, Sequence) and not isinstance(messages, str) and len(messages) > 0
    ok = ok and all(
        isinstance(msg, Mapping) and "role" in msg and "content" in msg for msg in messages
    )
    if not ok:
        fail(
            "chat",
            "messages must be a non-empty list of {'role': ..., 'content': ...} dicts",
            "Pass e.g. [{'role': 'user', 'content': 'Hi'}]",
            TypeError,
        )


def _a(value: Any) -> str:
    """The JSON type of a decoded value, with an article: "null", "a string", "an array"..."""
    if value is None:
        return "null"
    for kind, name in (
        (bool, "a boolean"),
        (int | float, "a number"),
        (str, "a string"),
        (list, "an array"),
        (Mapping, "an object"),
    ):
        if isinstance(value, kind):
            return name
    return f"a {type(value).__name__}"


def _extract_text(kind: str, data: Any) -> tuple[str | None, str | None, str | None]:
    """(text, finish_reason, problem) of a completion JSON; ``problem`` names what is wrong
    with a reply that does not have the OpenAI shape (then text is None)."""

    def bad(what: str, part: Any) -> tuple[None, None, str]:
        return None, None, f"malformed reply: {what}: {_canonical(part)[:200]}"

    if not isinstance(data, Mapping):
        return bad(f"the reply is {_a(data)}, not an object", data)
    if "choices" not in data or data["choices"] is None:
        return bad("the reply has no 'choices'", data)
    choices = data["choices"]
    if not isinstance(choices, list):
        return bad(f"'choices' is {_a(choices)}, not an array", data)
    if not choices:
        return bad("'choices' is empty", data)
    first = choices[0]
    if not isinstance(first, Mapping):
        return bad(f"choices[0] is {_a(first)}, not an object", data)
    if kind == "chat":
        message = first.get("message")
        if message is None:
            return bad("choices[0] has no 'message'", first)
        if not isinstance(message, Mapping):
            return bad(f"choices[0].message is {_a(message)}, not an object", first)
        text, where = message.get("content"), "choices[0].message"
        field_name = "content"
    else:
        text, where, field_name = first.get("text"), "choices[0]", "text"
    if text is None:
        return bad(f"{where} has no '{field_name}'", first)
    if not isinstance(text, str):
        return bad(f"{where}.{field_name} is {_a(text)}, not a string", first)
    finish = first.get("finish_reason")
    return text, finish if isinstance(finish, str) else None, None
