"""Charts of format-space analyses (altair, imported inside the functions).

Every function returns a chart and never displays it (:func:`psens._charts.altair`), so
``psens`` imports without the ``widgets`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from psens._charts import altair, need_columns

__all__ = ["accuracy_chart", "dimension_accuracy_chart", "dimension_chart"]


def _bars_with_ci(alt, base, value: str, title: str, tick: str, tick_title: str, extra=()):
    """Bars of ``value`` with black ``lo``–``hi`` rules and a grey tick at ``tick``; the
    tooltip shows the three with ``tick_title`` and the ``extra`` fields."""
    tip = [alt.Tooltip(f"{c}:Q", format=".3f") for c in (value, "lo", "hi")]
    bars = base.mark_bar().encode(
        y=alt.Y(f"{value}:Q", title=title),
        tooltip=[*tip, alt.Tooltip(f"{tick}:Q", format=".3f", title=tick_title), *extra],
    )
    errs = base.mark_rule(color="black").encode(y="lo:Q", y2="hi:Q")
    ticks = base.mark_tick(color="#555", thickness=2, size=10).encode(y=f"{tick}:Q")
    return bars, errs, ticks


def dimension_chart(
    table: pd.DataFrame, *, highlight: Sequence[str] = (), title: str | None = None
):
    """IPS per format dimension and order band with its CI (:func:`psens.formats.analysis.
    dimension_sensitivity` rows of one model); ticks mark the noise floor, the dimensions in
    ``highlight`` are drawn solid, the others faded."""
    alt = altair()
    df = need_columns(table, ["dimension", "order", "ips", "lo", "hi", "floor"], "dimension_chart")
    df = df.assign(picked=df["dimension"].isin(list(highlight)))
    orders = ["all", "low", "mid", "high"]
    base = alt.Chart(df).encode(
        x=alt.X("dimension:N", title="format dimension changed (one change)"),
        xOffset=alt.XOffset("order:N", sort=orders),
        color=alt.Color("order:N", sort=orders, title="order band"),
    )
    bars, errs, floor = _bars_with_ci(
        alt,
        base,
        "ips",
        "IPS between formats one change apart",
        "floor",
        "noise floor",
        ["dimension", "order", "n_pairs", "n_items"],
    )
    bars = bars.encode(opacity=alt.condition("datum.picked", alt.value(1.0), alt.value(0.45)))
    chart = alt.layer(bars, errs, floor)
    return chart.properties(
        title=title or "IPS by format dimension (95 % bootstrap CI over items; tick: noise floor)"
    )


def accuracy_chart(table: pd.DataFrame, *, title: str | None = None):
    """Accuracy of every format per model with its CI (:func:`psens.formats.analysis.
    accuracy_table`), formats sorted by accuracy."""
    alt = altair()
    df = need_columns(table, ["model", "template", "accuracy", "lo", "hi"], "accuracy_chart")
    base = alt.Chart(df).encode(
        y=alt.Y("template:N", sort="-x", title="format"),
        color=alt.Color("model:N"),
        yOffset="model:N",
    )
    points = base.mark_point(filled=True).encode(
        x=alt.X("accuracy:Q", scale=alt.Scale(domain=[0, 1])),
        tooltip=["model", "template", alt.Tooltip("accuracy:Q", format=".2f")],
    )
    return alt.layer(points, base.mark_rule().encode(x="lo:Q", x2="hi:Q")).properties(
        title=title or "Accuracy per format (95 % bootstrap CI over items)"
    )


def dimension_accuracy_chart(
    table: pd.DataFrame,
    *,
    facet: str | None = None,
    title: str | None = None,
    width: int = 200,
    height: int = 220,
):
    """Accuracy change per format dimension with its CI (:func:`psens.formats.analysis.
    dimension_accuracy` rows); a tick marks ``any_change`` (the change between any two
    formats), colour and offset tell the models apart, ``facet`` (a column, e.g.
    ``"dataset"``) draws one panel per value, each ``width`` × ``height``."""
    alt = altair()
    need = ["model", "dimension", "effect", "lo", "hi", "any_change"]
    df = need_columns(table, need + ([facet] if facet else []), "dimension_accuracy_chart")
    base = alt.Chart(df).encode(
        x=alt.X("dimension:N", sort="-y", title="format dimension changed (one change)"),
        xOffset="model:N",
        color=alt.Color("model:N"),
    )
    bars, errs, ticks = _bars_with_ci(
        alt,
        base,
        "effect",
        "mean |accuracy change| between formats one change apart",
        "any_change",
        "any two formats",
        ["model", "dimension", *[c for c in ("p_top", "n_pairs", "n_units") if c in df.columns]],
    )
    chart = alt.layer(bars, errs, ticks).properties(width=width, height=height)
    if facet:
        chart = chart.facet(column=alt.Column(f"{facet}:N", title=None))
    return chart.properties(
        title=title
        or "Accuracy change by format dimension (95 % bootstrap CI; tick: any two formats)"
    )
