"""Monte Carlo sampling of responses with an on-disk cache (paper §3.1, appendix B.3, D.3).

DBSA needs ``n`` responses to the original prompt and ``m`` to every perturbed prompt.
Sampling is delegated to a *backend*: any callable

    ``sample(prompt: str, n: int, *, temperature: float, max_tokens: int, seed: int) -> list[str]``

that returns ``n`` independent responses. Two backends plug in directly:

* :func:`hf_sampler` wraps a local Hugging Face ``transformers`` causal LM and its tokenizer
  (batched, seeded sampling with torch);
* :func:`client_sampler` adapts the OpenAI-compatible HTTP client of ``psens.backends``
  (``OpenAIClient``: OpenAI, vLLM, llama.cpp, Ollama) — or any object with the same
  ``chat``/``complete`` methods — by sending one request per response with its own seed;
* any other function with the signature above.

:class:`CachedSampler` puts a cache (the shared :class:`psens.backends.ResponseCache`) in
front of a backend. A cache entry is keyed by ``(model, prompt, params, seed)``
(:func:`sample_key`); asking again for the same key reads the stored responses,
asking for *more* responses than stored samples only the missing ones (with a seed derived
from the key and the number already stored), and a new neighbour costs only its own prompt.
Each prompt gets its own backend seed derived from ``(seed, prompt)`` so the original and
the perturbed prompts are sampled independently (the permutation test assumes independent
groups; common random numbers would couple them).

Defaults follow appendix D.3: temperature 1, at most 256 new tokens.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.

Monte Carlo samples Ŝ(x) of §3.1 (temperature 1, max length 256 by default, appendix D.3).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._validation import check_positive_int, fail
from ..backends import ResponseCache

__all__ = [
    "CachedSampler",
    "ResponseCache",
    "SampleFn",
    "client_sampler",
    "derive_seed",
    "hf_sampler",
    "sample_key",
]


class SampleFn(Protocol):
    """A sampling backend: ``n`` independent responses to ``prompt``."""

    def __call__(
        self, prompt: str, n: int, *, temperature: float, max_tokens: int, seed: int
    ) -> list[str]: ...


def derive_seed(*parts: Any) -> int:
    """A stable 31-bit seed from any JSON-serialisable parts (independent of ``PYTHONHASHSEED``)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF


def sample_key(model: str, prompt: str, params: dict[str, Any], seed: int) -> str:
    """The cache key of a :class:`CachedSampler` entry: the sha256 hex digest of the canonical
    JSON of ``(model, prompt, params, seed)``."""
    blob = json.dumps(
        {"model": model, "prompt": prompt, "params": params, "seed": seed},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class CachedSampler:
    """A sampling backend behind a response cache.

    Parameters
    ----------
    backend : callable
        ``backend(prompt, n, *, temperature, max_tokens, seed) -> list[str]``.
    model : str, optional
        The model's name, part of the cache key. Without it (``None``) the cache stays in
        memory even if ``cache_dir`` is given, because responses of different backends
        could not be told apart on disk.
    cache_dir : path, optional
        Directory of the on-disk cache: a :class:`psens.backends.ResponseCache` whose
        record per key holds the key fields and the list of responses (``responses``).
    temperature : float, default 1.0
    max_tokens : int, default 256
        Maximum number of new tokens per response (appendix D.3).
    params : dict, optional
        Any other sampling parameters the backend uses implicitly (e.g. ``top_p``, a
        system prompt); they only enter the cache key.

    Attributes
    ----------
    stats : dict
        ``requested``, ``from_cache`` and ``generated`` response counts and ``backend_calls``.
    """

    def __init__(
        self,
        backend: SampleFn | Callable[..., list[str]],
        model: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        temperature: float = 1.0,
        max_tokens: int = 256,
        params: dict[str, Any] | None = None,
    ) -> None:
        if not callable(backend):
            fail(
                "CachedSampler",
                f"backend is a {type(backend).__name__}",
                "Pass a callable sample(prompt, n, *, temperature, max_tokens, seed)",
                TypeError,
            )
        self.backend = backend
        self.model = model
        self.temperature = float(temperature)
        self.max_tokens = check_positive_int(max_tokens, "CachedSampler", "max_tokens")
        self.params = dict(params or {})
        self.cache = ResponseCache(cache_dir if model is not None else None)
        self.stats = {"requested": 0, "from_cache": 0, "generated": 0, "backend_calls": 0}

    @property
    def key_params(self) -> dict[str, Any]:
        """The sampling parameters that enter the cache key."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, **self.params}

    def __call__(self, prompt: str, n: int, seed: int = 0) -> list[str]:
        """``n`` responses to ``prompt`` (cached ones first, then only the missing ones)."""
        n = check_positive_int(n, "CachedSampler", "n")
        model = self.model if self.model is not None else f"<unnamed {id(self.backend)}>"
        key = sample_key(model, prompt, self.key_params, int(seed))
        record = self.cache.get(key)
        have = list(record["responses"]) if record is not None else []
        self.stats["requested"] += n
        self.stats["from_cache"] += min(n, len(have))
        if len(have) < n:
            need = n - len(have)
            bseed = derive_seed(int(seed), prompt, len(have))
            new = self.backend(
                prompt, need, temperature=self.temperature, max_tokens=self.max_tokens, seed=bseed
            )
            if not isinstance(new, list | tuple) or len(new) != need:
                got = len(new) if isinstance(new, list | tuple) else type(new).__name__
                fail(
                    "CachedSampler",
                    f"the backend returned {got} responses for n={need}",
                    "Make the backend return a list of exactly n strings",
                )
            self.stats["backend_calls"] += 1
            self.stats["generated"] += need
            have = have + [str(r) for r in new]
            self.cache.put(
                key,
                {
                    "model": model,
                    "prompt": prompt,
                    "params": self.key_params,
                    "seed": int(seed),
                    "responses": have,
                },
            )
        return have[:n]

    def sample_many(
        self, prompts: Sequence[str], n: int, seed: int = 0, progress: bool = False
    ) -> list[list[str]]:
        """``n`` responses for each prompt, in order (duplicates are sampled once)."""
        out: dict[str, list[str]] = {}
        it = list(dict.fromkeys(prompts))
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(it, desc="sampling", leave=False)
        for p in it:
            out[p] = self(p, n, seed)
        return [out[p] for p in prompts]


def hf_sampler(
    model: Any,
    tokenizer: Any,
    *,
    batch_size: int = 16,
    chat: bool | None = None,
    system_prompt: str | None = None,
    full_distribution: bool = True,
) -> SampleFn:
    """A sampling backend for a Hugging Face causal LM and its tokenizer.

    Each call repeats the prompt in batches of ``batch_size`` rows and samples with
    ``model.generate(do_sample=True, temperature=..., max_new_tokens=...)`` under
    ``torch.manual_seed(seed)`` inside :func:`torch.random.fork_rng` (the global RNG is left
    untouched). ``temperature=0`` means greedy decoding. Only the new tokens are decoded,
    without special tokens.

    Parameters
    ----------
    model, tokenizer
        A ``transformers`` causal LM and its tokenizer (already on their device).
    batch_size : int, default 16
        Rows per ``generate`` call.
    chat : bool, optional
        Wrap the prompt as one user turn with the tokenizer's chat template. Default: when
        the tokenizer has a chat template.
    system_prompt : str, optional
        A system turn before the user turn (chat mode only).
    full_distribution : bool, default True
        Sample from the full softmax (``top_k=0, top_p=1``), as in the paper, rather than
        from the model's own generation-config truncation.

    Returns
    -------
    callable
        ``sample(prompt, n, *, temperature=1.0, max_tokens=256, seed=0) -> list[str]``.
    """
    batch_size = check_positive_int(batch_size, "hf_sampler", "batch_size")
    use_chat = chat if chat is not None else bool(getattr(tokenizer, "chat_template", None))

    def _encode(prompt: str) -> Any:
        if use_chat:
            from ..models.generation import chat_text

            msgs = [{"role": "user", "content": prompt}]
            if system_prompt:
                msgs.insert(0, {"role": "system", "content": system_prompt})
            return tokenizer(
                chat_text(tokenizer, msgs), return_tensors="pt", add_special_tokens=False
            )
        return tokenizer(prompt, return_tensors="pt")

    def sample(
        prompt: str, n: int, *, temperature: float = 1.0, max_tokens: int = 256, seed: int = 0
    ) -> list[str]:
        import torch

        n = check_positive_int(n, "hf_sampler", "n")
        enc = _encode(prompt)
        device = getattr(model, "device", None) or "cpu"
        ids = enc["input_ids"].to(device)
        mask = enc.get("attention_mask")
        mask = (torch.ones_like(ids) if mask is None else mask).to(device)
        pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        kw: dict[str, Any] = {"max_new_tokens": int(max_tokens), "pad_token_id": pad}
        if temperature > 0:
            kw.update(do_sample=True, temperature=float(temperature))
            if full_distribution:
                kw.update(top_k=0, top_p=1.0)
        else:
            kw.update(do_sample=False)
        out: list[str] = []
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(int(seed))
            for s in range(0, n, batch_size):
                b = min(batch_size, n - s)
                gen = model.generate(
                    input_ids=ids.expand(b, -1), attention_mask=mask.expand(b, -1), **kw
                )
                new = gen[:, ids.shape[1] :]
                out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
        return [o.strip() for o in out]

    return sample


def client_sampler(client: Any, *, chat: bool = True, workers: int | None = None) -> SampleFn:
    """A sampling backend over an OpenAI-compatible client (``psens.backends.OpenAIClient``).

    Response ``j`` of a call is one request (``client.chat`` with one user message, or
    ``client.complete`` when ``chat=False``) with ``temperature``, ``max_tokens`` and the seed
    ``derive_seed(seed, j)``, so every response is reproducible and cached by the client's
    own response cache too. Requests run ``workers`` at a time (default: the client's
    ``concurrency``). A request that failed after the client's retries raises ``RuntimeError``
    (a missing response must not silently shrink the sample).
    """
    from concurrent.futures import ThreadPoolExecutor

    nworkers = workers or int(getattr(client, "concurrency", 1) or 1)

    def one(prompt: str, temperature: float, max_tokens: int, seed: int) -> str:
        params = {"temperature": float(temperature), "max_tokens": int(max_tokens), "seed": seed}
        if chat:
            res = client.chat([{"role": "user", "content": prompt}], **params)
        else:
            res = client.complete(prompt, **params)
        if not getattr(res, "ok", False) or res.text is None:
            raise RuntimeError(
                f"client_sampler: a request failed ({getattr(res, 'error', 'no text')}). "
                "Check the server, then re-run: successful responses are cached."
            )
        return str(res.text)

    def sample(
        prompt: str, n: int, *, temperature: float = 1.0, max_tokens: int = 256, seed: int = 0
    ) -> list[str]:
        n = check_positive_int(n, "client_sampler", "n")
        seeds = [derive_seed(int(seed), j) for j in range(n)]
        if nworkers == 1 or n == 1:
            return [one(prompt, temperature, max_tokens, s) for s in seeds]
        with ThreadPoolExecutor(max_workers=nworkers) as pool:
            return list(pool.map(lambda s: one(prompt, temperature, max_tokens, s), seeds))

    return sample
