"""Altair charts for the IPS factor analyses (IPS paper figs. 4b, 5–8; tables 2–7).

Every function takes the tidy tables of :mod:`psens.factors` (already reduced: one row per
model, pair or group), returns an altair chart and never displays it. altair is imported
inside the functions, so ``import psens`` needs no plotting library. IPS by order per model
(fig. 9) and ΔIPS of a factor by order (fig. 10) are drawn by
:func:`psens.ips.charts.order_ips_chart` and :func:`psens.ips.charts.factor_chart` from the
tables :func:`psens.ips.tables.order_ips_table` and :func:`psens.ips.tables.factor_table`.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psens._charts import IPS_AXIS, altair, known_or, label_synthetic, need_columns
from psens._validation import fail

__all__ = [
    "consistency_chart",
    "factor_chart",
    "pair_bars",
    "perturbation_chart",
    "representation_chart",
    "threshold_chart",
    "threshold_heatmap",
]


def _with_errorbars(base, x: dict, y: str, lo: str, hi: str, color: Any, **enc: Any):
    """Bars of ``y`` plus rules from ``lo`` to ``hi`` sharing one data table."""
    alt = altair()
    bars = base.mark_bar().encode(
        y=alt.Y(y, title=enc.pop("y_title", IPS_AXIS)), color=color, **x, **enc
    )
    rules = base.mark_rule(color="black").encode(y=lo, y2=hi, **x, **enc)
    return alt.layer(bars, rules)


def pair_bars(result, order: str = "all", *, labels: tuple[str, str] = ("A", "B")):
    """Grouped bars: IPS of A and B for every pair, with bootstrap CIs (fig. 5, table 7)."""
    alt = altair()
    m = result.models[result.models["order"] == order].set_index("unit")
    p = result.pairs[result.pairs["order"] == order]
    if p.empty:
        fail("pair_bars", f"no row of order {order!r}", "Pass one of the result's orders")
    rows = []
    for _, r in p.iterrows():
        pair = (
            f"{r['unit_b']} pair"
            if result.factor == "instruct_vs_base"
            else (f"{r['unit_a']} vs {r['unit_b']}")
        )
        for unit, role in ((r["unit_b"], labels[1]), (r["unit_a"], labels[0])):
            rows.append(
                {
                    "pair": pair,
                    "role": role,
                    "model": unit,
                    "ips": m.loc[unit, "ips"],
                    "ips_lo": m.loc[unit, "ips_lo"],
                    "ips_hi": m.loc[unit, "ips_hi"],
                    "p_value": r["p_value"],
                }
            )
    import pandas as pd

    data = pd.DataFrame(rows)
    base = alt.Chart(data)
    x = {"x": alt.X("pair:N", title=None, sort=None), "xOffset": alt.XOffset("role:N")}
    chart = _with_errorbars(
        base,
        x,
        "ips:Q",
        "ips_lo:Q",
        "ips_hi:Q",
        alt.Color("role:N", title=None),
        tooltip=["model", "role", alt.Tooltip("ips:Q", format=".3f"), "p_value"],
    )
    chart = chart.properties(width=alt.Step(14), title=f"IPS ({order} orders)")
    return label_synthetic(chart, result)


def _scale_chart(result, order: str):
    alt = altair()
    m = result.models[result.models["order"] == order].copy()
    m["size"] = m["params"].map(lambda v: f"{v:g}B")
    base = alt.Chart(m)
    x = {
        "x": alt.X("series_label:N", title=None, sort=None),
        "xOffset": alt.XOffset("scale_rank:O"),
    }
    chart = _with_errorbars(
        base,
        x,
        "ips:Q",
        "ips_lo:Q",
        "ips_hi:Q",
        alt.Color("series_label:N", legend=None),
        opacity=alt.Opacity("scale_rank:O", legend=None, scale=alt.Scale(range=[0.35, 1.0])),
        tooltip=["unit", "size", alt.Tooltip("ips:Q", format=".3f")],
    )
    return chart.properties(
        width=alt.Step(12),
        title="IPS by model scale (lighter = smaller model within a series)",
    )


def _dense_moe_chart(result, order: str):
    alt = altair()
    m = result.models[result.models["order"] == order]
    base = alt.Chart(m)
    enc = {
        "x": alt.X("group:N", title="Family"),
        "xOffset": alt.XOffset("arch:N"),
        "y": alt.Y("ips:Q", title=IPS_AXIS, scale=alt.Scale(zero=False)),
    }
    points = base.mark_point(filled=True, size=70).encode(
        color=alt.Color("arch:N", title="Architecture"),
        shape=alt.Shape("arch:N", title="Architecture"),
        tooltip=["unit", "arch", alt.Tooltip("ips:Q", format=".3f")],
        **enc,
    )
    rules = base.mark_rule(opacity=0.5).encode(
        x=enc["x"], xOffset=enc["xOffset"], y="ips_lo:Q", y2="ips_hi:Q", color="arch:N"
    )
    return alt.layer(points, rules).properties(title="Dense vs MoE models within a family")


def _few_shot_chart(result, order: str):
    alt = altair()
    m = result.models[result.models["order"] == order].copy()
    m["setting"] = m["shot"].astype(int).astype(str) + "-shot"
    base = alt.Chart(m)
    x = {"x": alt.X("model:N", title=None, sort=None), "xOffset": alt.XOffset("setting:N")}
    chart = _with_errorbars(
        base,
        x,
        "ips:Q",
        "ips_lo:Q",
        "ips_hi:Q",
        alt.Color("setting:N", title=None),
        tooltip=["model", "setting", alt.Tooltip("ips:Q", format=".3f")],
    )
    return chart.properties(width=alt.Step(10), title="0-shot vs few-shot learning")


def factor_chart(result, order: str = "all"):
    """The paper's figure for a :class:`psens.factors.FactorResult`.

    instruct_vs_base → fig. 5 (bars per pair), scale → fig. 6 (bars per series, lighter =
    smaller), dense_vs_moe → fig. 7 (points per family by architecture), matched_active →
    table 7 (bars per pair), few_shot → fig. 8 (bars per model and shot count), anything
    else → A vs B bars per pair. Error bars are the bootstrap CIs.
    """
    kind = result.factor
    if kind == "instruct_vs_base":
        chart = pair_bars(result, order, labels=("Instruct / Chat models", "Base models"))
    elif kind == "scale":
        chart = _scale_chart(result, order)
    elif kind == "dense_vs_moe":
        chart = _dense_moe_chart(result, order)
    elif kind == "matched_active":
        chart = pair_bars(result, order, labels=("Dense", "MoE"))
    elif kind == "few_shot":
        chart = _few_shot_chart(result, order)
    else:
        chart = pair_bars(result, order)
    return label_synthetic(_with_pools(chart, result, order), result)


def _with_pools(chart, result, order: str):
    """``chart`` with a subtitle saying what its bars pool (order band, templates, τ)."""
    alt = altair()
    st = result.settings or {}
    parts = [f"order {order}"]
    if st.get("templates"):
        parts.append("templates " + ", ".join(str(t) for t in st["templates"]))
    if st.get("tau") is not None:
        parts.append(f"τ = {float(st['tau']):g}")
    if st.get("shot") is not None:
        parts.append(f"{st['shot']}-shot")
    title = chart.title if isinstance(chart.title, str) else ""
    if isinstance(chart.title, alt.TitleParams):
        title = chart.title.text
    return chart.properties(title=alt.TitleParams(text=title or "", subtitle="; ".join(parts)))


def threshold_chart(scores):
    """IPS of every model against the threshold τ (appendix F.8), from
    :func:`psens.factors.ips_by_threshold`; parallel lines = stable ranking."""
    alt = altair()
    need_columns(scores, ["model", "tau", "ips"], "threshold_chart")
    chart = (
        alt.Chart(scores)
        .mark_line(point=True)
        .encode(
            x=alt.X("tau:Q", title="Threshold τ"),
            y=alt.Y("ips:Q", title=IPS_AXIS, scale=alt.Scale(zero=False)),
            color=alt.Color("model:N", title="Model"),
            tooltip=["model", "tau", alt.Tooltip("ips:Q", format=".3f")],
        )
        .properties(title="IPS across thresholds")
    )
    return label_synthetic(chart, scores)


def threshold_heatmap(table):
    """Table 3 as a heatmap: models (rows, most stable first) × thresholds."""
    alt = altair()
    long = table.reset_index().melt(id_vars="model", var_name="tau", value_name="ips")
    long["tau"] = long["tau"].astype(float)
    order = list(table.index)
    base = alt.Chart(long).encode(
        x=alt.X("tau:O", title="Threshold τ"), y=alt.Y("model:N", sort=order, title=None)
    )
    rect = base.mark_rect().encode(
        color=alt.Color("ips:Q", title="IPS", scale=alt.Scale(scheme="viridis"))
    )
    text = base.mark_text(fontSize=9).encode(text=alt.Text("ips:Q", format=".3f"))
    chart = alt.layer(rect, text).properties(title="IPS at each threshold (table 3)")
    return label_synthetic(chart, table)


def consistency_chart(table):
    """IPS vs output consistency per model, with a fitted line (fig. 4b)."""
    alt = altair()
    need_columns(table, ["model", "ips", "consistency"], "consistency_chart")
    if "family" in table:  # a model outside the model table has no family: say so
        table = table.assign(family=known_or(table["family"], "unknown"))
    base = alt.Chart(table)
    pts = base.mark_point(filled=True, size=60).encode(
        x=alt.X("consistency:Q", title="Output consistency", scale=alt.Scale(zero=False)),
        y=alt.Y("ips:Q", title=IPS_AXIS, scale=alt.Scale(zero=False)),
        color=alt.Color("family:N") if "family" in table else alt.value("#4c78a8"),
        tooltip=["model", alt.Tooltip("ips:Q", format=".3f"), "consistency"],
    )
    bars = base.mark_rule(opacity=0.4).encode(x="consistency:Q", y="ips_lo:Q", y2="ips_hi:Q")
    # the fitted line has no family: built from the data, not the coloured points (whose
    # colour it would inherit as an "undefined" legend entry)
    line = (
        base.transform_regression("consistency", "ips")
        .mark_line(color="gray")
        .encode(x="consistency:Q", y="ips:Q")
    )
    layers = [pts, line] + ([bars] if "ips_lo" in table else [])
    chart = alt.layer(*layers).properties(title="IPS vs output consistency")
    return label_synthetic(chart, table)


def perturbation_chart(table):
    """IPS on altering-token vs adding-token template pairs per model (appendix G)."""
    alt = altair()
    kb, ka = table.attrs.get("kinds", ["altering", "adding"])
    need_columns(table, ["model", f"ips_{kb}", f"ips_{ka}"], "perturbation_chart")
    rows = []
    for k in (kb, ka):
        part = table[["model", "arch", f"ips_{k}", f"ips_{k}_lo", f"ips_{k}_hi"]].copy()
        part.columns = ["model", "arch", "ips", "ips_lo", "ips_hi"]
        part["kind"] = f"{k} tokens"
        rows.append(part)
    import pandas as pd

    data = pd.concat(rows, ignore_index=True)
    base = alt.Chart(data)
    kinds = [f"{kb} tokens", f"{ka} tokens"]
    x = {"x": alt.X("model:N", title=None, sort=None), "xOffset": alt.XOffset("kind:N", sort=kinds)}
    chart = _with_errorbars(
        base,
        x,
        "ips:Q",
        "ips_lo:Q",
        "ips_hi:Q",
        alt.Color("kind:N", title="Perturbation", sort=kinds),
        tooltip=["model", "kind", alt.Tooltip("ips:Q", format=".3f")],
    )
    chart = (
        chart.properties(width=alt.Step(12))
        .facet(column=alt.Column("arch:N", title=None))
        .resolve_scale(x="independent")
    )
    return label_synthetic(chart, table)


def representation_chart(table):
    """Table 6 as charts: cosine (↑), L2 (↓) and IPS (↓) of base vs instruct/chat models."""
    alt = altair()
    need_columns(table, ["base", "tuned", "base_cosine", "tuned_cosine"], "representation_chart")
    rows = []
    names = {"cosine": "Cosine (↑)", "l2": "L2 distance (↓)", "ips": "IPS (↓)"}
    for _, r in table.iterrows():
        for key, title in names.items():
            for role in ("base", "tuned"):
                rows.append(
                    {
                        "pair": f"{r['base']} pair",
                        "metric": title,
                        "role": "Base" if role == "base" else "Instruct / Chat",
                        "value": r[f"{role}_{key}"],
                        "p_value": r.get(f"p_{key}", np.nan),
                    }
                )
    import pandas as pd

    data = pd.DataFrame(rows)
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("pair:N", title=None, sort=None),
            xOffset="role:N",
            y=alt.Y("value:Q", title=None),
            color=alt.Color("role:N", title=None),
            tooltip=["pair", "metric", "role", alt.Tooltip("value:Q", format=".3f"), "p_value"],
        )
        .properties(width=alt.Step(12))
        .facet(column=alt.Column("metric:N", title=None, sort=list(names.values())))
        .resolve_scale(y="independent")
    )
    return label_synthetic(chart, table)
