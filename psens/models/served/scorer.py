"""The scorer of a served model: the local scorer's interface over HTTP."""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import numpy as np

from psens import prompts as _prompts
from psens._validation import check_positive_int, fail
from psens.datasets import Item
from psens.models.scorer import Prediction, Scorer, _log_odds
from psens.models.served.entry import WHERE, ServedError, ServedModel, load_tokenizer
from psens.models.served.replies import _ASK, _Endpoint, _generate, _Probe, _probe_endpoint

__all__ = ["ServedScorer"]


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

    def _score_rows(self, rows, cuts, targets, bar=None, forced=()) -> np.ndarray:
        """Per-target log-probabilities of equal-length rows (teacher forcing), asked of
        the server in prefix-tree order (sorted rows). ``targets`` (R, k): each row's own,
        all but the last already in the row (cloze options)."""
        targets = np.asarray(targets)
        k = targets.shape[-1]
        order = np.lexsort(rows.T[::-1]) if len(rows) > 1 else np.arange(len(rows))
        if targets.ndim == 2:
            seqs = [np.concatenate([rows[i], targets[i, -1:]]) for i in order]
        else:
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

    def choice_logprobs(self, item: Item, template="cloze", masks=None, **kwargs) -> np.ndarray:
        """Each option's log-likelihood as the continuation of each masked prompt, from the
        server's prompt log-probabilities (see :meth:`Scorer.choice_logprobs`; a server
        that gives none is refused by :meth:`probe` before anything is scored)."""
        self.probe()
        return super().choice_logprobs(item, template, masks, **kwargs)

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
