r"""Uncertainty and agreement statistics shared by the methods (vectorised, seeded).

The IPS tables and factor analyses, the noise-floor test and EAS draw their bootstrap
resamples and paired tests here. Methods (stated once here, referred to by every
comparison):

* **Bootstrap CI of an IPS figure** (the mean over samples of per-sample IPS, NaN skipped):
  percentile bootstrap over samples. One matrix of multinomial resample counts
  ``W[b, s]`` (how often sample ``s`` is drawn in resample ``b``) is drawn for all figures
  of a call, so every figure (and every difference or ratio of figures) is resampled on
  the same samples; resampled means are ``W @ x / W @ valid``: no loop over resamples.
* **Paired test of A vs B**: two-sided sign-flip permutation test on the per-sample
  differences :math:`d_s = x^A_s - x^B_s` over the samples where both are defined
  (exchanging A and B within a sample under the null); statistic :math:`\bar d`;
  :math:`p = (1 + \#\{|\bar d^*| \ge |\bar d|\})/(1 + P)`. One ``±1`` matrix ``S[p, s]`` is
  drawn per call, so a group statistic (mean over pairs of :math:`\bar d_k / \bar x^B_k`, the
  paper's mean ΔIPS) is tested with the same flips applied to all pairs of a sample.
* **CI of a difference / relative change**: the same paired bootstrap, on
  :math:`\bar x^A - \bar x^B` and :math:`(\bar x^A - \bar x^B)/\bar x^B`.
* **Resampled means by index draws** (:func:`choice_bootstrap_means`): the index-matrix
  bootstrap that equals sequential ``rng.choice(values, n).mean()`` calls draw for draw
  (the EAS authors' procedure).

* **Correlation with a CI** (:func:`correlation_ci`): Spearman or Pearson r
  (:func:`rank_correlation`) over paired values, with a percentile bootstrap CI from one
  index matrix of resamples (ranks recomputed on each), and its test of no relation
  (:func:`correlation_test`): two-sided permutation p-value, ``y`` permuted against ``x``,
  :math:`p = (1 + \#\{|r^*| \ge |r|\})/(1 + P)`.

**The verdict rule** (:func:`is_finding`, in words :func:`change_verdict`): a change, a
difference or a correlation is a *finding* when its CI lies strictly on one side of 0 and,
when it has a p-value, the test rejects at ``alpha = 0.05``. The PSS verdicts
(:mod:`psens.pss.verdicts`) and the IPS claims (:mod:`psens.ips.claims`) both use it: one rule.

Agreement of model rankings (appendix F.8, table 2): Spearman ρ (Pearson r of average
ranks), Pearson r, Kendall τ-b (from sign matrices), RMSE of ranks and top-k overlap.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.

The bootstrap CIs and paired tests are psens's addition: [1] reports point estimates.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from psens._validation import check_in_interval, check_positive_int, fail

__all__ = [
    "NOT_A_FINDING",
    "bootstrap_means",
    "change_verdict",
    "choice_bootstrap_means",
    "correlation_ci",
    "correlation_test",
    "is_finding",
    "kendall_matrix",
    "majority_answer",
    "paired_core",
    "paired_test",
    "percentile_ci",
    "rank_agreement",
    "rank_correlation",
    "rankdata",
    "resample_counts",
    "sign_flips",
]


def _rng(seed: Any) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def resample_counts(n: int, n_boot: int, seed: Any = 0) -> np.ndarray:
    """Bootstrap resample counts ``W[b, s]``: each row sums to ``n`` (multinomial draw).

    Equivalent to drawing an index matrix ``rng.integers(0, n, (n_boot, n))`` and counting,
    without the ``n_boot × n`` index matrix.
    """
    check_positive_int(n_boot, "resample_counts", "n_boot")
    if n < 1:
        fail("resample_counts", "there are no samples", "Pass a run with at least one sample")
    return _rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)


def sign_flips(n: int, n_perm: int, seed: Any = 0) -> np.ndarray:
    """Random ``±1`` matrix ``S[p, s]`` for the paired sign-flip permutation test."""
    check_positive_int(n_perm, "sign_flips", "n_perm")
    return np.where(_rng(seed).random((n_perm, n)) < 0.5, -1.0, 1.0)


def bootstrap_means(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Resampled NaN-skipping means over the last axis: ``[n_boot, ...]``.

    ``x`` is ``[..., n]``; ``counts`` from :func:`resample_counts` (``[n_boot, n]``).
    A resample with no defined value is NaN.
    """
    x = np.asarray(x, dtype=float)
    valid = np.isfinite(x)
    num = np.tensordot(counts, np.where(valid, x, 0.0), axes=([1], [-1]))
    den = np.tensordot(counts, valid.astype(float), axes=([1], [-1]))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def choice_bootstrap_means(vals: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` means of resamples of ``vals`` with replacement, by index draws.

    The indices are drawn with ``rng.integers(0, n, size=(chunk, n))`` in chunks of at most
    ~4M draws. ``Generator.choice(vals, n, replace=True)`` draws its indices from the same
    bounded-integer stream, so this equals ``n_boot`` sequential ``rng.choice(...).mean()``
    calls draw for draw (checked in the tests), without a Python loop over resamples.
    """
    n = vals.size
    step = max(1, 4_000_000 // n)
    parts = []
    for start in range(0, n_boot, step):
        idx = rng.integers(0, n, size=(min(step, n_boot - start), n))
        parts.append(vals[idx].mean(axis=1))
    return np.concatenate(parts)


def percentile_ci(boot: np.ndarray, ci: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap draws along axis 0 (NaN draws skipped)."""
    check_in_interval(ci, "percentile_ci", "ci", 0.0, 1.0)
    alpha = (1.0 - ci) / 2
    b = np.asarray(boot, dtype=float)
    if b.shape[0] == 0:
        nan = np.full(b.shape[1:], np.nan)
        return nan, nan.copy()
    all_nan = np.isnan(b).all(axis=0)
    filled = np.where(all_nan, 0.0, b)
    lo = np.nanquantile(filled, alpha, axis=0)
    hi = np.nanquantile(filled, 1.0 - alpha, axis=0)
    return np.where(all_nan, np.nan, lo), np.where(all_nan, np.nan, hi)


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    *,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
) -> dict[str, np.ndarray]:
    r"""Paired comparison of per-sample values ``a`` and ``b`` (``[..., n]``, NaN = undefined).

    Uses the samples where both are defined. Returns arrays over the leading axes:
    ``mean_a, mean_b, diff`` (:math:`\bar a - \bar b`), ``rel`` (:math:`(\bar a-\bar b)/\bar b`),
    their bootstrap CIs ``diff_lo/diff_hi/rel_lo/rel_hi``, the sign-flip permutation
    ``p_value`` and ``n`` (paired samples). See the module docstring for the methods.

    Examples
    --------
    >>> r = paired_test(np.full(20, 1.0), np.full(20, 2.0), n_perm=99)
    >>> float(r["rel"]), float(r["p_value"])
    (-0.5, 0.01)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        fail("paired_test", f"a has shape {a.shape}, b {b.shape}", "Pass arrays of one shape")
    n = a.shape[-1]
    rng = _rng(seed)
    counts = resample_counts(n, n_boot, rng)
    flips = sign_flips(n, n_perm, rng)
    both = np.isfinite(a) & np.isfinite(b)
    aa, bb = np.where(both, a, np.nan), np.where(both, b, np.nan)
    out = paired_core(aa, bb, counts, flips, ci)
    return out


def paired_core(a, b, counts, flips, ci) -> dict[str, np.ndarray]:
    """Core of :func:`paired_test` with pre-drawn counts/flips; a, b NaN where unpaired."""
    valid = np.isfinite(a)
    k = valid.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_a = np.where(k > 0, np.nansum(a, axis=-1) / np.maximum(k, 1), np.nan)
        mean_b = np.where(k > 0, np.nansum(b, axis=-1) / np.maximum(k, 1), np.nan)
        d = np.where(valid, a - b, 0.0)
        diff = mean_a - mean_b
        rel = diff / mean_b
        ba, bb = bootstrap_means(a, counts), bootstrap_means(b, counts)
        diff_lo, diff_hi = percentile_ci(ba - bb, ci)
        rel_lo, rel_hi = percentile_ci((ba - bb) / bb, ci)
        perm = np.tensordot(flips, d, axes=([1], [-1])) / np.maximum(k, 1)  # [P, ...]
    obs = np.abs(np.where(k > 0, d.sum(axis=-1) / np.maximum(k, 1), np.nan))
    tol = 1e-12 * np.maximum(1.0, obs)
    hits = (np.abs(perm) >= obs - tol).sum(axis=0)
    p = np.where(k > 0, (1.0 + hits) / (1.0 + flips.shape[0]), np.nan)
    return {
        "mean_a": mean_a,
        "mean_b": mean_b,
        "diff": diff,
        "diff_lo": diff_lo,
        "diff_hi": diff_hi,
        "rel": rel,
        "rel_lo": rel_lo,
        "rel_hi": rel_hi,
        "p_value": p,
        "n": k,
        "_boot_a": ba,
        "_boot_b": bb,
        "_perm": perm,
        "_d_mean": np.where(k > 0, d.sum(axis=-1) / np.maximum(k, 1), np.nan),
    }


# ----------------------------------------------------------------------------- rankings


def rankdata(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Average ranks (1 = smallest) along ``axis``, ties sharing their mean rank (as scipy)."""
    from scipy.stats import rankdata as _rank

    return _rank(np.asarray(x, dtype=float), method="average", axis=axis)


def _corr_columns(x: np.ndarray) -> np.ndarray:
    """Pearson correlation between the columns of ``x`` (``[n, k]`` -> ``[k, k]``)."""
    xc = x - x.mean(axis=0, keepdims=True)
    norm = np.sqrt((xc**2).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc.T @ xc) / np.outer(norm, norm)


def kendall_matrix(x: np.ndarray) -> np.ndarray:
    r"""Kendall τ-b between all columns of ``x`` (``[n, k]`` -> ``[k, k]``).

    With :math:`s_{ij} = \mathrm{sgn}(x_i - x_j)` over item pairs ``i < j`` of one column,
    :math:`\tau_b(u, v) = \sum s^u s^v / \sqrt{\sum (s^u)^2 \sum (s^v)^2}` (ties give 0).
    """
    x = np.asarray(x, dtype=float)
    i, j = np.triu_indices(x.shape[0], k=1)
    s = np.sign(x[i] - x[j])  # [pairs, k]
    with np.errstate(invalid="ignore", divide="ignore"):
        norm = np.sqrt((s**2).sum(axis=0))
        return (s.T @ s) / np.outer(norm, norm)


def rank_agreement(values: np.ndarray, *, top_k: int = 10) -> dict[str, np.ndarray]:
    """Agreement of model rankings between settings (columns) of ``values[model, setting]``.

    Rank 1 is the lowest value (for IPS: the most stable model). Returns ``[k, k]``
    matrices ``spearman``, ``pearson``, ``kendall``, ``rmse`` (root mean squared difference
    of ranks) and ``top_k`` (share of the ``top_k`` lowest models shared), and the ``ranks``.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        fail(
            "rank_agreement",
            f"values have shape {x.shape}",
            "Pass [model, setting] with at least two models and two settings",
        )
    if not np.isfinite(x).all():
        fail("rank_agreement", "values contain NaN", "Drop models with undefined IPS first")
    ranks = rankdata(x, axis=0)
    k = min(int(top_k), x.shape[0])
    order = np.argsort(x, axis=0, kind="stable")[:k]  # [k, settings]
    member = np.zeros(x.shape, dtype=float)
    np.put_along_axis(member, order, 1.0, axis=0)
    diff2 = ((ranks[:, :, None] - ranks[:, None, :]) ** 2).mean(axis=0)
    return {
        "spearman": _corr_columns(ranks),
        "pearson": _corr_columns(x),
        "kendall": kendall_matrix(x),
        "rmse": np.sqrt(diff2),
        "top_k": (member.T @ member) / k,
        "ranks": ranks,
    }


def rank_correlation(x: np.ndarray, y: np.ndarray, *, method: str = "spearman") -> np.ndarray:
    r"""Correlation of ``x`` and ``y`` along the last axis (rows are independent problems).

    ``method="pearson"``: :math:`r = \sum (x-\bar x)(y-\bar y) / \sqrt{\sum (x-\bar x)^2
    \sum (y-\bar y)^2}`; ``"spearman"``: the same on average ranks (ties share their mean
    rank). NaN when either row is constant.
    """
    if method not in ("spearman", "pearson"):
        fail("rank_correlation", f"method={method!r}", 'Use "spearman" or "pearson"')
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if method == "spearman":
        x, y = rankdata(x, axis=-1), rankdata(y, axis=-1)
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=-1) * (yc**2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(axis=-1) / den
    return np.where(den > 1e-12, r, np.nan)


def check_correlation_args(where: str, method: str, n_boot: int, n_perm: int, ci: float) -> None:
    """Refuse, in one line each, the arguments a correlation claim passes on to
    :func:`correlation_ci` and :func:`correlation_test` (the one check of both claims)."""
    from psens._validation import check_in_interval, check_positive_int, fail

    check_positive_int(n_boot, where, "n_boot")
    check_positive_int(n_perm, where, "n_perm")
    check_in_interval(ci, where, "ci", 0.0, 1.0)
    if method not in ("spearman", "pearson"):
        fail(where, f"method = {method!r}", 'Use "spearman" or "pearson"')


def correlation_test(
    x: np.ndarray,
    y: np.ndarray,
    *,
    method: str = "spearman",
    n_perm: int = 2000,
    seed: Any = 0,
) -> float:
    r"""Two-sided permutation p-value of the correlation of paired values ``x``, ``y``.

    Under the null of no relation the pairing is exchangeable: ``n_perm`` permutations
    :math:`\pi_k` of ``y`` (one matrix ``rng.permuted`` of tiled indices, ``seed`` a seed or
    a Generator, whose stream it advances), :math:`r_k = r(x, y_{\pi_k})`
    (:func:`rank_correlation`), and

    .. math::
        p = \frac{1 + \#\{k : |r_k| \ge |r| - \epsilon\}}{1 + P}

    (:math:`\epsilon = 10^{-12}\max(1, |r|)` for float ties, as :func:`paired_test`). With
    :math:`n` pairs no p falls below :math:`2/n!` (about 0.083 for four pairs), whatever
    ``n_perm``. NaN when ``r`` is undefined (fewer than three pairs, a constant variable).

    Parameters
    ----------
    x, y : array-like
        1-d, the same length, all defined.
    method : {"spearman", "pearson"}
        The correlation.
    n_perm : int
        Permutations.
    seed : int or numpy.random.Generator
        Seed or generator of the permutations.

    Returns
    -------
    float
        The p-value.

    Examples
    --------
    >>> float(correlation_test(np.arange(10.0), np.arange(10.0), n_perm=99))
    0.01

    References
    ----------
    .. [1] Good, P. I. *Permutation, Parametric, and Bootstrap Tests of Hypotheses*, 3rd ed.,
       Springer, 2005, §3.
    """
    check_positive_int(n_perm, "correlation_test", "n_perm")
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = int(x.size)
    r = float(rank_correlation(x, y, method=method)) if n >= 3 else np.nan
    if not np.isfinite(r):
        return float("nan")
    idx = _rng(seed).permuted(np.tile(np.arange(n), (n_perm, 1)), axis=1)
    perm = rank_correlation(np.broadcast_to(x, idx.shape), y[idx], method=method)
    hits = int((np.abs(perm) >= abs(r) - 1e-12 * max(1.0, abs(r))).sum())
    return (1.0 + hits) / (1.0 + n_perm)


def correlation_ci(
    x: np.ndarray,
    y: np.ndarray,
    *,
    method: str = "spearman",
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
    n_perm: int = 0,
) -> dict[str, float]:
    """The correlation of paired values ``x``, ``y`` (1-d, all defined) with a percentile
    bootstrap CI over the pairs and, with ``n_perm > 0``, its permutation p-value.

    ``n_boot`` resamples of the pairs with replacement, as one index matrix
    ``rng.integers(0, n, (n_boot, n))`` (``seed`` a seed or a Generator, whose stream it
    advances), the correlation recomputed on each (:func:`rank_correlation`, ranks recomputed
    for Spearman); resamples where one variable is constant are skipped. Then, from the
    same generator, the ``n_perm`` permutations of :func:`correlation_test`. Fewer than three
    pairs: ``r``, ``lo``, ``hi``, ``p_value`` NaN and nothing drawn.

    Returns
    -------
    dict
        ``n``, ``r``, ``lo``, ``hi``, ``n_boot_valid`` (resamples with a defined correlation),
        ``p_value`` (NaN when ``n_perm = 0``).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = int(x.size)
    out = {"n": n, "r": np.nan, "lo": np.nan, "hi": np.nan, "n_boot_valid": 0, "p_value": np.nan}
    if n < 3:
        return out
    rng = _rng(seed)
    out["r"] = float(rank_correlation(x, y, method=method))
    idx = rng.integers(0, n, size=(n_boot, n))
    boot = rank_correlation(x[idx], y[idx], method=method)
    out["n_boot_valid"] = valid = int(np.isfinite(boot).sum())
    if valid:
        out["lo"], out["hi"] = (float(v[0]) for v in percentile_ci(boot[:, None], ci))
    if n_perm:
        out["p_value"] = correlation_test(x, y, method=method, n_perm=n_perm, seed=rng)
    return out


def majority_answer(answers) -> tuple[str, float, int]:
    """The most frequent of ``answers`` (``""``, None and NaN are no answer), its share of
    the answers given, and how many were given: ``("", nan, 0)`` when none.

    Examples
    --------
    >>> majority_answer(["A", "A", "B", "", None, "A"])
    ('A', 0.75, 4)
    """
    flat = np.ravel(np.asarray(answers, dtype=object))
    answers = np.asarray(["" if a is None or a != a else str(a).strip() for a in flat], object)
    answers = answers[answers != ""]
    if not answers.size:
        return "", float("nan"), 0
    values, counts = np.unique(answers.astype(str), return_counts=True)
    top = int(np.argmax(counts))
    return str(values[top]), float(counts[top] / counts.sum()), int(counts.sum())


# ----------------------------------------------------------------------------- verdicts

#: how every verdict that is not a finding ends
NOT_A_FINDING = "not a finding"


def _finite_value(x: float | None) -> bool:
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
    if not (_finite_value(lo) and _finite_value(hi)):
        return False
    if not (lo > 0 or hi < 0):
        return False
    return not (_finite_value(p_value) and float(p_value) >= alpha)


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
    if not (_finite_value(lo) and _finite_value(hi)):
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
