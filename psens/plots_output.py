"""Altair charts for output-level sensitivity (EAS figures, PSS per model / per shot).

Every function returns an altair chart object (``alt.Chart`` or a layer of charts sharing one
top-level data table) and never displays it. altair is imported inside the functions, so
``psens`` imports without the ``widgets`` extra.

The EAS figures follow the published set (seed ``002``, "Step 5"): zone counts (fig. 1),
SensH vs SensJ scatter with the zone thresholds (fig. 2), factor effects (fig. 3), EAS by task
with bootstrap CIs (fig. 4/5) and signed EAS (fig. 6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from psens._validation import fail

__all__ = [
    "eas_by_task",
    "factor_effects_bars",
    "pss_by_model",
    "pss_by_shot",
    "signed_eas",
    "zone_counts",
    "zones_scatter",
]

ZONE_COLORS = {
    "artifact": "#d95f02",
    "underdetected": "#7570b3",
    "genuine": "#e7298a",
    "stable": "#1b9e77",
}


def _alt():
    try:
        import altair as alt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("Charts need altair: pip install 'psens[widgets]'") from err
    return alt


def _need(df: Any, cols: list[str], where: str) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        fail(where, f"got a {type(df).__name__}", "Pass a pandas DataFrame", TypeError)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        fail(where, f"the table lacks {missing}", f"Pass a table with {cols}")
    return df


def _zone_scale(alt):
    return alt.Scale(domain=list(ZONE_COLORS), range=list(ZONE_COLORS.values()))


def zones_scatter(instances: pd.DataFrame, *, thresholds_hj: tuple[float, float] | None = None):
    """SensH vs SensJ per instance, coloured by zone, with the two threshold rules.

    ``instances`` is the table of :func:`psens.eas.instance_metrics`; the thresholds default to
    the pooled 75th percentiles of the table (:func:`psens.eas.thresholds`). One data row per
    instance (columns ``th_h``/``th_j`` hold the thresholds for the rules).
    """
    from psens.eas import thresholds, zones

    alt = _alt()
    df = _need(instances, ["sens_heuristic", "sens_judge"], "zones_scatter")
    keep = ["id", "model_name", "dataset", "sens_heuristic", "sens_judge"]
    df = df[[c for c in keep if c in df.columns]].copy()
    th, tj = thresholds_hj or thresholds(df["sens_heuristic"], df["sens_judge"])
    df["zone"] = zones(df["sens_heuristic"], df["sens_judge"], thresholds_hj=(th, tj)).to_numpy()
    df["th_h"], df["th_j"] = th, tj
    tips = [c for c in ("id", "model_name", "dataset", "zone") if c in df.columns]
    points = (
        alt.Chart()
        .mark_circle(opacity=0.5)
        .encode(
            x=alt.X("sens_heuristic:Q", title="SensH (heuristic)"),
            y=alt.Y("sens_judge:Q", title="SensJ (judge)"),
            color=alt.Color("zone:N", scale=_zone_scale(alt)),
            tooltip=tips,
        )
    )
    vrule = alt.Chart().mark_rule(strokeDash=[4, 4]).encode(x="mean(th_h):Q")
    hrule = alt.Chart().mark_rule(strokeDash=[4, 4]).encode(y="mean(th_j):Q")
    return alt.layer(points, vrule, hrule, data=df).properties(title="EAS zones")


def zone_counts(instances: pd.DataFrame, *, by: str = "model_name"):
    """Stacked bars of zone counts per ``by`` (published fig. 1); one row per (by, zone)."""
    alt = _alt()
    df = _need(instances, [by, "trizone"], "zone_counts")
    counts = df.groupby([by, "trizone"]).size().rename("n").reset_index()
    return (
        alt.Chart(counts)
        .mark_bar()
        .encode(
            x=alt.X(f"{by}:N"),
            y=alt.Y("n:Q", stack="normalize", title="share of instances"),
            color=alt.Color("trizone:N", scale=_zone_scale(alt), title="zone"),
            tooltip=[by, "trizone", "n"],
        )
    )


def factor_effects_bars(effects: pd.DataFrame, *, by: str = "model_name"):
    """Grouped bars of mean factor effects Δ_k for heuristic and judge (published fig. 3).

    ``effects`` is the output of :func:`psens.eas.factor_effects`; it is reshaped to one row
    per (by, factor, evaluator).
    """
    alt = _alt()
    df = _need(effects, [by, "factor", "effect_heuristic", "effect_judge"], "factor_effects_bars")
    long = df.melt(
        id_vars=[by, "factor"],
        value_vars=["effect_heuristic", "effect_judge"],
        var_name="evaluator",
        value_name="effect",
    )
    long["evaluator"] = long["evaluator"].str.removeprefix("effect_")
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("evaluator:N", title=None),
            y=alt.Y("effect:Q", title="mean Δ (factor on − off)"),
            color="evaluator:N",
            column=alt.Column("factor:N"),
            row=alt.Row(f"{by}:N"),
            tooltip=[by, "factor", "evaluator", alt.Tooltip("effect:Q", format=".3f")],
        )
    )


def eas_by_task(table: pd.DataFrame, *, metric: str = "eas"):
    """Mean EAS (or ``metric`` "sh"/"sj" for SensH/SensJ) per dataset and model with its
    bootstrap CI (published fig. 4/5). ``table`` is :func:`psens.eas.aggregate` output; one
    data row per (dataset, model)."""
    alt = _alt()
    col = {"eas": "eas_mean", "sh": "sens_heuristic_mean", "sj": "sens_judge_mean"}.get(metric)
    if col is None:
        fail("eas_by_task", f"metric={metric!r}", 'Use "eas", "sh" or "sj"')
    lo, hi = f"{metric}_ci_lo", f"{metric}_ci_hi"
    df = _need(table, ["dataset", "model_name", col, lo, hi], "eas_by_task")
    df = df[["dataset", "model_name", col, lo, hi]].rename(
        columns={col: "value", lo: "ci_lo", hi: "ci_hi"}
    )
    base = alt.Chart().encode(x=alt.X("model_name:N", title=None))
    bars = base.mark_bar().encode(
        y=alt.Y("value:Q", title=metric.upper()),
        color="model_name:N",
        tooltip=["dataset", "model_name", "value", "ci_lo", "ci_hi"],
    )
    errs = base.mark_errorbar().encode(y="ci_lo:Q", y2="ci_hi:Q")
    return alt.layer(bars, errs, data=df).facet(column="dataset:N")


def signed_eas(instances: pd.DataFrame, *, by: tuple[str, str] = ("dataset", "model_name")):
    """Mean signed EAS (SensH − SensJ) per (dataset, model) as diverging bars (published
    fig. 6): positive = the heuristic reports more sensitivity, negative = the judge does."""
    alt = _alt()
    a, b = by
    df = _need(instances, [a, b, "signed_eas"], "signed_eas")
    means = df.groupby([a, b])["signed_eas"].mean().rename("signed_eas").reset_index()
    means["direction"] = np.where(
        means["signed_eas"] >= 0, "heuristic > judge", "judge > heuristic"
    )
    return (
        alt.Chart(means)
        .mark_bar()
        .encode(
            x=alt.X("signed_eas:Q", title="mean signed EAS (SensH − SensJ)"),
            y=alt.Y(f"{b}:N", title=None),
            color="direction:N",
            row=alt.Row(f"{a}:N"),
            tooltip=[a, b, alt.Tooltip("signed_eas:Q", format=".3f")],
        )
    )


def _pss_frame(pss: Any, where: str) -> pd.DataFrame:
    try:
        import xarray as xr

        if isinstance(pss, xr.DataArray):
            return pss.rename("pss").to_dataframe().reset_index()
    except ImportError:  # pragma: no cover
        pass
    return pss


def pss_by_model(pss: Any, *, model: str = "model", value: str = "pss"):
    """Bars of dataset PSS per model (ProSA fig. 3/4); ``pss`` is a DataFrame with ``model``
    and ``value`` columns (optional ``ci_lo``/``ci_hi`` add error bars) or a DataArray over a
    model dim. One data row per model."""
    alt = _alt()
    df = _need(_pss_frame(pss, "pss_by_model"), [model, value], "pss_by_model")
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X(f"{model}:N", sort="y", title=None),
            y=alt.Y(f"{value}:Q", title="PSS"),
            tooltip=[model, alt.Tooltip(f"{value}:Q", format=".3f")],
        )
    )
    layers = [bars]
    if {"ci_lo", "ci_hi"} <= set(df.columns):
        layers.append(alt.Chart().mark_errorbar().encode(x=f"{model}:N", y="ci_lo:Q", y2="ci_hi:Q"))
    return alt.layer(*layers, data=df)


def pss_by_shot(pss: Any, *, model: str = "model", shot: str = "shot", value: str = "pss"):
    """PSS against the number of shots, one line per model (ProSA §3.4 fig. 5). One data row
    per (model, shot)."""
    alt = _alt()
    df = _need(_pss_frame(pss, "pss_by_shot"), [model, shot, value], "pss_by_shot")
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{shot}:O", title="shots (k)"),
            y=alt.Y(f"{value}:Q", title="PSS"),
            color=f"{model}:N",
            tooltip=[model, shot, alt.Tooltip(f"{value}:Q", format=".3f")],
        )
    )
