"""OrderIPS: IPS by interaction order per model (paper §4.3, fig. 9 and fig. 11)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import ipywidgets
import traitlets

from psens._validation import fail
from psens.ips.charts import order_ips_chart
from psens.ips.floor import floor_label, floor_test_line, noise_floor
from psens.ips.tables import (
    ORDER_LEVELS,
    model_meta,
    order_ips_table,
    per_sample_ips,
    sample_subsets,
    select_samples,
)
from psens.store.labels import model_names

from ._base import ChartWidget, check_run

__all__ = ["OrderIPS"]


class OrderIPS(ChartWidget):
    """IPS of low-, mid- and high-order interactions for every model.

    Orders follow the paper (§4.3): low :math:`1\\le|S|\\le\\lfloor n/3\\rfloor`, mid up to
    :math:`\\lfloor 2n/3\\rfloor`, high above, with n the sample's own number of variables;
    ``all`` is the plain IPS. Each bar is the mean over samples, skipping samples with no
    salient interaction of that order in any template pair (the tooltip says how many),
    with a bootstrap CI over samples (:func:`psens.ips.tables.order_ips_table`). A black tick
    marks the noise floor of each bar (:func:`psens.ips.floor.noise_floor` at the current τ:
    measured when the run has it, else jitter; the status line says which) and the tooltip
    and status line give IPS − floor with its CI and p (:func:`psens.ips.floor.floor_test`).

    Parameters
    ----------
    ds : xarray.Dataset
        A psens run or a slice of one.
    tau : float, optional
        Salience threshold on normalised interactions (default: the run's own τ,
        :func:`psens.settings.run_settings`).
    models : list of str, optional
        Models to show (default: all).
    subset : str, default "all"
        Samples to average over: ``"all"`` or ``"<coord>=<value>"`` for a per-sample
        coordinate (``n_vars=5``, ``dataset=arc``, ...); see ``w.controls["subset"]``.
    types : list of str, default ["low", "mid", "high"]
        Which orders of ``all, low, mid, high`` to draw (the ``order`` column of the table;
        the argument keeps its name for existing notebooks).
    layout : {"grouped", "by_order"}
        ``grouped``: models on x, orders side by side (fig. 9); ``by_order``: one panel per
        order, models sorted by series and size (fig. 11).
    shot : int, optional
        Shot count to show when the run has a ``shot`` dim (default: the first).
    floor : bool, optional
        Show the noise floor. Default: on when the run has a measured floor or at most
        :attr:`JITTER_GAMES` games (a jitter floor decomposes every game again on each τ).
    solver : str, optional
        A run with several solvers: whose interactions (default: the first).

    Examples
    --------
    >>> import psens.synthetic, psens.widgets
    >>> w = psens.widgets.OrderIPS(psens.synthetic.synthetic_run(n_samples=3))
    >>> w.tau = 0.2  # the slider moves and the chart updates in place
    >>> sorted(w.tables["ips"]["order"].unique())
    ['all', 'high', 'low', 'mid']
    """

    models = traitlets.List(traitlets.Unicode())
    subset = traitlets.Unicode("all")
    types = traitlets.List(traitlets.Unicode(), default_value=["low", "mid", "high"])
    layout = traitlets.Enum(("grouped", "by_order"), default_value="grouped")
    shot = traitlets.Int(None, allow_none=True)
    floor = traitlets.Bool(True)
    #: largest number of games (model × sample × [shot ×] template) whose jitter floor is on
    #: by default (about 10 ms each on one core)
    JITTER_GAMES = 500
    _state = ("tau", "models", "subset", "types", "layout", "shot", "floor")

    def __init__(self, ds, *, models: Sequence[str] | None = None, **state: Any) -> None:
        check_run(ds, type(self).__name__)
        names = model_names(ds)
        self._cache: dict[tuple, Any] = {}
        self._meta = model_meta(ds)
        if state.get("floor") is None:
            games = ds["v"].size // max(ds.sizes["subset"], 1) if "v" in ds else 0
            state["floor"] = "floor" in ds.variables or 0 < games <= self.JITTER_GAMES
        super().__init__(ds, models=list(models) if models is not None else names, **state)

    @traitlets.validate("models")
    def _valid_models(self, proposal):
        return self._check_models(proposal["value"], "OrderIPS")

    @traitlets.validate("types")
    def _valid_types(self, proposal):
        bad = [t for t in proposal["value"] if t not in ORDER_LEVELS]
        if bad or not proposal["value"]:
            fail("OrderIPS", f"types={proposal['value']!r}", f"Pick one or more of {ORDER_LEVELS}")
        return list(proposal["value"])

    @traitlets.validate("subset")
    def _valid_subset(self, proposal):
        if proposal["value"] not in sample_subsets(self.ds):
            fail("OrderIPS", f"subset={proposal['value']!r}", f"Use {sample_subsets(self.ds)}")
        return proposal["value"]

    def _controls(self) -> dict[str, ipywidgets.Widget]:
        out: dict[str, ipywidgets.Widget] = {
            "tau": self._tau_control(),
            "subset": ipywidgets.Dropdown(
                options=sample_subsets(self.ds), value=self.subset, description="samples"
            ),
            "types": ipywidgets.SelectMultiple(
                options=list(ORDER_LEVELS), value=tuple(self.types), rows=4, description="orders"
            ),
            "layout": ipywidgets.ToggleButtons(
                options=[("fig. 9: grouped", "grouped"), ("fig. 11: by order", "by_order")],
                value=self.layout,
            ),
            "models": self._models_control(),
            "floor": ipywidgets.Checkbox(value=self.floor, description="noise floor"),
        }
        return {**out, **self._shot_control()}

    def per_sample(self):
        """Per-sample IPS ``(model, sample, [shot,] order)`` at the current τ (cached)."""
        key = (self.solver, round(float(self.tau), 6))
        if key not in self._cache:
            self._cache[key] = per_sample_ips(self.ds, self.tau)
        return self._cache[key]

    def noise_floor(self):
        """The noise floor ``(model, sample, [shot,] template, order)`` at the current τ
        (cached): measured when the run has it, else jitter."""
        key = ("floor", self.solver, round(float(self.tau), 6))
        if key not in self._cache:
            self._cache[key] = noise_floor(self.ds, tau=self.tau)
        return self._cache[key]

    def _compute(self) -> dict[str, Any]:
        per = self.per_sample()
        keep = select_samples(self.ds, self.subset)["sample"].values
        floor = self.noise_floor().sel(sample=keep) if self.floor else None
        table = order_ips_table(per.sel(sample=keep), self._meta, self.shot, floor=floor)
        return {"ips": table[table["model"].isin(self.models)].reset_index(drop=True)}

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        title = f"IPS by interaction order (τ = {self.tau:.2f}, samples: {self.subset})"
        if "solver" in self.run.dims:
            title += f", solver {self.solver}"
        return order_ips_chart(tables["ips"], orders=self.types, layout=self.layout, title=title)

    def _summary(self, tables: dict[str, Any]) -> str:
        t = tables["ips"]
        if t.empty:
            return "no model selected"
        parts = []  # per model: models are never averaged together
        for model, rows in t.groupby("model", sort=False):
            bands = rows.set_index("order")["ips"]
            parts.append(
                f"{model}: " + ", ".join(f"{o} {bands[o]:.3f}" for o in self.types if o in bands)
            )
        skipped = int(t["n_skipped"].sum())
        text = (
            f"IPS — {'; '.join(parts)}; "
            f"{skipped} (model, sample, order) cells skipped for lack of salient interactions"
        )
        if "floor" not in t.columns:
            return text + ". Noise floor off (floor=True shows it)"
        rows = t[t["order"] == "all"]
        tests = "; ".join(f"{r['model']}: {floor_test_line(r)}" for _, r in rows.iterrows())
        return (
            f"{text}. Noise floor ({floor_label(self.noise_floor())}, ticks), all orders: {tests}"
        )
