"""psens.factors on synthetic runs whose IPS is known analytically.

``flip_run`` builds games (n = 6 variables) whose AND interactions are ±1 on 12 fixed
subsets (4 of each order band: low |S| ≤ 2, mid 3–4, high 5–6) and 0 elsewhere, OR all 0;
after min-max normalisation the salient set (τ = 0.1) is exactly those 12. Template ``t``
flips the sign of the first ``k[t, band]`` salient subsets of each band, so a template
pair's IPS in a band is ``2·|k_i − k_j| / 4`` and over all orders ``2·Σ|k_i − k_j| / 12``.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import psens.factors as F
from psens import ips as ips_mod
from psens.ips import tables
from psens.ips.factors import pairings
from psens.stats import paired_test, rank_agreement
from psens.store import DONE, build
from psens.synthetic import synthetic_run

N = 6
SALIENT = {
    "low": [1, 2, 4, 8],
    "mid": [7, 14, 15, 28],
    "high": [31, 62, 63, 47],
}
BANDS = ("low", "mid", "high")


def _game(k_by_band, sign_seed: int) -> np.ndarray:
    rng = np.random.default_rng(sign_seed)
    g = np.zeros(1 << N)
    for b, band in enumerate(BANDS):
        subsets = SALIENT[band]
        signs = rng.choice([-1.0, 1.0], len(subsets))
        signs[: k_by_band[b]] *= -1
        g[subsets] = signs
    return g


def flip_run(
    flips: dict[str, np.ndarray],
    *,
    templates=("t1", "t2"),
    n_samples: int = 10,
    shots=None,
    meta: dict[str, tuple] | None = None,
    perturbation=None,
):
    """A run where model ``m`` flips ``flips[m][..., template, band]`` salient signs."""
    models = list(flips)
    n_t = len(templates)
    shot_list = list(shots) if shots is not None else [0]
    prompts = np.full((n_samples, *((len(shot_list),) if shots else ()), n_t), "p", object)
    keys = ("family", "series", "kind", "arch", "params", "active_params")
    ds = build(
        models=models,
        samples=[f"s{i}" for i in range(n_samples)],
        templates=list(templates),
        words=[[f"w{v}" for v in range(N)]] * n_samples,
        prompts=prompts,
        targets=[" A"] * n_samples,
        n_max=N,
        shots=shots,
        model_meta=None
        if meta is None
        else {k: [meta[m][i] for m in models] for i, k in enumerate(keys)},
        perturbation=perturbation,
    )
    I_and = np.zeros((len(models), n_samples, len(shot_list), n_t, 1 << N))
    for m, name in enumerate(models):
        k = np.asarray(flips[name]).reshape(len(shot_list), n_t, 3)
        for s in range(n_samples):
            for h in range(len(shot_list)):
                for t in range(n_t):
                    I_and[m, s, h, t] = _game(k[h, t], sign_seed=s)
    if shots is None:
        I_and = I_and[:, :, 0]
    ds["I_and"].values[...] = I_and
    ds["I_or"].values[...] = 0.0
    ds["status"].values[...] = DONE  # every block is done (pending ones would be skipped)
    return ds


def two_templates(k: int | tuple[int, int, int]) -> np.ndarray:
    """Flips for (t1, t2): t1 none, t2 ``k`` per band."""
    kk = np.broadcast_to(np.asarray(k), (3,))
    return np.stack([np.zeros(3, int), kk])


# ----------------------------------------------------------------------------- core


def test_sample_ips_matches_psens_ips():
    ds = synthetic_run(n_samples=5, shots=[0, 1])
    taus = [0.2, 0.05, 0.1]
    x = F.sample_ips(ds, taus)
    for k, tau in enumerate(taus):
        for order in F.ORDER_LEVELS:
            ref = ips_mod.ips(ds, tau=tau, order=None if order == "all" else order)
            got = x.sel(order=order).isel(tau=k).transpose(*ref.dims)
            np.testing.assert_allclose(got.values, ref.values, rtol=1e-12, equal_nan=True)


def test_flip_run_has_known_ips():
    ds = flip_run({"m": two_templates((1, 2, 4))})
    x = F.sample_ips(ds).sel(model="m")
    np.testing.assert_allclose(x.sel(order="low"), 0.5)
    np.testing.assert_allclose(x.sel(order="mid"), 1.0)
    np.testing.assert_allclose(x.sel(order="high"), 2.0)
    np.testing.assert_allclose(x.sel(order="all"), 2 * 7 / 12)
    ref = ips_mod.ips(ds).sel(model="m")
    np.testing.assert_allclose(x.sel(order="all"), ref)


def test_sample_ips_pairs_and_templates():
    ds = flip_run({"m": np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2]])}, templates=("a", "b", "c"))
    per = F.sample_ips(ds, orders="all", per_pair=True).sel(model="m")
    assert list(per["pair"].values) == ["a|b", "a|c", "b|c"]
    np.testing.assert_allclose(per.mean("sample"), [0.5, 1.0, 0.5])
    only = F.sample_ips(ds, orders="all", templates=["a", "c"]).sel(model="m")
    np.testing.assert_allclose(only, 1.0)


# ----------------------------------------------------------------------------- comparisons


def test_compare_half_as_unstable_has_known_delta():
    ds = flip_run({"A": two_templates(1), "B": two_templates(2)})
    r = F.compare_models(ds, [("A", "B")], n_boot=200, n_perm=500)
    rows = r.pairs.set_index("order")
    np.testing.assert_allclose(rows["rel_change"], -0.5)
    np.testing.assert_allclose(rows.loc["all", ["ips_a", "ips_b"]], [0.5, 1.0])
    # every sample is identical: the bootstrap CI collapses onto the value
    np.testing.assert_allclose(rows["rel_lo"], -0.5)
    np.testing.assert_allclose(rows["rel_hi"], -0.5)
    m = r.models.set_index(["unit", "order"])
    np.testing.assert_allclose(m.loc[("A", "low"), ["ips", "ips_lo", "ips_hi"]], 0.5)
    assert (rows["p_value"] < 0.01).all()
    assert (rows["n_samples"] == 10).all()
    assert r.summary["n_a_lower"].eq(1).all()


def test_compare_identical_models_is_not_significant():
    ds = flip_run({"A": two_templates(1), "B": two_templates(1)})
    r = F.compare_models(ds, [("A", "B")], n_boot=50, n_perm=100)
    np.testing.assert_allclose(r.pairs["rel_change"], 0.0)
    np.testing.assert_allclose(r.pairs["p_value"], 1.0)


def test_compare_is_seeded():
    ds = synthetic_run(n_samples=6)
    a = F.compare_models(ds, [("toy-7b-instruct", "toy-7b")], n_boot=100, n_perm=100, seed=3)
    b = F.compare_models(ds, [("toy-7b-instruct", "toy-7b")], n_boot=100, n_perm=100, seed=3)
    assert a.pairs.equals(b.pairs)


def test_order_level_delta():
    # A: flips (1, 2, 4) per band; B: (2, 4, 4) -> ΔIPS low -0.5, mid -0.5, high 0
    meta = {
        "A": ("f", "s", "instruct", "dense", 7.0, 7.0),
        "B": ("f", "s", "base", "dense", 7.0, 7.0),
    }
    ds = flip_run({"A": two_templates((1, 2, 4)), "B": two_templates((2, 4, 4))}, meta=meta)
    r = F.compare_models(ds, [("A", "B")], n_boot=20, n_perm=20)
    d = r.summary.set_index("order")["rel_change"]
    np.testing.assert_allclose(d[["low", "mid", "high"]], [-0.5, -0.5, 0.0])
    per_sample = tables.per_sample_ips(ds)  # fig. 10: the same ΔIPS from the groups' tables
    _, delta = tables.factor_table(
        per_sample, tables.model_meta(ds), by="kind", a=["instruct"], b=["base"], n_boot=20
    )
    d = delta.set_index("order")["rel_change"]
    np.testing.assert_allclose(d[["low", "mid", "high"]], [-0.5, -0.5, 0.0])


PAPER_META = F.paper_models(
    [
        "llama-2-7b",
        "llama-2-7b-chat",
        "llama-2-13b",
        "llama-moe-v1-3.5b-2.8-sft",
        "olmo-1b",
        "olmoe-7b",
    ]
)


def test_instruct_vs_base_uses_paper_pairs():
    flips = {"llama-2-7b": two_templates(2), "llama-2-7b-chat": two_templates(1)}
    ds = F.attach_metadata(flip_run(flips))
    r = F.instruct_vs_base(ds, n_boot=20, n_perm=20)
    assert r.settings["pairing"].startswith("paper")
    row = r.pairs[r.pairs.order == "all"].iloc[0]
    assert (row["unit_a"], row["unit_b"]) == ("llama-2-7b-chat", "llama-2-7b")
    assert row["rel_change"] == pytest.approx(-0.5)


def test_instruct_vs_base_falls_back_to_metadata():
    r = F.instruct_vs_base(synthetic_run(n_samples=4), n_boot=20, n_perm=20)
    assert r.settings["pairing"].startswith("metadata")
    assert set(r.pairs["unit_a"]) == {"toy-7b-instruct"}


def test_dense_vs_moe_averages_over_pairs():
    flips = {
        "llama-2-7b": two_templates(1),  # IPS 0.5
        "llama-2-13b": two_templates(2),  # IPS 1.0
        "llama-moe-v1-3.5b-2.8-sft": two_templates(4),  # IPS 2.0
    }
    ds = F.attach_metadata(flip_run(flips))
    r = F.dense_vs_moe(ds, n_boot=50, n_perm=200)
    s = r.summary.set_index(["group", "order"])
    assert s.loc[("Llama", "all"), "n_pairs"] == 2
    assert s.loc[("Llama", "all"), "rel_change"] == pytest.approx((-0.75 - 0.5) / 2)
    assert s.loc[("Llama", "all"), "p_value"] < 0.05
    assert set(r.models["arch"]) == {"dense", "moe"}


def test_matched_active_paper_pairs():
    flips = {"olmo-1b": two_templates(1), "olmoe-7b": two_templates(3)}
    ds = F.attach_metadata(flip_run(flips))
    r = F.matched_active(ds, n_boot=20, n_perm=20)
    row = r.pairs[r.pairs.order == "all"].iloc[0]
    assert (row["unit_a"], row["unit_b"]) == ("olmo-1b", "olmoe-7b")
    assert row["rel_change"] == pytest.approx(1 / 3 - 1)


def test_scale_series_trend():
    flips = {"a-1b": two_templates(3), "a-2b": two_templates(2), "a-4b": two_templates(1)}
    meta = {m: ("A", "A", "instruct", "dense", p, p) for m, p in zip(flips, (1, 2, 4), strict=True)}
    ds = flip_run(flips, meta=meta)
    r = F.scale_series(ds, n_boot=20, n_perm=20)
    s = r.summary.set_index("order")
    assert s.loc["all", "spearman_rho"] == pytest.approx(-1.0)
    assert s.loc["all", "n_pairs"] == 2
    steps = r.pairs[r.pairs.order == "all"].set_index("unit_a")["rel_change"]
    assert steps["a-2b"] == pytest.approx(2 / 3 - 1)
    assert steps["a-4b"] == pytest.approx(-0.5)
    assert r.models.set_index(["unit", "order"]).loc[("a-4b", "all"), "scale_rank"] == 3


def test_few_shot_known_relative_change():
    # per shot: 0-shot flips 4, 1-shot 2, 2-shot 1 -> ΔIPS -0.5 and -0.75
    k = np.stack([two_templates(4), two_templates(2), two_templates(1)])
    ds = flip_run({"m": k}, templates=("ips1", "ips4"), shots=[0, 1, 2])
    r = F.few_shot(ds, n_boot=20, n_perm=20)
    s = r.summary.set_index(["group", "order"])["rel_change"]
    assert s[("1-shot", "all")] == pytest.approx(-0.5)
    assert s[("2-shot", "all")] == pytest.approx(-0.75)
    assert r.settings["templates"] == ["ips1", "ips4"]


def test_few_shot_needs_shot_dim():
    with pytest.raises(ValueError, match="no shot dim"):
        F.few_shot(flip_run({"m": two_templates(1)}))


def test_group_without_members_errors():
    ds = flip_run({"A": two_templates(1), "B": two_templates(2)})
    with pytest.raises(ValueError, match="not in the run"):
        F.compare_models(ds, [("A", "nope")])
    with pytest.raises(ValueError, match="no pair"):
        F.compare_models(ds, [])
    meta = {m: ("A", "A", "base", "dense", 7, 7) for m in ("A", "B")}
    dense_only = flip_run({"A": two_templates(1), "B": two_templates(2)}, meta=meta)
    with pytest.raises(ValueError, match="no family has both"):
        F.dense_vs_moe(dense_only)
    with pytest.raises(ValueError, match=r"0 MoE models"):
        F.dense_vs_moe(dense_only, families={"A": (["A"], [])})
    with pytest.raises(ValueError, match="no model matches"):
        F.select_models(dense_only, arch="moe")


# ----------------------------------------------------------------------------- metadata


def test_attach_and_select_metadata():
    ds = flip_run({m: two_templates(1) for m in PAPER_META})
    assert set(ds["kind"].values) == {""}
    with_meta = F.attach_metadata(ds)
    frame = F.model_frame(with_meta)
    assert frame.loc["llama-2-7b-chat", "kind"] == "chat"
    assert frame.loc["olmoe-7b", "active_params"] == 1.0
    assert list(F.select_models(with_meta, kind="tuned")["model"].values) == [
        "llama-2-7b-chat",
        "llama-moe-v1-3.5b-2.8-sft",
    ]
    big = F.select_models(with_meta, params=(10, None), arch="dense")
    assert list(big["model"].values) == ["llama-2-13b"]
    assert F.select_models(with_meta, series=["olmoe"]).sizes["model"] == 1
    with pytest.warns(UserWarning, match="not in the model table"):
        F.attach_metadata(flip_run({"unknown-model": two_templates(1)}))


def test_paper_pairings_use_model_table_names():
    from psens.models.registry import model_table

    names = set(model_table()["name"])
    t = F.paper_pairings()
    assert set(t["model_a"]) | set(t["model_b"]) <= names
    assert set(pairings.FEW_SHOT_MODELS) <= names
    assert {m for ms in pairings.PERTURBATION_MODELS.values() for m in ms} <= names
    assert len(pairings.MATCHED_ACTIVE_PAIRS) == 4


# ----------------------------------------------------------------------------- statistics


def test_paired_test_matches_definition():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 0.2, 30), rng.normal(1.2, 0.2, 30)
    r = paired_test(a, b, n_boot=500, n_perm=999, seed=0)
    assert r["diff"] == pytest.approx(a.mean() - b.mean())
    assert r["rel"] == pytest.approx(a.mean() / b.mean() - 1)
    assert r["diff_lo"] < r["diff"] < r["diff_hi"]
    # the sign-flip p-value agrees with scipy's exact-ish permutation test
    ref = stats.permutation_test(
        (a - b,), np.mean, permutation_type="samples", n_resamples=20000, random_state=0
    ).pvalue
    assert r["p_value"] == pytest.approx(ref, abs=0.03)


def test_rank_agreement_identical_and_reversed():
    x = np.arange(1.0, 13.0)
    same = rank_agreement(np.stack([x, 2 * x + 1], axis=1), top_k=5)
    rev = rank_agreement(np.stack([x, -x], axis=1), top_k=5)
    for key in ("spearman", "pearson", "kendall"):
        assert same[key][0, 1] == pytest.approx(1.0)
        assert rev[key][0, 1] == pytest.approx(-1.0)
    assert same["rmse"][0, 1] == 0.0
    assert same["top_k"][0, 1] == 1.0
    assert rev["top_k"][0, 1] == 0.0
    r = np.arange(1, 13)
    assert rev["rmse"][0, 1] == pytest.approx(np.sqrt(np.mean((r - (13 - r)) ** 2)))


def test_rank_agreement_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=(15, 4)), 1)  # ties on purpose
    got = rank_agreement(x)
    for i in range(4):
        for j in range(4):
            assert got["spearman"][i, j] == pytest.approx(stats.spearmanr(x[:, i], x[:, j])[0])
            assert got["pearson"][i, j] == pytest.approx(stats.pearsonr(x[:, i], x[:, j])[0])
            assert got["kendall"][i, j] == pytest.approx(stats.kendalltau(x[:, i], x[:, j])[0])


# ----------------------------------------------------------------------------- thresholds


def test_ips_by_threshold_matches_single_tau():
    ds = synthetic_run(n_samples=4)
    table = F.ips_by_threshold(ds)
    assert sorted(table["tau"].unique().tolist()) == list(F.PAPER_TAUS)
    assert len(F.PAPER_TAUS) == 16
    for tau in (0.05, 0.13, 0.2):
        ref = ips_mod.aggregate(ips_mod.ips(ds, tau=tau)).values
        got = table[np.isclose(table["tau"], tau)]["ips"].to_numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def _scores(matrix, taus):
    return xr.DataArray(
        matrix,
        dims=("model", "tau"),
        coords={"model": [f"m{i}" for i in range(matrix.shape[0])], "tau": taus},
    )


def test_threshold_agreement_identical_and_reversed():
    base = np.linspace(1.2, 1.8, 12)
    taus = [0.05, 0.1, 0.15]
    same = F.threshold_agreement(_scores(np.stack([base, base + 0.1, base * 1.1], 1), taus))
    v = same.set_index("metric")["value"]
    assert v[["spearman", "pearson", "kendall", "top_k"]].tolist() == pytest.approx([1] * 4)
    assert v["rmse"] == 0.0
    rev = F.threshold_pairs(_scores(np.stack([base, base[::-1]], 1), taus[:2]))
    assert rev[["spearman", "pearson", "kendall"]].iloc[0].tolist() == pytest.approx([-1] * 3)
    assert rev["top_k"].iloc[0] == pytest.approx(8 / 10)  # 12 models: top 10 share 8


def test_threshold_agreement_matches_scipy_and_reference():
    rng = np.random.default_rng(2)
    m = rng.normal(1.5, 0.1, (20, 5))
    taus = [0.05, 0.08, 0.1, 0.15, 0.2]
    pairs = F.threshold_pairs(_scores(m, taus))
    assert len(pairs) == 10
    row = pairs[(pairs.tau_a == 0.08) & (pairs.tau_b == 0.15)].iloc[0]
    assert row["spearman"] == pytest.approx(stats.spearmanr(m[:, 1], m[:, 3])[0])
    assert row["kendall"] == pytest.approx(stats.kendalltau(m[:, 1], m[:, 3])[0])
    ref = F.threshold_pairs(_scores(m, taus), reference=0.1)
    assert len(ref) == 4 and (ref["tau_a"] == 0.1).all()
    table = F.threshold_table(_scores(m, taus), taus=None)
    assert table.iloc[:, 0].is_monotonic_increasing


@pytest.mark.parametrize("taus", [[0.05, 1.2], [0.0, 0.1], [-0.1], []])
def test_thresholds_outside_unit_interval_error(taus):
    ds = synthetic_run(n_samples=2)
    with pytest.raises(ValueError, match=r"tau|threshold"):
        F.ips_by_threshold(ds, taus)


# ----------------------------------------------------------------------------- consistency


def test_output_consistency_and_correlation():
    ds = flip_run({m: two_templates(k) for m, k in zip("ABCD", (1, 2, 3, 4), strict=True)})
    pred = np.full((4, 10, 2), "A", dtype=object)
    # model k changes its prediction on k+1 samples (of 10)
    for k in range(4):
        pred[k, : k + 1, 1] = "B"
    ds["prediction"].values[...] = pred
    c = F.sample_consistency(ds)
    np.testing.assert_allclose(c.mean("sample"), [0.9, 0.8, 0.7, 0.6])
    table = F.ips_vs_consistency(ds, n_boot=100)
    corr = F.consistency_correlation(table).set_index("metric")
    ref = stats.pearsonr(table["ips"], table["consistency"])
    assert corr.loc["pearson", "statistic"] == pytest.approx(ref.statistic)
    assert corr.loc["pearson", "p_value"] == pytest.approx(ref.pvalue)
    assert corr.loc["spearman", "statistic"] == pytest.approx(-1.0)
    ds["prediction"].values[0, 0, 1] = ""
    assert np.isnan(F.sample_consistency(ds).values[0, 0])


# ----------------------------------------------------------------------------- perturbation


def test_pair_kinds_from_templates_and_coords():
    from psens.prompts import pair_perturbation

    ds = synthetic_run(n_samples=2)
    kinds = F.pair_kinds(ds)
    assert kinds["ips1|ips3"] == "adding"
    assert kinds["ips2|ips5"] == pair_perturbation("ips2", "ips5") == "altering"
    other = flip_run(
        {"m": np.zeros((4, 3), int)},
        templates=("a", "b", "c", "d"),
        perturbation=["", "altering", "adding", "mixed"],
    )
    k = F.pair_kinds(other)
    assert k.to_dict() == {
        "a|b": "altering",
        "a|c": "adding",
        "a|d": "adding+altering",
        "b|c": "adding+altering",
        "b|d": "unknown",
        "c|d": "unknown",
    }
    assert F.pair_kinds(other, kinds={("d", "b"): "adding"})["b|d"] == "adding"


def test_ips_by_perturbation_known_values():
    # ips2 (altering) flips 1 per band, ips3 (adding) flips 3 per band
    flips = np.array([[0, 0, 0], [1, 1, 1], [3, 3, 3]])
    ds = flip_run({"m": flips}, templates=("ips1", "ips2", "ips3"))
    t = F.ips_by_perturbation(ds, n_boot=20, n_perm=50).set_index("model")
    assert t.loc["m", "ips_altering"] == pytest.approx(0.5)  # ips1|ips2
    assert t.loc["m", "ips_adding"] == pytest.approx(1.5)  # ips1|ips3
    assert t.loc["m", "difference"] == pytest.approx(1.0)
    assert t.loc["m", "more_sensitive_to"] == "adding"
    tables = F.perturbation_tables(t.reset_index().assign(arch="dense"))
    assert list(tables["dense"].columns[:3]) == ["Altering Tokens", "Adding Tokens", "Difference"]
    with pytest.raises(ValueError, match="no template pair of kind"):
        F.ips_by_perturbation(ds, kinds=("altering", "nonsense"))


# ----------------------------------------------------------------------------- representation


def test_representation_metrics_and_table():
    flips = {"llama-2-7b": two_templates(2), "llama-2-7b-chat": two_templates(1)}
    ds = F.attach_metadata(flip_run(flips))
    ds["hidden_cosine"].values[...] = np.array([0.8, 0.9])[:, None, None]
    ds["hidden_l2"].values[...] = np.array([10.0, 20.0])[:, None, None]
    m = F.representation_metrics(ds, n_boot=20).set_index("model")
    assert m.loc["llama-2-7b", "cosine"] == pytest.approx(0.8)
    assert m.loc["llama-2-7b-chat", "l2_lo"] == pytest.approx(20.0)
    t = F.representation_table(ds, n_boot=20, n_perm=20).iloc[0]
    assert t["base"] == "llama-2-7b" and t["tuned"] == "llama-2-7b-chat"
    assert t["cosine_says_tuned_stabler"] and not t["l2_says_tuned_stabler"]
    assert t["ips_says_tuned_stabler"]


def test_store_without_hidden_states_errors():
    ds = flip_run({"A": two_templates(1)})
    with pytest.raises(ValueError, match="no hidden states"):
        F.representation_metrics(ds)


# ----------------------------------------------------------------------------- imports


def test_factors_import_neither_ui_nor_altair():
    code = (
        "import sys, psens.factors, psens.ips.factors.charts; "
        "bad = [m for m in ('ipywidgets', 'altair') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_notebook_08s_rewrite_verdicts_are_the_one_change_verdict(monkeypatch, capsys):
    """Notebook 08's paraphrase and reorder lines on the shipped appendix L run: each
    verdict is psens.stats.change_verdict of its CI and paired p (a CI excluding 0 is no
    finding while the test does not reject, and the line says why: 4 items cannot give
    p < 0.05)."""
    import re

    from psens.stats import change_verdict
    from tests.support import ROOT, run_notebook_cells

    monkeypatch.chdir(ROOT / "notebooks")  # the notebook finds data/ from its folder
    scope = run_notebook_cells(
        "08_open_ended", {"display": print}, "APPENDIX_L = ", "n_items = run_l.sizes"
    )
    out = capsys.readouterr().out
    n = scope["run_l"].sizes["sample"]
    lines = re.findall(r"^(\S+): IPS\((\w+)\) - IPS\(template change\) = .* -> (.*)$", out, re.M)
    assert len(lines) == 2 * scope["run_l"].sizes["model"]
    for model, rewrite, said in lines:
        tab = F.ips_by_perturbation(
            scope["run_l"], kinds=("altering", rewrite), n_boot=1000, n_perm=2000
        ).set_index("model")
        r = tab.loc[model]
        want = change_verdict(r.diff_lo, r.diff_hi, r.p_value, words=("higher", "lower"))
        assert said.startswith(want), (said, want)
        if r.diff_lo > 0 and r.p_value >= 0.05:  # a CI excluding 0 beside "not a finding"
            assert said.endswith(f"(with {n} items the smallest possible p is {2 / 2**n:.3f})")
