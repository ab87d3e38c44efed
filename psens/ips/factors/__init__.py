"""Factor analyses of the IPS paper (§4.1–4.3; appendices E.2, E.6, F.8, G, H, I).

Everything takes a run Dataset (:mod:`psens.store`) and returns tidy pandas tables (or
xarray objects); charts are in :mod:`psens.ips.factors.charts`.

* metadata: :func:`attach_metadata`, :func:`select_models`, :func:`model_frame`;
* per-sample IPS for many τ and order bands at once: :func:`sample_ips`;
* the four factors (figs. 5–8), each per order band (§4.3): :func:`instruct_vs_base`,
  :func:`scale_series`, :func:`dense_vs_moe`, :func:`matched_active` (table 7),
  :func:`few_shot` and the generic :func:`compare_models` (IPS by order per model, fig. 9,
  and ΔIPS of a factor by order, fig. 10, are :func:`psens.ips.tables.order_ips_table` and
  :func:`psens.ips.tables.factor_table`, drawn by :mod:`psens.ips.charts`);
* threshold robustness (F.8, tables 2–3): :func:`ips_by_threshold`,
  :func:`threshold_agreement`, :func:`threshold_pairs`, :func:`threshold_table`;
* IPS vs output consistency (fig. 4b): :func:`ips_vs_consistency`,
  :func:`consistency_correlation`;
* perturbation kinds (G, tables 4–5): :func:`pair_kinds`, :func:`ips_by_perturbation`,
  :func:`perturbation_tables`;
* representation metrics (H, table 6): :func:`representation_metrics`,
  :func:`representation_table`.

Uncertainty (:mod:`psens.stats`): percentile bootstrap over samples for every
IPS figure, and a seeded paired sign-flip permutation test for every A-vs-B difference.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from psens.ips.factors import pairings
from psens.ips.factors.compare import (
    FactorResult,
    compare_models,
    dense_vs_moe,
    few_shot,
    instruct_vs_base,
    matched_active,
    matched_pairs,
    scale_series,
)
from psens.ips.factors.consistency import (
    consistency_correlation,
    ips_vs_consistency,
    sample_consistency,
)
from psens.ips.factors.meta import attach_metadata, model_frame, select_models
from psens.ips.factors.pairings import paper_pairings
from psens.ips.factors.perturbation import ips_by_perturbation, pair_kinds, perturbation_tables
from psens.ips.factors.representation import representation_metrics, representation_table
from psens.ips.factors.threshold import (
    PAPER_TAUS,
    TABLE3_TAUS,
    ips_by_threshold,
    threshold_agreement,
    threshold_pairs,
    threshold_table,
)
from psens.ips.metric import ORDER_LEVELS, sample_ips
from psens.stats import paired_test, rank_agreement
from psens.synthetic import paper_models, paper_run

__all__ = [
    # per-sample IPS
    "ORDER_LEVELS",
    # thresholds
    "PAPER_TAUS",
    "TABLE3_TAUS",
    # factors
    "FactorResult",
    # metadata
    "attach_metadata",
    "compare_models",
    # consistency
    "consistency_correlation",
    "dense_vs_moe",
    "few_shot",
    "instruct_vs_base",
    "ips_by_perturbation",
    "ips_by_threshold",
    "ips_vs_consistency",
    "matched_active",
    "matched_pairs",
    "model_frame",
    # perturbation kinds
    "pair_kinds",
    # statistics
    "paired_test",
    # pairings and demo runs
    "pairings",
    "paper_models",
    "paper_pairings",
    "paper_run",
    "perturbation_tables",
    "rank_agreement",
    # representation
    "representation_metrics",
    "representation_table",
    "sample_consistency",
    "sample_ips",
    "scale_series",
    "select_models",
    "threshold_agreement",
    "threshold_pairs",
    "threshold_table",
]
