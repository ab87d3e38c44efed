"""Altair charts for DBSA results (paper figs. 2–4, table 4, appendix C).

Every function takes the tidy DataFrames of :mod:`psens.dbsa.ablations` (or
:func:`~psens.dbsa.analysis.top_k`) and returns an :class:`altair.Chart` without displaying
it. altair is imported inside the functions, so ``import psens.dbsa`` does not need it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._validation import fail

__all__ = [
    "effect_size_chart",
    "metric_ablation_chart",
    "rank_correlation_chart",
    "sample_size_chart",
    "top_k_chart",
]


def _alt() -> Any:
    try:
        import altair as alt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("DBSA charts need altair: pip install 'psens[widgets]'") from err
    return alt


def _need(df: pd.DataFrame, cols: list[str], where: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        fail(
            where,
            f"the table lacks columns {missing}",
            "Pass the DataFrame made by the matching psens.dbsa function",
        )


def effect_size_chart(df: pd.DataFrame, *, value: str = "effect_size") -> Any:
    """Per-token effect sizes of several models as a heatmap (fig. 2): tokens × models.

    ``df`` is :func:`psens.dbsa.ablations.effect_sizes`.
    """
    alt = _alt()
    _need(df, ["model", "token", "order", value], "effect_size_chart")
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
    alt = _alt()
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
    alt = _alt()
    _need(df, ["model", by, "spearman"], "metric_ablation_chart")
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
    alt = _alt()
    _need(df, ["n_samples", "model_a", "model_b", "spearman"], "sample_size_chart")
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
    """Bar chart of a :func:`~psens.dbsa.analysis.top_k` table, coloured by significance."""
    alt = _alt()
    _need(table, ["token", "effect_size", "p_value", "significant"], "top_k_chart")
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
