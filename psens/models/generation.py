"""Local text generation with a model-layer :class:`~psens.models.Scorer` (PSS and EAS).

ProSA (Zhuo et al., 2024, §2.3) and EAS (Muthukumarana et al., "Step 2: generation") score
a model's *free text* responses to every prompt variant, and EAS grades them again with an LLM judge
("Step 3: LLM-as-judge"). :class:`LocalGenerator` runs both steps on a local causal LM
(e.g. the offline SmolLM2 of :func:`psens.models.load`) with the call shapes of the HTTP
backend, so the same study code runs offline or against a server:

* ``gen(prompts)`` / ``gen.generate(prompts, *, max_new_tokens, temperature, seed)`` →
  ``list[str | None]``: the ``generate(prompts) -> list`` callable that
  :class:`psens.backends.CallableJudge` wraps;
* ``gen.chat_many(conversations, **params)`` and ``gen.complete_many(prompts, **params)`` →
  ``list[psens.backends.Response]``: the client interface of
  :func:`psens.eas.generate_responses` (OpenAI parameter names ``max_tokens``,
  ``temperature``, ``top_p``, ``seed`` are accepted).

Decoding. Prompts are sorted by length and run in batches of ``batch_size``, left-padded
(``padding_side="left"``, pad = the tokenizer's pad token, else its EOS), so every row's
last real token sits at the same position and ``model.generate`` continues all rows at
once. ``temperature=0`` (default) is greedy decoding, as both papers use for objective
tasks (ProSA §3.1; EAS "Step 2", temperature 0). ``temperature > 0`` samples (with
``top_p`` if given) from a ``torch.Generator`` seeded with ``seed`` and the batch's first
prompt index, so a call is reproducible. Generation stops at EOS or after
``max_new_tokens``; special tokens are removed and the text is stripped.

Chat. A conversation is rendered with the tokenizer's chat template
(``add_generation_prompt=True``); a tokenizer without a template gets the messages joined
as plain text (``content`` lines, then nothing), so the tiny test models work too.

Failures. If the model raises on a batch (out of memory, a prompt longer than the
context), every prompt of that batch gets ``status="failed"`` with the error text and
``None`` as its text — never an empty answer — so
:func:`psens.eas.generate_responses` retries exactly those rows on the next call.

Decoding confidence (ProSA §5.1 eq. 3) needs the next-token distribution at the answer
position: :meth:`LocalGenerator.next_token_probs` returns it over the full vocabulary, and
:meth:`LocalGenerator.label_token_ids` the token ids of option labels, for
:func:`psens.pss.top_token_probability` (``over="full"`` or ``over="options"``).

Examples
--------
>>> import psens
>>> gen = psens.models.LocalGenerator(psens.models.load())  # doctest: +SKIP
>>> gen(["What is 2 + 2? Answer with a number."])  # doctest: +SKIP
['4']
>>> judge = psens.backends.CallableJudge(gen)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from psens._validation import check_positive_int, fail

__all__ = ["LocalGenerator", "chat_text", "generate"]


def chat_text(tokenizer, messages: Sequence[Mapping[str, str]]) -> str:
    """The text fed to a model for one conversation: the tokenizer's chat template with the
    generation prompt (the assistant turn opened), or the messages' ``content`` lines when
    the tokenizer has no template. Encode it with ``add_special_tokens=False`` when the
    tokenizer has a template (the template holds its special tokens).

    Examples
    --------
    >>> class Plain:  # a tokenizer without a chat template
    ...     chat_template = None
    >>> chat_text(Plain(), [{"role": "user", "content": "Hi"}])
    'Hi\\n'
    """
    msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return "\n".join(m["content"] for m in msgs) + "\n"


#: OpenAI request parameters mapped onto :meth:`LocalGenerator.generate` arguments.
_PARAM_NAMES = {
    "max_tokens": "max_new_tokens",
    "max_new_tokens": "max_new_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
}
#: OpenAI parameters that have no local meaning and are ignored (documented, not silent).
_IGNORED = frozenset({"n", "stream", "logprobs", "presence_penalty", "frequency_penalty", "stop"})


def _check_prompts(prompts: Any, where: str) -> list[str]:
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        fail(where, f"prompts is a {type(prompts).__name__}", "Pass a list of strings", TypeError)
    bad = [i for i, p in enumerate(prompts) if not isinstance(p, str)]
    if bad:
        fail(where, f"prompts {bad[:5]} are not strings", "Pass a list of strings", TypeError)
    return list(prompts)


class LocalGenerator:
    """Batched, left-padded generation with a local causal LM.

    Parameters
    ----------
    scorer
        A :class:`psens.models.Scorer` (from :func:`psens.models.load`), or anything with
        ``.model`` (a transformers causal LM) and ``.tokenizer``.
    max_new_tokens
        Default generation length (EAS used short answers; 32 suffices for letters, yes/no
        and spans; a judge verdict needs about 8).
    batch_size
        Prompts per forward batch.
    chat
        Default for :meth:`generate`: wrap each prompt as one user message and apply the
        chat template (instruction-tuned models), or feed it as raw text.
    name
        Model name used in :class:`~psens.backends.Response` keys (default: the scorer's).

    Attributes
    ----------
    n_calls : int
        Prompts sent to the model so far (for tests and progress reports).
    """

    def __init__(
        self,
        scorer: Any,
        *,
        max_new_tokens: int = 32,
        batch_size: int = 8,
        chat: bool = True,
        name: str | None = None,
    ) -> None:
        where = "LocalGenerator"
        if not hasattr(scorer, "model") or not hasattr(scorer, "tokenizer"):
            fail(
                where,
                f"got a {type(scorer).__name__} without .model and .tokenizer",
                "Pass psens.models.load(...) (a Scorer)",
                TypeError,
            )
        self.scorer = scorer
        self.model = scorer.model
        self.tokenizer = scorer.tokenizer
        self.max_new_tokens = check_positive_int(max_new_tokens, where, "max_new_tokens")
        self.batch_size = check_positive_int(batch_size, where, "batch_size")
        self.chat = bool(chat)
        self.name = name or str(getattr(scorer, "name", "local"))
        self.n_calls = 0

    def __repr__(self) -> str:
        return (
            f"LocalGenerator(name={self.name!r}, max_new_tokens={self.max_new_tokens}, "
            f"batch_size={self.batch_size}, chat={self.chat})"
        )

    # ---------------------------------------------------------------- prompts

    @property
    def _device(self):
        return next(self.model.parameters()).device

    @property
    def _pad_id(self) -> int:
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        if pad is None:
            fail("LocalGenerator", "the tokenizer has no pad or EOS token", "Set tok.pad_token")
        return int(pad)

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The text fed to the model for one conversation (:func:`chat_text`)."""
        return chat_text(self.tokenizer, messages)

    def _texts(self, prompts: Sequence[str], chat: bool) -> list[str]:
        if not chat:
            return list(prompts)
        return [self.render_chat([{"role": "user", "content": p}]) for p in prompts]

    def _encode(self, texts: Sequence[str]):
        """Left-padded ``input_ids`` and ``attention_mask`` tensors of ``texts``.

        A chat-rendered text already holds the template's special tokens, so no BOS/EOS is
        added when the tokenizer has a chat template; a raw prompt gets the tokenizer's
        usual special tokens (as :class:`~psens.models.Scorer` encodes prompts).
        """
        import torch

        add = not getattr(self.tokenizer, "chat_template", None)
        rows = [self.tokenizer(t, add_special_tokens=add)["input_ids"] for t in texts]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            if r:
                ids[i, width - len(r) :] = torch.as_tensor(r, dtype=torch.long)
                mask[i, width - len(r) :] = 1
        return ids.to(self._device), mask.to(self._device)

    def _order(self, texts: Sequence[str]) -> list[int]:
        """Indices sorted by prompt length (less padding per batch), stable."""
        lengths = [len(t) for t in texts]
        return sorted(range(len(texts)), key=lambda i: lengths[i])

    # ---------------------------------------------------------------- generation

    def _run_batch(
        self,
        texts: list[str],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float | None,
        seed: int,
    ) -> list[str]:
        import torch

        ids, mask = self._encode(texts)
        kwargs: dict[str, Any] = {
            "attention_mask": mask,
            "max_new_tokens": max_new_tokens,
            "pad_token_id": self._pad_id,
        }
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if eos is None and self.tokenizer.eos_token_id is not None:
            kwargs["eos_token_id"] = self.tokenizer.eos_token_id
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=float(temperature))
            if top_p is not None:
                kwargs["top_p"] = float(top_p)
            torch.manual_seed(int(seed))
        else:  # greedy; neutralise sampling defaults of the model's generation_config
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = self.model.generate(ids, **kwargs)
        new = out[:, ids.shape[1] :]
        self.n_calls += len(texts)
        return [self.tokenizer.decode(row, skip_special_tokens=True).strip() for row in new.cpu()]

    def generate_detailed(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        seed: int = 0,
        chat: bool | None = None,
    ) -> list[tuple[str | None, str | None]]:
        """``(text, error)`` per prompt, in order; a failed batch gives ``(None, error)``.

        Arguments as for :meth:`generate`.
        """
        where = "LocalGenerator.generate"
        prompts = _check_prompts(prompts, where)
        n_new = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        check_positive_int(n_new, where, "max_new_tokens")
        if temperature is None or not np.isfinite(temperature) or temperature < 0:
            fail(where, f"temperature={temperature!r}", "Pass 0 (greedy) or a positive number")
        texts = self._texts(prompts, self.chat if chat is None else bool(chat))
        out: list[tuple[str | None, str | None]] = [(None, None)] * len(texts)
        order = self._order(texts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            try:
                got = self._run_batch(
                    [texts[i] for i in idx],
                    max_new_tokens=n_new,
                    temperature=float(temperature),
                    top_p=top_p,
                    seed=int(seed) + idx[0],
                )
            except Exception as exc:  # record the failure; never an empty answer
                err = f"local generation failed: {type(exc).__name__}: {exc}"
                for i in idx:
                    out[i] = (None, err)
                continue
            for i, text in zip(idx, got, strict=True):
                out[i] = (text, None)
        return out

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        seed: int = 0,
        chat: bool | None = None,
    ) -> list[str | None]:
        """Responses to ``prompts``, in order (``None`` where the model call failed).

        Parameters
        ----------
        prompts
            Prompt texts (one user message each when ``chat``).
        max_new_tokens
            Tokens to generate at most (default: the constructor's).
        temperature
            0 for greedy decoding (default); > 0 samples.
        top_p
            Nucleus sampling mass (with ``temperature > 0``).
        seed
            Seed of the sampler (unused when greedy).
        chat
            Apply the chat template (default: the constructor's ``chat``).
        """
        res = self.generate_detailed(
            prompts,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            chat=chat,
        )
        return [text for text, _ in res]

    def __call__(self, prompts: Sequence[str]) -> list[str | None]:
        """:meth:`generate` with the defaults: the callable :class:`CallableJudge` wraps."""
        return self.generate(prompts)

    # ---------------------------------------------------------------- client interface

    def _kwargs(self, params: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in params.items():
            if key in _PARAM_NAMES:
                if value is not None:
                    out[_PARAM_NAMES[key]] = value
            elif key not in _IGNORED:
                fail(
                    "LocalGenerator",
                    f"unknown generation parameter {key!r}",
                    f"Use {sorted(_PARAM_NAMES)}",
                )
        return out

    def _responses(self, texts: list[str], kind: str, payloads: list[Any], params) -> list:
        from psens.backends import Response, cache_key

        kw = self._kwargs(params)
        res = self.generate_detailed(texts, chat=False, **kw)
        clean = {k: v for k, v in kw.items() if k != "seed"}
        out = []
        for payload, (text, err) in zip(payloads, res, strict=True):
            key = cache_key(f"local-{kind}", self.name, payload, clean, kw.get("seed"))
            if text is None:
                out.append(Response("failed", None, key, error=err, attempts=1))
            else:
                out.append(Response("ok", text, key, attempts=1))
        return out

    def chat_many(
        self, conversations: Sequence[Sequence[Mapping[str, str]]], **params: Any
    ) -> list:
        """Responses (:class:`psens.backends.Response`) to chat conversations, in order.

        ``params`` take the OpenAI names (``max_tokens``, ``temperature``, ``top_p``,
        ``seed``); ``stop``, ``n``, ``stream``, penalties and ``logprobs`` are ignored.
        """
        convs = [[dict(m) for m in c] for c in conversations]
        for c in convs:
            if not c or not all("role" in m and "content" in m for m in c):
                fail(
                    "LocalGenerator.chat_many",
                    "a conversation is not a non-empty list of {'role', 'content'} dicts",
                    "Pass e.g. [[{'role': 'user', 'content': 'Hi'}]]",
                    TypeError,
                )
        return self._responses([self.render_chat(c) for c in convs], "chat", convs, params)

    def complete_many(self, prompts: Sequence[str], **params: Any) -> list:
        """Responses (:class:`psens.backends.Response`) to raw text prompts, in order."""
        prompts = _check_prompts(prompts, "LocalGenerator.complete_many")
        return self._responses(prompts, "completions", prompts, params)

    # ---------------------------------------------------------------- confidence

    def next_token_probs(
        self, prompts: Sequence[str], *, chat: bool | None = None, suffix: str = ""
    ) -> np.ndarray:
        """Next-token probabilities ``(n_prompts, vocab)`` after each prompt (float64 softmax
        over the full vocabulary), for ProSA's decoding confidence (§5.1 eq. 3).

        ``suffix`` is appended to the model input (after the chat template when ``chat``),
        e.g. ``"Answer:"`` to read the distribution where the answer letter starts.
        """
        import torch

        prompts = _check_prompts(prompts, "LocalGenerator.next_token_probs")
        texts = [t + suffix for t in self._texts(prompts, self.chat if chat is None else chat)]
        rows: list[np.ndarray] = [np.empty(0)] * len(texts)
        order = self._order(texts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            ids, mask = self._encode([texts[i] for i in idx])
            with torch.inference_mode():
                logits = self.model(input_ids=ids, attention_mask=mask).logits[:, -1]
            probs = torch.softmax(logits.double(), dim=-1).cpu().numpy()
            for j, i in enumerate(idx):
                rows[i] = probs[j]
        return np.stack(rows) if rows else np.zeros((0, 0))

    def label_token_ids(self, labels: Sequence[str]) -> np.ndarray:
        """Token ids of the option labels as an answer starts: the first token of
        ``label`` and of ``" " + label`` for each label (unique, sorted), for
        ``top_token_probability(..., over="options", option_ids=...)``."""
        ids: set[int] = set()
        for lab in labels:
            for text in (str(lab), f" {lab}"):
                toks = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                if toks:
                    ids.add(int(toks[0]))
        if not ids:
            fail("label_token_ids", f"no token for labels {list(labels)}", "Pass option labels")
        return np.asarray(sorted(ids), dtype=np.int64)


def generate(
    scorer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    seed: int = 0,
    chat: bool = True,
    batch_size: int = 8,
) -> list[str | None]:
    """One-off :meth:`LocalGenerator.generate` on a :class:`~psens.models.Scorer`:
    batched, left-padded, greedy unless ``temperature > 0``; ``None`` for a failed call."""
    gen = LocalGenerator(scorer, max_new_tokens=max_new_tokens, batch_size=batch_size, chat=chat)
    return gen.generate(prompts, temperature=temperature, seed=seed)
