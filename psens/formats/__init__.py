"""Format spaces: a grammar of prompt formats, runs over sampled formats and their analyses.

* :mod:`psens.formats.grammar` — the dimensions (field names and their casing, separators,
  spacing, option enumeration, answer cue, EAS role line and directive), a
  :class:`Format` (one point, hashable, with a stable id), named :class:`Grammar`\\ s
  (subspaces: ``default``, ``ips``, ``eas``), ``sample(k, seed)`` and ``neighbours(f)``.
  A format is a :class:`psens.prompts.Template`, so every method accepts it by its id.
* :mod:`psens.formats.tokens` — which formats a model's tokenizer can score (distinct answer
  tokens for the option labels: :func:`scorable`);
* :mod:`psens.formats.analysis` — accuracy per format and its spread (bootstrap CI over
  items, permutation noise floor), one-change pairs, IPS and accuracy change by format
  dimension, PSS;
* :mod:`psens.formats.published` — Mind Your Format's published accuracies of 20 models
  (1B–70B) on four tasks as a format-space Dataset (:func:`mind_your_format`), so the
  analyses above run on real large models;
* :mod:`psens.formats.search` — the budgeted best/worst format search (paired elimination
  on the finite pool; FormatSpread's Thompson sampling as the baseline), how sure it is,
  and how often (at which budget) it finds a stored run's extremes.

References
----------
.. [1] Sclar, M., Choi, Y., Tsvetkov, Y., and Suhr, A. "Quantifying Language Models'
   Sensitivity to Spurious Features in Prompt Design or: How I learned to start worrying
   about prompt formatting." The Twelfth International Conference on Learning
   Representations (ICLR), 2024. arXiv:2310.11324.
.. [2] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." ICML 2026. arXiv:2608.18539.
"""

from psens.formats import analysis, grammar, published, search, tokens
from psens.formats.grammar import *  # noqa: F403 (the names of grammar.__all__)
from psens.formats.published import mind_your_format
from psens.formats.tokens import PROBE, scorable, scorable_enums

__all__ = [
    "PROBE",
    "analysis",
    "mind_your_format",
    "published",
    "scorable",
    "scorable_enums",
    "search",
    "tokens",
    *grammar.__all__,
]
