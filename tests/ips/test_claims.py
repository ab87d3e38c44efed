"""The papers' claims as measured quantities (psens.ips.claims) against slow literal
references: per-item differences by plain loops over items and template pairs (eq. 3 by
tests.support.ips_ref), the CIs from explicit resamples drawn with the same seed."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata

from psens.ips import accuracy_relation, few_shot_claim, order_claim, same_answer_claim
from psens.ips.claims import CANNOT_TEST
from psens.ips.floor import noise_floor
from psens.ips.headline import headline
from psens.ips.verdicts import findings
from psens.stats import is_finding
from psens.store import PENDING
from psens.synthetic import synthetic_pss_run, synthetic_run
from tests.support import ips_ref

MODELS = {
    "wobbly": ("toy", "toy", "base", "dense", 7.0, 7.0, 0.8),
    "steady": ("toy", "toy", "instruct", "dense", 7.0, 7.0, 0.3),
}
TEMPLATES = ("ips1", "ips2", "ips3", "ips4")
N_BOOT, N_PERM, SEED = 300, 400, 3


@pytest.fixture(scope="module")
def run():
    """Six items of 4-6 variables, one pending block (its numbers scrambled: must not count)."""
    ds = synthetic_run(MODELS, n_samples=6, templates=TEMPLATES, seed=2)
    ds["status"].values[0, 1] = PENDING
    ds["I_and"].values[0, 1] = 99.0
    return ds


def _all_findings(ds) -> dict[str, str]:
    return {str(m): "" for m in ds["model"].values}


def _games(ds, m: int, s: int):
    """Item ``s`` of model ``m``: ``I_and, I_or [template, 2**n]`` (None when not done)."""
    if int(ds["status"].values[m, s]) != 1:
        return None
    a = np.asarray(ds["I_and"].values[m, s], float)
    o = np.asarray(ds["I_or"].values[m, s], float)
    size = int(np.isfinite(a[0]).sum())  # 2**n of the item's n variables (NaN padding after)
    return a[:, :size], o[:, :size]


def _quantiles(draws, ci=0.95):
    draws = np.asarray([d for d in draws if np.isfinite(d)])
    if not draws.size:
        return np.nan, np.nan
    return np.quantile(draws, (1 - ci) / 2), np.quantile(draws, 1 - (1 - ci) / 2)


def _resampled(n: int, n_boot: int, rng):
    """The item indices of each resample, drawn as psens.stats.resample_counts draws them."""
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)
    return [np.repeat(np.arange(n), c) for c in counts]


def test_order_claim_is_the_per_item_band_difference_with_its_ci_and_p(run):
    tau = 0.1
    got = order_claim(run, n_boot=N_BOOT, n_perm=N_PERM, seed=SEED, reasons=_all_findings(run))
    assert list(got["contrast"]) == ["high − low", "mid − low"] * 2
    for m, model in enumerate(MODELS):
        for band in ("high", "mid"):
            d = []
            for s in range(run.sizes["sample"]):
                games = _games(run, m, s)
                if games is None:
                    continue
                hi_, lo_ = ips_ref(*games, tau, band), ips_ref(*games, tau, "low")
                if np.isfinite(hi_) and np.isfinite(lo_):
                    d.append(hi_ - lo_)
            d = np.asarray(d)
            rng = np.random.default_rng(SEED)
            boots = [d[idx].mean() for idx in _resampled(d.size, N_BOOT, rng)]
            signs = np.where(rng.random((N_PERM, d.size)) < 0.5, -1.0, 1.0)
            perm = [abs((sign * d).mean()) for sign in signs]
            p = (1 + sum(x >= abs(d.mean()) - 1e-12 for x in perm)) / (1 + N_PERM)
            lo, hi = _quantiles(boots)
            row = got[(got["model"] == model) & (got["band"] == band)].iloc[0]
            assert row["n"] == d.size
            assert row["diff"] == pytest.approx(d.mean(), abs=1e-10)
            assert (row["lo"], row["hi"]) == pytest.approx((lo, hi), abs=1e-10)
            assert row["p_value"] == pytest.approx(p)
            assert row["claim"] == f"the paper: {band} > low (fig. 9)"
            holds = bool(is_finding(lo, hi, p) and lo > 0)
            assert row["holds"] is holds
            assert row["verdict"].endswith("not a finding") is not is_finding(lo, hi, p)
            assert f"n = {d.size} items" in row["measured"]


def test_each_claim_says_what_it_pools(run):
    why = _all_findings(run)
    for fn in (order_claim, same_answer_claim, accuracy_relation):
        pools = fn(
            run, n_boot=20, **({} if fn is same_answer_claim else {"n_perm": 20}), reasons=why
        ).attrs["pools"]
        assert pools.startswith("4 templates (6 pairs), 6 items; ") and pools.endswith(
            "; one model at a time"
        ), (fn.__name__, pools)


def test_same_answer_claim_pools_pairs_and_resamples_items(run):
    tau = 0.1
    got = same_answer_claim(run, n_boot=N_BOOT, seed=SEED, reasons=_all_findings(run))
    floor = noise_floor(run, tau=tau, orders=["all"]).sel(order="all")
    floor = floor.transpose("model", "sample", "template").values
    pred = run["prediction"].transpose("model", "sample", "template").values
    for m, model in enumerate(MODELS):
        per_item = []  # per item: ([same-answer excesses], [different-answer excesses])
        for s in range(run.sizes["sample"]):
            games = _games(run, m, s)
            if games is None:
                continue
            same, diff = [], []
            for i, j in itertools.combinations(range(len(TEMPLATES)), 2):
                v = ips_ref(games[0][[i, j]], games[1][[i, j]], tau)
                if not np.isfinite(v):
                    continue
                e = v - (floor[m, s, i] + floor[m, s, j]) / 2
                (same if pred[m, s, i] == pred[m, s, j] else diff).append(e)
            if same or diff:
                per_item.append((same, diff))

        def pooled(items, g):
            values = [e for item in items for e in item[g]]
            return np.mean(values) if values else np.nan

        est = [pooled(per_item, 0), pooled(per_item, 1)]
        est.append(est[0] - est[1])
        rng = np.random.default_rng(SEED)
        boots = []
        for idx in _resampled(len(per_item), N_BOOT, rng):
            items = [per_item[k] for k in idx]
            a, b = pooled(items, 0), pooled(items, 1)
            boots.append((a, b, a - b))
        rows = got[got["model"] == model].reset_index(drop=True)
        assert list(rows["group"]) == ["same answer", "different answers", "same − different"]
        present = [sum(bool(x[g]) for x in per_item) for g in (0, 1)]
        for g in range(3):
            lo, hi = _quantiles([b[g] for b in boots])
            if min(present if g == 2 else [present[g]]) < 2:  # no CI from one item
                lo = hi = np.nan
            assert rows.loc[g, "excess"] == pytest.approx(est[g], abs=1e-10)
            got_ci = (rows.loc[g, "lo"], rows.loc[g, "hi"])
            assert got_ci == pytest.approx((lo, hi), abs=1e-10, nan_ok=True)
        assert list(rows["n_items"]) == [*present, len(per_item)]
        assert rows.loc[0, "n_pairs"] == sum(len(x[0]) for x in per_item)
        lo = rows.loc[0, "lo"]
        assert rows.loc[0, "holds"] is bool(is_finding(lo, rows.loc[0, "hi"]) and lo > 0)
        assert rows.loc[1, "holds"] is None


def test_accuracy_relation_is_the_rank_correlation_over_items(run):
    tau = 0.1
    got = accuracy_relation(run, n_boot=N_BOOT, seed=SEED, reasons=_all_findings(run))
    correct = run["correct"].transpose("model", "sample", "template").values
    for m, model in enumerate(MODELS):
        x, y = [], []
        for s in range(run.sizes["sample"]):
            games = _games(run, m, s)
            if games is None:
                continue
            x.append(ips_ref(*games, tau))
            y.append(sum(correct[m, s]) / len(TEMPLATES))
        x, y = np.asarray(x), np.asarray(y)

        def spearman(a, b):
            ra, rb = rankdata(a), rankdata(b)
            if ra.std() == 0 or rb.std() == 0:
                return np.nan
            return np.corrcoef(ra, rb)[0, 1]

        idx = np.random.default_rng(SEED).integers(0, x.size, size=(N_BOOT, x.size))
        lo, hi = _quantiles([spearman(x[k], y[k]) for k in idx])
        row = got[got["model"] == model].iloc[0]
        assert row["n"] == x.size
        assert row["r"] == pytest.approx(spearman(x, y), abs=1e-10)
        assert (row["lo"], row["hi"]) == pytest.approx((lo, hi), abs=1e-10)
        assert row["accuracy"] == pytest.approx(y.mean())
        assert row["claim"].startswith("ProSA (Zhuo et al., 2024)")
        # the permutation p, drawn after the bootstrap from the same generator
        rng = np.random.default_rng(SEED)
        rng.integers(0, x.size, size=(N_BOOT, x.size))
        order = rng.permuted(np.tile(np.arange(x.size), (2000, 1)), axis=1)
        r0 = abs(spearman(x, y))
        hits = sum(abs(spearman(x, y[k])) >= r0 - 1e-12 for k in order)
        assert row["p_value"] == pytest.approx((1 + hits) / 2001)
        assert row["verdict"].endswith("not a finding") != is_finding(row.lo, row.hi, row.p_value)
    assert got.attrs["pools"] == (
        "4 templates (6 pairs), 6 items; per item its IPS (mean over the template pairs) and "
        "its accuracy (mean over the templates), correlated over the items; one model at a time"
    )


def test_accuracy_relation_across_templates_resamples_items_and_permutes_templates(run):
    """Per template: IPS the mean over its pairs (eq. 3, literal) and items, accuracy the
    mean over items; Spearman over the templates; the CI from the items resampled with the
    multinomial counts of psens.stats.resample_counts; p from permuted template labels."""
    from psens.stats import resample_counts

    tau, n_perm = 0.1, 500
    got = accuracy_relation(
        run, across="templates", n_boot=N_BOOT, n_perm=n_perm, seed=SEED, reasons=_all_findings(run)
    )
    correct = run["correct"].transpose("model", "sample", "template").values
    n_t = len(TEMPLATES)

    def spearman(a, b):
        ra, rb = rankdata(a), rankdata(b)
        return np.nan if ra.std() == 0 or rb.std() == 0 else np.corrcoef(ra, rb)[0, 1]

    for m, model in enumerate(MODELS):
        ips_t, acc_t = [], []  # per item, per template
        for s in range(run.sizes["sample"]):
            games = _games(run, m, s)
            if games is None:
                continue
            row = []
            for t in range(n_t):
                pairs = [
                    ips_ref(games[0][[i, j]], games[1][[i, j]], tau)
                    for i, j in itertools.combinations(range(n_t), 2)
                    if t in (i, j)
                ]
                pairs = [v for v in pairs if np.isfinite(v)]
                row.append(np.mean(pairs) if pairs else np.nan)
            ips_t.append(row)
            acc_t.append(correct[m, s])
        ips_t, acc_t = np.asarray(ips_t), np.asarray(acc_t, float)
        x, y = np.nanmean(ips_t, axis=0), acc_t.mean(axis=0)
        rng = np.random.default_rng(SEED)
        counts = resample_counts(len(ips_t), N_BOOT, rng)
        boots = []
        for w in counts:
            bi = [
                np.sum(w * np.nan_to_num(ips_t[:, t])) / np.sum(w * np.isfinite(ips_t[:, t]))
                for t in range(n_t)
            ]
            boots.append(spearman(np.asarray(bi), (w @ acc_t) / w.sum()))
        order = rng.permuted(np.tile(np.arange(n_t), (n_perm, 1)), axis=1)
        r0 = abs(spearman(x, y))
        hits = sum(abs(spearman(x, y[k])) >= r0 - 1e-12 for k in order)
        row = got[got["model"] == model].iloc[0]
        assert (row["across"], row["n"], row["n_items"]) == ("templates", n_t, len(ips_t))
        assert row["r"] == pytest.approx(spearman(x, y), abs=1e-10, nan_ok=True)
        assert (row["lo"], row["hi"]) == pytest.approx(_quantiles(boots), abs=1e-10, nan_ok=True)
        assert row["p_value"] == pytest.approx((1 + hits) / (1 + n_perm), nan_ok=True)
        assert row["p_value"] > 2 / 24  # four templates: never below 2/4!, never a finding
        assert row["holds"] is False
    assert "correlated over the templates" in got.attrs["pools"]
    with pytest.raises(ValueError, match=r"accuracy_relation: across = 'rows'\. Use") as e:
        accuracy_relation(run, across="rows")
    assert "\n" not in str(e.value)


def test_a_model_that_is_not_a_finding_cannot_test_any_claim():
    """A model whose templates do not move its interactions is not above its noise floor:
    its numbers are kept, its verdicts say "cannot test" with the headline's reason."""
    models = {**MODELS, "frozen": ("toy", "toy", "base", "dense", 7.0, 7.0, 0.0)}
    ds = synthetic_run(models, n_samples=6, templates=TEMPLATES, seed=2)
    why = findings(headline(ds))
    assert why["frozen"] and not why["wobbly"]
    got = pd.concat(
        [
            order_claim(ds, n_boot=50, n_perm=50),  # reasons from the headline itself
            same_answer_claim(ds, n_boot=50, reasons=why),
            accuracy_relation(ds, n_boot=50, reasons=why),
        ],
        ignore_index=True,
    )
    frozen = got[got["model"] == "frozen"]
    assert (frozen["verdict"] == f"{CANNOT_TEST}: {why['frozen']}").all()
    assert frozen["holds"].isna().all()
    assert np.isfinite(frozen["n"].dropna().astype(float)).all()
    assert not got[got["model"] == "wobbly"]["verdict"].str.startswith(CANNOT_TEST).any()


def test_one_shot_setting_at_a_time():
    ds = synthetic_run(MODELS, n_samples=4, templates=TEMPLATES, shots=(0, 2), seed=1)
    why = _all_findings(ds)
    got = order_claim(ds, shot=2, n_boot=50, n_perm=50, reasons=why)
    ref = order_claim(ds.sel(shot=[2]), n_boot=50, n_perm=50, reasons=why)
    assert (got["shot"] == 2).all()
    assert np.allclose(got["diff"], ref["diff"], equal_nan=True)
    assert (order_claim(ds, n_boot=50, n_perm=50, reasons=why)["shot"] == 0).all()


@pytest.mark.parametrize("fn", [order_claim, same_answer_claim, accuracy_relation])
def test_bad_input_fails_with_one_line(fn):
    ds = synthetic_run(MODELS, n_samples=3, templates=TEMPLATES[:3], shots=(0, 1))
    with pytest.raises(ValueError, match=r"shot = 5 is not in the run\. Use one of \[0, 1\]") as e:
        fn(ds, shot=5)
    assert str(e.value).startswith(f"{fn.__name__}: ") and "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"no interactions .* so no order bands") as e:
        fn(synthetic_pss_run(n_samples=3, n_templates=3))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="shot = 1 is not in the run"):
        fn(synthetic_run(MODELS, n_samples=3, templates=TEMPLATES[:3]), shot=1)


def test_few_shot_claim_is_each_models_change_alone():
    """Per model and k: F.few_shot with that one model (never an average over models), a
    verdict by is_finding with a CI below 0 supporting the claim, "cannot test" otherwise."""
    import psens.ips.factors as F

    ds = synthetic_run(MODELS, n_samples=5, templates=TEMPLATES, shots=(0, 1, 3), seed=1)
    got = few_shot_claim(ds, n_boot=N_BOOT, n_perm=N_PERM, seed=SEED, reasons=_all_findings(ds))
    assert list(zip(got["model"], got["shot"], strict=True)) == [
        (m, k) for m in MODELS for k in (1, 3)
    ]
    assert got.attrs["templates"] == ["ips1", "ips4"]
    assert "never averaged together" in got.attrs["pools"]
    for model in MODELS:
        alone = F.few_shot(ds, [model], n_boot=N_BOOT, n_perm=N_PERM, seed=SEED).summary
        alone = alone[alone["order"] == "all"].set_index("group")
        rows = got[got["model"] == model].set_index("shot")
        for k in (1, 3):
            s, r = alone.loc[f"{k}-shot"], rows.loc[k]
            assert (r.rel_change, r.lo, r.hi, r.p_value) == (
                s.rel_change,
                s.rel_lo,
                s.rel_hi,
                s.p_value,
            )
            lowers = bool(is_finding(r.lo, r.hi, r.p_value)) and r.hi < 0
            assert r.holds is lowers
            assert r.verdict.endswith("not a finding") != is_finding(r.lo, r.hi, r.p_value)
            if lowers:
                assert r.verdict.startswith("the claim holds here")
    why = {"wobbly": "not above the noise floor", "steady": ""}
    blocked = few_shot_claim(ds, n_boot=50, n_perm=50, reasons=why)
    w = blocked[blocked["model"] == "wobbly"]
    assert w["holds"].isna().all()
    assert (w["verdict"] == f"{CANNOT_TEST}: not above the noise floor").all()
    with pytest.raises(ValueError, match="few_shot_claim: the run has no shot dim"):
        few_shot_claim(synthetic_run(MODELS, n_samples=3, templates=TEMPLATES))


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"method": "kendall"}, "method"),
        ({"n_boot": 0}, "n_boot"),
        ({"n_perm": -1}, "n_perm"),
        ({"ci": 1.5}, "ci"),
    ],
)
def test_both_correlation_claims_refuse_bad_arguments_in_one_check(kwargs, named):
    """accuracy_relation and confidence_relation refuse the same arguments with the same
    one-line message, from psens.stats.check_correlation_args."""
    from psens.stats import check_correlation_args

    args = {"method": "spearman", "n_boot": 10, "n_perm": 10, "ci": 0.95, **kwargs}
    check_correlation_args("here", "pearson", 1, 1, 0.5)  # good arguments pass
    with pytest.raises(Exception, match=named):
        check_correlation_args("here", **args)
