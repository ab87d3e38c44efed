"""IPS vs output consistency (IPS paper §4.1, fig. 4b).

Output consistency of a model is "the proportion of samples where the LLM generates
identical predictions across different prompt templates": per sample, 1 when the stored
``prediction`` is the same under every template, else 0; averaged over samples. A sample
with a missing prediction (empty text) under some template is left out.

The paper reports a negative correlation between IPS and consistency across models;
:func:`consistency_correlation` gives Pearson r, Spearman ρ and Kendall τ with scipy's
p-values and a percentile-bootstrap CI over samples (samples resampled jointly for all
models, the correlation recomputed across models per resample).

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from psens._charts import mark_synthetic
from psens._validation import check_in_interval, check_positive_int, fail
from psens.ips.factors.meta import model_frame
from psens.ips.metric import sample_ips
from psens.settings import tau_of
from psens.stats import bootstrap_means, percentile_ci, rankdata, resample_counts

__all__ = ["consistency_correlation", "ips_vs_consistency", "sample_consistency"]


def _zero_shot(ds, shot: int | None):
    if "shot" in ds.dims:
        return ds.sel(shot=0 if shot is None else shot)
    return ds


def sample_consistency(ds, *, shot: int | None = None, templates: Sequence[str] | None = None):
    """Per-sample output consistency ``[model, sample]``: 1 same prediction under all
    templates, 0 not, NaN when a prediction is missing."""
    import xarray as xr

    if "prediction" not in ds:
        fail("sample_consistency", "the run has no 'prediction'", "Pass a psens run Dataset")
    ds = _zero_shot(ds, shot)
    pred = ds["prediction"]
    if templates is not None:
        pred = pred.sel(template=list(templates))
    pred = pred.transpose("model", "sample", "template")
    p = np.asarray(pred.values, dtype=object)
    text = np.vectorize(lambda v: "" if v is None or v != v else str(v), otypes=[object])(p)
    missing = (text == "").any(axis=-1)
    same = (text == text[..., :1]).all(axis=-1)
    out = np.where(missing, np.nan, same.astype(float))
    return xr.DataArray(
        out,
        dims=("model", "sample"),
        coords={"model": pred.indexes["model"], "sample": pred["sample"].values},
        name="consistency",
    )


def ips_vs_consistency(
    ds,
    *,
    tau: float | None = None,
    shot: int | None = None,
    templates: Sequence[str] | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: Any = 0,
):
    """Per-model IPS and output consistency with bootstrap CIs (fig. 4b): a DataFrame.

    Columns ``model, ips, ips_lo, ips_hi, consistency, consistency_lo, consistency_hi,
    n_samples`` and the model metadata. The bootstrap resamples samples jointly for both
    measures and all models (``attrs["boot"]`` keeps the draws for
    :func:`consistency_correlation`).
    """
    tau = tau_of(ds, tau)
    check_positive_int(n_boot, "ips_vs_consistency", "n_boot")
    check_in_interval(ci, "ips_vs_consistency", "ci", 0.0, 1.0)
    ds = _zero_shot(ds, shot)
    x = sample_ips(ds, tau, orders="all", templates=templates).transpose("model", "sample")
    c = sample_consistency(ds, templates=templates)
    xv, cv = x.values, c.values
    counts = resample_counts(xv.shape[-1], n_boot, seed)
    bx, bc = bootstrap_means(xv, counts), bootstrap_means(cv, counts)  # [B, model]
    table = model_frame(ds).reset_index()
    with np.errstate(invalid="ignore"):
        table["ips"] = np.nanmean(np.where(np.isfinite(xv), xv, np.nan), axis=1)
        table["consistency"] = np.nanmean(cv, axis=1)
    table["ips_lo"], table["ips_hi"] = percentile_ci(bx, ci)
    table["consistency_lo"], table["consistency_hi"] = percentile_ci(bc, ci)
    table["n_samples"] = np.isfinite(xv).sum(axis=1)
    table.attrs.update(tau=tau, ci=ci, boot={"ips": bx, "consistency": bc})
    return mark_synthetic(table, ds)


def _rowwise_corr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r between ``a[k]`` and ``b[k]`` for every row ``k``."""
    ac = a - a.mean(axis=1, keepdims=True)
    bc = b - b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ac * bc).sum(axis=1) / np.sqrt((ac**2).sum(axis=1) * (bc**2).sum(axis=1))


def consistency_correlation(table, *, ci: float | None = None):
    """Correlation of IPS with output consistency across models (fig. 4b).

    Returns a DataFrame with rows ``pearson, spearman, kendall`` and columns ``statistic``,
    ``p_value`` (scipy), ``lo``, ``hi`` (bootstrap CI, when ``table`` comes from
    :func:`ips_vs_consistency`; Kendall has none) and ``n_models``.
    """
    import pandas as pd
    from scipy import stats

    ok = np.isfinite(table["ips"].to_numpy(float)) & np.isfinite(
        table["consistency"].to_numpy(float)
    )
    if ok.sum() < 3:
        fail(
            "consistency_correlation",
            f"only {int(ok.sum())} model(s) have both IPS and consistency",
            "Use a run with at least three models",
        )
    x, y = table["ips"].to_numpy(float)[ok], table["consistency"].to_numpy(float)[ok]
    rows = {
        "pearson": stats.pearsonr(x, y),
        "spearman": stats.spearmanr(x, y),
        "kendall": stats.kendalltau(x, y),
    }
    out = pd.DataFrame(
        {
            "metric": list(rows),
            "statistic": [float(r.statistic) for r in rows.values()],
            "p_value": [float(r.pvalue) for r in rows.values()],
            "lo": np.nan,
            "hi": np.nan,
            "n_models": int(ok.sum()),
        }
    )
    boot = table.attrs.get("boot")
    if boot is not None:
        level = table.attrs.get("ci", 0.95) if ci is None else ci
        bx, bc = boot["ips"][:, ok], boot["consistency"][:, ok]
        good = np.isfinite(bx).all(axis=1) & np.isfinite(bc).all(axis=1)
        bx, bc = bx[good], bc[good]
        r = _rowwise_corr(bx, bc)
        rho = _rowwise_corr(rankdata(bx, axis=1), rankdata(bc, axis=1))
        out.loc[0, ["lo", "hi"]] = np.asarray(percentile_ci(r, level), dtype=float)
        out.loc[1, ["lo", "hi"]] = np.asarray(percentile_ci(rho, level), dtype=float)
    return out
