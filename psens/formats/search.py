r"""Budgeted search for the best and the worst format of a finite item pool.

Two searches answer "which of these formats is the best (and the worst)?" within a call
budget (one call = one format evaluated on one item); the oracle is any
``correct[item, format]`` table (0/1): in psens the per-item correctness a run stored, so a
search replays what evaluating a format on an item would have given.

:func:`paired_search` (psens's default) — paired elimination on a finite pool. Every format
sees the items in one common random order, so two formats that have seen ``n_f`` and
``n_g`` items share the first ``m = min(n_f, n_g)``. On those, ``c₊`` items are right under
``g`` and wrong under ``f``, ``c₋`` the reverse, ``c₀`` agree. The pool difference of the two
formats' correct counts is

.. math::
    D = (c_+ - c_-) + (U_+ - U_-), \qquad
    (U_+, U_-, U_0) \sim \mathrm{DirMult}(N - m;\ c_+ + \alpha,\ c_- + \alpha,\ c_0 + \alpha),

the Dirichlet–multinomial posterior of the ``N − m`` unseen items' outcomes for exchangeable
items (Ericson 1969) with ``α`` prior items per outcome; ``P(D > 0)`` is summed exactly
(``T = U₊ + U₋`` is beta-binomial, ``U₊ | T`` beta-binomial), and is 0 or 1 once both
formats have seen the whole pool. Each step, for the best and then the worst: the leader
``L`` is the contender with the highest (lowest) posterior-mean pool accuracy; every
contender ``g`` with ``P(acc_g > acc_L) < δ`` (the worst: ``P(acc_g < acc_L) < δ``) is
eliminated — with ``L`` at least as good, ``g`` is not needed for an answer tied with the
true extreme; the challenger is the remaining contender most
likely to beat ``L``, and whichever of ``L`` and the challenger has seen fewer items sees the
next ``step`` ones (both, at equal counts). Formats clearly in the middle thus drop out of
both races early, and close contenders are evaluated on the whole pool, where their
accuracy is exact. When one contender is left for each target and budget remains, every
eliminated format whose posterior of beating the present leader is back at ``>= δ`` (it
was dropped against an earlier leader, or on fewer items) returns to its race. The search
stops when no format returns or the budget is spent, and answers the leaders with

.. math::
    p_\mathrm{best} = 1 - \sum_{g \neq b} P(\mathrm{acc}_g > \mathrm{acc}_b)

(the Bonferroni lower bound of the posterior probability that no format beats ``b``;
``p_worst`` alike).

:func:`thompson_search` — FormatSpread's kind of search, kept as the baseline: independent
Beta posteriors ``Beta(a + s_f, b + n_f − s_f)``, alternately evaluating ``argmax_f θ_f``
and ``argmin_f θ_f`` of one posterior draw per format on an item it has not seen; it answers
the format with the highest (lowest) posterior mean and ``P(θ_f = max_g θ_g)`` from joint
posterior draws. It ignores that formats share items and that the pool is finite.

FormatSpread runs a Thompson search with live model calls; both searches here are psens's
own code.

References
----------
.. [1] Sclar, M., Choi, Y., Tsvetkov, Y., and Suhr, A. "Quantifying Language Models'
   Sensitivity to Spurious Features in Prompt Design or: How I learned to start worrying
   about prompt formatting." ICLR 2024. arXiv:2310.11324.
.. [2] Thompson, W. R. "On the likelihood that one unknown probability exceeds another in
   view of the evidence of two samples." Biometrika 25(3/4), 285–294, 1933.
.. [3] Ericson, W. A. "Subjective Bayesian models in sampling finite populations."
   Journal of the Royal Statistical Society B 31(2), 195–233, 1969.
.. [4] Kalyanakrishnan, S., Tewari, A., Auer, P., and Stone, P. "PAC subset selection in
   stochastic multi-armed bandits." ICML 2012 (LUCB: sample the leader and its strongest
   challenger).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import betaln, gammaln

from psens._validation import check_in_interval, check_positive_int, fail

__all__ = [
    "SearchResult",
    "budget_needed",
    "hit_rates",
    "paired_exceed_probability",
    "paired_search",
    "posterior_extreme_probability",
    "thompson_search",
]


@dataclass(frozen=True)
class SearchResult:
    """What a :func:`paired_search` or :func:`thompson_search` found.

    ``best``/``worst`` index the formats (or name them, when names were given);
    ``p_best``/``p_worst`` are the posterior probabilities that they are the best/worst;
    ``calls`` the model calls spent of ``budget``; ``successes``/``trials`` per format.
    """

    best: Any
    worst: Any
    p_best: float
    p_worst: float
    calls: int
    budget: int
    successes: np.ndarray
    trials: np.ndarray


def posterior_extreme_probability(
    successes: np.ndarray,
    trials: np.ndarray,
    *,
    prior: tuple[float, float] = (1.0, 1.0),
    draws: int = 4000,
    seed: Any = 0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""``P(θ_f = max_g θ_g)`` and ``P(θ_f = min_g θ_g)`` of every format under independent
    posteriors ``Beta(a + s_f, b + n_f − s_f)``, from ``draws`` joint draws.

    Examples
    --------
    >>> p_max, p_min = posterior_extreme_probability(np.array([9, 1]), np.array([10, 10]))
    >>> bool(p_max[0] > 0.99 and p_min[1] > 0.99)
    True
    """
    s, n = np.asarray(successes, float), np.asarray(trials, float)
    rng = np.random.default_rng(seed)
    theta = rng.beta(prior[0] + s, prior[1] + n - s, size=(draws, len(s)))
    k = len(s)
    p_max = np.bincount(theta.argmax(axis=1), minlength=k) / draws
    p_min = np.bincount(theta.argmin(axis=1), minlength=k) / draws
    return p_max, p_min


def thompson_search(
    correct: np.ndarray,
    budget: int,
    *,
    names: Sequence[str] | None = None,
    prior: tuple[float, float] = (1.0, 1.0),
    confidence: float | None = None,
    seed: Any = 0,
    draws: int = 4000,
) -> SearchResult:
    """Find the best and the worst format of ``correct[item, format]`` within ``budget`` calls.

    Parameters
    ----------
    correct : array (n_items, n_formats) of 0/1
        The oracle: whether format ``f`` answers item ``i`` correctly (no NaN).
    budget : int
        Model calls allowed (one call = one format evaluated on one item).
    names : sequence of str, optional
        Format names for the result (default: indices).
    prior : (a, b)
        The Beta prior of every format's accuracy.
    confidence : float in (0, 1), optional
        Stop early once both ``p_best`` and ``p_worst`` reach it (checked every
        ``n_formats`` calls).
    seed : int or Generator

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> acc = np.linspace(0.1, 0.9, 6)
    >>> oracle = (rng.random((200, 6)) < acc).astype(float)
    >>> r = thompson_search(oracle, 300, seed=1)
    >>> int(r.best), int(r.worst), r.calls
    (5, 0, 300)
    """
    where = "psens.formats.thompson_search"
    x, budget = _check_oracle(correct, budget, names, where)
    if confidence is not None:
        check_in_interval(confidence, where, "confidence", 0.0, 1.0)
    n_items, k = x.shape
    rng = np.random.default_rng(seed)
    # each format sees the items in its own random order, without replacement
    order = np.argsort(rng.random((k, n_items)), axis=1)
    s = np.zeros(k)
    n = np.zeros(k, dtype=np.int64)
    a, b = prior
    calls, step = 0, 0
    while calls < min(budget, n_items * k):
        open_ = n < n_items
        theta = rng.beta(a + s, b + n - s)
        theta = np.where(open_, theta, np.nan)
        f = int(np.nanargmax(theta) if step % 2 == 0 else np.nanargmin(theta))
        s[f] += x[order[f, n[f]], f]
        n[f] += 1
        calls += 1
        step += 1
        if confidence is not None and calls % k == 0:
            p_max, p_min = posterior_extreme_probability(s, n, prior=prior, draws=draws, seed=rng)
            mean = (a + s) / (a + b + n)
            if p_max[np.argmax(mean)] >= confidence and p_min[np.argmin(mean)] >= confidence:
                break
    p_max, p_min = posterior_extreme_probability(s, n, prior=prior, draws=draws, seed=rng)
    mean = (a + s) / (a + b + n)
    best, worst = int(np.argmax(mean)), int(np.argmin(mean))
    return _result(names, best, worst, p_max[best], p_min[worst], calls, budget, s, n)


def _check_oracle(correct, budget, names, where: str) -> tuple[np.ndarray, int]:
    """The oracle as a float array and the budget, or a one-line refusal."""
    x = np.asarray(correct, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] < 1:
        fail(where, f"correct has shape {x.shape}", "Pass a (n_items, n_formats >= 2) table")
    if not np.isin(x, (0.0, 1.0)).all():
        fail(where, "correct holds values other than 0 and 1 (or NaN)", "Pass 0/1 correctness")
    budget = check_positive_int(budget, where, "budget")
    if names is not None and len(names) != x.shape[1]:
        fail(where, f"{len(names)} names for {x.shape[1]} formats", "Pass one name per format")
    return x, budget


def _result(names, best, worst, p_best, p_worst, calls, budget, s, n) -> SearchResult:
    label = (lambda i: names[i]) if names is not None else (lambda i: i)
    return SearchResult(
        label(best), label(worst), float(p_best), float(p_worst), int(calls), budget, s, n
    )


def paired_exceed_probability(
    c_plus: np.ndarray,
    c_minus: np.ndarray,
    c_zero: np.ndarray,
    unseen: np.ndarray,
    *,
    prior: float = 0.5,
) -> np.ndarray:
    r"""``P(D > 0)`` for the pool difference of two formats' correct counts.

    .. math::
        D = (c_+ - c_-) + (U_+ - U_-), \quad
        (U_+, U_-, U_0) \sim \mathrm{DirMult}(M;\ c_+ + \alpha,\ c_- + \alpha,\ c_0 + \alpha)

    with ``M`` = ``unseen`` items; summed exactly over ``T = U₊ + U₋ ~ BetaBinomial(M,
    c₊ + c₋ + 2α, c₀ + α)`` and ``U₊ | T ~ BetaBinomial(T, c₊ + α, c₋ + α)``
    (Dirichlet aggregation), the latter by its pmf ratio
    ``p(u+1)/p(u) = (T−u)(u+a)/((u+1)(T−u−1+b))`` (``a = c₊ + α``, ``b = c₋ + α``).
    Broadcasts over pairs; ``M = 0`` gives ``1[c₊ > c₋]``.

    Examples
    --------
    >>> paired_exceed_probability(np.array([3, 0]), np.array([0, 0]), np.array([5, 8]), 0)
    array([1., 0.])
    >>> p = paired_exceed_probability(np.array([2]), np.array([2]), np.array([4]), 10)
    >>> bool(0.3 < p[0] < 0.5)  # symmetric, less than 1/2 by the chance of a tie
    True
    """
    cp, cm, c0, m = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (c_plus, c_minus, c_zero, unseen))
    )
    shape = cp.shape
    cp, cm, c0, m = (v.reshape(-1, 1, 1) for v in (cp, cm, c0, m))
    top = int(m.max()) if m.size else 0
    t = np.arange(top + 1, dtype=float).reshape(1, -1, 1)
    u = np.arange(top + 1, dtype=float).reshape(1, 1, -1)
    a, b, a0 = cp + prior, cm + prior, c0 + prior
    # log P(T = t), T ~ BetaBinomial(M, a + b, a0), on t <= M
    tm = np.minimum(t, m)
    log_t = (
        gammaln(m + 1.0)
        - gammaln(tm + 1.0)
        - gammaln(m - tm + 1.0)
        + betaln(tm + a + b, m - tm + a0)
        - betaln(a + b, a0)
    )
    # log P(U+ = u | T = t): P(0 | t) = B(a, t + b) / B(a, b), then the pmf ratios
    step_ok = u[..., :-1] < t  # the ratio from u to u + 1 exists for u < t
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(t - u[..., :-1]) - np.log(u[..., :-1] + 1.0)
        ratio = ratio + np.log(u[..., :-1] + a) - np.log(t - u[..., :-1] - 1.0 + b)
    ratio = np.where(step_ok, ratio, 0.0)
    log_u = np.concatenate([np.zeros((*ratio.shape[:2], 1)), np.cumsum(ratio, axis=-1)], axis=-1)
    log_u = log_u + betaln(a, t + b) - betaln(a, b)
    valid = (t <= m) & (u <= t)
    wins = valid & (cp - cm + 2.0 * u - t > 0)
    p = np.where(wins, np.exp(np.where(wins, log_t + log_u, -np.inf)), 0.0).sum(axis=(1, 2))
    return np.clip(p, 0.0, 1.0).reshape(shape)


class _Races:
    """The state of a :func:`paired_search`: how many items (in the common order) each
    format has seen, with the per-format running correct counts of both targets."""

    def __init__(self, xs: np.ndarray, prior: float):
        self.n_items, self.k = xs.shape
        self.prior = prior
        # ys[target]: the best race reads correctness, the worst race its complement
        self.ys = (xs, 1.0 - xs)
        self.cum = tuple(np.vstack([np.zeros(self.k), np.cumsum(y, axis=0)]) for y in self.ys)
        self.level = np.zeros(self.k, dtype=np.int64)
        self._cache: dict[tuple[int, int, int, int], float] = {}

    def seen(self, target: int) -> np.ndarray:
        return self.cum[target][self.level, np.arange(self.k)]

    def leader(self, target: int, among: np.ndarray) -> int:
        """The contender with the highest posterior-mean pool accuracy (of ``target``)."""
        s, n = self.seen(target), self.level
        mean = s + (self.n_items - n) * (s + 0.5) / (n + 1.0)
        return int(np.flatnonzero(among)[np.argmax(mean[among])])

    def exceed(self, target: int, lead: int, others: np.ndarray) -> np.ndarray:
        """``P(acc_g > acc_lead)`` (of ``target``) for every ``g`` in ``others``, paired on
        the items both have seen."""
        y = self.ys[target]
        m = np.minimum(self.level[others], self.level[lead])
        plus = np.vstack([np.zeros(len(others)), np.cumsum(y[:, others] > y[:, [lead]], axis=0)])
        minus = np.vstack([np.zeros(len(others)), np.cumsum(y[:, others] < y[:, [lead]], axis=0)])
        cols = np.arange(len(others))
        cp, cm = plus[m, cols].astype(int), minus[m, cols].astype(int)
        rest = zip(cp, cm, m - cp - cm, self.n_items - m, strict=True)
        keys = [(int(a), int(b), int(c), int(d)) for a, b, c, d in rest]
        todo = [key for key in dict.fromkeys(keys) if key not in self._cache]
        if todo:
            got = paired_exceed_probability(*np.array(todo).T, prior=self.prior)
            self._cache.update(zip(todo, got.tolist(), strict=True))
        return np.array([self._cache[key] for key in keys])


def _reopen(races: _Races, contenders: list[np.ndarray], delta: float) -> bool:
    """With budget left and every race down to one contender: bring back each eliminated
    format whose paired posterior of beating its race's leader is now ``>= delta`` (a
    format dropped against an earlier leader, or on fewer items, may beat the present one).
    True when a race has more than one contender again."""
    again = False
    for target, alive in enumerate(contenders):
        lead = races.leader(target, alive)
        out = np.flatnonzero(~alive)
        if not len(out):
            continue
        back = out[races.exceed(target, lead, out) >= delta]
        alive[back] = True
        again = again or bool(len(back))
    return again


def paired_search(
    correct: np.ndarray,
    budget: int,
    *,
    names: Sequence[str] | None = None,
    delta: float = 0.01,
    prior: float = 0.5,
    step: int | None = None,
    seed: Any = 0,
) -> SearchResult:
    r"""Find the best and the worst format of ``correct[item, format]`` within ``budget``
    calls by paired elimination on the finite pool (see the module docstring).

    Parameters
    ----------
    correct : array (n_items, n_formats) of 0/1
        The oracle: whether format ``f`` answers item ``i`` correctly (no NaN).
    budget : int
        Model calls allowed (one call = one format evaluated on one item); never exceeded.
    names : sequence of str, optional
        Format names for the result (default: indices).
    delta : float in (0, 1)
        A contender is eliminated once the posterior probability that it beats the leader
        is below ``delta``.
    prior : float > 0
        ``α``, the prior items per paired outcome (beats / loses / agrees).
    step : int, optional
        Items added per evaluation (default ``max(1, n_items // 100)``); every format first
        sees ``step`` items.
    seed : int or Generator
        The common random order of the items.

    Returns
    -------
    SearchResult
        ``p_best``/``p_worst``: ``1 − Σ_{g≠b} P(acc_g > acc_b)``, the Bonferroni lower bound
        of the posterior probability that the answer is a best (worst) format of the pool;
        ``trials``: items each format saw; ``successes``: its correct answers on them.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> acc = np.linspace(0.1, 0.9, 6)
    >>> oracle = (rng.random((200, 6)) < acc).astype(float)
    >>> r = paired_search(oracle, 360, seed=1)
    >>> int(r.best), int(r.worst), r.calls <= 360, r.p_best > 0.9
    (5, 0, True, True)
    """
    where = "psens.formats.paired_search"
    x, budget = _check_oracle(correct, budget, names, where)
    check_in_interval(delta, where, "delta", 0.0, 1.0)
    if not (isinstance(prior, int | float) and prior > 0):
        fail(where, f"prior = {prior!r}", "Pass a positive number of prior items")
    n_items, k = x.shape
    step = max(1, n_items // 100) if step is None else check_positive_int(step, where, "step")
    rng = np.random.default_rng(seed)
    races = _Races(x[rng.permutation(n_items)], prior)
    limit = min(budget, n_items * k)
    calls = 0

    def evaluate(f: int, upto: int) -> None:
        nonlocal calls
        new = max(0, min(upto, n_items) - int(races.level[f]))
        new = min(new, limit - calls)
        races.level[f] += new
        calls += new

    first = min(step, limit // k)  # every format's first items (fewer on a tiny budget)
    for f in range(k):
        evaluate(f, max(first, 1 if f < limit else 0))
    contenders = [np.ones(k, dtype=bool), np.ones(k, dtype=bool)]
    reopened_at = -1
    while calls < limit:
        moved = False
        for target in (0, 1):
            alive = contenders[target]
            if alive.sum() <= 1 or calls >= limit:
                continue
            lead = races.leader(target, alive)
            others = np.flatnonzero(alive & (np.arange(k) != lead))
            p = races.exceed(target, lead, others)
            alive[others[p < delta]] = False
            if alive.sum() <= 1:
                continue
            keep = p >= delta
            rival = int(others[keep][np.argmax(p[keep])])
            pair = np.array([lead, rival])
            low = races.level[pair].min()
            todo = pair[(races.level[pair] == low) & (races.level[pair] < n_items)]
            if not len(todo):  # both exact: the leader is at least as good
                alive[rival] = False
                continue
            for f in todo:
                evaluate(int(f), int(low) + step)
            moved = True
        if not moved:
            # reopen only after calls since the last reopening (no loop without progress)
            if calls == reopened_at or not _reopen(races, contenders, delta):
                break
            reopened_at = calls
    answers, sure = [], []
    for target in (0, 1):
        b = races.leader(target, contenders[target])
        others = np.flatnonzero(np.arange(k) != b)
        answers.append(b)
        sure.append(max(0.0, 1.0 - float(races.exceed(target, b, others).sum())))
    # successes and trials in the original item terms: correct answers on the items seen
    successes = races.seen(0)
    return _result(
        names, answers[0], answers[1], sure[0], sure[1], calls, budget, successes, races.level
    )


def hit_rates(
    correct: np.ndarray,
    *,
    fraction: float = 0.3,
    seeds: int = 10,
    search: Callable[..., SearchResult] | None = None,
    spread_share: float = 0.9,
) -> dict[str, Any]:
    r"""How often a search finds the best and the worst format of a stored oracle.

    The search (default :func:`paired_search`) runs with ``budget = ⌊fraction · N · k⌋``
    calls for seeds ``0 … seeds − 1``. The truth is each format's accuracy over the whole
    pool, ``acc_f = (1/N) Σ_i correct_{i,f}``; a seed *hits* the best (worst) when the
    format it answers has ``acc = max_f acc_f`` (``min``) — **a format tied with the true
    extreme counts as a hit** (``n_best_ties``/``n_worst_ties`` say how many share it).
    ``best_regret``/``worst_regret``: the mean accuracy gap between the answer and the true
    extreme. The *reported spread* of a seed is the pool accuracy of the format it answers
    as best minus that of the one it answers as worst, as a share of the true spread,

    .. math:: r_s = \frac{acc_{\hat b_s} - acc_{\hat w_s}}{\max_f acc_f - \min_f acc_f},

    ``spread_ratios`` lists ``r_s`` per seed (NaN when every format has the same accuracy)
    and ``spread_hits`` counts the seeds with ``r_s ≥ spread_share`` (default 0.9).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> oracle = (rng.random((80, 4)) < [0.1, 0.5, 0.5, 0.9]).astype(float)
    >>> h = hit_rates(oracle, seeds=3)
    >>> h["best_hits"], h["worst_hits"], h["max_calls"] <= h["budget"]
    (3, 3, True)
    """
    x = np.asarray(correct, dtype=float)
    check_in_interval(fraction, "psens.formats.hit_rates", "fraction", 0.0, 1.0)
    check_in_interval(spread_share, "psens.formats.hit_rates", "spread_share", 0.0, 1.0)
    seeds = check_positive_int(seeds, "psens.formats.hit_rates", "seeds")
    search = paired_search if search is None else search
    acc = x.mean(axis=0)
    budget = max(1, int(np.floor(fraction * x.size)))
    res = [search(x, budget, seed=seed) for seed in range(seeds)]
    best = np.array([acc[r.best] for r in res])
    worst = np.array([acc[r.worst] for r in res])
    calls = np.array([r.calls for r in res])
    true_spread = acc.max() - acc.min()
    ratios = (best - worst) / true_spread if true_spread > 0 else np.full(seeds, np.nan)
    return {
        "seeds": seeds,
        "best_hits": int((best == acc.max()).sum()),
        "worst_hits": int((worst == acc.min()).sum()),
        "best_regret": float((acc.max() - best).mean()),
        "worst_regret": float((worst - acc.min()).mean()),
        "mean_calls": float(calls.mean()),
        "max_calls": int(calls.max()),
        "all_calls": int(x.size),
        "budget": budget,
        "budget_fraction_used": float(calls.max() / x.size),
        "p_best": float(np.mean([r.p_best for r in res])),
        "p_worst": float(np.mean([r.p_worst for r in res])),
        "n_best_ties": int((acc == acc.max()).sum()),
        "n_worst_ties": int((acc == acc.min()).sum()),
        "true_spread": float(true_spread),
        "spread_ratios": [float(r) for r in ratios],
        "spread_share": float(spread_share),
        "spread_hits": int((ratios >= spread_share - 1e-12).sum()),
    }


def budget_needed(
    correct: np.ndarray,
    *,
    hits: int = 9,
    seeds: int = 10,
    fractions: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99),
    search: Callable[..., SearchResult] | None = None,
) -> dict[str, Any]:
    r"""The smallest budget, as a fraction of all ``N · k`` calls, at which a search finds
    both the best and the worst format of a stored oracle in at least ``hits`` of ``seeds``
    seeds (:func:`hit_rates` at each of ``fractions`` in turn, from the smallest).

    Returns ``{"fraction": f or None, "tried": [(f, best_hits, worst_hits), ...]}`` —
    ``None`` when no fraction tried is enough.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> oracle = (rng.random((80, 4)) < [0.1, 0.5, 0.5, 0.9]).astype(float)
    >>> budget_needed(oracle, hits=3, seeds=3)["fraction"]
    0.1
    """
    where = "psens.formats.budget_needed"
    seeds = check_positive_int(seeds, where, "seeds")
    hits = check_positive_int(hits, where, "hits")
    if hits > seeds:
        fail(where, f"hits = {hits} > seeds = {seeds}", "Ask for at most one hit per seed")
    tried = []
    for fraction in sorted(fractions):
        h = hit_rates(correct, fraction=fraction, seeds=seeds, search=search)
        tried.append((float(fraction), h["best_hits"], h["worst_hits"]))
        if min(h["best_hits"], h["worst_hits"]) >= hits:
            return {"fraction": float(fraction), "tried": tried}
    return {"fraction": None, "tried": tried}
