"""The widget pattern for output-level tables (EAS, PSS), which are not IPS run Datasets.

Same contract as :class:`widgets._base.ChartWidget` — traitlets state, controls linked both
ways, a pure state → tables → chart path, one long-lived ``alt.JupyterChart`` whose chart is
replaced in place, and :meth:`OutputWidget.on_select` — without the IPS run check (the data
are an EAS instance table or a PSS score Dataset). The picked values are read from a click
point selection named :data:`PICK` on the field :attr:`OutputWidget._pick_field`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import altair as alt
import ipywidgets
import traitlets

from ._base import EMBED_OPTIONS, _size, enable_offline
from .charts import PICK

__all__ = ["PICK", "OutputWidget"]


class OutputWidget(traitlets.HasTraits):
    """Base class: subclasses set up their data, then call ``_build()`` at the end of
    ``__init__``; they implement ``_controls``, ``_compute``, ``_chart`` and ``_summary``.

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
    jchart : altair.JupyterChart
    tables : dict of str to pandas.DataFrame
        The data currently shown.
    ui : ipywidgets.VBox
    """

    _state: ClassVar[tuple[str, ...]] = ()
    #: the data field of the click selection that :meth:`on_select` reports
    _pick_field: ClassVar[str] = "model"
    selected = traitlets.List(traitlets.Unicode(), help="values picked on the chart")

    def _build(self) -> None:
        self._callbacks: list[Callable[[list[str]], Any]] = []
        self._watched: Any = None
        enable_offline()
        self.controls: dict[str, ipywidgets.Widget] = self._controls()
        for name, control in self.controls.items():
            ipywidgets.link((control, "value"), (self, name))
            _size(control)
        self.status = ipywidgets.HTML()
        self.tables: dict[str, Any] = {}
        self.jchart = alt.JupyterChart(self._render(), embed_options=EMBED_OPTIONS)
        self._watch_selection()
        self.observe(self._on_state, names=list(self._state))
        wrap = ipywidgets.Layout(flex_flow="row wrap", align_items="flex-start")
        rows = [ipywidgets.Box(list(self.controls.values()), layout=wrap)] if self.controls else []
        self.ui = ipywidgets.VBox([*rows, self._body(), self.status])

    # -- to implement ---------------------------------------------------------------
    def _controls(self) -> dict[str, ipywidgets.Widget]:
        return {}

    def _compute(self) -> dict[str, Any]:
        raise NotImplementedError

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        raise NotImplementedError

    def _summary(self, tables: dict[str, Any]) -> str:
        return ""

    def _body(self) -> ipywidgets.Widget:
        """What sits between the controls and the status line (default: the chart)."""
        return self.jchart

    def _picked(self, values: list[str]) -> None:
        """Hook run after a pick (before the callbacks)."""

    # -- machinery ------------------------------------------------------------------
    def chart(self) -> alt.TopLevelMixin:
        """The chart for the current state (a new altair chart; nothing displayed)."""
        return self._chart(self._compute())

    def _render(self) -> alt.TopLevelMixin:
        self.tables = self._compute()
        self.status.value = f"<small>{self._summary(self.tables)}</small>"
        return self._chart(self.tables)

    def refresh(self) -> None:
        """Recompute the tables and update the chart in place."""
        self.jchart.chart = self._render()
        self._watch_selection()

    def _on_state(self, change: dict) -> None:
        self.refresh()

    def _watch_selection(self) -> None:
        selections = self.jchart.selections
        if selections is self._watched:
            return
        if PICK in selections.trait_names():
            selections.observe(self._on_pick, names=PICK)
        self._watched = selections

    def _on_pick(self, change: dict) -> None:
        value = getattr(change["new"], "value", None) or []
        field = self._pick_field
        picked = [str(v[field]) for v in value if isinstance(v, dict) and field in v]
        self.selected = picked
        self._picked(picked)
        for cb in list(self._callbacks):
            cb(picked)

    def on_select(self, callback: Callable[[list[str]], Any], remove: bool = False) -> None:
        """Call ``callback(values)`` when items are picked on the chart (click; shift-click
        adds; an empty list when the pick is cleared). ``remove=True`` unregisters it."""
        if remove:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
        elif callback not in self._callbacks:
            self._callbacks.append(callback)

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.ui._repr_mimebundle_(**kwargs)
