"""Altair charts for ProSA's PSS: per model, per shot count, per prompt variant.

Every function returns an altair chart and never displays it; altair is imported inside the
functions (:func:`psens._charts.altair`), so ``psens`` imports without the ``widgets`` extra.
A table (or DataArray) marked synthetic (``attrs["synthetic"]``,
:func:`psens._charts.mark_synthetic`) gives a chart titled "synthetic data".

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.

PSS per model scale (§3.3, figs. 3–4), per shot count (§3.4, fig. 5), per prompt variant.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from psens._charts import altair, label_synthetic, need_columns

__all__ = ["pss_by_model", "pss_by_shot", "pss_by_variant"]


def _pss_frame(pss: Any, where: str) -> pd.DataFrame:
    try:
        import xarray as xr

        if isinstance(pss, xr.DataArray):
            return pss.rename("pss").to_dataframe().reset_index()
    except ImportError:  # pragma: no cover
        pass
    return pss


def pss_by_model(
    pss: Any,
    *,
    model: str = "model",
    value: str = "pss",
    select: str | None = None,
    title: str | None = None,
):
    """Bars of dataset PSS per model (ProSA fig. 3/4); ``pss`` is a DataFrame with ``model``
    and ``value`` columns (optional ``ci_lo``/``ci_hi`` add error bars) or a DataArray over a
    model dim. One data row per model. ``select`` names a click point selection on
    ``model`` (for a UI)."""
    alt = altair()
    df = need_columns(_pss_frame(pss, "pss_by_model"), [model, value], "pss_by_model")
    tips = [model, alt.Tooltip(f"{value}:Q", format=".3f")]
    tips += [c for c in ("n_used", "n_skipped") if c in df.columns]
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X(f"{model}:N", sort="y", title=None),
            y=alt.Y(f"{value}:Q", title="PSS"),
            tooltip=tips,
        )
    )
    if select is not None:
        sel = alt.selection_point(name=select, fields=[model], on="click", empty=True)
        bars = bars.add_params(sel).encode(
            opacity=alt.condition(sel, alt.value(1.0), alt.value(0.35))
        )
    layers = [bars]
    if {"ci_lo", "ci_hi"} <= set(df.columns):
        layers.append(alt.Chart().mark_errorbar().encode(x=f"{model}:N", y="ci_lo:Q", y2="ci_hi:Q"))
    chart = alt.layer(*layers, data=df)
    return label_synthetic(chart.properties(title=title) if title else chart, pss, df)


def pss_by_shot(
    pss: Any,
    *,
    model: str = "model",
    shot: str = "shot",
    value: str = "pss",
    select: str | None = None,
    title: str | None = None,
):
    """PSS against the number of shots, one line per model (ProSA §3.4 fig. 5). One data row
    per (model, shot). ``select`` names a click point selection on ``model``."""
    alt = altair()
    df = need_columns(_pss_frame(pss, "pss_by_shot"), [model, shot, value], "pss_by_shot")
    chart = (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{shot}:O", title="shots (k)"),
            y=alt.Y(f"{value}:Q", title="PSS"),
            color=f"{model}:N",
            tooltip=[model, shot, alt.Tooltip(f"{value}:Q", format=".3f")],
        )
    )
    if select is not None:
        sel = alt.selection_point(name=select, fields=[model], on="click", empty=True)
        chart = chart.add_params(sel).encode(
            opacity=alt.condition(sel, alt.value(1.0), alt.value(0.3))
        )
    return label_synthetic(chart.properties(title=title) if title else chart, pss, df)


def pss_by_variant(
    table: pd.DataFrame,
    *,
    model: str = "model",
    variant: str = "variant",
    value: str = "disagreement",
    select: str | None = None,
    title: str | None = None,
):
    """Per-variant view of PSS: one line per model over the prompt variants.

    ``table`` has one row per (model, variant) with ``value`` (default the mean
    :func:`variant_disagreement` ``D_p``, whose mean over variants is the model's PSS; or any
    per-variant number such as the mean score) and optionally ``style`` (ProSA §3.1 prompt
    style, used for the tooltip and the point shape) and ``pss`` (drawn as a dashed rule per
    model). ``select`` names a click point selection on ``model``.
    """
    alt = altair()
    df = need_columns(table, [model, variant, value], "pss_by_variant")
    tips = [model, variant, alt.Tooltip(f"{value}:Q", format=".3f")]
    if "style" in df.columns:
        tips.insert(2, "style")
    label = {"disagreement": "variant disagreement D_p", "mean_score": "mean score"}
    base = alt.Chart().encode(
        x=alt.X(f"{variant}:N", title="prompt variant", sort=None),
        color=alt.Color(f"{model}:N"),
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y(f"{value}:Q", title=label.get(value, value)),
        tooltip=tips,
    )
    if "style" in df.columns:
        line = line.encode(shape=alt.Shape("style:N"))
    if select is not None:
        sel = alt.selection_point(name=select, fields=[model], on="click", empty=True)
        line = line.add_params(sel).encode(
            opacity=alt.condition(sel, alt.value(1.0), alt.value(0.3))
        )
    layers = [line]
    if "pss" in df.columns and value == "disagreement":
        rule = (
            alt.Chart()
            .mark_rule(strokeDash=[4, 4])
            .encode(
                y="mean(pss):Q",
                color=alt.Color(f"{model}:N"),
                tooltip=[model, alt.Tooltip("mean(pss):Q", format=".3f", title="PSS")],
            )
        )
        layers.append(rule)
    chart = alt.layer(*layers, data=df)
    return label_synthetic(chart.properties(title=title) if title else chart, table)
