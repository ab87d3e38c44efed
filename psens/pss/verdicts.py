r"""One verdict per PSS change: is a difference (or a correlation) a finding?

The rule is :mod:`psens.stats`'s (:func:`psens.stats.is_finding` and its sentence
:func:`psens.stats.change_verdict`), shared with the IPS claims (:mod:`psens.ips.claims`);
it is re-exported here under its PSS names. Every surface that says a PSS verdict
(:func:`psens.pss.pss_by_shot`'s ``within_noise`` and ``verdict`` columns,
:func:`psens.pss.confidence_relation`'s ``verdict``, notebook 09) takes it from here, so a
row is never called a finding in one place and within noise in another.

* :func:`is_finding` — the rule: the CI excludes 0 and, when there is a p-value, the test
  rejects at ``alpha``;
* :func:`change_verdict` — the sentence form of the same rule.

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
"""

from __future__ import annotations

from psens.stats import NOT_A_FINDING, change_verdict, is_finding

__all__ = ["NOT_A_FINDING", "change_verdict", "is_finding"]
