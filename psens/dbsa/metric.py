r"""DBSA end to end: collect responses and embeddings, then score tokens (paper algorithm 1).

Two steps, so that every analysis (metric, statistic, number of samples, ablations) reruns
on stored embeddings without calling a model again:

1. :func:`collect` — tokenise the input, find ``k`` neighbours per unique token, sample
   ``n`` responses to the original prompt and ``m`` to every perturbed prompt (through a
   cached sampler), embed them, and return an :class:`xarray.Dataset` holding the
   embeddings (and responses).
2. :func:`analyse` — energy distance (or an alternative statistic) and permutation p-value
   for every (position, neighbour) pair, the averages of algorithm 1, and a valid combined
   p-value per token; returns the Dataset with the scores added.

:func:`dbsa` runs both.

Dataset layout
--------------
dims: ``position`` (every token of the input, in order), ``neighbour`` (slot ``0..k-1``),
``sample`` (m perturbed responses), ``original_sample`` (n), ``dim`` (embedding size) and,
after :func:`analyse`, ``token`` (the unique tested tokens, first appearance order).

=============================== ============================ =====================================
variable                        dims                         meaning
=============================== ============================ =====================================
``text_token``, ``start``,      position                     the token, its character span, kind
``end``, ``kind``
``tested``                      position                     whether the position was perturbed
``neighbour_text``              position, neighbour          replacement word ("" = no slot)
``embedding_original``          original_sample, dim         Φ (float32)
``embedding_perturbed``         position, neighbour, sample, Φ' per pair (NaN where untested)
                                dim
``response_original`` /         (as above, without dim)      the sampled texts (optional)
``response_perturbed``
``statistic``                   position, neighbour          :math:`E^{(w'_i)}_{wi}` (line 13)
``p_value_pair``                position, neighbour          :math:`p^{(w'_i)}_{wi}` (line 14)
``statistic_position``          position                     :math:`\bar E_{wi}` (line 16)
``p_value_position``            position                     :math:`\bar p_{wi}` (line 16)
``effect_size``                 token                        :math:`E_w` (line 18), table 3 ω
``p_value_mean``                token                        :math:`p_w` (line 18, paper)
``p_value_combined``            token                        permutation test of :math:`E_w`
``p_value``                     token                        the one chosen by ``combine``
``score``                       token                        ``E_w`` min–max normalised to [0, 1]
``score_position``              position                     ``score`` of the token at a position
``n_positions``, ``n_pairs``    token                        ``|I_w|`` and number of pairs
=============================== ============================ =====================================

Decisions (the paper is silent or inconsistent)
-----------------------------------------------
* **One original sample.** The ``n`` original responses are drawn once and shared by all
  pairs; algorithm 1 line 8 redraws them per neighbour. Sharing costs ``n + L·m`` instead of
  ``L·(n + m)`` generations; each pair's test stays valid.
* **Averaging p-values is not a test.** Line 18 averages p-values, which is kept as
  ``p_value_mean`` for comparison. ``p_value_combined`` is a permutation test of the
  averaged statistic ``E_w`` itself: all responses of the token's pool (the original ones and
  those of every pair of ``w``) are permuted jointly — valid under the token-level null that
  no replacement of ``w`` changes the output distribution, and it accounts for the shared
  original sample. It is the default ``p_value``.
* **Seeds.** Pair ``(i, w')`` is tested with permutations seeded by ``(seed, i, w')`` and the
  combined test by ``(seed, w)``, so results do not depend on which other tokens are tested.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.

Algorithm 1 (appendix D.1): per token and neighbour, the energy distance between the answer
embeddings (§4) and its permutation p-value (appendix B.5); averaged over neighbours and
positions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._validation import check_in_interval, check_positive_int, fail
from .distances import (
    _check_statistic,
    null_statistics,
    p_value,
    pairwise_distances,
    permutation_indices,
    resolve_metric,
    statistic_from_distances,
)
from .embeddings import load_embedder
from .neighbours import EmbeddingNeighbours, dictionary_neighbours, rule_neighbours
from .sampling import CachedSampler, derive_seed
from .tokens import Token, perturb, tokenize, unique_tokens

__all__ = ["analyse", "collect", "dbsa", "resolve_neighbours", "select_tokens", "top_k"]

NeighbourSource = Mapping[str, Sequence[str]] | Callable[..., Mapping[str, Sequence[str]]] | str


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("psens")
    except Exception:  # pragma: no cover
        return "unknown"


def select_tokens(tokens: list[Token], select: Any = "all") -> list[str]:
    """Unique token texts to test.

    ``"all"``, ``"words"`` (words and numbers), a list of tokens, or a predicate on Token.
    """
    uniq = unique_tokens(tokens)
    first = {t.text: t for t in tokens}
    if select is None or select == "all":
        return list(uniq)
    if select == "words":
        return [w for w in uniq if first[w].kind != "punct"]
    if callable(select):
        return [w for w in uniq if select(first[w])]
    chosen = list(dict.fromkeys(select))
    unknown = [w for w in chosen if w not in uniq]
    if unknown:
        fail(
            "select_tokens",
            f"{unknown} are not tokens of the text",
            f"Choose among {list(uniq)[:20]}",
        )
    return chosen


def resolve_neighbours(
    words: Sequence[str], source: NeighbourSource, k: int, *, rules: bool = True
) -> dict[str, list[str]]:
    """Neighbours of each word.

    From a dictionary, a callable ``(words, k) -> dict`` or ``"embedding"``.

    With ``rules``, numbers and punctuation without neighbours from ``source`` get the
    rule-based ones (:func:`~psens.dbsa.neighbours.rule_neighbours`).
    """
    if isinstance(source, str):
        if source != "embedding":
            fail(
                "resolve_neighbours",
                f"unknown neighbour source {source!r}",
                'Pass "embedding", a dict or a callable',
            )
        source = EmbeddingNeighbours()
    if isinstance(source, Mapping):
        found = dictionary_neighbours(words, source, k)
    elif callable(source):
        asked = [w for w in words if not (rules and rule_neighbours(w, k))]
        found = {w: list(v)[:k] for w, v in dict(source(asked, k)).items()} if asked else {}
    else:
        fail(
            "resolve_neighbours",
            f"neighbours is a {type(source).__name__}",
            "Pass a dict, a callable or 'embedding'",
            TypeError,
        )
    out: dict[str, list[str]] = {}
    for w in words:
        got = [c for c in found.get(w, []) if c != w]
        if not got and rules:
            got = rule_neighbours(w, k)
        out[w] = list(dict.fromkeys(got))[:k]
    return out


def collect(
    text: str,
    sampler: CachedSampler | Callable[..., list[str]],
    neighbours: NeighbourSource = "embedding",
    *,
    embedder: Any = None,
    n: int = 40,
    m: int | None = None,
    k: int = 3,
    seed: int = 0,
    select: Any = "all",
    on_missing: str = "raise",
    keep_responses: bool = True,
    model: str | None = None,
    progress: bool = False,
) -> xr.Dataset:
    """Sample and embed responses for the original and every perturbed prompt (lines 1–9).

    Parameters
    ----------
    text : str
        The input prompt ``x``.
    sampler : CachedSampler or callable
        A :class:`~psens.dbsa.sampling.CachedSampler` or a bare backend
        ``sample(prompt, n, *, temperature, max_tokens, seed)`` (wrapped in an in-memory cache).
    neighbours : dict, callable or "embedding", default "embedding"
        The neighbour source (see :func:`resolve_neighbours`).
    embedder : optional
        Response embedder (see :func:`~psens.dbsa.embeddings.load_embedder`), default MiniLM.
    n, m : int
        Responses per original / perturbed prompt (``m`` defaults to ``n``); both ≥ 2.
    k : int, default 3
        Neighbours per token.
    seed : int
        Sampling seed (part of the cache key).
    select : "all", "words", list or callable
        Which unique tokens to perturb (see :func:`select_tokens`).
    on_missing : {"raise", "skip"}
        What to do with a selected token that has no neighbour.
    keep_responses : bool, default True
        Store the response texts in the Dataset.
    model : str, optional
        Model name recorded in attrs (default: the sampler's ``model``).
    """
    where = "dbsa.collect"
    n = check_positive_int(n, where, "n", minimum=2)
    m = n if m is None else check_positive_int(m, where, "m", minimum=2)
    k = check_positive_int(k, where, "k")
    if on_missing not in ("raise", "skip"):
        fail(where, f"on_missing={on_missing!r}", 'Use "raise" or "skip"')
    tokens = tokenize(text)
    words = select_tokens(tokens, select)
    if not words:
        fail(
            where,
            "no token is selected for perturbation",
            "Select at least one token (select='all')",
        )
    nb = resolve_neighbours(words, neighbours, k)
    missing = [w for w in words if not nb.get(w)]
    if missing and on_missing == "raise":
        fail(
            where,
            f"no neighbours for the token(s) {missing}",
            "Add them to the neighbour dictionary, choose another neighbour source, "
            "leave them out with select=..., or pass on_missing='skip'",
        )
    nb = {w: v for w, v in nb.items() if v}
    if not nb:
        fail(
            where, "no selected token has a neighbour", "Provide neighbours for at least one token"
        )
    if not isinstance(sampler, CachedSampler):
        sampler = CachedSampler(sampler, model=model)
    model_name = model or sampler.model or "unnamed"
    emb = load_embedder(embedder)

    positions = [t.index for t in tokens if t.text in nb]
    k_max = max(len(v) for v in nb.values())
    L = len(tokens)
    neighbour_text = np.full((L, k_max), "", dtype=object)
    prompts: list[str] = []
    slots: list[tuple[int, int]] = []
    for i in positions:
        for j, c in enumerate(nb[tokens[i].text]):
            neighbour_text[i, j] = c
            prompts.append(perturb(text, tokens, i, c))
            slots.append((i, j))

    original = sampler(text, n, seed)
    perturbed = sampler.sample_many(prompts, m, seed, progress=progress)
    phi = emb(original)
    d = phi.shape[1]
    phi_p = emb([r for rs in perturbed for r in rs]).reshape(len(prompts), m, d)
    emb_p = np.full((L, k_max, m, d), np.nan, dtype=np.float32)
    rows = np.array([s[0] for s in slots])
    cols = np.array([s[1] for s in slots])
    emb_p[rows, cols] = phi_p
    tested = np.zeros(L, dtype=bool)
    tested[positions] = True

    ds = xr.Dataset(
        {
            "embedding_original": (("original_sample", "dim"), phi.astype(np.float32)),
            "embedding_perturbed": (("position", "neighbour", "sample", "dim"), emb_p),
        },
        coords={
            "position": np.arange(L),
            "neighbour": np.arange(k_max),
            "sample": np.arange(m),
            "original_sample": np.arange(n),
            "text_token": ("position", np.array([t.text for t in tokens], dtype=object)),
            "start": ("position", np.array([t.start for t in tokens])),
            "end": ("position", np.array([t.end for t in tokens])),
            "kind": ("position", np.array([t.kind for t in tokens], dtype=object)),
            "tested": ("position", tested),
            "neighbour_text": (("position", "neighbour"), neighbour_text),
        },
        attrs={
            "method": "DBSA",
            "text": text,
            "model": model_name,
            "embedder": emb.name,
            "n": n,
            "m": m,
            "k": k,
            "seed": seed,
            "temperature": sampler.temperature,
            "max_tokens": sampler.max_tokens,
            "neighbour_source": type(neighbours).__name__
            if not isinstance(neighbours, str)
            else neighbours,
            "psens_version": _version(),
        },
    )
    if keep_responses:
        resp_p = np.full((L, k_max, m), "", dtype=object)
        for (i, j), rs in zip(slots, perturbed, strict=True):
            resp_p[i, j] = rs
        ds["response_original"] = ("original_sample", np.array(original, dtype=object))
        ds["response_perturbed"] = (("position", "neighbour", "sample"), resp_p)
    return ds


def _pair_layout(ds: xr.Dataset) -> dict[str, list[tuple[int, int]]]:
    """``{token: [(position, slot), ...]}`` for every tested pair, in position order."""
    nt = ds["neighbour_text"].values
    texts = ds["text_token"].values
    out: dict[str, list[tuple[int, int]]] = {}
    for i in np.flatnonzero(ds["tested"].values):
        for j in range(nt.shape[1]):
            if nt[i, j] != "":
                out.setdefault(str(texts[i]), []).append((int(i), j))
    return out


def analyse(
    ds: xr.Dataset,
    *,
    metric: str = "cosine",
    statistic: str = "energy",
    permutations: int = 500,
    seed: int = 0,
    combine: str = "permutation",
    n: int | None = None,
    m: int | None = None,
    neighbours: int | None = None,
) -> xr.Dataset:
    r"""Score every tested token of a collected Dataset (algorithm 1 lines 10–18).

    For each pair (position ``i``, neighbour ``w'``): the statistic ``E`` between the original
    embeddings Φ and the pair's Φ' (energy distance by default, see
    :func:`~psens.dbsa.distances.energy_distance`) and its permutation p-value
    ``(k + 1)/(P + 1)``. Then

    .. math::

        \bar E_{wi} = \frac{1}{k}\sum_{w'} E^{(w')}_{wi},\qquad
        E_w = \frac{1}{|\mathcal I_w|}\sum_{i\in\mathcal I_w} \bar E_{wi}

    and the same averages of p-values (``p_value_mean``), plus ``p_value_combined``, a joint
    permutation test of ``E_w`` (see the module notes).

    Parameters
    ----------
    ds : Dataset
        Output of :func:`collect` (or a Dataset with the same embedding variables).
    metric : {"cosine", "l1", "l2"}, default "cosine"
    statistic : {"energy", "emd", "mean"}, default "energy"
    permutations : int, default 500
    seed : int, default 0
    combine : {"permutation", "mean"}, default "permutation"
        Which token p-value becomes ``p_value``.
    n, m, neighbours : int, optional
        Use only the first ``n`` original / ``m`` perturbed responses / ``neighbours`` slots
        (for the Monte Carlo and k ablations).

    Returns
    -------
    Dataset
        ``ds`` with the score variables added (see the module table) and the analysis
        settings in ``attrs``.
    """
    where = "dbsa.analyse"
    metric = resolve_metric(metric, where)
    _check_statistic(statistic, where)
    permutations = check_positive_int(permutations, where, "permutations")
    if combine not in ("permutation", "mean"):
        fail(where, f"combine={combine!r}", 'Use "permutation" (valid test) or "mean" (paper)')
    for var in ("embedding_original", "embedding_perturbed", "neighbour_text", "tested"):
        if var not in ds.variables:
            fail(where, f"the Dataset has no {var!r}", "Pass the output of psens.dbsa.collect")
    ds = ds.drop_vars(
        [v for v in _SCORE_VARS if v in ds.variables] + (["token"] if "token" in ds.dims else [])
    )
    sub = ds
    if n is not None:
        sub = sub.isel(original_sample=slice(0, check_positive_int(n, where, "n", minimum=2)))
    if m is not None:
        sub = sub.isel(sample=slice(0, check_positive_int(m, where, "m", minimum=2)))
    if neighbours is not None:
        sub = sub.isel(neighbour=slice(0, check_positive_int(neighbours, where, "neighbours")))
    X = sub["embedding_original"].values.astype(float)
    Yall = sub["embedding_perturbed"].values
    n_, m_ = X.shape[0], Yall.shape[2]
    if n_ < 2 or m_ < 2:
        fail(
            where,
            f"n={n_} original and m={m_} perturbed responses",
            "Use at least 2 responses per group",
        )
    layout = _pair_layout(sub)
    if not layout:
        fail(where, "no position has a neighbour", "Collect with at least one tested token")

    L, K = sub.sizes["position"], sub.sizes["neighbour"]
    stat = np.full((L, K), np.nan)
    pval = np.full((L, K), np.nan)
    words = list(layout)
    eff = np.empty(len(words))
    p_mean = np.empty(len(words))
    p_comb = np.empty(len(words))
    n_pos = np.empty(len(words), dtype=int)
    n_pairs = np.empty(len(words), dtype=int)
    texts = sub["neighbour_text"].values
    for t, w in enumerate(words):
        pairs = layout[w]
        Lw = len(pairs)
        Ys = [Yall[i, j].astype(float) for i, j in pairs]
        if any(not np.isfinite(y).all() for y in Ys):
            fail(where, f"token {w!r} has missing embeddings", "Re-collect the Dataset")
        Z = np.vstack([X, *Ys])
        D = pairwise_distances(Z, metric)  # one pooled matrix per token
        base = np.concatenate(
            [
                np.broadcast_to(np.arange(n_), (Lw, n_)),
                n_ + m_ * np.arange(Lw)[:, None] + np.arange(m_),
            ],
            axis=1,
        )  # (Lw, n + m) pool indices of each pair
        Dp = D[base[:, :, None], base[:, None, :]]  # (Lw, n + m, n + m)
        perms = np.stack(
            [
                permutation_indices(n_ + m_, permutations, derive_seed(seed, i, str(texts[i, j])))
                for i, j in pairs
            ]
        )
        obs = np.atleast_1d(statistic_from_distances(Dp, n_, statistic))
        null = null_statistics(Dp, n_, perms, statistic)
        tol = 1e-12 * max(1.0, float(np.abs(D).max()))
        pp = np.atleast_1d(p_value(obs, null, atol=tol))
        rows = np.array([i for i, _ in pairs])
        cols = np.array([j for _, j in pairs])
        stat[rows, cols] = obs
        pval[rows, cols] = pp
        # algorithm 1 weights: 1/k_i within a position, then 1/|I_w| over positions
        pos_ids, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
        weights = 1.0 / (counts[inverse] * len(pos_ids))
        eff[t] = weights @ obs
        p_mean[t] = weights @ pp
        n_pos[t], n_pairs[t] = len(pos_ids), Lw
        # combined test: joint permutation of the whole pool of token w
        joint = permutation_indices(len(Z), permutations, derive_seed(seed, "combined", w))
        idx = joint[:, base].transpose(1, 0, 2)  # (Lw, P, n + m)
        null_joint = null_statistics(D, n_, idx, statistic)
        p_comb[t] = p_value(eff[t], weights @ null_joint, atol=tol)

    return _with_scores(
        ds,
        sub,
        words,
        stat,
        pval,
        eff,
        p_mean,
        p_comb,
        n_pos,
        n_pairs,
        combine,
        dict(
            metric=metric,
            statistic=statistic,
            permutations=permutations,
            analysis_seed=seed,
            combine=combine,
            n_used=n_,
            m_used=m_,
            k_used=K,
        ),
    )


_SCORE_VARS = (
    "statistic",
    "p_value_pair",
    "statistic_position",
    "p_value_position",
    "effect_size",
    "p_value_mean",
    "p_value_combined",
    "p_value",
    "score",
    "score_position",
    "n_positions",
    "n_pairs",
    "position_token",
)


def _with_scores(
    ds: xr.Dataset,
    sub: xr.Dataset,
    words: list[str],
    stat: np.ndarray,
    pval: np.ndarray,
    eff: np.ndarray,
    p_mean: np.ndarray,
    p_comb: np.ndarray,
    n_pos: np.ndarray,
    n_pairs: np.ndarray,
    combine: str,
    attrs: dict[str, Any],
) -> xr.Dataset:
    K_full = ds.sizes["neighbour"]
    L = ds.sizes["position"]
    full_stat = np.full((L, K_full), np.nan)
    full_p = np.full((L, K_full), np.nan)
    full_stat[:, : stat.shape[1]] = stat
    full_p[:, : pval.shape[1]] = pval
    with warnings.catch_warnings():  # untested positions are all-NaN rows
        warnings.simplefilter("ignore", RuntimeWarning)
        pos_stat = np.nanmean(full_stat, axis=1)
        pos_p = np.nanmean(full_p, axis=1)
    lo, hi = float(np.min(eff)), float(np.max(eff))
    score = (eff - lo) / (hi - lo) if hi > lo else np.zeros_like(eff)
    texts = [str(t) for t in ds["text_token"].values]
    index = {w: i for i, w in enumerate(words)}
    score_pos = np.array([score[index[t]] if t in index else np.nan for t in texts])
    out = ds.copy()
    out = out.assign_coords(token=np.array(words, dtype=object))
    out["statistic"] = (("position", "neighbour"), full_stat)
    out["p_value_pair"] = (("position", "neighbour"), full_p)
    out["statistic_position"] = ("position", pos_stat)
    out["p_value_position"] = ("position", pos_p)
    out["effect_size"] = ("token", eff)
    out["p_value_mean"] = ("token", p_mean)
    out["p_value_combined"] = ("token", p_comb)
    out["p_value"] = ("token", p_comb if combine == "permutation" else p_mean)
    out["score"] = ("token", score)
    out["score_position"] = ("position", score_pos)
    out["n_positions"] = ("token", n_pos)
    out["n_pairs"] = ("token", n_pairs)
    out.attrs = {**ds.attrs, **attrs}
    return out


def dbsa(
    text: str,
    sampler: CachedSampler | Callable[..., list[str]],
    neighbours: NeighbourSource = "embedding",
    *,
    embedder: Any = None,
    n: int = 40,
    m: int | None = None,
    k: int = 3,
    seed: int = 0,
    select: Any = "all",
    on_missing: str = "raise",
    metric: str = "cosine",
    statistic: str = "energy",
    permutations: int = 500,
    combine: str = "permutation",
    keep_responses: bool = True,
    model: str | None = None,
    progress: bool = False,
) -> xr.Dataset:
    """Distribution-based sensitivity analysis of one prompt (algorithm 1).

    :func:`collect` followed by :func:`analyse`; see both for the parameters.

    Examples
    --------
    >>> import numpy as np
    >>> def backend(prompt, n, *, temperature, max_tokens, seed):
    ...     rng = np.random.default_rng(seed)
    ...     word = "guilty" if "murder" in prompt else "fine"
    ...     return [f"{word} {rng.integers(3)}" for _ in range(n)]
    >>> def embed(texts):
    ...     return np.array([[t.startswith("guilty"), t.endswith("1"), 1.0] for t in texts])
    >>> nb = {"murder": ["theft"], "accused": ["suspected"]}
    >>> ds = dbsa("He is accused of murder", backend, nb,
    ...           embedder=embed, n=10, select=["murder", "accused"], permutations=99)
    >>> top_k(ds, 1)["token"].tolist()
    ['murder']
    """
    ds = collect(
        text,
        sampler,
        neighbours,
        embedder=embedder,
        n=n,
        m=m,
        k=k,
        seed=seed,
        select=select,
        on_missing=on_missing,
        keep_responses=keep_responses,
        model=model,
        progress=progress,
    )
    return analyse(
        ds,
        metric=metric,
        statistic=statistic,
        permutations=permutations,
        seed=seed,
        combine=combine,
    )


def top_k(ds: xr.Dataset, k: int = 5, alpha: float = 0.05, p: str = "p_value") -> pd.DataFrame:
    """The ``k`` tokens with the largest effect size (paper table 3 layout).

    Columns: ``token``, ``effect_size`` (:math:`E_w`), ``p_value`` (the Dataset's chosen token
    p-value, or ``p="p_value_mean"``/``"p_value_combined"``), ``significant`` (``p < alpha``),
    plus ``p_value_mean`` and ``n_positions`` for comparison. ``df.attrs`` records alpha and
    the p-value used. Ties keep the order of appearance.
    """
    k = check_positive_int(k, "top_k", "k")
    alpha = check_in_interval(alpha, "top_k", "alpha", 0.0, 1.0)
    if "effect_size" not in ds.variables:
        fail("top_k", "the Dataset has no scores", "Run psens.dbsa.analyse on it first")
    if p not in ("p_value", "p_value_mean", "p_value_combined"):
        fail("top_k", f"p={p!r}", "Use 'p_value', 'p_value_mean' or 'p_value_combined'")
    df = pd.DataFrame(
        {
            "token": [str(t) for t in ds["token"].values],
            "effect_size": ds["effect_size"].values,
            "p_value": ds[p].values,
            "p_value_mean": ds["p_value_mean"].values,
            "n_positions": ds["n_positions"].values,
        }
    )
    df = (
        df.sort_values("effect_size", ascending=False, kind="stable").head(k).reset_index(drop=True)
    )
    df.insert(3, "significant", df["p_value"] < alpha)
    df.attrs.update(
        alpha=alpha, p_value=p, model=ds.attrs.get("model"), metric=ds.attrs.get("metric")
    )
    return df


def _iter_models(results: Mapping[str, xr.Dataset] | Iterable[xr.Dataset]) -> dict[str, xr.Dataset]:
    if isinstance(results, Mapping):
        return dict(results)
    return {str(r.attrs.get("model", i)): r for i, r in enumerate(results)}
