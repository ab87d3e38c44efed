r"""IPS — interaction-based prompt sensitivity: the metric, its tables, charts and factor analyses.

The numerical core (AND-OR interactions, Möbius transforms, the γ split of eq. 12) is
:mod:`psens.interactions`; this package turns interactions into IPS and explains it:

* :mod:`psens.ips.metric` — normalisation, salient sets, IPS (eq. 3) per sample and per
  order band, stable/unstable classes, sparsity; :func:`sample_ips` is the one run engine
  (block-wise over a stored run, every τ and order band at once);
* :mod:`psens.ips.tables` — the tidy tables behind every IPS chart and widget;
* :mod:`psens.ips.claims` — the papers' claims as measured quantities with CIs and one
  verdict rule: :func:`order_claim` (fig. 9: high-order interactions more sensitive than
  low-order), :func:`same_answer_claim` (§1: unstable interactions when the answer stays the
  same), :func:`accuracy_relation` (item IPS vs accuracy, beside ProSA's claim),
  :func:`few_shot_claim` (fig. 8: few-shot prompts lower IPS, per model, with the answer
  confound);
* :mod:`psens.ips.floor` — the noise floor: IPS between two scorings of the same prompt
  (precision, jitter) and a per-model test of template IPS against it;
* :mod:`psens.ips.solvers` — how IPS moves with the AND-OR solver (canonical, exact, SGD,
  random optimal vertices): :func:`solver_sensitivity` and :func:`solver_table`;
* :mod:`psens.store.pairs` (also ``psens.ips.pairs``) — the ``pair`` coordinate of runs and
  IPS results, labelled ``"a|b"`` and selectable by name (``res.sel(pair="ips1|ips2")``, also
  ``"ips2-ips1"``);
* :mod:`psens.store.labels` (also ``psens.ips.labels``) — what every run is read under: pair
  labels, the ``order_band(sample, subset)`` coordinate (low/mid/high), readable format ids;
* :mod:`psens.ips.accessor` — ``ds.psens``: words of a subset, template pairs by name, a tidy
  :meth:`~psens.ips.accessor.PsensAccessor.to_frame` (one row per interaction);
* :mod:`psens.ips.charts` — altair charts of those tables (needs the ``widgets`` extra);
* :mod:`psens.ips.factors` — the paper's factor analyses (instruct vs base, scale, dense vs
  MoE, few-shot, thresholds, perturbation kinds, representation metrics) with bootstrap CIs
  and paired tests, and their charts (:mod:`psens.ips.factors.charts`).

References
----------
.. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
"""

import sys as _sys

from psens.ips import accessor, claims, factors, floor, solvers, tables
from psens.ips.claims import accuracy_relation, few_shot_claim, order_claim, same_answer_claim
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
    select_solver,
    solver_names,
    sparsity_curve,
    template_pairs,
    topk_matching_error,
)
from psens.ips.solvers import solver_sensitivity, solver_table
from psens.store import labels, pairs

# the pair coordinate and the labels a run is read under are part of the run schema
# (psens.store.pairs, psens.store.labels): the old names still work
_sys.modules["psens.ips.pairs"] = pairs
_sys.modules["psens.ips.labels"] = labels

__all__ = [
    "CLASSES",
    "ORDERS",
    "ORDER_LEVELS",
    "accessor",
    "accuracy_relation",
    "aggregate",
    "check_taus",
    "claims",
    "class_shares",
    "factors",
    "few_shot_claim",
    "floor",
    "interaction_classes",
    "ips",
    "ips_pairs",
    "labels",
    "n_players",
    "nanmean",
    "normalize",
    "order_claim",
    "order_masks",
    "order_of_subsets",
    "pair_labels",
    "pairs",
    "salient",
    "same_answer_claim",
    "sample_ips",
    "select_solver",
    "solver_names",
    "solver_sensitivity",
    "solver_table",
    "solvers",
    "sparsity_curve",
    "tables",
    "template_pairs",
    "topk_matching_error",
]
