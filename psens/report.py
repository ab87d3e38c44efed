"""A self-contained HTML report of a run: summary, IPS by order, one case study, classes,
with a sentence on how to read each chart, the templates' texts and what to do next.

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
import shlex
import warnings
from pathlib import Path

import numpy as np

from psens.settings import run_settings
from psens.store import DONE
from psens.store.labels import model_names

__all__ = ["report_chart", "template_text", "write_report"]

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


def _case(ds) -> dict:
    """What the case-study panel shows: model, sample, the two templates and the table."""
    from psens.ips import tables

    tau = run_settings(ds).tau
    model, sample = model_names(ds)[0], str(ds["sample"].values[0])
    templates = tuple(str(t) for t in ds["template"].values[:2])
    table, info = tables.case_table(ds, model, sample, templates, tau=tau, top_k=8)
    return {"model": model, "sample": sample, "templates": templates, "table": table, **info}


def _prepare(ds):
    ds = _done(ds).load()
    return ds.isel(shot=0) if "shot" in ds.dims else ds


def report_chart(ds, *, case: dict | None = None):
    """One altair chart with the three panels of the report (built from :mod:`psens.ips.tables`
    and :mod:`psens.ips.charts`, as the widgets are)."""
    from psens._charts import altair
    from psens.ips import charts as plots_ips
    from psens.ips import tables
    from psens.ips.headline import headline

    alt = altair()

    ds = _prepare(ds)
    tau = run_settings(ds).tau
    models = model_names(ds)
    orders = headline(ds, tau=tau)  # the numbers of the summary above the charts
    by_order = plots_ips.order_ips_chart(
        orders,
        title=f"IPS by interaction order (paper §4.3; {orders.attrs['pools']}); "
        f"ticks: noise floor ({orders.attrs['floor']})",
    )
    case = case or _case(ds)
    cases = plots_ips.case_study_chart(
        case["table"],
        case["templates"],
        tau=tau,
        title=f"{case['model']}, sample {case['sample']}: top interactions (fig. 3a)",
    )
    classes = plots_ips.classes_chart(
        tables.class_table(ds, models, tau=tau), title="Salient interaction classes (fig. 3b)"
    )
    return alt.vconcat(by_order, cases, classes).resolve_scale(color="independent")


def template_text(name: str) -> str:
    """How template ``name`` lays out a multiple-choice item (its fixed text, with the
    question and options as placeholders), e.g. ``'Question: … / Answers: / A.… / Answer:'``;
    '' for a template psens does not know."""
    from psens import prompts

    try:
        t = prompts.get_template(name)
    except (KeyError, ValueError):
        return ""
    option = t.option.replace("{label}", "A").replace("{text}", "…")
    parts = [t.header, t.question.replace("{question}", "…")]
    if t.kind == "mcq":
        parts += [t.options_header, option, t.option.replace("{label}", "B").replace("{text}", "…")]
    parts.append(t.answer)
    return " / ".join(p.replace("\n", " ") for p in parts if p)


def _store_of(ds) -> str | None:
    """The run's store as an absolute path when it is found from here (notebooks run in
    ``notebooks/``, so a relative path would not reach it), else as configured."""
    from psens.settings import run_config

    store = run_config(ds).get("store")
    if not isinstance(store, str) or not store:
        return None
    found = Path(store).expanduser()
    return str(found.resolve()) if found.exists() else store


def _explain(ds, case: dict, store_path: str | None) -> str:
    """The HTML between the summary and the charts: how to read each chart, the templates,
    the case-study item, what to do next. Every value from the data is escaped."""
    e = html.escape
    tau = run_settings(ds).tau
    ta, tb = case["templates"]
    rows = []
    for name in map(str, ds["template"].values):
        text = template_text(name)
        if not text and "prompt" in ds:  # a template psens does not know: its first prompt
            first = ds["prompt"].sel(template=name).values.ravel()
            text = str(first[0]) if first.size else ""
        rows.append(f"<tr><td><strong>{e(name)}</strong></td><td><code>{e(text)}</code></td></tr>")
    templates = (
        "<p>The templates ask the same question in equivalent wordings (only the fixed text "
        "around the question and options differs; <code>…</code> is the item's text):</p>"
        f"<table>{''.join(rows)}</table>"
    )
    words = ", ".join(e(w) for w in case.get("words", []))
    prompt = ""
    if "prompt" in ds:
        sub = ds["prompt"].sel(sample=case["sample"], template=ta)
        prompt = str(np.asarray(sub.values).ravel()[0])
    preds = [*case.get("predictions", []), "?", "?"][:2]  # under T and T-hat
    said = "; ".join(
        f"{e(t)} → {e(str(x).strip() or '?')}" for t, x in zip((ta, tb), preds, strict=True)
    )
    target = str(case.get("target", "")).strip()
    item = (
        "<p><strong>The case-study item</strong> (middle chart): "
        f"sample <code>{e(case['sample'])}</code>, "
        f"model <code>{e(case['model'])}</code>. Its prompt under {e(ta)}:</p>"
        f"<pre>{e(prompt)}</pre><p>Its {len(case.get('words', []))} input words (the players "
        f"whose coalitions are the interactions): <strong>{words}</strong>. "
        f"Predicted answer: {said}" + (f" (correct: {e(target)})" if target else "") + ".</p>"
    )
    reading = [
        "<strong>IPS by interaction order</strong> (top): each bar is a model's IPS, the mean "
        "over samples and template pairs of how much the salient interactions between the "
        "input words change from one template to another, on a 0–2 scale: 0 means the same "
        "interactions with the same effects under every template, 2 means every salient "
        "interaction changes completely (it flips sign or appears under one template only); "
        "low, mid and high orders are interactions of few (at most n/3), some (at most 2n/3) "
        "or many of the item's n words; the whiskers are bootstrap 95% intervals over "
        "samples and the ticks the noise floor, the IPS that numerical noise alone gives.",
        "<strong>One item under two templates</strong> (middle): the item's strongest "
        "interactions, each a set of words (AND: all of them together; OR: any of them), with "
        f"their normalised effect (−1 to 1) under {e(ta)} (blue) and {e(tb)} (red); the dashed "
        f"lines at ±τ = ±{tau:g} are the salience threshold, so a bar beyond them is a "
        "salient interaction that counts in IPS.",
        "<strong>Salient interaction classes</strong> (bottom): every interaction salient "
        "under either template of a pair is stable (same sign, similar effect) or unstable "
        "(opposite sign, or same sign with an effect more than twice or less than half as "
        "large), counted separately for items whose predicted answer changed between the two "
        "templates and items whose answer stayed the same.",
    ]
    guide = (
        "<h2>How to read the charts</h2><ol>"
        + "".join(f"<li>{x}</li>" for x in reading)
        + "</ol><p><strong>Output consistency</strong> (in the summary) is the share of items "
        "whose predicted answer is the same under every template (1 = the answer never "
        "changes): IPS looks beneath it, at whether the model reaches that answer through the "
        "same words.</p>"
    )
    store_q = shlex.quote(store_path) if store_path else "runs/your_run.zarr"
    nxt = (
        "<h2>What next</h2><p>Explore this run interactively: "
        f"<code>PSENS_RUN={e(store_q)} make lab</code> opens JupyterLab on "
        "<code>notebooks/00_start_here.ipynb</code>; notebooks 02 (case studies) and 04 "
        "(orders) read the same run. In Python: "
        f"<code>import psens; ds = psens.open_run({e(repr(store_path or store_q))}); "
        "psens.widgets.OrderIPS(ds)</code> (also <code>CaseStudy(ds)</code>, "
        "<code>InteractionClasses(ds)</code>). Numbers on the command line: "
        f"<code>psens summary {e(store_q)}</code>.</p>"
    )
    return guide + templates + item + nxt


def _solvers_fact(ds) -> str | None:
    """The run's solver; with several, the one shown (the first) and the others."""
    from psens.ips import solver_names

    if "solver" not in ds.dims:
        return run_settings(ds).solver
    first, *rest = solver_names(ds)
    return f"{first} (shown; the run also holds {', '.join(rest)})"


def write_report(ds, path: str | os.PathLike, summary: str | None = None) -> Path:
    """Write the report as one offline HTML file and return its path.

    Above the charts: the run's facts and summary, one sentence per chart on how to read it
    (IPS and its 0–2 scale, the dashed ±τ lines, the classes, output consistency), the
    templates' texts, the case-study item (its prompt, words and predictions) and the
    commands that open this run in the notebooks and widgets.
    """
    from psens.runner import summarize

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = summary or summarize(ds)
    shown = _prepare(ds)
    case = _case(shown)
    with warnings.catch_warnings():  # the three panels share one "pick" selection: fine
        warnings.simplefilter("ignore", UserWarning)
        chart = report_chart(ds, case=case)
        page = chart.to_html(inline=True, json_kwds={"cls": _ScriptSafeJSONEncoder})
    facts = {
        "dataset": ds.attrs.get("dataset"),
        "τ": run_settings(ds).tau,
        "solver": _solvers_fact(ds),
        "samples": ds.sizes["sample"],
        "templates": ", ".join(map(str, ds["template"].values)),
    }
    line = ", ".join(f"{k} {v}" for k, v in facts.items() if v not in (None, ""))
    head = (
        f"<h1>psens run report</h1><p>{html.escape(line)}</p><pre>{html.escape(text)}</pre>"
        + _explain(shown, case, _store_of(ds))
    )
    style = (
        "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
        "pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}"
        "td{padding:2px 8px;vertical-align:top}</style>"
    )
    before, tag, after = page.rpartition("<body>")  # the bundled JS may contain "<body>" too
    page = before + tag + style + head + after
    path.write_text(page)
    return path
