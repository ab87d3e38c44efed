"""The side-by-side view of two DBSA results: highlights, top-k table and chart (no UI).

:func:`dbsa_view` turns two analysed Datasets of the same text into what a comparison shows:
the two highlighted texts (:func:`~psens.dbsa.highlight.highlight_html`), the top-k table of
both models (:func:`~psens.dbsa.charts.compare_top_k`) as a DataFrame and as HTML (paper table
3 layout), and the grouped bar chart (:func:`~psens.dbsa.charts.compare_top_k_chart`). The
helpers check the input (:func:`check_results`), list the statistics a Dataset can be
re-analysed with (:func:`available_statistics`) and compute the shading (:func:`shading`).
Every text taken from the data is HTML-escaped. altair is imported only when the chart is
built.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._charts import PICK
from .._validation import fail
from .charts import compare_top_k, compare_top_k_chart
from .distances import STATISTICS
from .highlight import highlight_html, token_titles

__all__ = [
    "COLOUR",
    "EMBEDDINGS",
    "VALUE_LABELS",
    "available_statistics",
    "check_results",
    "dbsa_view",
    "shading",
    "table_html",
]

#: What the shading and bars show.
VALUE_LABELS = {"score": "score (normalised per model)", "effect_size": "effect size ω (shared)"}
#: Variables a Dataset keeps when it can be re-analysed with another statistic or distance.
EMBEDDINGS = ("embedding_original", "embedding_perturbed", "neighbour_text", "tested")
#: Shade of the most important tokens (as in :func:`psens.dbsa.highlight.highlight`).
COLOUR = "#d62728"


def check_results(results: Any, where: str) -> dict[str, xr.Dataset]:
    """Refuse anything but ``{model name: DBSA Dataset}`` with scores or stored embeddings.

    Parameters
    ----------
    results : mapping of str to Dataset
        Outputs of :func:`psens.dbsa.dbsa` / :func:`psens.dbsa.analyse` (or
        :func:`psens.dbsa.collect` outputs, which keep their embeddings).
    where : str
        The caller's name, for the error message.

    Returns
    -------
    dict of str to Dataset
        The same Datasets under ``str`` names.

    Raises
    ------
    TypeError
        When ``results`` is not a mapping or a value is not a DBSA Dataset.
    ValueError
        When ``results`` is empty or a Dataset has neither scores nor embeddings.
    """
    if not isinstance(results, Mapping) or not results:
        fail(
            where,
            f"results is a {type(results).__name__} with no models",
            "Pass {model name: DBSA Dataset} (the output of psens.dbsa.dbsa or analyse)",
            TypeError if not isinstance(results, Mapping) else ValueError,
        )
    out: dict[str, xr.Dataset] = {}
    for name, ds in results.items():
        if not isinstance(ds, xr.Dataset) or "text" not in ds.attrs:
            fail(
                where,
                f"results[{name!r}] is not a DBSA Dataset",
                "Pass the output of psens.dbsa.dbsa / analyse",
                TypeError,
            )
        if "effect_size" not in ds.variables and not all(v in ds.variables for v in EMBEDDINGS):
            fail(where, f"results[{name!r}] has no scores", "Run psens.dbsa.analyse on it first")
        out[str(name)] = ds
    return out


def available_statistics(ds: xr.Dataset) -> list[str]:
    """Statistics a Dataset can show: all when its embeddings are stored, else its own.

    Parameters
    ----------
    ds : Dataset
        A DBSA Dataset.

    Returns
    -------
    list of str
        Names from :data:`psens.dbsa.distances.STATISTICS`.
    """
    if all(v in ds.variables for v in EMBEDDINGS):
        return list(STATISTICS)
    return [str(ds.attrs.get("statistic", "energy"))]


def shading(ds: xr.Dataset, value: str, scale: float, top: set[str] | None) -> np.ndarray:
    """Per-position shade in [0, 1] (NaN = plain): normalised score, or ω / shared max.

    Parameters
    ----------
    ds : Dataset
        An analysed DBSA Dataset.
    value : {"score", "effect_size"}
        ``score``: the per-model normalised ``score_position``; ``effect_size``: the token's
        ω divided by ``scale``.
    scale : float
        The largest ω shown (full colour) for ``value="effect_size"``.
    top : set of str, optional
        Shade only these tokens (None: every tested token).

    Returns
    -------
    numpy.ndarray
        One shade per text position.
    """
    if value == "score":
        shade = ds["score_position"].values.astype(float).copy()
    else:
        eff = dict(zip(map(str, ds["token"].values), ds["effect_size"].values, strict=True))
        shade = np.array(
            [
                eff[t] / scale if t in eff and scale > 0 else (0.0 if t in eff else np.nan)
                for t in map(str, ds["text_token"].values)
            ],
            dtype=float,
        )
    if top is not None:
        shade[[str(t) not in top for t in ds["text_token"].values]] = np.nan
    return np.clip(shade, 0.0, 1.0)


def table_html(table: pd.DataFrame, k: int) -> str:
    """The top-k tables as HTML, one per model (paper table 3 layout).

    Parameters
    ----------
    table : DataFrame
        :func:`psens.dbsa.charts.compare_top_k` output (its ``alpha`` in ``attrs``).
    k : int
        The k of the captions.

    Returns
    -------
    str
        Rank, token, effect size, p-value and p < α per model; model names and tokens are
        HTML-escaped.
    """
    alpha = float(table.attrs.get("alpha", 0.05))
    blocks = []
    for model, rows in table[table["top"]].groupby("model", sort=False):
        rows = rows.sort_values("rank")
        body = "".join(
            f"<tr><td>{int(r['rank'])}</td><td>{html.escape(str(r['token']))}</td>"
            f"<td>{r['effect_size']:.3f}</td><td>{r['p_value']:.3f}</td>"
            f"<td>{'✓' if r['significant'] else '✗'}</td></tr>"
            for _, r in rows.iterrows()
        )
        blocks.append(
            '<table class="psens-dbsa-topk" style="border-collapse:collapse;margin-right:2em">'
            f'<caption style="font-weight:600;text-align:left">{html.escape(str(model))}: '
            f"top {int(k)}</caption><thead><tr><th>#</th><th>word</th><th>effect size</th>"
            f"<th>p-value</th><th>p &lt; {alpha:g}</th></tr></thead><tbody>{body}</tbody></table>"
        )
    return '<div style="display:flex;flex-wrap:wrap">' + "".join(blocks) + "</div>"


def dbsa_view(
    a: xr.Dataset,
    b: xr.Dataset,
    *,
    names: tuple[str, str],
    k: int = 5,
    value: str = "score",
    top_only: bool = False,
    alpha: float = 0.05,
    title: str | None = None,
) -> dict[str, Any]:
    """The view of two analysed Datasets: highlights, top-k table and chart (pure).

    Parameters
    ----------
    a, b : Dataset
        Analysed DBSA results of the same text (``b`` may be ``a``).
    names : (str, str)
        Their labels.
    k : int
        Number of top tokens per model (table, bars and, with ``top_only``, the shading).
    value : {"score", "effect_size"}
        Shade and bar length: the per-model normalised score (paper tables 1–2) or the raw
        effect size on a scale shared by both models (largest ω of the two = full colour).
    top_only : bool
        Shade only each model's top ``k`` tokens (paper table 3).
    alpha : float
    title : str, optional
        Chart title.

    Returns
    -------
    dict
        ``html_a``, ``html_b`` (highlight HTML), ``table`` (:func:`compare_top_k` DataFrame),
        ``table_html`` and ``chart`` (``alt.Chart``, with a click selection on ``token``).
    """
    if value not in VALUE_LABELS:
        fail("dbsa_view", f"value={value!r}", f"Use one of {list(VALUE_LABELS)}")
    same = names[0] == names[1]
    results = {names[0]: a} if same else {names[0]: a, names[1]: b}
    table = compare_top_k(results, k, alpha=alpha)
    scale = max(float(np.nanmax(ds["effect_size"].values)) for ds in results.values())
    out: dict[str, Any] = {"table": table}
    for key, ds, name in (("html_a", a, names[0]), ("html_b", b, names[1])):
        own = table[(table["model"] == name) & table["top"]]
        spans = list(zip(ds["start"].values.tolist(), ds["end"].values.tolist(), strict=True))
        out[key] = highlight_html(
            ds.attrs["text"],
            spans,
            shading(ds, value, scale, set(own["token"]) if top_only else None),
            titles=token_titles(ds),
            colour=COLOUR,
            caption=name,
        )
    out["table_html"] = table_html(table, k)
    out["chart"] = compare_top_k_chart(table, value=value, select=PICK, title=title)
    return out
