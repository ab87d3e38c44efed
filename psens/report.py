"""A self-contained HTML report of a run: summary, IPS by order, one case study, classes.

The charts are altair, rendered offline: the Vega JavaScript is inlined by
``vl-convert-python`` (no CDN), so the file opens on a machine without internet.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import numpy as np
import pandas as pd

from psens import ips as ips_mod
from psens.store import DONE

__all__ = ["case_study_table", "class_table", "order_table", "report_chart", "write_report"]

ORDER_LABELS = ("all", "low", "mid", "high")


def _done(ds):
    ok = (ds["status"] == DONE).all("model").values
    return ds.isel(sample=np.flatnonzero(ok))


def order_table(ds, tau: float | None = None) -> pd.DataFrame:
    """IPS per model and order (mean over samples, NaN skipped), tidy."""
    ds = _done(ds).load()
    tau = float(ds.attrs.get("tau", 0.1)) if tau is None else tau
    rows = []
    for order in ORDER_LABELS:
        per = ips_mod.ips(ds, tau=tau, order=None if order == "all" else order)
        agg = ips_mod.aggregate(per, "sample")
        for name, value in zip(ds["model"].values, np.atleast_1d(agg.values), strict=True):
            rows.append({"model": str(name), "order": order, "ips": float(np.nanmean(value))})
    return pd.DataFrame(rows)


def class_table(ds, tau: float | None = None) -> pd.DataFrame:
    """Shares of the three interaction classes per model, split by output changed (fig. 3b)."""
    ds = _done(ds).load()
    tau = float(ds.attrs.get("tau", 0.1)) if tau is None else tau
    rows = []
    for m, name in enumerate(ds["model"].values):
        sub = ds.isel(model=m)
        a = sub["I_and"].transpose(..., "template", "subset").values
        o = sub["I_or"].transpose(..., "template", "subset").values
        pred = sub["prediction"].transpose(..., "template").values.astype(str)
        res = ips_mod.interaction_classes(a, o, tau, predictions=pred)
        shares = ips_mod.class_shares(res["counts"], res["changed"])
        for group in ("changed", "unchanged"):
            for cls, share in zip(ips_mod.CLASSES, shares[group], strict=True):
                rows.append({"model": str(name), "output": group, "class": cls, "share": share})
    return pd.DataFrame(rows)


def case_study_table(
    ds, model: int = 0, sample: int = 0, templates=(0, 1), top: int = 8, tau: float | None = None
) -> pd.DataFrame:
    """The most salient interactions of one sample under two templates (fig. 3a)."""
    ds = ds.load()
    tau = float(ds.attrs.get("tau", 0.1)) if tau is None else tau
    sub = ds.isel(model=model, sample=sample)
    if "shot" in sub.dims:
        sub = sub.isel(shot=0)
    n = int(sub["n_vars"])
    words = [str(w) for w in sub["word"].values[:n]]
    a = sub["I_and"].values[list(templates), : 1 << n]
    o = sub["I_or"].values[list(templates), : 1 << n]
    na, no = ips_mod.normalize(a, o)
    x = np.concatenate([na, no], axis=-1)  # [2, 2K]
    score = np.where(np.isfinite(x), np.abs(x), -1.0).max(axis=0)
    best = np.argsort(-score)[:top]
    size = 1 << n
    rows = []
    names = [str(t) for t in sub["template"].values[list(templates)]]
    for k in best:
        kind, mask = ("AND", k) if k < size else ("OR", k - size)
        label = f"{kind}: " + " ".join(w for i, w in enumerate(words) if mask >> i & 1)
        for t, name in enumerate(names):
            rows.append(
                {
                    "interaction": label,
                    "template": name,
                    "effect": float(x[t, k]),
                    "salient": bool(abs(x[t, k]) > tau),
                }
            )
    return pd.DataFrame(rows)


def report_chart(ds):
    """One altair chart with the three panels of the report."""
    import altair as alt

    orders = order_table(ds)
    by_order = (
        alt.Chart(orders, title="IPS by interaction order (paper §4.3)")
        .mark_bar()
        .encode(
            x=alt.X("order:N", sort=list(ORDER_LABELS), title=None),
            y=alt.Y("ips:Q", title="IPS", scale=alt.Scale(domain=[0, 2])),
            color=alt.Color("order:N", sort=list(ORDER_LABELS), legend=None),
            column=alt.Column("model:N", title=None),
            tooltip=["model", "order", alt.Tooltip("ips:Q", format=".3f")],
        )
        .properties(width=160, height=180)
    )
    case = case_study_table(ds)
    sample = str(ds["sample"].values[0])
    cases = (
        alt.Chart(case, title=f"Sample {sample}: top interactions under two templates (fig. 3a)")
        .mark_bar()
        .encode(
            y=alt.Y("interaction:N", sort=None, title=None),
            x=alt.X("effect:Q", title="normalised effect Ĩ"),
            yOffset="template:N",
            color=alt.Color("template:N"),
            tooltip=["interaction", "template", alt.Tooltip("effect:Q", format=".3f")],
        )
        .properties(width=420, height=alt.Step(10))
    )
    classes = (
        alt.Chart(class_table(ds), title="Salient interaction classes (fig. 3b)")
        .mark_bar()
        .encode(
            x=alt.X("share:Q", stack="normalize", title="share", axis=alt.Axis(format="%")),
            y=alt.Y("output:N", title=None),
            color=alt.Color("class:N", sort=list(ips_mod.CLASSES)),
            row=alt.Row("model:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            tooltip=["model", "output", "class", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=420, height=50)
    )
    return alt.vconcat(by_order, cases, classes).resolve_scale(color="independent")


def write_report(ds, path: str | os.PathLike, summary: str | None = None) -> Path:
    """Write the report as one offline HTML file and return its path."""
    from psens.runner import summarize

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = summary or summarize(ds)
    page = report_chart(ds).to_html(inline=True)
    dataset = html.escape(str(ds.attrs.get("dataset", "")))
    solver = html.escape(str(ds.attrs.get("solver_method", "")))
    head = (
        "<h1>psens run report</h1>"
        f"<p>dataset {dataset}, τ = {ds.attrs.get('tau', '')}, solver {solver}"
        f", {ds.sizes['sample']} samples, templates "
        f"{html.escape(', '.join(map(str, ds['template'].values)))}</p>"
        f"<pre>{html.escape(text)}</pre>"
    )
    before, tag, after = page.rpartition("<body>")  # the bundled JS may contain "<body>" too
    page = before + tag + head + after
    path.write_text(page)
    return path
