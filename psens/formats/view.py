"""Two formats side by side: the prompt diff as escaped HTML (no UI imports).

:func:`prompt_diff` splits two rendered prompts into equal and changed runs of characters
(:class:`difflib.SequenceMatcher`, no junk heuristic); :func:`prompt_diff_html` shows them
as two ``<pre>`` blocks with the changed runs marked, every piece of text HTML-escaped
(prompts hold dataset text). Line breaks and spaces that changed are shown as ``⏎`` and
``·`` inside the marks, so a change of spacing is visible.
"""

from __future__ import annotations

import difflib
import html

__all__ = ["prompt_diff", "prompt_diff_html"]

_MARK_A = "background:#fdd;text-decoration:line-through"
_MARK_B = "background:#dfd"


def prompt_diff(a: str, b: str) -> list[tuple[str, str, str]]:
    """``(op, text_a, text_b)`` runs: ``op`` is ``"equal"``, ``"replace"``, ``"delete"`` or
    ``"insert"``; joining ``text_a`` (``text_b``) gives back ``a`` (``b``).

    Examples
    --------
    >>> prompt_diff("Answer:", "ANSWER:")[0]
    ('equal', 'A', 'A')
    """
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(op, a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in sm.get_opcodes()]


def _visible(text: str) -> str:
    return html.escape(text.replace(" ", "·").replace("\n", "⏎\n"))


def prompt_diff_html(a: str, b: str, *, title_a: str = "A", title_b: str = "B") -> str:
    """Two ``<pre>`` blocks, ``a`` with its removed runs struck through, ``b`` with its added
    runs marked; all text escaped."""
    left, right = [], []
    for op, ta, tb in prompt_diff(a, b):
        if op == "equal":
            left.append(html.escape(ta))
            right.append(html.escape(tb))
            continue
        if ta:
            left.append(f'<span style="{_MARK_A}">{_visible(ta)}</span>')
        if tb:
            right.append(f'<span style="{_MARK_B}">{_visible(tb)}</span>')
    pre = "white-space:pre-wrap;font-size:0.85em;margin:0;padding:4px;border:1px solid #ddd"
    cell = "vertical-align:top;padding:0 6px;width:50%"
    return (
        '<table style="width:100%;table-layout:fixed"><tr>'
        f'<th style="text-align:left">{html.escape(title_a)}</th>'
        f'<th style="text-align:left">{html.escape(title_b)}</th></tr><tr>'
        f'<td style="{cell}"><pre style="{pre}">{"".join(left)}</pre></td>'
        f'<td style="{cell}"><pre style="{pre}">{"".join(right)}</pre></td></tr></table>'
    )
