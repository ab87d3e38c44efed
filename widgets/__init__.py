"""Reusable ipywidgets + altair components for psens runs (imported as ``psens.widgets``).

Each widget is built from one run Dataset (or a slice of one) and displays itself::

    w = psens.widgets.OrderIPS(ds)
    w

Widgets are traitlets objects: set ``w.tau = 0.2`` (or move the slider) and the chart
updates in place. ``w.on_select(cb)`` is called with the models clicked on the chart;
:func:`link_models` lets one widget's pick drive another's models. The pure chart builders
are in :mod:`psens.ips.charts`, the tables behind them in ``psens.ips.tables``.

Importing this package renders every altair chart offline (:func:`enable_offline`: Vega from
the local bundle, never a CDN), widgets and plain charts alike.
"""

from psens.ips import charts
from psens.ips.tables import subset_label, subset_words

from ._base import EMBED_OPTIONS, ChartWidget, enable_offline, link_models
from .case_study import CaseStudy
from .classes import InteractionClasses
from .dbsa_highlights import DBSAHighlights
from .eas_zones import EASZones
from .factor_compare import FactorCompare
from .format_space import FormatSpace
from .notebook import (
    NOT_FINDINGS,
    SHIPPED_RUN,
    chat_check,
    describe,
    few_shot_verdicts,
    findings_run,
    label_synthetic,
    lacks,
    load_run,
    order_verdicts,
    paper_config,
    paper_vs_run,
    registry_models,
    shots_text,
    show,
    verdict,
)
from .order_ips import OrderIPS
from .pss_variant import PSSByVariant
from .sparsity import Sparsity

enable_offline()  # every chart of a notebook that imports psens.widgets renders offline

__all__ = [
    "EMBED_OPTIONS",
    "NOT_FINDINGS",
    "SHIPPED_RUN",
    # widgets
    "CaseStudy",
    "ChartWidget",
    "DBSAHighlights",
    "EASZones",
    "FactorCompare",
    "FormatSpace",
    "InteractionClasses",
    "OrderIPS",
    "PSSByVariant",
    "Sparsity",
    # helpers
    "charts",
    "chat_check",
    "describe",
    "enable_offline",
    "few_shot_verdicts",
    "findings_run",
    "label_synthetic",
    "lacks",
    "link_models",
    "load_run",
    "order_verdicts",
    "paper_config",
    "paper_vs_run",
    "registry_models",
    "shots_text",
    "show",
    "subset_label",
    "subset_words",
    "verdict",
]
