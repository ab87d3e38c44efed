"""Altair charts for DBSA results (paper figs. 2–4, table 4, appendix C).

Every function takes the tidy DataFrames of :mod:`psens.dbsa.ablations` (or
:func:`~psens.dbsa.metric.top_k`) and returns an :class:`altair.Chart` without displaying
it. altair is imported inside the functions, so ``import psens.dbsa`` does not need it.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._charts import altair, need_columns
from .._validation import check_positive_int, fail

__all__ = [
    "compare_top_k",
    "compare_top_k_chart",
    "effect_size_chart",
    "metric_ablation_chart",
    "rank_correlation_chart",
    "sample_size_chart",
    "top_k_chart",
]


def effect_size_chart(df: pd.DataFrame, *, value: str = "effect_size") -> Any:
    """Per-token effect sizes of several models as a heatmap (fig. 2): tokens × models.

    ``df`` is :func:`psens.dbsa.ablations.effect_sizes`.
    """
    alt = altair()
    need_columns(df, ["model", "token", "order", value], "effect_size_chart")
    order = df.sort_values("order").drop_duplicates("token")["token"].tolist()
    return (
        alt.Chart(df)
        .mark_rect()
        .encode(
            x=alt.X("token:N", sort=order, title="token"),
            y=alt.Y("model:N", title=None),
            color=alt.Color(f"{value}:Q", scale=alt.Scale(scheme="reds"), title="ω"),
            tooltip=[
                "model",
                "token",
                alt.Tooltip(f"{value}:Q", format=".3f"),
                alt.Tooltip("p_value:Q", format=".3f"),
            ],
        )
        .properties(title="DBSA effect size per token")
    )


def rank_correlation_chart(matrix: pd.DataFrame) -> Any:
    """Heatmap with values of the model × model Spearman matrix (table 4)."""
    alt = altair()
    if matrix.shape[0] != matrix.shape[1]:
        fail(
            "rank_correlation_chart",
            f"the matrix has shape {matrix.shape}",
            "Pass rank_correlations(results) (square)",
        )
    long = (
        matrix.rename_axis("model_a")
        .reset_index()
        .melt("model_a", var_name="model_b", value_name="spearman")
    )
    order = list(matrix.index)
    base = alt.Chart(long).encode(
        x=alt.X("model_b:N", sort=order, title=None), y=alt.Y("model_a:N", sort=order, title=None)
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "spearman:Q", scale=alt.Scale(scheme="blueorange", domain=[-1, 1]), title="ρ"
        )
    )
    text = base.mark_text(fontSize=11).encode(text=alt.Text("spearman:Q", format=".2f"))
    return (rect + text).properties(title="Spearman rank correlation of token effect sizes")


def metric_ablation_chart(df: pd.DataFrame, *, by: str = "pair") -> Any:
    """Fig. 3: ρ per setting pair — individual models in grey, the mean across models in blue.

    ``df`` is :func:`~psens.dbsa.ablations.metric_ablation` or ``statistic_ablation``.
    """
    alt = altair()
    need_columns(df, ["model", by, "spearman"], "metric_ablation_chart")
    base = alt.Chart(df).encode(x=alt.X(f"{by}:N", title=None))
    models = base.mark_point(color="grey", opacity=0.6, filled=True).encode(
        y=alt.Y("spearman:Q", scale=alt.Scale(domain=[-1, 1]), title="Spearman ρ"),
        tooltip=["model", by, "spearman"],
    )
    mean = base.mark_point(color="#1f77b4", size=120, shape="diamond", filled=True).encode(
        y="mean(spearman):Q"
    )
    return (models + mean).properties(title="Agreement of token rankings across settings")


def sample_size_chart(df: pd.DataFrame) -> Any:
    """Fig. 4: ρ against the number of Monte Carlo samples, one line per prompt / model pair."""
    alt = altair()
    need_columns(df, ["n_samples", "model_a", "model_b", "spearman"], "sample_size_chart")
    data = df.assign(
        series=df["model_a"].astype(str)
        + " vs "
        + df["model_b"].astype(str)
        + (
            " · " + df["prompt"].astype(str)
            if "prompt" in df and df["prompt"].notna().any()
            else ""
        )
    )
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("n_samples:Q", title="Monte Carlo samples"),
            y=alt.Y("spearman:Q", scale=alt.Scale(domain=[-1, 1]), title="Spearman ρ"),
            color=alt.Color("series:N", title=None),
            tooltip=["series", "n_samples", alt.Tooltip("spearman:Q", format=".2f")],
        )
        .properties(title="Stability of DBSA rankings with the number of samples")
    )


def top_k_chart(table: pd.DataFrame) -> Any:
    """Bar chart of a :func:`~psens.dbsa.metric.top_k` table, coloured by significance."""
    alt = altair()
    need_columns(table, ["token", "effect_size", "p_value", "significant"], "top_k_chart")
    return (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=alt.X("effect_size:Q", title="effect size ω"),
            y=alt.Y("token:N", sort="-x", title=None),
            color=alt.Color(
                "significant:N", scale=alt.Scale(domain=[True, False], range=["#d62728", "#aaaaaa"])
            ),
            tooltip=[
                "token",
                alt.Tooltip("effect_size:Q", format=".3f"),
                alt.Tooltip("p_value:Q", format=".3f"),
            ],
        )
        .properties(title="Top tokens by DBSA effect size")
    )


def compare_top_k(
    results: Mapping[str, xr.Dataset], k: int = 5, *, alpha: float = 0.05, p: str = "p_value"
) -> pd.DataFrame:
    """Tidy table of the top-``k`` tokens of several models, each looked up in every model.

    The tokens are the union of every model's top ``k`` (by effect size). For each model and
    each of these tokens one row: ``model``, ``token``, ``rank`` (1-based rank of the token by
    effect size within that model, over all its tested tokens), ``top`` (``rank <= k``),
    ``effect_size`` (:math:`E_w`), ``score`` (min–max normalised within the model),
    ``p_value`` (the variable named by ``p``) and ``significant`` (``p_value < alpha``).
    A token a model did not test is left out for that model. Rows are ordered by model, then by
    the tokens' best rank over the models (ties: first model first).

    Parameters
    ----------
    results : mapping of str to Dataset
        ``{model name: analysed DBSA Dataset}`` (:func:`~psens.dbsa.metric.analyse`).
    k : int, default 5
    alpha : float, default 0.05
    p : {"p_value", "p_value_mean", "p_value_combined"}, default "p_value"

    Returns
    -------
    pandas.DataFrame
        ``df.attrs["order"]`` holds the token order (for a chart axis).
    """
    k = check_positive_int(k, "compare_top_k", "k")
    if not results:
        fail("compare_top_k", "no results given", "Pass {model name: analysed Dataset}")
    per_model: dict[str, pd.DataFrame] = {}
    for model, ds in results.items():
        if "effect_size" not in ds.variables or p not in ds.variables:
            fail(
                "compare_top_k",
                f"the Dataset of {model!r} has no effect_size/{p}",
                "Run psens.dbsa.analyse on it first",
            )
        t = pd.DataFrame(
            {
                "token": [str(x) for x in ds["token"].values],
                "effect_size": ds["effect_size"].values.astype(float),
                "score": ds["score"].values.astype(float),
                "p_value": ds[p].values.astype(float),
            }
        )
        t = t.sort_values("effect_size", ascending=False, kind="stable").reset_index(drop=True)
        t.insert(0, "rank", np.arange(1, len(t) + 1))
        per_model[str(model)] = t
    best: dict[str, tuple[int, int]] = {}
    for i, t in enumerate(per_model.values()):
        for _, row in t[t["rank"] <= k].iterrows():
            key = (int(row["rank"]), i)
            best[row["token"]] = min(best.get(row["token"], key), key)
    order = sorted(best, key=lambda w: best[w])
    rows = []
    for model, t in per_model.items():
        sub = t.set_index("token")
        for w in order:
            if w in sub.index:
                r = sub.loc[w]
                rows.append(
                    {
                        "model": model,
                        "token": w,
                        "rank": int(r["rank"]),
                        "top": bool(r["rank"] <= k),
                        "effect_size": float(r["effect_size"]),
                        "score": float(r["score"]),
                        "p_value": float(r["p_value"]),
                        "significant": bool(r["p_value"] < alpha),
                    }
                )
    out = pd.DataFrame(
        rows,
        columns=[
            "model",
            "token",
            "rank",
            "top",
            "effect_size",
            "score",
            "p_value",
            "significant",
        ],
    )
    out.attrs.update(order=order, k=k, alpha=alpha, p_value=p)
    return out


def compare_top_k_chart(
    df: pd.DataFrame,
    *,
    value: str = "effect_size",
    select: str | None = None,
    title: str | None = None,
) -> Any:
    """Grouped bars of the top-k tokens of several models (the table of :func:`compare_top_k`).

    One row per token (best-ranked first), one bar per model (colour); significant bars are
    opaque, the others faded, and a token outside a model's own top k has a dashed outline.

    Parameters
    ----------
    df : DataFrame
        :func:`compare_top_k` output.
    value : {"effect_size", "score"}, default "effect_size"
        The bar length: raw :math:`E_w` (comparable across models) or the within-model
        normalised score.
    select : str, optional
        Name of a click point selection on ``token`` to add (a widget reads it back).
    title : str, optional
    """
    alt = altair()
    if value not in ("effect_size", "score"):
        fail("compare_top_k_chart", f"value={value!r}", 'Use "effect_size" or "score"')
    need_columns(
        df, ["model", "token", "top", value, "p_value", "significant"], "compare_top_k_chart"
    )
    order = list(df.attrs.get("order") or dict.fromkeys(df["token"]))
    models = list(dict.fromkeys(df["model"]))
    label = "effect size ω" if value == "effect_size" else "normalised score"
    chart = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", title=label),
            y=alt.Y("token:N", sort=order, title=None),
            yOffset=alt.YOffset("model:N", sort=models),
            color=alt.Color("model:N", sort=models, title="model"),
            opacity=alt.Opacity(
                "significant:N",
                scale=alt.Scale(domain=[True, False], range=[1.0, 0.4]),
                title=f"p < {df.attrs.get('alpha', 0.05)}",
            ),
            strokeDash=alt.StrokeDash(
                "top:N",
                scale=alt.Scale(domain=[True, False], range=[[1, 0], [3, 2]]),
                title="in own top k",
            ),
            stroke=alt.value("#333"),
            strokeWidth=alt.value(0.6),
            tooltip=[
                "model",
                "token",
                "rank",
                alt.Tooltip("effect_size:Q", format=".3f"),
                alt.Tooltip("score:Q", format=".2f"),
                alt.Tooltip("p_value:Q", format=".3f"),
            ],
        )
        .properties(
            title=title
            or f"Top {df.attrs.get('k', '')} tokens by DBSA effect size".replace("  ", " "),
            width=360,
        )
    )
    if select is not None:
        chart = chart.add_params(
            alt.selection_point(name=select, fields=["token"], on="click", empty=True)
        )
    return chart
