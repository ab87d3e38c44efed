r"""IPS of long inputs from sparse AND interactions (IPS paper appendix J; n up to 64 words).

The exact IPS needs all :math:`2^n` masked prompts of every (item, template). For long inputs
this module queries a budget :math:`B \ll 2^n` of masked prompts through the value function
(:meth:`psens.models.Scorer.value`, batched, prefix-tree scoring), recovers the salient Möbius
(AND) interactions (:func:`psens.interactions.sparse.recover`: psens' own ``lasso``, or SPEX /
ProxySPEX through shapiq) and computes IPS on the recovered support.

The approximation, precisely
----------------------------
* **Interactions.** Each template's game is represented by its AND interactions on a recovered
  support :math:`K_T`; every subset outside :math:`K_T` has interaction exactly 0.
  By default (``split="and"``) there is no OR part: :math:`\gamma = v/2`, so
  :math:`I_{and}` is the Möbius transform of :math:`v` and :math:`I_{or} = 0` except its bias —
  the AND-only decomposition, not the paper's AND-OR split (that needs all :math:`2^n`
  values; ``split="restricted"`` solves eq. 12 over the games supported on the downward
  closure of :math:`K_T`, :func:`psens.interactions.sparse.restricted_and_or`).
* **Normalisation** (§3.2), per game, over *all* :math:`2(2^n-1)` AND and OR interactions with
  :math:`S\neq\emptyset`, the unlisted ones being 0:
  :math:`\tilde I = \mathrm{sgn}(I)(|I| - \min)/(\max - \min)` with :math:`\max` the largest
  listed :math:`|I|` and :math:`\min = 0` unless the listed interactions cover every one of the
  :math:`2(2^n-1)` (only possible for small n), when it is their smallest :math:`|I|` — exactly
  the exact normalisation when the support is complete.
* **Salient sets, IPS (eq. 3), classes (fig. 3b), order bands (§4.3)** as in
  :mod:`psens.ips.metric`, over the union of the templates' supports: a subset missing from one
  template's support counts as :math:`\tilde I = 0` there. Salient interactions missed by the
  recovery are missing from the union; spurious ones enter it.

With a complete support (every subset listed, e.g. :func:`SparseInteractions.from_dense` of the
exact Möbius transform) :func:`sparse_ips` equals :func:`psens.ips.ips` of the same
interactions (tested).

Query logs
----------
Every masked prompt scored is kept in an :class:`xarray.Dataset` (``mask[query, var]`` bool,
``v[query]``, coord ``word[var]``; attrs ``approximate = 1``, ``method``, ``budget``, ``seed``,
``n``, ``item``, ``template``, ``model``, and digests of everything a value depends on: the
model's files, the rendered prompt with its shots, options and answer, the mask token and
dtype), written as netCDF after every batch. Run the same call again and the logged answers
are reused (a killed run resumes; a finished one costs no model call; a log whose digests
differ is refused), and :func:`psens.interactions.sparse.fit_queries` re-fits a stored log.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [2] Kang, J. S., Butler, L., Agarwal, A., Erginbas, Y. E., Pedarsani, R., Ramchandran, K.,
   and Yu, B. "SPEX: Scaling Feature Interaction Explanations for LLMs." Proceedings of the
   42nd International Conference on Machine Learning (ICML), 2025. arXiv:2502.13870.
.. [3] Butler, L., Kang, J. S., Agarwal, A., Erginbas, Y. E., Yu, B., and Ramchandran, K.
   "ProxySPEX: Inference-Efficient Interpretability via Sparse Feature Interactions in
   LLMs." arXiv:2505.17495, 2025.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from psens._validation import fail
from psens.interactions.sparse import (
    MAX_SPARSE_PLAYERS,
    Recovery,
    SparseAndOr,
    SparseInteractions,
    as_bits,
    recover,
    restricted_and_or,
)
from psens.ips.metric import (
    CLASSES,
    ORDER_LEVELS,
    _check_normalization,
    _check_tau,
    _salient_union,
    _union_ips,
    class_masks,
    nanmean,
    order_band,
    template_pairs,
)
from psens.settings import DEFAULT_NORMALIZATION, DEFAULT_TAU

__all__ = [
    "SparseSample",
    "content_words",
    "log_game",
    "normalize_sparse",
    "open_log",
    "recall_at_k",
    "sparse_classes",
    "sparse_ips",
    "sparse_ips_pairs",
    "sparse_sample",
]

Game = SparseInteractions | SparseAndOr
Split = Literal["and", "restricted"]


# ----------------------------------------------------------------------------- normalisation


def _parts(game: Game) -> tuple[int, list[tuple[str, SparseInteractions]]]:
    if isinstance(game, SparseAndOr):
        return game.n, [("and", game.I_and), ("or", game.I_or)]
    if isinstance(game, SparseInteractions):
        if game.kind != "and":
            fail("sparse_ips", "an OR-only game was given", "Pass AND or SparseAndOr games")
        return game.n, [("and", game)]
    fail(
        "sparse_ips",
        f"a game is a {type(game).__name__}",
        "Pass SparseInteractions (AND) or SparseAndOr per template",
        TypeError,
    )
    raise AssertionError  # unreachable


def normalize_sparse(
    game: Game, normalization: str = DEFAULT_NORMALIZATION
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    r"""Normalised interactions :math:`\tilde I` of one game on its support (§3.2).

    Returns ``{"and": (subsets, Ĩ), "or": (subsets, Ĩ)}`` over the listed subsets (``"or"``
    empty for an AND-only game). ``normalization="nonempty"`` (default): the non-empty
    subsets, normalised over all :math:`2(2^n-1)` AND and OR interactions with
    :math:`S \neq \emptyset`; ``"all"``: over all :math:`2^{n+1}`, the empty set listed and
    normalised like the rest (as :func:`psens.ips.normalize`). Unlisted interactions are 0:
    ``min`` is 0 unless every one is listed.

    Examples
    --------
    >>> g = SparseInteractions(3, [0, 1, 6], [5.0, 2.0, -4.0])
    >>> normalize_sparse(g)["and"][1].tolist()  # min = 0: most subsets are unlisted
    [0.5, -1.0]
    >>> normalize_sparse(g, "all")["and"][1].tolist()  # the empty set (5.0) is the max
    [1.0, 0.4, -0.8]
    """
    n, parts = _parts(game)
    every = _check_normalization(normalization, "sparse_ips") == "all"
    keys, vals = {}, {}
    for kind, inter in parts:
        keep = np.ones(inter.subsets.size, bool) if every else inter.subsets != 0
        keys[kind], vals[kind] = inter.subsets[keep], inter.values[keep]
    keys.setdefault("or", np.zeros(0, np.uint64))
    vals.setdefault("or", np.zeros(0))
    mags = np.abs(np.concatenate([vals["and"], vals["or"]]))
    total = 2 * 2**n if every else 2 * (2**n - 1)
    complete = mags.size == total
    lo = float(mags.min()) if complete and mags.size else 0.0
    hi = float(mags.max()) if mags.size else 0.0
    scale = hi - lo if hi - lo > 0 else np.inf
    return {k: (keys[k], np.sign(vals[k]) * (np.abs(vals[k]) - lo) / scale) for k in keys}


def _lookup(keys: np.ndarray, vals: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Values at ``query`` (0 where a key is not listed)."""
    if keys.size == 0:
        return np.zeros(query.size)
    pos = np.clip(np.searchsorted(keys, query), 0, keys.size - 1)
    hit = keys[pos] == query
    return np.where(hit, vals[pos], 0.0)


def _check_games(games: Sequence[Game], where: str) -> int:
    if len(games) < 2:
        fail(where, f"only {len(games)} template game", "Pass one game per template (>= 2)")
    ns = {_parts(g)[0] for g in games}
    if len(ns) != 1:
        fail(where, f"the games have different n ({sorted(ns)})", "Use the same words")
    return ns.pop()


def _check_order(order, where: str) -> str | None:
    if order in (None, "all"):
        return None
    if order not in ORDER_LEVELS:
        fail(where, f"order={order!r} is unknown", f"Use one of {ORDER_LEVELS} or None")
    return order


def _pairs_of(games: Sequence[Game], tau: float, order: str | None, where: str, normalization: str):
    """The normalised effects ``a, b`` (``[pair, M]``, pairs in
    :func:`psens.ips.template_pairs` order) over the union of the templates' listed subsets
    (AND then OR; an unlisted subset is 0), and ``keep[M]``: the subsets of ``order`` (an
    order band never holds the empty set) — the inputs of the dense kernel
    (:func:`psens.ips.metric._union_ips`), after checking the inputs. The loop runs over
    templates (a handful), never over subsets."""
    _check_tau(tau, where)
    order = _check_order(order, where)
    n = _check_games(games, where)
    normed = [normalize_sparse(g, normalization) for g in games]
    rows, keys = [], []
    for kind in ("and", "or"):
        union = np.unique(np.concatenate([nm[kind][0] for nm in normed]))
        rows.append(np.stack([_lookup(*nm[kind], union) for nm in normed]))
        keys.append(union)
    x, key = np.concatenate(rows, axis=-1), np.concatenate(keys)  # [T, M], [M]
    keep = np.ones(key.size, bool)
    if order is not None:
        from psens.interactions.sparse import popcount

        keep = (order_band(popcount(key), n) == order) & (key != 0)
    i, j = template_pairs(len(games))
    return x[i], x[j], keep


def sparse_ips_pairs(
    games: Sequence[Game],
    tau: float = DEFAULT_TAU,
    order: str | None = None,
    normalization: str = DEFAULT_NORMALIZATION,
):
    r"""IPS of every unordered template pair (NaN: no salient interaction), in
    :func:`psens.ips.template_pairs` order.

    .. math::
        \mathrm{IPS}_{T,\hat T} = \frac{1}{|\Omega_{union}|}\sum_{S\in\Omega_{union}}
        \frac{|\tilde I_S(T) - \tilde I_S(\hat T)|}{(|\tilde I_S(T)| + |\tilde I_S(\hat T)|)/2}

    over the union of the recovered supports (see the module docstring), with the
    min-max normalisation ``normalization`` spans (:func:`normalize_sparse`; ``"all"``
    counts the empty set like any subset when no ``order`` is given).
    """
    a, b, keep = _pairs_of(games, tau, order, "sparse_ips", normalization)
    return _union_ips(a, b, keep[None, :], [tau])[:, 0, 0]


def sparse_ips(
    games: Sequence[Game],
    tau: float = DEFAULT_TAU,
    order: str | None = None,
    normalization: str = DEFAULT_NORMALIZATION,
) -> float:
    """IPS of one sample (eq. 3) from sparse interactions: the mean over template pairs.

    ``games`` holds one game per template (:class:`SparseInteractions` AND-only, or
    :class:`SparseAndOr`), all over the same n words. NaN when no pair has a salient
    interaction.

    Examples
    --------
    >>> g = SparseInteractions(4, [0, 1, 3], [0.0, 1.0, 0.5])
    >>> h = SparseInteractions(4, [0, 1, 3], [0.0, 1.0, -0.5])
    >>> round(sparse_ips([g, h]), 3)  # {0}: same; {0, 1}: opposite sign (2): mean 1
    1.0
    """
    return float(nanmean(sparse_ips_pairs(games, tau, order, normalization)))


def sparse_classes(
    games: Sequence[Game],
    tau: float = DEFAULT_TAU,
    order: str | None = None,
    normalization: str = DEFAULT_NORMALIZATION,
) -> np.ndarray:
    """Counts ``[pair, 3]`` of the classes of :data:`psens.ips.CLASSES` (fig. 3b) over the
    union of both salient sets, as :func:`psens.ips.interaction_classes`."""
    a, b, keep = _pairs_of(games, tau, order, "sparse_classes", normalization)
    union = _salient_union(a, b, keep, tau)
    counts = [(mask & union).sum(axis=-1) for mask in class_masks(a, b)]
    return np.stack(counts, axis=-1).astype(np.int64).reshape(-1, len(CLASSES))


def recall_at_k(exact: SparseInteractions, approx: SparseInteractions, k: int = 10) -> float:
    """Share of the exact ``k`` strongest non-empty AND interactions that are also among the
    ``k`` strongest recovered ones (k capped by the exact support)."""
    e = exact.top(k).subsets
    e = e[e != 0]
    a = approx.top(max(len(e), 1)).subsets
    if e.size == 0:
        return float("nan")
    return float(np.isin(e, a[a != 0]).mean())


# ----------------------------------------------------------------------------- query logs


def _log_dataset(bits, values, words, attrs):
    import xarray as xr

    return xr.Dataset(
        {"mask": (("query", "var"), np.asarray(bits, bool)), "v": (("query",), values)},
        coords={"word": (("var",), np.asarray([str(w) for w in words], dtype=object))},
        attrs=attrs,
    )


def _write_log(ds, path: Path) -> None:
    tmp = path.with_name(path.name + ".writing")
    out = ds.copy()
    out["word"] = out["word"].astype(str)
    out.to_netcdf(tmp, engine="h5netcdf")
    os.replace(tmp, path)


def open_log(path: str | os.PathLike):
    """A query log (:func:`log_game`) as an :class:`xarray.Dataset` (loaded); a file with a
    dataset stored externally or virtual is refused before any value is read
    (:func:`psens.store.schema.check_netcdf_storage`)."""
    import xarray as xr

    from psens.store.schema import check_netcdf_storage

    p = Path(path)
    if not p.is_file():
        fail("psens.ips.sparse.open_log", f"{p} is not a query log", "Check the path")
    check_netcdf_storage(p, "psens.ips.sparse.open_log")
    with xr.open_dataset(p, engine="h5netcdf") as ds:
        ds = ds.load()
    if ds.attrs.get("psens_schema") != "psens.sparse_queries":
        fail("psens.ips.sparse.open_log", f"{p} is not a psens query log", "Check the path")
    ds["mask"] = ds["mask"].astype(bool)
    return ds


#: The attrs of a query log that name what its values depend on (digests, see
#: :func:`_log_identity`), and what each covers, for the refusal message.
IDENTITY_ATTRS = {
    "identity_model": "the model (its files, or the served model and tokenizer)",
    "identity_prompt": "the prompt (text with shots and options, token ids, answer)",
    "identity_scoring": "the scoring (mask token, dtype, masking and open-answer settings)",
}


def _hash(obj: Any) -> str:
    import hashlib
    import json

    text = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _model_identity(scorer) -> Any:
    """What a scorer's numbers depend on beyond its inputs: the model files'
    digests (:func:`psens.models.loading.model_fingerprint`; a served model: its name,
    served model and tokenizer files), else the model's config."""
    info = dict(getattr(scorer, "info", None) or {})
    spec = getattr(scorer, "spec", None)
    try:
        if info.get("kind") == "served" and spec is not None:
            from psens.models.loading import model_fingerprint
            from psens.models.served import IDENTITY_KEYS

            fp = model_fingerprint(spec.tokenizer)  # its files: the weights are the server's
            return {**{k: getattr(spec, k) for k in IDENTITY_KEYS}, "files": fp.get("files")}
        if info.get("source"):
            from psens.models.loading import model_fingerprint

            fp = model_fingerprint(info["source"])
            return {k: fp.get(k) for k in ("kind", "files", "revision")}
    except Exception:  # a source that cannot be read again: its name stands for it
        return {"source": info.get("source"), "name": getattr(scorer, "name", None)}
    config = getattr(getattr(scorer, "model", None), "config", None)
    return {
        "scorer": type(scorer).__name__,
        "name": getattr(scorer, "name", None),
        "config": config.to_dict() if hasattr(config, "to_dict") else None,
    }


def _log_identity(scorer, item, template, words, shots) -> dict[str, str]:
    """Digests of everything a logged value depends on (:data:`IDENTITY_ATTRS`): the model,
    the rendered prompt (its text with shots and options, the token ids, where each word
    is, the answer) and the scoring settings (mask token, dtype, ...)."""
    fields = ("question", "options", "answer", "context", "passage", "answers", "task_type")
    enc = scorer.encode(item, template, shots=shots, variables=words)
    prompt = {
        "items": [{f: getattr(it, f, None) for f in fields} for it in (item, *shots)],
        "words": [[str(w), getattr(w, "field", None), getattr(w, "start", None)] for w in words],
    }
    if enc is not None:  # the rendered prompt (text with shots and options) and its tokens
        prompt["text"] = getattr(enc, "text", None)
        prompt["ids"] = np.asarray(getattr(enc, "ids", [])).tolist()
        prompt["var_tokens"] = [np.asarray(p).tolist() for p in getattr(enc, "var_tokens", [])]
        prompt["target"] = getattr(enc, "target_id", None)
        prompt["options"] = getattr(enc, "option_ids", None)
    mask = getattr(scorer, "mask", None)
    scoring = {
        "mask": None if mask is None else [getattr(mask, "token", None), getattr(mask, "id", None)],
        "dtype": str(getattr(scorer, "dtype", None)),
        **{
            k: getattr(scorer, k, None)
            for k in ("one_token_per_word", "open_tokens", "open_reduce")
        },
    }
    return {
        "identity_model": _hash(_model_identity(scorer)),
        "identity_prompt": _hash(prompt),
        "identity_scoring": _hash(scoring),
    }


class _LoggedGame:
    """v of masked prompts through a scorer, answered from the log where it can be."""

    def __init__(self, scorer, item, template, words, shots, path: Path | None, attrs) -> None:
        self.scorer, self.item, self.template = scorer, item, template
        self.words, self.shots, self.path, self.attrs = words, shots, path, attrs
        self.known: dict[bytes, float] = {}
        self.bits: list[np.ndarray] = []
        self.values: list[float] = []
        self.scored = 0
        self.seconds = 0.0
        if path is not None and path.exists():
            old = open_log(path)
            same = [old.attrs.get(k) == attrs.get(k) for k in ("item", "template", "model", "n")]
            if not all(same) or [str(w) for w in old["word"].values] != [str(w) for w in words]:
                fail(
                    "psens.ips.sparse",
                    f"the query log {path} belongs to another item, template, model or words",
                    "Use another store folder or delete that file",
                )
            changed = [what for k, what in IDENTITY_ATTRS.items() if old.attrs.get(k) != attrs[k]]
            if changed:
                fail(
                    "psens.ips.sparse",
                    f"the query log {path} was written for other inputs: {'; '.join(changed)} "
                    "changed (or the log is from an older psens)",
                    "Use another store folder or delete that file; its values would be wrong",
                )
            for r, val in zip(old["mask"].values, old["v"].values, strict=True):
                self._keep(r, float(val))

    def _keep(self, r: np.ndarray, val: float) -> None:
        key = r.tobytes()
        if key not in self.known:
            self.known[key] = val
            self.bits.append(r)
            self.values.append(val)

    def __call__(self, bits: np.ndarray) -> np.ndarray:
        bits = np.asarray(bits, bool)
        todo = [r for r in bits if r.tobytes() not in self.known]
        if todo:
            t0 = time.perf_counter()
            got = self.scorer.value(
                self.item,
                self.template,
                np.stack(todo),
                shots=self.shots,
                variables=self.words,
                progress=False,
            )
            self.seconds += time.perf_counter() - t0
            self.scored += len(todo)
            for r, val in zip(todo, got.tolist(), strict=True):
                self._keep(r, val)
            if self.path is not None:
                _write_log(_log_dataset(self.bits, self.values, self.words, self.attrs), self.path)
        return np.asarray([self.known[r.tobytes()] for r in bits])


def log_game(scorer, item, template, words, *, path=None, shots=(), attrs=None) -> _LoggedGame:
    """The value function of one (item, template) as a game on boolean masks ``[m, n]``,
    every answer kept in a query log at ``path`` (netCDF; reused when the call is repeated)."""
    base = {
        "psens_schema": "psens.sparse_queries",
        "approximate": 1,
        "item": str(item.id),
        "template": str(getattr(template, "name", template)),
        "model": str(getattr(scorer, "name", "model")),
        "n": len(words),
        **_log_identity(scorer, item, template, list(words), tuple(shots)),
    }
    base.update(attrs or {})
    return _LoggedGame(
        scorer,
        item,
        template,
        list(words),
        tuple(shots),
        None if path is None else Path(path),
        base,
    )


# ----------------------------------------------------------------------------- one sample


def content_words(item, *, max_words: int = MAX_SPARSE_PLAYERS) -> list:
    """All content words of ``item`` (phrases merged, stop words and punctuation dropped; no
    selection), as :func:`psens.prompts.variables` with ``content_only=True``.

    Refuses an item with more than ``max_words`` content words (no silent sampling)."""
    from psens.prompts import variables

    cap = min(max_words, MAX_SPARSE_PLAYERS)
    vs = variables(item, n_max=cap + 1, content_only=True, max_variables=cap + 1)
    if len(vs) > cap:
        fail(
            "psens.ips.sparse.content_words",
            f"item {item.id!r} has more than {cap} content words",
            "Pass a shorter item or choose the words yourself (variables=...)",
        )
    return vs


@dataclass
class SparseSample:
    """Sparse interactions of one item under several templates (:func:`sparse_sample`)."""

    item: str
    words: list[str]
    templates: list[str]
    recoveries: dict[str, Recovery]
    games: dict[str, Game]
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.words)

    def ips(self, tau: float = DEFAULT_TAU, order: str | None = None) -> float:
        """:func:`sparse_ips` over the templates."""
        return sparse_ips([self.games[t] for t in self.templates], tau, order)

    def ips_by_order(self, tau: float = DEFAULT_TAU) -> dict[str, float]:
        """IPS overall and per order band (``all``, ``low``, ``mid``, ``high``)."""
        return {o: self.ips(tau, None if o == "all" else o) for o in ORDER_LEVELS}

    def top(self, template: str, k: int = 10):
        r"""The ``k`` strongest recovered AND interactions under ``template`` as a DataFrame
        (``subset`` words, ``size``, ``value``); the empty set (the bias
        :math:`I(\emptyset) = v(\emptyset)`) is not an interaction and is left out."""
        import pandas as pd

        inter = self.recoveries[template].interactions.top(k)
        keep = inter.subsets != 0
        bits = as_bits(inter.subsets[keep], self.n)
        rows = [
            {
                "words": " ∧ ".join(w for w, b in zip(self.words, r, strict=True) if b),
                "size": int(r.sum()),
                "value": float(v),
            }
            for r, v in zip(bits, inter.values[keep], strict=True)
        ]
        return pd.DataFrame(rows).sort_values("value", key=np.abs, ascending=False)


def sparse_sample(
    scorer,
    item,
    templates: Sequence[str] = ("ips1", "ips2"),
    *,
    budget: int,
    words: Sequence | None = None,
    method: str = "lasso",
    split: Split = "and",
    store: str | os.PathLike | None = None,
    shots: Sequence = (),
    seed: int = 0,
    degree: int | None = None,
    batch: int = 256,
) -> SparseSample:
    """Recover the salient AND interactions of one item under each template from ``budget``
    masked prompts per template (n up to 64 words), ready for :func:`sparse_ips`.

    Parameters
    ----------
    scorer : psens.models.Scorer
    item : psens.datasets.Item
    templates : sequence of str
        At least two for IPS (one is enough to look at the interactions).
    budget : int
        Masked prompts per template (≥ 8, ≤ 2**n).
    words : sequence of Variable, optional
        Default: all content words (:func:`content_words`).
    method : {"lasso", "spex", "proxyspex"}
        :func:`psens.interactions.sparse.recover`.
    split : {"and", "restricted"}
        ``"and"``: the Möbius interactions (no OR part); ``"restricted"``: the eq. 12 split
        restricted to the downward closure of the support (see the module docstring).
    store : folder, optional
        Where the query logs go, one netCDF per template (``<item>__<template>.nc``); a
        repeated call reuses them (resume, re-analysis).

    Returns
    -------
    SparseSample
    """
    where = "psens.ips.sparse.sparse_sample"
    words = content_words(item) if words is None else list(words)
    n = len(words)
    if n == 0 or n > MAX_SPARSE_PLAYERS:
        fail(where, f"{n} words", f"Use 1 to {MAX_SPARSE_PLAYERS} words")
    if split not in ("and", "restricted"):
        fail(where, f"split={split!r} is unknown", "Use 'and' or 'restricted'")
    if isinstance(templates, str):
        templates = [templates]
    from psens._validation import check_positive_int
    from psens.interactions.sparse import MAX_FEATURES, check_budget, check_memory, check_seed

    budget = check_budget(budget, n, where)
    seed = check_seed(seed, where)
    if degree is not None:
        degree = check_positive_int(degree, where, "degree")
    check_memory(budget, n, method, degree, MAX_FEATURES, where)  # before any folder or call
    folder = None if store is None else Path(store)
    if folder is not None:
        if folder.exists() and not folder.is_dir():
            fail(where, f"store {folder} is a file", "Pass a folder")
        folder.mkdir(parents=True, exist_ok=True)
    for t in templates:  # refused before any model call: unknown template, too long, ...
        scorer.encode(item, t, shots=shots, variables=words)
    recs: dict[str, Recovery] = {}
    games: dict[str, Game] = {}
    scored, seconds = 0, 0.0
    for t in templates:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{item.id}__{t}")
        path = None if folder is None else folder / f"{safe}.nc"
        attrs = {"method": method, "budget": budget, "seed": seed}
        game = log_game(scorer, item, t, words, path=path, shots=shots, attrs=attrs)
        rec = recover(game, n, budget, method=method, seed=seed, degree=degree, batch=batch)
        recs[t] = rec
        games[t] = rec.interactions if split == "and" else restricted_and_or(rec.interactions)
        scored += game.scored
        seconds += game.seconds
    return SparseSample(
        item=str(item.id),
        words=[str(w) for w in words],
        templates=list(templates),
        recoveries=recs,
        games=games,
        attrs={
            "approximate": True,
            "method": method,
            "budget": budget,
            "split": split,
            "scored": scored,
            "model_seconds": seconds,
        },
    )
