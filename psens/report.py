"""A self-contained HTML report of a run: summary, IPS by order, one case study, classes.

The charts are altair, rendered offline: the Vega JavaScript is inlined by
``vl-convert-python`` (no CDN), so the file opens on a machine without internet.

Everything taken from the data is escaped: the text above the charts with
:func:`html.escape`, and the chart spec, which sits inside a ``<script>`` element, as JSON
whose ``<``, ``>`` and ``&`` (and the JavaScript line separators U+2028, U+2029) are written
as ``\\uXXXX`` escapes, so an id or model name such as ``</script>`` cannot end the element.
The escaped JSON parses back to the very same strings.
"""

from __future__ import annotations

import html
import json
import os
import warnings
from pathlib import Path

import numpy as np

from psens.store import DONE

__all__ = ["report_chart", "write_report"]

# Characters that could end or confuse a <script> element (or an HTML parser) when JSON is
# placed inline; in JSON they only occur inside strings, where the \uXXXX form is equivalent.
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_SCRIPT_UNSAFE_TABLE = str.maketrans(_SCRIPT_UNSAFE)


class _ScriptSafeJSONEncoder(json.JSONEncoder):
    """A JSON encoder whose output can be placed inside an HTML ``<script>`` element.

    ``<``, ``>``, ``&``, U+2028 and U+2029 are written as ``\\uXXXX`` escapes; the decoded
    value is unchanged.

    Examples
    --------
    >>> json.dumps({"id": "</script>"}, cls=_ScriptSafeJSONEncoder)
    '{"id": "\\\\u003c/script\\\\u003e"}'
    """

    def encode(self, o: object) -> str:
        """The JSON text of ``o``, script-safe."""
        return super().encode(o).translate(_SCRIPT_UNSAFE_TABLE)

    def iterencode(self, o: object, _one_shot: bool = False):
        """The JSON text of ``o`` in pieces, script-safe."""
        for chunk in super().iterencode(o, _one_shot):
            yield chunk.translate(_SCRIPT_UNSAFE_TABLE)


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
    from psens.ips.floor import floor_label, noise_floor

    alt = altair()

    ds = _done(ds).load()
    if "shot" in ds.dims:
        ds = ds.isel(shot=0)
    tau = float(ds.attrs.get("tau", 0.1))
    models = [str(m) for m in ds["model"].values]
    per_sample = tables.per_sample_ips(ds, tau)
    floor = noise_floor(ds, tau=tau)
    orders = tables.order_ips_table(per_sample, tables.model_meta(ds), floor=floor)
    by_order = plots_ips.order_ips_chart(
        orders,
        title=f"IPS by interaction order (paper §4.3); ticks: noise floor ({floor_label(floor)})",
    )
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


def _solvers_fact(ds) -> str | None:
    """The run's solver; with several, the one shown (the first) and the others."""
    from psens.ips import solver_names

    if "solver" not in ds.dims:
        return ds.attrs.get("solver_method")
    first, *rest = solver_names(ds)
    return f"{first} (shown; the run also holds {', '.join(rest)})"


def write_report(ds, path: str | os.PathLike, summary: str | None = None) -> Path:
    """Write the report as one offline HTML file and return its path."""
    from psens.runner import summarize

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = summary or summarize(ds)
    with warnings.catch_warnings():  # the three panels share one "pick" selection: fine
        warnings.simplefilter("ignore", UserWarning)
        page = report_chart(ds).to_html(inline=True, json_kwds={"cls": _ScriptSafeJSONEncoder})
    facts = {
        "dataset": ds.attrs.get("dataset"),
        "τ": ds.attrs.get("tau"),
        "solver": _solvers_fact(ds),
        "samples": ds.sizes["sample"],
        "templates": ", ".join(map(str, ds["template"].values)),
    }
    line = ", ".join(f"{k} {v}" for k, v in facts.items() if v not in (None, ""))
    head = f"<h1>psens run report</h1><p>{html.escape(line)}</p><pre>{html.escape(text)}</pre>"
    before, tag, after = page.rpartition("<body>")  # the bundled JS may contain "<body>" too
    page = before + tag + head + after
    path.write_text(page)
    return path
