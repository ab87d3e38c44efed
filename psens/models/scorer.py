"""The value function v(x_T) of the IPS paper (§3.1, appendices A and E.3–E.4).

For an item, a template and a bitmask T over the item's input variables (bit i set =
variable i kept), the masked prompt replaces every sub-token of each masked word by
the model's mask token (length-preserving; ``one_token_per_word=True`` replaces a
masked word by a single mask token instead), and

.. math::  v(x_T) = \\log \\frac{p}{1 - p}, \\qquad p = \\operatorname{softmax}(z)_{y^*}

with ``z`` the logits at the answer position over the **full vocabulary** and ``y*``
the first token of the answer as it follows the template. ``p`` is clamped to
``[1e-7, 1 - 1e-7]`` (so ``|v| <= 16.1``) to keep v finite; the softmax is computed in
float64 from the model's logits.

Answer token
------------
The answer text is ``template.answer_prefix + label`` (``" B"`` for the templates of
fig. 15). ``y*`` is the first token that ``tokenizer(prompt + " B")`` has beyond the
tokens of ``tokenizer(prompt)``; if the tokenizer merges across the boundary (the
prompt's tokens are not a prefix), the first token of ``tokenizer(" B")`` without
special tokens is used instead.

Cloze prompts (:func:`psens.prompts.cloze_form`, ``answer = "cloze"``): the options are not
shown; :meth:`Scorer.choice_logprobs` gives each option's summed log-likelihood as the
continuation of each masked prompt, and :mod:`psens.cloze` turns them into v.

Open-ended items (IPS paper, appendix K): the target is the model's own
greedy response to the unmasked prompt, its first ``m`` tokens (default 8), and v is
the mean over those tokens of the per-token log-odds under teacher forcing
(``open_reduce="sum"`` or ``"first"`` as options).

Speed
-----
All masks of one (item, template) are scored together. Unique masked id rows are
sorted and walked as a prefix tree: the token sequence is cut at the first token of
each variable (cuts that do not pay are dropped, :meth:`Scorer._plan`), and each level
runs the model once on one segment for every distinct prefix. For Llama-style decoders
(llama, mistral, qwen2, qwen3) the walk uses grouped tree attention
(:mod:`psens.models.tree`): the children of a parent attend to its prefix in place, so
the leaves — the largest level — never get a key/value cache of their own. Other
models go through their own forward pass, the key/value cache of a parent prefix copied
to its children
(``DynamicCache.batch_select_indices``). Logits are computed at the last position only.
Work is split into slices that fit a memory budget. ``method="prefix"`` only shares the
prefix before the first variable; ``method="naive"`` scores one prompt at a time with
full logits (the reference).

Precision
---------
Score in float32 (the default). IPS compares salient interactions, which are Möbius
sums of up to 2^n values of v, and it moves with rounding noise in v: on SmolLM2 the
IPS between the float32 and the float16 decompositions of the same prompt is ~0.2, and
with bfloat16 ~1.3 (out of 2), measured in ``make bench`` (docs/performance.md).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from psens import prompts as _prompts
from psens._validation import check_positive_int, fail
from psens.datasets import Item
from psens.models.hardware import available_ram as _available_ram
from psens.models.mask_tokens import MaskToken
from psens.models.tree import TreeForward, supports, target_log_probs

__all__ = [
    "CLAMP",
    "Encoded",
    "Prediction",
    "Scorer",
    "follow_id",
    "labels_apart",
    "option_token_ids",
]

#: p is clamped to [CLAMP, 1 - CLAMP] before the log-odds.
CLAMP = 1e-7

_METHODS = ("trie", "prefix", "naive")
_REDUCE = ("mean", "sum", "first")


@dataclass(frozen=True)
class Encoded:
    """Token ids of one (item, template, shots) prompt and where its variables are.

    Attributes
    ----------
    ids : ndarray of int64, shape (L,)
        Token ids of the unmasked prompt (special tokens included).
    var_tokens : list of ndarray
        Token positions of each variable (every token whose character span overlaps
        the variable's span).
    target_id : int
        First token of the answer (MCQ); -1 for open-ended items and cloze prompts.
    option_ids : dict
        First token of each option label as it follows the template.
    continuations : dict
        A cloze prompt: each option's continuation tokens (label -> int64 array), as
        lm-evaluation-harness's ``loglikelihood`` tokenises them (:meth:`Scorer.encode`).
    """

    ids: np.ndarray
    var_tokens: list[np.ndarray]
    target_id: int
    option_ids: dict[str, int]
    text: str
    variables: list[_prompts.Variable]
    template: str
    continuations: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of variables."""
        return len(self.var_tokens)


@dataclass
class Prediction:
    """The model's answer to one unmasked prompt (greedy decoding, appendix E.3)."""

    text: str
    choice: str | None
    correct: bool | None
    p_target: float
    v: float
    confidence: float
    option_probs: dict[str, float]
    hidden: np.ndarray = field(repr=False)


def _rope_depends_on_length(cfg) -> bool:
    """Whether the rotary angles depend on the longest position of a call (``dynamic``
    and ``longrope`` scalings)."""
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if isinstance(rope, dict) and isinstance(next(iter(rope.values()), None), dict):
        rope = {k: v for sub in rope.values() for k, v in sub.items()}  # per layer type
    kind = str(rope.get("rope_type", rope.get("type", ""))) if isinstance(rope, dict) else ""
    return "dynamic" in kind or kind == "longrope"


def _unique_rows(rows) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct token rows (first-seen order) and each row's index among them."""
    keyed: dict[bytes, int] = {}
    rows_list = list(rows)
    inverse = np.empty(len(rows_list), dtype=np.int64)
    uniq: list[np.ndarray] = []
    for i, r in enumerate(rows_list):
        j = keyed.setdefault(r.tobytes(), len(uniq))
        if j == len(uniq):
            uniq.append(r)
        inverse[i] = j
    return uniq, inverse


def _log_odds(logp: np.ndarray, clamp: float = CLAMP) -> np.ndarray:
    p = np.clip(np.exp(logp), clamp, 1.0 - clamp)
    return np.log(p) - np.log1p(-p)


def follow_id(tokenizer, prompt_ids: np.ndarray, prompt: str, cont: str) -> int:
    """The first token of ``cont`` as it follows ``prompt`` (tokenised whole; if the
    prompt's tokens change by the joining, the first token of ``cont`` alone)."""
    full = np.asarray(tokenizer(prompt + cont, add_special_tokens=True)["input_ids"])
    k = len(prompt_ids)
    if len(full) > k and np.array_equal(full[:k], prompt_ids):
        return int(full[k])
    alone = tokenizer(cont, add_special_tokens=False)["input_ids"]
    if not alone:
        fail("psens.models.Scorer", f"the answer {cont!r} has no tokens", "Check the item")
    return int(alone[0])


def option_token_ids(
    tokenizer,
    item: Item,
    template: str | _prompts.Template,
    prompt: str | None = None,
    prompt_ids: np.ndarray | None = None,
    *,
    where: str = "psens.models.Scorer.encode",
    check: bool = True,
) -> dict[str, int]:
    """The answer token of each option of an MCQ ``item`` under ``template`` (item label ->
    the first token of ``answer_prefix + shown label`` after the prompt).

    Refuses labels whose answer tokens coincide (a tokenizer that reads ``" a"`` as
    ``" "`` + ``"a"`` gives every option the token ``" "``): the answer token could not tell
    the options apart. ``check=False`` skips that refusal.
    """
    t = _prompts.get_template(template)
    if prompt is None:
        prompt = _prompts.render_spans(item, t).text
    if prompt_ids is None:
        prompt_ids = np.asarray(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    shown = _prompts.option_labels(item, t)
    ids = {
        label: follow_id(tokenizer, prompt_ids, prompt, t.answer_prefix + shown[label])
        for label, _ in item.options
    }
    if check and len(set(ids.values())) < len(ids):
        fail(
            where,
            f"template {t.name!r}: the option labels {list(shown.values())} of item "
            f"{item.id!r} do not begin with distinct answer tokens under this tokenizer",
            _labels_apart(tokenizer, item, t),
        )
    return ids


def labels_apart(tokenizer, item: Item, template: str | _prompts.Template) -> bool:
    """Whether the option labels of an MCQ ``item`` under ``template`` begin with distinct
    answer tokens under ``tokenizer`` (:func:`option_token_ids` without its refusal)."""
    ids = option_token_ids(tokenizer, item, template, check=False)
    return len(set(ids.values())) == len(ids)


def _labels_apart(tokenizer, item: Item, t: _prompts.Template) -> str:
    """The fix of a refusal by :func:`option_token_ids`: the label styles whose labels do
    tokenise apart here (a format run names enumerations instead,
    :func:`psens.formats.tokens.scorable_enums`)."""
    named = {"": "the item's own", "A": "A", "a": "a", "1": "1"}
    good = [
        named[s]
        for s in _prompts.LABEL_STYLES
        if s != t.labels and labels_apart(tokenizer, item, dataclasses.replace(t, labels=s))
    ]
    if good:
        return f"Use a label style whose labels tokenise apart here: {' or '.join(good)}"
    return "No label style tokenises apart under this tokenizer: score this item with another model"


class Scorer:
    """A causal LM wrapped for IPS: masked-prompt values, predictions, generations.

    Build it with :func:`psens.models.load`, or directly from a model and tokenizer.

    Parameters
    ----------
    model : transformers PreTrainedModel (causal LM)
    tokenizer : fast tokenizer (offset mappings are required)
    name : str
        Model name (used for the mask-token table and stored metadata).
    mask : MaskToken
        The mask token (:func:`psens.models.mask_token`).
    n_max, seed : int
        Passed to :func:`psens.prompts.variables`.
    one_token_per_word : bool
        Replace a masked word by one mask token instead of one per sub-token.
    batch_size : int, optional
        Masked prompts per chunk of the prefix tree; default from free memory (20 % of
        the available RAM on CPU, at most 128; 50 % of free GPU memory, at most 1024).
    progress : bool
        Show a tqdm bar (masks/s) for calls with at least 64 unique masks.
    tree_attention : bool
        For Llama-style decoders (:mod:`psens.models.tree`: llama, mistral, qwen2,
        qwen3), walk the prefix tree with grouped tree attention (default); False, or
        any other model, uses the generic path through the model's own forward and
        key/value cache.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        name: str = "model",
        mask: MaskToken | None = None,
        n_max: int = 10,
        seed: int = 0,
        one_token_per_word: bool = False,
        batch_size: int | None = None,
        progress: bool = True,
        open_tokens: int = 8,
        open_reduce: str = "mean",
        info: dict | None = None,
        tree_attention: bool = True,
    ) -> None:
        from psens.models.mask_tokens import mask_token

        if not getattr(tokenizer, "is_fast", False):
            fail(
                "psens.models.Scorer",
                "the tokenizer is not a fast tokenizer (no offset mappings)",
                "Load it with AutoTokenizer.from_pretrained(..., use_fast=True)",
                TypeError,
            )
        if open_reduce not in _REDUCE:
            fail("psens.models.Scorer", f"open_reduce={open_reduce!r}", f"Use one of {_REDUCE}")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.mask = mask if mask is not None else mask_token(tokenizer, name)
        self.n_max = n_max
        self.seed = seed
        self.one_token_per_word = one_token_per_word
        self.batch_size = batch_size
        self.progress = progress
        self.open_tokens = check_positive_int(open_tokens, "psens.models.Scorer", "open_tokens")
        self.open_reduce = open_reduce
        self.info = dict(info or {})
        self._open_targets: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._prefixes: dict[str, Any] = {}  # few-shot prefix -> its key/value cache
        # one device: the tree walk calls the layers' parts directly, which a model sharded
        # over several devices (device_map) cannot take; it goes through its own forward
        sharded = len(set(map(str, (getattr(model, "hf_device_map", None) or {}).values()))) > 1
        self.tree = (
            TreeForward(model) if tree_attention and supports(model) and not sharded else None
        )
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        # the decoder without the LM head: intermediate prefix-tree levels need no logits
        base = getattr(model, getattr(model, "base_model_prefix", ""), None)
        self._base = base if base is not None and base is not model else None
        if self._base is not None:
            base_params = inspect.signature(self._base.forward).parameters
            if self._cache_kw not in base_params and "kwargs" not in base_params:
                self._base = None

    def __repr__(self) -> str:
        return (
            f"Scorer(name={self.name!r}, device={self.device}, dtype={self.dtype}, "
            f"mask={self.mask.token!r} (id {self.mask.id}, {self.mask.rule}))"
        )

    @property
    def device(self):
        """The device inputs go to: the input embeddings' (a model sharded with
        ``device_map`` starts there)."""
        embed = self.model.get_input_embeddings()
        if embed is not None and getattr(embed, "weight", None) is not None:
            return embed.weight.device
        return next(self.model.parameters()).device

    @property
    def dtype(self):
        """The model's dtype."""
        return next(self.model.parameters()).dtype

    # ------------------------------------------------------------------ encoding

    def _tokens(self, text: str, offsets: bool = False):
        enc = self.tokenizer(text, return_offsets_mapping=offsets, add_special_tokens=True)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        if offsets:
            return ids, np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        return ids

    def _follow_id(self, prompt_ids: np.ndarray, prompt: str, cont: str) -> int:
        return follow_id(self.tokenizer, prompt_ids, prompt, cont)

    def encode(
        self,
        item: Item,
        template: str | _prompts.Template = "ips1",
        *,
        shots: Sequence[Item] = (),
        variables: Sequence[_prompts.Variable] | None = None,
    ) -> Encoded:
        """Tokenise the rendered prompt and map each variable to its token positions.

        A cloze template (:func:`psens.prompts.cloze_form`) also gives each option's
        continuation tokens the way lm-evaluation-harness's ``loglikelihood`` makes them:
        whitespace at the end of the prompt is moved onto the continuation, the context
        is ``tok(prompt)`` and the continuation ``tok(prompt + delimiter + text)`` beyond
        the context's length. Its default variables are the question's words only.
        """
        t = _prompts.get_template(template)
        r = _prompts.render_spans(item, t, shots=shots)
        cloze = t.kind == "cloze"
        vs = (
            list(variables)
            if variables is not None
            else _prompts.variables(item, n_max=self.n_max, seed=self.seed, options=not cloze)
        )
        spans = _prompts.prompt_spans(r, vs)
        text = r.text.rstrip() if cloze else r.text
        ids, offs = self._tokens(text, offsets=True)
        text_cfg = self._text_config()
        context = getattr(text_cfg, "max_position_embeddings", None)
        stretches = _rope_depends_on_length(text_cfg)  # dynamic/longrope rotary: longer is fine
        if isinstance(context, int) and not stretches and len(ids) + 1 > context:  # + answer
            fail(
                "psens.models.Scorer.encode",
                f"the prompt of item {item.id!r} under template {t.name!r} has {len(ids)} "
                f"tokens, more than the model's context of {context}",
                "Use fewer shots, a shorter passage, or a model with a longer context",
            )
        real = offs[:, 1] > offs[:, 0]
        var_tokens = []
        for v, (a, b) in zip(vs, spans, strict=True):
            hit = np.nonzero(real & (offs[:, 0] < b) & (offs[:, 1] > a))[0]
            if hit.size == 0:
                fail(
                    "psens.models.Scorer.encode",
                    f"variable {v.text!r} maps to no token of the prompt",
                    "Check the tokenizer's offset mapping",
                )
            var_tokens.append(hit)
        target = -1
        option_ids: dict[str, int] = {}
        if t.kind == "mcq":
            # positional labels (format grammar) are checked; the item's own labels are
            # scored as they always were
            option_ids = option_token_ids(
                self.tokenizer, item, t, r.text, ids, check=bool(t.labels)
            )
            target = option_ids[item.answer]
        conts = self._continuations(item, t, text, r.text[len(text) :], ids) if cloze else {}
        return Encoded(ids, var_tokens, target, option_ids, text, vs, t.name, conts)

    def _continuations(
        self, item: Item, t: _prompts.Template, context: str, trailing: str, ids: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Each option's continuation tokens after ``context`` (lm-eval's ``_encode_pair``:
        ``tok(context + trailing + delimiter + text)[len(tok(context)):]``); refuses an
        option without tokens or two options with the same tokens."""
        where = "psens.models.Scorer.choice_logprobs"
        out: dict[str, np.ndarray] = {}
        seen: dict[bytes, str] = {}
        for label, option in item.options:
            whole = self._tokens(context + trailing + t.answer_prefix + option)
            cont = whole[len(ids) :]
            if cont.size == 0:
                fail(where, f"option {label!r} of item {item.id!r} has no tokens", "Check the item")
            if cont.tobytes() in seen:
                fail(
                    where,
                    f"options {seen[cont.tobytes()]!r} and {label!r} of item {item.id!r} "
                    "tokenise identically after the prompt",
                    "Drop the item",
                )
            seen[cont.tobytes()] = label
            out[label] = cont
        return out

    def masked_ids(self, enc: Encoded, masks) -> list[np.ndarray] | np.ndarray:
        """Token ids of the masked prompts: an (m, L) array (length-preserving mode),
        or a list of 1-D arrays (``one_token_per_word``)."""
        bits = self._check_masks(masks, enc.n)
        mid = self.mask.id
        if not self.one_token_per_word:
            out = np.repeat(enc.ids[None, :], len(bits), axis=0)
            for i, pos in enumerate(enc.var_tokens):
                dropped = ~bits[:, i]
                if dropped.any():
                    out[np.ix_(dropped, pos)] = mid
            return out
        rows = []
        first = {int(p[0]): i for i, p in enumerate(enc.var_tokens)}
        owner = np.full(len(enc.ids), -1)
        for i, p in enumerate(enc.var_tokens):
            owner[p] = i
        for m in bits:
            row = []
            for pos, tok in enumerate(enc.ids):
                i = owner[pos]
                if i < 0 or m[i]:
                    row.append(int(tok))
                elif pos in first and first[pos] == i:
                    row.append(mid)
            rows.append(np.asarray(row, dtype=np.int64))
        return rows

    @staticmethod
    def _check_masks(masks, n: int) -> np.ndarray:
        """Masks as booleans ``[m, n]`` (column i = variable i kept), from bitmasks (ints,
        n <= 62) or a boolean array ``[m, n]`` (any n)."""
        where = "psens.models.Scorer.value"
        if masks is None:
            masks = np.arange(2**n, dtype=np.int64)
        a = np.asarray(masks)
        if a.ndim == 2 and (a.dtype == bool or np.issubdtype(a.dtype, np.integer)):
            if a.shape[1] != n or (a.dtype != bool and not np.isin(a, (0, 1)).all()):
                fail(
                    where,
                    f"2-d masks must be booleans of shape (m, {n}) for an item with n={n} "
                    f"variables (got {a.dtype} of shape {a.shape})",
                    "Pass one row per masked prompt, column i = variable i kept",
                )
            return a.astype(bool)
        a = np.atleast_1d(a)
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            fail(
                where,
                f"masks must be a 1-D integer array, got dtype {a.dtype} and shape {a.shape}",
                "Pass bitmasks as ints (bit i set = variable i kept), or booleans (m, n)",
                TypeError,
            )
        if n > 62:
            fail(
                where,
                f"integer bitmasks cannot hold n={n} variables",
                "Pass a boolean array (m, n) for items with more than 62 variables",
            )
        a = a.astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= 2**n):
            fail(
                where,
                f"masks must lie in [0, 2**{n}) for an item with n={n} variables "
                f"(got {int(a.min())}..{int(a.max())})",
                "Use bits 0..n-1 only (all-ones = 2**n - 1 = nothing masked)",
            )
        return ((a[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(bool)

    # ------------------------------------------------------------------ model calls

    def _new_cache(self):
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # older transformers
            return DynamicCache()

    def _extend(self, ids, cache) -> None:
        """Run the decoder on ``ids`` to extend ``cache`` (no LM head when possible)."""
        import torch

        if self._base is None:
            self._forward(ids, cache, keep=1)
            return
        x = torch.as_tensor(ids, device=self.device)
        self._base(input_ids=x, use_cache=True, **{self._cache_kw: cache})

    def _forward(self, ids, cache=None, keep: int = 1, hidden: bool = False):
        import torch

        kw: dict[str, Any] = {"input_ids": torch.as_tensor(ids, device=self.device)}
        if cache is not None:
            kw[self._cache_kw] = cache
            kw["use_cache"] = True
        else:
            kw["use_cache"] = False
        if keep:
            kw["logits_to_keep"] = keep
        if hidden:
            kw["output_hidden_states"] = True
        return self.model(**kw)

    def _memory_budget(self) -> float:
        """Bytes a scoring call may use: 50 % of free GPU memory, or 20 % of available RAM."""
        if self.device.type == "cuda":
            import torch

            return 0.5 * torch.cuda.mem_get_info(self.device)[0]
        return 0.2 * _available_ram()

    def _kv_bytes_per_token(self) -> int:
        """Bytes of keys and values one token keeps across all layers."""
        cfg = self._text_config()
        heads = getattr(cfg, "num_attention_heads", 16)
        kv = getattr(cfg, "num_key_value_heads", None) or heads
        hdim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        return 2 * getattr(cfg, "num_hidden_layers", 24) * kv * hdim * self.dtype.itemsize

    def _budget_rows(self, length: int, k: int = 1) -> int:
        """Rows per chunk of the generic walk so that the key/value cache (and its copies
        while it grows) and the logits kept at the ``k`` scored positions (float32, plus
        their float64 log-softmax) stay within the memory budget."""
        if self.batch_size:
            return int(self.batch_size)
        per_row = 3 * self._kv_bytes_per_token() * length  # cache + copies during cat
        vocab = getattr(self._text_config(), "vocab_size", 50000)
        per_row += vocab * (16 + 4 * k)  # float64 softmax of a position, float32 logits
        cap = 1024 if self.device.type == "cuda" else 128
        return int(max(1, min(cap, self._memory_budget() // per_row)))

    #: Most tokens computed in one call of the tree path on CPU (cache-friendly sizes).
    tree_tokens_cpu = 8192

    def _tree_nodes(self, length: int):
        """Nodes per call of the tree path, as a function ``(segment length, prefix end)``.

        ``batch_size`` when set (fixed, so runs are reproducible); otherwise bounded by the
        memory budget twice: float32 temporaries of the computed tokens (hidden states,
        projections, MLP, attention over at most ``2 * length`` keys; at most
        ``tree_tokens_cpu`` tokens on CPU), and the full-prefix keys/values each node keeps
        for its children (half the budget).
        """
        if self.batch_size:
            return lambda seg, end: int(self.batch_size)
        cfg = self._text_config()
        hidden = cfg.hidden_size
        inter = getattr(cfg, "intermediate_size", 4 * hidden)
        heads = getattr(cfg, "num_attention_heads", 16)
        per_token = 4 * (6 * hidden + 3 * inter + 6 * heads * length)
        kv_token = self._kv_bytes_per_token()
        budget = self._memory_budget()
        cap = 1 << 20 if self.device.type == "cuda" else self.tree_tokens_cpu
        tokens = max(1, min(cap, int(budget // per_token)))
        return lambda seg, end: max(1, min(tokens // seg, int(budget // (2 * end * kv_token))))

    def _text_config(self):
        cfg = self.model.config
        return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg

    #: Fixed cost of one model call, in token-rows, used to plan the prefix tree.
    level_overhead = 32

    def _plan(self, rows: np.ndarray, bounds: list[int], forced: Sequence[int] = ()) -> list[int]:
        """Keep the cuts that minimise the planned cost of the prefix-tree walk.

        A level extending the distinct prefixes of length ``b`` from ``a`` costs
        ``level_overhead + (b - a) * N(b)`` token-rows (``N(b)``: distinct prefixes of
        length ``b``). Dropping a cut merges two levels: one call fewer, more rows
        on the first segment. Solved exactly by dynamic programming over the cuts;
        the cuts in ``forced`` are always kept.
        """
        pos = [0, *bounds]
        counts = [1]
        for b in bounds[:-1]:
            counts.append(len(np.unique(rows[:, :b], axis=0)))
        counts.append(len(rows))
        m = len(pos)
        best = [0.0] + [np.inf] * (m - 1)
        prev = [0] * m
        must = sorted(set(forced) & set(pos))
        for j in range(1, m):
            for i in range(j):
                if any(pos[i] < f < pos[j] for f in must):
                    continue
                c = best[i] + self.level_overhead + (pos[j] - pos[i]) * counts[j]
                if c < best[j]:
                    best[j], prev[j] = c, i
        keep, j = [], m - 1
        while j > 0:
            keep.append(pos[j])
            j = prev[j]
        return keep[::-1]

    def _score_rows(
        self,
        rows: np.ndarray,
        cuts: Sequence[int],
        targets: np.ndarray,
        bar=None,
        forced: Sequence[int] = (),
    ) -> np.ndarray:
        """Per-target log-probabilities for equal-length rows, walking the prefix tree.

        ``rows`` (R, L) are prompts; ``targets`` (k,) are appended (teacher forcing:
        all but the last), and logits are kept at the last k positions. ``targets``
        (R, k) are each row's own, already in the rows (cloze options: the rows end with
        the teacher-forced tokens). Returns an (R, k) float64 array of log p(target_j |
        prefix). ``forced`` cuts are always kept (the end of a shared prompt).

        The tree is cut at ``cuts`` (token positions). Level by level, each distinct
        prefix is extended by one segment in a single batched call, its key/value
        cache copied from its parent's. When a level would hold more than the
        memory budget's rows, the frontier is split into groups of parents and each
        group's subtree is walked on its own (depth first), so upper levels are
        computed once.
        """
        import torch

        targets = np.asarray(targets)
        k = targets.shape[-1]
        per_row = targets.ndim == 2
        if k > 1 and not per_row:
            tail = np.repeat(targets[None, :-1], len(rows), axis=0)
            rows = np.concatenate([rows, tail], axis=1)
        length = rows.shape[1]
        last = length - k  # the last segment must hold the k scored positions
        keep = sorted({c for c in (*cuts, *forced) if 0 < c <= last})
        bounds = self._plan(rows, [*keep, length], forced)
        if self.tree is not None and (self.tree.window is None or length <= self.tree.window):
            return self.tree.score(
                rows, bounds, targets, self._tree_nodes(length), None if bar is None else bar.update
            )
        if _rope_depends_on_length(self._text_config()):
            # the model's own cached forward would rotate each level with angles scaled for
            # that call's last position, not the row's: no prefix sharing, whole rows only
            bounds = [length]
        chunk = self._budget_rows(length, k)
        out = np.empty((len(rows), k), dtype=np.float64)
        tgt = torch.as_tensor(targets, device=self.device)

        def walk(idx, cache, parent, n_parent, level, start):
            # idx: original row numbers in this subtree; parent[j]: cache row of idx[j]
            block = rows[idx]
            while True:
                b = bounds[level]
                if b == length:
                    reps = np.arange(len(idx))
                    inv = reps
                else:
                    _, reps, inv = np.unique(
                        block[:, :b], axis=0, return_index=True, return_inverse=True
                    )
                    inv = inv.reshape(-1)
                if len(reps) > chunk and n_parent > 1:  # split the frontier by parent
                    groups, cur, size = [], [], 0
                    children = np.bincount(parent[reps], minlength=n_parent)
                    for p_ in range(n_parent):
                        if cur and size + children[p_] > chunk:
                            groups.append(cur)
                            cur, size = [], 0
                        cur.append(p_)
                        size += children[p_]
                    groups.append(cur)
                    for g, members in enumerate(groups):
                        sel = np.asarray(members)
                        sub = cache if g == len(groups) - 1 else copy.deepcopy(cache)
                        sub.batch_select_indices(torch.as_tensor(sel, device=self.device))
                        inside = np.isin(parent, sel)
                        walk(
                            idx[inside],
                            sub,
                            np.searchsorted(sel, parent[inside]),
                            len(sel),
                            level,
                            start,
                        )
                    return
                par = parent[reps]
                identity = n_parent == len(par) and np.array_equal(par, np.arange(n_parent))
                if cache.get_seq_length() > 0 and not identity:
                    cache.batch_select_indices(torch.as_tensor(par, device=self.device))
                seg = block[reps, start:b]
                if b < length:
                    self._extend(seg, cache)
                else:
                    logits = self._forward(seg, cache, keep=k).logits[:, -k:, :]
                    own = torch.as_tensor(targets[idx], device=self.device) if per_row else tgt
                    out[idx] = target_log_probs(logits, own).cpu().numpy()
                    if bar is not None:
                        bar.update(len(idx))
                    return
                parent, n_parent, level, start = inv, len(reps), level + 1, b

        walk(np.arange(len(rows)), self._new_cache(), np.zeros(len(rows), np.int64), 1, 0, 0)
        return out

    def _score_naive(self, rows: list[np.ndarray], targets: np.ndarray) -> np.ndarray:
        import torch

        k = len(targets)
        out = np.empty((len(rows), k), dtype=np.float64)
        tgt = torch.as_tensor(targets, device=self.device)
        for i, r in enumerate(rows):
            full = np.concatenate([r, targets[:-1]]) if k > 1 else r
            logits = self._forward(full[None, :], None, keep=0).logits[:, -k:, :]
            out[i] = target_log_probs(logits, tgt)[0].cpu().numpy()
        return out

    # ------------------------------------------------------------------ public API

    def value(
        self,
        item: Item,
        template: str | _prompts.Template = "ips1",
        masks=None,
        *,
        shots: Sequence[Item] = (),
        variables: Sequence[_prompts.Variable] | None = None,
        method: str = "trie",
        progress: bool | None = None,
    ) -> np.ndarray:
        """v(x_T) for each bitmask T (the input of IPS paper eq. 1).

        Parameters
        ----------
        item : Item
        template : str or Template
            ``"ips1"`` … ``"ips5"`` for MCQ items, ``"open"`` for open-ended ones.
        masks : int array or bool array (m, n), optional
            Bitmasks over the item's variables (bit i set = variable i kept;
            ``2**n - 1`` = nothing masked), or booleans ``[m, n]`` (column i = variable i
            kept; any n, needed for n > 62). Default: all ``2**n`` in order.
        shots : sequence of Item
            Few-shot examples (fig. 16); never masked.
        variables : sequence of Variable, optional
            Default :func:`psens.prompts.variables` with the scorer's n_max and seed.
        method : {"trie", "prefix", "naive"}
            Prefix-tree batching (default), shared-prefix batching, or one prompt at a
            time with full logits (reference).
        progress : bool, optional
            Show a tqdm bar in masks/s (default: the scorer's ``progress``; calls with
            fewer than 64 unique masks never show one).

        Returns
        -------
        ndarray of float64, shape (len(masks),)
        """
        import torch

        if method not in _METHODS:
            fail("psens.models.Scorer.value", f"method={method!r}", f"Use one of {_METHODS}")
        if _prompts.get_template(template).kind == "cloze":
            fail(
                "psens.models.Scorer.value",
                f"template {_prompts.get_template(template).name!r} is a cloze prompt: its "
                "answer is each option's text, not one token",
                "Score it with choice_logprobs and psens.cloze.cloze_value",
            )
        enc = self.encode(item, template, shots=shots, variables=variables)
        self._check_masks(masks, enc.n)  # refused before any model call
        skip = 0
        if enc.target_id >= 0:
            targets = np.asarray([enc.target_id], dtype=np.int64)
        else:  # teacher forcing: the answer prefix (not scored), then the greedy response
            extra, gen = self._open_target(item, template, shots)
            targets, skip = np.concatenate([extra, gen]), len(extra)
        uniq, inverse = _unique_rows(self.masked_ids(enc, masks))
        logp = np.empty((len(uniq), len(targets)), dtype=np.float64)
        with torch.inference_mode():
            if method == "naive":
                logp[:] = self._score_naive(uniq, targets)
            else:
                self._walk_groups(enc, uniq, method, progress, logp, lambda b: (b, targets, ()))
        per_token = _log_odds(logp[:, skip:])
        if per_token.shape[1] == 1 or self.open_reduce == "first":
            v = per_token[:, 0]
        elif self.open_reduce == "sum":
            v = per_token.sum(axis=1)
        else:
            v = per_token.mean(axis=1)
        return v[inverse]

    def _walk_groups(self, enc: Encoded, uniq, method: str, progress, out, expand) -> None:
        """Score the unique masked rows ``uniq`` by the prefix tree, one group of equal
        lengths at a time, into ``out`` (shape ``(len(uniq), ...)``). ``expand(block)``
        gives the ``(rows, targets, forced)`` that :meth:`_score_rows` scores for a block
        of masked prompts: the block itself, or each prompt once per option (cloze)."""
        from tqdm.auto import tqdm

        show = self.progress if progress is None else progress
        bar = tqdm(
            total=len(uniq),
            unit="masks",
            desc=f"{self.name} {enc.template}",
            disable=not show or len(uniq) < 64,
            leave=False,
        )
        cuts = sorted({int(p[0]) for p in enc.var_tokens})
        if method == "prefix":
            cuts = cuts[:1]
        lengths = np.asarray([len(r) for r in uniq])
        for length in np.unique(lengths):
            idx = np.nonzero(lengths == length)[0]
            rows, targets, forced = expand(np.stack([uniq[i] for i in idx]))
            own = rows is not None and len(rows) == len(idx)  # the masked prompts themselves
            got = self._score_rows(rows, cuts, targets, bar if own else None, forced)
            out[idx] = got.reshape(len(idx), *out.shape[1:])
            if not own:
                bar.update(len(idx))
        bar.close()

    def choice_logprobs(
        self,
        item: Item,
        template: str | _prompts.Template = "cloze",
        masks=None,
        *,
        shots: Sequence[Item] = (),
        variables: Sequence[_prompts.Variable] | None = None,
        method: str = "trie",
        progress: bool | None = None,
    ) -> np.ndarray:
        """Log-likelihood of each option's text as the continuation of each masked prompt.

        .. math:: \\ell_o(x_T) = \\sum_j \\log P(c_{o,j} \\mid x_T, c_{o,<j})

        the cloze formulation's option scores (:mod:`psens.cloze`; Gu et al. 2024, OLMES).
        The prompt is ``template``'s cloze form (:func:`psens.prompts.cloze_form`: an MCQ
        template's wording without the options); ``c_o`` are the tokens of the target
        delimiter (``answer_prefix``, a space by default) and the option's text, made as
        lm-evaluation-harness's ``loglikelihood`` makes them (:meth:`encode`): the
        masked prompt is the context's tokens, the continuation's are scored.

        Speed: the options are branches of the prefix tree. Every masked prompt is
        computed once (up to its last token, a forced cut), then only each option's
        tokens, attending to it in place (grouped tree attention); never one full pass
        per option.

        Parameters
        ----------
        item : Item
            A multiple-choice item (its options are scored; refused without options, with
            an empty option or two options of the same text).
        template, masks, shots, variables, method, progress
            As in :meth:`value`; ``variables`` default to the question's words
            (:func:`psens.prompts.variables` with ``options=False``); ``variables=[]``
            scores the unmasked prompt alone (one row). ``method="naive"`` runs each
            (masked prompt, option) pair through the model in one pass (the reference).

        Returns
        -------
        ndarray of float64, shape (len(masks), n_options)
            Options in the item's order.

        References
        ----------
        .. [1] Gu, Y., Tafjord, O., Kuehl, B., Haddad, D., Dodge, J., and Hajishirzi, H.
           "OLMES: A Standard for Language Model Evaluations." arXiv:2406.08446, 2024.
        """
        import torch

        where = "psens.models.Scorer.choice_logprobs"
        if method not in _METHODS:
            fail(where, f"method={method!r}", f"Use one of {_METHODS}")
        t = _prompts.cloze_form(template)
        _prompts.check_cloze_item(item, where)
        enc = self.encode(item, t, shots=shots, variables=variables)
        self._check_masks(masks, enc.n)  # refused before any model call
        conts = [enc.continuations[label] for label, _ in item.options]
        uniq, inverse = _unique_rows(self.masked_ids(enc, masks))
        n_opt = len(conts)
        sizes = np.asarray([len(c) for c in conts])
        width = int(sizes.max())
        targets = np.full((n_opt, width), self.mask.id, dtype=np.int64)
        for o, c in enumerate(conts):
            targets[o, : len(c)] = c
        valid = np.arange(width)[None, :] < sizes[:, None]  # (options, width)
        logp = np.empty((len(uniq), n_opt, width), dtype=np.float64)
        with torch.inference_mode():
            if method == "naive":  # each (masked prompt, option) in one pass
                for i, r in enumerate(uniq):
                    for o, c in enumerate(conts):
                        logp[i, o, : len(c)] = self._score_naive([r], c)[0]
            else:

                def expand(block: np.ndarray):
                    # each masked prompt once per option, followed by the option's tokens
                    # (all but the last; the rest padded), scored at the last `width`
                    rows = np.concatenate(
                        [
                            np.repeat(block, n_opt, axis=0),
                            np.tile(targets[:, :-1], (len(block), 1)),
                        ],
                        axis=1,
                    )
                    return rows, np.tile(targets, (len(block), 1)), (block.shape[1] - 1,)

                self._walk_groups(enc, uniq, method, progress, logp, expand)
        out = np.where(valid[None], logp, 0.0).sum(axis=2)
        return out[inverse]

    def open_target(
        self,
        item: Item,
        template: str | _prompts.Template = "open",
        *,
        shots: Sequence[Item] = (),
        m: int | None = None,
    ) -> np.ndarray:
        """The first ``m`` token ids of the greedy response to the unmasked prompt
        (fewer when the response ends earlier; default ``m`` = ``open_tokens``)."""
        return self._open_target(item, template, shots, m)[1]

    def _open_target(self, item, template, shots=(), m=None) -> tuple[np.ndarray, np.ndarray]:
        """(answer-prefix tokens, greedy response tokens) for an open-ended item.

        The answer prefix is kept apart when it tokenises on its own; when it merges with
        the prompt's last token the response is generated right after the prompt.
        The response comes from :meth:`_greedy_ids` (the model here, a server in
        :class:`~psens.models.served.ServedScorer`).
        """
        m = self.open_tokens if m is None else m
        t = _prompts.get_template(template)
        key = (item.id, item.question, t.name, tuple(s.id for s in shots), m)
        if key not in self._open_targets:
            prompt = _prompts.render(item, t, shots=shots)
            base = self._tokens(prompt)
            longer = self._tokens(prompt + t.answer_prefix)
            if len(longer) > len(base) and np.array_equal(longer[: len(base)], base):
                extra = longer[len(base) :]
            else:
                extra, longer = np.zeros(0, dtype=np.int64), base
            new = self._greedy_ids(longer, m)
            if new.size == 0:
                fail(
                    f"psens.models.{type(self).__name__}",
                    f"{self.name!r} generated nothing for item {item.id!r}",
                    "Check the model (or its server)",
                    RuntimeError,
                )
            self._open_targets[key] = (extra, new)
        return self._open_targets[key]

    def _forward_after_prefix(self, enc: Encoded, item_text: str):
        """The forward pass of ``enc`` on top of the cached few-shot prefix (the prompt's
        text before ``item_text``); the whole prompt when the tokens do not split there."""
        import copy

        whole = lambda: self._forward(enc.ids[None, :], None, keep=1, hidden=True)  # noqa: E731
        if not enc.text.endswith(item_text):
            return whole()
        # without its trailing whitespace: a run of blank lines tokenises differently at
        # the end of a text than before a word
        prefix = enc.text[: len(enc.text) - len(item_text)].rstrip()
        pids = self._tokens(prefix)
        k = len(pids)
        if not 0 < k < len(enc.ids) or not np.array_equal(enc.ids[:k], pids):
            return whole()
        cache = self._prefixes.get(prefix)
        if cache is None:
            if len(self._prefixes) >= 64:  # a run has one prefix per template and shot count
                self._prefixes.clear()
            cache = self._new_cache()
            self._forward(pids[None, :], cache, keep=1)
            self._prefixes[prefix] = cache
        return self._forward(enc.ids[None, k:], copy.deepcopy(cache), keep=1, hidden=True)

    def _greedy_ids(self, ids: np.ndarray, m: int) -> np.ndarray:
        """At most ``m`` token ids of the model's greedy continuation of ``ids``."""
        import torch

        ids = torch.as_tensor(np.asarray(ids)[None, :], device=self.device)
        with torch.inference_mode():
            gen = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=m,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id or self.mask.id,
            )
        return gen[0, ids.shape[1] :].cpu().numpy().astype(np.int64)

    def _chat_encoded(self, enc: Encoded, item: Item, t: _prompts.Template) -> Encoded:
        """``enc`` asked through the chat template (:meth:`predict` with ``chat=True``)."""
        from psens.models.generation import chat_text

        text = chat_text(self.tokenizer, [{"role": "user", "content": enc.text}])
        add = not getattr(self.tokenizer, "chat_template", None)
        ids = np.asarray(self.tokenizer(text, add_special_tokens=add)["input_ids"])
        option_ids: dict[str, int] = {}
        if t.kind == "mcq":
            shown = _prompts.option_labels(item, t)
            option_ids = {
                label: follow_id(self.tokenizer, ids, text, shown[label])
                for label, _ in item.options
            }
        target = option_ids.get(item.answer, -1)
        return Encoded(ids, [], target, option_ids, text, [], enc.template)

    def predict(
        self,
        item: Item,
        template: str | _prompts.Template = "ips1",
        *,
        shots: Sequence[Item] = (),
        max_new_tokens: int = 8,
        generate: bool = True,
        reuse_prefix: bool = False,
        chat: bool = False,
    ) -> Prediction:
        """Greedy prediction on the unmasked prompt (appendix E.3).

        Returns the generated text, the argmax among the option letters (``choice``),
        ``p_target`` and its log-odds ``v``, ProSA's confidence (the top next-token
        probability over the full vocabulary), the softmax over the option letters,
        and the final-layer hidden state at the answer position (appendix H).

        ``reuse_prefix=True`` keeps the key/value cache of the few-shot prefix (the text
        before the item, the same for every item of a run) and runs the decoder on the
        item's tokens only: the same numbers up to float rounding, several times faster
        for long few-shot prompts. It is used when the prompt's tokens start with the
        prefix's own tokens (else the whole prompt is run).

        ``chat=True`` asks as an instruct model is used in chat: the rendered prompt is the
        user turn of the tokenizer's chat template with the assistant turn opened
        (:func:`psens.models.generation.chat_text`), and each option's answer token is the
        first token of its label as the assistant's reply begins (no answer prefix). The IPS
        paper scores raw prompts (the default); this shows whether an instruct model's
        answers depend on being asked without its chat template.
        """
        import torch

        enc = self.encode(item, template, shots=shots, variables=())  # no masking here
        t = _prompts.get_template(template)
        if chat:
            enc = self._chat_encoded(enc, item, t)
        with torch.inference_mode():
            if reuse_prefix and shots and not chat:
                out = self._forward_after_prefix(enc, _prompts.render(item, t))
            else:
                out = self._forward(enc.ids[None, :], None, keep=1, hidden=True)
            logp = torch.log_softmax(out.logits[0, -1].double(), dim=-1)
            hidden = out.hidden_states[-1][0, -1].float().cpu().numpy()
            text = ""
            if generate:
                new = self._greedy_ids(enc.ids, max_new_tokens)
                text = self.tokenizer.decode(new, skip_special_tokens=True)
        lp = logp.cpu().numpy()
        confidence = float(np.exp(lp.max()))
        if t.kind == "mcq":
            labels = list(enc.option_ids)
            opt = np.asarray([lp[enc.option_ids[lab]] for lab in labels])
            probs = np.exp(opt - opt.max())
            probs /= probs.sum()
            choice = labels[int(np.argmax(opt))]
            p_target = float(np.exp(lp[enc.target_id]))
            return Prediction(
                text=text,
                choice=choice,
                correct=choice == item.answer,
                p_target=p_target,
                v=float(_log_odds(np.asarray([lp[enc.target_id]]))[0]),
                confidence=confidence,
                option_probs=dict(zip(labels, probs.tolist(), strict=True)),
                hidden=hidden,
            )
        return Prediction(
            text=text,
            choice=None,
            correct=None,
            p_target=float("nan"),
            v=float("nan"),
            confidence=confidence,
            option_probs={},
            hidden=hidden,
        )
