"""The widget pattern: a traitlets state object, a pure state → chart function, one chart.

A :class:`ChartWidget` holds the run Dataset it was built from and a few traits (the
state: τ, models, sample, ...). Each control (an ipywidget) is linked both ways to one
trait, so setting ``w.tau = 0.2`` moves the slider and moving the slider sets ``w.tau``.
On every state change the widget recomputes its small tables and assigns the chart built
from them to its one long-lived ``alt.JupyterChart`` (the widget itself is never
re-created, so the ~0.9 MB offline JavaScript is sent once). Clicking a model on a chart
is a point selection that Python reads back; :meth:`ChartWidget.on_select` registers
callbacks on it and :func:`link_models` lets one widget's pick drive another's models.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import altair as alt
import ipywidgets
import traitlets

from psens._charts import PICK, label_synthetic
from psens._validation import check_in_interval, fail
from psens.ips import select_solver, solver_names
from psens.settings import DEFAULT_TAU, run_settings
from psens.store.labels import model_names

__all__ = [
    "EMBED_OPTIONS",
    "BaseWidget",
    "ChartWidget",
    "check_run",
    "enable_offline",
    "link_models",
]

#: the trait names a widget may declare in ``_choices`` (validated by one handler)
CHOICE_TRAITS = (
    "model",
    "model_a",
    "model_b",
    "sample",
    "template",
    "template_a",
    "template_b",
    "dataset",
    "task",
)

#: SVG so charts are crisp and inspectable; the actions menu keeps only image export.
EMBED_OPTIONS: dict[str, Any] = {
    "renderer": "svg",
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}


def enable_offline() -> None:
    """Render every altair chart offline: ``alt.JupyterChart`` and plain charts (altair's
    ``"jupyter"`` renderer) load Vega from the bundle in ``vl-convert-python``, not a CDN.

    Altair's default loads Vega from a CDN, which leaves charts blank offline; these are the
    documented switches (``JupyterChart.enable_offline``, ``alt.renderers.enable("jupyter",
    offline=True)``). Importing :mod:`psens.widgets` calls it, so a notebook needs no renderer
    code of its own. Idempotent.
    """
    try:
        alt.JupyterChart.enable_offline(True)
        alt.renderers.enable("jupyter", offline=True, embed_options=EMBED_OPTIONS)
    except ImportError as exc:  # vl-convert or anywidget missing
        fail(
            "psens.widgets",
            f"offline charts need vl-convert-python and anywidget ({exc})",
            "pip install 'psens[widgets]'",
            ImportError,
        )


#: pixels per character of option text and description (JupyterLab's 13 px sans-serif, with
#: room for wide letters), and what a <select> adds around its text (padding, arrow)
CHAR_PX, SELECT_PAD_PX = 8.0, 40
#: control widths: sliders, and the least and most a choice control takes
SLIDER_PX, MIN_CHOICE_PX, MAX_CHOICE_PX = 260, 220, 640


def choice_width(control: ipywidgets.Widget) -> int:
    """Width in pixels that shows a choice control's longest option and its description
    in full (between ``MIN_CHOICE_PX`` and ``MAX_CHOICE_PX``)."""
    labels = [str(x) for x in getattr(control, "_options_labels", ())]
    text = max((len(x) for x in labels), default=0)
    desc = len(getattr(control, "description", "") or "")
    need = CHAR_PX * (text + desc) + SELECT_PAD_PX + (8 if desc else 0)
    return int(min(MAX_CHOICE_PX, max(MIN_CHOICE_PX, math.ceil(need))))


def _size(control: ipywidgets.Widget) -> None:
    """Uniform control sizes so a row of them wraps instead of scrolling; choice controls
    (dropdowns, lists) are wide enough for their longest option, e.g. a long model name."""
    style = getattr(control, "style", None)
    if style is not None and hasattr(style, "description_width"):
        style.description_width = "initial"
    if isinstance(control, ipywidgets.ToggleButtons):
        style.button_width = "auto"
        return
    if isinstance(control, ipywidgets.FloatSlider | ipywidgets.IntSlider):
        control.layout.width = f"{SLIDER_PX}px"
    elif hasattr(control, "_options_labels"):
        control.layout.width = f"{choice_width(control)}px"
    else:
        control.layout.width = f"{MIN_CHOICE_PX}px"
    control.layout.margin = "2px 12px 2px 0"


def check_run(ds, where: str) -> None:
    """Refuse anything but a run Dataset (or a slice keeping the run's dims)."""
    missing = [k for k in ("I_and", "I_or") if k not in getattr(ds, "data_vars", {})]
    if missing:
        fail(
            where,
            f"the object has no {missing} variables (got {type(ds).__name__})",
            "Pass a psens run Dataset (psens.store.open_run or psens.synthetic.synthetic_run)",
            TypeError,
        )
    need = {"model", "sample", "template", "subset"}
    if not need <= set(ds.dims):
        fail(
            where,
            f"the Dataset lacks the dims {sorted(need - set(ds.dims))}",
            "Slice a run with isel/sel keeping lists (ds.isel(model=[0, 1])), not scalars",
        )


class BaseWidget(traitlets.HasTraits):
    """The machinery shared by every psens widget (run, EAS, PSS, DBSA data alike).

    Subclasses declare their state traits (listed in ``_state``), set up their data, call
    :meth:`_build` at the end of ``__init__``, and implement ``_controls``, ``_compute``
    (state → tables) and ``_chart`` (tables → chart, pure); optionally ``_summary`` (the
    status line, plain text that is HTML-escaped), ``_body`` (what sits between the controls
    and the status line) and ``_picked`` (run after a click, before the callbacks).

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
        One control per state trait, linked both ways.
    jchart : altair.JupyterChart
        The one chart widget; ``jchart.chart`` is replaced in place on each change.
    tables : dict of str to pandas.DataFrame
        The data currently shown.
    ui : ipywidgets.VBox
        Controls, body and a status line; what a notebook displays.
    """

    #: traits whose change recomputes the chart (``_common_state``: those of a base class)
    _state: ClassVar[tuple[str, ...]] = ()
    _common_state: ClassVar[tuple[str, ...]] = ()
    #: the data field of the click selection (named PICK) that :meth:`on_select` reports
    _pick_field: ClassVar[str] = "model"
    #: clear ``selected`` when the chart is redrawn (a new chart has no pick)
    _clear_pick_on_redraw: ClassVar[bool] = False
    #: trait -> the control value that stands for its None (a dropdown whose selected value
    #: is None shows a blank box, so "all pairs" is e.g. "all" on the control, None here)
    _control_none: ClassVar[dict[str, Any]] = {}
    #: choice traits -> the attribute listing their options: the base validates them
    #: (:meth:`_one_of`) and builds their dropdowns (:meth:`_dropdown`)
    _choices: ClassVar[dict[str, str]] = {}
    #: a value every choice trait takes besides its options (e.g. ``"all"``), or None
    _choice_any: ClassVar[str | None] = None
    #: what the error of a value outside its options says of it
    _not_an_option: ClassVar[str] = "is not available"
    selected = traitlets.List(traitlets.Unicode(), help="values picked on the chart")

    def _one_of(self, name: str, value: Any, options: Sequence[Any]) -> Any:
        """``value`` when it is one of ``options`` (or ``_choice_any``), else a clear error."""
        if self._choice_any is not None and value == self._choice_any:
            return value
        if value not in options:
            also = f"{self._choice_any!r} or " if self._choice_any is not None else ""
            fail(
                type(self).__name__,
                f"{name}={value!r} {self._not_an_option}",
                f"Use {also}one of {list(options)[:8]}",
            )
        return value

    @traitlets.validate(*CHOICE_TRAITS)
    def _valid_choice(self, proposal):
        name = proposal["trait"].name
        if name not in self._choices:
            return proposal["value"]
        return self._one_of(name, proposal["value"], getattr(self, self._choices[name]))

    def _dropdown(self, name: str, description: str | None = None) -> ipywidgets.Dropdown:
        """The dropdown of choice trait ``name`` (its options, ``_choice_any`` first)."""
        options = list(getattr(self, self._choices[name]))
        if self._choice_any is not None:
            options = [self._choice_any, *options]
        return ipywidgets.Dropdown(
            options=options, value=getattr(self, name), description=description or name
        )

    def _build(self) -> None:
        self._callbacks: list[Callable[[list[str]], Any]] = []
        self._watched: Any = None
        enable_offline()
        self.controls: dict[str, ipywidgets.Widget] = {
            **self._controls(),
            **self._common_controls(),
        }
        for name, control in self.controls.items():
            if name in self._control_none:  # a control value standing for the trait's None
                ipywidgets.link(
                    (control, "value"), (self, name), transform=self._none_transform(name)
                )
            else:
                ipywidgets.link((control, "value"), (self, name))
            _size(control)
        self.status = ipywidgets.HTML()
        self.tables: dict[str, Any] = {}
        self.jchart = alt.JupyterChart(self._render(), embed_options=EMBED_OPTIONS)
        self._watch_selection()
        self.observe(self._on_state, names=[*self._state, *self._common_state])
        wrap = ipywidgets.Layout(flex_flow="row wrap", align_items="flex-start")
        rows = [ipywidgets.Box(list(self.controls.values()), layout=wrap)] if self.controls else []
        self.ui = ipywidgets.VBox([*rows, self._body(), self.status])

    # -- to implement ---------------------------------------------------------------
    def _controls(self) -> dict[str, ipywidgets.Widget]:
        return {}

    def _common_controls(self) -> dict[str, ipywidgets.Widget]:
        """Controls a base class adds after the widget's own (e.g. the solver dropdown)."""
        return {}

    def _compute(self) -> dict[str, Any]:
        """The tables for the current state."""
        raise NotImplementedError

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        """The chart for the current state and tables (pure)."""
        raise NotImplementedError

    def _summary(self, tables: dict[str, Any]) -> str:
        return ""

    def _body(self) -> ipywidgets.Widget:
        """What sits between the controls and the status line (default: the chart)."""
        return self.jchart

    def _picked(self, values: list[str]) -> None:
        """Hook run after a pick (before the callbacks)."""

    # -- machinery ------------------------------------------------------------------
    def _none_transform(self, name: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        """(control -> trait, trait -> control) value maps for a trait listed in
        ``_control_none``."""
        mark = self._control_none[name]
        return (lambda v: None if v == mark else v), (lambda v: mark if v is None else v)

    def chart(self) -> alt.TopLevelMixin:
        """The chart for the current state (a new ``alt.Chart`` value; nothing displayed);
        its title says "synthetic data" when the widget's run is synthetic."""
        return label_synthetic(self._chart(self._compute()), getattr(self, "ds", None))

    def _render(self) -> alt.TopLevelMixin:
        self.tables = self._compute()
        self.status.value = f"<small>{html.escape(self._summary(self.tables))}</small>"
        return label_synthetic(self._chart(self.tables), getattr(self, "ds", None))

    def refresh(self) -> None:
        """Recompute the tables and update the chart in place."""
        self.jchart.chart = self._render()
        self._watch_selection()

    def _on_state(self, change: dict) -> None:
        self.refresh()

    def _watch_selection(self) -> None:
        # JupyterChart builds a new `selections` object whenever its chart changes
        selections = self.jchart.selections
        if selections is self._watched:
            return
        if PICK in selections.trait_names():
            selections.observe(self._on_pick, names=PICK)
        redrawn = self._watched is not None
        self._watched = selections
        if redrawn and self._clear_pick_on_redraw and self.selected:
            self.selected = []

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


class ChartWidget(BaseWidget):
    """Base class of the IPS widgets, built from a run Dataset (or a slice of one).

    A run holding several solvers' interactions (a ``solver`` dim, config ``solver = [...]``)
    gets a ``solver`` dropdown (the ``solver`` trait; default: the first solver): ``ds`` is
    the run at that solver (:func:`psens.ips.select_solver`). ``tau`` starts at the run's
    own τ (:func:`psens.settings.run_settings`) unless one is given.

    Attributes
    ----------
    ds : xarray.Dataset
        The run (or slice) the widget shows, at the chosen ``solver``.
    run : xarray.Dataset
        The run as given (every solver).
    model_names : list of str
    solver_names : list of str
        The solvers of the run (:func:`psens.ips.solver_names`).
    """

    _clear_pick_on_redraw = True
    _common_state = ("solver",)
    selected = traitlets.List(traitlets.Unicode(), help="models picked on the chart")
    tau = traitlets.Float(DEFAULT_TAU, help="salience threshold on normalised interactions")
    solver = traitlets.Unicode(None, allow_none=True, help="whose interactions (solver dim)")

    _not_an_option = "is not in the run"
    #: choice traits of run widgets: models, samples and templates of the run
    _choices: ClassVar[dict[str, str]] = {
        "model": "model_names",
        "sample": "samples",
        "template": "templates",
        "template_a": "templates",
        "template_b": "templates",
    }

    def __init__(self, ds, **state: Any) -> None:
        check_run(ds, type(self).__name__)
        self.run = ds
        self.solver_names: list[str] = solver_names(ds)
        self._selected_run: tuple[str | None, Any] | None = None
        if "solver" in ds.dims and state.get("solver") is None:
            state["solver"] = self.solver_names[0]
        if state.get("tau") is None:  # the run's own τ (run_settings), not a default
            state["tau"] = run_settings(ds).tau
        self.model_names: list[str] = model_names(ds)
        self.samples: list[str] = [str(s) for s in ds["sample"].values]
        self.templates: list[str] = [str(t) for t in ds["template"].values]
        for name in ("model", "sample", "template"):  # default: the run's first
            if self.has_trait(name) and not state.get(name):
                state[name] = getattr(self, self._choices[name])[0]
        if self.has_trait("shot") and "shot" in ds.dims and state.get("shot") is None:
            state["shot"] = int(ds["shot"].values[0])
        super().__init__(**state)
        self._build()

    @property
    def ds(self):
        """The run at the chosen ``solver`` (the run itself when it has one solver)."""
        solver = self.solver if "solver" in self.run.dims else None
        if self._selected_run is None or self._selected_run[0] != solver:
            self._selected_run = (solver, select_solver(self.run, solver))
        return self._selected_run[1]

    @traitlets.validate("solver")
    def _valid_solver(self, proposal):
        value = proposal["value"]
        if value is not None and value not in self.solver_names:
            fail(type(self).__name__, f"solver={value!r}", f"Use one of {self.solver_names}")
        return value

    def _common_controls(self) -> dict[str, ipywidgets.Widget]:
        if "solver" not in self.run.dims:
            return {}
        return {
            "solver": ipywidgets.Dropdown(
                options=self.solver_names, value=self.solver, description="solver"
            )
        }

    @traitlets.validate("tau")
    def _valid_tau(self, proposal):
        check_in_interval(proposal["value"], type(self).__name__, "tau", 0.0, 1.0)
        return proposal["value"]

    # -- helpers for subclasses -------------------------------------------------------
    def _tau_control(self) -> ipywidgets.FloatSlider:
        return ipywidgets.FloatSlider(
            value=self.tau,
            min=0.01,
            max=0.5,
            step=0.01,
            description="τ",
            readout_format=".2f",
            continuous_update=False,
        )

    def _shot_control(self) -> dict[str, ipywidgets.Dropdown]:
        """``{"shot": dropdown}`` for a run with a ``shot`` dim, else ``{}``."""
        if "shot" not in self.ds.dims:
            return {}
        shots = [int(s) for s in self.ds["shot"].values]
        return {"shot": ipywidgets.Dropdown(options=shots, value=self.shot, description="shots")}

    def _check_models(self, models: Sequence[str], where: str) -> list[str]:
        bad = [m for m in models if m not in self.model_names]
        if bad:
            fail(where, f"unknown models {bad}", f"Use names from {self.model_names}")
        return list(models)

    def _models_control(self, description: str = "models") -> ipywidgets.SelectMultiple:
        return ipywidgets.SelectMultiple(
            options=self.model_names,
            value=tuple(self.models),
            rows=min(6, len(self.model_names)),
            description=description,
        )


def link_models(source: ChartWidget, *targets: ChartWidget) -> Callable[[list[str]], None]:
    """Let models picked on ``source`` drive the ``models`` (or ``model``) of ``targets``.

    An empty pick restores all models. Returns the callback (``source.on_select(cb,
    remove=True)`` undoes the link).
    """

    def forward(picked: list[str]) -> None:
        for target in targets:
            if target.has_trait("models"):
                names = [m for m in picked if m in target.model_names]
                target.models = names or list(target.model_names)
            elif target.has_trait("model") and picked and picked[0] in target.model_names:
                target.model = picked[0]

    source.on_select(forward)
    return forward
