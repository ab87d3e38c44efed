r"""The four factor comparisons of the IPS paper (§4.2, figs. 5–8), per order band (§4.3).

Every comparison is a list of pairs ``(A, B)`` of *units* (a model, or a model at a shot
count) plus groups to average over, and returns a :class:`FactorResult` of three tidy tables:

``models``
    one row per unit and order band: ``ips`` (mean over samples of per-sample IPS, NaN
    skipped) with a bootstrap CI ``ips_lo``/``ips_hi``, ``n_samples`` used, metadata;
``pairs``
    one row per pair and order band: the paired means ``ips_a``/``ips_b`` (over samples
    where both are defined), ``diff`` :math:`= IPS_A - IPS_B`, ``rel_change``
    :math:`\Delta IPS = (IPS_A - IPS_B)/IPS_B` (§4.3), their bootstrap CIs, and the
    two-sided sign-flip permutation ``p_value`` of the paired difference;
``summary``
    one row per group and order band: ``rel_change`` averaged over the group's pairs (the
    paper's ΔIPS for dense vs MoE, "the average over all pairs of a specific dense model
    and a specific MoE model within a model family"), its bootstrap CI and permutation
    p-value, ``n_pairs`` and ``n_a_lower`` (pairs where A is less sensitive).

Every table has rows for each order band of ``orders`` (default ``all, low, mid, high``), so
the paired ΔIPS by order is ``summary`` / ``pairs`` without the ``"all"`` rows. Fig. 10
(IPS of two groups of models and ΔIPS by order, with bootstrap CIs) is
:func:`psens.ips.tables.factor_table` drawn by :func:`psens.ips.charts.factor_chart`.

Uncertainty methods are those of :mod:`psens.stats` (percentile bootstrap over
samples with one resample-count matrix per call; paired sign-flip permutation test; both
seeded). A is the unit *with* the factor: instruct/chat, dense, the larger model, few-shot.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from psens._charts import is_synthetic
from psens._validation import check_in_interval, check_positive_int, fail
from psens.ips.factors import pairings as P
from psens.ips.factors.meta import META_COLUMNS, TUNED_KINDS, model_frame
from psens.ips.metric import ORDER_LEVELS, sample_ips
from psens.settings import tau_of
from psens.stats import (
    bootstrap_means,
    paired_core,
    percentile_ci,
    resample_counts,
    sign_flips,
)
from psens.store.labels import model_names

__all__ = [
    "FactorResult",
    "compare_models",
    "dense_vs_moe",
    "few_shot",
    "instruct_vs_base",
    "matched_active",
    "matched_pairs",
    "scale_series",
]


@dataclass(frozen=True)
class FactorResult:
    """Tables of one factor comparison (see the module docstring for the columns)."""

    factor: str
    models: Any  # pandas.DataFrame
    pairs: Any
    summary: Any
    settings: dict = field(default_factory=dict)

    def chart(self, order: str = "all"):
        """The paper's figure for this factor (figs. 5–8, table 7) as an altair chart."""
        from psens.ips.factors import charts as plots

        return plots.factor_chart(self, order=order)


# ----------------------------------------------------------------------------- engine


def _check_settings(n_boot: int, n_perm: int, ci: float, where: str) -> None:
    check_positive_int(n_boot, where, "n_boot")
    check_positive_int(n_perm, where, "n_perm")
    check_in_interval(ci, where, "ci", 0.0, 1.0)


def _compare(
    values: np.ndarray,
    info,
    pairs: Sequence[tuple[int, int]],
    groups: Mapping[str, Sequence[int]],
    *,
    factor: str,
    orders: tuple[str, ...],
    n_boot: int,
    n_perm: int,
    ci: float,
    seed: Any,
    settings: dict,
) -> FactorResult:
    """Tables for units ``values[unit, order, sample]`` (rows of ``info``) and pairs of units."""
    import pandas as pd

    n_units, n_orders, n = values.shape
    rng = np.random.default_rng(seed)
    counts = resample_counts(n, n_boot, rng)
    flips = sign_flips(n, n_perm, rng)

    # per unit
    boot = bootstrap_means(values, counts)  # [B, U, O]
    lo, hi = percentile_ci(boot, ci)
    valid = np.isfinite(values)
    k = valid.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(k > 0, np.nansum(values, axis=-1) / np.maximum(k, 1), np.nan)
    models = info.loc[info.index.repeat(n_orders)].reset_index()
    models.insert(1, "order", np.tile(orders, n_units))
    models["ips"] = mean.ravel()
    models["ips_lo"], models["ips_hi"] = lo.ravel(), hi.ravel()
    models["n_samples"] = k.ravel()
    models["n_skipped"] = n - k.ravel()

    # per pair
    ia = np.array([p[0] for p in pairs], dtype=np.int64)
    ib = np.array([p[1] for p in pairs], dtype=np.int64)
    a, b = values[ia], values[ib]
    both = np.isfinite(a) & np.isfinite(b)
    a, b = np.where(both, a, np.nan), np.where(both, b, np.nan)
    core = paired_core(a, b, counts, flips, ci)  # arrays [P, O]
    labels = info.index.to_numpy()
    pair_group = {}
    for g, members in groups.items():
        for m in members:
            pair_group.setdefault(m, g)
    rows = pd.DataFrame(
        {
            "unit_a": np.repeat(labels[ia], n_orders),
            "unit_b": np.repeat(labels[ib], n_orders),
            "group": np.repeat([pair_group.get(q, "") for q in range(len(pairs))], n_orders),
            "order": np.tile(orders, len(pairs)),
        }
    )
    for key, col in (
        ("mean_a", "ips_a"),
        ("mean_b", "ips_b"),
        ("diff", "diff"),
        ("diff_lo", "diff_lo"),
        ("diff_hi", "diff_hi"),
        ("rel", "rel_change"),
        ("rel_lo", "rel_lo"),
        ("rel_hi", "rel_hi"),
        ("p_value", "p_value"),
        ("n", "n_samples"),
    ):
        rows[col] = core[key].ravel()

    # per group: mean over the group's pairs of ΔIPS, bootstrap CI and permutation p-value
    with np.errstate(invalid="ignore", divide="ignore"):
        rel_boot = (core["_boot_a"] - core["_boot_b"]) / core["_boot_b"]  # [B, P, O]
        rel_perm = core["_perm"] / core["mean_b"]  # [perm, P, O]
    summary_rows = []
    for g, members in groups.items():
        idx = np.asarray(list(members), dtype=np.int64)
        if idx.size == 0:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rel = np.nanmean(core["rel"][idx], axis=0)  # [O]
            diff = np.nanmean(core["diff"][idx], axis=0)
            g_lo, g_hi = percentile_ci(np.nanmean(rel_boot[:, idx], axis=1), ci)
            perm = np.nanmean(rel_perm[:, idx], axis=1)  # [perm, O]
        tol = 1e-12 * np.maximum(1.0, np.abs(rel))
        hits = (np.abs(perm) >= np.abs(rel) - tol).sum(axis=0)
        p = np.where(np.isfinite(rel), (1.0 + hits) / (1.0 + n_perm), np.nan)
        lower = (core["mean_a"][idx] < core["mean_b"][idx]).sum(axis=0)
        for o, order in enumerate(orders):
            summary_rows.append(
                {
                    "group": g,
                    "order": order,
                    "n_pairs": int(idx.size),
                    "n_a_lower": int(lower[o]),
                    "diff": diff[o],
                    "rel_change": rel[o],
                    "rel_lo": g_lo[o],
                    "rel_hi": g_hi[o],
                    "p_value": p[o],
                }
            )
    summary = pd.DataFrame(summary_rows)
    settings = {
        **settings,
        "orders": list(orders),
        "n_boot": n_boot,
        "n_perm": n_perm,
        "ci": ci,
        "seed": seed if isinstance(seed, int | None) else repr(seed),
        "method": "percentile bootstrap over samples; paired sign-flip permutation test",
    }
    return FactorResult(factor, models, rows, summary, settings)


def _select_shot(ds, shot: int | None, where: str):
    if "shot" not in ds.dims:
        if shot not in (None, 0):
            fail(where, f"shot={shot} but the run has no shot dim", "Leave shot out")
        return ds
    shots = [int(s) for s in ds["shot"].values]
    want = 0 if shot is None else int(shot)
    if want not in shots:
        fail(where, f"shot={want} is not in the run (shots {shots})", f"Pass one of {shots}")
    return ds.sel(shot=want)


def _as_pairs(pairs: Any, where: str) -> list[tuple[str, str, str]]:
    """Pairs as ``(a, b, group)``; accepts tuples of 2 or 3 or a DataFrame."""
    if hasattr(pairs, "columns"):
        cols = set(pairs.columns)
        if not {"model_a", "model_b"} <= cols:
            fail(where, "the pairs table lacks model_a/model_b", "Pass those columns")
        groups = pairs["group"] if "group" in cols else ["all"] * len(pairs)
        return [
            (str(a), str(b), str(g))
            for a, b, g in zip(pairs["model_a"], pairs["model_b"], groups, strict=True)
        ]
    out = []
    for p in pairs:
        p = tuple(p)
        if len(p) not in (2, 3):
            fail(where, f"pair {p!r} is not (a, b) or (a, b, group)", "Pass 2- or 3-tuples")
        out.append((str(p[0]), str(p[1]), str(p[2]) if len(p) == 3 else "all"))
    if not out:
        fail(where, "no pair to compare", "Pass at least one (model_a, model_b) pair")
    return out


def _present(ds, names: Sequence[str]) -> list[str]:
    have = set(model_names(ds))
    return [m for m in names if m in have]


def compare_models(
    ds,
    pairs: Any,
    *,
    factor: str = "custom",
    extra_groups: Mapping[str, Sequence[int]] | None = None,
    shot: int | None = None,
    templates: Sequence[str] | None = None,
    tau: float | None = None,
    orders: Sequence[str] = ORDER_LEVELS,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
) -> FactorResult:
    r"""Compare any models pairwise: IPS of A vs B with CIs, ΔIPS and a paired test.

    Parameters
    ----------
    ds : xarray.Dataset
        A run. With a ``shot`` dim, ``shot`` (default 0) is used.
    pairs : sequence of (model_a, model_b[, group]) or DataFrame (model_a, model_b[, group])
        :math:`\Delta IPS = (IPS_A - IPS_B)/IPS_B`; pairs of a group are averaged in
        ``summary`` (one row per group; an ``"all"`` group when none are given).
    extra_groups : mapping of group -> pair indices, optional
        More (possibly overlapping) groups for the summary.
    templates : sequence of str, optional
        Only these templates.
    tau, orders
        Salience threshold and order bands (:func:`psens.factors.sample_ips`).
    n_boot, n_perm, ci, seed
        Bootstrap resamples, permutations, CI level and seed (:mod:`psens.stats`).

    Returns
    -------
    FactorResult

    Raises
    ------
    ValueError
        When a model of a pair is not in the run, or there is no pair.

    Examples
    --------
    >>> from psens.synthetic import synthetic_run
    >>> r = compare_models(synthetic_run(n_samples=4), [("toy-7b-instruct", "toy-7b")],
    ...                    n_boot=50, n_perm=50)
    >>> list(r.pairs.columns[:4])
    ['unit_a', 'unit_b', 'group', 'order']
    """
    tau = tau_of(ds, tau)
    where = "compare_models"
    _check_settings(n_boot, n_perm, ci, where)
    triples = _as_pairs(pairs, where)
    have = model_names(ds)
    missing = sorted({m for a, b, _ in triples for m in (a, b) if m not in have})
    if missing:
        fail(
            where,
            f"models {missing} are not in the run (it has {have})",
            "Pass pairs of models of the run, or select them with psens.factors.select_models",
        )
    ds = _select_shot(ds, shot, where)
    orders = tuple(orders)
    units = list(dict.fromkeys(m for a, b, _ in triples for m in (a, b)))
    x = sample_ips(ds, tau, orders=orders, templates=templates, models=units)
    values = x.transpose("model", "order", "sample").values
    info = model_frame(ds).loc[units]
    info.index.name = "unit"
    info.insert(0, "model", units)
    pos = {u: k for k, u in enumerate(units)}
    pair_idx = [(pos[a], pos[b]) for a, b, _ in triples]
    groups: dict[str, list[int]] = {}
    for q, (_, _, g) in enumerate(triples):
        groups.setdefault(g, []).append(q)
    for g, members in (extra_groups or {}).items():
        groups[g] = list(members)
    return _compare(
        values,
        info,
        pair_idx,
        groups,
        factor=factor,
        orders=orders,
        n_boot=n_boot,
        n_perm=n_perm,
        ci=ci,
        seed=seed,
        settings={
            "tau": tau,
            "templates": list(x.attrs["templates"]),
            "shot": shot,
            "synthetic": is_synthetic(ds),
        },
    )


# ----------------------------------------------------------------------------- pairings


def _tuned(kind: str) -> bool:
    return str(kind).lower() in TUNED_KINDS


def _meta(ds):
    frame = model_frame(ds)
    for col in META_COLUMNS:
        if col not in frame.columns:
            frame[col] = np.nan if col in ("params", "active_params") else ""
    return frame


def _metadata_instruct_pairs(ds) -> list[tuple[str, str, str]]:
    f = _meta(ds)
    out = []
    for name, row in f.iterrows():
        if not _tuned(row["kind"]):
            continue
        base = f[
            (f["kind"].astype(str).str.lower() == "base")
            & (f["series"] == row["series"])
            & (f["family"] == row["family"])
            & np.isclose(f["params"].astype(float), float(row["params"]))
        ]
        if len(base):
            out.append((name, base.index[0], str(row["family"]) or "all"))
    return out


#: What each model factor needs of a pair, and the refusal when the run has none.
REFUSALS: dict[str, tuple[str, str]] = {
    "instruct_vs_base": (
        "the run has no instruct/chat model with its base model (same family, series and size)",
        "Pass pairs=[(instruct, base), ...] or attach_metadata(ds) first",
    ),
    "scale": (
        "the run has no series with two models of different size (same family and series)",
        "Pass series={'label': [small, ..., large]} or attach_metadata(ds) first",
    ),
    "dense_vs_moe": (
        "no family has both a dense and a MoE model in the run",
        "Add models of both architectures, pass families=, or attach_metadata(ds) first",
    ),
    "matched_active": (
        "the run has no (dense, MoE) pair of one family and kind with matched active params",
        "Pass pairs=[(dense, moe), ...] or attach_metadata(ds) first",
    ),
}


def _refuse(factor: str) -> None:
    problem, fix = REFUSALS[factor]
    fail({"scale": "scale_series"}.get(factor, factor), problem, fix)


def _default_series(ds) -> tuple[dict[str, list[str]], str]:
    series = {k: _present(ds, v) for k, v in P.SCALE_SERIES.items() if len(_present(ds, v)) >= 2}
    if series:
        return series, "paper (appendix E.2)"
    series = _metadata_series(ds)
    if not series:
        _refuse("scale")
    return series, "metadata (series and kind, by params)"


def _default_families(ds) -> tuple[dict[str, tuple[list[str], list[str]]], str]:
    families = {}
    for fam, (dense, moe) in P.DENSE_MOE_FAMILIES.items():
        d, m = _present(ds, dense), _present(ds, moe)
        if d and m:
            families[fam] = (d, m)
    if families:
        return families, "paper (appendix E.2)"
    f = _meta(ds)
    for fam, sub in f.groupby(f["family"].astype(str)):
        d = list(sub.index[sub["arch"].astype(str).str.lower() == "dense"])
        m = list(sub.index[sub["arch"].astype(str).str.lower() == "moe"])
        if d and m:
            families[fam] = (d, m)
    if not families:
        _refuse("dense_vs_moe")
    return families, "metadata (arch within family)"


def _matched_active_pairs(ds) -> list[tuple[str, str, str]]:
    f = _meta(ds)
    act = f["active_params"].astype(float)
    pairs = []
    for name, row in f[f["arch"].astype(str).str.lower() == "moe"].iterrows():
        cand = f[
            (f["arch"].astype(str).str.lower() == "dense")
            & (f["family"] == row["family"])
            & (f["kind"].map(_tuned) == _tuned(row["kind"]))
        ]
        if len(cand):
            gap = np.abs(np.log(act[cand.index] / float(row["active_params"])))
            pairs.append((gap.idxmin(), name, "matched"))
    return pairs


def matched_pairs(ds, factor: str) -> tuple[list[tuple[str, str, str]], str]:
    """The matched model pairs of a run for one model factor, or the refusal.

    The one place that decides whether a run supports a paired verdict (the factor
    functions, the notebooks and :class:`psens.widgets.FactorCompare` all ask it):

    * ``"instruct_vs_base"`` — an instruct/chat model and its base model: the paper's pairs
      (appendix E.2) in the run, else the same family, series and size from metadata;
    * ``"scale"`` — consecutive sizes of one series (same family, series and kind);
    * ``"dense_vs_moe"`` — every (dense, MoE) pair of one family;
    * ``"matched_active"`` — dense vs MoE of one family and kind with the closest
      activated parameters (table 7).

    Returns
    -------
    pairs : list of (A, B, group)
        ``A`` with the factor, ``B`` without (:mod:`psens.ips.factors.pairings`).
    source : str
        Where the pairs come from (paper or metadata).

    Raises
    ------
    ValueError
        ``"<factor>: the run has no ... . Pass ..."`` (:data:`REFUSALS`) when the run has
        no matched pair: two unmatched models differ in far more than the factor.
    """
    if factor not in REFUSALS:
        fail("matched_pairs", f"factor={factor!r} is unknown", f"Use one of {list(REFUSALS)}")
    if factor == "scale":
        series, source = _default_series(ds)
        return [(b, s, lab) for lab, m in series.items() for s, b in pairwise(m)], source
    if factor == "dense_vs_moe":
        fams, source = _default_families(ds)
        return [(d, m, f) for f, (ds_, ms) in fams.items() for d in ds_ for m in ms], source
    if factor == "instruct_vs_base":
        fam = _meta(ds)["family"]
        pairs = [
            (a, b, str(fam.get(b, "")) or "all")
            for a, b in P.INSTRUCT_BASE_PAIRS
            if len(_present(ds, [a, b])) == 2
        ]
        source = "paper (appendix E.2)"
        if not pairs:
            pairs, source = _metadata_instruct_pairs(ds), "metadata (same family, series and size)"
    else:
        pairs = [
            (d, m, "table 7") for d, m in P.MATCHED_ACTIVE_PAIRS if len(_present(ds, [d, m])) == 2
        ]
        source = "paper (table 7)"
        if not pairs:
            pairs = _matched_active_pairs(ds)
            source = "metadata (closest active params, same family and kind)"
    if not pairs:
        _refuse(factor)
    return pairs, source


def instruct_vs_base(ds, pairs: Any = None, **kwargs: Any) -> FactorResult:
    """Factor 1 (§4.2, fig. 5): instruct/chat models vs their base models.

    ``pairs`` default: the paper's pairs (:data:`~psens.factors.pairings.INSTRUCT_BASE_PAIRS`)
    whose two models are in the run; when none are, pairs from the run's metadata (an
    instruct/chat model and the base model of the same family, series and size). Groups:
    the base model's family, and ``"all"``. ``A`` = instruct/chat, ``B`` = base. Other
    keyword arguments are those of :func:`compare_models`.

    Examples
    --------
    >>> from psens.synthetic import synthetic_run
    >>> r = instruct_vs_base(synthetic_run(n_samples=4), n_boot=50, n_perm=50)
    >>> r.pairs.loc[r.pairs.order == "all", ["unit_a", "unit_b"]].values.tolist()
    [['toy-7b-instruct', 'toy-7b']]
    """
    where = "instruct_vs_base"
    source = "given"
    if pairs is None:
        pairs, source = matched_pairs(ds, "instruct_vs_base")
    triples = _as_pairs(pairs, where)
    result = compare_models(
        ds, triples, factor="instruct_vs_base", extra_groups=_all(triples), **kwargs
    )
    result.settings["pairing"] = source
    return result


def _all(triples) -> dict[str, list[int]]:
    groups = {t[2] for t in triples}
    return {} if len(groups) <= 1 else {"all": list(range(len(triples)))}


def _metadata_series(ds) -> dict[str, list[str]]:
    f = _meta(ds)
    f = f[np.isfinite(f["params"].astype(float))]
    label = f["series"].astype(str) + np.where(
        f["kind"].map(_tuned).astype(bool), " (Instruct)", " (Base)"
    )
    out = {}
    for lab, sub in f.groupby(label, sort=True):
        sub = sub.sort_values("params")
        if sub["params"].nunique() >= 2:
            out[str(lab)] = list(sub.index)
    return out


def scale_series(ds, series: Mapping[str, Sequence[str]] | None = None, **kwargs: Any):
    """Factor 2 (§4.2, fig. 6): IPS along series of models of increasing size.

    ``series`` maps a label to models ordered by size; default the paper's series
    (:data:`~psens.factors.pairings.SCALE_SERIES`) with at least two models in the run, else
    series from metadata (same series and kind, by ``params``). The pairs are consecutive
    steps (A = larger, B = smaller), grouped by series; ``summary`` adds ``spearman_rho``,
    the rank correlation of IPS with ``params`` within the series (negative: larger models
    are less sensitive; the paper reads the trend, as ΔIPS does not suit a continuous
    factor, §4.3). ``models`` adds ``series_label`` and ``scale_rank`` (1 = smallest).
    """
    from scipy.stats import spearmanr

    where = "scale_series"
    source = "given"
    if series is None:
        series, source = _default_series(ds)
    triples = []
    for label, models in series.items():
        models = list(models)
        if len(models) < 2:
            fail(where, f"series {label!r} has {len(models)} model", "Give at least two")
        triples += [(big, small, label) for small, big in pairwise(models)]
    result = compare_models(ds, triples, factor="scale", **kwargs)
    m = result.models
    label_of = {mod: lab for lab, mods in series.items() for mod in mods}
    rank_of = {mod: r + 1 for mods in series.values() for r, mod in enumerate(mods)}
    m["series_label"] = m["unit"].map(label_of)
    m["scale_rank"] = m["unit"].map(rank_of)
    rhos = []
    for _, row in result.summary.iterrows():
        sub = m[(m["series_label"] == row["group"]) & (m["order"] == row["order"])]
        ok = np.isfinite(sub["ips"].to_numpy(float)) & np.isfinite(sub["params"].to_numpy(float))
        rho = spearmanr(sub["params"][ok], sub["ips"][ok]).statistic if ok.sum() >= 2 else np.nan
        rhos.append(float(rho))
    result.summary["spearman_rho"] = rhos
    result.settings["pairing"] = source
    return result


def dense_vs_moe(
    ds, families: Mapping[str, tuple[Sequence[str], Sequence[str]]] | None = None, **kwargs: Any
) -> FactorResult:
    """Factor 3 (§4.2, fig. 7; §4.3 fig. 10b): dense vs MoE models within a family.

    ``families`` maps a family to ``(dense models, MoE models)``; default the paper's lists
    (:data:`~psens.factors.pairings.DENSE_MOE_FAMILIES`) restricted to the run, keeping
    families with at least one model of each; else families from the run's ``arch``
    metadata. Pairs are all (dense, MoE) pairs of a family (A = dense, B = MoE), and a
    family's ΔIPS is their mean (§4.3); ``"all"`` averages over every pair.

    Raises
    ------
    ValueError
        When no family has both a dense and a MoE model in the run.
    """
    where = "dense_vs_moe"
    source = "given"
    if families is None:
        families, source = _default_families(ds)
    triples = []
    for fam, (dense, moe) in families.items():
        if not len(dense) or not len(moe):
            fail(
                where,
                f"family {fam!r} has {len(dense)} dense and {len(moe)} MoE models",
                "Give each family at least one model of each architecture",
            )
        triples += [(d, m, fam) for d in dense for m in moe]
    if not triples:
        _refuse("dense_vs_moe")
    result = compare_models(
        ds, triples, factor="dense_vs_moe", extra_groups=_all(triples), **kwargs
    )
    arch = {m: "dense" for _, (d, _) in families.items() for m in d}
    arch.update({m: "moe" for _, (_, mo) in families.items() for m in mo})
    fam_of = {m: f for f, (d, mo) in families.items() for m in (*d, *mo)}
    result.models["group"] = result.models["unit"].map(fam_of)
    result.models["arch"] = result.models["unit"].map(arch)
    result.settings["pairing"] = source
    return result


def matched_active(ds, pairs: Any = None, **kwargs: Any) -> FactorResult:
    """Appendix I, table 7: dense vs MoE models with matched activated parameters.

    Default pairs: the paper's (:data:`~psens.factors.pairings.MATCHED_ACTIVE_PAIRS`) in the
    run; else, for every MoE model, the dense model of the same family and kind (base vs
    instruct/chat) with the closest ``active_params`` (A = dense, B = MoE).
    """
    source = "given"
    if pairs is None:
        pairs, source = matched_pairs(ds, "matched_active")
    result = compare_models(ds, pairs, factor="matched_active", **kwargs)
    result.settings["pairing"] = source
    return result


def few_shot(
    ds,
    models: Sequence[str] | None = None,
    *,
    templates: Sequence[str] | None = P.FEW_SHOT_TEMPLATES,
    tau: float | None = None,
    orders: Sequence[str] = ORDER_LEVELS,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
) -> FactorResult:
    """Factor 4 (§4.2, fig. 8; §4.3 fig. 10c): x-shot vs 0-shot on the run's ``shot`` dim.

    Units are ``"<model>@<k>-shot"``; pairs are (k-shot, 0-shot) of one model for every
    ``k > 0`` (A = few-shot, B = 0-shot), grouped by ``k`` (ΔIPS averaged over models).
    ``templates`` default: prompt templates 1 and 4 (appendix E.6); when the run lacks
    them, all its templates are used (with a warning). ``models`` default: the paper's
    (:data:`~psens.factors.pairings.FEW_SHOT_MODELS`) in the run, else every model.

    Raises
    ------
    ValueError
        When the run has no ``shot`` dim or no 0-shot setting.
    """
    tau = tau_of(ds, tau)
    where = "few_shot"
    _check_settings(n_boot, n_perm, ci, where)
    if "shot" not in ds.dims:
        fail(where, "the run has no shot dim", "Make the run with shots=[0, 1, 2, 3]")
    shots = [int(s) for s in ds["shot"].values]
    if 0 not in shots or len(shots) < 2:
        fail(where, f"the run has shots {shots}", "Include 0 and at least one k > 0")
    if models is None:
        models = _present(ds, P.FEW_SHOT_MODELS) or model_names(ds)
    have = [str(t) for t in ds["template"].values]
    if templates is not None and tuple(templates) == P.FEW_SHOT_TEMPLATES:
        if not set(templates) <= set(have):
            warnings.warn(
                f"few_shot: the run lacks templates {list(templates)}; using all of {have}",
                stacklevel=2,
            )
            templates = None
    orders = tuple(orders)
    x = sample_ips(ds, tau, orders=orders, templates=templates, models=list(models))
    values = x.transpose("model", "shot", "order", "sample").values
    n_m, n_k = values.shape[:2]
    values = values.reshape(n_m * n_k, len(orders), -1)
    import pandas as pd

    meta = model_frame(ds).loc[list(models)]
    units = [f"{m}@{k}-shot" for m in models for k in shots]
    info = meta.loc[np.repeat(list(models), n_k)].reset_index()
    info.insert(1, "shot", np.tile(shots, n_m))
    info.index = pd.Index(units, name="unit")
    zero = shots.index(0)
    pairs, groups = [], {}
    for mi in range(n_m):
        for ki, k in enumerate(shots):
            if k == 0:
                continue
            groups.setdefault(f"{k}-shot", []).append(len(pairs))
            pairs.append((mi * n_k + ki, mi * n_k + zero))
    result = _compare(
        values,
        info,
        pairs,
        groups,
        factor="few_shot",
        orders=orders,
        n_boot=n_boot,
        n_perm=n_perm,
        ci=ci,
        seed=seed,
        settings={
            "tau": tau,
            "templates": list(x.attrs["templates"]),
            "synthetic": is_synthetic(ds),
        },
    )
    return result
