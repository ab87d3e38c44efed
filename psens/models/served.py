"""The IPS value function of a model behind an HTTP server (llama.cpp, vLLM, TGI, ...).

A served model is a run's model entry of the form::

    {"name": "smollm2-q4", "base_url": "http://127.0.0.1:8000/v1", "model": "smollm2",
     "tokenizer": "smollm2-135m-instruct"}

(a TOML inline table in ``models = [...]``). :class:`ServedScorer` has the interface of
:class:`psens.models.Scorer` (``value``, ``predict``, ``info``): it renders and tokenises
every prompt locally exactly as the local scorer does (same templates, same words, same mask
token, same answer token; the tokenizer is a packaged name, a folder, a GGUF file or a hub
id), and asks the server only for log-probabilities. For a masked prompt ``x_T`` (token ids)
and the answer's first token ``y*``

.. math::  v(x_T) = \\log \\frac{p}{1 - p}, \\qquad p = \\exp \\log p(y^* \\mid x_T),

with ``p`` clamped to ``[1e-7, 1 - 1e-7]`` as in :mod:`psens.models.scorer`; ``log p`` is
the server's full-vocabulary log-softmax at the answer position.

How the server is asked (probed once per endpoint, :meth:`ServedScorer.probe`)
------------------------------------------------------------------------------
``prompt_logprobs`` (vLLM)
    ``POST /completions`` with the token ids of ``x_T + y*`` and ``prompt_logprobs``: the
    log-probability of every prompt token given the tokens before it (by token id).
``native`` (llama.cpp ``llama-server``)
    ``POST /completion`` (beside ``/v1``) with token ids, ``n_predict = 1``, ``n_probs``
    and ``cache_prompt``: the next-token distribution after ``x_T`` (by token id).
``tgi`` (text-generation-inference)
    ``POST /generate`` with ``decoder_input_details``: prompt log-probabilities by token
    id. TGI takes text, not ids: the prompt is decoded and the ids the server reports are
    compared with the local ones; a request the server tokenised differently fails.
``echo`` (OpenAI-style completions that take ids)
    ``echo`` + ``logprobs``: used only when the echoed log-probability of a token equals
    the one the server gives when it generates that token (llama-cpp-python's echo is one
    position off for models without a BOS token, so it is not used there).
``next`` (llama-cpp-python and other OpenAI-style completions)
    ``max_tokens = 1`` with ``logprobs = k``: the top-k next-token distribution after
    ``x_T``, keyed by token text; asked again with the whole vocabulary when ``y*`` is not
    among the top k. End-of-text tokens get a logit bias so that generation does not stop
    before the first token (the bias acts on sampling, not on the reported
    log-probabilities). llama-cpp-python takes no token ids: prompts are sent as text
    (see *Text prompts*).

A server that answers none of these (a chat-only API) is refused: IPS needs the
log-probability of a given token after a given prompt.

Text prompts
------------
When a server takes no token ids, the masked ids are decoded to text and the server
tokenises them again. psens checks that the local tokenizer gives the same ids back (a
prompt that does not survive the round trip fails its request), and that the server counts
as many prompt tokens (``usage.prompt_tokens``) as psens sent; what may still differ is a
server tokenizer that splits the same number of tokens differently. A warning says so once
per scorer.

Reliability
-----------
Every request goes through :class:`psens.backends.OpenAIClient`'s plumbing: a total deadline,
retries with backoff, a bound on the reply size. Answers are kept in a
:class:`psens.backends.ResponseCache` (in memory, or on disk with ``cache_dir``) keyed by
(server, model, token ids, what was asked), so a resumed run asks nothing twice. A request
that still fails raises :class:`ServedError`: the runner records the block as failed, never
a wrong number.

Speed
-----
The unique masked prompts of one (item, template) are sent in the local scorer's
prefix-tree order (sorted token rows: neighbours share the longest prefixes), so a server
that keeps its last prompt's key/value cache (llama.cpp ``cache_prompt``, llama-cpp-python)
recomputes only the tokens after the first difference. ``concurrency`` requests per endpoint
are in flight at once; with several ``endpoints`` (replicas of one model) the prompts are
split into contiguous runs of that order, one per endpoint. The values do not depend on the
split: each is a function of its own token ids.

References
----------
R. Qin, Q. Wang, T. Wang, Z. Wei, W. Shen. *Evaluating and Explaining Prompt Sensitivity of
LLMs Using Interactions.* ICML 2026 (PMLR 306). arXiv:2608.18539 (§3.1, appendix E).
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from psens import prompts as _prompts
from psens._validation import check_positive_int, fail
from psens.datasets import Item
from psens.models.scorer import Prediction, Scorer, _log_odds

__all__ = ["MODES", "ServedError", "ServedModel", "ServedScorer", "load_tokenizer"]

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


def load_tokenizer(name_or_path: str, cache_dir=None):
    """The tokenizer the local scorer of ``name_or_path`` uses, without loading weights.

    A packaged name or GGUF file gives the tokenizer of its converted folder when it exists
    (the very files the local scorer reads), else the one transformers reads from the GGUF
    file (what the conversion saves); a folder or hub id gives its own.
    """
    from transformers import AutoTokenizer

    from psens.models.loading import _packaged_gguf, file_digest, resolve_source

    src = resolve_source(name_or_path, cache_dir)
    if src["kind"] == "gguf":
        gguf = src["path"] or _packaged_gguf(src["name"], src["cache"])
        entry = f"{src['name'] if src['path'] is None else gguf.stem}-{file_digest(gguf)[:16]}"
        folder = src["cache"] / entry
        if (folder / "tokenizer_config.json").exists():
            return AutoTokenizer.from_pretrained(folder), src
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name), src
    return AutoTokenizer.from_pretrained(str(src["path"])), src


# ----------------------------------------------------------------------------- requests


@dataclass
class _Probe:
    mode: str
    ids: bool  # the server takes token ids
    note: str = ""


class _Endpoint:
    """One server: a client for its OpenAI root and one for the root beside it."""

    def __init__(self, spec: ServedModel, url: str, *, retries: int | None = None):
        from psens.backends import OpenAIClient

        kw = {
            "timeout": spec.timeout,
            "max_retries": spec.max_retries if retries is None else retries,
            "concurrency": max(1, spec.concurrency),
            "api_key": os.environ.get(spec.api_key_env) if spec.api_key_env else None,
            "max_response_bytes": 64 * 2**20,  # a whole-vocabulary distribution
        }
        self.url, self.spec = url, spec
        self.v1 = OpenAIClient(url, spec.model, **kw)
        self.root = OpenAIClient(_root(url), spec.model, **kw)
        self.tokens = {"prompt": 0, "cached": 0, "replies": 0}
        self._lock = threading.Lock()

    def post(self, path: str, body: dict, *, root: bool = False) -> tuple[Any, str | None]:
        data, error, _ = (self.root if root else self.v1)._post(path, body)
        named = data.get("model") if error is None and isinstance(data, Mapping) else None
        if isinstance(named, str) and named and named != self.spec.model:
            raise ServedError(
                f"{self.spec.name}: the server at {self.url} answered as model {named!r}, not "
                f"the {self.spec.model!r} asked for; set 'model' of the entry to the served "
                "model's name (llama-cpp-python: --model_alias, llama-server: --alias)"
            )
        counts = _prompt_token_counts(data) if error is None else None
        if counts is not None:
            with self._lock:
                self.tokens["prompt"] += counts[0]
                self.tokens["cached"] += counts[1]
                self.tokens["replies"] += 1
        return data, error

    @property
    def n_requests(self) -> int:
        return self.v1.n_requests + self.root.n_requests

    def close(self) -> None:
        self.v1.close()
        self.root.close()


class ServedScorer(Scorer):
    """A :class:`psens.models.Scorer` whose model is behind an HTTP server.

    Parameters
    ----------
    spec : ServedModel or mapping
        The model entry (:meth:`ServedModel.from_entry`).
    mask_token : str or int, optional
        Mask-token override (as for :func:`psens.models.load`).
    cache_dir : path, optional
        Where a packaged or GGUF tokenizer's converted folder is looked up.
    n_max, seed, one_token_per_word, progress, open_tokens, open_reduce
        As for :class:`psens.models.Scorer`.

    Notes
    -----
    ``predict`` returns no hidden state (a server does not give one): ``hidden`` is one NaN,
    so the appendix H similarities of a served model are NaN.
    """

    def __init__(
        self,
        spec: ServedModel | Mapping[str, Any],
        *,
        mask_token: str | int | None = None,
        cache_dir=None,
        n_max: int = 10,
        seed: int = 0,
        one_token_per_word: bool = False,
        progress: bool = False,
        open_tokens: int = 8,
        open_reduce: str = "mean",
        batch_size: int | None = None,  # accepted for the runner; a server batches itself
    ) -> None:
        from psens.backends import ResponseCache
        from psens.models.mask_tokens import mask_token as _mask_rule
        from psens.models.registry import lookup

        self.spec = spec if isinstance(spec, ServedModel) else ServedModel.from_entry(spec)
        tok, src = load_tokenizer(self.spec.tokenizer, cache_dir)
        if not getattr(tok, "is_fast", False):
            fail(WHERE, f"the tokenizer of {self.spec.name!r} is not fast", "Use a fast one")
        row = lookup(src["name"]) or lookup(self.spec.tokenizer)
        self.tokenizer = tok
        self.model = None
        self.name = self.spec.name
        self.mask = _mask_rule(tok, row["name"] if row else None, mask_token)
        self.n_max, self.seed = n_max, seed
        self.one_token_per_word = one_token_per_word
        self.batch_size = batch_size
        self.progress = progress
        self.open_tokens = check_positive_int(open_tokens, "ServedScorer", "open_tokens")
        self.open_reduce = open_reduce
        self._open_targets: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self.tree = None
        self.info = {"name": self.spec.name, "source": self.spec.base_url, **self.spec.attrs()}
        self.cache = ResponseCache(self.spec.cache_dir)
        self._endpoints = [_Endpoint(self.spec, u) for u in self.spec.endpoints]
        self._probes: list[_Probe] | None = None
        self._lock = threading.Lock()
        self._warned = False
        self._by_text: dict[str, list[int]] | None = None
        self._n_ctx: int | None = None
        self._eog = sorted(
            {int(i) for i in tok.all_special_ids}
            | ({int(tok.eos_token_id)} if tok.eos_token_id is not None else set())
        )

    def __repr__(self) -> str:
        mode = self._probes[0].mode if self._probes else "not probed"
        return (
            f"ServedScorer(name={self.name!r}, endpoints={list(self.spec.endpoints)}, "
            f"mode={mode}, mask={self.mask.token!r} (id {self.mask.id}, {self.mask.rule}))"
        )

    @property
    def device(self) -> str:
        """Where the model runs: its first endpoint."""
        return self.spec.base_url

    @property
    def dtype(self) -> str:
        """Unknown (the server's)."""
        return "served"

    @property
    def n_requests(self) -> int:
        """HTTP requests sent so far (all endpoints, retries and probes included)."""
        return sum(e.n_requests for e in self._endpoints)

    @property
    def prompt_cache(self) -> dict[str, float]:
        """The servers' own count of prompt tokens and of those reused from their prompt
        cache, over the replies that reported them (llama.cpp ``llama-server``; vLLM with
        ``--enable-prompt-tokens-details``): ``{"prompt_tokens", "cached_tokens",
        "hit_rate", "replies"}``; ``hit_rate`` = cached / prompt (NaN when none reported).

        Answers from psens's response cache send no request and are not counted.
        """
        prompt = sum(e.tokens["prompt"] for e in self._endpoints)
        cached = sum(e.tokens["cached"] for e in self._endpoints)
        return {
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "hit_rate": cached / prompt if prompt else float("nan"),
            "replies": sum(e.tokens["replies"] for e in self._endpoints),
        }

    def close(self) -> None:
        """Close the HTTP connections."""
        for e in self._endpoints:
            e.close()

    def _text_config(self):
        return SimpleNamespace(max_position_embeddings=self._n_ctx)

    # ------------------------------------------------------------------ probing

    def probe(self) -> list[_Probe]:
        """Ask every endpoint once what it supports (cached); refuse an unusable server."""
        with self._lock:
            if self._probes is None:
                probes = [_probe_endpoint(self, e) for e in self._endpoints]
                modes = {(p.mode, p.ids) for p in probes}
                if len(modes) > 1:
                    found = ", ".join(
                        f"{e.url}: {p.mode}" for e, p in zip(self._endpoints, probes, strict=True)
                    )
                    fail(
                        WHERE,
                        f"the endpoints of {self.name!r} are different servers ({found})",
                        "List replicas of one server kind in 'endpoints'",
                    )
                self._probes = probes
        return self._probes

    @property
    def mode(self) -> str:
        """How log-probabilities are asked (one of :data:`MODES`; probes on first use)."""
        return self.probe()[0].mode

    # ------------------------------------------------------------------ requests

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(
            [int(i) for i in ids], skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def _text_of(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` for a server without token ids (round trip checked)."""
        text = self._decode(ids)
        back = self._tokens(text)
        if not np.array_equal(back, np.asarray(ids, dtype=np.int64)):
            raise ServedError(
                f"{self.name}: the masked prompt does not survive decoding and tokenising "
                f"again ({len(ids)} -> {len(back)} tokens), and the server takes no token ids; "
                "use a server that takes token ids (vLLM, llama.cpp llama-server)"
            )
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.name}: the server takes no token ids; prompts are sent as text and "
                "tokenised again by the server. psens checks the round trip locally and the "
                "server's prompt-token count, but a server tokenizer that splits text "
                "differently into as many tokens would go unnoticed.",
                stacklevel=3,
            )
        return text

    def _ids_for_text(self, text: str) -> list[int]:
        """Token ids whose decoded text is ``text`` (for replies keyed by token text)."""
        if self._by_text is None:
            table: dict[str, list[int]] = {}
            for i in range(len(self.tokenizer)):
                table.setdefault(self._decode([i]), []).append(i)
            self._by_text = table
        return self._by_text.get(text, [])

    def _ask(self, ep: _Endpoint, seq: np.ndarray, k: int) -> tuple[np.ndarray, float]:
        """log p(seq[L - k + j] | seq[: L - k + j]) for j < k, and the largest log-probability
        at the first of these positions (NaN when the server does not say)."""
        from psens.backends import cache_key

        probe = self.probe()[0]
        key = cache_key(
            f"served-logprobs-{probe.mode}",
            self.spec.model,
            [int(x) for x in seq],
            {"k": k, "ids": probe.ids},
            server=self.spec.base_url,
        )
        rec = self.cache.get(key)
        if rec is None:
            lp, top = _ASK[probe.mode](self, ep, probe, np.asarray(seq, dtype=np.int64), k)
            rec = {"logprobs": [float(x) for x in lp], "top": top}
            self.cache.put(key, rec)
        top = rec["top"]
        return np.asarray(rec["logprobs"], dtype=np.float64), (
            float("nan") if top is None else float(top)
        )

    def _many(self, seqs: list[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_ask` for many sequences, in order: contiguous runs per endpoint, each
        ``concurrency`` requests at a time."""
        out = np.empty((len(seqs), k), dtype=np.float64)
        tops = np.empty(len(seqs), dtype=np.float64)
        if not seqs:
            return out, tops
        n_ep = len(self._endpoints)
        bounds = np.linspace(0, len(seqs), n_ep + 1).round().astype(int)

        def run(e: int) -> None:
            ep = self._endpoints[e]
            idx = range(bounds[e], bounds[e + 1])
            if self.spec.concurrency == 1:
                for i in idx:
                    out[i], tops[i] = self._ask(ep, seqs[i], k)
                return
            with ThreadPoolExecutor(self.spec.concurrency) as pool:
                for i, (lp, top) in zip(
                    idx, pool.map(lambda i: self._ask(ep, seqs[i], k), idx), strict=True
                ):
                    out[i], tops[i] = lp, top

        self.probe()
        if n_ep == 1:
            run(0)
        else:
            with ThreadPoolExecutor(n_ep) as pool:
                list(pool.map(run, range(n_ep)))
        return out, tops

    # ------------------------------------------------------------------ scoring

    def _score_rows(self, rows, cuts, targets, bar=None) -> np.ndarray:
        """Per-target log-probabilities of equal-length rows (teacher forcing), asked of
        the server in prefix-tree order (sorted rows)."""
        k = len(targets)
        order = np.lexsort(rows.T[::-1]) if len(rows) > 1 else np.arange(len(rows))
        seqs = [np.concatenate([rows[i], targets]) for i in order]
        logp, _ = self._many(seqs, k)
        out = np.empty((len(rows), k), dtype=np.float64)
        out[order] = logp
        if bar is not None:
            bar.update(len(rows))
        return out

    def _score_naive(self, rows, targets) -> np.ndarray:
        seqs = [np.concatenate([r, targets]) for r in rows]
        return self._many(seqs, len(targets))[0]

    def value(self, item: Item, template="ips1", masks=None, **kwargs) -> np.ndarray:
        """v(x_T) for each bitmask T, from the server (see :meth:`Scorer.value`; ``method``
        only changes the order the prompts are sent in: ``"naive"`` keeps mask order)."""
        self.probe()
        return super().value(item, template, masks, **kwargs)

    def _generate(self, ids: np.ndarray, m: int) -> tuple[np.ndarray, str, float]:
        """Greedy continuation of ``ids``: (new token ids, text, log p of the first one)."""
        from psens.backends import cache_key

        probe = self.probe()[0]
        key = cache_key(
            f"served-generate-{probe.mode}",
            self.spec.model,
            [int(x) for x in ids],
            {"max_new_tokens": m, "ids": probe.ids},
            server=self.spec.base_url,
        )
        rec = self.cache.get(key)
        if rec is None:
            new, text, first = _generate(self, self._endpoints[0], probe, ids, m)
            rec = {"ids": [int(x) for x in new], "text": text, "first": first}
            self.cache.put(key, rec)
        first = rec["first"]
        return (
            np.asarray(rec["ids"], dtype=np.int64),
            rec["text"],
            float("nan") if first is None else float(first),
        )

    def _greedy_ids(self, ids: np.ndarray, m: int) -> np.ndarray:
        return self._generate(ids, m)[0][:m]

    def predict(
        self,
        item: Item,
        template="ips1",
        *,
        shots: Sequence[Item] = (),
        max_new_tokens: int = 8,
        generate: bool = True,
    ) -> Prediction:
        """Greedy prediction on the unmasked prompt, as :meth:`Scorer.predict`.

        The option letters' log-probabilities come from the same kind of request as v
        (one per option); ``confidence`` is the largest next-token probability the server
        reports (its top-1), ``hidden`` one NaN.
        """
        enc = self.encode(item, template, shots=shots)
        t = _prompts.get_template(template)
        text, first = "", float("nan")
        if generate:
            _, text, first = self._generate(enc.ids, max_new_tokens)
        hidden = np.full(1, np.nan)
        if t.kind != "mcq":
            return Prediction(text, None, None, math.nan, math.nan, math.exp(first), {}, hidden)
        labels = list(enc.option_ids)
        seqs = [np.concatenate([enc.ids, [enc.option_ids[lab]]]) for lab in labels]
        logp, tops = self._many(seqs, 1)
        opt = logp[:, 0]
        top = np.nanmax(tops) if np.isfinite(tops).any() else first
        confidence = float(np.exp(max(top, opt.max()))) if np.isfinite(top) else math.nan
        probs = np.exp(opt - opt.max())
        probs /= probs.sum()
        choice = labels[int(np.argmax(opt))]
        lp_target = float(opt[labels.index(item.answer)])
        return Prediction(
            text=text,
            choice=choice,
            correct=choice == item.answer,
            p_target=float(np.exp(lp_target)),
            v=float(_log_odds(np.asarray([lp_target]))[0]),
            confidence=confidence,
            option_probs=dict(zip(labels, probs.tolist(), strict=True)),
            hidden=hidden,
        )


# ----------------------------------------------------------------------------- server kinds


def _prompt_token_counts(data: Any) -> tuple[int, int] | None:
    """(prompt tokens, of which served from the server's prompt cache) when a reply says:
    llama.cpp ``timings.prompt_n`` + ``cache_n``; OpenAI/vLLM ``usage.prompt_tokens`` and
    ``usage.prompt_tokens_details.cached_tokens``."""
    if not isinstance(data, Mapping):
        return None
    t = data.get("timings")
    if isinstance(t, Mapping):
        new, cached = t.get("prompt_n"), t.get("cache_n")
        if isinstance(new, int) and isinstance(cached, int):
            return new + cached, cached
    u = data.get("usage")
    if isinstance(u, Mapping):
        details = u.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        total = u.get("prompt_tokens")
        if isinstance(total, int) and isinstance(cached, int):
            return total, cached
    return None


def _need(data: Any, error: str | None, what: str, name: str) -> Any:
    if error is not None:
        raise ServedError(f"{name}: {what} failed: {error}")
    return data


def _bad(name: str, what: str, data: Any) -> ServedError:
    import json

    snippet = json.dumps(data, default=str)[:200]
    return ServedError(f"{name}: malformed reply ({what}): {snippet}")


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


#: How far above 0 a reported log-probability may be (server rounding) before the reply is
#: refused; an accepted one is rounded down to 0.
LOGPROB_TOL = 1e-4


def _checked(x: Any, name: str, what: str, *, kind: str = "logprob") -> float:
    """The one check of every number a server returns: a log-probability must be finite
    and at most 0 (within :data:`LOGPROB_TOL`; returned clipped to 0), a probability in
    [0, 1]. Anything else raises :class:`ServedError` (the block is recorded as failed,
    never stored as a number): ``log p = +3`` would make ``p = 20``."""
    v = _number(x)
    if kind == "prob":
        if v is None or not -LOGPROB_TOL <= v <= 1 + LOGPROB_TOL:
            raise _bad(name, f"{what} is not a probability in [0, 1]", x)
        return min(max(v, 0.0), 1.0)
    if v is None or v > LOGPROB_TOL:
        raise _bad(name, f"{what} is not a log-probability (a finite number <= 0)", x)
    return min(v, 0.0)


def _path(data: Any, *keys: Any) -> Any:
    """``data[k0][k1]...`` through mappings and lists; None where a level is missing or of
    another type (a reply's ``null`` or string in place of an object)."""
    for k in keys:
        if isinstance(k, int):
            data = data[k] if isinstance(data, list) and -len(data) <= k < len(data) else None
        else:
            data = data.get(k) if isinstance(data, Mapping) else None
        if data is None:
            return None
    return data


def _choice(data: Any, name: str) -> Mapping:
    choices = data.get("choices") if isinstance(data, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise _bad(name, "no choices[0]", data)
    return choices[0]


def _ask_prompt_logprobs(s: ServedScorer, ep, probe, seq, k):
    body = {
        "model": s.spec.model,
        "prompt": [int(x) for x in seq],
        "max_tokens": 1,
        "temperature": 0.0,
        "prompt_logprobs": 1,
    }
    data = _need(*ep.post("/completions", body), "prompt_logprobs request", s.name)
    plp = _choice(data, s.name).get("prompt_logprobs")
    if not isinstance(plp, list) or len(plp) < len(seq):
        raise _bad(s.name, f"prompt_logprobs is not a list of {len(seq)} entries", data)
    out, top = [], None
    for pos in range(len(seq) - k, len(seq)):
        entry = plp[pos]
        if not isinstance(entry, Mapping):
            raise _bad(s.name, f"prompt_logprobs[{pos}] is not an object", entry)
        lp, best = None, None
        for tid, val in entry.items():
            x = _checked(
                val.get("logprob") if isinstance(val, Mapping) else val,
                s.name,
                f"an entry of prompt_logprobs[{pos}]",
            )
            best = x if best is None else max(best, x)
            if str(tid) == str(int(seq[pos])):
                lp = x
        if lp is None:
            raise _bad(s.name, f"prompt_logprobs[{pos}] lacks token {int(seq[pos])}", entry)
        out.append(lp)
        top = best if top is None else top
    return out, top


def _ask_echo(s: ServedScorer, ep, probe, seq, k):
    body = {
        "model": s.spec.model,
        "prompt": [int(x) for x in seq],
        "max_tokens": 1,
        "temperature": 0.0,
        "echo": True,
        "logprobs": 1,
    }
    data = _need(*ep.post("/completions", body), "echo request", s.name)
    lg = _choice(data, s.name).get("logprobs")
    tl = lg.get("token_logprobs") if isinstance(lg, Mapping) else None
    if not isinstance(tl, list) or len(tl) < len(seq):
        raise _bad(s.name, f"token_logprobs is not a list of {len(seq)} entries", data)
    out = [_checked(tl[p], s.name, "a token_logprobs entry") for p in range(len(seq) - k, len(seq))]
    top = None
    tops = lg.get("top_logprobs")
    if isinstance(tops, list) and len(tops) > len(seq) - k:
        first = tops[len(seq) - k]
        if isinstance(first, Mapping):
            vals = [_checked(v, s.name, "a top_logprobs entry") for v in first.values()]
            top = max(vals) if vals else None
    return out, top


def _ask_tgi(s: ServedScorer, ep, probe, seq, k):
    body = {
        "inputs": s._text_of(seq),
        "parameters": {
            "max_new_tokens": 1,
            "details": True,
            "decoder_input_details": True,
            "do_sample": False,
        },
    }
    data = _need(*ep.post("/generate", body, root=True), "TGI /generate request", s.name)
    if isinstance(data, list) and data:
        data = data[0]
    prefill = _path(data, "details", "prefill")
    if not isinstance(prefill, list) or len(prefill) < len(seq):
        raise _bad(s.name, f"details.prefill is not a list of {len(seq)} tokens", data)
    tail = prefill[len(prefill) - len(seq) :]  # a server-added BOS comes first
    ids = [t.get("id") if isinstance(t, Mapping) else None for t in tail]
    if ids != [int(x) for x in seq]:
        at = next(i for i, (a, b) in enumerate(zip(ids, seq, strict=True)) if a != int(b))
        raise ServedError(
            f"{s.name}: the server tokenised the prompt differently from the local tokenizer "
            f"(first difference at token {at}); check that 'tokenizer' is the served model's"
        )
    out = [
        _checked(tail[p].get("logprob"), s.name, "a prefill logprob")
        for p in range(len(seq) - k, len(seq))
    ]
    return out, None


def _next_dist_native(s: ServedScorer, ep, seq, n_probs, again: bool = False):
    """llama-server's next-token distribution (top ``n_probs``). ``again``: the same prompt
    was just sent; llama.cpp would re-evaluate only its last token, alone, and its 4-bit
    kernels round a one-token batch differently from a longer one (log-probabilities move by
    up to ~0.1 on SmolLM2 Q4_1), so the prompt is evaluated afresh instead."""
    body = {
        "prompt": [int(x) for x in seq],
        "n_predict": 1,
        "n_probs": n_probs,
        "cache_prompt": not again,
        "temperature": 0.0,
        "post_sampling_probs": False,
        "logit_bias": [[i, False] for i in s._eog],
    }
    data = _need(*ep.post("/completion", body, root=True), "llama.cpp /completion", s.name)
    probs = data.get("completion_probabilities") if isinstance(data, Mapping) else None
    if not isinstance(probs, list) or not probs or not isinstance(probs[0], Mapping):
        raise _bad(s.name, "no completion_probabilities[0]", data)
    top = probs[0].get("top_logprobs")
    if not isinstance(top, list):
        raise _bad(s.name, "completion_probabilities[0] has no top_logprobs", probs[0])
    dist: dict[int, float] = {}
    for t in top:
        tid = t.get("id") if isinstance(t, Mapping) else None
        if not isinstance(tid, int) or isinstance(tid, bool):
            raise _bad(s.name, "a top_logprobs entry without id and logprob", t)
        dist[tid] = _checked(t.get("logprob"), s.name, "a top_logprobs logprob")
    return dist


def _next_dist_openai(s: ServedScorer, ep, probe, seq, n):
    body = {
        "model": s.spec.model,
        "prompt": [int(x) for x in seq] if probe.ids else s._text_of(seq),
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": n,
        "logit_bias": {str(i): -100 for i in s._eog},
    }
    data = _need(*ep.post("/completions", body), "completions request", s.name)
    if not probe.ids:
        used = _path(data, "usage", "prompt_tokens")
        if isinstance(used, int) and used != len(seq):
            raise ServedError(
                f"{s.name}: the server counted {used} prompt tokens where psens sent "
                f"{len(seq)}: its tokenizer differs from {s.spec.tokenizer!r}"
            )
    lg = _choice(data, s.name).get("logprobs")
    tops = lg.get("top_logprobs") if isinstance(lg, Mapping) else None
    if not isinstance(tops, list) or not tops or not isinstance(tops[0], Mapping):
        raise _bad(s.name, "no logprobs.top_logprobs[0]", data)
    return {t: _checked(x, s.name, "a top_logprobs entry") for t, x in tops[0].items()}


def _ask_next(s: ServedScorer, ep, probe, seq, k):
    """Next-token mode: one request per scored position (k for teacher forcing)."""
    out, top = [], None
    vocab = len(s.tokenizer)
    # top-k of the first ask (llama-server's is wide); the whole vocabulary if `want` is not in it
    first = s.spec.top_logprobs
    if probe.mode == "native":
        first = max(first, NATIVE_TOP_K)
    first = min(first, vocab)
    for pos in range(len(seq) - k, len(seq)):
        prefix, want = seq[:pos], int(seq[pos])
        lp = None
        for n in (first, vocab):
            if probe.mode == "native":
                dist = _next_dist_native(s, ep, prefix, n, again=n == vocab)
                lp = dist.get(want)
                vals = list(dist.values())
            else:
                dist = _next_dist_openai(s, ep, probe, prefix, n)
                text = s._decode([want])
                if len(s._ids_for_text(text)) > 1:
                    raise ServedError(
                        f"{s.name}: the server names tokens by their text and {text!r} is the "
                        "text of several tokens; use a server that takes token ids"
                    )
                lp = dist.get(text)
                vals = list(dist.values())
            if top is None and vals:
                top = max(vals)
            if lp is not None or n == vocab:
                break
        if lp is None:
            raise ServedError(
                f"{s.name}: token {want} is not in the server's whole-vocabulary reply"
            )
        out.append(lp)
    return out, top


_ASK = {
    "prompt_logprobs": _ask_prompt_logprobs,
    "echo": _ask_echo,
    "tgi": _ask_tgi,
    "native": _ask_next,
    "next": _ask_next,
}


def _generate(s: ServedScorer, ep, probe, ids, m):
    """(new ids, text, log p of the first new token or None) of a greedy continuation."""
    if probe.mode == "native":
        body = {"prompt": [int(x) for x in ids], "n_predict": m, "n_probs": 1}
        body.update({"cache_prompt": True, "temperature": 0.0, "post_sampling_probs": False})
        data = _need(*ep.post("/completion", body, root=True), "generation", s.name)
        text = data.get("content") if isinstance(data, Mapping) else None
        if not isinstance(text, str):
            raise _bad(s.name, "no 'content'", data)
        probs = _path(data, "completion_probabilities") or []
        if not isinstance(probs, list) or not all(isinstance(p, Mapping) for p in probs):
            raise _bad(s.name, "completion_probabilities is not a list of objects", data)
        new = [p.get("id") for p in probs]
        first = _first_logprob(s, _path(probs, 0, "logprob"))
        if not all(isinstance(i, int) for i in new):
            new = s._tokens(text).tolist()
        return np.asarray(new, dtype=np.int64), text, first
    if probe.mode == "tgi":
        body = {
            "inputs": s._text_of(ids),
            "parameters": {"max_new_tokens": m, "details": True, "do_sample": False},
        }
        data = _need(*ep.post("/generate", body, root=True), "generation", s.name)
        if isinstance(data, list) and data:
            data = data[0]
        text = data.get("generated_text") if isinstance(data, Mapping) else None
        if not isinstance(text, str):
            raise _bad(s.name, "no 'generated_text'", data)
        toks = _path(data, "details", "tokens") or []
        if not isinstance(toks, list) or not all(isinstance(t, Mapping) for t in toks):
            raise _bad(s.name, "details.tokens is not a list of objects", data)
        new = [t.get("id") for t in toks]
        first = _first_logprob(s, _path(toks, 0, "logprob"))
        return np.asarray(new, dtype=np.int64), text, first
    body = {
        "model": s.spec.model,
        "prompt": [int(x) for x in ids] if probe.ids else s._text_of(ids),
        "max_tokens": m,
        "temperature": 0.0,
        "logprobs": 1,
    }
    data = _need(*ep.post("/completions", body), "generation", s.name)
    c = _choice(data, s.name)
    text = c.get("text")
    if not isinstance(text, str):
        raise _bad(s.name, "choices[0].text is not a string", c)
    first = _first_logprob(s, _path(c, "logprobs", "token_logprobs", 0))
    new = s.tokenizer(text, add_special_tokens=False)["input_ids"]
    return np.asarray(new, dtype=np.int64), text, first


def _first_logprob(s: ServedScorer, x: Any) -> float | None:
    """The log-probability of a generation's first token: None when the reply gives none,
    checked (:func:`_checked`) when it does."""
    return None if x is None else _checked(x, s.name, "the first token's logprob")


def _probe_endpoint(s: ServedScorer, ep: _Endpoint) -> _Probe:
    """What one server supports (see the module docstring); refuses a useless one."""
    quick = _Endpoint(s.spec, ep.url, retries=0)
    try:
        return _probe_with(s, quick)
    finally:
        quick.close()


def _probe_with(s: ServedScorer, ep: _Endpoint) -> _Probe:
    ids = s._tokens("The capital of France is")
    if len(ids) < 2:
        ids = np.asarray(s.tokenizer("The capital of France is")["input_ids"], dtype=np.int64)
    seq = [int(x) for x in ids]
    answered: list[str] = []
    # vLLM: prompt_logprobs by token id
    data, err = ep.post(
        "/completions",
        {"model": s.spec.model, "prompt": seq, "max_tokens": 1, "prompt_logprobs": 1},
    )
    if err is None:
        answered.append("/completions")
        try:
            plp = _choice(data, s.name).get("prompt_logprobs")
        except ServedError:
            plp = None
        if isinstance(plp, list) and len(plp) >= len(seq):
            return _Probe("prompt_logprobs", True)
    elif _unreachable(err):
        _refuse_unreachable(s, ep.url, err)
    # llama.cpp llama-server: /completion with n_probs
    data, err = ep.post("/completion", {"prompt": seq, "n_predict": 1, "n_probs": 1}, root=True)
    if err is None:
        answered.append("/completion")
        probs = data.get("completion_probabilities") if isinstance(data, Mapping) else None
        if isinstance(probs, list) and probs and isinstance(probs[0], Mapping):
            if "top_logprobs" in probs[0]:
                return _Probe("native", True)
    # TGI: /generate with decoder_input_details
    params = {"max_new_tokens": 1, "details": True, "decoder_input_details": True}
    data, err = ep.post("/generate", {"inputs": s._decode(seq), "parameters": params}, root=True)
    if err is None:
        answered.append("/generate")
        d = data[0] if isinstance(data, list) and data else data
        if isinstance(_path(d, "details", "prefill"), list):
            return _Probe("tgi", False)
    # OpenAI-style completions: token ids, then text
    for as_ids in (True, False):
        prompt = seq if as_ids else s._decode(seq)
        body = {"model": s.spec.model, "prompt": prompt, "max_tokens": 1, "logprobs": 5}
        body["temperature"] = 0.0
        body["logit_bias"] = {str(i): -100 for i in s._eog}
        data, err = ep.post("/completions", body)
        if err is not None:
            continue
        answered.append("/completions" + (" (token ids)" if as_ids else " (text)"))
        try:
            lg = _choice(data, s.name).get("logprobs")
        except ServedError:
            continue
        tl = lg.get("token_logprobs") if isinstance(lg, Mapping) else None
        if not isinstance(tl, list) or not tl or _number(tl[0]) is None:
            continue
        _checked(tl[0], s.name, "the probe's token_logprobs[0]")
        if as_ids and _echo_agrees(s, ep, seq, data, tl[0]):
            return _Probe("echo", True)
        return _Probe("next", as_ids, "" if as_ids else "text prompts")
    what = f"answered {', '.join(answered)} without" if answered else "answers no request for"
    fail(
        WHERE,
        f"the server of {s.name!r} at {ep.url} {what} prompt log-probabilities "
        "(a chat-only API cannot give IPS its v(x_T) = log p/(1-p) of a given answer token)",
        "Serve the model with llama.cpp (llama-server or llama-cpp-python), vLLM or TGI, "
        "whose completion endpoints return log-probabilities",
        RuntimeError,
    )
    raise AssertionError


def _echo_agrees(s: ServedScorer, ep: _Endpoint, seq: list[int], reply: Any, lp: float) -> bool:
    """Whether echoed log-probabilities are aligned: the echo of ``seq + [g]`` must give
    the generated token ``g`` the log-probability it had when generated."""
    text = _choice(reply, s.name).get("text")
    if not isinstance(text, str) or not text:
        return False
    g = s.tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(g) != 1:
        return False
    body = {"model": s.spec.model, "prompt": [*seq, g[0]], "max_tokens": 1}
    body.update({"echo": True, "logprobs": 1, "temperature": 0.0})
    data, err = ep.post("/completions", body)
    if err is not None:
        return False
    try:
        x = _number(_path(_choice(data, s.name), "logprobs", "token_logprobs", len(seq)))
    except ServedError:
        return False
    return x is not None and abs(x - lp) <= 1e-3 * max(1.0, abs(lp))


def _unreachable(error: str) -> bool:
    return error.startswith(("connection error", "timeout"))


def _refuse_unreachable(s: ServedScorer, url: str, error: str) -> None:
    fail(
        WHERE,
        f"the server of {s.name!r} at {url} does not answer ({error})",
        "Start it, or fix 'base_url'/'endpoints' of the model entry",
        RuntimeError,
    )


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
