"""FormatSpace: two formats of a format-space run side by side, and sensitivity per dimension.

Pick a model, two formats (A, B) and an item: the widget shows the two prompts with their
difference marked (escaped HTML), each format's accuracy with its bootstrap CI over items,
the IPS between A and B by order band (IPS paper, eq. 3; the noise floor next to it) and a
chart of IPS per format dimension over the run's pairs one change apart
(:func:`psens.formats.analysis.dimension_sensitivity`), the dimensions in which A and B
differ drawn solid. The tables come from the UI-free :mod:`psens.formats.analysis`.
"""

from __future__ import annotations

import html
from typing import Any

import altair as alt
import ipywidgets
import numpy as np
import traitlets

from psens._validation import fail
from psens.formats.analysis import accuracy_table, dimension_sensitivity, format_coords
from psens.formats.charts import dimension_chart
from psens.formats.view import prompt_diff_html
from psens.ips import ORDER_LEVELS, sample_ips
from psens.store.labels import model_names

from ._base import ChartWidget

__all__ = ["FormatSpace"]


class FormatSpace(ChartWidget):
    """Compare two formats of a format-space run; IPS per format dimension.

    Parameters
    ----------
    ds : xarray.Dataset
        A run whose templates are formats (``fmt_*`` coordinates along ``template``:
        ``templates = {grammar = "default", k = 16, seed = 0}``).
    **state
        ``model``, ``format_a``, ``format_b`` (template names), ``sample`` (item id),
        ``tau``.

    Examples
    --------
    >>> w = FormatSpace(psens.open_run("data/runs/formats.nc"))  # doctest: +SKIP
    >>> w.format_b = w.format_names[3]  # doctest: +SKIP
    >>> w.tables["pair"]  # IPS between A and B by order  # doctest: +SKIP
    """

    model = traitlets.Unicode()
    format_a = traitlets.Unicode()
    format_b = traitlets.Unicode()
    sample = traitlets.Unicode()
    _state = ("model", "format_a", "format_b", "sample", "tau")

    def __init__(self, ds, **state: Any) -> None:
        if format_coords(ds).empty:
            fail(
                "FormatSpace",
                "the run has no format coordinates (fmt_* along template)",
                "Open a format-space run, e.g. data/runs/formats.nc",
            )
        self.format_names = [str(t) for t in ds["template"].values]
        self.sample_names = [str(s) for s in ds["sample"].values]
        self._dims_cache: dict[float, Any] = {}
        self._acc = None
        models = model_names(ds)
        state.setdefault("model", models[0])
        state.setdefault("format_a", self.format_names[0])
        state.setdefault("format_b", self._default_b(ds, state["format_a"]))
        state.setdefault("sample", self.sample_names[0])
        super().__init__(ds, **state)

    def _default_b(self, ds, a: str) -> str:
        """A format one change from ``a`` when there is one, else the next format."""
        coords = format_coords(ds)
        row = coords.loc[a]
        one = [t for t in coords.index if t != a and int((coords.loc[t] != row).sum()) == 1]
        return one[0] if one else next(t for t in self.format_names if t != a)

    @traitlets.validate("model")
    def _valid_model(self, proposal):
        return self._check_models([proposal["value"]], "FormatSpace")[0]

    @traitlets.validate("format_a", "format_b")
    def _valid_format(self, proposal):
        if proposal["value"] not in self.format_names:
            fail("FormatSpace", f"unknown format {proposal['value']!r}", "Use w.format_names")
        return proposal["value"]

    @traitlets.validate("sample")
    def _valid_sample(self, proposal):
        if proposal["value"] not in self.sample_names:
            fail("FormatSpace", f"unknown item {proposal['value']!r}", "Use w.sample_names")
        return proposal["value"]

    def _controls(self) -> dict[str, ipywidgets.Widget]:
        return {
            "model": ipywidgets.Dropdown(
                options=self.model_names, value=self.model, description="model"
            ),
            "format_a": ipywidgets.Dropdown(
                options=self.format_names, value=self.format_a, description="A"
            ),
            "format_b": ipywidgets.Dropdown(
                options=self.format_names, value=self.format_b, description="B"
            ),
            "sample": ipywidgets.Dropdown(
                options=self.sample_names, value=self.sample, description="item"
            ),
            "tau": self._tau_control(),
        }

    def _body(self) -> ipywidgets.Widget:
        self.diff = ipywidgets.HTML()
        self.pair_html = ipywidgets.HTML()
        self._fill_html()
        return ipywidgets.VBox([self.diff, self.pair_html, self.jchart])

    def _dimensions(self):
        if self.tau not in self._dims_cache:
            self._dims_cache[self.tau] = dimension_sensitivity(self.ds, self.tau, n_boot=500)
        return self._dims_cache[self.tau]

    def _compute(self) -> dict[str, Any]:
        ds = self.ds
        if self._acc is None:
            self._acc = accuracy_table(ds, n_boot=500)
        acc = self._acc[self._acc["model"] == self.model].set_index("template")
        coords = format_coords(ds)
        differ = [
            d for d in coords.columns if coords.at[self.format_a, d] != coords.at[self.format_b, d]
        ]
        tables: dict[str, Any] = {
            "accuracy": acc.loc[list(dict.fromkeys([self.format_a, self.format_b]))].reset_index(),
            "differ": differ,
            "dimensions": self._dimensions().query("model == @self.model"),
        }
        if self.format_a == self.format_b:
            tables["pair"] = None
        else:
            one = ds.sel(model=[self.model], template=[self.format_a, self.format_b])
            per = sample_ips(one, self.tau, orders=ORDER_LEVELS).isel(model=0)
            if "shot" in per.dims:
                per = per.isel(shot=0)
            dims = tables["dimensions"].drop_duplicates("order").set_index("order")
            tables["pair"] = {
                o: (float(np.nanmean(per.sel(order=o).values)), float(dims.at[o, "floor"]))
                if np.isfinite(per.sel(order=o).values).any()
                else (float("nan"), float(dims.at[o, "floor"]))
                for o in ORDER_LEVELS
            }
        s = self.sample_names.index(self.sample)
        prompts = ds["prompt"].isel(shot=0) if "shot" in ds["prompt"].dims else ds["prompt"]
        tables["prompts"] = (
            str(prompts.isel(sample=s).sel(template=self.format_a).values),
            str(prompts.isel(sample=s).sel(template=self.format_b).values),
        )
        return tables

    def _fill_html(self) -> None:
        t = self.tables
        if not t or not hasattr(self, "diff"):
            return
        acc = t["accuracy"].set_index("template")

        def head(name: str, tag: str) -> str:
            r = acc.loc[name]
            return f"{tag} {name}: accuracy {r['accuracy']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]"

        a, b = t["prompts"]
        self.diff.value = prompt_diff_html(
            a, b, title_a=head(self.format_a, "A"), title_b=head(self.format_b, "B")
        )
        if t["pair"] is None:
            self.pair_html.value = "<small>A and B are the same format.</small>"
            return
        cells = "".join(
            f"<td>{html.escape(o)}: {v:.3f} (floor {f:.3f})</td>"
            if np.isfinite(v)
            else f"<td>{html.escape(o)}: n/a</td>"
            for o, (v, f) in t["pair"].items()
        )
        differ = ", ".join(t["differ"]) or "nothing"
        self.pair_html.value = (
            f"<small>A and B differ in: {html.escape(differ)}. IPS between A and B, mean over "
            f"items, by order band:</small><table><tr>{cells}</tr></table>"
        )

    def _render(self) -> alt.TopLevelMixin:
        chart = super()._render()
        self._fill_html()
        return chart

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        return dimension_chart(
            tables["dimensions"],
            highlight=tables["differ"],
            title=f"{self.model}: IPS by format dimension (tau = {self.tau:.2f}; tick: floor)",
        ).properties(width=460, height=240)

    def _summary(self, tables: dict[str, Any]) -> str:
        d = tables["dimensions"]
        shown = d[d["order"] == "all"]
        if shown.empty or not shown["ips"].notna().any():
            return "no pair of formats one change apart has a salient interaction"
        top = shown.loc[shown["ips"].idxmax()]
        noise = int(d["within_noise"].sum())
        return (
            f"{len(shown)} dimensions with one-change pairs; largest IPS: {top['dimension']} "
            f"({top['ips']:.3f}); {noise} of {len(d)} (dimension, order) cells are inside "
            "their noise floor (CI reaches the floor): not findings"
        )
