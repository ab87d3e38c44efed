"""IPS by perturbation kind: altering tokens vs adding tokens (IPS paper appendix G).

Each template pair is classified by the change between its two templates
(:func:`pair_kinds`): *altering* (case ``Answers``→``ANSWERS``, option marker ``A.``→``A)``),
*adding* (``:``→``::``), both (``adding+altering``) or ``none``. The paper's tables 4/5 give
IPS restricted to the pairs of each kind, per model, and the difference adding − altering
(dense models were more sensitive to adding tokens in 9 of 10 cases, MoE models to
altering in 5 of 6).

Pair kinds come from the registered templates (:func:`psens.prompts.pair_perturbation`)
when every template name is known; otherwise from the run's ``perturbation`` template
coordinate (each template's kind relative to template 1): a pair with the base template
takes the other's kind, two templates of one single kind give that kind, one altering and
one adding give ``adding+altering``, anything else is ``unknown``.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from psens._charts import mark_synthetic
from psens._validation import check_in_interval, check_positive_int, fail
from psens.ips.factors.meta import model_frame
from psens.ips.metric import pair_labels, sample_ips
from psens.settings import tau_of
from psens.stats import (
    bootstrap_means,
    paired_core,
    percentile_ci,
    resample_counts,
    sign_flips,
)
from psens.store.pairs import SEPARATORS, pair_label

__all__ = ["ips_by_perturbation", "pair_kinds", "perturbation_tables"]

_ALIASES = {"": "none", "none": "none", "base": "none", "mixed": "adding+altering"}


def _coord_kind(a: str, b: str) -> str:
    a, b = _ALIASES.get(a, a), _ALIASES.get(b, b)
    if a == "none":
        return b
    if b == "none":
        return a
    if a == b and "+" not in a:
        return a
    if {a, b} == {"altering", "adding"}:
        return "adding+altering"
    return "unknown"


def pair_kinds(ds, templates: Sequence[str] | None = None, kinds: Mapping | None = None):
    """Perturbation kind of every template pair: a Series indexed by ``"a|b"`` labels.

    ``kinds`` overrides: a mapping from ``(a, b)`` (either order) or ``"a|b"`` to a kind.
    """
    import pandas as pd

    names = [str(t) for t in ds["template"].values] if templates is None else list(templates)
    labels = pair_labels(names)
    i, j = np.triu_indices(len(names), k=1)
    try:
        from psens.prompts import TEMPLATES, pair_perturbation

        known = all(n in TEMPLATES for n in names)
    except ImportError:  # pragma: no cover - prompts needs psens.datasets
        known = False
    if known:
        out = [pair_perturbation(names[p], names[q]) for p, q in zip(i, j, strict=True)]
    else:
        coord = (
            dict(
                zip(
                    map(str, ds["template"].values),
                    map(str, ds["perturbation"].values),
                    strict=True,
                )
            )
            if "perturbation" in ds.coords
            else {}
        )
        out = [
            _coord_kind(coord.get(names[p], "?").lower(), coord.get(names[q], "?").lower())
            for p, q in zip(i, j, strict=True)
        ]
    series = pd.Series(out, index=pd.Index(labels, name="pair"), name="kind")
    for key, kind in (kinds or {}).items():
        a, b = key.split(SEPARATORS[0]) if isinstance(key, str) else key
        for lab in (pair_label(a, b), pair_label(b, a)):
            if lab in series.index:
                series[lab] = kind
    return series


def ips_by_perturbation(
    ds,
    *,
    kinds: tuple[str, str] = ("altering", "adding"),
    pair_kind: Any = None,
    tau: float | None = None,
    shot: int | None = None,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
):
    """Per-model IPS restricted to the template pairs of two perturbation kinds (appendix G).

    Parameters
    ----------
    kinds : (kind_b, kind_a)
        The two kinds compared; ``difference`` is IPS(kind_a) − IPS(kind_b) (the paper's
        adding − altering).
    pair_kind : Series or mapping, optional
        Overrides for :func:`pair_kinds`.

    Returns
    -------
    pandas.DataFrame
        One row per model: ``ips_<kind>`` with bootstrap CIs, ``n_pairs_<kind>``,
        ``difference`` with CI and the paired sign-flip ``p_value`` (over samples, as in
        :mod:`psens.stats`), ``more_sensitive_to``, and the model metadata.

    Raises
    ------
    ValueError
        When the run has no template pair of one of the kinds.
    """
    tau = tau_of(ds, tau)
    check_positive_int(n_boot, "ips_by_perturbation", "n_boot")
    check_positive_int(n_perm, "ips_by_perturbation", "n_perm")
    check_in_interval(ci, "ips_by_perturbation", "ci", 0.0, 1.0)
    if "shot" in ds.dims:
        ds = ds.sel(shot=0 if shot is None else shot)
    table = pair_kinds(ds)
    if pair_kind is not None:
        table = pair_kind if hasattr(pair_kind, "index") else pair_kinds(ds, kinds=pair_kind)
    kb, ka = kinds
    masks = {k: (table.to_numpy() == k) for k in (kb, ka)}
    for k, m in masks.items():
        if not m.any():
            fail(
                "ips_by_perturbation",
                f"no template pair of kind {k!r} (pairs: {table.to_dict()})",
                "Use a run with such templates, or pass pair_kind= to label the pairs",
            )
    x = sample_ips(ds, tau, orders="all", per_pair=True).transpose("model", "pair", "sample")
    v = x.values
    with np.errstate(invalid="ignore"):

        def mean_over(mask):
            sub = v[:, mask]
            cnt = np.isfinite(sub).sum(axis=1)
            return np.where(cnt > 0, np.nansum(sub, axis=1) / np.maximum(cnt, 1), np.nan)

        b_vals, a_vals = mean_over(masks[kb]), mean_over(masks[ka])  # [model, sample]
    rng = np.random.default_rng(seed)
    n = v.shape[-1]
    counts, flips = resample_counts(n, n_boot, rng), sign_flips(n, n_perm, rng)
    out = model_frame(ds).reset_index()
    for k, vals in ((kb, b_vals), (ka, a_vals)):
        with np.errstate(invalid="ignore"):
            cnt = np.isfinite(vals).sum(axis=1)
            out[f"ips_{k}"] = np.where(cnt > 0, np.nansum(vals, 1) / np.maximum(cnt, 1), np.nan)
        lo, hi = percentile_ci(bootstrap_means(vals, counts), ci)
        out[f"ips_{k}_lo"], out[f"ips_{k}_hi"] = lo, hi
        out[f"n_pairs_{k}"] = int(masks[k].sum())
    both = np.isfinite(a_vals) & np.isfinite(b_vals)
    core = paired_core(
        np.where(both, a_vals, np.nan), np.where(both, b_vals, np.nan), counts, flips, ci
    )
    out["difference"] = out[f"ips_{ka}"] - out[f"ips_{kb}"]
    out["diff_lo"], out["diff_hi"] = core["diff_lo"], core["diff_hi"]
    out["p_value"] = core["p_value"]
    out["more_sensitive_to"] = np.where(out["difference"] > 0, ka, kb)
    out.attrs.update(tau=tau, kinds=list(kinds), pair_kind=table.to_dict())
    return mark_synthetic(out, ds)


def perturbation_tables(table, *, by: str = "arch"):
    """Tables 4/5 layout: one table per ``arch`` (dense, moe) with columns ``Altering
    Tokens``, ``Adding Tokens``, ``Difference`` (rounded to 3 decimals), and a count of the
    models more sensitive to each kind in ``attrs``."""
    kb, ka = table.attrs.get("kinds", ["altering", "adding"])
    out = {}
    for key, sub in table.groupby(table[by].astype(str) if by in table else "all"):
        t = sub.set_index("model")[[f"ips_{kb}", f"ips_{ka}", "difference", "p_value"]]
        t.columns = [f"{kb.title()} Tokens", f"{ka.title()} Tokens", "Difference", "p"]
        t = t.round(3)
        t.attrs["more_sensitive"] = sub["more_sensitive_to"].value_counts().to_dict()
        out[str(key)] = mark_synthetic(t, table)
    return out
