"""EAS — evaluation-attributable sensitivity: heuristic-scored vs judge-scored sensitivity.

* :mod:`psens.eas.metric` — the 2^3 template design's rows, SensH/SensJ, EAS and signed
  EAS per instance, the four zones, per-dataset aggregates with bootstrap CIs, factor
  effects, response generation and judging through a client;
* :mod:`psens.eas.scoring` — the task heuristics (MCQ letter, yes/no, SQuAD F1), with a
  ``compat="eas"`` mode that reproduces the published scorers;
* :mod:`psens.eas.tables` — one instance up close: its key, per-template scores and
  responses, and their HTML;
* :mod:`psens.eas.charts` — the published figures (altair);
* the 8 templates (``T000``–``T111``) are rendered by :func:`psens.variants.render_variant`.

References
----------
.. [1] Muthukumarana, S., Wijenayake, B., Godaliyadda, R., and Ekanayake, P. "Prompt Sensitivity
   or Evaluation Artifact? A Task-Aware Analysis for Large Language Models." The authors'
   code and experimental artifacts (GitHub: sayumimuthu/llm-prompt-sensitivity-evaluation-
   artifact); no arXiv version has been published.
"""

from psens.eas.metric import (
    DATASET_COLUMNS,
    FACTORS,
    INSTANCE_COLUMNS,
    ZONES,
    aggregate,
    bootstrap_ci,
    build_rows,
    factor_effects,
    generate_responses,
    instance_metrics,
    judge_responses,
    thresholds,
    to_dataset,
    zones,
)
from psens.eas.scoring import heuristic_score, heuristic_scores
from psens.eas.tables import instance_detail, instance_detail_html, instance_key
from psens.variants import EAS_TEMPLATE_IDS, eas_factors, render_variant

__all__ = [
    "DATASET_COLUMNS",
    "EAS_TEMPLATE_IDS",
    "FACTORS",
    "INSTANCE_COLUMNS",
    "ZONES",
    "aggregate",
    "bootstrap_ci",
    "build_rows",
    "eas_factors",
    "factor_effects",
    "generate_responses",
    "heuristic_score",
    "heuristic_scores",
    "instance_detail",
    "instance_detail_html",
    "instance_key",
    "instance_metrics",
    "judge_responses",
    "render_variant",
    "thresholds",
    "to_dataset",
    "zones",
]
