"""ProSA analyses of a stored PSS run, against literal references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from psens.pss.runs import (
    confidence_relation,
    instance_table,
    is_pss_run,
    pss_by_shot,
    rank_correlation,
)
from psens.store import build
from tests.support import pss_run as fake_run


def literal_s_i(row):
    y = [v for v in row if not math.isnan(v)]
    pairs = list(itertools.combinations(y, 2))
    return sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else math.nan


@pytest.fixture
def random_run():
    rng = np.random.default_rng(3)
    shape = (2, 14, 3, 12)
    p = rng.uniform(0.1, 0.9, size=(2, 14, 3, 1))
    return fake_run((rng.random(shape) < p).astype(float), rng.uniform(0.2, 1.0, size=shape))


def test_instance_table_is_eq1_and_eq3_per_instance(random_run):
    table = instance_table(random_run).set_index(["model", "shot", "sample"])
    y, c = random_run["correct"].values, random_run["confidence"].values
    for m, model in enumerate(["m1", "m2"]):
        for h, shot in enumerate([0, 1, 3]):
            for s in range(14):
                row = table.loc[(model, shot, f"s{s}")]
                assert row["S_i"] == pytest.approx(literal_s_i(list(y[m, s, h])), abs=1e-12)
                assert row["confidence"] == pytest.approx(float(np.mean(c[m, s, h])))
                assert row["accuracy"] == pytest.approx(float(np.mean(y[m, s, h])))


def test_rank_correlation_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=30).astype(float)  # ties
    y = rng.normal(size=30)
    assert rank_correlation(x, y) == pytest.approx(sps.spearmanr(x, y).statistic)
    assert rank_correlation(x, y, method="pearson") == pytest.approx(sps.pearsonr(x, y).statistic)
    assert np.isnan(rank_correlation(np.ones(5), np.arange(5.0)))
    with pytest.raises(ValueError, match="spearman"):
        rank_correlation(x, y, method="kendall")


def test_confidence_relation_and_its_bootstrap_ci_match_a_literal_loop(random_run):
    got = confidence_relation(random_run, n_boot=300, n_perm=200, seed=5)
    table = instance_table(random_run)
    rng = np.random.default_rng(5)
    # the permutations come from a generator spawned from the seed: the CIs do not depend on them
    perm = np.random.default_rng(np.random.SeedSequence(5).spawn(1)[0])
    for (model, shot), g in table.groupby(["model", "shot"], sort=False):
        x, y = g["S_i"].to_numpy(), g["confidence"].to_numpy()
        idx = rng.integers(0, len(x), size=(300, len(x)))
        boot = []
        for b in range(300):
            xb, yb = x[idx[b]], y[idx[b]]
            const = np.ptp(xb) == 0 or np.ptp(yb) == 0
            boot.append(np.nan if const else sps.spearmanr(xb, yb).statistic)
        order = perm.permuted(np.tile(np.arange(len(x)), (200, 1)), axis=1)
        r0 = abs(sps.spearmanr(x, y).statistic)
        hits = sum(abs(sps.spearmanr(x, y[k]).statistic) >= r0 - 1e-12 for k in order)
        row = got[(got.model == model) & (got.shot == shot)].iloc[0]
        assert row["r"] == pytest.approx(sps.spearmanr(x, y).statistic)
        assert row["lo"] == pytest.approx(np.nanquantile(boot, 0.025))
        assert row["hi"] == pytest.approx(np.nanquantile(boot, 0.975))
        assert row["p_value"] == pytest.approx((1 + hits) / 201)
        found = (row["lo"] > 0 or row["hi"] < 0) and row["p_value"] < 0.05
        assert row["within_noise"] == (not found)
    same = confidence_relation(random_run, n_boot=300, n_perm=50, seed=5)
    assert np.array_equal(same[["lo", "hi"]], got[["lo", "hi"]])


def test_a_strong_relation_is_found_and_none_is_not_claimed():
    n = 20
    rng = np.random.default_rng(1)
    # instance i is right on a share q_i of the templates; confidence falls with S_i
    q = np.linspace(0, 1, n)
    correct = (rng.random((1, n, 1, 12)) < q[None, :, None, None]).astype(float)
    s_i = np.array([literal_s_i(list(r)) for r in correct[0, :, 0]])
    conf = np.broadcast_to((1 - s_i)[None, :, None, None], correct.shape).copy()
    got = confidence_relation(fake_run(correct, conf, models=("m",), shots=(0,)), n_boot=500)
    assert got["r"].iloc[0] == pytest.approx(-1.0) and not got["within_noise"].iloc[0]
    assert got["holds"].iloc[0] is True and got["verdict"].iloc[0].startswith("negative")
    flat = fake_run(correct, rng.random(correct.shape), models=("m",), shots=(0,))
    row = confidence_relation(flat, n_boot=500).iloc[0]
    assert row["within_noise"] == (row["lo"] <= 0 <= row["hi"] or row["p_value"] >= 0.05)
    assert row["holds"] is False


def test_pss_by_shot_against_literal_means_and_noise_flag():
    rng = np.random.default_rng(2)
    n = 16
    zero = (rng.random((1, n, 1, 12)) < 0.5).astype(float)  # very sensitive at 0 shots
    three = np.ones((1, n, 1, 12))  # always right at 3 shots: S_i = 0
    same = zero.copy()
    correct = np.concatenate([zero, same, three], axis=2)
    ds = fake_run(correct, np.full(correct.shape, 0.5), models=("m",))
    got = pss_by_shot(ds, n_boot=500, n_perm=500).set_index("shot")
    s0 = np.mean([literal_s_i(list(r)) for r in zero[0, :, 0]])
    assert got.loc[0, "pss"] == pytest.approx(s0)
    assert np.isnan(got.loc[0, "diff"]) and not got.loc[0, "within_noise"]
    assert got.loc[1, "diff"] == pytest.approx(0.0) and got.loc[1, "within_noise"]
    assert got.loc[3, "pss"] == 0.0 and got.loc[3, "diff"] == pytest.approx(-s0)
    assert not got.loc[3, "within_noise"] and got.loc[3, "diff_hi"] < 0
    assert got.loc[0, "lo"] <= s0 <= got.loc[0, "hi"]


def test_failed_blocks_are_left_out_and_other_runs_refused(random_run):
    ds = random_run.copy(deep=True)
    ds["status"].values[0, 0] = 2  # failed block: its values do not count
    table = instance_table(ds)
    assert table[(table.model == "m1") & (table["sample"] == "s0")]["S_i"].isna().all()
    assert confidence_relation(ds, n_boot=50).query("model == 'm1'")["n"].eq(13).all()
    ips_like = build(
        models=["m"],
        samples=["a"],
        templates=["t1", "t2"],
        words=[["w"]],
        prompts=np.full((1, 2), "p", dtype=object),
        targets=[" A"],
        n_max=1,
    )
    assert not is_pss_run(ips_like)
    with pytest.raises(ValueError, match="no answers under two or more templates") as e:
        instance_table(ips_like.isel(template=[0]))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("a", [0.0, 0.25, 0.2, 0.5, 0.9])
def test_chance_pss_is_the_expected_s_i_of_independent_answers(a):
    from psens.pss.runs import chance_pss

    for m in (2, 4, 5):  # enumerate every outcome of m independent prompts
        expected = 0.0
        for outcome in itertools.product([0.0, 1.0], repeat=m):
            k = sum(outcome)
            expected += a**k * (1 - a) ** (m - k) * literal_s_i(list(outcome))
        assert chance_pss(a) == pytest.approx(expected)


def test_synthetic_pss_run_is_labelled_and_analysable():
    from psens.synthetic import synthetic_pss_run

    ds = synthetic_pss_run(n_samples=10)
    assert ds.attrs["synthetic"] and is_pss_run(ds)
    got = pss_by_shot(ds, n_boot=200, n_perm=200)
    assert (got.groupby("model")["pss"].first() > got.groupby("model")["pss"].last()).all()


def test_a_model_answering_one_option_or_at_chance_cannot_test_the_claim():
    """The exclusion rule of the IPS headline (answer_caveats): one answer on more than 80 %
    of the prompts, or accuracy at or below chance, gives "cannot test" and no holds; the
    numbers are kept."""
    from psens.ips.headline import answer_caveats

    rng = np.random.default_rng(4)
    shape = (2, 12, 1, 6)
    correct = (rng.random(shape) < 0.7).astype(float)
    ds = fake_run(correct, rng.uniform(0.2, 1.0, size=shape), shots=(0,))
    ds["prediction"].values[:] = "B"
    ds["prediction"].values[1] = np.where(rng.random(shape[1:]) < 0.5, "A", "B")
    got = confidence_relation(ds, n_boot=100, n_perm=100).set_index("model")
    assert answer_caveats(ds) == {"m1": "majority answer B on 100 %", "m2": ""}
    assert got.loc["m1", "verdict"] == "cannot test: majority answer B on 100 %"
    assert got.loc["m1", "holds"] is None and np.isfinite(got.loc["m1", "r"])
    assert not got.loc["m2", "verdict"].startswith("cannot test")
    assert got.loc["m2", "caveats"] == ""


def test_pss_of_an_ips_cloze_run_is_over_its_templates_with_the_answer_options_probability():
    """An IPS run answers every template's unmasked prompt: S_i is eq. 1 over its templates
    and, in cloze, the confidence is the chosen option's probability (psens.cloze.rescore)."""
    import psens
    from psens.cloze import rescore
    from tests.support import ROOT

    ds = psens.open_run(ROOT / "data" / "runs" / "cloze-arc-easy.nc").load()
    assert not is_pss_run(ds)
    table = instance_table(ds).set_index(["model", "sample"])
    y = ds["correct"].isel(shot=0).transpose("model", "sample", "template").values
    conf = rescore(ds)["confidence"].isel(shot=0).transpose("model", "sample", "template")
    for m, model in enumerate(ds["model"].values):
        for s in (0, 7, 39):
            row = table.loc[(str(model), str(ds["sample"].values[s]))]
            assert row["S_i"] == pytest.approx(literal_s_i(list(y[m, s])), abs=1e-12)
            assert row["confidence"] == pytest.approx(float(conf.values[m, s].mean()))
    rel = confidence_relation(ds, n_boot=200, n_perm=200)
    assert list(rel["model"]) == [str(m) for m in ds["model"].values]
    assert (rel["caveats"] == "").all()  # both above chance, no majority answer
    assert "4 templates" in rel.attrs["pools"]
