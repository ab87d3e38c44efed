"""Evaluation-attributable sensitivity (EAS): heuristic vs judge sensitivity.

The EAS study (Muthukumarana et al.) renders every item with the 2^3 factorial templates (role
framing
× format directive × answer prefix, ids ``T{role}{fmt}{prefix}``), scores each response with a
task heuristic ``h_{i,t}`` and with an LLM judge ``j_{i,t}``, and compares the two sensitivity
estimates per instance::

    SensH_i = σ_t(h_{i,t})     SensJ_i = σ_t(j_{i,t})     (population std, ddof=0)
    EAS_i = |SensH_i − SensJ_i|     SignedEAS_i = SensH_i − SensJ_i
    Δ_k^e = E[e | k = 1] − E[e | k = 0]      (factor main effect, k ∈ {role, fmt, prefix})

Zones: an instance is "high" on a method when its Sens is *strictly* above the 75th
percentile (linear interpolation) of that Sens over all instances of the table (pooled over
datasets and models): artifact = H high & J not, underdetected = J high & H not, genuine =
both, stable = neither.

``compat="eas"`` reproduces the published ``study/metrics.py`` (rules in
``data/reference/README.md``): published scorers (:mod:`psens.eas.scoring`), std 0.0 for a
single template, factor effect 0.0 when a side is empty, missing values counted as published,
dataset stds with ddof=1, and bootstrap CIs drawn with a fresh ``numpy.random.default_rng(42)``
per (group, metric) and 1000 sequential ``rng.choice`` resamples of the mean.

The default mode differs only where the published code is wrong or silent: correct scorers; a
failed response (``raw_response`` missing) or a failed judge call (``judge_correct`` missing)
is excluded, not scored (Sens is NaN with fewer than 2 valid templates, a factor effect is NaN
when one side has no valid template, the zone of an instance with a NaN Sens is missing);
bootstrap resamples are drawn in one vectorised call per (group, metric) from
``default_rng(seed)`` over the non-NaN values.

References
----------
.. [1] Muthukumarana et al., "Prompt Sensitivity or Evaluation Artifact?"; the full
   reference is in :mod:`psens.eas`.

Formulas and rules from the repository's README ("Metrics", "Four-zone taxonomy",
"Structural-factor analysis") and ``study/metrics.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from psens._validation import check_in_interval, check_positive_int, fail
from psens.eas.scoring import Compat, heuristic_scores
from psens.stats import choice_bootstrap_means

__all__ = [
    "DATASET_COLUMNS",
    "FACTORS",
    "INSTANCE_COLUMNS",
    "ZONES",
    "aggregate",
    "bootstrap_ci",
    "build_rows",
    "factor_effects",
    "generate_responses",
    "instance_metrics",
    "judge_float",
    "judge_responses",
    "thresholds",
    "to_dataset",
    "zones",
]

FACTORS = ("role", "fmt", "prefix")
ZONES = ("artifact", "genuine", "underdetected", "stable")
KEYS = ["id", "dataset", "model_name"]
GROUP = ["dataset", "model_name", "task_type"]

INSTANCE_COLUMNS = [
    "id",
    "dataset",
    "model_name",
    "task_type",
    "gold_answer",
    "n_templates",
    "sens_heuristic",
    "sens_judge",
    "eas",
    "signed_eas",
    "mean_heuristic",
    "mean_judge",
    "stab_sem",
    *[f"effect_{k}_{e}" for e in ("heuristic", "judge") for k in FACTORS],
    "trizone",
]

DATASET_COLUMNS = [
    *GROUP,
    "sens_heuristic_mean",
    "sens_heuristic_std",
    "sens_judge_mean",
    "sens_judge_std",
    "eas_mean",
    "eas_std",
    "mean_heuristic",
    "mean_judge",
    "stab_sem_mean",
    *[f"n_{z}" for z in ZONES],
    "n_items",
    "eas_ci_lo",
    "eas_ci_hi",
    "sh_ci_lo",
    "sh_ci_hi",
    "sj_ci_lo",
    "sj_ci_hi",
]

ROW_COLUMNS = ["id", "dataset", "model_name", "task_type", "gold_answer", "raw_response"]


def _check_compat(compat: Compat, where: str) -> None:
    if compat not in (None, "eas"):
        fail(where, f"compat={compat!r} is not known", 'Pass compat=None or compat="eas"')


def _require(df: Any, columns: Sequence[str], where: str, what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        fail(where, f"{what} is a {type(df).__name__}", "Pass a pandas DataFrame", TypeError)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        fail(
            where,
            f"{what} lack the columns {missing}",
            f"Pass a table with the published columns ({', '.join(columns)})",
        )


# --------------------------------------------------------------------------------------------
# zones
# --------------------------------------------------------------------------------------------


def thresholds(sens_heuristic: Any, sens_judge: Any, *, q: float = 0.75) -> tuple[float, float]:
    """Pooled zone thresholds: the ``q`` quantiles (linear, NaN skipped) of SensH and SensJ."""
    check_in_interval(q, "thresholds", "q", 0.0, 1.0, closed="both")
    th = pd.Series(np.asarray(sens_heuristic, dtype=float)).quantile(q)
    tj = pd.Series(np.asarray(sens_judge, dtype=float)).quantile(q)
    return float(th), float(tj)


def zones(
    sens_heuristic: Any,
    sens_judge: Any,
    *,
    q: float = 0.75,
    thresholds_hj: tuple[float, float] | None = None,
    compat: Compat = None,
) -> pd.Series:
    """Four-zone label of each instance (EAS "Four-zone taxonomy").

    ``H = SensH > t_H`` and ``J = SensJ > t_J`` (strictly greater), with ``(t_H, t_J)`` =
    ``thresholds_hj`` or the pooled ``q`` quantiles of the values given (:func:`thresholds`).
    artifact = H ∧ ¬J, underdetected = ¬H ∧ J, genuine = H ∧ J, stable = ¬H ∧ ¬J.
    A NaN Sens gives a missing zone (``compat="eas"``: NaN compares False, as published).
    """
    _check_compat(compat, "zones")
    sh = pd.Series(sens_heuristic, dtype=float).reset_index(drop=True)
    sj = pd.Series(sens_judge, dtype=float).reset_index(drop=True)
    if len(sh) != len(sj):
        fail("zones", f"{len(sh)} SensH values but {len(sj)} SensJ", "Pass paired values")
    th, tj = thresholds_hj if thresholds_hj is not None else thresholds(sh, sj, q=q)
    h = (sh > th).to_numpy()
    j = (sj > tj).to_numpy()
    labels = np.select([h & ~j, ~h & j, h & j], ["artifact", "underdetected", "genuine"], "stable")
    out = pd.Series(labels, dtype=object, name="trizone")
    if compat is None:
        out[(sh.isna() | sj.isna()).to_numpy()] = None
    if isinstance(sens_heuristic, pd.Series):
        out.index = sens_heuristic.index
    return out


# --------------------------------------------------------------------------------------------
# per instance
# --------------------------------------------------------------------------------------------


def judge_float(values: pd.Series) -> pd.Series:
    """Judge verdicts as floats: 1.0 / 0.0 from booleans, numbers or "true"/"false"/"1"/"0";
    NaN for a missing or unreadable verdict (a failed judge call)."""

    def conv(v: Any) -> float:
        if v is None or v is pd.NA:
            return np.nan
        if isinstance(v, str):
            s = v.strip().lower()
            return {"true": 1.0, "false": 0.0, "1": 1.0, "0": 0.0}.get(s, np.nan)
        return float(v)

    if values.dtype == object or str(values.dtype) in ("str", "string"):
        return values.map(conv).astype(float)
    return values.astype(float)


def _semantic_stability(
    df: pd.DataFrame, keys: list[str], embed: Callable[[list[str]], Any]
) -> pd.Series:
    """Mean pairwise cosine similarity of an instance's responses (published ``stab_sem``).

    With unit vectors ``v_t``, ``Σ_{s≠t} v_s·v_t = |Σ_t v_t|² − m``, so the mean over pairs is
    ``(|Σ v|² − m) / (m (m − 1))`` — no loop over pairs; 1.0 for a single response.
    """
    texts = df["raw_response"].where(df["raw_response"].notna(), "").astype(str).tolist()
    vecs = np.asarray(embed(texts), dtype=float)
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True).clip(1e-12)
    sums = pd.DataFrame(vecs, index=df.index).groupby([df[k] for k in keys]).sum()
    m = df.groupby(keys).size().reindex(sums.index).to_numpy()
    sq = (sums.to_numpy() ** 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        val = np.where(m > 1, (sq - m) / (m * (m - 1)), 1.0)
    return pd.Series(val, index=sums.index)


def _dense(values: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Scatter ``values`` into a ``(n_groups, max group size)`` array, NaN-padded, keeping the
    row order within each group (so sums run in the same order as on the group's Series)."""
    counts = np.bincount(codes, minlength=n_groups)
    width = max(int(counts.max()), 1) if counts.size else 1
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    starts = np.cumsum(counts) - counts
    out = np.full((n_groups, width), np.nan)
    out[sc, np.arange(len(codes)) - starts[sc]] = values[order]
    return out


def _nan_mean(dense: np.ndarray) -> np.ndarray:
    """Row means skipping NaN, summed as pandas' ``Series.mean`` does (NaN → 0, sum / count)."""
    mask = np.isnan(dense)
    count = (~mask).sum(axis=1)
    total = np.where(mask, 0.0, dense).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan)


def _nan_std(dense: np.ndarray, ddof: int) -> np.ndarray:
    """Row stds skipping NaN, in the operation order of pandas' ``Series.std``:
    ``sqrt(Σ (x − x̄)² / (count − ddof))`` (bit-identical to the published per-group std)."""
    mask = np.isnan(dense)
    count = (~mask).sum(axis=1)
    filled = np.where(mask, 0.0, dense)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = filled.sum(axis=1) / count
        sqr = np.where(mask, 0.0, (avg[:, None] - filled) ** 2)
        var = sqr.sum(axis=1) / (count - ddof)
        return np.where(count > ddof, np.sqrt(var), np.nan)


def instance_metrics(
    rows: pd.DataFrame,
    compat: Compat = None,
    *,
    q: float = 0.75,
    thresholds_hj: tuple[float, float] | None = None,
    embed: Callable[[list[str]], Any] | None = None,
) -> pd.DataFrame:
    """Per-instance EAS metrics from judged response rows.

    Parameters
    ----------
    rows
        One row per (instance, template) with the published judged-file columns: ``id,
        dataset, model_name, task_type, gold_answer, options | passage | context,
        all_gold_answers, template_id, role, fmt, prefix, raw_response, judge_correct``.
        A missing ``raw_response`` / ``judge_correct`` marks a failed call.
    compat
        ``"eas"`` to reproduce the published numbers (see the module docstring).
    q, thresholds_hj
        Zone quantile, or fixed ``(t_H, t_J)`` thresholds instead of pooling over this table.
    embed
        Optional sentence embedder ``list[str] -> (n, d)`` for ``stab_sem`` (published: mean
        pairwise cosine similarity of the responses); ``stab_sem`` is NaN without it.

    Returns
    -------
    One row per (id, dataset, model_name), sorted by them, with the columns
    :data:`INSTANCE_COLUMNS` (``sens_heuristic``, ``sens_judge``: population std over
    templates; ``eas``, ``signed_eas``; means; ``effect_{role,fmt,prefix}_{heuristic,judge}``
    = Δ_k; ``trizone``).
    """
    where = "instance_metrics"
    _check_compat(compat, where)
    _require(rows, [*ROW_COLUMNS, *FACTORS, "judge_correct"], where, "rows")
    if rows.empty:
        fail(where, "rows is empty", "Pass at least one judged response row")
    df = rows.reset_index(drop=True)
    df = df.assign(
        _h=heuristic_scores(df, compat=compat).to_numpy(),
        _j=judge_float(df["judge_correct"]).to_numpy(),
    )
    for k in FACTORS:
        df[k] = pd.to_numeric(df[k], errors="raise").astype(int)
    for k in FACTORS:
        bad = ~df[k].isin([0, 1])
        if bad.any():
            fail(
                where,
                f"{k} has values {sorted(df.loc[bad, k].unique().tolist())[:5]}",
                "Use 0 or 1",
            )
    g = df.groupby(KEYS, sort=True)
    codes = g.ngroup().to_numpy()
    n_groups = int(codes.max()) + 1
    out = g[["task_type", "gold_answer"]].first()
    n = g.size().to_numpy()
    out["n_templates"] = n
    for col, name, mean_name in (
        ("_h", "sens_heuristic", "mean_heuristic"),
        ("_j", "sens_judge", "mean_judge"),
    ):
        dense = _dense(df[col].to_numpy(dtype=float), codes, n_groups)
        valid = (~np.isnan(dense)).sum(axis=1)
        sd = _nan_std(dense, ddof=0)
        if compat == "eas":
            sd = np.where(n > 1, sd, 0.0)
        else:
            sd = np.where(valid >= 2, sd, np.nan)
        out[name] = sd
        out[mean_name] = _nan_mean(dense)
    out["eas"] = (out["sens_heuristic"] - out["sens_judge"]).abs()
    out["signed_eas"] = out["sens_heuristic"] - out["sens_judge"]
    out = out[
        [
            *out.columns[:3],
            "sens_heuristic",
            "sens_judge",
            "eas",
            "signed_eas",
            "mean_heuristic",
            "mean_judge",
        ]
    ]
    out["stab_sem"] = np.nan if embed is None else _semantic_stability(df, KEYS, embed)
    for e, col in (("heuristic", "_h"), ("judge", "_j")):
        for k in FACTORS:
            level = df[k].to_numpy()
            sub = _dense(df[col].to_numpy(dtype=float), 2 * codes + level, 2 * n_groups)
            means = _nan_mean(sub).reshape(n_groups, 2)
            eff = means[:, 1] - means[:, 0]
            out[f"effect_{k}_{e}"] = np.nan_to_num(eff, nan=0.0) if compat == "eas" else eff
    out = out.reset_index()
    out["trizone"] = zones(
        out["sens_heuristic"], out["sens_judge"], q=q, thresholds_hj=thresholds_hj, compat=compat
    ).to_numpy()
    return out[INSTANCE_COLUMNS]


# --------------------------------------------------------------------------------------------
# bootstrap and dataset aggregates
# --------------------------------------------------------------------------------------------


def bootstrap_ci(
    values: Any,
    *,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 42,
    compat: Compat = None,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean.

    ``n_boot`` resamples of size ``n`` with replacement; the CI is the ``(1−ci)/2`` and
    ``(1+ci)/2`` percentiles (linear) of the resampled means. The percentile ranks are computed
    as ``(1 − ci)/2·100`` and ``(1 + ci)/2·100`` (2.500000000000002 and 97.5 for ci = 0.95), as
    published: with a literal 2.5, 31 of the 81 published lower bounds differ in the last bit.
    Default: NaN values dropped, all resample indices drawn at once from
    ``default_rng(seed)``. ``compat="eas"``: the published procedure — a fresh
    ``default_rng(42)``, ``n_boot`` sequential ``rng.choice(values, n, replace=True).mean()``
    calls on the values as given (drawn vectorised, draw for draw the same; see
    :func:`psens.stats.choice_bootstrap_means`).
    """
    _check_compat(compat, "bootstrap_ci")
    check_positive_int(n_boot, "bootstrap_ci", "n_boot")
    check_in_interval(ci, "bootstrap_ci", "ci", 0.0, 1.0)
    vals = np.asarray(values, dtype=float).ravel()
    lo_q, hi_q = (1 - ci) / 2 * 100, (1 + ci) / 2 * 100
    if compat == "eas":
        rng = np.random.default_rng(42 if seed is None else seed)
    else:
        vals = vals[~np.isnan(vals)]
        rng = np.random.default_rng(seed)
    if vals.size == 0:
        return (np.nan, np.nan)
    boot = choice_bootstrap_means(vals, n_boot, rng)
    return float(np.percentile(boot, lo_q)), float(np.percentile(boot, hi_q))


def aggregate(
    instances: pd.DataFrame,
    compat: Compat = None,
    *,
    q: float = 0.75,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 42,
) -> pd.DataFrame:
    """Dataset-level EAS table: one row per (dataset, model_name, task_type), sorted.

    Columns :data:`DATASET_COLUMNS`, as published: means and sample stds (ddof=1) of
    ``sens_heuristic``, ``sens_judge`` and ``eas``; means of ``mean_heuristic``,
    ``mean_judge``, ``stab_sem``; zone counts ``n_{artifact,genuine,underdetected,stable}``;
    ``n_items``; bootstrap CIs (:func:`bootstrap_ci`) of the mean of ``eas`` (``eas_ci_*``),
    ``sens_heuristic`` (``sh_ci_*``) and ``sens_judge`` (``sj_ci_*``).

    Zones are recomputed from ``sens_heuristic``/``sens_judge`` with thresholds pooled over the
    whole table given (its ``trizone`` column, if any, is not used), so a subset of the
    published table gets the zones of that subset.
    """
    where = "aggregate"
    _check_compat(compat, where)
    need = [*GROUP, "id", "sens_heuristic", "sens_judge", "eas", "mean_heuristic", "mean_judge"]
    _require(instances, need, where, "instances")
    if instances.empty:
        fail(where, "instances is empty", "Pass the per-instance table of instance_metrics")
    df = instances.reset_index(drop=True).copy()
    if "stab_sem" not in df.columns:
        df["stab_sem"] = np.nan
    zone = zones(df["sens_heuristic"], df["sens_judge"], q=q, compat=compat)
    for z in ZONES:
        df[f"_z_{z}"] = (zone == z).to_numpy().astype(np.int64)
    g = df.groupby(GROUP, sort=True)
    out = pd.DataFrame(
        {
            "sens_heuristic_mean": g["sens_heuristic"].mean(),
            "sens_heuristic_std": g["sens_heuristic"].std(ddof=1),
            "sens_judge_mean": g["sens_judge"].mean(),
            "sens_judge_std": g["sens_judge"].std(ddof=1),
            "eas_mean": g["eas"].mean(),
            "eas_std": g["eas"].std(ddof=1),
            "mean_heuristic": g["mean_heuristic"].mean(),
            "mean_judge": g["mean_judge"].mean(),
            "stab_sem_mean": g["stab_sem"].mean(),
            **{f"n_{z}": g[f"_z_{z}"].sum() for z in ZONES},
            "n_items": g["id"].count(),
        }
    )
    cis: dict[str, list[float]] = {
        f"{key}_ci_{s}": [] for key in ("eas", "sh", "sj") for s in ("lo", "hi")
    }
    for _, grp in g:  # groups in sorted order, as published
        for col, key in (("eas", "eas"), ("sens_heuristic", "sh"), ("sens_judge", "sj")):
            lo, hi = bootstrap_ci(
                grp[col].to_numpy(dtype=float), n_boot=n_boot, ci=ci, seed=seed, compat=compat
            )
            cis[f"{key}_ci_lo"].append(lo)
            cis[f"{key}_ci_hi"].append(hi)
    for name, vals in cis.items():
        out[name] = vals
    return out.reset_index()[DATASET_COLUMNS]


def factor_effects(
    instances: pd.DataFrame,
    by: Sequence[str] = ("model_name",),
    *,
    n_boot: int = 0,
    ci: float = 0.95,
    seed: int = 42,
) -> pd.DataFrame:
    """Mean factor main effects Δ_k^h and Δ_k^j per group (EAS "Structural-factor analysis").

    Long table with columns ``*by, factor, effect_heuristic, effect_judge, effect_diff``
    (``= Δ^h − Δ^j``: positive when the factor helps the heuristic parse more than it helps
    the answer) and ``n``; with ``n_boot > 0`` also bootstrap CIs of the two means
    (``{heuristic,judge}_ci_{lo,hi}``).
    """
    by = list(by)
    cols = [f"effect_{k}_{e}" for k in FACTORS for e in ("heuristic", "judge")]
    _require(instances, [*by, *cols], "factor_effects", "instances")
    g = instances.groupby(by, sort=True) if by else [((), instances)]
    records = []
    for key, grp in g:
        key = key if isinstance(key, tuple) else (key,)
        for k in FACTORS:
            h = grp[f"effect_{k}_heuristic"].to_numpy(dtype=float)
            j = grp[f"effect_{k}_judge"].to_numpy(dtype=float)
            rec = dict(zip(by, key, strict=True))
            rec.update(
                factor=k,
                effect_heuristic=float(np.nanmean(h)),
                effect_judge=float(np.nanmean(j)),
                effect_diff=float(np.nanmean(h) - np.nanmean(j)),
                n=int(np.isfinite(h).sum()),
            )
            if n_boot:
                for e, v in (("heuristic", h), ("judge", j)):
                    lo, hi = bootstrap_ci(v, n_boot=n_boot, ci=ci, seed=seed)
                    rec[f"{e}_ci_lo"], rec[f"{e}_ci_hi"] = lo, hi
            records.append(rec)
    return pd.DataFrame.from_records(records)


# --------------------------------------------------------------------------------------------
# running the study: prompts -> responses -> judge verdicts (the published judged-file columns)
# --------------------------------------------------------------------------------------------


def build_rows(
    items: Sequence[Any],
    *,
    dataset: str,
    model_name: str,
    template_ids: Sequence[str] | None = None,
    shots: Sequence[Any] = (),
    k: int | None = None,
) -> pd.DataFrame:
    """One row per (item, template) with the published columns (``id, dataset, question,
    options, passage, context, gold_answer, all_gold_answers, task_type, template_id, role,
    fmt, prefix, prompt, model_name``); options are written as "A) text" strings as published,
    and a missing passage, context or gold answer is None.
    """
    from psens.variants import (
        EAS_TEMPLATE_IDS,
        as_item,
        eas_factors,
        render_variant,
        task_kind,
    )

    tids = list(template_ids or EAS_TEMPLATE_IDS)
    records = []
    for raw in items:
        it = as_item(raw)
        kind = task_kind(it)
        answers = list(it.answers) or ([it.answer] if it.answer else [])
        for tid in tids:
            records.append(
                {
                    "id": it.id,
                    "dataset": dataset,
                    "question": it.question,
                    "options": [f"{lab}) {txt}" for lab, txt in it.options],
                    "passage": it.passage or None,
                    "context": it.context or None,
                    "gold_answer": it.answer or None,
                    "all_gold_answers": answers,
                    "task_type": kind,
                    "template_id": tid,
                    **eas_factors(tid),
                    "prompt": render_variant(it, tid, shots, k),
                    "model_name": model_name,
                }
            )
    return pd.DataFrame.from_records(records)


def generate_responses(rows: pd.DataFrame, client: Any, *, chat: bool = True, **params: Any):
    """Fill ``raw_response``, ``status`` ("ok"/"failed") and ``error`` by calling ``client``
    (an :class:`psens.backends.OpenAIClient`) on ``prompt``.

    Rows already ``status == "ok"`` are kept as they are; only the others are sent, so calling
    this again on its own output retries exactly the failures. A failed call leaves
    ``raw_response`` missing (None), never an empty string.
    """
    _require(rows, ["prompt"], "generate_responses", "rows")
    out = rows.copy()
    for col in ("raw_response", "status", "error"):
        if col not in out.columns:
            out[col] = None
    out["raw_response"] = out["raw_response"].astype(object)
    todo = out.index[out["status"].ne("ok")]
    prompts = out.loc[todo, "prompt"].tolist()
    if chat:
        res = client.chat_many([[{"role": "user", "content": p}] for p in prompts], **params)
    else:
        res = client.complete_many(prompts, **params)
    out.loc[todo, "raw_response"] = pd.Series([r.text for r in res], index=todo, dtype=object)
    out.loc[todo, "status"] = [r.status for r in res]
    out.loc[todo, "error"] = pd.Series([r.error for r in res], index=todo, dtype=object)
    return out


def _reference(row: Any) -> str:
    if row["task_type"] == "mcq":
        gold = str(row["gold_answer"])
        for opt in row["options"]:
            if str(opt).split(")")[0].strip() == gold:
                return str(opt)
        return gold
    answers = row.get("all_gold_answers")
    if isinstance(answers, list | tuple) and answers:
        return " / ".join(str(a) for a in answers)
    return str(row["gold_answer"])


def judge_responses(rows: pd.DataFrame, judge: Any) -> pd.DataFrame:
    """Fill ``judge_raw``, ``judge_correct`` (True/False, None when not judged), ``judge_score``
    and ``judge_status`` with a :class:`psens.backends.Judge`.

    Rows whose ``judge_status`` is already "ok" are kept; rows without a response are marked
    "failed" without a call. ``judge_correct`` stays None for failed or unparsed verdicts, so
    :func:`instance_metrics` excludes them instead of counting them wrong.
    """
    _require(
        rows, ["question", "gold_answer", "task_type", "raw_response"], "judge_responses", "rows"
    )
    out = rows.copy()
    for col in ("judge_raw", "judge_correct", "judge_score", "judge_status", "judge_error"):
        if col not in out.columns:
            out[col] = None
        out[col] = out[col].astype(object)
    todo = out.index[out["judge_status"].ne("ok")]
    triples = [
        (
            str(r["question"]),
            _reference(r),
            None if pd.isna(r["raw_response"]) else r["raw_response"],
        )
        for _, r in out.loc[todo].iterrows()
    ]
    verdicts = judge.judge_many(triples)
    for col, vals in (
        ("judge_raw", [v.raw_text for v in verdicts]),
        ("judge_correct", [v.correct if v.status == "ok" else None for v in verdicts]),
        ("judge_score", [v.value for v in verdicts]),
        ("judge_status", [v.status for v in verdicts]),
        ("judge_error", [v.error for v in verdicts]),
    ):
        out.loc[todo, col] = pd.Series(vals, index=todo, dtype=object)
    return out


def to_dataset(rows: pd.DataFrame, compat: Compat = None):
    """The judged rows as an xarray Dataset over ``(model, sample, template)``.

    Variables ``heuristic`` (scores of :mod:`psens.eas.scoring`), ``judge`` (judge verdicts as
    1.0/0.0, NaN when missing) and ``raw_response``; coords ``role``, ``fmt``, ``prefix`` on
    ``template`` and ``dataset``/``task_type`` on ``sample``. Missing (model, sample, template)
    cells are NaN. ``psens.pss.pss(ds.judge)`` gives the judge-based PSS per model.
    """
    import xarray as xr

    _require(rows, [*ROW_COLUMNS, *FACTORS, "judge_correct", "template_id"], "to_dataset", "rows")
    df = rows.assign(
        heuristic=heuristic_scores(rows.reset_index(drop=True), compat=compat).to_numpy(),
        judge=judge_float(rows["judge_correct"]).to_numpy(),
    ).rename(columns={"model_name": "model", "id": "sample", "template_id": "template"})
    dup = df.duplicated(["model", "sample", "template"])
    if dup.any():
        fail("to_dataset", f"{int(dup.sum())} duplicate (model, id, template) rows", "Drop them")
    idx = ["model", "sample", "template"]
    ds = xr.Dataset.from_dataframe(df.set_index(idx)[["heuristic", "judge", "raw_response"]])
    tmpl = df.drop_duplicates("template").set_index("template")
    samp = df.drop_duplicates("sample").set_index("sample")
    return ds.assign_coords(
        {k: ("template", tmpl.loc[ds.template.values, k].to_numpy()) for k in FACTORS}
        | {
            k: ("sample", samp.loc[ds.sample.values, k].to_numpy())
            for k in ("dataset", "task_type")
        }
    )
