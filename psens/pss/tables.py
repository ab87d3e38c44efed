"""Tables of PSS per model, per prompt variant, per style and per shot count (no UI).

:func:`pss_tables` turns one score DataArray (``model × sample × variant`` [× ``shot``],
values in [0, 1], NaN for failed calls) into the tidy tables the PSS charts
(:mod:`psens.pss.charts`) and a PSS explorer show:

* ``model``: the dataset PSS per model (ProSA eq. 2) with the instances used and skipped;
* ``variant``: each variant's share of the PSS, ``D_p`` (:func:`psens.pss.variant_disagreement`;
  its mean over variants is the PSS), and the mean score per variant;
* ``style``: the PSS within each prompt style, when the variants carry a ``style`` coord;
* ``shot``: the PSS per shot count, when there is a ``shot`` dim.

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from psens._charts import mark_synthetic
from psens.pss.metric import INSTANCE_DIMS, VARIANT_DIMS, find_dim, pss, variant_disagreement
from psens.store.labels import model_names

__all__ = ["CANDIDATES", "pss_tables", "sample_dim", "variant_dim"]

#: Variable names tried (in order) for each score kind when a Dataset holds several.
CANDIDATES = {
    "binary": ("binary", "correct", "heuristic"),
    "graded": ("graded", "score", "judge_score", "prob_gold"),
}


def variant_dim(scores: xr.DataArray, where: str = "pss_tables") -> str:
    """The prompt-variant dim of ``scores``: the first of ``variant``, ``template``,
    ``prompt``, ``version`` (``variant`` first, unlike the metric functions, which try
    ``template`` first).

    Parameters
    ----------
    scores : DataArray
    where : str
        The caller's name, for the error message.

    Returns
    -------
    str
    """
    return find_dim(scores, VARIANT_DIMS, prefer="variant", where=where)


def sample_dim(scores: xr.DataArray, where: str = "pss_tables") -> str:
    """The instance dim of ``scores``: the first of ``sample``, ``instance``, ``item``.

    Parameters
    ----------
    scores : DataArray
    where : str
        The caller's name, for the error message.

    Returns
    -------
    str
    """
    return find_dim(scores, INSTANCE_DIMS, where=where)


def pss_tables(
    scores: xr.DataArray, *, shot: int | None = None, models: Sequence[str] | None = None
) -> dict[str, pd.DataFrame]:
    """The PSS tables of one score DataArray (pure).

    Parameters
    ----------
    scores
        Scores in [0, 1] over ``model``, a sample dim (``sample``/``instance``/``item``), a
        variant dim (``variant``/``template``/...) and optionally ``shot``; NaN = failed call.
        A ``style`` coord on the variant dim enables the per-style table.
    shot
        Shot count used by the model, variant and style tables (default: the first).
    models
        Models to keep (default: all).

    Returns
    -------
    dict with ``model`` (model, pss, n_used, n_skipped), ``variant`` (model, variant,
    [style,] disagreement, mean_score, pss), ``style`` (model, style, pss; empty without a
    ``style`` coord) and ``shot`` (model, shot, pss; empty without a shot dim).
    """
    source = scores  # synthetic scores give tables marked synthetic
    vdim = variant_dim(scores)
    sdim = sample_dim(scores)
    if "model" not in scores.dims:
        scores = scores.expand_dims(model=[str(scores.name or "model")])
    if models is not None:
        scores = scores.sel(model=list(models))
    by_shot = pd.DataFrame(columns=["model", "shot", "pss"])
    if "shot" in scores.dims:
        value = pss(scores, dim=vdim, instance_dim=sdim)
        by_shot = value.rename("pss").to_dataframe().reset_index()[["model", "shot", "pss"]]
        scores = scores.sel(shot=shot if shot is not None else scores["shot"].values[0])
    scores = scores.transpose("model", sdim, vdim)
    value, used, skipped = pss(scores, dim=vdim, instance_dim=sdim, return_counts=True)
    names = model_names(scores)
    by_model = pd.DataFrame(
        {
            "model": names,
            "pss": value.values.astype(float),
            "n_used": used.values.astype(int),
            "n_skipped": skipped.values.astype(int),
        }
    )
    arr = scores.values.astype(float)
    dis = variant_disagreement(arr)  # (model, sample, variant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column gives NaN
        d_mean = np.nanmean(dis, axis=1)
        s_mean = np.nanmean(arr, axis=1)
    variants = [str(v) for v in scores[vdim].values]
    styles = [str(s) for s in scores["style"].values] if "style" in scores.coords else None
    recs = []
    for m, name in enumerate(names):
        for v, var in enumerate(variants):
            rec = {
                "model": name,
                "variant": var,
                "disagreement": float(d_mean[m, v]),
                "mean_score": float(s_mean[m, v]),
                "pss": float(by_model["pss"].iloc[m]),
            }
            if styles is not None:
                rec["style"] = styles[v]
            recs.append(rec)
    by_variant = pd.DataFrame.from_records(recs)
    by_style = pd.DataFrame(columns=["model", "style", "pss"])
    if styles is not None:
        parts = []
        for style in dict.fromkeys(styles):
            keep = [v for v, s in zip(variants, styles, strict=True) if s == style]
            sub = scores.sel({vdim: keep})
            val = pss(sub, dim=vdim, instance_dim=sdim)
            parts.append(
                pd.DataFrame({"model": names, "style": style, "pss": val.values.astype(float)})
            )
        by_style = pd.concat(parts, ignore_index=True)
    out = {"model": by_model, "variant": by_variant, "style": by_style, "shot": by_shot}
    return {k: mark_synthetic(t, source) for k, t in out.items()}
