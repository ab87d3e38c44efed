r"""One verdict per PSS change: is a difference (or a correlation) a finding?

Every surface that says a PSS verdict (:func:`psens.pss.pss_by_shot`'s ``within_noise`` and
``verdict`` columns, :func:`psens.pss.confidence_relation`'s ``verdict``, notebook 09) takes it
from here, so a row is never called a finding in one place and within noise in another.

* :func:`is_finding` — the rule: the CI excludes 0 and, when there is a p-value, the test
  rejects at ``alpha``;
* :func:`change_verdict` — the sentence form of the same rule.

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
"""

from __future__ import annotations

import math

__all__ = ["NOT_A_FINDING", "change_verdict", "is_finding"]

#: how every verdict that is not a finding ends
NOT_A_FINDING = "not a finding"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(float(x))


def is_finding(lo: float, hi: float, p_value: float | None = None, alpha: float = 0.05) -> bool:
    """Whether a change (or correlation) with CI ``[lo, hi]`` and ``p_value`` is a finding.

    Parameters
    ----------
    lo, hi : float
        The ends of the (95 %) confidence interval. NaN: undefined (too few items with
        variation), never a finding.
    p_value : float, optional
        The p-value of a test of "no change" on the same data (e.g. the sign-flip p-value of
        :func:`psens.stats.paired_test`). None or NaN: the CI alone decides.
    alpha : float
        The test's level: a p-value at or above it is not a finding, whatever the CI says.

    Returns
    -------
    bool
        True when the CI lies strictly above or strictly below 0 and, if given, ``p_value <
        alpha``. A CI that touches or contains 0 is within noise.

    Examples
    --------
    >>> is_finding(0.1, 0.3), is_finding(-0.3, -0.1, 0.01), is_finding(-0.2, 0.1)
    (True, True, False)
    >>> is_finding(0.1, 0.3, p_value=0.2)  # the CI excludes 0 but the test does not reject
    False
    """
    if not (_finite(lo) and _finite(hi)):
        return False
    if not (lo > 0 or hi < 0):
        return False
    return not (_finite(p_value) and float(p_value) >= alpha)


def change_verdict(
    lo: float,
    hi: float,
    p_value: float | None = None,
    *,
    words: tuple[str, str] = ("rose", "fell"),
    alpha: float = 0.05,
) -> str:
    """The verdict on a change with CI ``[lo, hi]``, in words; the rule is :func:`is_finding`.

    Parameters
    ----------
    lo, hi : float
        The ends of the confidence interval of the change (or correlation).
    p_value : float, optional
        The p-value of the paired test; None or NaN: the CI alone decides.
    words : (str, str)
        What a CI above 0 and a CI below 0 say (e.g. ``("PSS rose", "PSS fell, as ProSA
        reports")``).
    alpha : float
        The test's level.

    Returns
    -------
    str
        ``"<words[0]>, CI above 0"`` or ``"<words[1]>, CI below 0"`` for a finding; otherwise a
        sentence ending in :data:`NOT_A_FINDING` that says why (undefined CI, CI containing 0,
        or a test that does not reject). ``change_verdict(...).endswith(NOT_A_FINDING)`` is
        exactly ``not is_finding(...)``.

    Examples
    --------
    >>> change_verdict(-0.4, -0.1, 0.01, words=("PSS rose", "PSS fell"))
    'PSS fell, CI below 0'
    >>> change_verdict(-0.1, 0.2)
    'within noise (the CI contains 0): not a finding'
    >>> change_verdict(0.05, 0.2, 0.08)
    'rose, CI above 0 — but the paired test does not reject (p = 0.080 >= 0.05): not a finding'
    """
    if not (_finite(lo) and _finite(hi)):
        return f"undefined (too few items with variation): {NOT_A_FINDING}"
    if not (lo > 0 or hi < 0):
        return f"within noise (the CI contains 0): {NOT_A_FINDING}"
    said = f"{words[0]}, CI above 0" if lo > 0 else f"{words[1]}, CI below 0"
    if is_finding(lo, hi, p_value, alpha):
        return said
    return (
        f"{said} — but the paired test does not reject (p = {float(p_value):.3f} >= {alpha:g}): "
        + NOT_A_FINDING
    )
