"""Thompson-sampling search for the best and worst format: posteriors, budget, success."""

from __future__ import annotations

import math

import numpy as np
import pytest

from psens.formats.search import posterior_extreme_probability, thompson_search


def _term(a1, b1, a2, b2, i):
    """Term i of P(X > Y) = Σ_{i<a1} B(a2+i, b1+b2) / ((b1+i) B(1+i, b1) B(a2, b2)) for
    X ~ Beta(a1, b1), Y ~ Beta(a2, b2), integer a1 (the closed form of the Beta race)."""

    def lbeta(x, y):
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    return math.exp(lbeta(a2 + i, b1 + b2) - math.log(b1 + i) - lbeta(1 + i, b1) - lbeta(a2, b2))


def test_posterior_probabilities_match_the_closed_form():
    s, n = np.array([6, 3]), np.array([9, 8])
    p_max, p_min = posterior_extreme_probability(s, n, draws=200_000, seed=1)
    # posteriors Beta(7, 4) and Beta(4, 6); P(first is the larger)
    want = 1.0 - sum(_term(4, 6, 7, 4, i) for i in range(4))
    assert p_max[0] == pytest.approx(want, abs=0.005)
    assert p_min[1] == pytest.approx(want, abs=0.005) and p_max.sum() == pytest.approx(1.0)


def test_a_full_budget_evaluates_everything_and_answers_the_true_extremes():
    rng = np.random.default_rng(3)
    oracle = (rng.random((12, 5)) < [0.2, 0.5, 0.9, 0.4, 0.6]).astype(float)
    acc = oracle.mean(axis=0)
    r = thompson_search(oracle, 10_000, seed=0)
    assert r.calls == oracle.size and (r.trials == 12).all()
    np.testing.assert_array_equal(r.successes, oracle.sum(axis=0))
    # with every item seen, the posterior means order formats as their accuracies do
    assert acc[r.best] == acc.max() and acc[r.worst] == acc.min()
    names = list("abcde")
    assert thompson_search(oracle, 10_000, seed=0, names=names).best == names[r.best]


def test_it_finds_the_extremes_of_a_separated_space_within_30_percent_of_the_calls():
    rng = np.random.default_rng(0)
    acc = np.array([0.1, 0.45, 0.5, 0.5, 0.55, 0.6, 0.5, 0.95])
    oracle = (rng.random((60, len(acc))) < acc).astype(float)
    true = oracle.mean(axis=0)
    budget = int(0.3 * oracle.size)
    hits = [
        (true[r.best] == true.max()) and (true[r.worst] == true.min())
        for r in (thompson_search(oracle, budget, seed=s) for s in range(10))
    ]
    assert sum(hits) >= 9
    r = thompson_search(oracle, budget, seed=0)
    assert r.calls == budget and r.p_best > 0.5 and r.p_worst > 0.5
    # most calls go to the extremes, not to the indistinct middle
    assert r.trials[[0, 7]].sum() > r.trials[2:7].mean() * 2


def test_confidence_stops_early():
    oracle = np.tile([0.0, 1.0, 0.0, 0.0], (50, 1))
    oracle[:, 2] = np.arange(50) % 2
    r = thompson_search(oracle, 200, seed=0, confidence=0.9)
    assert r.calls < 200 and r.best == 1 and min(r.p_best, r.p_worst) >= 0.5


@pytest.mark.parametrize(
    ("oracle", "budget", "match"),
    [
        (np.zeros((3, 1)), 5, "n_formats >= 2"),
        (np.full((3, 2), 0.5), 5, "other than 0 and 1"),
        (np.zeros((3, 2)), 0, "budget"),
    ],
)
def test_bad_input_is_refused(oracle, budget, match):
    with pytest.raises(ValueError, match=match):
        thompson_search(oracle, budget)
