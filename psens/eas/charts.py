"""Altair charts for EAS (the published figures).

Every function returns an altair chart object (``alt.Chart`` or a layer of charts sharing one
top-level data table) and never displays it. altair is imported inside the functions, so
``psens`` imports without the ``widgets`` extra.

The EAS figures follow the published set (the EAS repository's "Step 5"): zone counts (fig. 1),
SensH vs SensJ scatter with the zone thresholds (fig. 2), factor effects (fig. 3), EAS by task
with bootstrap CIs (fig. 4/5) and signed EAS (fig. 6).

References
----------
.. [1] Muthukumarana et al., "Prompt Sensitivity or Evaluation Artifact?"; the full
   reference is in :mod:`psens.eas`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from psens._charts import ZONE_COLORS, altair, need_columns
from psens._validation import fail
from psens.eas.tables import instance_key

__all__ = [
    "eas_by_task",
    "factor_effects_bars",
    "instance_key",
    "signed_eas",
    "template_scores",
    "zone_counts",
    "zones_scatter",
]


def _zone_scale(alt):
    return alt.Scale(domain=list(ZONE_COLORS), range=list(ZONE_COLORS.values()))


def zones_scatter(
    instances: pd.DataFrame,
    *,
    thresholds_hj: tuple[float, float] | None = None,
    select: str | None = None,
    highlight: str | None = None,
    title: str = "EAS zones",
):
    """SensH vs SensJ per instance, coloured by zone, with the two threshold rules.

    ``instances`` is the table of :func:`psens.eas.instance_metrics`; the thresholds default to
    the pooled 75th percentiles of the table (:func:`psens.eas.thresholds`; EAS "Four-zone
    taxonomy": "high" is strictly above). One data row per instance (columns ``th_h``/``th_j``
    hold the thresholds for the rules; ``key`` is :func:`instance_key`).

    Parameters
    ----------
    select
        Name of a click point selection on ``key`` (a UI can read the picked instances back);
        None for a static chart.
    highlight
        Key of one instance drawn with a black ring (the one shown in a detail view).
    """
    from psens.eas import thresholds, zones

    alt = altair()
    df = need_columns(instances, ["sens_heuristic", "sens_judge"], "zones_scatter")
    keep = ["id", "model_name", "dataset", "task_type", "sens_heuristic", "sens_judge"]
    df = df[[c for c in keep if c in df.columns]].copy()
    df["key"] = instance_key(df).to_numpy()
    th, tj = thresholds_hj or thresholds(df["sens_heuristic"], df["sens_judge"])
    df["zone"] = zones(df["sens_heuristic"], df["sens_judge"], thresholds_hj=(th, tj)).to_numpy()
    df["th_h"], df["th_j"] = th, tj
    df["picked"] = df["key"] == highlight
    tips = [c for c in ("id", "model_name", "dataset", "zone") if c in df.columns]
    tips += [
        alt.Tooltip("sens_heuristic:Q", format=".3f"),
        alt.Tooltip("sens_judge:Q", format=".3f"),
    ]
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
    if select is not None:
        sel = alt.selection_point(name=select, fields=["key"], on="click", empty=False)
        points = points.add_params(sel).encode(
            size=alt.condition(sel, alt.value(160), alt.value(50))
        )
    vrule = alt.Chart().mark_rule(strokeDash=[4, 4]).encode(x="mean(th_h):Q")
    hrule = alt.Chart().mark_rule(strokeDash=[4, 4]).encode(y="mean(th_j):Q")
    layers = [points, vrule, hrule]
    if highlight is not None and bool(df["picked"].any()):
        ring = (
            alt.Chart()
            .mark_point(size=220, color="black", strokeWidth=2, filled=False)
            .encode(x="sens_heuristic:Q", y="sens_judge:Q")
            .transform_filter(alt.datum.picked)
        )
        layers.append(ring)
    return alt.layer(*layers, data=df).properties(title=title)


def template_scores(table: pd.DataFrame, *, title: str | None = None):
    """Per-template heuristic vs judge scores of one instance (EAS "Step 4": the ``h_{i,t}``
    and ``j_{i,t}`` whose stds are SensH and SensJ).

    ``table`` has columns ``template_id, heuristic, judge`` (one row per template; NaN for a
    failed call). Drawn as paired points per template; one data row per (template, evaluator).
    """
    alt = altair()
    df = need_columns(table, ["template_id", "heuristic", "judge"], "template_scores")
    long = df.melt(
        id_vars=["template_id"],
        value_vars=["heuristic", "judge"],
        var_name="evaluator",
        value_name="score",
    )
    chart = (
        alt.Chart(long)
        .mark_point(filled=True, size=90)
        .encode(
            x=alt.X("template_id:N", title="template T{role}{fmt}{prefix}"),
            y=alt.Y("score:Q", title="score", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("evaluator:N"),
            shape=alt.Shape("evaluator:N"),
            xOffset="evaluator:N",
            tooltip=["template_id", "evaluator", alt.Tooltip("score:Q", format=".3f")],
        )
    )
    return chart.properties(title=title) if title else chart


def zone_counts(instances: pd.DataFrame, *, by: str = "model_name"):
    """Stacked bars of zone counts per ``by`` (published fig. 1); one row per (by, zone)."""
    alt = altair()
    df = need_columns(instances, [by, "trizone"], "zone_counts")
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
    alt = altair()
    df = need_columns(
        effects, [by, "factor", "effect_heuristic", "effect_judge"], "factor_effects_bars"
    )
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
    alt = altair()
    col = {"eas": "eas_mean", "sh": "sens_heuristic_mean", "sj": "sens_judge_mean"}.get(metric)
    if col is None:
        fail("eas_by_task", f"metric={metric!r}", 'Use "eas", "sh" or "sj"')
    lo, hi = f"{metric}_ci_lo", f"{metric}_ci_hi"
    df = need_columns(table, ["dataset", "model_name", col, lo, hi], "eas_by_task")
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
    alt = altair()
    a, b = by
    df = need_columns(instances, [a, b, "signed_eas"], "signed_eas")
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
