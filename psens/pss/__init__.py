"""PSS — ProSA's PromptSensiScore: instance-level sensitivity across prompt variants.

* :mod:`psens.pss.metric` — PSS per instance and per dataset (ProSA §2.2 eq. 1–2), the
  per-variant share of an instance's PSS, decoding confidence (§5), arena-label scores and
  the published prompt versions of the subjective benchmarks (§4);
* :mod:`psens.pss.tables` — the tables per model, variant, style and shot count of one score
  DataArray (what the charts and a PSS explorer show);
* :mod:`psens.pss.charts` — PSS per model, per shot count and per variant (altair);
* :mod:`psens.pss.published` — ProSA's published twelve prompts per objective benchmark
  (``templates = "prosa"`` in a run config);
* :mod:`psens.pss.runs` — analyses of a stored PSS run (``n_vars = 0``; or any run with
  answers under several templates): instance ``S_i`` vs decoding confidence with a
  bootstrap CI and a permutation p, PSS by shot count against zero shots;
* :mod:`psens.pss.verdicts` — the one rule saying whether a PSS change or correlation is a
  finding (:func:`is_finding`) and its sentence (:func:`change_verdict`);
* :mod:`psens.pss.subjective` — the stored subjective PSS run (§4, ``method =
  "subjective"``): ProSA's three prompt versions, responses, a judge through the OpenAI chat
  interface, the between-instance reference;
* :mod:`psens.pss.answers` — MATH and HumanEval answer checking (HumanEval by running the
  completion: :mod:`psens.pss.sandbox`, bubblewrap or the audit-hook guard);
* the 12 prompt variants (``P01``–``P12``) are rendered by :func:`psens.variants.render_variant`.

References
----------
.. [1] Zhuo, J., Zhang, S., Fang, X., Duan, H., Lin, D., and Chen, K. "ProSA: Assessing and
   Understanding the Prompt Sensitivity of LLMs." Findings of the Association for
   Computational Linguistics: EMNLP 2024, pp. 1950–1976. arXiv:2410.12405.
"""

from psens.pss.metric import (
    ARENA_LABEL_SCORES,
    PSSSummary,
    arena_label_score,
    confidence,
    find_dim,
    instance_confidence,
    instance_pss,
    load_prosa_versions,
    pss,
    top_token_probability,
    variant_disagreement,
)
from psens.pss.published import (
    load_published_prompts,
    published_groups,
    published_templates,
    register_published,
)
from psens.pss.runs import (
    answer_confidence,
    chance_pss,
    confidence_relation,
    instance_table,
    is_pss_run,
    pss_by_shot,
    rank_correlation,
)
from psens.pss.tables import pss_tables, sample_dim, variant_dim
from psens.pss.verdicts import NOT_A_FINDING, change_verdict, is_finding
from psens.variants import PROSA_STYLES, PROSA_TEMPLATE_IDS, SHOT_COUNTS, render_variant

__all__ = [
    "ARENA_LABEL_SCORES",
    "NOT_A_FINDING",
    "PROSA_STYLES",
    "PROSA_TEMPLATE_IDS",
    "SHOT_COUNTS",
    "PSSSummary",
    "answer_confidence",
    "arena_label_score",
    "chance_pss",
    "change_verdict",
    "confidence",
    "confidence_relation",
    "find_dim",
    "instance_confidence",
    "instance_pss",
    "instance_table",
    "is_finding",
    "is_pss_run",
    "load_prosa_versions",
    "load_published_prompts",
    "pss",
    "pss_by_shot",
    "pss_tables",
    "published_groups",
    "published_templates",
    "rank_correlation",
    "register_published",
    "render_variant",
    "sample_dim",
    "top_token_probability",
    "variant_dim",
    "variant_disagreement",
]
