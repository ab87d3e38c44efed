"""Sparsity: sorted interaction strengths and the top-k matching error (fig. 2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import ipywidgets
import pandas as pd
import traitlets

from psens._validation import check_in_interval
from psens.ips.charts import sparsity_chart
from psens.ips.tables import matching_curve, matching_error_table, sparsity_table
from psens.store.labels import model_names

from ._base import ChartWidget, check_run

__all__ = ["Sparsity"]


class Sparsity(ChartWidget):
    """Sparsity and faithfulness of the interactions (paper §3.2, fig. 2).

    Three panels: (a) the normalised :math:`|\\tilde I(S)|` of one sample and template,
    sorted descending, one line per model (few are salient); (b) for ``model``, the output
    :math:`v(x_T)` on all :math:`2^n` masked inputs sorted ascending (red) against the
    logical model that keeps the bias and only the top ``fraction`` of interactions (blue);
    (c) that matching error averaged over every game of each model, against the fraction
    kept (scaled by :math:`|v(N) - v(\\emptyset)|`).

    Parameters
    ----------
    ds : xarray.Dataset
        A psens run or a slice of one.
    model, sample, template : str, optional
        The game of panel (b) (and the sample/template of panel a). Default: the first.
    models : list of str, optional
        Models drawn in panels (a) and (c).
    fraction : float, default 0.05
        Fraction of the :math:`2(2^n-1)` interactions kept in panel (b).
    tau : float, optional
        Salience threshold, drawn as the salience line in panel (a) (default: the run's
        own τ, :func:`psens.settings.run_settings`).
    shot : int, optional
        For runs with a ``shot`` dim.

    Examples
    --------
    >>> import psens.synthetic, psens.widgets
    >>> w = psens.widgets.Sparsity(psens.synthetic.synthetic_run(n_samples=3), fraction=1.0)
    >>> float(w.tables["matching"]["error"].max()) < 1e-9  # all interactions: exact
    True
    """

    model = traitlets.Unicode()
    sample = traitlets.Unicode()
    template = traitlets.Unicode()
    models = traitlets.List(traitlets.Unicode())
    fraction = traitlets.Float(0.05)
    shot = traitlets.Int(None, allow_none=True)
    _state = ("model", "sample", "template", "models", "fraction", "tau", "shot")

    def __init__(self, ds, *, models: Sequence[str] | None = None, **state: Any) -> None:
        check_run(ds, type(self).__name__)
        names = model_names(ds)
        self._errors: dict[tuple, pd.DataFrame] = {}
        super().__init__(ds, models=list(models) if models is not None else names[:8], **state)

    @traitlets.validate("models")
    def _valid_models(self, proposal):
        return self._check_models(proposal["value"], "Sparsity")

    @traitlets.validate("fraction")
    def _valid_fraction(self, proposal):
        check_in_interval(proposal["value"], "Sparsity", "fraction", 0.0, 1.0, closed="right")
        return proposal["value"]

    def _controls(self) -> dict[str, ipywidgets.Widget]:
        out: dict[str, ipywidgets.Widget] = {
            "model": self._dropdown("model", "model (b)"),
            "sample": self._dropdown("sample"),
            "template": self._dropdown("template"),
            "fraction": ipywidgets.FloatSlider(
                value=self.fraction,
                min=0.01,
                max=1.0,
                step=0.01,
                description="top",
                readout_format=".0%",
                continuous_update=False,
            ),
            "models": self._models_control("models (a, c)"),
        }
        return {**out, **self._shot_control()}

    def _error_rows(self) -> pd.DataFrame:
        frames = []
        for model in self.models:
            key = (model, self.shot, self.solver)
            if key not in self._errors:
                self._errors[key] = matching_error_table(self.ds, [model], shot=self.shot)
            frames.append(self._errors[key])
        cols = ["model", "fraction", "error", "relative", "n_games"]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)

    def _compute(self) -> dict[str, Any]:
        return {
            "curve": sparsity_table(self.ds, self.models, self.sample, self.template, self.shot),
            "matching": matching_curve(
                self.ds, self.model, self.sample, self.template, self.fraction, self.shot
            ),
            "errors": self._error_rows(),
        }

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        title = f"Sparsity and universal matching · sample {self.sample}, template {self.template}"
        return sparsity_chart(
            tables["curve"],
            tables["matching"],
            tables["errors"],
            tau=self.tau,
            fraction=self.fraction,
            title=title,
        )

    def _summary(self, tables: dict[str, Any]) -> str:
        curve, m = tables["curve"], tables["matching"]
        parts = []
        if not curve.empty:
            share = curve.groupby("model")["strength"].apply(lambda s: (s > self.tau).mean())
            parts.append(f"salient (|Ĩ| > {self.tau:.2f}): {share.mean():.1%} of interactions")
        if not m.empty:
            parts.append(
                f"{self.model}: mean |v − φ| with top {self.fraction:.0%} = {m['error'].mean():.4f}"
            )
        return "; ".join(parts)
