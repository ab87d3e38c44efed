"""Talking to a server: one endpoint's clients, and asking and reading the replies of each
server kind (vLLM, llama.cpp's llama-server, TGI, OpenAI text completions) for a
:class:`~psens.models.served.ServedScorer` ``s``.

Every number a reply holds is checked (:func:`_checked`) before it is used.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from psens._validation import fail
from psens.models.scorer import Scorer
from psens.models.served.entry import NATIVE_TOP_K, WHERE, ServedError, ServedModel, _root

__all__ = ["LOGPROB_TOL"]


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


def _ask_prompt_logprobs(s: Scorer, ep, probe, seq, k):
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
        reply_at = plp[pos]
        if not isinstance(reply_at, Mapping):
            raise _bad(s.name, f"prompt_logprobs[{pos}] is not an object", reply_at)
        lp, best = None, None
        for tid, val in reply_at.items():
            x = _checked(
                val.get("logprob") if isinstance(val, Mapping) else val,
                s.name,
                f"an entry of prompt_logprobs[{pos}]",
            )
            best = x if best is None else max(best, x)
            if str(tid) == str(int(seq[pos])):
                lp = x
        if lp is None:
            raise _bad(s.name, f"prompt_logprobs[{pos}] lacks token {int(seq[pos])}", reply_at)
        out.append(lp)
        top = best if top is None else top
    return out, top


def _ask_echo(s: Scorer, ep, probe, seq, k):
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


def _ask_tgi(s: Scorer, ep, probe, seq, k):
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


def _next_dist_native(s: Scorer, ep, seq, n_probs, again: bool = False):
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


def _next_dist_openai(s: Scorer, ep, probe, seq, n):
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


def _ask_next(s: Scorer, ep, probe, seq, k):
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


def _generate(s: Scorer, ep, probe, ids, m):
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


def _first_logprob(s: Scorer, x: Any) -> float | None:
    """The log-probability of a generation's first token: None when the reply gives none,
    checked (:func:`_checked`) when it does."""
    return None if x is None else _checked(x, s.name, "the first token's logprob")


def _probe_endpoint(s: Scorer, ep: _Endpoint) -> _Probe:
    """What one server supports (see the module docstring); refuses a useless one."""
    quick = _Endpoint(s.spec, ep.url, retries=0)
    try:
        return _probe_with(s, quick)
    finally:
        quick.close()


def _probe_with(s: Scorer, ep: _Endpoint) -> _Probe:
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


def _echo_agrees(s: Scorer, ep: _Endpoint, seq: list[int], reply: Any, lp: float) -> bool:
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


def _refuse_unreachable(s: Scorer, url: str, error: str) -> None:
    fail(
        WHERE,
        f"the server of {s.name!r} at {url} does not answer ({error})",
        "Start it, or fix 'base_url'/'endpoints' of the model entry",
        RuntimeError,
    )
