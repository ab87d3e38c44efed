"""DBSAHighlights: two models' DBSA highlights side by side, their top-k tables and bars.

The state (two models, the test statistic, the value shown, k, ...) lives in traits; every
change recomputes the two Datasets to show (re-analysing stored embeddings when another
statistic or distance is picked, cached), then the view: two highlighted texts
(``ipywidgets.HTML``), the top-k table and a bar chart, all built by the UI-free
:func:`psens.dbsa.tables.dbsa_view`, the chart shown in one long-lived ``alt.JupyterChart``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import altair as alt
import ipywidgets
import numpy as np
import pandas as pd
import traitlets
import xarray as xr

from psens._validation import check_in_interval, fail
from psens.dbsa.ablations import spearman
from psens.dbsa.distances import STATISTICS
from psens.dbsa.metric import analyse
from psens.dbsa.tables import VALUE_LABELS, available_statistics, check_results, dbsa_view

from ._base import BaseWidget

__all__ = ["DBSAHighlights", "dbsa_view"]

#: Labels of the test statistics (the "metric" of the comparison).
STATISTIC_LABELS = {"energy": "energy distance", "emd": "EMD", "mean": "mean difference"}


class DBSAHighlights(BaseWidget):
    """Compare the DBSA highlights of two models (or two settings) of the same text.

    Controls pick model A and model B, the test statistic (energy distance, EMD or mean
    difference — every statistic when the Datasets keep their embeddings, which are then
    re-analysed without calling a model; else only the one they were analysed with), the
    distance, what is shown (the per-model normalised score, or the effect size ω on one
    scale for both models), k and whether only the top k tokens are shaded. The view is the
    two highlighted texts side by side, their top-k tables (paper table 3 layout) and a bar
    chart of the top-k effects of both models; clicking a bar picks its token (see
    :meth:`on_select`) and lists that token's neighbours and pair statistics.

    Parameters
    ----------
    results : mapping of str to Dataset
        ``{model name: DBSA Dataset}`` as returned by :func:`psens.dbsa.dbsa` /
        :func:`psens.dbsa.analyse`; all of the same text.
    **state
        Initial trait values (``model_a``, ``model_b``, ``statistic``, ``metric``,
        ``value``, ``k``, ``top_only``, ``alpha``).

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
        One control per state trait, linked both ways.
    html_a, html_b, table_html, details : ipywidgets.HTML
        The highlighted texts, the top-k tables and the picked tokens' pairs.
    jchart : altair.JupyterChart
        The bar chart, updated in place.
    tables : dict
        ``top_k`` (:func:`psens.dbsa.charts.compare_top_k` table) and ``a``, ``b`` (the
        Datasets shown).
    ui : ipywidgets.VBox

    Examples
    --------
    >>> w = DBSAHighlights({"model-1": ds1, "model-2": ds2}, k=3)  # doctest: +SKIP
    >>> w.statistic = "emd"  # doctest: +SKIP
    """

    model_a = traitlets.Unicode()
    model_b = traitlets.Unicode()
    statistic = traitlets.Unicode("energy")
    metric = traitlets.Unicode("cosine")
    value = traitlets.Unicode("score")
    k = traitlets.Int(5)
    top_only = traitlets.Bool(False)
    alpha = traitlets.Float(0.05)
    _pick_field = "token"
    _clear_pick_on_redraw = True
    selected = traitlets.List(traitlets.Unicode(), help="tokens picked on the chart")
    _state = ("model_a", "model_b", "statistic", "metric", "value", "k", "top_only", "alpha")
    _choices: ClassVar[dict[str, str]] = {"model_a": "model_names", "model_b": "model_names"}

    def __init__(self, results: Mapping[str, xr.Dataset], **state: Any) -> None:
        self.results = check_results(results, "DBSAHighlights")
        self.model_names = list(self.results)
        first = next(iter(self.results.values()))
        texts = {ds.attrs["text"] for ds in self.results.values()}
        if len(texts) > 1:
            fail(
                "DBSAHighlights",
                f"the results are of {len(texts)} different texts",
                "Compare results of one text (one widget per text)",
            )
        self.statistics = [
            s
            for s in STATISTICS
            if all(s in available_statistics(ds) for ds in self.results.values())
        ]
        self.metrics = (
            ["cosine", "l1", "l2"]
            if all(available_statistics(ds) == list(STATISTICS) for ds in self.results.values())
            else [str(first.attrs.get("metric", "cosine"))]
        )
        self.n_tokens = max(
            len(set(map(str, ds["text_token"].values[ds["tested"].values])))
            for ds in self.results.values()
        )
        state.setdefault("model_a", self.model_names[0])
        state.setdefault("model_b", self.model_names[min(1, len(self.model_names) - 1)])
        state.setdefault("statistic", str(first.attrs.get("statistic", self.statistics[0])))
        state.setdefault("metric", str(first.attrs.get("metric", self.metrics[0])))
        state.setdefault("k", min(5, self.n_tokens))
        self._cache: dict[tuple[str, str, str], xr.Dataset] = {}
        pane = ipywidgets.Layout(width="50%", padding="0 8px")
        self.html_a = ipywidgets.HTML(layout=pane)
        self.html_b = ipywidgets.HTML(layout=pane)
        self.table_html = ipywidgets.HTML()
        self.details = ipywidgets.HTML()
        super().__init__(**state)
        self._build()
        self.observe(self._on_selected, names="selected")

    def _body(self) -> ipywidgets.Widget:
        return ipywidgets.VBox(
            [
                ipywidgets.HBox([self.html_a, self.html_b]),
                self.table_html,
                self.jchart,
                self.details,
            ]
        )

    # -- validation ----------------------------------------------------------------

    @traitlets.validate("statistic")
    def _valid_statistic(self, proposal):
        return self._one_of("statistic", proposal["value"], self.statistics)

    @traitlets.validate("metric")
    def _valid_metric(self, proposal):
        return self._one_of("metric", proposal["value"], self.metrics)

    @traitlets.validate("value")
    def _valid_value(self, proposal):
        return self._one_of("value", proposal["value"], list(VALUE_LABELS))

    @traitlets.validate("k")
    def _valid_k(self, proposal):
        k = int(proposal["value"])
        if not 1 <= k <= self.n_tokens:
            fail("DBSAHighlights", f"k={k}", f"Use 1..{self.n_tokens} (the tested tokens)")
        return k

    @traitlets.validate("alpha")
    def _valid_alpha(self, proposal):
        return check_in_interval(proposal["value"], "DBSAHighlights", "alpha", 0.0, 1.0)

    # -- state -> view ----------------------------------------------------------------
    def _controls(self) -> dict[str, ipywidgets.Widget]:
        return {
            "model_a": self._dropdown("model_a", "model A"),
            "model_b": self._dropdown("model_b", "model B"),
            "statistic": ipywidgets.Dropdown(
                options=[(STATISTIC_LABELS[s], s) for s in self.statistics],
                value=self.statistic,
                description="statistic",
            ),
            "metric": ipywidgets.Dropdown(
                options=self.metrics, value=self.metric, description="distance"
            ),
            "value": ipywidgets.Dropdown(
                options=[(label, v) for v, label in VALUE_LABELS.items()],
                value=self.value,
                description="show",
            ),
            "k": ipywidgets.IntSlider(
                value=self.k,
                min=1,
                max=self.n_tokens,
                description="top k",
                continuous_update=False,
            ),
            "top_only": ipywidgets.Checkbox(value=self.top_only, description="shade top k only"),
        }

    def dataset(self, model: str) -> xr.Dataset:
        """The analysed Dataset of ``model`` for the current statistic and distance (cached)."""
        ds = self.results[self._one_of("model", model, self.model_names)]
        key = (model, self.statistic, self.metric)
        own = (
            "effect_size" in ds.variables
            and ds.attrs.get("statistic", "energy") == self.statistic
            and ds.attrs.get("metric", "cosine") == self.metric
        )
        if own:
            return ds
        if key not in self._cache:
            a = ds.attrs
            self._cache[key] = analyse(
                ds,
                metric=self.metric,
                statistic=self.statistic,
                permutations=int(a.get("permutations", 500)),
                seed=int(a.get("analysis_seed", a.get("seed", 0))),
                combine=str(a.get("combine", "permutation")),
                n=a.get("n_used"),
                m=a.get("m_used"),
                neighbours=a.get("k_used"),
            )
        return self._cache[key]

    def _compute(self) -> dict[str, Any]:
        a, b = self.dataset(self.model_a), self.dataset(self.model_b)
        title = f"Top {self.k} tokens · {STATISTIC_LABELS[self.statistic]}, {self.metric} distance"
        view = dbsa_view(
            a,
            b,
            names=(self.model_a, self.model_b),
            k=self.k,
            value=self.value,
            top_only=self.top_only,
            alpha=self.alpha,
            title=title,
        )
        return {"a": a, "b": b, "top_k": view["table"], **view}

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        return tables["chart"]

    def _render(self) -> alt.TopLevelMixin:
        chart = super()._render()
        self.html_a.value = self.tables["html_a"]
        self.html_b.value = self.tables["html_b"]
        self.table_html.value = self.tables["table_html"]
        self._show_details()
        return chart

    def _summary(self, tables: dict[str, Any]) -> str:
        t = tables["top_k"]
        if self.model_a == self.model_b:
            n_sig = int(t["significant"].sum())
            return f"{self.model_a}: {n_sig} of the top {self.k} tokens with p < {self.alpha:g}"

        def series(ds: xr.Dataset) -> pd.Series:
            return pd.Series(ds["effect_size"].values, index=map(str, ds["token"].values))

        rho, n = spearman(series(tables["a"]), series(tables["b"]))
        top_a = set(t[(t["model"] == self.model_a) & t["top"]]["token"])
        top_b = set(t[(t["model"] == self.model_b) & t["top"]]["token"])
        return (
            f"Spearman ρ of all token effect sizes: {rho:.2f} over {n} tokens; "
            f"top-{self.k} overlap: {len(top_a & top_b)} token(s)"
        )

    # -- token picks ------------------------------------------------------------------
    def pair_table(self, token: str) -> pd.DataFrame:
        """Pairs of ``token`` in both models: position, neighbour, statistic, p-value."""
        rows = []
        models = dict.fromkeys([self.model_a, self.model_b])
        for model in models:
            ds = self.dataset(model)
            texts = ds["text_token"].values
            for i in np.flatnonzero([str(t) == token for t in texts]):
                for j, nb in enumerate(ds["neighbour_text"].values[i]):
                    if nb == "":
                        continue
                    rows.append(
                        {
                            "model": model,
                            "position": int(i),
                            "neighbour": str(nb),
                            "statistic": float(ds["statistic"].values[i, j]),
                            "p_value": float(ds["p_value_pair"].values[i, j]),
                        }
                    )
        return pd.DataFrame(
            rows, columns=["model", "position", "neighbour", "statistic", "p_value"]
        )

    def _show_details(self) -> None:
        if not self.selected:
            self.details.value = "<small>Click a bar to see that token's neighbours.</small>"
            return
        frames = [self.pair_table(t).assign(token=t) for t in self.selected]
        df = pd.concat(frames, ignore_index=True)[
            ["token", "model", "position", "neighbour", "statistic", "p_value"]
        ]
        self.details.value = df.to_html(index=False, float_format=lambda x: f"{x:.3f}")

    def _on_selected(self, change: dict) -> None:
        self._show_details()
