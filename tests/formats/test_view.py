"""The prompt diff of two formats (escaped HTML) and the FormatSpace widget."""

from __future__ import annotations

import numpy as np
import pytest

from psens.formats.view import prompt_diff, prompt_diff_html

from ..support import HOSTILE


def test_diff_runs_join_back_to_both_prompts():
    a, b = "Question: x\nAnswers:\nA.x\nAnswer:", "Q - x\n\nANSWERS::\n(A) x\nAnswer::"
    runs = prompt_diff(a, b)
    assert "".join(r[1] for r in runs) == a and "".join(r[2] for r in runs) == b
    assert {op for op, *_ in runs} >= {"equal", "replace"}


def test_diff_html_escapes_the_prompts_and_marks_the_changes():
    out = prompt_diff_html(
        f"Question: {HOSTILE}\nAnswer:", f"Q: {HOSTILE}\nANSWER:", title_a=HOSTILE
    )
    assert "<script>" not in out and "&lt;/script&gt;" in out
    assert out.count("background:#fdd") >= 1 and out.count("background:#dfd") >= 1
    # a changed line break is visible inside the mark
    assert "⏎" in prompt_diff_html("a\nb", "a b")


def test_the_widget_on_a_format_run():
    import psens.widgets as W

    ds = _format_run()
    w = W.FormatSpace(ds)
    assert w.tables["differ"] and len(w.tables["differ"]) == 1  # default B: one change from A
    assert "accuracy" in w.diff.value and "IPS between A and B" in w.pair_html.value
    w.format_b = w.format_names[-1]
    t = w.tables["pair"]
    assert set(t) == {"all", "low", "mid", "high"}
    w.controls["tau"].value = 0.2
    assert w.tau == 0.2
    spec = w.chart().to_dict()
    assert spec["layer"]
    w.format_b = w.format_a
    assert w.tables["pair"] is None and "same format" in w.pair_html.value
    with pytest.raises(ValueError, match="unknown format"):
        w.format_a = "fmt-nope"
    with pytest.raises(ValueError, match="no format coordinates"):
        from psens.synthetic import synthetic_run

        W.FormatSpace(synthetic_run(n_samples=2))


def _format_run():
    """A synthetic run whose five templates are the ips grammar's points (one change apart)."""
    from psens.formats import GRAMMARS
    from psens.synthetic import synthetic_run

    ds = synthetic_run(n_samples=4)
    g = GRAMMARS["ips"]
    points = [g.point(i) for i in (0, 1, 2, 4, 6)][: ds.sizes["template"]]
    ids = [p.id for p in points]
    ds = ds.assign_coords(template=ids)
    for dim in points[0].coords:
        ds = ds.assign_coords(
            {f"fmt_{dim}": ("template", np.array([p.coords[dim] for p in points], object))}
        )
    return ds
