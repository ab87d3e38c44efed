"""ProSA's PromptSensiScore (PSS) and decoding confidence.

ProSA (Zhuo et al., 2024) scores an instance ``i`` by the mean absolute score gap over the
*unordered* pairs of its prompt variants ``P`` (§2.2 eq. 1), and a dataset by the mean over
instances (eq. 2)::

    S_i = Σ_{p<q} |Y(p) − Y(q)| / C(|P|, 2)        PSS = (1/N) Σ_i S_i

``Y`` is binary correctness (objective tasks; ``S_i`` is then the fraction of variant pairs
whose correctness differs) or a graded judge score in [0, 1] (subjective tasks, §4).

The pair sum is computed without forming pairs: for the sorted scores ``y_(0) ≤ … ≤ y_(m−1)``,
``Σ_{p<q} |y_p − y_q| = Σ_k (2k − m + 1) · y_(k)``, O(m log m) per instance and vectorised over
instances.

Failed calls. A variant whose score is NaN (a failed model or judge call) is *excluded*: ``S_i``
is computed over the pairs of the ``m`` valid variants of that instance, divided by
``C(m, 2)``. An instance with fewer than two valid variants has ``S_i = NaN``; :func:`pss`
skips such instances and reports how many it skipped.

Decoding confidence (§5.1 eq. 3): ``C = (1/|P|) Σ_p P(t_next | p)`` with ``P(t_next | p)`` the
probability of the most likely next token. The paper does not say whether the maximum is over
the full vocabulary or over the option tokens (§5.1); both are offered (``over="full"`` or
``over="options"``).

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

from psens._validation import fail

__all__ = [
    "ARENA_LABEL_SCORES",
    "PSSSummary",
    "arena_label_score",
    "confidence",
    "find_dim",
    "instance_confidence",
    "instance_pss",
    "load_prosa_versions",
    "pss",
    "top_token_probability",
    "variant_disagreement",
]

#: Dimension names accepted for the prompt-variant axis of a DataArray (first found wins).
VARIANT_DIMS = ("template", "variant", "prompt", "version")
#: Dimension names accepted for the instance axis of a DataArray.
INSTANCE_DIMS = ("sample", "instance", "item")


class PSSSummary(NamedTuple):
    """Dataset PSS with the number of instances used and skipped (fewer than 2 valid)."""

    pss: float
    n_used: int
    n_skipped: int


def find_dim(
    da: xr.DataArray,
    candidates: Sequence[str],
    *,
    given: str | None = None,
    prefer: str | None = None,
    where: str = "find_dim",
) -> str:
    """The name of one dim of ``da``: ``given`` if passed, else the first of ``candidates``.

    Parameters
    ----------
    da : DataArray
    candidates : sequence of str
        Accepted names in order, e.g. :data:`VARIANT_DIMS` or :data:`INSTANCE_DIMS`.
    given : str, optional
        An explicit dim name; it must be a dim of ``da``.
    prefer : str, optional
        A candidate tried before the others (the rest keep their order), e.g.
        ``prefer="variant"`` for scores whose variant axis is usually named ``variant``.
    where : str
        The caller's name, for the error message.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        When ``given`` is not a dim of ``da`` or no candidate is.
    """
    if given is not None:
        if given not in da.dims:
            fail(where, f"dim {given!r} is not one of {da.dims}", "Pass an existing dim name")
        return given
    order = tuple(candidates)
    if prefer is not None:
        order = (prefer, *(c for c in order if c != prefer))
    for name in order:
        if name in da.dims:
            return name
    fail(
        where,
        f"none of the dims {da.dims} is one of {order}",
        f"Name the dim (e.g. {order[0]!r}) or pass it explicitly",
    )
    raise AssertionError  # unreachable


def _as_scores(scores: Any, where: str) -> np.ndarray:
    a = np.asarray(scores)
    if a.dtype == bool:
        a = a.astype(float)
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        fail(where, f"scores have dtype {a.dtype}", "Pass real scores in [0, 1]", TypeError)
    if a.ndim < 2:
        fail(
            where,
            f"scores have shape {a.shape}; need (..., instances, variants)",
            "Reshape a single instance to (1, n_variants)",
        )
    a = a.astype(float)
    if np.isinf(a).any():
        fail(where, "scores contain inf", "Replace failed calls by NaN, not inf")
    finite = a[~np.isnan(a)]
    if finite.size and (finite.min() < 0 or finite.max() > 1):
        fail(
            where,
            f"scores range over [{finite.min():g}, {finite.max():g}], outside [0, 1]",
            "Rescale graded scores to [0, 1] (ProSA maps judge labels to 0, 0.25, ..., 1)",
        )
    return a


def _pair_gap_mean(a: np.ndarray) -> np.ndarray:
    """Mean |y_p − y_q| over the unordered pairs of valid entries of the last axis."""
    p = a.shape[-1]
    y = np.sort(a, axis=-1)  # NaN sorts last
    m = (~np.isnan(a)).sum(axis=-1)
    k = np.arange(p)
    w = np.where(k < m[..., None], 2 * k - m[..., None] + 1, 0)
    total = (w * np.nan_to_num(y)).sum(axis=-1)
    n_pairs = m * (m - 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        out = total / n_pairs
    return np.where(m >= 2, out, np.nan)


def instance_pss(scores: Any, *, dim: str | None = None) -> np.ndarray | xr.DataArray:
    """Per-instance sensitivity ``S_i`` (ProSA §2.2 eq. 1).

    ``S_i = Σ_{p<q} |Y(p) − Y(q)| / C(m, 2)`` over the unordered pairs of the ``m`` valid
    (non-NaN) variants of instance ``i``; NaN if ``m < 2``.

    Parameters
    ----------
    scores
        Array ``(..., instance, variant)`` of scores in [0, 1] (bool allowed), NaN for failed
        calls; or a DataArray with a variant dim (``dim``, else the first of "template",
        "variant", "prompt", "version").
    dim
        Name of the variant dim of a DataArray.

    Returns
    -------
    numpy array ``(..., instance)``, or a DataArray without the variant dim.
    """
    where = "instance_pss"
    if isinstance(scores, xr.DataArray):
        d = find_dim(scores, VARIANT_DIMS, given=dim, where=where)
        scores = scores.compute()  # a lazily opened (chunked) run: read once, here
        _as_scores(scores.transpose(..., d).values.reshape(-1, scores.sizes[d]), where)
        out = xr.apply_ufunc(
            _pair_gap_mean, scores.astype(float), input_core_dims=[[d]], keep_attrs=True
        )
        return out.rename("S_i")
    return _pair_gap_mean(_as_scores(scores, where))


def pss(
    scores: Any,
    *,
    dim: str | None = None,
    instance_dim: str | None = None,
    return_counts: bool = False,
) -> Any:
    """Dataset PromptSensiScore (ProSA §2.2 eq. 2): ``PSS = (1/N) Σ_i S_i``.

    Instances whose ``S_i`` is NaN (fewer than two valid variants) are skipped.

    Parameters
    ----------
    scores
        As for :func:`instance_pss`. A numpy array ``(..., instance, variant)`` is averaged
        over its instance axis (−2); a DataArray over its instance dim (``instance_dim``, else
        the first of "sample", "instance", "item"), keeping any other dims (model, shot).
    return_counts
        Also return how many instances were used and skipped: a :class:`PSSSummary` for a 2-D
        array; for other inputs a tuple ``(pss, n_used, n_skipped)`` of arrays/DataArrays.

    Returns
    -------
    float for a 2-D array, an array for more dims, or a DataArray (attrs ``n_skipped``).
    """
    s = instance_pss(scores, dim=dim)
    if isinstance(s, xr.DataArray):
        idim = find_dim(s, INSTANCE_DIMS, given=instance_dim, where="pss")
        value = s.mean(idim, skipna=True)
        used = s.notnull().sum(idim)
        skipped = s.isnull().sum(idim)
        value = value.rename("pss").assign_attrs(n_skipped=int(skipped.sum()))
        return (value, used, skipped) if return_counts else value
    used = (~np.isnan(s)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(used > 0, np.nansum(s, axis=-1) / np.maximum(used, 1), np.nan)
    skipped = s.shape[-1] - used
    if value.ndim == 0:
        value = float(value)
        if return_counts:
            return PSSSummary(value, int(used), int(skipped))
        return value
    return (value, used, skipped) if return_counts else value


# --------------------------------------------------------------------------------------------
# decoding confidence
# --------------------------------------------------------------------------------------------


def _softmax(x: np.ndarray) -> np.ndarray:
    z = x - np.nanmax(x, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def top_token_probability(
    probs: Any,
    *,
    over: Literal["full", "options"] = "full",
    option_ids: Any = None,
    from_logits: bool = False,
    renormalize: bool = False,
) -> np.ndarray:
    """Probability of the most likely next token, ``max_t P(t | p)`` (ProSA §5.1).

    Parameters
    ----------
    probs
        ``(..., vocab)`` next-token probabilities (or logits with ``from_logits=True``; the
        softmax is always over the full vocabulary).
    over
        ``"full"``: maximum over the whole vocabulary. ``"options"``: maximum over the option
        tokens ``option_ids`` only (``(n_options,)`` shared, or ``(..., n_options)`` per row).
    renormalize
        With ``over="options"``: divide by the probability mass of the option tokens, so the
        value is the model's confidence *among the options*.
    """
    where = "top_token_probability"
    p = np.asarray(probs, dtype=float)
    if p.ndim < 1 or p.shape[-1] < 1:
        fail(where, f"probs have shape {p.shape}", "Put the vocabulary on the last axis")
    if from_logits:
        p = _softmax(p)
    elif np.nanmin(p) < 0 or np.nanmax(p) > 1 + 1e-6:
        fail(where, "probs are outside [0, 1]", "Pass probabilities or set from_logits=True")
    if over == "full":
        return np.max(p, axis=-1)
    if over != "options":
        fail(where, f"over={over!r} is not known", 'Pass over="full" or over="options"')
    if option_ids is None:
        fail(where, 'over="options" needs option_ids', "Pass the token ids of the options")
    ids = np.asarray(option_ids, dtype=np.intp)
    if ids.min() < 0 or ids.max() >= p.shape[-1]:
        fail(where, "an option id is outside the vocabulary", "Pass valid token ids")
    if ids.ndim == 1:
        sel = p[..., ids]
    else:
        sel = np.take_along_axis(p, np.broadcast_to(ids, (*p.shape[:-1], ids.shape[-1])), -1)
    top = sel.max(axis=-1)
    if renormalize:
        with np.errstate(invalid="ignore", divide="ignore"):
            top = top / sel.sum(axis=-1)
    return top


def instance_confidence(
    probs: Any, *, dim: str | None = None, vocab_dim: str = "vocab", **kwargs: Any
) -> Any:
    """Decoding confidence of each instance, ProSA eq. 3: ``C = (1/|P|) Σ_p max_t P(t | p)``.

    ``probs`` is ``(..., instance, variant, vocab)`` (numpy) or a DataArray with a variant dim
    and ``vocab_dim``; ``kwargs`` go to :func:`top_token_probability` (``over``,
    ``option_ids``, ``from_logits``, ``renormalize``). Variants with NaN probabilities
    (failed calls) are skipped in the mean.
    """
    if isinstance(probs, xr.DataArray):
        d = find_dim(probs, VARIANT_DIMS, given=dim, where="instance_confidence")
        top = xr.apply_ufunc(
            lambda a: top_token_probability(a, **kwargs),
            probs.astype(float),
            input_core_dims=[[vocab_dim]],
        )
        return top.mean(d, skipna=True).rename("confidence")
    top = top_token_probability(probs, **kwargs)
    if top.ndim < 1:
        fail("instance_confidence", "probs need a variant axis", "Pass (instance, variant, vocab)")
    return np.nanmean(top, axis=-1)


def confidence(probs: Any, *, instance_dim: str | None = None, **kwargs: Any) -> Any:
    """Model-level decoding confidence: the mean of :func:`instance_confidence` over
    instances (ProSA §5.1). Arguments as for :func:`instance_confidence`."""
    c = instance_confidence(probs, **kwargs)
    if isinstance(c, xr.DataArray):
        return c.mean(
            find_dim(c, INSTANCE_DIMS, given=instance_dim, where="confidence"), skipna=True
        )
    out = np.nanmean(c, axis=-1)
    return float(out) if np.ndim(out) == 0 else out


# --------------------------------------------------------------------------------------------
# subjective PSS (ProSA §4): three prompt versions, judge scores
# --------------------------------------------------------------------------------------------

#: ProSA §4.1.1 maps the five Arena-Hard verdicts to [0, 1], from the evaluated model's side
#: (the model is assistant "B" in the judge prompt unless ``model_position="A"``).
ARENA_LABEL_SCORES = {"B>>A": 1.0, "B>A": 0.75, "A=B": 0.5, "A>B": 0.25, "A>>B": 0.0}


def arena_label_score(label: str, *, model_position: Literal["A", "B"] = "B") -> float:
    """Score in [0, 1] of an Arena-Hard verdict label ("A>>B", ..., "B>>A"; ProSA §4.1.1)."""
    lab = label.strip().strip("[]").replace(" ", "")
    if lab == "B=A":
        lab = "A=B"
    if lab not in ARENA_LABEL_SCORES:
        fail(
            "arena_label_score",
            f"label {label!r} is not an Arena-Hard verdict",
            f"Use one of {sorted(ARENA_LABEL_SCORES)}",
        )
    s = ARENA_LABEL_SCORES[lab]
    return s if model_position == "B" else 1.0 - s


def load_prosa_versions(folder: str | Path, benchmark: Literal["alpaca", "arena"]) -> pd.DataFrame:
    """The published ProSA subjective prompt versions as a long table.

    Reads ``AlpacaEval_alpaca_eval_v{1,2,3}.json`` or ``Arena_Hard_Auto_question_v{1,2,3}
    .jsonl`` from ``folder`` (see ``data/reference/README.md``) into columns ``instance,
    version, prompt, category``. Score each (instance, version) response with a judge, pivot
    to (instance × version) and pass it to :func:`pss` for subjective PSS (ProSA §4.2).
    """
    folder = Path(folder)
    frames = []
    for v in (1, 2, 3):
        if benchmark == "alpaca":
            path = folder / f"AlpacaEval_alpaca_eval_v{v}.json"
            recs = json.loads(path.read_text(encoding="utf-8"))
            df = pd.DataFrame(
                {
                    "instance": [r["others"]["index"] for r in recs],
                    "prompt": [r["question"] for r in recs],
                    "category": [r.get("capability") for r in recs],
                }
            )
        elif benchmark == "arena":
            path = folder / f"Arena_Hard_Auto_question_v{v}.jsonl"
            lines = path.read_text(encoding="utf-8").splitlines()
            recs = [json.loads(line) for line in lines if line.strip()]
            df = pd.DataFrame(
                {
                    "instance": [r["question_id"] for r in recs],
                    "prompt": [r["turns"][0]["content"] for r in recs],
                    "category": [r.get("cluster") for r in recs],
                }
            )
        else:
            fail("load_prosa_versions", f"benchmark={benchmark!r}", 'Use "alpaca" or "arena"')
        df["version"] = v
        frames.append(df)
    return pd.concat(frames, ignore_index=True)[["instance", "version", "prompt", "category"]]


def variant_disagreement(scores: Any) -> np.ndarray:
    """Per-variant share of PSS: ``D_p = Σ_{q≠p} |Y(p) − Y(q)| / (m − 1)`` per instance.

    For the ``m`` valid (non-NaN) variants of an instance, the mean over ``p`` of ``D_p`` is
    exactly ProSA's ``S_i`` (§2.2 eq. 1: every unordered pair is counted twice over ``m(m−1)``
    ordered pairs), so ``D_p`` splits an instance's sensitivity between its variants: a
    variant that disagrees with all others has ``D_p = 1`` (binary scores). NaN for a failed
    variant or an instance with fewer than two valid variants.

    Parameters
    ----------
    scores
        ``(..., instance, variant)`` scores in [0, 1], NaN for failed calls.

    Returns
    -------
    Array of the same shape.
    """
    a = np.asarray(scores, dtype=float)
    if a.ndim < 1:
        fail("variant_disagreement", f"scores have shape {a.shape}", "Pass (..., variant)")
    valid = ~np.isnan(a)
    m = valid.sum(axis=-1, keepdims=True)
    gaps = np.abs(a[..., :, None] - a[..., None, :])  # (..., p, q); NaN where either failed
    total = np.nansum(gaps, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = total / (m - 1)
    return np.where(valid & (m >= 2), out, np.nan)
