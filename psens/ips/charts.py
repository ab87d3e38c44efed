"""Pure chart builders: a table (see :mod:`psens.ips.tables`) in, an ``alt.Chart`` out.

Every function here is a value-to-value map with no display and no UI import: the
widgets call them on each state change and hand the result to their one
``alt.JupyterChart``; notebooks and scripts can use them directly (``chart.save``).
Model picks are a point selection named :data:`PICK` on the ``model`` field.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from psens._charts import (
    CLASS_COLORS,
    DIRECTION_COLORS,
    GROUP_COLORS,
    ORDER_COLORS,
    PICK,
    TEMPLATE_COLORS,
    altair,
    known_or,
    label_synthetic,
    need_columns,
)
from psens.ips.metric import CLASSES, ORDER_LEVELS
from psens.ips.tables import CLASS_LABELS
from psens.settings import DEFAULT_TAU

alt = altair()

__all__ = [
    "CLASS_COLORS",
    "ORDER_COLORS",
    "PICK",
    "TEMPLATE_COLORS",
    "case_study_chart",
    "classes_chart",
    "factor_chart",
    "ips_consistency_chart",
    "ips_ranking_chart",
    "order_ips_chart",
    "sparsity_chart",
]


def _pick(empty: bool = True) -> alt.Parameter:
    return alt.selection_point(name=PICK, fields=["model"], on="click", empty=empty)


def _models_sorted(table: pd.DataFrame, by: Sequence[str]) -> list[str]:
    keys = [k for k in by if k in table.columns]
    rows = table.drop_duplicates("model")
    return (
        rows.sort_values(keys, kind="stable")["model"].tolist() if keys else rows["model"].tolist()
    )


def _ci_tooltip(lo: str, hi: str, title: str) -> alt.Tooltip:
    return alt.Tooltip(f"{lo}:Q", format=".3f", title=f"{title} CI low"), alt.Tooltip(
        f"{hi}:Q", format=".3f", title=f"{title} CI high"
    )


def order_ips_chart(
    table: pd.DataFrame,
    *,
    orders: Sequence[str] = ("low", "mid", "high"),
    layout: str = "grouped",
    title: str = "",
) -> alt.Chart | alt.LayerChart:
    """IPS per model and interaction order with bootstrap CIs (fig. 9, ``layout="grouped"``),
    or one panel per order with models sorted by series and scale (fig. 11,
    ``layout="by_order"``).

    ``table``: :func:`psens.ips.tables.order_ips_table`. Bars are the means over samples;
    the whiskers (grouped layout) and the tooltip give the bootstrap CI. With the table's
    floor columns (``order_ips_table(..., floor=...)``) a black tick marks the noise floor
    of each bar (grouped layout) and the tooltip gives the floor, IPS − floor with its CI
    and p. Click a bar to pick a model (the :data:`PICK` selection).
    """
    need_columns(
        table,
        ["model", "order", "ips", "ips_lo", "ips_hi", "n_used", "n_skipped"],
        "order_ips_chart",
    )
    orders = [o for o in ORDER_LEVELS if o in orders]
    data = table[table["order"].isin(orders)].copy()
    ips_all = table[table["order"] == "all"].set_index("model")["ips"]
    data["ips_all"] = data["model"].map(ips_all)
    pick = _pick()
    tooltip = [
        alt.Tooltip("model:N"),
        alt.Tooltip("order:N"),
        alt.Tooltip("ips:Q", format=".3f", title="IPS"),
        *_ci_tooltip("ips_lo", "ips_hi", "IPS"),
        alt.Tooltip("n_used:Q", title="samples used"),
        alt.Tooltip("n_skipped:Q", title="samples skipped (no salient S)"),
    ]
    has_floor = "floor" in data.columns
    if has_floor:
        tooltip += [
            alt.Tooltip("floor_kind:N", title="noise floor"),
            alt.Tooltip("floor:Q", format=".3f", title="floor"),
            alt.Tooltip("diff:Q", format=".3f", title="IPS − floor"),
            *_ci_tooltip("diff_lo", "diff_hi", "IPS − floor"),
            alt.Tooltip("p_value:Q", format=".3g", title="p (IPS vs floor)"),
        ]
    y = alt.Y("ips:Q", title="IPS", scale=alt.Scale(domain=[0, 2]))
    opacity = alt.condition(pick, alt.value(1.0), alt.value(0.3))
    if layout == "by_order":
        order = _models_sorted(data, ["series", "params", "model"])
        color = "series:N" if "series" in data else "model:N"
        base = (
            alt.Chart(data)
            .mark_bar()
            .encode(
                x=alt.X("model:N", sort=order, title=None, axis=alt.Axis(labelAngle=-45)),
                y=y,
                color=alt.Color(color),
                opacity=opacity,
                column=alt.Column("order:N", sort=orders, title="order"),
                tooltip=tooltip,
            )
            .add_params(pick)
            .properties(width=alt.Step(14))
        )
        return label_synthetic(base.properties(title=title) if title else base, table)
    order = _models_sorted(data, ["ips_all", "model"])
    x = {
        "x": alt.X("model:N", sort=order, title=None, axis=alt.Axis(labelAngle=-45)),
        "xOffset": alt.XOffset("order:N", sort=orders),
    }
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            **x,
            y=y,
            color=alt.Color(
                "order:N",
                sort=orders,
                title="order",
                scale=alt.Scale(domain=orders, range=[ORDER_COLORS[o] for o in orders]),
            ),
            opacity=opacity,
            tooltip=tooltip,
        )
        .add_params(pick)
    )
    whiskers = (
        alt.Chart(data)
        .mark_rule(color="black")
        .encode(**x, y="ips_lo:Q", y2="ips_hi:Q", opacity=opacity, tooltip=tooltip)
    )
    layers = [bars, whiskers]
    if has_floor:
        layers.append(
            alt.Chart(data)
            .mark_tick(color="black", thickness=2, strokeDash=[3, 2])
            .encode(**x, y="floor:Q", opacity=opacity, tooltip=tooltip)
        )
    chart = alt.layer(*layers).properties(
        width=alt.Step(max(8, 36 // max(len(orders), 1))), height=260
    )
    return label_synthetic(chart.properties(title=title) if title else chart, table)


def classes_chart(table: pd.DataFrame, *, title: str = "") -> alt.Chart:
    """Shares of opposite-sign / different-effect / similar interactions per model, one row
    for changed and one for unchanged outputs (fig. 3b).

    ``table``: :func:`psens.ips.tables.class_table`.
    """
    labels = [CLASS_LABELS[c] for c in CLASSES]
    data = table.copy()
    data["class_rank"] = data["label"].map({lab: i for i, lab in enumerate(labels)})
    data["group_label"] = data["group"].map(
        {"changed": "output changed", "unchanged": "output unchanged"}
    )
    pick = _pick()
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("model:N", title=None, sort=list(pd.unique(data["model"]))),
            x=alt.X(
                "share:Q",
                title="share of salient interactions",
                stack="normalize",
                axis=alt.Axis(format="%"),
            ),
            color=alt.Color(
                "label:N",
                title="class",
                sort=labels,
                scale=alt.Scale(domain=labels, range=[CLASS_COLORS[lab] for lab in labels]),
            ),
            order=alt.Order("class_rank:Q"),
            row=alt.Row(
                "group_label:N",
                title=None,
                sort=["output changed", "output unchanged"],
                header=alt.Header(
                    labelAngle=0,
                    labelAlign="left",
                    labelAnchor="start",
                    labelOrient="top",
                    labelFontWeight="bold",
                ),
            ),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.3)),
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("group_label:N", title="output"),
                alt.Tooltip("label:N", title="class"),
                alt.Tooltip("share:Q", format=".1%"),
                alt.Tooltip("count:Q", title="salient interactions"),
                alt.Tooltip("n_pairs:Q", title="sample × template pairs"),
            ],
        )
        .add_params(pick)
        .properties(width=360, height=alt.Step(18))
    )
    return label_synthetic(chart.properties(title=title) if title else chart, table)


def case_study_chart(
    table: pd.DataFrame,
    templates: tuple[str, str],
    *,
    tau: float = DEFAULT_TAU,
    title: str = "",
    subtitle: Sequence[str] = (),
) -> alt.LayerChart:
    """The top salient interactions of one sample, T (blue) beside T-hat (red), labelled
    by their words (fig. 3a / 19). ``table``: :func:`psens.ips.tables.case_table`."""
    labels = table.drop_duplicates("label").sort_values("rank")["label"].tolist()
    y = alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labelLimit=320))
    bars = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            y=y,
            yOffset=alt.YOffset("template:N", sort=list(templates)),
            x=alt.X(
                "value:Q",
                title="normalised interaction effect Ĩ(S)",
                scale=alt.Scale(domain=[-1, 1]),
            ),
            color=alt.Color(
                "template:N",
                sort=list(templates),
                scale=alt.Scale(domain=list(templates), range=list(TEMPLATE_COLORS)),
            ),
            tooltip=[
                alt.Tooltip("label:N", title="S"),
                alt.Tooltip("kind:N"),
                alt.Tooltip("size:Q", title="|S|"),
                alt.Tooltip("template:N"),
                alt.Tooltip("value:Q", format=".3f", title="Ĩ(S)"),
                alt.Tooltip("class:N"),
            ],
        )
    )
    rules = (
        alt.Chart(pd.DataFrame({"x": [-tau, 0.0, tau], "w": [1, 2, 1]}))
        .mark_rule(color="#999", strokeDash=[3, 3])
        .encode(x="x:Q", strokeWidth=alt.StrokeWidth("w:Q", legend=None))
    )
    chart = alt.layer(bars, rules).properties(width=420, height=alt.Step(12))
    if title or subtitle:
        chart = chart.properties(title=alt.TitleParams(text=title, subtitle=list(subtitle)))
    return label_synthetic(chart, table)


def factor_chart(groups: pd.DataFrame, delta: pd.DataFrame, *, title: str = "") -> alt.HConcatChart:
    """Two groups side by side, overall and per order, and the relative change ΔIPS, with
    bootstrap CIs as whiskers (fig. 10).

    Tables: :func:`psens.ips.tables.factor_table`.
    """
    need_columns(groups, ["group", "order", "ips", "ips_lo", "ips_hi", "n_models"], "factor_chart")
    need_columns(delta, ["order", "rel_change", "rel_lo", "rel_hi", "n_pairs"], "factor_chart")
    orders = list(ORDER_LEVELS)
    names = list(pd.unique(groups["group"]))
    x_order = alt.X("order:N", sort=orders, title="interactions", axis=alt.Axis(labelAngle=0))
    left_x = {"x": x_order, "xOffset": alt.XOffset("group:N", sort=names)}
    group_tip = [
        alt.Tooltip("group:N"),
        alt.Tooltip("order:N"),
        alt.Tooltip("ips:Q", format=".3f", title="IPS"),
        *_ci_tooltip("ips_lo", "ips_hi", "IPS"),
        alt.Tooltip("n_models:Q", title="models"),
    ]
    group_bars = (
        alt.Chart(groups)
        .mark_bar()
        .encode(
            **left_x,
            y=alt.Y("ips:Q", title="IPS", scale=alt.Scale(domain=[0, 2])),
            color=alt.Color(
                "group:N",
                sort=names,
                scale=alt.Scale(range=list(GROUP_COLORS)),
                legend=alt.Legend(orient="bottom", direction="vertical"),
            ),
            tooltip=group_tip,
        )
    )
    group_ci = (
        alt.Chart(groups)
        .mark_rule(color="black")
        .encode(**left_x, y="ips_lo:Q", y2="ips_hi:Q", tooltip=group_tip)
    )
    left = alt.layer(group_bars, group_ci).properties(
        width=220, height=220, title="IPS of each group"
    )
    d = delta.copy()
    d["direction"] = d["rel_change"].map(lambda x: "reduces" if x < 0 else "increases")
    delta_tip = [
        alt.Tooltip("order:N"),
        alt.Tooltip("rel_change:Q", format="+.1%", title="ΔIPS"),
        alt.Tooltip("rel_lo:Q", format="+.1%", title="ΔIPS CI low"),
        alt.Tooltip("rel_hi:Q", format="+.1%", title="ΔIPS CI high"),
        alt.Tooltip("n_pairs:Q", title="pairs averaged"),
    ]
    bars = (
        alt.Chart(d)
        .mark_bar()
        .encode(
            x=x_order,
            y=alt.Y("rel_change:Q", title="ΔIPS = (A − B) / B", axis=alt.Axis(format="%")),
            color=alt.Color(
                "direction:N",
                title="A vs B",
                scale=alt.Scale(
                    domain=list(DIRECTION_COLORS), range=list(DIRECTION_COLORS.values())
                ),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=delta_tip,
        )
    )
    whiskers = (
        alt.Chart(d)
        .mark_rule(color="black")
        .encode(x=x_order, y="rel_lo:Q", y2="rel_hi:Q", tooltip=delta_tip)
    )
    text = (  # above the bar (or above the zero line for a negative bar), right of the whisker
        alt.Chart(d)
        .transform_calculate(label_y="max(datum.rel_change, 0)")
        .mark_text(align="left", baseline="bottom", dx=3, dy=-3)
        .encode(x=x_order, y="label_y:Q", text=alt.Text("rel_change:Q", format="+.1%"))
    )
    right = alt.layer(bars, whiskers, text).properties(
        width=220, height=220, title="relative change"
    )
    chart = alt.hconcat(left, right).resolve_scale(color="independent")
    return label_synthetic(chart.properties(title=title) if title else chart, groups, delta)


def sparsity_chart(
    curve: pd.DataFrame,
    matching: pd.DataFrame,
    errors: pd.DataFrame,
    *,
    tau: float = DEFAULT_TAU,
    fraction: float = 0.05,
    title: str = "",
) -> alt.HConcatChart:
    """Sparsity and faithfulness (fig. 2): (a) sorted |Ĩ| per model, (b) the model's output on
    every masked input against the logical model with the top ``fraction`` of interactions,
    (c) the mean matching error against the fraction kept."""
    pick = _pick()
    a = (
        alt.Chart(curve)
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("rank:Q", title="interactions, strongest first"),
            y=alt.Y("strength:Q", title="|Ĩ(S)|", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("model:N", legend=alt.Legend(orient="bottom", columns=2)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
            tooltip=["model:N", "rank:Q", alt.Tooltip("strength:Q", format=".3f")],
        )
        .add_params(pick)
    )
    tau_rule = (
        alt.Chart(pd.DataFrame({"tau": [tau]}))
        .mark_rule(color="#999", strokeDash=[4, 3])
        .encode(y="tau:Q")
    )
    panel_a = alt.layer(a, tau_rule).properties(width=240, height=220, title="(a) sparsity")
    line = (
        alt.Chart(matching)
        .mark_line(color="#d62728")
        .encode(
            x=alt.X("rank:Q", title="masked inputs x_T, by v ascending"),
            y=alt.Y("v:Q", title="output"),
        )
    )
    dots = (
        alt.Chart(matching)
        .mark_point(size=14, color="#1f77b4")
        .encode(
            x="rank:Q",
            y="phi:Q",
            tooltip=[
                alt.Tooltip("label:N", title="T"),
                alt.Tooltip("v:Q", format=".3f"),
                alt.Tooltip("phi:Q", format=".3f", title="φ top-k"),
                alt.Tooltip("error:Q", format=".3f"),
            ],
        )
    )
    panel_b = alt.layer(line, dots).properties(
        width=240, height=220, title=f"(b) v (red) vs φ with top {fraction:.0%} (blue)"
    )
    c = (
        alt.Chart(errors)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "fraction:Q",
                title="fraction of interactions kept",
                axis=alt.Axis(format="%", values=[0.01, 0.03, 0.1, 0.3, 1.0]),
                scale=alt.Scale(type="log"),
            ),
            y=alt.Y("relative:Q", title="mean |v − φ| / range of v"),
            color=alt.Color("model:N", legend=None),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
            tooltip=[
                "model:N",
                alt.Tooltip("fraction:Q", format=".0%"),
                alt.Tooltip("error:Q", format=".4f"),
                alt.Tooltip("relative:Q", format=".4f"),
                alt.Tooltip("n_games:Q", title="games"),
            ],
        )
    )
    cut = (
        alt.Chart(pd.DataFrame({"f": [fraction]}))
        .mark_rule(color="#999", strokeDash=[4, 3])
        .encode(x="f:Q")
    )
    panel_c = alt.layer(c, cut).properties(width=240, height=220, title="(c) matching error")
    chart = alt.hconcat(panel_a, panel_b, panel_c)
    return label_synthetic(
        chart.properties(title=title) if title else chart, curve, matching, errors
    )


def ips_ranking_chart(table: pd.DataFrame, *, title: str = "") -> alt.Chart:
    """Overall IPS of every model in ascending order (fig. 4a).

    ``table``: :func:`psens.ips.tables.order_ips_table` (the ``all`` rows are used).
    """
    data = table[table["order"] == "all"]
    order = data.sort_values(["ips", "model"])["model"].tolist()
    pick = _pick()
    color = "kind:N" if "kind" in data else "model:N"
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("model:N", sort=order, title=None, axis=alt.Axis(labelAngle=-45)),
            y=alt.Y("ips:Q", title="IPS", scale=alt.Scale(domain=[0, 2])),
            color=alt.Color(color),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.3)),
            tooltip=["model:N", alt.Tooltip("ips:Q", format=".3f"), "n_used:Q", "n_skipped:Q"],
        )
        .add_params(pick)
        .properties(width=alt.Step(18), height=220)
    )
    return label_synthetic(chart.properties(title=title) if title else chart, table)


def ips_consistency_chart(table: pd.DataFrame, *, title: str = "") -> alt.Chart:
    """IPS against output consistency, one point per model (fig. 4b).

    ``table`` columns ``model, ips, output_consistency`` (and optional metadata). Points are
    coloured by ``kind`` when the table has it (a model without one: "unknown"); the dashed
    least-squares line carries no colour (no legend entry).
    """
    color = "kind" if "kind" in table else "model"
    table = table.assign(**{color: known_or(table[color])})
    pick = _pick()
    points = (
        alt.Chart(table)
        .mark_circle(size=80)
        .encode(
            x=alt.X(
                "output_consistency:Q",
                title="output consistency",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(zero=False),
            ),
            y=alt.Y("ips:Q", title="IPS", scale=alt.Scale(zero=False)),
            color=alt.Color(f"{color}:N"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.3)),
            tooltip=[
                "model:N",
                alt.Tooltip("ips:Q", format=".3f"),
                alt.Tooltip("output_consistency:Q", format=".1%"),
            ],
        )
        .add_params(pick)
    )
    fit = (
        alt.Chart(table)
        .transform_regression("output_consistency", "ips")
        .mark_line(color="#999", strokeDash=[4, 3])
        .encode(x="output_consistency:Q", y="ips:Q")
    )
    chart = alt.layer(points, fit).properties(width=300, height=240)
    return label_synthetic(chart.properties(title=title) if title else chart, table)
