"""PSSByVariant: ProSA's PromptSensiScore per model, per prompt variant, style or shot.

ProSA (Zhuo et al., 2024) scores an instance by the mean absolute score gap over the unordered
pairs of its prompt variants (§2.2 eq. 1) and a model by the mean over instances (eq. 2);
binary correctness for objective tasks, graded judge scores for subjective ones (§4). The
widget shows, for a selection of models:

* ``view="model"``: the dataset PSS per model (ProSA fig. 3/4);
* ``view="variant"``: each variant's share of the PSS, ``D_p`` = the mean gap between
  variant ``p`` and the other variants (:func:`psens.pss.variant_disagreement`;
  its mean over variants is the PSS), which shows *which* prompts drive a model's
  sensitivity, with the mean score per variant in the table;
* ``view="style"``: PSS within each prompt style (the three variants of ProSA §3.1's
  simple / role / emotional / output styles), when the variants carry a ``style`` coord;
* ``view="shot"``: PSS against the number of shots (§3.4 fig. 5), when there is a ``shot``
  dim.

The tables come from the UI-free :func:`psens.pss.tables.pss_tables`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import ipywidgets
import traitlets
import xarray as xr

from psens._charts import PICK, mark_synthetic
from psens._validation import fail
from psens.pss.charts import pss_by_model, pss_by_shot, pss_by_variant
from psens.pss.tables import CANDIDATES, pss_tables, variant_dim
from psens.store.labels import model_names

from ._base import BaseWidget

__all__ = ["PSSByVariant", "pss_tables"]

VIEWS = ("model", "variant", "style", "shot")


class PSSByVariant(BaseWidget):
    """PSS per model / per variant, style or shot, for binary or graded scores.

    Parameters
    ----------
    data : xarray.Dataset or mapping of str to DataArray
        Score variables over ``model × sample × variant`` (+ ``shot``), values in [0, 1],
        NaN for failed calls — e.g. :func:`psens.eas.to_dataset` output, or a Dataset built
        from ProSA runs. ``variables`` maps the score kinds to variable names; by default
        binary = the first of ``binary, correct, heuristic`` and graded = the first of
        ``graded, score, judge_score, prob_gold`` present.
    variables : mapping, optional
        ``{"binary": name, "graded": name}`` (either may be omitted).
    **state
        ``score`` ("binary"/"graded"), ``models`` (list), ``view`` ("model", "variant",
        "style", "shot"), ``shot`` (int).

    Examples
    --------
    >>> w = PSSByVariant(ds, view="variant")  # doctest: +SKIP
    >>> w.score = "graded"  # doctest: +SKIP
    >>> w.tables["model"]  # PSS per model  # doctest: +SKIP
    """

    score = traitlets.Enum(("binary", "graded"), default_value="binary")
    models = traitlets.List(traitlets.Unicode())
    view = traitlets.Enum(VIEWS, default_value="model")
    shot = traitlets.Int(None, allow_none=True)
    _state = ("score", "models", "view", "shot")
    _pick_field = "model"

    def __init__(
        self,
        data: xr.Dataset | Mapping[str, xr.DataArray],
        *,
        variables: Mapping[str, str] | None = None,
        models: Sequence[str] | None = None,
        **state: Any,
    ) -> None:
        where = "PSSByVariant"
        if isinstance(data, Mapping) and not isinstance(data, xr.Dataset):
            data = xr.Dataset(dict(data))
        if not isinstance(data, xr.Dataset):
            fail(where, f"got a {type(data).__name__}", "Pass an xarray Dataset", TypeError)
        self.data = data
        self.variables: dict[str, str] = {}
        for kind, names in CANDIDATES.items():
            given = (variables or {}).get(kind)
            if given is not None:
                if given not in data.data_vars:
                    fail(where, f"variable {given!r} is not in the Dataset", "Check variables")
                self.variables[kind] = given
            else:
                found = next((n for n in names if n in data.data_vars), None)
                if found is not None:
                    self.variables[kind] = found
        if not self.variables:
            fail(
                where,
                f"no score variable among {list(data.data_vars)}",
                "Pass variables={'binary': name} or {'graded': name}",
            )
        first = data[next(iter(self.variables.values()))]
        self.model_names = model_names(first) if "model" in first.dims else []
        if not self.model_names:
            fail(where, "the scores have no model dim", "Add a model dim (expand_dims)")
        self.vdim = variant_dim(first, where)
        self.views = ["model", "variant"]
        if "style" in first.coords:
            self.views.append("style")
        if "shot" in first.dims:
            self.views.append("shot")
            state.setdefault("shot", int(first["shot"].values[0]))
        state.setdefault("score", next(iter(self.variables)))
        super().__init__(models=list(models) if models is not None else self.model_names, **state)
        self._build()

    @traitlets.validate("score")
    def _valid_score(self, proposal):
        if proposal["value"] not in self.variables:
            fail("PSSByVariant", f"score={proposal['value']!r}", f"Use {list(self.variables)}")
        return proposal["value"]

    @traitlets.validate("models")
    def _valid_models(self, proposal):
        bad = [m for m in proposal["value"] if m not in self.model_names]
        if bad:
            fail("PSSByVariant", f"unknown models {bad}", f"Use names from {self.model_names}")
        return list(proposal["value"])

    @traitlets.validate("view")
    def _valid_view(self, proposal):
        if proposal["value"] not in self.views:
            fail("PSSByVariant", f"view={proposal['value']!r}", f"Use one of {self.views}")
        return proposal["value"]

    @traitlets.validate("shot")
    def _valid_shot(self, proposal):
        shot = proposal["value"]
        first = self.data[next(iter(self.variables.values()))]
        if "shot" in first.dims and shot not in [int(s) for s in first["shot"].values]:
            fail("PSSByVariant", f"shot={shot!r}", f"Use one of {first['shot'].values.tolist()}")
        return shot

    def _controls(self) -> dict[str, ipywidgets.Widget]:
        labels = {"model": "per model", "variant": "per variant", "style": "per style"}
        labels["shot"] = "per shot"
        out: dict[str, ipywidgets.Widget] = {
            "score": ipywidgets.ToggleButtons(
                options=[(f"{k} ({v})", k) for k, v in self.variables.items()], value=self.score
            ),
            "view": ipywidgets.ToggleButtons(
                options=[(labels[v], v) for v in self.views], value=self.view
            ),
            "models": ipywidgets.SelectMultiple(
                options=self.model_names,
                value=tuple(self.models),
                rows=min(6, len(self.model_names)),
                description="models",
            ),
        }
        if "shot" in self.views:
            shots = [int(s) for s in self.data["shot"].values]
            out["shot"] = ipywidgets.Dropdown(options=shots, value=self.shot, description="shots")
        return out

    def _compute(self) -> dict[str, Any]:
        da = self.data[self.variables[self.score]]
        tables = pss_tables(da, shot=self.shot, models=self.models)
        return {k: mark_synthetic(t, self.data) for k, t in tables.items()}

    def _chart(self, tables: dict[str, Any]) -> alt.TopLevelMixin:
        kind = f"{self.score} scores"
        shot = f", {self.shot}-shot" if self.shot is not None and self.view != "shot" else ""
        if self.view == "model":
            return pss_by_model(
                tables["model"], select=PICK, title=f"PSS per model ({kind}{shot})"
            ).properties(width=max(200, 40 * len(self.models)), height=260)
        if self.view == "variant":
            return pss_by_variant(
                tables["variant"],
                select=PICK,
                title=f"Per-variant disagreement D_p; dashed: PSS ({kind}{shot})",
            ).properties(width=420, height=260)
        if self.view == "style":
            return pss_by_variant(
                tables["style"],
                variant="style",
                value="pss",
                select=PICK,
                title=f"PSS within each prompt style ({kind}{shot})",
            ).properties(width=300, height=260)
        return pss_by_shot(
            tables["shot"], select=PICK, title=f"PSS by number of shots ({kind})"
        ).properties(width=320, height=260)

    def _summary(self, tables: dict[str, Any]) -> str:
        t = tables["model"]
        if t.empty:
            return "no model selected"
        best = t.loc[t["pss"].idxmin()] if t["pss"].notna().any() else None
        skipped = int(t["n_skipped"].sum())
        text = f"{len(t)} models · mean PSS {t['pss'].mean():.3f}"
        if best is not None:
            text += f" · least sensitive: {best['model']} ({best['pss']:.3f})"
        return text + f" · {skipped} (model, instance) cells skipped (< 2 valid variants)"
