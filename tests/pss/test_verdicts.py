"""One PSS verdict: psens.pss.verdicts against literal cases, and pss_by_shot's within_noise
never disagreeing with it."""

from __future__ import annotations

import numpy as np
import pytest

from psens.pss import NOT_A_FINDING, change_verdict, confidence_relation, is_finding, pss_by_shot
from tests.support import pss_run as fake_run


@pytest.mark.parametrize(
    ("lo", "hi", "p", "finding", "text"),
    [
        (0.1, 0.3, None, True, "up, CI above 0"),
        (-0.3, -0.1, 0.01, True, "down, CI below 0"),
        (-0.2, 0.1, 0.01, False, "within noise (the CI contains 0): not a finding"),
        (0.0, 0.2, 0.01, False, "within noise (the CI contains 0): not a finding"),  # touches 0
        (np.nan, 0.2, None, False, "undefined (too few items with variation): not a finding"),
        (0.1, 0.3, np.nan, True, "up, CI above 0"),  # no p-value: the CI decides
        (
            -0.3,
            -0.1,
            0.05,
            False,
            "down, CI below 0 — but the paired test does not reject (p = 0.050 >= 0.05): "
            "not a finding",
        ),
    ],
)
def test_verdict_literal_cases(lo, hi, p, finding, text):
    assert is_finding(lo, hi, p) is finding
    got = change_verdict(lo, hi, p, words=("up", "down"))
    assert got == text
    assert got.endswith(NOT_A_FINDING) is (not finding)


def _halves_then_all_right(n: int):
    """n items, 12 templates: at 0 shots 6 right and 6 wrong (S_i = 6·6 / C(12, 2) = 6/11),
    at 1 shot all right (S_i = 0): every item's change is exactly −6/11."""
    zero = np.tile(np.repeat([1.0, 0.0], 6), (1, n, 1, 1))
    one = np.ones((1, n, 1, 12))
    correct = np.concatenate([zero, one], axis=2)
    return fake_run(correct, np.full(correct.shape, 0.5), models=("m",), shots=(0, 1))


def test_a_ci_that_excludes_zero_with_a_test_that_does_not_reject_is_within_noise():
    """Closed form: every item changes by −6/11, so every bootstrap resample does and the CI is
    [−6/11, −6/11] (excludes 0); with 4 items the sign-flip statistic reaches |−6/11| only when
    all four flips agree, P = 2/16 = 0.125: the test does not reject, so the verdict says "not a
    finding" and within_noise reads True (it read False when only the CI decided). With 8 items
    P = 2/256 and the same change is a finding."""
    row = pss_by_shot(_halves_then_all_right(4), n_boot=300, n_perm=4000).set_index("shot").loc[1]
    assert row["diff"] == pytest.approx(-6 / 11)
    assert row["diff_lo"] == pytest.approx(-6 / 11) and row["diff_hi"] == pytest.approx(-6 / 11)
    assert 0.10 < row["p_value"] < 0.15  # 1/8, up to the Monte Carlo error of 4000 flips
    assert row["within_noise"]
    assert row["verdict"].startswith("fell, CI below 0 — but the paired test does not reject")
    assert row["verdict"].endswith(NOT_A_FINDING)

    row = pss_by_shot(_halves_then_all_right(8), n_boot=300, n_perm=4000).set_index("shot").loc[1]
    assert row["p_value"] < 0.02  # 1/128
    assert not row["within_noise"] and row["verdict"] == "fell, CI below 0"


def test_within_noise_and_the_verdict_never_disagree():
    rng = np.random.default_rng(5)
    shape = (3, 9, 3, 12)
    p = rng.uniform(0.05, 0.95, size=(3, 9, 3, 1))
    ds = fake_run(
        (rng.random(shape) < p).astype(float),
        rng.uniform(0.2, 1.0, size=shape),
        models=("a", "b", "c"),
    )
    table = pss_by_shot(ds, n_boot=300, n_perm=300)
    base = table["shot"] == 0
    assert (table.loc[base, "verdict"] == "baseline").all()
    assert not table.loc[base, "within_noise"].any()
    for _, r in table[~base].iterrows():
        assert r["within_noise"] == r["verdict"].endswith(NOT_A_FINDING), r.to_dict()
        assert r["within_noise"] == (not is_finding(r["diff_lo"], r["diff_hi"], r["p_value"]))
    relation = confidence_relation(ds, n_boot=300)
    for _, r in relation.iterrows():
        assert r["within_noise"] == r["verdict"].endswith(NOT_A_FINDING), r.to_dict()
        assert r["within_noise"] == (not is_finding(r["lo"], r["hi"], r["p_value"]))
