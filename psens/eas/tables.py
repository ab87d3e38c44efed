"""One EAS instance up close: its key, its per-template scores and their HTML (no UI).

* :func:`instance_key` — one string key per instance row, ``"<model_name>|<dataset>|<id>"``
  (what the zone scatter's click selection reports);
* :func:`instance_detail` — the per-template heuristic and judge scores and the responses of
  one instance, from judged response rows;
* :func:`instance_detail_html` — that detail and the instance's metrics as an HTML fragment
  (every text from the data HTML-escaped).

References
----------
.. [1] Muthukumarana et al., "Prompt Sensitivity or Evaluation Artifact?"; the full
   reference is in :mod:`psens.eas`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from psens.eas.metric import judge_float
from psens.eas.scoring import Compat, heuristic_scores

__all__ = ["DETAIL_COLUMNS", "instance_detail", "instance_detail_html", "instance_key"]

#: Columns of :func:`instance_detail`.
DETAIL_COLUMNS = [
    "template_id",
    "role",
    "fmt",
    "prefix",
    "heuristic",
    "judge",
    "raw_response",
    "judge_raw",
]


def instance_key(table: pd.DataFrame) -> pd.Series:
    """One string key per instance row: ``"<model_name>|<dataset>|<id>"`` (the columns that
    exist), as used by :func:`psens.eas.charts.zones_scatter` selections and the zone explorer.

    Parameters
    ----------
    table : DataFrame
        Instance rows or response rows.

    Returns
    -------
    pandas.Series
        Named ``key``, on the index of ``table``; the row numbers when none of the columns
        exists.
    """
    cols = [c for c in ("model_name", "dataset", "id") if c in table.columns]
    if not cols:
        return pd.Series([str(i) for i in range(len(table))], index=table.index, name="key")
    key = table[cols[0]].astype(str)
    for c in cols[1:]:
        key = key + "|" + table[c].astype(str)
    return key.rename("key")


def instance_detail(rows: pd.DataFrame, key: str, compat: Compat | None = None) -> pd.DataFrame:
    """The per-template scores of one instance: ``template_id, role, fmt, prefix, heuristic,
    judge, raw_response, judge_raw`` (sorted by template), from judged response rows.

    Parameters
    ----------
    rows : DataFrame
        Judged response rows (the published judged-file columns).
    key : str
        ``"<model_name>|<dataset>|<id>"`` (:func:`instance_key`).
    compat : {"eas"}, optional
        ``"eas"``: the published heuristic scorers.

    Returns
    -------
    DataFrame
        ``heuristic`` is :func:`psens.eas.scoring.heuristic_scores`, ``judge`` the verdict as
        1.0/0.0 (NaN when missing), as in :func:`psens.eas.instance_metrics`. Empty (with
        these columns) when no row has ``key``.
    """
    sub = rows[instance_key(rows).to_numpy() == key]
    if sub.empty:
        return pd.DataFrame(columns=DETAIL_COLUMNS)
    sub = sub.reset_index(drop=True)
    out = sub[[c for c in ("template_id", "role", "fmt", "prefix") if c in sub.columns]].copy()
    out["heuristic"] = heuristic_scores(sub, compat=compat).to_numpy()
    out["judge"] = judge_float(sub["judge_correct"]).to_numpy()
    out["raw_response"] = sub["raw_response"].to_numpy()
    out["judge_raw"] = sub["judge_raw"].to_numpy() if "judge_raw" in sub.columns else None
    return out.sort_values("template_id").reset_index(drop=True)


def _cell(value: Any, width: int = 90) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "<i>failed</i>"
    text = str(value).replace("\n", " ⏎ ")
    text = text if len(text) <= width else text[: width - 1] + "…"
    return html.escape(text)


def instance_detail_html(
    metrics: pd.Series | Mapping[str, Any] | None, detail: pd.DataFrame
) -> str:
    """An instance's metrics and per-template responses as an HTML fragment.

    Parameters
    ----------
    metrics : Series or mapping, optional
        The instance's row of :func:`psens.eas.instance_metrics` with its ``zone``
        (``id``, ``model_name``, ``dataset``, ``zone``, ``sens_heuristic``, ``sens_judge``;
        ``effect_*`` when present).
    detail : DataFrame
        :func:`instance_detail` of the instance.

    Returns
    -------
    str
        Text from the data (ids, names, zone, templates, responses, judge replies) is
        HTML-escaped; a failed call shows as *failed*, long responses are cut at 90
        characters.
    """
    parts = []
    if metrics is not None:
        eff = ", ".join(
            f"{k}: Δh={metrics.get(f'effect_{k}_heuristic', np.nan):+.2f} "
            f"Δj={metrics.get(f'effect_{k}_judge', np.nan):+.2f}"
            for k in ("role", "fmt", "prefix")
        )
        parts.append(
            f"<b>{html.escape(str(metrics['id']))}</b> · {html.escape(str(metrics['model_name']))}"
            f" · {html.escape(str(metrics['dataset']))} · zone "
            f"<b>{html.escape(str(metrics['zone']))}</b><br>"
            f"SensH {metrics['sens_heuristic']:.3f} · SensJ {metrics['sens_judge']:.3f} · "
            f"EAS {abs(metrics['sens_heuristic'] - metrics['sens_judge']):.3f}<br>"
            f"<small>{eff}</small>"
        )
    if not detail.empty:
        body = "".join(
            f"<tr><td>{html.escape(str(r.template_id))}</td><td>{_cell(r.heuristic)}</td>"
            f"<td>{_cell(r.judge)}</td><td>{_cell(r.raw_response)}</td>"
            f"<td>{_cell(r.judge_raw, 30)}</td></tr>"
            for r in detail.itertuples()
        )
        parts.append(
            '<table class="psens-eas-detail" style="font-size:smaller">'
            "<thead><tr><th>template</th><th>heuristic</th><th>judge</th><th>response</th>"
            f"<th>judge said</th></tr></thead><tbody>{body}</tbody></table>"
        )
    elif metrics is not None:
        parts.append("<small>Pass the judged rows (rows=...) to see each template.</small>")
    return "<br>".join(parts) or "<small>Click an instance on the scatter.</small>"
