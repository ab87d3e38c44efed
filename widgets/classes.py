"""InteractionClasses: stable and unstable salient interactions (paper §3.3, fig. 3b)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import altair as alt
import ipywidgets
import traitlets

from psens._validation import fail
from psens.ips.charts import classes_chart
from psens.ips.tables import ORDER_LEVELS, class_table
from psens.store.labels import model_names
from psens.store.pairs import pair_label, resolve_pair

from ._base import ChartWidget, check_run

__all__ = ["InteractionClasses"]


class InteractionClasses(ChartWidget):
    """Shares of the three interaction classes per model, split by whether the model's
    prediction changed between the two templates (fig. 3b).

    Over the union of the salient sets of a template pair: *opposite sign*; *same sign,
    different effect* (:math:`|b|/|a| > 2` or :math:`< 0.5`); *same sign, similar effect*
    (:func:`psens.ips.interaction_classes`). Counts are pooled over samples (and over all
    template pairs when ``pair`` is None) before taking shares.

    Parameters
    ----------
    ds : xarray.Dataset
        A psens run or a slice of one.
    pair : int or str, optional
        A template pair: its index on the run's ``pair`` dim (``ds.template_a`` /
        ``ds.template_b``) or its name (``"ips1|ips2"``, ``"ips2-ips1"``; stored as the
        index); None pools all pairs (shown as "all pairs").
    tau : float, optional
        Salience threshold (default: the run's own τ, :func:`psens.settings.run_settings`).
    order : {"all", "low", "mid", "high"}
        Restrict to interactions of one order band.
    models : list of str, optional
    shot : int, optional
        For runs with a ``shot`` dim.

    Examples
    --------
    >>> import psens.synthetic, psens.widgets
    >>> w = psens.widgets.InteractionClasses(psens.synthetic.synthetic_run(n_samples=3), pair=0)
    >>> sorted(w.tables["classes"]["group"].unique())
    ['changed', 'unchanged']
    """

    models = traitlets.List(traitlets.Unicode())
    pair = traitlets.Union(
        [traitlets.Int(), traitlets.Unicode()], default_value=None, allow_none=True
    )
    order = traitlets.Enum(ORDER_LEVELS, default_value="all")
    shot = traitlets.Int(None, allow_none=True)
    _state = ("tau", "models", "pair", "order", "shot")
    #: the pair dropdown's value for "all pairs" (a None value would show a blank box)
    ALL_PAIRS: ClassVar[str] = "all"
    _control_none: ClassVar[dict[str, Any]] = {"pair": ALL_PAIRS}

    def __init__(self, ds, *, models: Sequence[str] | None = None, **state: Any) -> None:
        check_run(ds, type(self).__name__)
        names = model_names(ds)
        super().__init__(ds, models=list(models) if models is not None else names, **state)

    @traitlets.validate("models")
    def _valid_models(self, proposal):
        return self._check_models(proposal["value"], "InteractionClasses")

    @traitlets.validate("pair")
    def _valid_pair(self, proposal):
        p, n = proposal["value"], self.ds.sizes.get("pair", 0)
        if p == self.ALL_PAIRS:
            return None
        if isinstance(p, str):  # a pair by name
            if "template_a" not in self.ds.coords:
                fail("InteractionClasses", f"pair={p!r}: the run has no pair names", "Use an index")
            a, b = self.ds["template_a"].values, self.ds["template_b"].values
            return resolve_pair(p, a, b, "InteractionClasses")
        if p is not None and not 0 <= p < n:
            fail("InteractionClasses", f"pair={p} is out of range", f"Use 0..{n - 1} or None")
        return p

    def pair_options(self) -> list[tuple[str, int | None]]:
        """``(label, value)`` of every template pair, all pairs first."""
        opts: list[tuple[str, int | None]] = [("all pairs", None)]  # None: ALL_PAIRS
        if "template_a" in self.ds.coords:
            for k, (a, b) in enumerate(
                zip(self.ds["template_a"].values, self.ds["template_b"].values, strict=True)
            ):
                opts.append((pair_label(a, b), k))  # the pair's label, as in results
        return opts

    def _controls(self) -> dict[str, ipywidgets.Widget]:
        out: dict[str, ipywidgets.Widget] = {
            "pair": ipywidgets.Dropdown(
                options=[(k, self.ALL_PAIRS if v is None else v) for k, v in self.pair_options()],
                value=self.ALL_PAIRS if self.pair is None else self.pair,
                description="templates",
            ),
            "tau": self._tau_control(),
            "order": ipywidgets.Dropdown(
                options=list(ORDER_LEVELS), value=self.order, description="order"
            ),
            "models": self._models_control(),
        }
        return {**out, **self._shot_control()}

    def _compute(self) -> dict[str, Any]:
        table = class_table(
            self.ds,
            self.models,
            tau=self.tau,
            pair=self.pair,
            order=None if self.order == "all" else self.order,
            shot=self.shot,
        )
        return {"classes": table}

    def _pair_label(self) -> str:
        return dict((v, k) for k, v in self.pair_options())[self.pair]

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        title = f"Salient interaction classes ({self._pair_label()}, τ = {self.tau:.2f})"
        if self.order != "all":
            title += f", {self.order}-order"
        return classes_chart(tables["classes"], title=title)

    def _summary(self, tables: dict[str, Any]) -> str:
        t = tables["classes"]
        if t.empty:
            return "no model selected"
        parts = []
        for group in ("changed", "unchanged"):
            rows = t[t["group"] == group]
            tot = rows.groupby("label", sort=False)["count"].sum()
            share = tot / tot.sum() if tot.sum() else tot * 0
            unstable = 1 - share.get("same sign, similar effect", 0.0)
            n_pairs = rows.drop_duplicates("model")["n_pairs"].sum()
            parts.append(f"output {group}: {n_pairs} pairs, {unstable:.0%} unstable")
        return "pooled over the models shown — " + "; ".join(parts)
