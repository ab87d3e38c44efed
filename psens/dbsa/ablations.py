r"""Cross-model comparisons and ablations of DBSA (paper §6, table 4, figs 2–4, appendix C).

All functions take analysed or collected DBSA Datasets (see :mod:`psens.dbsa.metric`) and
re-run only :func:`~psens.dbsa.metric.analyse` on the stored embeddings — no model call.
They return tidy :class:`pandas.DataFrame` objects; :mod:`psens.dbsa.charts` draws them.

Rank correlation is Spearman's ρ between the per-token effect sizes ``E_w`` over the tokens
that both results tested (ties get average ranks; ρ is NaN when either side is constant or
fewer than 3 tokens are shared).

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.

Ablations of §6.3–6.5 and appendix C (similarity functions, statistics, sample sizes, neighbours).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .._validation import fail
from .metric import _iter_models, analyse

__all__ = [
    "effect_sizes",
    "metric_ablation",
    "neighbour_ablation",
    "rank_correlations",
    "sample_size_ablation",
    "spearman",
    "statistic_ablation",
]

Results = Mapping[str, xr.Dataset] | Iterable[xr.Dataset]


def spearman(a: pd.Series, b: pd.Series) -> tuple[float, int]:
    """Spearman ρ of two token-indexed series over their shared tokens → ``(rho, n_shared)``."""
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    if len(both) < 3:
        return float("nan"), len(both)
    ra, rb = both["a"].rank(), both["b"].rank()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan"), len(both)
    return float(np.corrcoef(ra, rb)[0, 1]), len(both)


def _scores(ds: xr.Dataset, var: str = "effect_size") -> pd.Series:
    if var not in ds.variables:
        fail("dbsa ablations", f"the Dataset has no {var!r}", "Run psens.dbsa.analyse on it first")
    return pd.Series(ds[var].values.astype(float), index=[str(t) for t in ds["token"].values])


def effect_sizes(results: Results) -> pd.DataFrame:
    """Tidy per-token results of several models (paper fig. 2).

    Columns: model, token, order (first appearance), effect_size, p_value, score.
    """
    rows = []
    for model, ds in _iter_models(results).items():
        for i, t in enumerate(ds["token"].values):
            rows.append(
                {
                    "model": model,
                    "token": str(t),
                    "order": i,
                    "effect_size": float(ds["effect_size"].values[i]),
                    "p_value": float(ds["p_value"].values[i]),
                    "score": float(ds["score"].values[i]),
                }
            )
    return pd.DataFrame(rows)


def rank_correlations(
    results: Results, *, var: str = "effect_size", tidy: bool = False
) -> pd.DataFrame:
    """Spearman rank correlations of token effect sizes between models (paper table 4).

    Returns a square model × model DataFrame (diagonal 1), or with ``tidy=True`` the long
    form ``model_a, model_b, spearman, n_tokens`` over unordered pairs.
    """
    models = _iter_models(results)
    if len(models) < 2:
        fail(
            "rank_correlations",
            f"{len(models)} result(s) given",
            "Pass at least two models' results",
        )
    series = {k: _scores(v, var) for k, v in models.items()}
    names = list(series)
    mat = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    rows = []
    for a, b in itertools.combinations(names, 2):
        rho, cnt = spearman(series[a], series[b])
        mat.loc[a, b] = mat.loc[b, a] = rho
        rows.append({"model_a": a, "model_b": b, "spearman": rho, "n_tokens": cnt})
    return pd.DataFrame(rows) if tidy else mat


def _setting_ablation(
    results: Results,
    settings: Sequence[str],
    key: str,
    fixed: dict[str, object],
    permutations: int,
    seed: int,
) -> pd.DataFrame:
    rows = []
    for model, ds in _iter_models(results).items():
        scored = {
            s: _scores(analyse(ds, **{key: s}, **fixed, permutations=permutations, seed=seed))
            for s in settings
        }
        for a, b in itertools.combinations(settings, 2):
            rho, cnt = spearman(scored[a], scored[b])
            rows.append(
                {
                    "model": model,
                    f"{key}_a": a,
                    f"{key}_b": b,
                    "pair": f"{a} vs {b}",
                    "spearman": rho,
                    "n_tokens": cnt,
                }
            )
    return pd.DataFrame(rows)


def metric_ablation(
    results: Results,
    metrics: Sequence[str] = ("cosine", "l1", "l2"),
    *,
    statistic: str = "energy",
    permutations: int = 19,
    seed: int = 0,
) -> pd.DataFrame:
    """Agreement of token rankings across distance functions (paper fig. 3 and appendix C, fig. 5).

    Rows: ``model, metric_a, metric_b, pair, spearman, n_tokens``. Effect sizes do not depend on
    ``permutations`` (kept small; raise it only if you look at p-values).
    """
    return _setting_ablation(
        results, list(metrics), "metric", {"statistic": statistic}, permutations, seed
    )


def statistic_ablation(
    results: Results,
    statistics: Sequence[str] = ("energy", "emd", "mean"),
    *,
    metric: str = "cosine",
    permutations: int = 19,
    seed: int = 0,
) -> pd.DataFrame:
    """Agreement of token rankings across test statistics: energy, EMD, mean difference (§6.5)."""
    return _setting_ablation(
        results, list(statistics), "statistic", {"metric": metric}, permutations, seed
    )


def sample_size_ablation(
    results: Results,
    sizes: Sequence[int] = (3, 5, 10, 20, 40),
    *,
    metric: str = "cosine",
    prompt: str | None = None,
    permutations: int = 19,
    seed: int = 0,
) -> pd.DataFrame:
    """Stability of rankings with the number of Monte Carlo samples (paper fig. 4).

    For each size ``s`` the first ``s`` original and perturbed responses are used. With two or
    more models: Spearman ρ between every pair of models at each ``s`` (fig. 4 compares
    GPT-3.5 with GPT-4); with one model: ρ between its ranking at ``s`` and at the full sample.
    Rows: ``prompt, n_samples, model_a, model_b, spearman, n_tokens``.
    """
    models = _iter_models(results)
    if not models:
        fail("sample_size_ablation", "no results given", "Pass {model: Dataset}")
    full = min(min(ds.sizes["original_sample"], ds.sizes["sample"]) for ds in models.values())
    sizes = sorted({int(s) for s in sizes if 2 <= int(s) <= full})
    if not sizes:
        fail(
            "sample_size_ablation",
            f"no size between 2 and the {full} stored samples",
            "Pass sizes within that range",
        )
    rows = []
    ref = None
    if len(models) == 1:
        name, ds = next(iter(models.items()))
        ref = _scores(analyse(ds, metric=metric, permutations=permutations, seed=seed))
    for s in sizes:
        scored = {
            k: _scores(analyse(v, metric=metric, n=s, m=s, permutations=permutations, seed=seed))
            for k, v in models.items()
        }
        if ref is not None:
            rho, cnt = spearman(scored[name], ref)
            rows.append(
                {
                    "prompt": prompt,
                    "n_samples": s,
                    "model_a": name,
                    "model_b": f"{name} (n={full})",
                    "spearman": rho,
                    "n_tokens": cnt,
                }
            )
            continue
        for a, b in itertools.combinations(scored, 2):
            rho, cnt = spearman(scored[a], scored[b])
            rows.append(
                {
                    "prompt": prompt,
                    "n_samples": s,
                    "model_a": a,
                    "model_b": b,
                    "spearman": rho,
                    "n_tokens": cnt,
                }
            )
    return pd.DataFrame(rows)


def neighbour_ablation(
    results: Results,
    ks: Sequence[int] = (1, 2, 3),
    *,
    metric: str = "cosine",
    permutations: int = 19,
    seed: int = 0,
) -> pd.DataFrame:
    """Effect of the number of nearest neighbours k (§6.5).

    Spearman ρ between the ranking with the first ``k`` neighbours and with all of them.
    """
    rows = []
    for model, ds in _iter_models(results).items():
        ref = _scores(analyse(ds, metric=metric, permutations=permutations, seed=seed))
        for k in ks:
            if not 1 <= k <= ds.sizes["neighbour"]:
                continue
            sc = _scores(
                analyse(ds, metric=metric, neighbours=int(k), permutations=permutations, seed=seed)
            )
            rho, cnt = spearman(sc, ref)
            rows.append(
                {
                    "model": model,
                    "k": int(k),
                    "k_full": ds.sizes["neighbour"],
                    "spearman": rho,
                    "n_tokens": cnt,
                }
            )
    return pd.DataFrame(rows)
