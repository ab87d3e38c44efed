"""A self-contained HTML report of a run: summary, IPS by order, one case study, classes.

The charts are altair, rendered offline: the Vega JavaScript is inlined by
``vl-convert-python`` (no CDN), so the file opens on a machine without internet.
"""

from __future__ import annotations

import html
import os
import warnings
from pathlib import Path

import numpy as np

from psens.store import DONE

__all__ = ["report_chart", "write_report"]


def _done(ds):
    """The samples that are done for every model (failed or pending blocks are left out)."""
    ok = (ds["status"] == DONE).all("model").values
    return ds.isel(sample=np.flatnonzero(ok))


def report_chart(ds):
    """One altair chart with the three panels of the report (built from :mod:`psens.ips.tables`
    and :mod:`psens.ips.charts`, as the widgets are)."""
    from psens._charts import altair
    from psens.ips import charts as plots_ips
    from psens.ips import tables

    alt = altair()

    ds = _done(ds).load()
    if "shot" in ds.dims:
        ds = ds.isel(shot=0)
    tau = float(ds.attrs.get("tau", 0.1))
    models = [str(m) for m in ds["model"].values]
    per_sample = tables.per_sample_ips(ds, tau)
    orders = tables.order_ips_table(per_sample, tables.model_meta(ds))
    by_order = plots_ips.order_ips_chart(orders, title="IPS by interaction order (paper §4.3)")
    templates = tuple(str(t) for t in ds["template"].values[:2])
    case, _info = tables.case_table(
        ds, models[0], str(ds["sample"].values[0]), templates, tau=tau, top_k=8
    )
    cases = plots_ips.case_study_chart(
        case,
        templates,
        tau=tau,
        title=f"{models[0]}, sample {ds['sample'].values[0]}: top interactions (fig. 3a)",
    )
    classes = plots_ips.classes_chart(
        tables.class_table(ds, models, tau=tau), title="Salient interaction classes (fig. 3b)"
    )
    return alt.vconcat(by_order, cases, classes).resolve_scale(color="independent")


def write_report(ds, path: str | os.PathLike, summary: str | None = None) -> Path:
    """Write the report as one offline HTML file and return its path."""
    from psens.runner import summarize

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = summary or summarize(ds)
    with warnings.catch_warnings():  # the three panels share one "pick" selection: fine
        warnings.simplefilter("ignore", UserWarning)
        page = report_chart(ds).to_html(inline=True)
    facts = {
        "dataset": ds.attrs.get("dataset"),
        "τ": ds.attrs.get("tau"),
        "solver": ds.attrs.get("solver_method"),
        "samples": ds.sizes["sample"],
        "templates": ", ".join(map(str, ds["template"].values)),
    }
    line = ", ".join(f"{k} {v}" for k, v in facts.items() if v not in (None, ""))
    head = f"<h1>psens run report</h1><p>{html.escape(line)}</p><pre>{html.escape(text)}</pre>"
    before, tag, after = page.rpartition("<body>")  # the bundled JS may contain "<body>" too
    page = before + tag + head + after
    path.write_text(page)
    return path
