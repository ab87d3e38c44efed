"""Representation metrics beside IPS (IPS paper appendix H, table 6).

The run stores, per sample and template pair, the cosine similarity (``hidden_cosine``)
and L2 distance (``hidden_l2``) of the final-layer hidden states of the two prompts.
Per model these are averaged over pairs then samples (bootstrap CI over samples); the
paper compares them with IPS for the instruct/chat vs base pairs (table 6) and finds them
inconsistent (they disagree with each other and with IPS in direction).

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psens._charts import mark_synthetic
from psens._validation import check_in_interval, check_positive_int, fail
from psens.ips.factors.meta import model_frame
from psens.ips.metric import sample_ips
from psens.settings import tau_of
from psens.stats import (
    bootstrap_means,
    paired_core,
    percentile_ci,
    resample_counts,
    sign_flips,
)
from psens.store.labels import model_names

__all__ = ["representation_metrics", "representation_table"]

METRICS = ("cosine", "l2", "ips")


def _per_sample(ds, tau: float):
    """``{metric: [model, sample]}`` per-sample values (pairs averaged, NaN skipped)."""
    where = "representation_metrics"
    for name in ("hidden_cosine", "hidden_l2"):
        if name not in ds:
            fail(where, f"the run has no {name!r}", "Re-run with hidden states captured")
    if "shot" in ds.dims:
        ds = ds.sel(shot=0)
    out = {}
    for key, name in (("cosine", "hidden_cosine"), ("l2", "hidden_l2")):
        v = np.asarray(ds[name].transpose("model", "sample", "pair").values, dtype=float)
        if not np.isfinite(v).any():
            fail(
                where,
                f"the run has no hidden states ({name} is all NaN)",
                "Re-run the models with hidden-state capture on (appendix H needs them)",
            )
        cnt = np.isfinite(v).sum(axis=-1)
        with np.errstate(invalid="ignore"):
            out[key] = np.where(cnt > 0, np.nansum(v, -1) / np.maximum(cnt, 1), np.nan)
    out["ips"] = sample_ips(ds, tau, orders="all").transpose("model", "sample").values
    return ds, out


def representation_metrics(
    ds, *, tau: float | None = None, n_boot: int = 1000, ci: float = 0.95, seed: Any = 0
):
    """Per-model cosine similarity (↑ stable), L2 distance (↓ stable) and IPS (↓ stable).

    Returns a DataFrame: ``model``, metadata, ``cosine, l2, ips`` each with ``_lo``/``_hi``
    (percentile bootstrap over samples, one resample matrix for all).

    Raises
    ------
    ValueError
        When the run has no hidden states (``hidden_cosine``/``hidden_l2`` all NaN).
    """
    tau = tau_of(ds, tau)
    check_positive_int(n_boot, "representation_metrics", "n_boot")
    check_in_interval(ci, "representation_metrics", "ci", 0.0, 1.0)
    ds, vals = _per_sample(ds, tau)
    counts = resample_counts(ds.sizes["sample"], n_boot, seed)
    out = model_frame(ds).reset_index()
    for key in METRICS:
        v = vals[key]
        with np.errstate(invalid="ignore"):
            cnt = np.isfinite(v).sum(axis=1)
            out[key] = np.where(cnt > 0, np.nansum(v, 1) / np.maximum(cnt, 1), np.nan)
        out[f"{key}_lo"], out[f"{key}_hi"] = percentile_ci(bootstrap_means(v, counts), ci)
    out.attrs.update(tau=tau, ci=ci)
    return mark_synthetic(out, ds)


def representation_table(
    ds,
    pairs: Any = None,
    *,
    tau: float | None = None,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
):
    """Table 6 layout: base vs instruct/chat pairs by cosine, L2 and IPS.

    ``pairs`` of ``(instruct, base)`` default to those of
    :func:`psens.factors.instruct_vs_base`. One row per pair: ``base``, ``tuned``,
    ``base_<m>`` and ``tuned_<m>`` for m in cosine, l2, ips, the paired sign-flip p-value
    ``p_<m>`` of tuned − base (over samples), and ``<m>_says_tuned_stabler`` (cosine
    higher / L2 lower / IPS lower for the tuned model), so disagreements with IPS show.
    """
    tau = tau_of(ds, tau)
    import pandas as pd

    from psens.ips.factors.compare import _as_pairs, instruct_vs_base

    check_positive_int(n_perm, "representation_table", "n_perm")
    if pairs is None:
        res = instruct_vs_base(ds, tau=tau, n_boot=1, n_perm=1, orders=("all",))
        pairs = list(zip(res.pairs["unit_a"], res.pairs["unit_b"], strict=True))
    triples = _as_pairs(pairs, "representation_table")
    ds, vals = _per_sample(ds, tau)
    names = model_names(ds)
    missing = sorted({m for a, b, _ in triples for m in (a, b) if m not in names})
    if missing:
        fail("representation_table", f"models {missing} are not in the run", "Check pairs")
    ia = np.array([names.index(a) for a, _, _ in triples])
    ib = np.array([names.index(b) for _, b, _ in triples])
    rng = np.random.default_rng(seed)
    n = ds.sizes["sample"]
    counts, flips = resample_counts(n, n_boot, rng), sign_flips(n, n_perm, rng)
    meta = model_frame(ds)
    out = pd.DataFrame(
        {
            "family": meta["family"].to_numpy()[ib] if "family" in meta else "",
            "base": [b for _, b, _ in triples],
            "tuned": [a for a, _, _ in triples],
        }
    )
    for key in METRICS:
        a, b = vals[key][ia], vals[key][ib]
        both = np.isfinite(a) & np.isfinite(b)
        core = paired_core(np.where(both, a, np.nan), np.where(both, b, np.nan), counts, flips, ci)
        out[f"base_{key}"], out[f"tuned_{key}"] = core["mean_b"], core["mean_a"]
        out[f"p_{key}"] = core["p_value"]
    out["cosine_says_tuned_stabler"] = out["tuned_cosine"] > out["base_cosine"]
    out["l2_says_tuned_stabler"] = out["tuned_l2"] < out["base_l2"]
    out["ips_says_tuned_stabler"] = out["tuned_ips"] < out["base_ips"]
    out.attrs.update(tau=tau, ci=ci)
    return mark_synthetic(out, ds)
