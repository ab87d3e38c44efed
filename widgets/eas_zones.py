"""EASZones: the EAS zone explorer (SensH vs SensJ, four zones, one instance up close).

EAS (Muthukumarana et al.) compares, per instance, the sensitivity a task heuristic reports (SensH,
the population std of the heuristic scores over the 8 templates) with the one an LLM judge
reports (SensJ), and sorts instances into four zones by the pooled 75th percentiles of both
("Four-zone taxonomy"; "high" is strictly above): artifact (H high, J not: the heuristic's
parsing varies, the answer does not), underdetected (J high, H not), genuine (both), stable
(neither). The explorer shows the scatter with the two threshold rules; clicking an instance
shows its per-template heuristic and judge scores and the responses beside it
(:func:`psens.eas.tables.instance_detail` and :func:`~psens.eas.tables.instance_detail_html`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import altair as alt
import ipywidgets
import numpy as np
import pandas as pd
import traitlets

from psens._charts import PICK
from psens._validation import check_in_interval, fail
from psens.eas import instance_metrics, thresholds, zones
from psens.eas.charts import template_scores, zones_scatter
from psens.eas.tables import instance_detail, instance_detail_html, instance_key

from ._base import EMBED_OPTIONS, BaseWidget

__all__ = ["EASZones", "instance_detail"]

ALL = "all"
SCORERS = {"corrected": None, "eas": "eas"}
_NEED = ["id", "dataset", "model_name", "sens_heuristic", "sens_judge"]


class EASZones(BaseWidget):
    """Zone explorer: SensH vs SensJ per instance with the pooled-threshold rules.

    Parameters
    ----------
    instances : DataFrame, optional
        Per-instance table (:func:`psens.eas.instance_metrics`, or the published
        ``metrics_instance.csv``): ``id, dataset, model_name, sens_heuristic, sens_judge``
        (``task_type``, ``effect_*`` used when present).
    rows : DataFrame, optional
        Judged response rows (the published judged-file columns). Needed for the
        per-template detail; without ``instances`` the table is computed from them with
        :func:`psens.eas.instance_metrics` (then the ``scorer`` control switches between the
        corrected and the published scorers and the zones move accordingly).
    thresholds_hj : (float, float), optional
        Fixed ``(t_H, t_J)`` (e.g. the published pooled thresholds of the whole study,
        :func:`psens.eas.thresholds` of its instance table) instead of quantiles of the
        instances given: a small sample whose quantiles are 0 (most instances fully stable)
        would make every instance with any variation "high".
    **state
        ``dataset``, ``model``, ``task`` ("all" or one value), ``q`` (the zone quantile,
        0.75 as published), ``pool`` ("table": thresholds pooled over every instance given,
        as published; "shown": over the instances shown), ``scorer`` ("corrected" or "eas"),
        ``instance`` (a key ``"<model_name>|<dataset>|<id>"``).

    Attributes
    ----------
    thresholds : (float, float)
        The current ``(t_H, t_J)``. The status line says when one is 0 (then "high" means
        any variation at all). Dataset, model and task controls are shown only when the
        table has more than one value of them.
    detail_chart : altair.JupyterChart
        The picked instance's per-template scores (:func:`psens.eas.charts.template_scores`).
    detail_html : ipywidgets.HTML
        Its metrics and responses.

    Examples
    --------
    >>> w = EASZones(rows=judged)  # doctest: +SKIP
    >>> w.scorer = "eas"  # published scorers: more artifacts  # doctest: +SKIP
    >>> w.instance = w.tables["instances"]["key"].iloc[0]  # doctest: +SKIP
    """

    dataset = traitlets.Unicode(ALL)
    model = traitlets.Unicode(ALL)
    task = traitlets.Unicode(ALL)
    q = traitlets.Float(0.75)
    pool = traitlets.Enum(("table", "shown"), default_value="table")
    scorer = traitlets.Enum(tuple(SCORERS), default_value="corrected")
    instance = traitlets.Unicode("")
    _state = ("dataset", "model", "task", "q", "pool", "scorer")
    _choices: ClassVar[dict[str, str]] = {
        "dataset": "datasets",
        "model": "model_names",
        "task": "tasks",
    }
    _choice_any = ALL
    _pick_field = "key"

    def __init__(
        self,
        instances: pd.DataFrame | None = None,
        *,
        rows: pd.DataFrame | None = None,
        thresholds_hj: tuple[float, float] | None = None,
        **state: Any,
    ) -> None:
        where = "EASZones"
        self.fixed = None
        if thresholds_hj is not None:
            t = tuple(float(x) for x in np.asarray(thresholds_hj, dtype=float).ravel())
            if len(t) != 2 or not all(np.isfinite(t)) or min(t) < 0:
                fail(where, f"thresholds_hj={thresholds_hj!r}", "Pass two numbers >= 0 (t_H, t_J)")
            self.fixed = t
        if instances is None and rows is None:
            fail(where, "neither instances nor rows were given", "Pass instances= or rows=")
        for name, df in (("instances", instances), ("rows", rows)):
            if df is not None and not isinstance(df, pd.DataFrame):
                fail(where, f"{name} is a {type(df).__name__}", "Pass a DataFrame", TypeError)
        self.rows = None if rows is None else rows.reset_index(drop=True)
        self._given = instances
        self._cache: dict[str, pd.DataFrame] = {}
        first = self._instances(state.get("scorer", "corrected"))
        self.datasets = sorted(map(str, first["dataset"].unique()))
        self.model_names = sorted(map(str, first["model_name"].unique()))
        self.tasks = (
            sorted(map(str, first["task_type"].dropna().unique()))
            if "task_type" in first.columns
            else []
        )
        self.thresholds: tuple[float, float] = (np.nan, np.nan)
        super().__init__(**state)
        self.detail_chart = alt.JupyterChart(
            template_scores(self._empty_detail()), embed_options=EMBED_OPTIONS
        )
        self.detail_html = ipywidgets.HTML()
        self._build()
        self.observe(self._on_instance, names="instance")
        self._show_detail()

    # -- data -------------------------------------------------------------------------
    def _instances(self, scorer: str) -> pd.DataFrame:
        """The instance table for ``scorer`` (given, or computed from the rows; cached)."""
        if scorer not in self._cache:
            if self._given is not None:
                table = self._given
            else:
                table = instance_metrics(self.rows, compat=SCORERS[scorer])
            missing = [c for c in _NEED if c not in table.columns]
            if missing:
                fail("EASZones", f"the instance table lacks {missing}", f"Give it {_NEED}")
            table = table.reset_index(drop=True).copy()
            table["key"] = instance_key(table).to_numpy()
            self._cache[scorer] = table
        return self._cache[scorer]

    @staticmethod
    def _empty_detail() -> pd.DataFrame:
        return pd.DataFrame({"template_id": [], "heuristic": [], "judge": []})

    # -- validation ---------------------------------------------------------------------
    @traitlets.validate("q")
    def _valid_q(self, proposal):
        return check_in_interval(proposal["value"], "EASZones", "q", 0.0, 1.0)

    @traitlets.validate("instance")
    def _valid_instance(self, proposal):
        key = proposal["value"]
        if key and key not in set(self._instances(self.scorer)["key"]):
            fail("EASZones", f"instance={key!r} is not known", "Use a key from tables['instances']")
        return key

    # -- state -> view --------------------------------------------------------------------
    def _controls(self) -> dict[str, ipywidgets.Widget]:
        out: dict[str, ipywidgets.Widget] = {}
        for name, values in (
            ("dataset", self.datasets),
            ("model", self.model_names),
            ("task", self.tasks),
        ):
            if len(values) > 1:  # one value: a filter that would change nothing
                out[name] = self._dropdown(name)
        if self.fixed is not None:
            return out  # fixed thresholds: no quantile or pooling to choose
        out["q"] = ipywidgets.FloatSlider(
            value=self.q,
            min=0.5,
            max=0.95,
            step=0.05,
            description="zone quantile",
            readout_format=".2f",
            continuous_update=False,
        )
        out["pool"] = ipywidgets.ToggleButtons(
            options=[("pooled over all", "table"), ("over shown", "shown")], value=self.pool
        )
        if self.rows is not None and self._given is None:
            out["scorer"] = ipywidgets.ToggleButtons(
                options=[("corrected scorers", "corrected"), ('compat="eas"', "eas")],
                value=self.scorer,
            )
        return out

    def _compute(self) -> dict[str, Any]:
        table = self._instances(self.scorer)
        keep = np.ones(len(table), dtype=bool)
        for trait, col in (("dataset", "dataset"), ("model", "model_name"), ("task", "task_type")):
            value = getattr(self, trait)
            if value != ALL and col in table.columns:
                keep &= table[col].astype(str).to_numpy() == value
        shown = table[keep].reset_index(drop=True)
        pool = table if self.pool == "table" else shown
        th = self.fixed or thresholds(pool["sens_heuristic"], pool["sens_judge"], q=self.q)
        self.thresholds = th
        shown = shown.assign(
            zone=zones(shown["sens_heuristic"], shown["sens_judge"], thresholds_hj=th).to_numpy()
        )
        return {"instances": shown}

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        t_h, t_j = self.thresholds
        how = (
            "given"
            if self.fixed is not None
            else f"q = {self.q:.2f}, pooled over {'all' if self.pool == 'table' else 'shown'}"
        )
        title = f"SensH vs SensJ · thresholds t_H = {t_h:.3f}, t_J = {t_j:.3f} ({how})"
        return zones_scatter(
            tables["instances"], thresholds_hj=self.thresholds, select=PICK, title=title
        ).properties(width=380, height=340)

    def _summary(self, tables: dict[str, Any]) -> str:
        t = tables["instances"]
        if t.empty:
            return "no instance matches the filters"
        counts = t["zone"].value_counts()
        zero = [n for n, x in zip(("t_H", "t_J"), self.thresholds, strict=True) if x == 0]
        note = (
            f" · {' and '.join(zero)} = 0: most instances do not vary, so any variation is "
            "'high' (pass thresholds_hj= of the whole study)"
            if zero
            else ""
        )
        parts = ", ".join(f"{z}: {int(counts.get(z, 0))}" for z in ("artifact", "underdetected"))
        parts += ", " + ", ".join(f"{z}: {int(counts.get(z, 0))}" for z in ("genuine", "stable"))
        return (
            f"{len(t)} instances · {parts} · mean EAS {t['eas'].mean():.3f}"
            if "eas" in t.columns
            else f"{len(t)} instances · {parts}"
        ) + note

    def _body(self) -> ipywidgets.Widget:
        side = ipywidgets.VBox(
            [self.detail_chart, self.detail_html], layout=ipywidgets.Layout(max_width="560px")
        )
        # the detail panel wraps below the scatter when the notebook is too narrow for both
        return ipywidgets.HBox([self.jchart, side], layout=ipywidgets.Layout(flex_flow="row wrap"))

    # -- the picked instance ------------------------------------------------------------------
    def detail(self) -> pd.DataFrame:
        """Per-template scores of the current :attr:`instance` (empty without one or without
        rows); see :func:`instance_detail`."""
        if not self.instance or self.rows is None:
            return self._empty_detail()
        return instance_detail(self.rows, self.instance, SCORERS[self.scorer])

    def _show_detail(self) -> None:
        detail = self.detail()
        metrics = None
        if self.instance:
            table = self._instances(self.scorer)
            row = table[table["key"] == self.instance].iloc[0].copy()
            row["zone"] = zones(
                [row["sens_heuristic"]], [row["sens_judge"]], thresholds_hj=self.thresholds
            ).iloc[0]
            metrics = row
        self.tables["detail"] = detail
        title = self.instance.split("|")[-1] if self.instance else "no instance picked"
        if detail.empty:  # nothing picked yet: say what to do instead of an empty frame
            hint = "click an instance on the scatter" if self.rows is not None else "no rows"
            chart = (
                alt.Chart(pd.DataFrame({"text": [f"{hint}: its 8 templates show here"]}))
                .mark_text(fontSize=13)
                .encode(text="text:N")
                .properties(title=title)
            )
        else:
            chart = template_scores(detail, title=title)
        self.detail_chart.chart = chart.properties(width=300, height=160)
        self.detail_html.value = instance_detail_html(metrics, detail)

    def _on_instance(self, change: dict) -> None:
        self._show_detail()

    def _on_state(self, change: dict) -> None:
        super()._on_state(change)
        self._show_detail()

    def _picked(self, values: list[str]) -> None:
        if values:
            self.instance = values[-1]
