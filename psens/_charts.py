"""What every chart module shares: the one altair import guard, the palettes, the pick selection.

Chart modules (:mod:`psens.ips.charts`, :mod:`psens.ips.factors.charts`,
:mod:`psens.pss.charts`, :mod:`psens.eas.charts`, :mod:`psens.dbsa.charts`) and the widgets
take altair from :func:`altair` so that ``import psens`` works without the ``widgets`` extra
and a missing altair is reported once, the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psens._validation import fail

__all__ = [
    "CLASS_COLORS",
    "DIRECTION_COLORS",
    "GROUP_COLORS",
    "IPS_AXIS",
    "ORDER_COLORS",
    "PICK",
    "SYNTHETIC_NOTE",
    "TEMPLATE_COLORS",
    "ZONE_COLORS",
    "altair",
    "is_synthetic",
    "known_or",
    "label_synthetic",
    "mark_synthetic",
    "need_columns",
]

#: Name of the point selection on ``model`` that every multi-model chart carries.
PICK = "pick"
#: IPS over all salient interactions, then the order bands (light to dark: low to high).
ORDER_COLORS = {"all": "#7f7f7f", "low": "#9ecae1", "mid": "#4292c6", "high": "#08306b"}
#: Stable/unstable classes of salient interactions (IPS paper fig. 3b), by their labels.
CLASS_COLORS = {
    "opposite sign": "#d62728",
    "same sign, different effect": "#ff9896",
    "same sign, similar effect": "#2ca02c",
}
#: Group A (with a factor) and group B (without it) of an A-vs-B comparison (fig. 10).
GROUP_COLORS = ("#2ca02c", "#9467bd")
#: Sign of a relative change ΔIPS: the factor reduces or increases sensitivity.
DIRECTION_COLORS = {"reduces": "#1a9850", "increases": "#d73027"}
#: Template T in blue, T-hat in red, as in the IPS paper's fig. 3a.
TEMPLATE_COLORS = ("#1f77b4", "#d62728")
#: EAS zones.
ZONE_COLORS = {
    "artifact": "#d95f02",
    "underdetected": "#7570b3",
    "genuine": "#e7298a",
    "stable": "#1b9e77",
}
IPS_AXIS = "Prompt sensitivity IPS"


def altair() -> Any:
    """The ``altair`` module, or an ImportError naming the extra to install."""
    try:
        import altair as alt
    except ImportError:  # pragma: no cover - depends on the environment
        fail("psens charts", "altair is not installed", "pip install 'psens[widgets]'", ImportError)
    return alt


def need_columns(df: Any, columns: Sequence[str], where: str) -> Any:
    """Refuse anything but a DataFrame holding ``columns``; return it unchanged."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        fail(where, f"got a {type(df).__name__}", "Pass a pandas DataFrame", TypeError)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        fail(where, f"the table lacks columns {missing}", f"Pass a table with {list(columns)}")
    return df


def known_or(column: Any, missing: str = "unknown") -> Any:
    """``column`` (a pandas Series used as a colour) with missing values (NaN, None, '')
    written as ``missing``, so a legend never shows "null", "undefined" or a blank entry."""
    text = column.astype(object)
    return text.where(text.notna() & (text.astype(str) != ""), missing).astype(str)


#: appended to the title of every chart drawn from a synthetic run
SYNTHETIC_NOTE = "synthetic data"


def is_synthetic(*sources: Any) -> bool:
    """Whether any source — a run Dataset, a table or DataArray made from one (its
    ``attrs``) or a result with ``settings`` — comes from a synthetic run
    (:mod:`psens.synthetic` sets the run attr ``synthetic``)."""
    for source in sources:
        for meta in (getattr(source, "attrs", None), getattr(source, "settings", None)):
            if isinstance(meta, dict) and bool(meta.get("synthetic", False)):
                return True
    return False


def mark_synthetic(table: Any, *sources: Any) -> Any:
    """Set ``table.attrs["synthetic"]`` when a source is synthetic; return ``table``."""
    if is_synthetic(*sources):
        table.attrs["synthetic"] = True
    return table


def label_synthetic(chart: Any, *sources: Any) -> Any:
    """``chart`` with "synthetic data" added to its title when a source is synthetic.

    A chart without a title gets the note as its title; a title that has it already is
    left alone, so labelling twice is harmless. Real runs' charts are returned unchanged.
    """
    if not is_synthetic(*sources):
        return chart
    alt = altair()
    title = getattr(chart, "title", alt.Undefined)
    if title is alt.Undefined or title in ("", None):
        return chart.properties(title=SYNTHETIC_NOTE)
    if isinstance(title, alt.TitleParams):
        text = title.text
        text = " ".join(text) if isinstance(text, list) else str(text)
        if SYNTHETIC_NOTE in text:
            return chart
        params = title.to_dict()
        params["text"] = f"{text} ({SYNTHETIC_NOTE})"
        return chart.properties(title=alt.TitleParams(**params))
    if isinstance(title, dict):
        text = str(title.get("text", ""))
        if SYNTHETIC_NOTE in text:
            return chart
        return chart.properties(title={**title, "text": f"{text} ({SYNTHETIC_NOTE})"})
    if SYNTHETIC_NOTE in str(title):
        return chart
    return chart.properties(title=f"{title} ({SYNTHETIC_NOTE})")
