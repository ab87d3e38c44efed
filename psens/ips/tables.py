"""Tables behind the charts, widgets and report: a run Dataset reduced to small frames.

Everything here is UI-free and deterministic: each function takes a run Dataset (or a
slice of one, see :mod:`psens.store` for the schema) and returns a
:class:`pandas.DataFrame` in long form, ready for one altair chart. The metrics come from
:mod:`psens.ips` (per-sample IPS from the one run engine :func:`psens.ips.sample_ips`, via
:func:`per_sample_ips`) and the bootstrap CIs from :mod:`psens.stats` (seeded);
this module only slices, averages, labels and loops over models where a metric needs whole
games (so a large run is never loaded whole).

IPS by order band per model (fig. 9) is :func:`order_ips_table`; the IPS of two groups of
models and ΔIPS by order (fig. 10) is :func:`factor_table`. Order bands are the ``order``
column everywhere (values :data:`ORDER_LEVELS`).

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.

Tables for figs. 2 (sparsity), 3 (case study, classes), 4 (ranking, consistency) and
9–11 (orders, factors by order) of [1].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from psens._charts import mark_synthetic
from psens._validation import fail
from psens.interactions import reconstruct
from psens.ips.metric import (
    CLASSES,
    ORDER_LEVELS,
    block_status,
    interaction_classes,
    nanmean,
    normalize,
    order_of_subsets,
    sample_ips,
    select_solver,
    sparsity_curve,
)
from psens.settings import run_settings, tau_of
from psens.stats import bootstrap_means, percentile_ci, resample_counts
from psens.store import DONE, item_targets
from psens.store.labels import model_names

__all__ = [
    "CLASS_LABELS",
    "FRACTIONS",
    "ORDER_LEVELS",
    "at_shot",
    "case_table",
    "class_table",
    "factor_table",
    "format_value",
    "group_values",
    "matching_curve",
    "matching_error_table",
    "model_meta",
    "order_ips_table",
    "output_consistency",
    "per_sample_ips",
    "sample_subsets",
    "select_samples",
    "sparsity_table",
    "subset_label",
    "subset_words",
]

#: Readable names of the interaction classes of :data:`psens.ips.CLASSES` (fig. 3b).
CLASS_LABELS: dict[str, str] = {
    "opposite_sign": "opposite sign",
    "same_sign_different_effect": "same sign, different effect",
    "same_sign_similar": "same sign, similar effect",
}
META = ("family", "series", "kind", "arch", "params", "active_params")


# ----------------------------------------------------------------------------- labels


def subset_words(mask: int, words: Sequence[str]) -> list[str]:
    """The words of the variables in the bitmask ``mask`` (bit i = ``words[i]``).

    Examples
    --------
    >>> subset_words(0b101, ["lay", "eggs", "NOT"])
    ['lay', 'NOT']
    """
    return [str(w) for i, w in enumerate(words) if (int(mask) >> i) & 1]


def subset_label(mask: int, words: Sequence[str], kind: str = "") -> str:
    """A readable label of the interaction ``S`` = ``mask``: its words in braces.

    Examples
    --------
    >>> subset_label(0b011, ["lay", "eggs", "NOT"], "AND")
    'AND {lay, eggs}'
    >>> subset_label(0, ["lay"])
    '{}'
    """
    text = "{" + ", ".join(subset_words(mask, words)) + "}"
    return f"{kind} {text}" if kind else text


# ----------------------------------------------------------------------------- metadata


def model_meta(ds) -> pd.DataFrame:
    """One row per model with the registry metadata present in the run (fig. 5–11 groups)."""
    out = pd.DataFrame({"model": model_names(ds)})
    for key in META:
        if key in ds.coords and ds[key].dims == ("model",):
            out[key] = ds[key].values
    return mark_synthetic(out, ds)


def format_value(value: Any) -> str:
    """A group value as a label: floats in %g form, anything else as ``str``."""
    if isinstance(value, float | np.floating) and np.isfinite(value):
        return f"{value:g}"
    return str(value)


def sample_subsets(ds, max_values: int = 50) -> list[str]:
    """Ways to restrict the samples: ``"all"`` and ``"<coord>=<value>"`` for every
    categorical per-sample coordinate (e.g. ``dataset``, ``subject``, ``n_vars``)."""
    out = ["all"]
    for name, coord in ds.coords.items():
        if name == "sample" or coord.dims != ("sample",):
            continue
        values = pd.unique(np.asarray(coord.values).ravel())
        if 1 < len(values) <= max_values:
            out += [f"{name}={format_value(v)}" for v in sorted(values, key=str)]
    return out


def select_samples(ds, subset: str = "all"):
    """The Dataset restricted to the samples of ``subset`` (see :func:`sample_subsets`)."""
    if subset in ("", "all", None):
        return ds
    name, _, value = subset.partition("=")
    if name not in ds.coords or ds[name].dims != ("sample",):
        fail(
            "psens.widgets",
            f"subset {subset!r} does not name a per-sample coordinate",
            f"Use one of {sample_subsets(ds)}",
        )
    keep = np.array([format_value(v) == value for v in ds[name].values])
    return ds.isel(sample=np.flatnonzero(keep))


def group_values(ds, by: str) -> list:
    """Distinct values of the model metadata field (or ``"shot"``) ``by``, sorted."""
    if by == "shot":
        if "shot" not in ds.dims:
            fail("psens.widgets", "the run has no shot dim", "Group by model metadata instead")
        return [int(s) for s in ds["shot"].values]
    meta = model_meta(ds)
    if by not in meta:
        fail("psens.widgets", f"by={by!r} is not model metadata", f"Use one of {list(meta)[1:]}")
    return sorted(pd.unique(meta[by]).tolist(), key=lambda v: (isinstance(v, str), v))


# ----------------------------------------------------------------------------- games


def at_shot(obj, shot: int | None = None):
    """``obj`` at one shot count (the first when ``shot`` is None); unchanged without shots."""
    if "shot" not in obj.dims:
        return obj
    return obj.sel(shot=shot if shot is not None else obj["shot"].values[0])


def _games(ds, model: int, shot: int | None = None, *, all_shots: bool = False):
    """``I_and, I_or`` of one model as ``[sample, template, subset]`` arrays.

    Runs with a ``shot`` dim are taken at ``shot`` (``[sample, shot, template, subset]``
    with ``all_shots``).
    """
    sub = ds[["I_and", "I_or"]].isel(model=model)
    if not all_shots:
        sub = at_shot(sub, shot)
    a = np.asarray(sub["I_and"].transpose("sample", ..., "template", "subset").values, float)
    o = np.asarray(sub["I_or"].transpose("sample", ..., "template", "subset").values, float)
    return _blank_unfinished(ds, model, a), _blank_unfinished(ds, model, o)


def _blank_unfinished(ds, model: int, values: np.ndarray) -> np.ndarray:
    """``values[sample, ...]`` of one model with the blocks that are not done (pending or
    failed) set to NaN, whatever numbers they hold (e.g. of an interrupted attempt)."""
    status = block_status(ds)
    if status is None or (status[model] == DONE).all():
        return values
    rows = (status[model] != DONE).reshape(-1, *(1,) * (values.ndim - 1))
    return np.where(rows, np.nan, values)


def per_sample_ips(ds, tau: float | None = None, *, solver: str | None = None):
    """Per-sample IPS of every model for each order of :data:`ORDER_LEVELS`.

    Returns a DataArray ``(model, sample, [shot,] order)``; NaN where a sample has no
    salient interaction of that order in any template pair. Computed by
    :func:`psens.ips.metric.sample_ips` (one model and a block of samples at a time, so a
    lazily opened run is never loaded whole), of one ``solver``'s interactions (default:
    the run's first; :func:`psens.ips.select_solver`).
    """
    tau = tau_of(ds, tau)
    out = sample_ips(ds, tau, orders=ORDER_LEVELS, solver=solver)
    out.attrs["tau"] = tau
    return mark_synthetic(out.rename("ips"), ds)


def _bootstrap_ci(
    values: np.ndarray,
    fn: Callable[[np.ndarray], np.ndarray],
    n_boot: int,
    ci: float,
    seed: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI over samples (the last axis of ``values``) of ``fn`` applied
    to the NaN-skipping means over samples (:mod:`psens.stats`: one matrix of
    resample counts, so every figure of a table is resampled on the same samples).

    ``fn`` maps means ``[..., *values.shape[1:-1]]`` to figures ``[..., *out]``, the
    leading axes being resamples; returns ``lo, hi`` of shape ``out``.
    """
    n = values.shape[-1]
    if n == 0:
        with np.errstate(all="ignore"):
            nan = np.full(np.shape(fn(np.full(values.shape[:-1], np.nan))), np.nan)
        return nan, nan.copy()
    counts = resample_counts(n, n_boot, seed)
    return percentile_ci(fn(bootstrap_means(values, counts)), ci)


def order_ips_table(
    per_sample,
    meta: pd.DataFrame,
    shot: int | None = None,
    *,
    floor=None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: Any = 0,
) -> pd.DataFrame:
    """IPS per model and order band: the mean over samples (NaN skipped) with a bootstrap
    CI over samples (fig. 4a / 9 / 11), and the noise floor next to it when given.

    Parameters
    ----------
    per_sample : xarray.DataArray
        :func:`per_sample_ips` (or a slice of it along ``sample``).
    meta : DataFrame
        :func:`model_meta`, merged into the rows.
    shot : int, optional
        Shot count of a run with a ``shot`` dim (default: the first).
    floor : xarray.DataArray, optional
        The run's noise floor (:func:`psens.ips.floor.noise_floor`, measured or jitter):
        adds its mean ``floor`` (over templates and samples) and the paired test of IPS
        against it (:func:`psens.ips.floor.floor_test`): ``diff, diff_lo, diff_hi,
        effect_size, p_value, exceeds``, ``n_paired`` (its ``n``) and ``floor_kind``.
    n_boot, ci, seed
        Bootstrap resamples, CI level and seed (:mod:`psens.stats`).

    Returns
    -------
    DataFrame
        ``model, order, ips, ips_lo, ips_hi, n_used, n_skipped`` [and the floor columns]
        and the model metadata; sorted by model then order.
    """
    da = at_shot(per_sample, shot).transpose("model", "order", "sample")
    values = np.asarray(da.values, dtype=float)  # [model, order, sample]
    used = np.isfinite(values).sum(axis=-1)
    lo, hi = _bootstrap_ci(values, lambda x: x, n_boot, ci, seed)
    n_models, n_orders = values.shape[:2]
    out = pd.DataFrame(
        {
            "model": np.repeat(model_names(da), n_orders),
            "order": np.tile([str(o) for o in da["order"].values], n_models),
            "ips": nanmean(values, axis=-1).ravel(),
            "ips_lo": lo.ravel(),
            "ips_hi": hi.ravel(),
            "n_used": used.ravel(),
            "n_skipped": (values.shape[-1] - used).ravel(),
        }
    )
    if floor is not None:
        from psens.ips.floor import floor_test

        test = floor_test(
            at_shot(per_sample, shot),
            at_shot(floor, shot),
            n_boot=n_boot,
            n_perm=2 * n_boot,
            ci=ci,
            seed=seed,
        )
        keep = ["model", "order", "floor", "diff", "diff_lo", "diff_hi", "effect_size"]
        keep += ["p_value", "exceeds", "n", "floor_kind"]
        test = test[keep].astype({"model": str, "order": str}).rename(columns={"n": "n_paired"})
        out = out.merge(test, on=["model", "order"], how="left")
    return mark_synthetic(out.merge(meta, on="model", how="left"), per_sample, meta)


def output_consistency(ds, shot: int | None = None) -> pd.Series:
    """Share of samples whose prediction is identical under every template, per model
    (fig. 4b). Samples of a model without a prediction (not done) are left out; see
    :func:`psens.factors.consistency.sample_consistency` for the per-sample values."""
    from psens.ips.factors.consistency import sample_consistency

    per_sample = sample_consistency(ds, shot=shot)
    means = per_sample.mean("sample", skipna=True)
    return pd.Series(means.values, index=model_names(means), name="output_consistency")


# ----------------------------------------------------------------------------- classes


def class_table(
    ds,
    models: Sequence[str],
    *,
    tau: float | None = None,
    pair: int | None = None,
    order: str | None = None,
    shot: int | None = None,
    solver: str | None = None,
) -> pd.DataFrame:
    """Shares of the three interaction classes per model, split by output change (fig. 3b).

    ``solver``: whose interactions, in a run with several (default: the first).

    Parameters
    ----------
    pair : int, optional
        Index on the run's ``pair`` dim (templates ``template_a``/``template_b``); all
        pairs pooled when None.
    order : {"low", "mid", "high"}, optional
        Restrict to one order band.

    Returns
    -------
    DataFrame with ``model, group (changed/unchanged/all), class, label, share, count,
    n_pairs`` (``n_pairs``: sample × template pairs in the group).
    """
    tau = tau_of(ds, tau)
    ds = select_solver(ds, solver)
    names = model_names(ds)
    rows = []
    for model in models:
        m = names.index(model)
        a, o = _games(ds, m, shot)
        pred = at_shot(ds["prediction"].isel(model=m), shot)
        p = np.asarray(pred.transpose("sample", "template").values).astype(str)
        res = interaction_classes(a, o, tau, order=order, predictions=p)
        counts, changed = res["counts"], res["changed"]
        if pair is not None:
            counts, changed = counts[..., pair : pair + 1, :], changed[..., pair : pair + 1]
        done = np.isfinite(a).any(axis=(-1, -2))[..., None] & np.ones(changed.shape, bool)
        counts, changed = counts[done], changed[done]
        for group, rows_mask in (("changed", changed), ("unchanged", ~changed)):
            tot = counts[rows_mask].sum(axis=0).astype(float)
            for c, name in enumerate(CLASSES):
                rows.append(
                    {
                        "model": model,
                        "group": group,
                        "class": name,
                        "label": CLASS_LABELS[name],
                        "share": float(tot[c] / tot.sum()) if tot.sum() > 0 else np.nan,
                        "count": int(tot[c]),
                        "n_pairs": int(rows_mask.sum()),
                    }
                )
    cols = ["model", "group", "class", "label", "share", "count", "n_pairs"]
    return mark_synthetic(pd.DataFrame(rows, columns=cols), ds)


# ----------------------------------------------------------------------------- case study


def _target_of(ds, sample) -> str:
    """The target of one sample in the predictions' label space
    (:func:`psens.store.item_targets`), '' when the run stores none."""
    if "target" not in ds:
        return ""
    index = list(map(str, ds["sample"].values)).index(str(sample))
    return str(item_targets(ds)[index])


def _classify(a: float, b: float) -> str:
    if (a > 0 > b) or (a < 0 < b):
        return CLASS_LABELS["opposite_sign"]
    if a == 0 or b == 0 or abs(b) / abs(a) > 2 or abs(b) / abs(a) < 0.5:
        return CLASS_LABELS["same_sign_different_effect"]
    return CLASS_LABELS["same_sign_similar"]


def case_table(
    ds,
    model: str,
    sample: str,
    templates: tuple[str, str],
    *,
    tau: float | None = None,
    top_k: int = 10,
    shot: int | None = None,
    solver: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The top salient interactions of one sample under two templates (fig. 3a / 19).

    Interactions salient (:math:`|\\tilde I| > \\tau`) under either template are ranked by
    the larger of their two normalised magnitudes; the ``top_k`` first are returned, two
    rows each (one per template).

    Returns
    -------
    table : DataFrame
        ``rank, label, kind (AND/OR), size, mask, template, value, class``.
    info : dict
        ``words``, ``predictions`` and ``correct`` per template, ``target``, ``n_salient``.
    """
    tau = tau_of(ds, tau)
    ds = select_solver(ds, solver)
    ta, tb = templates
    if ta == tb:
        fail("psens.widgets.CaseStudy", "both templates are the same", "Pick two templates")
    sub = at_shot(ds.sel(model=model, sample=sample, template=[ta, tb]), shot)
    n = int(sub["n_vars"].values)
    words = [str(w) for w in sub["word"].values[:n]]
    size = 1 << n
    a = np.asarray(sub["I_and"].transpose("template", "subset").values, float)[:, :size]
    o = np.asarray(sub["I_or"].transpose("template", "subset").values, float)[:, :size]
    info: dict[str, Any] = {
        "words": words,
        "templates": (ta, tb),
        "predictions": [str(x) for x in sub["prediction"].values],
        "correct": [bool(x == 1) for x in sub["correct"].values],
        "target": _target_of(ds, sample),
    }
    cols = ["rank", "label", "kind", "size", "mask", "template", "value", "class"]
    unfinished = "status" in sub and int(sub["status"].values) != DONE
    if unfinished or not np.isfinite(a).all():  # a pending or failed block
        info.update(n_salient=0, pending=True)
        return mark_synthetic(pd.DataFrame(columns=cols), ds), info
    na, no = normalize(a, o, run_settings(ds).normalization)
    x = np.concatenate([na[:, 1:], no[:, 1:]], axis=-1)  # [2, 2*(size-1)]
    mag = np.abs(x).max(axis=0)
    salient = np.flatnonzero(mag > tau)
    info["n_salient"] = len(salient)
    top = salient[np.argsort(-mag[salient], kind="stable")][:top_k]
    sizes = order_of_subsets(size)
    rows = []
    for rank, k in enumerate(top):
        kind, mask = ("AND", k + 1) if k < size - 1 else ("OR", k - (size - 1) + 1)
        label = subset_label(mask, words, kind)
        for t, name in enumerate((ta, tb)):
            rows.append(
                {
                    "rank": rank,
                    "label": label,
                    "kind": kind,
                    "size": int(sizes[mask]),
                    "mask": int(mask),
                    "template": name,
                    "value": float(x[t, k]),
                    "class": _classify(float(x[0, k]), float(x[1, k])),
                }
            )
    return mark_synthetic(pd.DataFrame(rows, columns=cols), ds), info


# ----------------------------------------------------------------------------- factors


def factor_table(
    per_sample,
    meta: pd.DataFrame,
    *,
    by: str,
    a: Sequence,
    b: Sequence,
    match: str = "none",
    models: Sequence[str] | None = None,
    shot: int | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: Any = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    r"""IPS of two groups of models (or shot counts) and the relative change by order
    band (fig. 10), with bootstrap CIs over samples.

    .. math:: \Delta\mathrm{IPS}_{order} = (\mathrm{IPS}^A_{order} - \mathrm{IPS}^B_{order})
              / \mathrm{IPS}^B_{order}

    A model's IPS is its mean over samples of per-sample IPS (NaN skipped).

    Parameters
    ----------
    per_sample : xarray.DataArray
        :func:`per_sample_ips`.
    meta : DataFrame
        :func:`model_meta`.
    by : str
        Model metadata field (``kind``, ``arch``, ``series``, ``family``, ``params``) or
        ``"shot"``.
    a, b : sequence
        Values of ``by`` forming group A (with the factor) and group B (without it).
    match : str
        ``"none"``: relative change of the two group means. Otherwise a metadata field
        (e.g. ``"series"``, ``"family"``) or ``"series+params"``: the relative change is
        averaged over every pair of an A model and a B model that agree on it (the paper's
        pairs, §4.3). With ``by="shot"`` each model is paired with itself (its IPS averaged
        over the shot counts of a group).
    models : sequence of str, optional
        Restrict to these models.
    shot : int, optional
        Shot count of a run with a ``shot`` dim when ``by`` is model metadata.
    n_boot, ci, seed
        Bootstrap resamples, CI level and seed (:mod:`psens.stats`): every
        figure is recomputed on the same resamples of the samples.

    Returns
    -------
    groups : DataFrame ``group, order, ips, ips_lo, ips_hi, n_models``
    delta : DataFrame ``order, rel_change, rel_lo, rel_hi, n_pairs``
    """
    a, b = list(a), list(b)
    meta = meta.set_index("model")
    if models is not None:
        meta = meta.loc[[m for m in meta.index if m in set(models)]]
    names = list(meta.index)
    if by == "shot":
        if "shot" not in per_sample.dims:
            fail("psens.widgets", "the run has no shot dim", "Group by model metadata instead")
        x = per_sample.sel(model=names).transpose("shot", "model", "order", "sample")
        shots = [int(k) for k in per_sample["shot"].values]
        missing = [k for k in (*a, *b) if int(k) not in shots]
        if missing:
            fail("psens.widgets", f"shots {missing} are not in the run", f"Use some of {shots}")
        ka, kb = [shots.index(int(k)) for k in a], [shots.index(int(k)) for k in b]
        in_a = in_b = ia = ib = np.arange(len(names))
        group_means = False
        label_a = f"A: shot {', '.join(map(str, a))}"
        label_b = f"B: shot {', '.join(map(str, b))}"
    else:
        x = at_shot(per_sample, shot).sel(model=names).transpose("model", "order", "sample")
        x = x.expand_dims("shot")
        ka = kb = [0]
        if by not in meta:
            fail("psens.widgets", f"by={by!r} is not model metadata", f"Use one of {list(meta)}")
        field = meta[by].to_numpy()
        in_a = np.flatnonzero([v in a for v in field])
        in_b = np.flatnonzero([v in b for v in field])
        key = _match_key(meta, match)
        ia, ib = (g.ravel() for g in np.meshgrid(in_a, in_b, indexing="ij"))
        keep = ia != ib
        if key is not None:
            k = key.to_numpy()
            keep &= k[ia] == k[ib]
        ia, ib = ia[keep], ib[keep]
        group_means = match in ("", "none", None)
        label_a = f"A: {by} = {', '.join(map(format_value, a))}"
        label_b = f"B: {by} = {', '.join(map(format_value, b))}"
    values = np.asarray(x.values, dtype=float)  # [shot, model, order, sample]

    def sides(means):  # [..., shot, model, order] -> each model's IPS on the A and B side
        return tuple(nanmean(np.moveaxis(means[..., k, :, :], -3, -1)) for k in (ka, kb))

    def figures(means):  # [..., shot, model, order] -> IPS of A, IPS of B, ΔIPS: [..., 3, order]
        va, vb = sides(means)
        ga = nanmean(np.moveaxis(va[..., in_a, :], -2, -1))
        gb = nanmean(np.moveaxis(vb[..., in_b, :], -2, -1))
        if group_means:
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = np.where(gb != 0, (ga - gb) / np.where(gb != 0, gb, 1.0), np.nan)
        else:
            pa, pb = va[..., ia, :], vb[..., ib, :]
            ok = np.isfinite(pa) & np.isfinite(pb) & (pb != 0)
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = nanmean(np.moveaxis(np.where(ok, (pa - pb) / pb, np.nan), -2, -1))
        return np.stack([ga, gb, rel], axis=-2)

    point = figures(nanmean(values, axis=-1))
    lo, hi = _bootstrap_ci(values, figures, n_boot, ci, seed)
    va, vb = sides(nanmean(values, axis=-1))
    orders = [str(o) for o in x["order"].values]
    n_orders = len(orders)
    groups = pd.DataFrame(
        {
            "group": np.repeat([label_a, label_b], n_orders),
            "order": orders * 2,
            "ips": point[:2].ravel(),
            "ips_lo": lo[:2].ravel(),
            "ips_hi": hi[:2].ravel(),
            "n_models": np.concatenate(
                [np.isfinite(va[in_a]).sum(axis=0), np.isfinite(vb[in_b]).sum(axis=0)]
            ),
        }
    )
    if group_means:
        n_pairs = np.full(n_orders, int(len(in_a) > 0 and len(in_b) > 0))
    else:
        pa, pb = va[ia], vb[ib]
        n_pairs = (np.isfinite(pa) & np.isfinite(pb) & (pb != 0)).sum(axis=0)
    delta = pd.DataFrame(
        {
            "order": orders,
            "rel_change": point[2],
            "rel_lo": lo[2],
            "rel_hi": hi[2],
            "n_pairs": n_pairs,
        }
    )
    return mark_synthetic(groups, per_sample, meta), mark_synthetic(delta, per_sample, meta)


def _match_key(meta: pd.DataFrame, match: str) -> pd.Series | None:
    if match in ("", "none", None):
        return None
    fields = match.split("+")
    missing = [f for f in fields if f not in meta.columns]
    if missing:
        fail(
            "psens.widgets.FactorCompare",
            f"match={match!r} uses fields {missing} that the run has no metadata for",
            f"Use 'none' or fields of {list(meta.columns)} joined by '+'",
        )
    return meta[fields].astype(str).agg("|".join, axis=1)


# ----------------------------------------------------------------------------- sparsity


def _one_game(ds, model: str, sample: str, template: str, shot: int | None):
    sub = at_shot(ds.sel(model=model, sample=sample, template=template), shot)
    n = int(sub["n_vars"].values)
    size = 1 << n
    pick = [np.asarray(sub[k].values, float)[:size] for k in ("v", "I_and", "I_or")]
    if "status" in sub and int(sub["status"].values) != DONE:  # pending or failed: no game
        pick = [np.full(size, np.nan) for _ in pick]
    return n, *pick


def sparsity_table(
    ds,
    models: Sequence[str],
    sample: str,
    template: str,
    shot: int | None = None,
    *,
    solver: str | None = None,
) -> pd.DataFrame:
    """Sorted normalised :math:`|\\tilde I|` of one sample and template, per model (fig. 2a).

    Columns ``model, rank, strength`` (rank 1 = strongest of the :math:`2(2^n-1)`).
    """
    ds = select_solver(ds, solver)
    rows = []
    for model in models:
        _, _, a, o = _one_game(ds, model, sample, template, shot)
        if not np.isfinite(a).all():
            continue
        curve = sparsity_curve(a, o)
        rows.append(
            pd.DataFrame({"model": model, "rank": np.arange(1, len(curve) + 1), "strength": curve})
        )
    cols = ["model", "rank", "strength"]
    out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=cols)
    return mark_synthetic(out, ds)


def _topk_phi(a: np.ndarray, o: np.ndarray, fraction: float) -> np.ndarray:
    """The logical model's output with the bias and the top ``fraction`` of interactions."""
    mag = np.concatenate([np.abs(a[..., 1:]), np.abs(o[..., 1:])], axis=-1)
    k = int(np.ceil(fraction * mag.shape[-1]))
    order = np.argsort(-mag, axis=-1, kind="stable")
    keep = np.zeros(mag.shape, bool)
    np.put_along_axis(keep, order[..., :k], True, axis=-1)
    half = a.shape[-1] - 1
    one = np.ones((*a.shape[:-1], 1), bool)
    ka = np.concatenate([one, keep[..., :half]], axis=-1)
    ko = np.concatenate([one, keep[..., half:]], axis=-1)
    return reconstruct(np.where(ka, a, 0.0), np.where(ko, o, 0.0))


def matching_curve(
    ds,
    model: str,
    sample: str,
    template: str,
    fraction: float,
    shot: int | None = None,
    *,
    solver: str | None = None,
) -> pd.DataFrame:
    """The model's output on every masked input, sorted ascending, against the logical
    model with only the top ``fraction`` of interactions (fig. 2b).

    Columns ``rank, mask, label, v, phi, error``.
    """
    n, v, a, o = _one_game(select_solver(ds, solver), model, sample, template, shot)
    cols = ["rank", "mask", "label", "v", "phi", "error"]
    if not np.isfinite(v).all():
        return mark_synthetic(pd.DataFrame(columns=cols), ds)
    phi = _topk_phi(a, o, fraction)
    words = [str(w) for w in ds["word"].sel(sample=sample).values[:n]]
    idx = np.argsort(v, kind="stable")
    out = pd.DataFrame(
        {
            "rank": np.arange(1, len(v) + 1),
            "mask": idx,
            "label": [subset_label(int(t), words) for t in idx],
            "v": v[idx],
            "phi": phi[idx],
            "error": np.abs(v - phi)[idx],
        },
        columns=cols,
    )
    return mark_synthetic(out, ds)


#: Fractions of interactions kept for the matching-error curve (fig. 2b quotes 3% and 5%).
FRACTIONS = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


def matching_error_table(
    ds,
    models: Sequence[str],
    fractions: Sequence[float] = FRACTIONS,
    shot: int | None = None,
    *,
    solver: str | None = None,
) -> pd.DataFrame:
    r"""Mean matching error over every game of each model when keeping the top fraction.

    The error of one game is :math:`\frac{1}{2^n}\sum_T|v(T)-\phi_k(T)|`; ``relative``
    divides it by the game's range :math:`\max_T v(T) - \min_T v(T)` so games of different
    scale compare.
    Columns ``model, fraction, error, relative, n_games``.
    """
    ds = select_solver(ds, solver)
    names = model_names(ds)
    n_vars = np.asarray(ds["n_vars"].values)
    rows = []
    for model in models:
        m = names.index(model)
        sub = at_shot(ds[["v", "I_and", "I_or"]].isel(model=m), shot)
        arr = {
            k: _blank_unfinished(
                ds, m, np.asarray(sub[k].transpose("sample", "template", "subset").values, float)
            )
            for k in ("v", "I_and", "I_or")
        }
        for f in fractions:
            err, rel = [], []
            for n in np.unique(n_vars):
                size = 1 << int(n)
                sel = np.flatnonzero(n_vars == n)
                v, a, o = (arr[k][sel, :, :size] for k in ("v", "I_and", "I_or"))
                ok = np.isfinite(v).all(axis=-1) & np.isfinite(a).all(axis=-1)
                if not ok.any():
                    continue
                v, a, o = v[ok], a[ok], o[ok]
                e = np.abs(v - _topk_phi(a, o, f)).mean(axis=-1)
                scale = v.max(axis=-1) - v.min(axis=-1)
                err.append(e)
                with np.errstate(invalid="ignore", divide="ignore"):
                    rel.append(np.where(scale > 0, e / scale, np.nan))
            e_all = np.concatenate(err) if err else np.array([])
            r_all = np.concatenate(rel) if rel else np.array([])
            rows.append(
                {
                    "model": model,
                    "fraction": float(f),
                    "error": float(e_all.mean()) if len(e_all) else np.nan,
                    "relative": float(np.nanmean(r_all)) if np.isfinite(r_all).any() else np.nan,
                    "n_games": len(e_all),
                }
            )
    out = pd.DataFrame(rows, columns=["model", "fraction", "error", "relative", "n_games"])
    return mark_synthetic(out, ds)
