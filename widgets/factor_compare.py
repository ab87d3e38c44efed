"""FactorCompare: two groups of models (or shot counts), overall and per order (fig. 10)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import ipywidgets
import numpy as np
import traitlets

from psens._validation import fail
from psens.ips.charts import factor_chart
from psens.ips.factors import matched_pairs
from psens.ips.tables import factor_table, format_value, group_values, model_meta, per_sample_ips
from psens.store.labels import model_names

from ._base import ChartWidget, check_run

__all__ = ["FactorCompare"]

#: Model metadata fields a comparison can split on, in the order the controls offer them.
FACTORS = ("kind", "arch", "shot", "params", "series", "family")
#: The "without the factor" side the paper uses for each field (group B).
BASELINES = {"kind": ("base",), "arch": ("moe",), "shot": (0,)}
#: The paired factor of :func:`psens.ips.factors.matched_pairs` behind each model field.
PAIRED = {"kind": "instruct_vs_base", "arch": "dense_vs_moe", "params": "scale"}


class FactorCompare(ChartWidget):
    """IPS of group A (with a factor) against group B (without it), overall and by order,
    with the relative change :math:`\\Delta IPS = (IPS_A - IPS_B)/IPS_B` (fig. 10).

    Groups are picked by model metadata (``kind`` base/chat/instruct, ``arch`` dense/moe,
    ``params`` scale, ``series``, ``family``) or by shot count when the run has a
    ``shot`` dim. With ``match="none"`` the relative change compares the two group means;
    with a field (e.g. ``"series+params"`` for base vs instruct of the same model, or
    ``"family"`` for dense vs MoE as in the paper) it is averaged over every A/B pair of
    models that agree on that field. Shot comparisons pair each model with itself.
    Whiskers are bootstrap CIs over samples (:func:`psens.ips.tables.factor_table`).
    A model factor (``kind``, ``arch``, ``params``) gives a ΔIPS only when the models shown
    hold a matched pair (:func:`psens.ips.factors.matched_pairs`: instruct and base of one
    family and size, sizes of one family, dense and MoE of one family); otherwise the
    status line gives the same refusal as the factor functions and ΔIPS is left out.

    Parameters
    ----------
    ds : xarray.Dataset
        A psens run or a slice of one.
    by : str, optional
        Field to split on (default: the first of ``kind, arch, shot, params, series,
        family`` with two or more values).
    a, b : list, optional
        Values of ``by`` in group A and group B (defaults: B the paper's baseline, e.g.
        ``base`` / ``moe`` / 0 shots, A the other values).
    match : str, default "none"
    tau : float, optional
        Salience threshold (default: the run's own τ, :func:`psens.settings.run_settings`).
    models : list of str, optional

    Examples
    --------
    >>> import psens.synthetic, psens.widgets
    >>> w = psens.widgets.FactorCompare(psens.synthetic.synthetic_run(n_samples=3), by="kind")
    >>> w.b
    ['base']
    >>> list(w.tables["delta"]["order"])
    ['all', 'low', 'mid', 'high']
    """

    by = traitlets.Unicode()
    a = traitlets.List()
    b = traitlets.List()
    match = traitlets.Unicode("none")
    models = traitlets.List(traitlets.Unicode())
    shot = traitlets.Int(None, allow_none=True)
    _state = ("a", "b", "match", "tau", "models", "shot")

    def __init__(
        self,
        ds,
        *,
        by: str | None = None,
        a: Sequence | None = None,
        b: Sequence | None = None,
        models: Sequence[str] | None = None,
        **state: Any,
    ) -> None:
        check_run(ds, type(self).__name__)
        self._meta = model_meta(ds)
        self._cache: dict[tuple, Any] = {}
        self.factors = [
            f
            for f in FACTORS
            if (f == "shot" and "shot" in ds.dims and ds.sizes["shot"] > 1)
            or (f in self._meta and self._meta[f].nunique() > 1)
        ]
        if not self.factors:
            fail(
                "FactorCompare",
                "no model metadata field or shot count takes two values in this run",
                "Pass a run with models that differ in kind/arch/params/series/family",
            )
        by = by or self.factors[0]
        if by not in self.factors:
            fail("FactorCompare", f"by={by!r} does not split this run", f"Use {self.factors}")
        da, db = self.default_groups(ds, by)
        if "shot" in ds.dims and state.get("shot") is None and by != "shot":
            state["shot"] = int(ds["shot"].values[0])
        names = model_names(ds)
        super().__init__(
            ds,
            by=by,
            a=list(a) if a is not None else da,
            b=list(b) if b is not None else db,
            models=list(models) if models is not None else names,
            **state,
        )
        self.observe(self._on_by, names="by")

    @staticmethod
    def default_groups(ds, by: str) -> tuple[list, list]:
        """Group A and B for ``by``: B the paper's baseline, A all other values."""
        values = group_values(ds, by)
        base = [v for v in values if v in BASELINES.get(by, ())] or values[:1]
        return [v for v in values if v not in base], base

    def match_options(self) -> list[str]:
        """Pairing rules available for this run."""
        fields = [f for f in ("series", "family", "params") if f in self._meta]
        out = ["none", *fields]
        if {"series", "params"} <= set(fields):
            out.append("series+params")
        return out

    @traitlets.validate("models")
    def _valid_models(self, proposal):
        return self._check_models(proposal["value"], "FactorCompare")

    @traitlets.validate("match")
    def _valid_match(self, proposal):
        if proposal["value"] not in self.match_options():
            fail("FactorCompare", f"match={proposal['value']!r}", f"Use {self.match_options()}")
        return proposal["value"]

    def _group_options(self) -> list[tuple[str, Any]]:
        return [(format_value(v), v) for v in group_values(self.ds, self.by)]

    def _controls(self) -> dict[str, ipywidgets.Widget]:
        opts = self._group_options()
        return {
            "by": ipywidgets.Dropdown(options=self.factors, value=self.by, description="factor"),
            "a": ipywidgets.SelectMultiple(
                options=opts, value=tuple(self.a), rows=4, description="group A"
            ),
            "b": ipywidgets.SelectMultiple(
                options=opts, value=tuple(self.b), rows=4, description="group B"
            ),
            "match": ipywidgets.Dropdown(
                options=self.match_options(), value=self.match, description="pair on"
            ),
            "tau": self._tau_control(),
            "models": self._models_control(),
        }

    def _on_by(self, change: dict) -> None:
        """A new factor: new group options and default groups, then one redraw."""
        a, b = self.default_groups(self.ds, change["new"])
        opts = self._group_options()
        with self.hold_trait_notifications():
            for key in ("a", "b"):
                self.controls[key].value = ()
                self.controls[key].options = opts
            self.a, self.b = a, b
        self.refresh()

    def per_sample(self):
        """Per-sample IPS ``(model, sample, [shot,] order)`` at the current τ (cached)."""
        key = (self.solver, round(float(self.tau), 6))
        if key not in self._cache:
            self._cache[key] = per_sample_ips(self.ds, self.tau)
        return self._cache[key]

    def refusal(self) -> str | None:
        """Why the models shown support no paired verdict on ``by`` (None when they do):
        the message of :func:`psens.ips.factors.matched_pairs`."""
        if self.by not in PAIRED:
            return None
        try:
            matched_pairs(self.ds.sel(model=list(self.models)), PAIRED[self.by])
        except ValueError as exc:
            return str(exc)
        return None

    def _compute(self) -> dict[str, Any]:
        groups, delta = factor_table(
            self.per_sample(),
            self._meta,
            by=self.by,
            a=self.a,
            b=self.b,
            match=self.match,
            models=self.models,
            shot=None if self.by == "shot" else self.shot,
        )
        why = self.refusal()
        if why:  # unmatched models differ in far more than the factor: no ΔIPS
            delta = delta.assign(rel_change=np.nan, rel_lo=np.nan, rel_hi=np.nan, n_pairs=0)
        return {"groups": groups, "delta": delta, "refusal": why}

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        pairing = "group means" if self.match == "none" else f"pairs matched on {self.match}"
        if tables.get("refusal"):
            pairing = "no matched pair: no ΔIPS"
        title = f"{self.by}: A vs B (τ = {self.tau:.2f}, {pairing})"
        return factor_chart(tables["groups"], tables["delta"], title=title)

    def _summary(self, tables: dict[str, Any]) -> str:
        if tables.get("refusal"):
            return f"No verdict: {tables['refusal']}"
        d = tables["delta"].set_index("order")
        parts = [f"{o} {d.loc[o, 'rel_change']:+.1%}" for o in d.index]
        g = tables["groups"].drop_duplicates("group")
        sizes = " vs ".join(f"{n} model(s)" for n in g["n_models"])
        if self.match == "none" and self.by != "shot":
            how = f"group means of {sizes}"
        else:
            how = f"mean over {int(d['n_pairs'].max()) if len(d) else 0} matched pair(s)"
        return f"ΔIPS (A vs B): {', '.join(parts)}; {how}"
