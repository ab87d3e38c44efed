"""CaseStudy: one sample under two templates, interaction by interaction (fig. 3a, 19)."""

from __future__ import annotations

from typing import Any

import altair as alt
import ipywidgets
import traitlets

from psens._validation import fail
from psens.ips.charts import case_study_chart
from psens.ips.tables import case_table

from ._base import ChartWidget, check_run

__all__ = ["CaseStudy"]


class CaseStudy(ChartWidget):
    """The top salient interactions of one sample under templates T and T̂, side by side.

    Bars are the normalised effects :math:`\\tilde I(S)` under T (blue) and T̂ (red), each
    labelled by the words of S (``AND {lay, eggs}``); the dashed lines mark :math:`\\pm\\tau`.
    The subtitle gives both predictions, so the paper's point (interactions change even
    when the output does not) can be checked sample by sample.

    Parameters
    ----------
    ds : xarray.Dataset
        A psens run or a slice of one.
    model, sample : str, optional
        Default: the first of each.
    template_a, template_b : str, optional
        Default: the first two templates.
    tau : float, optional
        Salience threshold: only interactions salient under T or T̂ are ranked (default:
        the run's own τ, :func:`psens.settings.run_settings`).
    top_k : int, default 10
        How many interactions to draw.
    shot : int, optional
        For runs with a ``shot`` dim.

    Examples
    --------
    >>> import psens.synthetic, psens.widgets
    >>> w = psens.widgets.CaseStudy(psens.synthetic.synthetic_run(n_samples=3), top_k=3)
    >>> bool(w.tables["case"]["label"].str.match(r"(AND|OR) \\{").all())
    True
    """

    model = traitlets.Unicode()
    sample = traitlets.Unicode()
    template_a = traitlets.Unicode()
    template_b = traitlets.Unicode()
    top_k = traitlets.Int(10)
    shot = traitlets.Int(None, allow_none=True)
    _state = ("model", "sample", "template_a", "template_b", "tau", "top_k", "shot")

    def __init__(self, ds, **state: Any) -> None:
        check_run(ds, type(self).__name__)
        templates = [str(t) for t in ds["template"].values]
        if len(templates) < 2:
            fail("CaseStudy", "the run has one template", "Pass a run with two or more")
        state.setdefault("template_a", templates[0])
        state.setdefault("template_b", templates[1] if templates[0] != templates[1] else "")
        super().__init__(ds, **state)

    @traitlets.validate("top_k")
    def _valid_top_k(self, proposal):
        if proposal["value"] < 1:
            fail("CaseStudy", f"top_k={proposal['value']}", "Use top_k >= 1")
        return proposal["value"]

    def _controls(self) -> dict[str, ipywidgets.Widget]:
        out: dict[str, ipywidgets.Widget] = {
            "model": self._dropdown("model"),
            "sample": self._dropdown("sample"),
            "template_a": self._dropdown("template_a", "T"),
            "template_b": self._dropdown("template_b", "T̂"),
            "tau": self._tau_control(),
            "top_k": ipywidgets.IntSlider(
                value=self.top_k, min=1, max=30, description="top k", continuous_update=False
            ),
        }
        return {**out, **self._shot_control()}

    def _compute(self) -> dict[str, Any]:
        if self.template_a == self.template_b:
            return {"case": None, "info": {"same": True}}
        table, info = case_table(
            self.ds,
            self.model,
            self.sample,
            (self.template_a, self.template_b),
            tau=self.tau,
            top_k=self.top_k,
            shot=self.shot,
        )
        return {"case": table, "info": info}

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        info = tables["info"]
        if info.get("same"):
            return (
                alt.Chart()
                .mark_text(text="pick two different templates")
                .properties(width=420, height=60)
            )
        (ta, tb), (pa, pb) = info["templates"], info["predictions"]
        ca, cb = ("correct" if c else "wrong" for c in info["correct"])
        changed = "output changed" if pa != pb else "same output"
        subtitle = [
            f"T = {ta}: prediction {pa} ({ca});  T̂ = {tb}: prediction {pb} ({cb});  {changed}"
            + (f";  answer {info['target']}" if info.get("target") else ""),
            f"variables: {', '.join(info['words'])}",
        ]
        return case_study_chart(
            tables["case"],
            (ta, tb),
            tau=self.tau,
            title=f"{self.model} · sample {self.sample}",
            subtitle=subtitle,
        )

    def _summary(self, tables: dict[str, Any]) -> str:
        if tables["info"].get("same"):
            return "T and T̂ are the same template"
        t, info = tables["case"], tables["info"]
        if info.get("pending"):
            return f"{self.model} × {self.sample}: no interactions stored (block pending or failed)"
        shown = t.drop_duplicates("label")
        counts = shown["class"].value_counts().to_dict()
        detail = ", ".join(f"{v} {k}" for k, v in counts.items())
        return f"{info['n_salient']} salient interactions; top {len(shown)} shown: {detail}"
