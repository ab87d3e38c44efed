"""Highlighted text: the input with each token shaded by its normalised DBSA score (tables 1–3).

Pure HTML and inline CSS (no JavaScript), so the same string works in a notebook (through
``_repr_html_``), in a static HTML report and in e-mail. The original text is reproduced
character for character (``white-space: pre-wrap``): only the tested tokens get a
background whose opacity is their score in [0, 1] (``score_position``: ``E_w`` min–max
normalised over the tested tokens, paper table 2 "normalized impact"). Untested tokens
(e.g. skipped punctuation) are left plain. A tooltip (``title``) shows the token, ``E_w``
and its p-value.

For a README (GitHub strips inline styles) :func:`highlight_markdown` marks the top tokens
in bold and writes each tested token's score as a superscript.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.

Token shading as in the paper's tables 1–2.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from .._validation import fail

__all__ = [
    "Highlight",
    "compare_highlights",
    "highlight",
    "highlight_html",
    "highlight_markdown",
    "token_titles",
]

_CONTAINER = (
    "font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; line-height: 1.9; "
    "white-space: pre-wrap; max-width: 60em;"
)


@dataclass(frozen=True)
class Highlight:
    """An HTML fragment that renders itself in Jupyter (``_repr_html_``)."""

    html: str

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html

    def save(self, path: str) -> None:
        """Write a standalone HTML page."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(
                '<!doctype html><html><head><meta charset="utf-8"></head>'
                f"<body>{self.html}</body></html>"
            )


def _rgb(colour: str) -> tuple[int, int, int]:
    c = colour.lstrip("#")
    if len(c) == 3:
        c = "".join(ch * 2 for ch in c)
    if len(c) != 6 or any(ch not in "0123456789abcdefABCDEF" for ch in c):
        fail("highlight", f"colour {colour!r} is not a hex colour", "Pass e.g. '#d62728'")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)


def _legend(rgb: tuple[int, int, int]) -> str:
    r, g, b = rgb
    sw = (
        "display:inline-block;width:1.2em;height:0.9em;vertical-align:middle;"
        "border:1px solid #bbb;margin:0 0.3em;"
    )
    return (
        '<div style="font-size:0.85em;color:#555;margin-bottom:0.4em">Legend: '
        f'<span style="{sw}background:rgba({r},{g},{b},1)"></span>Most important '
        f'<span style="{sw}background:linear-gradient(to right, '
        f'rgba({r},{g},{b},1), rgba({r},{g},{b},0))"></span>'
        f'<span style="{sw}background:rgba({r},{g},{b},0)"></span>Least important</div>'
    )


def highlight_html(
    text: str,
    spans: Sequence[tuple[int, int]],
    scores: Sequence[float],
    *,
    titles: Sequence[str] | None = None,
    colour: str = "#d62728",
    legend: bool = True,
    caption: str | None = None,
) -> str:
    """Render ``text`` with the character ``spans`` shaded by ``scores`` in [0, 1] (NaN = plain).

    This is the data-agnostic core; :func:`highlight` feeds it from a DBSA Dataset.
    """
    if len(spans) != len(scores):
        fail(
            "highlight_html",
            f"{len(spans)} spans but {len(scores)} scores",
            "Pass one score per span",
        )
    rgb = _rgb(colour)
    r, g, b = rgb
    parts: list[str] = []
    pos = 0
    for t, ((s, e), sc) in enumerate(zip(spans, scores, strict=True)):
        if s < pos or e > len(text):
            fail(
                "highlight_html",
                f"span {(s, e)} overlaps or runs past the text",
                "Pass ordered, non-overlapping spans",
            )
        parts.append(html.escape(text[pos:s]))
        tok = html.escape(text[s:e])
        if sc is None or not np.isfinite(sc):
            parts.append(tok)
        else:
            a = float(np.clip(sc, 0.0, 1.0))
            fg = "#fff" if a > 0.6 else "inherit"
            title = f' title="{html.escape(titles[t])}"' if titles is not None else ""
            parts.append(
                f'<span style="background-color:rgba({r},{g},{b},{a:.3f});color:{fg};'
                f'border-radius:0.2em;padding:0.05em 0.1em"{title}>{tok}</span>'
            )
        pos = e
    parts.append(html.escape(text[pos:]))
    head = (
        f'<div style="font-weight:600;margin-bottom:0.2em">{html.escape(caption)}</div>'
        if caption
        else ""
    )
    body = f'<div style="{_CONTAINER}">{"".join(parts)}</div>'
    return f'<div class="psens-dbsa-highlight">{head}{_legend(rgb) if legend else ""}{body}</div>'


def _scored(ds: xr.Dataset) -> None:
    if "score_position" not in ds.variables:
        fail("highlight", "the Dataset has no scores", "Run psens.dbsa.analyse on it first")


def _position_scores(ds: xr.Dataset, top: int | None) -> np.ndarray:
    scores = ds["score_position"].values.astype(float).copy()
    if top is not None:
        eff = ds["effect_size"].to_series()
        keep = set(eff.sort_values(ascending=False, kind="stable").index[:top])
        scores[[str(t) not in keep for t in ds["text_token"].values]] = np.nan
    return scores


def token_titles(ds: xr.Dataset) -> list[str]:
    """Tooltip text per text position: ``"<token>: E=<ω>, p=<p-value>"`` for a tested token,
    the token alone otherwise (escaped by :func:`highlight_html`)."""
    eff = dict(zip(map(str, ds["token"].values), ds["effect_size"].values, strict=True))
    pv = dict(zip(map(str, ds["token"].values), ds["p_value"].values, strict=True))
    out = []
    for t in map(str, ds["text_token"].values):
        out.append(f"{t}: E={eff[t]:.3g}, p={pv[t]:.3g}" if t in eff else t)
    return out


def highlight(
    ds: xr.Dataset,
    *,
    top: int | None = None,
    colour: str = "#d62728",
    legend: bool = True,
    caption: str | None = None,
) -> Highlight:
    """Highlighted input text of an analysed DBSA Dataset (paper tables 1–2; ``top=5`` for table 3).

    Parameters
    ----------
    ds : Dataset
        Output of :func:`~psens.dbsa.metric.analyse` / :func:`~psens.dbsa.metric.dbsa`.
    top : int, optional
        Shade only the ``top`` tokens with the largest effect size.
    colour : str, default "#d62728"
        Hex colour of the most important tokens.
    legend : bool, default True
    caption : str, optional
        A title line (default: the model name).

    Returns
    -------
    Highlight
        ``.html`` holds the string; Jupyter renders the object directly.
    """
    _scored(ds)
    cap = caption if caption is not None else str(ds.attrs.get("model", ""))
    spans = list(zip(ds["start"].values.tolist(), ds["end"].values.tolist(), strict=True))
    return Highlight(
        highlight_html(
            ds.attrs["text"],
            spans,
            _position_scores(ds, top),
            titles=token_titles(ds),
            colour=colour,
            legend=legend,
            caption=cap or None,
        )
    )


def compare_highlights(
    results: Mapping[str, xr.Dataset], *, top: int | None = None, colour: str = "#d62728"
) -> Highlight:
    """Highlights of the same text for several models (or settings), one block each, one legend."""
    if not results:
        fail("compare_highlights", "no results given", "Pass {label: analysed Dataset}")
    blocks = []
    for i, (label, ds) in enumerate(results.items()):
        _scored(ds)
        spans = list(zip(ds["start"].values.tolist(), ds["end"].values.tolist(), strict=True))
        blocks.append(
            highlight_html(
                ds.attrs["text"],
                spans,
                _position_scores(ds, top),
                titles=token_titles(ds),
                colour=colour,
                legend=i == 0,
                caption=str(label),
            )
        )
    return Highlight(
        '<div style="display:flex;flex-direction:column;gap:0.8em">' + "".join(blocks) + "</div>"
    )


#: Markdown's inline metacharacters, backslash-escaped in item text (no link, emphasis or
#: code span can come from the data)
_MD_SPECIAL = "\\`*_[]#~|"


def _markdown_text(text: str) -> str:
    """Item text as literal Markdown: HTML escaped (``<img onerror=...>`` stays text) and
    Markdown's inline metacharacters backslash-escaped."""
    out = html.escape(text, quote=True)
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in out)


def highlight_markdown(ds: xr.Dataset, *, top: int = 5, digits: int = 2) -> str:
    """Markdown: top tokens in bold, each tested token followed by ``<sup>score</sup>``.

    The item text is escaped (:func:`_markdown_text`): HTML in it is shown, never run."""
    _scored(ds)
    text = ds.attrs["text"]
    keep = set(
        ds["effect_size"].to_series().sort_values(ascending=False, kind="stable").index[:top]
    )
    parts: list[str] = []
    pos = 0
    for t, s, e, sc in zip(
        map(str, ds["text_token"].values),
        ds["start"].values,
        ds["end"].values,
        ds["score_position"].values,
        strict=True,
    ):
        parts.append(_markdown_text(text[pos:s]))
        word = f"**{_markdown_text(t)}**" if t in keep else _markdown_text(t)
        parts.append(word if not np.isfinite(sc) else f"{word}<sup>{sc:.{digits}f}</sup>")
        pos = e
    parts.append(_markdown_text(text[pos:]))
    return "".join(parts)
