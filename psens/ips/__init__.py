r"""IPS — interaction-based prompt sensitivity: the metric, its tables, charts and factor analyses.

The numerical core (AND-OR interactions, Möbius transforms, the γ split of eq. 12) is
:mod:`psens.interactions`; this package turns interactions into IPS and explains it:

* :mod:`psens.ips.metric` — normalisation, salient sets, IPS (eq. 3) per sample and per
  order band, stable/unstable classes, sparsity; :func:`sample_ips` is the one run engine
  (block-wise over a stored run, every τ and order band at once);
* :mod:`psens.ips.tables` — the tidy tables behind every IPS chart and widget;
* :mod:`psens.ips.solvers` — how IPS moves with the AND-OR solver (canonical, exact, SGD,
  random optimal vertices): :func:`solver_sensitivity` and :func:`solver_table`;
* :mod:`psens.ips.accessor` — ``ds.psens``: words of a subset, template pairs by name, a tidy
  :meth:`~psens.ips.accessor.PsensAccessor.to_frame` (one row per interaction);
* :mod:`psens.ips.charts` — altair charts of those tables (needs the ``widgets`` extra);
* :mod:`psens.ips.factors` — the paper's factor analyses (instruct vs base, scale, dense vs
  MoE, few-shot, thresholds, perturbation kinds, representation metrics) with bootstrap CIs
  and paired tests, and their charts (:mod:`psens.ips.factors.charts`).

References
----------
.. [1] Zhang, Q., Chen, L., Lou, W., Wang, Z., Zhou, J., Wang, X., Ren, J., Zhou, B.,
   Zhang, L., and Zhang, Q. "Understanding Prompt Sensitivity of Large Language Models
   through the Lens of Interactions." arXiv:2510.20366, 2025.
"""

from psens.ips import accessor, factors, solvers, tables
from psens.ips.metric import (
    CLASSES,
    ORDER_LEVELS,
    ORDERS,
    aggregate,
    check_taus,
    class_shares,
    interaction_classes,
    ips,
    ips_pairs,
    n_players,
    nanmean,
    normalize,
    order_masks,
    order_of_subsets,
    pair_labels,
    salient,
    sample_ips,
    sparsity_curve,
    template_pairs,
    topk_matching_error,
)
from psens.ips.solvers import solver_sensitivity, solver_table

__all__ = [
    "CLASSES",
    "ORDERS",
    "ORDER_LEVELS",
    "accessor",
    "aggregate",
    "check_taus",
    "class_shares",
    "factors",
    "interaction_classes",
    "ips",
    "ips_pairs",
    "n_players",
    "nanmean",
    "normalize",
    "order_masks",
    "order_of_subsets",
    "pair_labels",
    "salient",
    "sample_ips",
    "solver_sensitivity",
    "solver_table",
    "solvers",
    "sparsity_curve",
    "tables",
    "template_pairs",
    "topk_matching_error",
]
