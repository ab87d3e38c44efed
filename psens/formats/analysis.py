r"""Analyses of a run over a format space: accuracy spread and sensitivity by format dimension.

* :func:`accuracy_table` — each template's (format's) accuracy with a bootstrap CI over items;
* :func:`accuracy_spread` — per model, the spread ``max_f acc_f − min_f acc_f`` over the
  templates (FormatSpread's figure), its percentile-bootstrap CI over items, and a
  permutation test against formats that do not matter (correctness permuted across the
  templates within each item): a spread whose ``p`` is above 0.05 is inside its noise floor;
* :func:`one_change_pairs` — the template pairs that differ in exactly one dimension;
* :func:`dimension_sensitivity` — IPS (eq. 3 of the IPS paper, :func:`psens.ips.sample_ips`)
  overall and by order band between the pairs that differ in one dimension, averaged per
  dimension, with bootstrap CIs over items, next to the run's noise floor;
* :func:`dimension_accuracy` — the same question asked of correctness alone: how much one
  change of each dimension moves the answers (the share of items that flip; on a table of
  published accuracies per run, :func:`psens.formats.mind_your_format`, the accuracy
  change), with bootstrap CIs over items (runs) and how often each dimension comes out on
  top;
* :func:`format_pss` — ProSA's PSS (:func:`psens.pss.pss`) across the sampled formats.

Accuracy is the share of items whose greedy option choice (over the option tokens) is the
answer: ``acc_f = (1/N) Σ_i correct_{i,f}``; items not done for a model are left out.

References
----------
.. [1] Sclar, M., Choi, Y., Tsvetkov, Y., and Suhr, A. "Quantifying Language Models'
   Sensitivity to Spurious Features in Prompt Design or: How I learned to start worrying
   about prompt formatting." ICLR 2024. arXiv:2310.11324.
.. [2] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." ICML 2026. arXiv:2608.18539.
.. [3] Zhuo, J., Zhang, S., Fang, X., Duan, H., Lin, D., and Chen, K. "ProSA: Assessing and
   Understanding the Prompt Sensitivity of LLMs." Findings of EMNLP 2024. arXiv:2410.12405.

The bootstrap CIs and the permutation test are psens's addition.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from psens._validation import check_positive_int, fail
from psens.settings import tau_of
from psens.stats import bootstrap_means, percentile_ci, resample_counts
from psens.store.labels import model_names

__all__ = [
    "accuracy_spread",
    "accuracy_table",
    "dimension_accuracy",
    "dimension_sensitivity",
    "format_coords",
    "format_pss",
    "one_change_pairs",
    "spread_line",
]


def format_coords(ds) -> pd.DataFrame:
    """The format coordinates of a run's templates (one row per template; no columns for a
    run of named templates)."""
    cols = {str(c)[4:]: ds[c].values for c in ds.coords if str(c).startswith("fmt_")}
    return pd.DataFrame(
        cols, index=pd.Index([str(t) for t in ds["template"].values], name="template")
    )


def _correct(ds, shot: int | None) -> tuple[np.ndarray, list[str], list[str]]:
    """``correct`` as ``[model, sample, template]`` floats, NaN where a block is not done."""
    from psens import store

    if "correct" not in ds:
        fail("psens.formats", "the run has no 'correct' variable", "Pass a psens run")
    c = ds["correct"]
    if "shot" in c.dims:
        c = c.sel(shot=shot) if shot is not None else c.isel(shot=0)
    c = c.transpose("model", "sample", "template")
    done = (ds["status"] == store.DONE).transpose("model", "sample").values
    values = np.where(done[:, :, None], c.values.astype(float), np.nan)
    return values, model_names(ds), [str(t) for t in ds["template"].values]


def _complete(x: np.ndarray) -> np.ndarray:
    """The items (rows) of ``[sample, template]`` with every template scored."""
    return x[np.isfinite(x).all(axis=1)]


def correctness(ds, *, shot: int | None = None) -> dict[str, np.ndarray]:
    """Each model's ``correct[item, template]`` (0/1) over the items done and scored under
    every template: the oracle of :func:`psens.formats.search.thompson_search`."""
    values, models, _ = _correct(ds, shot)
    return {name: _complete(values[m]) for m, name in enumerate(models)}


def accuracy_table(
    ds, *, shot: int | None = None, n_boot: int = 1000, ci: float = 0.95, seed: Any = 0
) -> pd.DataFrame:
    """Accuracy of every (model, template) with a percentile-bootstrap CI over items.

    Returns columns ``model, template, accuracy, lo, hi, n_items`` and the format
    coordinates (:func:`format_coords`).
    """
    values, models, templates = _correct(ds, shot)
    coords = format_coords(ds)
    rows = []
    for m, name in enumerate(models):
        x = _complete(values[m])
        acc = x.mean(axis=0) if len(x) else np.full(len(templates), np.nan)
        if len(x):
            lo, hi = percentile_ci(bootstrap_means(x.T, resample_counts(len(x), n_boot, seed)), ci)
        else:
            lo = hi = np.full(len(templates), np.nan)
        for t, tmpl in enumerate(templates):
            rows.append(
                {
                    "model": name,
                    "template": tmpl,
                    "accuracy": float(acc[t]),
                    "lo": float(lo[t]),
                    "hi": float(hi[t]),
                    "n_items": len(x),
                    **coords.loc[tmpl].to_dict(),
                }
            )
    return pd.DataFrame(rows)


def accuracy_spread(
    ds,
    *,
    shot: int | None = None,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
) -> pd.DataFrame:
    r"""Per model: the accuracy spread over the run's templates, its CI and noise floor.

    .. math::
        \mathrm{spread} = \max_f \mathrm{acc}_f - \min_f \mathrm{acc}_f, \qquad
        \mathrm{acc}_f = \frac1N \sum_i \mathrm{correct}_{i,f}

    over the ``N`` items scored under every template. CI: percentile bootstrap over items
    (the spread recomputed on each resample). Noise floor: the spread when formats do not
    matter, from ``n_perm`` permutations of each item's correctness across the templates;
    ``p = (1 + #{null >= spread}) / (1 + n_perm)``; ``within_noise`` is ``p > 0.05``.

    Returns
    -------
    DataFrame with columns ``model, n_templates, n_items, best, best_accuracy, worst,
    worst_accuracy, spread, lo, hi, null_spread`` (the permutation mean), ``p_value``,
    ``within_noise``, ``n_best_ties`` and ``n_worst_ties`` (how many templates tie at the best and
    the worst accuracy; ``best`` and ``worst`` name the first of them).

    Examples
    --------
    >>> from psens.synthetic import synthetic_run
    >>> r = accuracy_spread(synthetic_run(n_samples=6), n_perm=99)
    >>> bool((r["spread"] >= 0).all())
    True
    """
    check_positive_int(n_perm, "accuracy_spread", "n_perm")
    values, models, templates = _correct(ds, shot)
    rng = np.random.default_rng(seed)
    rows = []
    for m, name in enumerate(models):
        x = _complete(values[m])
        row: dict[str, Any] = {"model": name, "n_templates": len(templates), "n_items": len(x)}
        if len(x) == 0 or len(templates) < 2:
            nan = float("nan")
            rows.append(
                {
                    **row,
                    **dict.fromkeys(["best", "worst"], ""),
                    **dict.fromkeys(
                        ["best_accuracy", "worst_accuracy", "spread", "lo", "hi", "null_spread"],
                        nan,
                    ),
                    "p_value": nan,
                    "within_noise": True,
                }
            )
            continue
        acc = x.mean(axis=0)
        spread = float(acc.max() - acc.min())
        boot = bootstrap_means(x.T, resample_counts(len(x), n_boot, rng))  # [B, T]
        lo, hi = percentile_ci(boot.max(axis=1) - boot.min(axis=1), ci)
        idx = np.argsort(rng.random((n_perm, *x.shape)), axis=-1)  # permute within items
        null_acc = np.take_along_axis(np.broadcast_to(x, idx.shape), idx, axis=-1).mean(axis=1)
        null = null_acc.max(axis=1) - null_acc.min(axis=1)
        p = float((1 + np.sum(null >= spread - 1e-12)) / (1 + n_perm))
        rows.append(
            {
                **row,
                "best": templates[int(np.argmax(acc))],
                "best_accuracy": float(acc.max()),
                "worst": templates[int(np.argmin(acc))],
                "worst_accuracy": float(acc.min()),
                "n_best_ties": int(np.sum(acc == acc.max())),
                "n_worst_ties": int(np.sum(acc == acc.min())),
                "spread": spread,
                "lo": float(lo),
                "hi": float(hi),
                "null_spread": float(null.mean()),
                "p_value": p,
                "within_noise": bool(p > 0.05),
            }
        )
    return pd.DataFrame(rows)


def spread_line(row: pd.Series) -> str:
    """One summary line for a row of :func:`accuracy_spread`."""
    if not np.isfinite(row["spread"]):
        return f"  {row['model']}: accuracy spread n/a (no item scored under every template)"
    note = "; inside the noise floor: not a finding" if row["within_noise"] else ""
    n = row["n_templates"]
    if row["spread"] == 0:
        where = f"accuracy {row['best_accuracy']:.2f} under all {n} templates (they tie),"
    else:

        def named(end: str) -> str:
            ties = int(row.get(f"n_{end}_ties", 1))
            more = f" and {ties - 1} more tied" if ties > 1 else ""
            return f"{row[f'{end}_accuracy']:.2f} ({row[end]}{more})"

        where = f"accuracy {named('worst')} to {named('best')} over {n} templates,"
    return (
        f"  {row['model']}: {where} "
        f"spread {row['spread']:.2f} [{row['lo']:.2f}, {row['hi']:.2f}] "
        f"(n = {row['n_items']} items; formats-do-not-matter spread {row['null_spread']:.2f}, "
        f"p = {row['p_value']:.3f}{note})"
    )


def one_change_pairs(ds) -> pd.DataFrame:
    """The template pairs of a format-space run that differ in exactly one dimension.

    Returns columns ``pair`` (the index in :func:`psens.ips.template_pairs` order, as the
    run's ``pair`` dim), ``template_a, template_b, dimension, value_a, value_b``.
    """
    from psens.ips import template_pairs

    coords = format_coords(ds)
    if coords.empty:
        fail(
            "psens.formats.one_change_pairs",
            "the run has no format coordinates (fmt_* along template)",
            'Run a format space: templates = {grammar = "default", k = 16, seed = 0}',
        )
    grid = coords.to_numpy(dtype=object)  # [template, dimension]
    i, j = template_pairs(len(grid))
    differ = grid[i] != grid[j]  # [pair, dimension]
    one = np.flatnonzero(differ.sum(axis=1) == 1)
    dim = differ[one].argmax(axis=1)
    names = list(coords.columns)
    return pd.DataFrame(
        {
            "pair": one,
            "template_a": coords.index[i[one]],
            "template_b": coords.index[j[one]],
            "dimension": [names[d] for d in dim],
            "value_a": grid[i[one], dim],
            "value_b": grid[j[one], dim],
        }
    )


def dimension_sensitivity(
    ds,
    tau: float | None = None,
    *,
    shot: int | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: Any = 0,
    floor: bool = True,
) -> pd.DataFrame:
    r"""IPS by format dimension: how much one change of each kind moves the interactions.

    For a dimension ``d`` with one-change pairs ``P_d`` (:func:`one_change_pairs`), per item
    ``x`` and order band ``o``:

    .. math::
        \mathrm{IPS}_d^{(o)}(x) = \frac{1}{|P_d|}\sum_{(T,\hat T)\in P_d}
        \mathrm{IPS}^{(o)}(x \mid T, \hat T)

    the pair IPS being :func:`psens.ips.sample_ips` (``per_pair=True``); pairs with no
    salient interaction are skipped. The table holds the mean over items with a percentile
    bootstrap CI over items, and (``floor``) the run's noise floor in that band
    (:func:`psens.ips.floor.noise_floor`, mean over items and templates): a dimension whose
    CI reaches down to the floor is flagged ``within_noise``.

    Returns
    -------
    DataFrame ``model, dimension, order, ips, lo, hi, n_pairs, n_items, floor,
    within_noise``.
    """
    from psens.ips import ORDER_LEVELS, sample_ips

    pairs = one_change_pairs(ds)
    if pairs.empty:
        fail(
            "psens.formats.dimension_sensitivity",
            "no two templates of the run differ in exactly one dimension",
            "Sample with design='walk' (the default) or list points one change apart",
        )
    tau = tau_of(ds, tau)
    per_pair = sample_ips(ds, tau, orders=ORDER_LEVELS, per_pair=True)
    if "shot" in per_pair.dims:
        per_pair = per_pair.sel(shot=shot) if shot is not None else per_pair.isel(shot=0)
    values = per_pair.transpose("model", "sample", "pair", "order").values
    floors = _floor(ds, tau, shot) if floor else None
    rng = np.random.default_rng(seed)
    counts = resample_counts(values.shape[1], n_boot, rng)
    rows = []
    for dim, group in pairs.groupby("dimension", sort=False):
        sel = values[:, :, group["pair"].to_numpy(), :]  # [model, sample, pair, order]
        with warnings.catch_warnings():  # a sample with no salient pair: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            per_item = np.nanmean(sel, axis=2)  # [model, sample, order]
        boot = bootstrap_means(np.moveaxis(per_item, 1, -1), counts)  # [B, model, order]
        lo, hi = percentile_ci(boot, ci)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(per_item, axis=1)
        for m, model in enumerate(model_names(per_pair)):
            for o, order in enumerate(ORDER_LEVELS):
                f = float(floors[m, o]) if floors is not None else np.nan
                rows.append(
                    {
                        "model": str(model),
                        "dimension": dim,
                        "order": order,
                        "ips": float(mean[m, o]),
                        "lo": float(lo[m, o]),
                        "hi": float(hi[m, o]),
                        "n_pairs": len(group),
                        "n_items": int(np.isfinite(per_item[m, :, o]).sum()),
                        "floor": f,
                        "within_noise": bool(not np.isfinite(lo[m, o]) or lo[m, o] <= f),
                    }
                )
    return pd.DataFrame(rows)


def dimension_accuracy(
    ds,
    *,
    shot: int | None = None,
    pooled: bool = False,
    common: bool = True,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: Any = 0,
) -> pd.DataFrame:
    r"""How much one change of each format dimension moves correctness (or accuracy).

    For a dimension ``d`` with one-change pairs ``P_d`` (:func:`one_change_pairs`), per
    unit ``s`` of the ``sample`` dim:

    .. math::
        \Delta_d(s) = \frac{1}{|P_d(s)|}\sum_{(a,b)\in P_d(s)}
        \lvert \mathrm{correct}_{s,a} - \mathrm{correct}_{s,b} \rvert,
        \qquad \Delta_d = \frac{1}{|S_d|}\sum_{s\in S_d} \Delta_d(s)

    ``P_d(s)`` the pairs with both formats scored on ``s``; ``S_d`` the units on which
    every dimension has a scored pair (``common``, the default: the dimensions are compared
    on the same units), or those on which ``d`` has one (``common=False``). A psens run
    scores every format on every item, so the two agree there; they differ on tables whose
    runs evaluated different templates (Mind Your Format).

    With 0/1 correctness per item (a psens run) ``Δ_d`` is the share of items whose answer
    flips when ``d`` alone changes (ProSA's PSS restricted to ``d``'s pairs); with one
    accuracy per evaluation run (:func:`psens.formats.mind_your_format`) it is the mean
    absolute accuracy change over runs. ``any_change`` is the same over every template pair
    (formats that differ in any number of dimensions), the scale to read ``Δ_d`` against.
    ``pooled=True`` averages ``Δ_d(s)`` over the models first (NaN skipped) and reports one
    row per dimension (model ``"all"``). CI: percentile bootstrap over units, the same
    resamples for every dimension; ``p_top`` is the share of resamples in which the
    dimension has the largest ``Δ_d``. The pairs are fixed: with one to a few pairs, a
    dimension's figure speaks for those formats, and the CI does not cover that choice.

    Returns
    -------
    DataFrame ``model, dimension, effect, lo, hi, p_top, any_change, n_pairs, n_units``,
    rows by model in the run's order, dimensions by decreasing effect.

    References
    ----------
    .. [1] Zhuo, J., Zhang, S., Fang, X., Duan, H., Lin, D., and Chen, K. "ProSA: Assessing
       and Understanding the Prompt Sensitivity of LLMs." Findings of EMNLP 2024.
       arXiv:2410.12405 (PSS, of which ``Δ_d`` on items is the restriction to ``d``'s pairs).
    .. [2] Voronov, A., Wolf, L., and Ryabinin, M. "Mind Your Format: Towards Consistent
       Evaluation of In-Context Learning Improvements." Findings of ACL 2024. arXiv:2401.06766
       (the published accuracies per run).

    The per-dimension change, its CI and ``p_top`` are psens's; neither paper reports them.

    Examples
    --------
    >>> from psens.formats import mind_your_format
    >>> t = dimension_accuracy(mind_your_format("trec"), pooled=True, n_boot=200)
    >>> sorted(t["dimension"])
    ['big_sep', 'inp_verbalizer', 'out_verbalizer', 'sep']
    """
    from psens.ips import template_pairs

    pairs = one_change_pairs(ds)
    if pairs.empty:
        fail(
            "psens.formats.dimension_accuracy",
            "no two templates of the run differ in exactly one dimension",
            "Sample with design='walk' (the default) or list points one change apart",
        )
    values, models, templates = _correct(ds, shot)  # [model, sample, template]
    i, j = template_pairs(len(templates))
    delta = np.abs(values[:, :, i] - values[:, :, j])  # [model, sample, pair]; NaN: unscored
    dims = list(dict.fromkeys(pairs["dimension"]))
    with warnings.catch_warnings():  # a unit with no scored pair of a dimension: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        per_unit = np.stack(
            [np.nanmean(delta[:, :, pairs.loc[pairs.dimension == d, "pair"]], axis=2) for d in dims]
            + [np.nanmean(delta, axis=2)]
        )  # [dimension + any, model, sample]
        if pooled:
            per_unit = np.nanmean(per_unit, axis=1, keepdims=True)
            models = ["all"]
    if common:
        shared = np.isfinite(per_unit[:-1]).all(axis=0)  # [model, sample]
        per_unit = np.where(shared, per_unit, np.nan)
    if not np.isfinite(per_unit).any():
        fail(
            "psens.formats.dimension_accuracy",
            "no item or run scores a one-change pair of every dimension",
            "Pass common=False to average each dimension over the units that score it",
        )
    counts = resample_counts(per_unit.shape[-1], n_boot, seed)
    boot = bootstrap_means(per_unit, counts)  # [B, dimension + any, model]
    lo, hi = percentile_ci(boot, ci)
    top = np.argmax(np.where(np.isfinite(boot[:, :-1]), boot[:, :-1], -np.inf), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(per_unit, axis=-1)  # [dimension + any, model]
    rows = []
    for m, model in enumerate(models):
        for k, dim in enumerate(dims):
            rows.append(
                {
                    "model": model,
                    "dimension": dim,
                    "effect": float(mean[k, m]),
                    "lo": float(lo[k, m]),
                    "hi": float(hi[k, m]),
                    "p_top": float(np.mean(top[:, m] == k)),
                    "any_change": float(mean[-1, m]),
                    "n_pairs": int((pairs.dimension == dim).sum()),
                    "n_units": int(np.isfinite(per_unit[k, m]).sum()),
                }
            )
    out = pd.DataFrame(rows)
    order = {m: n for n, m in enumerate(models)}
    out = out.sort_values(
        ["model", "effect"], key=lambda c: c.map(order) if c.name == "model" else -c
    )
    return out.reset_index(drop=True)


def _floor(ds, tau: float, shot: int | None) -> np.ndarray:
    """The noise floor ``[model, order]`` (mean over items and templates)."""
    from psens.ips import ORDER_LEVELS
    from psens.ips.floor import noise_floor

    fl = noise_floor(ds, tau=tau)
    if "shot" in fl.dims:
        fl = fl.sel(shot=shot) if shot is not None else fl.isel(shot=0)
    band = "band" if "band" in fl.dims else "order"
    fl = fl.sel({band: list(ORDER_LEVELS)})
    others = [d for d in fl.dims if d not in ("model", band)]
    return fl.mean(others, skipna=True).transpose("model", band).values


def format_pss(ds, *, shot: int | None = None) -> pd.Series:
    """ProSA's PSS (:func:`psens.pss.pss`) of each model across the run's templates: the
    mean over items of the share of template pairs whose correctness differs."""
    from psens.pss import pss

    values, models, _ = _correct(ds, shot)
    out = [
        pss(_complete(values[m])) if len(_complete(values[m])) else np.nan
        for m in range(len(models))
    ]
    return pd.Series(np.asarray(out, dtype=float), index=models, name="pss")
