r"""Budgeted search for the best and the worst format by Thompson sampling.

Each format ``f`` has a Beta posterior on its accuracy from the items evaluated so far,
``Beta(a + s_f, b + n_f − s_f)`` (``s_f`` correct of ``n_f`` evaluated; prior ``Beta(a, b)``,
uniform by default). One step, alternating the two targets:

* *best*: draw ``θ_f`` from every posterior, evaluate ``argmax_f θ_f`` on one item it has not
  seen (drawn at random);
* *worst*: the same with ``argmin``.

The search stops when the call budget is spent (or every format has seen every item, or —
with ``confidence`` — once both answers are that sure). It answers the format with the
highest (lowest) posterior mean and how sure it is: the posterior probability that it is
the best (worst), ``P(θ_f = max_g θ_g)``, estimated from joint posterior draws.

The oracle is any ``correct[item, format]`` table (0/1): in psens the per-item correctness
a run stored, so the search replays what evaluating a format on an item would have given.
FormatSpread runs the same kind of search with live model calls; this is psens's own code.

References
----------
.. [1] Sclar, M., Choi, Y., Tsvetkov, Y., and Suhr, A. "Quantifying Language Models'
   Sensitivity to Spurious Features in Prompt Design or: How I learned to start worrying
   about prompt formatting." ICLR 2024. arXiv:2310.11324.
.. [2] Thompson, W. R. "On the likelihood that one unknown probability exceeds another in
   view of the evidence of two samples." Biometrika 25(3/4), 285–294, 1933.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from psens._validation import check_in_interval, check_positive_int, fail

__all__ = ["SearchResult", "posterior_extreme_probability", "thompson_search"]


@dataclass(frozen=True)
class SearchResult:
    """What a :func:`thompson_search` found.

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
    x = np.asarray(correct, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] < 1:
        fail(where, f"correct has shape {x.shape}", "Pass a (n_items, n_formats >= 2) table")
    if not np.isin(x, (0.0, 1.0)).all():
        fail(where, "correct holds values other than 0 and 1 (or NaN)", "Pass 0/1 correctness")
    budget = check_positive_int(budget, where, "budget")
    if confidence is not None:
        check_in_interval(confidence, where, "confidence", 0.0, 1.0)
    if names is not None and len(names) != x.shape[1]:
        fail(where, f"{len(names)} names for {x.shape[1]} formats", "Pass one name per format")
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
    label = (lambda i: names[i]) if names is not None else (lambda i: i)
    return SearchResult(
        label(best), label(worst), float(p_max[best]), float(p_min[worst]), calls, budget, s, n
    )
