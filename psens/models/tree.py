"""Prefix-tree forward pass for Llama-style decoders: grouped tree attention.

The masked prompts of one (item, template) share long prefixes. Sorted
lexicographically, they form a tree whose level ``j`` holds the distinct prefixes
ending at token ``b_j`` (the cuts chosen by :meth:`psens.models.Scorer._plan`); each
node computes only its own segment ``[b_{j-1}, b_j)``, once.

Attention of the nodes below one parent is computed **per parent**, not per node:
the ``f`` children of a parent (contiguous once sorted), and the query heads that
share a key/value head (grouped-query attention), are stacked into one query block
that attends to ``[parent's prefix keys, the f children's segment keys]`` under a
mask (the whole prefix, plus the query's own segment causally). Attention thus reads
the parent's prefix in place: no per-prompt cache is built for the last level (the
largest), and no ``repeat_kv`` expansion of grouped heads happens anywhere. Inner
nodes assemble their full-prefix keys/values once, for their own children. Stacks
hold at most ``max(prefix + segment, 64)`` children's keys (larger families are split
into sub-groups), so masked-out keys never dominate a block's work. When the
children of the parents in a slice are not equally many (a subset of masks), the
parent prefix is gathered per child instead (``f = 1``). Rotary angles are computed
once for the whole row (dynamic scalings depend on the longest position).

Each block is ``softmax(q k^T / sqrt(d) + mask) v`` (Vaswani et al. 2017) with
``torch.nn.functional.scaled_dot_product_attention``, so the result is ordinary causal
attention over the whole prompt and equals the model's own forward pass to float
rounding — checked against it in the tests.

Supported: decoders whose layers are ``x + attn(norm(x))`` then ``x + mlp(norm(x))``
with rotary position embeddings — model types ``llama``, ``mistral``, ``qwen2`` and
``qwen3`` (per-head ``q_norm``/``k_norm``) without an active sliding window. Other
models use the generic path.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["TreeForward", "supports", "target_log_probs"]

SUPPORTED_TYPES = ("llama", "mistral", "qwen2", "qwen3")
_ATTN_PARTS = ("q_proj", "k_proj", "v_proj", "o_proj", "scaling", "head_dim")
_LAYER_PARTS = ("self_attn", "mlp", "input_layernorm", "post_attention_layernorm")


def _window(model) -> int | None:
    """The smallest sliding window of any layer (None: full attention everywhere)."""
    cfg = model.config
    windows = [getattr(layer.self_attn, "sliding_window", None) for layer in model.model.layers]
    if cfg.model_type == "mistral":
        windows.append(getattr(cfg, "sliding_window", None))
    windows = [w for w in windows if w]
    return min(windows) if windows else None


def supports(model, length: int | None = None) -> bool:
    """Whether :class:`TreeForward` reproduces ``model``: its architecture, and — given
    ``length`` — no sliding window shorter than prompts of ``length`` tokens."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "model_type", None) not in SUPPORTED_TYPES or not hasattr(model, "lm_head"):
        return False
    inner = getattr(model, "model", None)
    if inner is None or not all(
        hasattr(inner, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")
    ):
        return False
    for layer in inner.layers:
        if not all(hasattr(layer, a) for a in _LAYER_PARTS):
            return False
        if not all(hasattr(layer.self_attn, a) for a in _ATTN_PARTS):
            return False
    w = _window(model)
    return w is None or length is None or length <= w


#: Most float64 elements :func:`target_log_probs` holds at once (128 MiB): the float64
#: log-softmax of a large vocabulary at many positions (cloze options) is taken in slices
#: of rows.
LOG_SOFTMAX_ELEMENTS = 1 << 24


def target_log_probs(logits, targets):
    """``log softmax(z)[y_j]`` in float64 at each of the last ``k`` positions.

    ``logits`` (N, k, V) over the full vocabulary, ``targets`` (k,) token ids shared by
    every row, or (N, k) one row of targets per row (a tensor on the logits' device);
    returns (N, k) — the log-probabilities behind v (IPS §3.1).

    The float64 copy and its log-softmax are taken a slice of rows at a time (at most
    :data:`LOG_SOFTMAX_ELEMENTS` elements): each row's log-softmax is computed alone, so
    the values are those of one call over all rows, without two float64 copies of
    ``N × k × V`` (26 GB for 64 rows of 40 option tokens over Gemma-3's 262,144 tokens).
    """
    import torch

    n, k, vocab = logits.shape
    idx = targets.view(1, k, 1).expand(n, k, 1) if targets.dim() == 1 else targets.view(n, k, 1)
    out = torch.empty((n, k), dtype=torch.float64, device=logits.device)
    step = max(1, LOG_SOFTMAX_ELEMENTS // max(1, k * vocab))
    for a in range(0, n, step):  # slices of rows, bounding the float64 temporaries
        logp = torch.log_softmax(logits[a : a + step].double(), dim=-1)
        out[a : a + step] = logp.gather(-1, idx[a : a + step])[..., 0]
    return out


def _rotate(x, cos, sin):
    """Rotary embedding: ``x cos + rotate_half(x) sin`` (Su et al. 2021, eq. 34)."""
    import torch

    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _norm(module) -> Callable:
    """``module`` as a function; Llama-style RMSNorm through the fused
    ``torch.nn.functional.rms_norm`` (``w * (x / sqrt(mean(x^2) + eps))``, statistics in
    float32, weight applied in the input dtype — as the model's own module)."""
    import torch
    import torch.nn.functional as F

    weight = getattr(module, "weight", None)
    eps = getattr(module, "variance_epsilon", None)
    if not type(module).__name__.endswith("RMSNorm") or weight is None or eps is None:
        return module
    shape = (weight.shape[-1],)

    def norm(x):
        if x.dtype == torch.float32:
            return F.rms_norm(x, shape, weight, eps)
        return weight * F.rms_norm(x.float(), shape, None, eps).to(x.dtype)

    return norm


def _largest_divisor_at_most(f: int, limit: int) -> int:
    """The largest divisor of ``f`` that is at most ``max(limit, 1)``."""
    q = np.arange(1, min(f, max(limit, 1)) + 1)
    return int(q[f % q == 0].max())


def _grouping(anc: np.ndarray):
    """``(start, groups, fanout)`` when ``anc`` is ``start..start+groups-1`` each repeated
    ``fanout`` times (children can be stacked per parent), else None."""
    n = len(anc)
    first, last = int(anc[0]), int(anc[-1])
    groups = last - first + 1
    if n % groups:
        return None
    f = n // groups
    if np.array_equal(anc, np.repeat(np.arange(first, last + 1), f)):
        return first, groups, f
    return None


class TreeForward:
    """Score token rows that share prefixes with a Llama-style decoder (see module doc).

    Parameters
    ----------
    model : transformers causal LM for which :func:`supports` is true.
    """

    def __init__(self, model) -> None:
        self.model = model
        self.inner = model.model
        cfg = model.config
        attn = self.inner.layers[0].self_attn
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = attn.head_dim
        self.window = _window(model)
        layers = self.inner.layers
        self._norms = [
            (_norm(la.input_layernorm), _norm(la.post_attention_layernorm)) for la in layers
        ]
        self._final_norm = _norm(self.inner.norm)

    @property
    def dtype(self):
        return next(self.model.parameters()).dtype

    @property
    def device(self):
        return next(self.model.parameters()).device

    def _levels(self, srt: np.ndarray, ends: Sequence[int], tail: np.ndarray | None = None):
        """Per level: node of each (sorted) row, first row of each node, parent of each node.

        ``tail`` (rows' own targets, sorted alike): leaves also differ where it does."""
        node, first, parent = [], [], []
        differs = np.zeros(max(len(srt) - 1, 0), dtype=bool)
        start, prev = 0, np.zeros(len(srt), dtype=np.int64)
        for b in ends:
            differs |= np.any(srt[1:, start:b] != srt[:-1, start:b], axis=1)
            if tail is not None and b == ends[-1]:
                differs |= np.any(tail[1:] != tail[:-1], axis=1)
            nd = np.concatenate([[0], np.cumsum(differs)]).astype(np.int64)
            reps = np.flatnonzero(np.concatenate([[True], differs]))
            node.append(nd)
            first.append(reps)
            parent.append(prev[reps])
            start, prev = b, nd
        return node, first, parent

    def score(
        self,
        rows: np.ndarray,
        ends: Sequence[int],
        targets: np.ndarray,
        max_nodes: Callable[[int, int], int],
        on_done: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """log p(target_j | prefix) at the last ``len(targets)`` positions of each row.

        Parameters
        ----------
        rows : (R, L) int array
            Token rows (teacher-forced targets already appended).
        ends : increasing ints, the last equal to L
            Level ends (cuts of the prefix tree).
        targets : (k,) int array, or (R, k): each row's own targets
        max_nodes : callable
            ``(segment length, prefix end)`` -> largest number of nodes computed in one
            call (each keeps its prefix's keys/values up to ``end`` for its children).
        on_done : callable, optional
            Called with the number of rows finished (progress bars).

        Returns
        -------
        (R, k) float64 array.
        """
        import torch

        ends = [int(b) for b in ends]
        targets = np.asarray(targets)
        k = targets.shape[-1]
        per_row = targets.ndim == 2
        key = np.concatenate([rows, targets], axis=1) if per_row else rows
        order = np.lexsort(key.T[::-1])
        srt = rows[order]
        tsrt = targets[order] if per_row else None
        node, first, parent = self._levels(srt, ends, tsrt)
        starts = [0, *ends[:-1]]
        done = np.empty((len(first[-1]), k), dtype=np.float64)  # per leaf
        tgt = torch.as_tensor(targets, device=self.device)

        def walk(level: int, lo: int, hi: int, prefix: tuple | None) -> None:
            # prefix: (offset, keys, values) of the parent level's nodes (full prefixes)
            seg = ends[level] - starts[level]
            cap = max(1, int(max_nodes(seg, ends[level])))
            last = level == len(ends) - 1
            for a, b in self._slices(parent[level], lo, hi, cap):
                reps = first[level][a:b]
                ids = srt[reps, starts[level] : ends[level]]
                par = None if prefix is None else (prefix, parent[level][a:b] - prefix[0])
                x, keys, values = self._run(ids, starts[level], par, last, k, rope)
                if last:
                    logits = self.model.lm_head(self._final_norm(x))
                    own = torch.as_tensor(tsrt[reps], device=self.device) if per_row else tgt
                    done[a:b] = target_log_probs(logits, own).cpu().numpy()
                    if on_done is not None:
                        on_done(b - a)
                    continue
                nxt = parent[level + 1]
                lo2, hi2 = int(np.searchsorted(nxt, a)), int(np.searchsorted(nxt, b))
                walk(level + 1, lo2, hi2, (a, keys, values))

        with torch.inference_mode():
            dummy = torch.zeros(1, dtype=self.dtype, device=self.device)
            positions = torch.arange(rows.shape[1], device=self.device)[None, :]
            rope = self.inner.rotary_emb(dummy, positions)  # (1, L, d) each
            walk(0, 0, len(first[0]), None)
        out = np.empty((len(rows), k), dtype=np.float64)
        out[order] = done[node[-1]]
        return out

    @staticmethod
    def _slices(parents: np.ndarray, lo: int, hi: int, cap: int) -> list[tuple[int, int]]:
        """Split nodes ``[lo, hi)`` into runs of at most ``cap`` nodes, cut where the
        parent changes (so that children stay stacked under their parent) unless one
        parent alone has more than ``cap`` children."""
        if hi - lo <= cap:
            return [(lo, hi)]
        p = parents[lo:hi]
        heads = np.flatnonzero(np.concatenate([[True], p[1:] != p[:-1]]))  # first children
        cuts, a = [0], 0
        while hi - lo - a > cap:  # one step per slice: the last parent start within reach
            nxt = int(heads[np.searchsorted(heads, a + cap, side="right") - 1])
            a = nxt if nxt > a else a + cap  # one parent with more than cap children
            cuts.append(a)
        cuts = np.asarray(cuts)
        bounds = [*(lo + cuts).tolist(), hi]
        return list(itertools.pairwise(bounds))

    def _run(self, ids: np.ndarray, start: int, par, last: bool, k: int, rope):
        """Run every layer on one slice's segments.

        ``par`` is None (no prefix) or ``((offset, keys, values), parent)``: the parent
        level's full-prefix keys/values per layer and each node's parent (relative to
        ``offset``). ``rope`` is (cos, sin) of the whole row's positions (computed once:
        dynamic rotary scalings depend on the longest position of the call). Returns the
        hidden states (the last ``k`` positions when ``last``)
        and, unless ``last``, each node's full-prefix keys and values per layer.
        """
        import torch
        import torch.nn.functional as F

        n, s = ids.shape
        h, kvh, d = self.heads, self.kv_heads, self.head_dim
        g = h // kvh
        dev = self.device
        x = self.inner.embed_tokens(torch.as_tensor(ids, device=dev))
        cos, sin = (t[:, None, start : start + s] for t in rope)  # (1, 1, s, d)
        if par is None:
            (p_keys, p_values), b, groups, f = (None, None), 0, n, 1
            pick = None
        else:
            (_, p_keys, p_values), rel = par
            b = p_keys[0].shape[2]
            grp = _grouping(rel)
            if grp is None:  # unequal fanout: gather the parent prefix per node
                pick = torch.as_tensor(rel, device=dev)
                groups, f = n, 1
            else:
                a0, groups, f = grp
                # stack at most max(b + s, 64) keys of children, so that the masked-out
                # part of a block (other children's segments) never dominates its work
                sub = _largest_divisor_at_most(f, max(b + s, 64) // s)
                if sub == f:
                    pick = slice(a0, a0 + groups)
                else:
                    pick = torch.arange(a0, a0 + groups, device=dev).repeat_interleave(f // sub)
                    groups, f = groups * (f // sub), sub
        # query (child c, head group, position i) sees the prefix and (c, j <= i)
        qi = torch.arange(f * g * s, device=dev)
        qc, qp = qi // (g * s), qi % s
        kj = torch.arange(f * s, device=dev)
        seen = (qc[:, None] == (kj // s)[None, :]) & (qp[:, None] >= (kj % s)[None, :])
        mask = torch.cat([torch.ones(len(qi), b, dtype=torch.bool, device=dev), seen], dim=1)
        keys, values = [], []
        layers = self.inner.layers
        final = len(layers) - 1
        for li, layer in enumerate(layers):
            attn = layer.self_attn
            norm_in, norm_post = self._norms[li]
            y = norm_in(x)
            kk = attn.k_proj(y).view(n, s, kvh, d)
            if hasattr(attn, "k_norm"):
                kk = attn.k_norm(kk)
            kk = _rotate(kk.transpose(1, 2), cos, sin)  # (n, kvh, s, d)
            vv = attn.v_proj(y).view(n, s, kvh, d).transpose(1, 2)
            if b:
                pk, pv = p_keys[li], p_values[li]
                pk = pk.index_select(0, pick) if isinstance(pick, torch.Tensor) else pk[pick]
                pv = pv.index_select(0, pick) if isinstance(pick, torch.Tensor) else pv[pick]
            if not last:  # each node's full prefix, for its children
                if b:
                    rep = (lambda t: t) if f == 1 else (lambda t: t.repeat_interleave(f, dim=0))
                    keys.append(torch.cat([rep(pk), kk], dim=2))
                    values.append(torch.cat([rep(pv), vv], dim=2))
                else:
                    keys.append(kk.contiguous())
                    values.append(vv.contiguous())
                if li == final:  # inner levels need keys/values only: skip the rest
                    break
            q = attn.q_proj(y).view(n, s, h, d)
            if hasattr(attn, "q_norm"):
                q = attn.q_norm(q)
            q = _rotate(q.transpose(1, 2), cos, sin)  # (n, h, s, d)
            # stack the f children and the g heads of each key/value head
            qg = q.reshape(groups, f, kvh, g, s, d).transpose(1, 2).reshape(groups, kvh, -1, d)
            kc = kk.reshape(groups, f, kvh, s, d).transpose(1, 2).reshape(groups, kvh, f * s, d)
            vc = vv.reshape(groups, f, kvh, s, d).transpose(1, 2).reshape(groups, kvh, f * s, d)
            if b:
                kc, vc = torch.cat([pk, kc], dim=2), torch.cat([pv, vc], dim=2)
            o = F.scaled_dot_product_attention(qg, kc, vc, attn_mask=mask, scale=attn.scaling)
            o = o.view(groups, kvh, f, g, s, d).permute(0, 2, 4, 1, 3, 5).reshape(n, s, h * d)
            if last and li == final:  # only the scored positions are needed
                x, o = x[:, -k:], o[:, -k:]
            x = x + attn.o_proj(o)
            x = x + layer.mlp(norm_post(x))
        if last:
            x = x[:, -k:]
        return x, keys, values
