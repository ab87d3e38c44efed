r"""Robustness of IPS to the salience threshold τ (IPS paper §4.1, appendix F.8, tables 2–3).

:func:`ips_by_threshold` computes the IPS of every model for 16 thresholds
``0.05, 0.06, …, 0.20`` from one normalisation of each game (:func:`sample_ips`);
:func:`threshold_agreement` summarises how stable the model ranking is across thresholds
(table 2) and :func:`threshold_table` lays the scores out as table 3.

The paper reports table 2 as averages "across all 16 thresholds" without saying over which
pairs of thresholds; psens averages over all unordered pairs of thresholds by default and
offers ``reference=0.1`` to compare every threshold with one reference instead.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from psens._charts import mark_synthetic
from psens._validation import check_positive_int, fail
from psens.ips.metric import check_taus, sample_ips
from psens.stats import bootstrap_means, percentile_ci, rank_agreement, resample_counts
from psens.store.labels import model_names

__all__ = [
    "PAPER_TAUS",
    "TABLE3_TAUS",
    "ips_by_threshold",
    "threshold_agreement",
    "threshold_pairs",
    "threshold_table",
]

#: appendix F.8: 16 thresholds from 0.05 to 0.20, step 0.01
PAPER_TAUS: tuple[float, ...] = tuple(np.round(np.arange(0.05, 0.2001, 0.01), 2).tolist())
#: the 10 thresholds shown in table 3
TABLE3_TAUS: tuple[float, ...] = (0.05, 0.06, 0.07, 0.08, 0.09, 0.10, 0.12, 0.15, 0.18, 0.20)

INTERPRETATION = {
    "spearman": "Rank correlation of the model rankings (1 = same order)",
    "pearson": "Linear correlation of the raw IPS scores",
    "kendall": "Kendall tau-b: agreement of every pair of models on which is more stable",
    "rmse": "Root mean squared change of a model's rank (positions)",
    "top_k": "Share of the k most stable (lowest IPS) models shared",
}


def ips_by_threshold(
    ds,
    taus: Sequence[float] = PAPER_TAUS,
    *,
    order: str = "all",
    shot: int | None = None,
    templates: Sequence[str] | None = None,
    n_boot: int = 0,
    ci: float = 0.95,
    seed: Any = 0,
):
    """IPS of every model at every threshold (appendix F.8): a tidy DataFrame.

    Columns ``model, tau, ips, n_samples`` (and ``ips_lo, ips_hi`` with ``n_boot > 0``:
    percentile bootstrap over samples, one resample matrix for all models and thresholds),
    plus the model metadata.

    Raises
    ------
    ValueError
        When a threshold is outside (0, 1).
    """
    import pandas as pd

    taus = check_taus(taus, "ips_by_threshold")
    if "shot" in ds.dims:
        ds = ds.sel(shot=0 if shot is None else shot)
    x = sample_ips(ds, taus.tolist(), orders=order, templates=templates)
    x = x.transpose("model", "tau", "sample")
    values = x.values
    valid = np.isfinite(values)
    k = valid.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(k > 0, np.nansum(values, axis=-1) / np.maximum(k, 1), np.nan)
    models = model_names(ds)
    out = pd.DataFrame(
        {
            "model": np.repeat(models, taus.size),
            "tau": np.tile(taus, len(models)),
            "ips": mean.ravel(),
            "n_samples": k.ravel(),
        }
    )
    if n_boot:
        check_positive_int(n_boot, "ips_by_threshold", "n_boot")
        boot = bootstrap_means(values, resample_counts(values.shape[-1], n_boot, seed))
        lo, hi = percentile_ci(boot, ci)
        out["ips_lo"], out["ips_hi"] = lo.ravel(), hi.ravel()
    for col in ("family", "series", "kind", "arch", "params", "active_params"):
        if col in ds.coords:
            out[col] = np.repeat(ds[col].values, taus.size)
    out.attrs.update(order=order, taus=taus.tolist())
    return mark_synthetic(out, ds)


def _matrix(scores) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``[model, tau]`` values from a tidy table (``model, tau, ips``) or a DataArray."""
    if hasattr(scores, "pivot"):
        wide = scores.pivot(index="model", columns="tau", values="ips")
        return wide.to_numpy(float), [str(m) for m in wide.index], wide.columns.to_numpy(float)
    if hasattr(scores, "dims"):
        da = scores.transpose("model", "tau")
        return da.values.astype(float), model_names(da), da["tau"].values
    fail(
        "threshold_agreement",
        f"scores of type {type(scores).__name__}",
        "Pass the table of ips_by_threshold or a DataArray (model, tau)",
        TypeError,
    )
    raise AssertionError  # unreachable


def threshold_pairs(scores, *, top_k: int = 10, reference: float | None = None):
    """Agreement statistics for every pair of thresholds: a tidy DataFrame.

    ``scores`` is the table of :func:`ips_by_threshold` (or a DataArray ``model × tau``).
    Columns ``tau_a, tau_b, spearman, pearson, kendall, rmse, top_k``; with ``reference``
    only the pairs (reference, τ). Models with NaN IPS at some threshold are dropped
    (``attrs["dropped"]``).
    """
    import pandas as pd

    x, models, taus = _matrix(scores)
    keep = np.isfinite(x).all(axis=1)
    dropped = [m for m, k in zip(models, keep, strict=True) if not k]
    x = x[keep]
    if x.shape[0] < 2:
        fail(
            "threshold_pairs",
            f"only {x.shape[0]} model has IPS at every threshold",
            "Use a run with at least two models",
        )
    stats = rank_agreement(x, top_k=top_k)
    if reference is None:
        i, j = np.triu_indices(taus.size, k=1)
    else:
        hit = np.flatnonzero(np.isclose(taus, reference))
        if hit.size == 0:
            fail(
                "threshold_pairs",
                f"reference={reference} is not among the thresholds",
                "Pick one of them",
            )
        j = np.array([t for t in range(taus.size) if t != hit[0]])
        i = np.full(j.size, hit[0])
    out = pd.DataFrame({"tau_a": taus[i], "tau_b": taus[j]})
    for key in INTERPRETATION:
        out[key] = stats[key][i, j]
    out.attrs.update(dropped=dropped, top_k=min(top_k, x.shape[0]), n_models=int(x.shape[0]))
    return out


def threshold_agreement(scores, *, top_k: int = 10, reference: float | None = None):
    """Table 2 of the paper: mean agreement of model rankings across thresholds.

    Rows ``spearman, pearson, kendall, rmse, top_k`` with ``value`` (mean over the pairs of
    :func:`threshold_pairs`), ``min``, ``max`` and an ``interpretation``. Paper (16 τ, 50
    models): ρ 0.9905, r 0.9957, τ 0.9465, RMSE 1.72, top-10 overlap 96.7 %.

    Examples
    --------
    >>> import xarray as xr
    >>> v = xr.DataArray([[1.0, 1.0], [2.0, 3.0], [3.0, 2.0]], dims=("model", "tau"),
    ...                  coords={"model": ["a", "b", "c"], "tau": [0.1, 0.2]})
    >>> threshold_agreement(v, top_k=2)["value"].round(3).tolist()
    [0.5, 0.5, 0.333, 0.816, 0.5]
    """
    import pandas as pd

    pairs = threshold_pairs(scores, top_k=top_k, reference=reference)
    keys = list(INTERPRETATION)
    out = pd.DataFrame(
        {
            "metric": keys,
            "value": [pairs[k].mean() for k in keys],
            "min": [pairs[k].min() for k in keys],
            "max": [pairs[k].max() for k in keys],
            "interpretation": [INTERPRETATION[k] for k in keys],
        }
    )
    out.attrs.update(pairs.attrs, n_pairs=len(pairs))
    return out


def threshold_table(scores, taus: Sequence[float] | None = TABLE3_TAUS, *, sort_by: float = 0.05):
    """Table 3 of the paper: IPS of every model (rows) at each threshold (columns).

    Rows sorted by IPS at ``sort_by`` (the paper sorts by τ = 0.05; ascending = most stable
    first). ``taus=None`` keeps every threshold of ``scores``; thresholds not in ``scores``
    are skipped.
    """
    x, models, have = _matrix(scores)
    import pandas as pd

    wide = pd.DataFrame(x, index=pd.Index(models, name="model"), columns=np.round(have, 4))
    if taus is not None:
        want = [t for t in np.round(np.asarray(taus, float), 4) if t in set(wide.columns)]
        if not want:
            fail("threshold_table", f"none of {list(taus)} is in the scores", "Pass taus=None")
        wide = wide[want]
    key = np.round(sort_by, 4)
    if key in set(np.round(have, 4)):
        order = pd.DataFrame(x, index=models, columns=np.round(have, 4))[key]
        wide = wide.loc[order.sort_values(kind="stable").index]
    return mark_synthetic(wide, scores)
