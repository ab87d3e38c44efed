"""Mind Your Format's published accuracies as a format-space Dataset, and the accuracy change
by format dimension, each checked against a literal reading of the shipped CSV."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import psens
from psens.formats import mind_your_format
from psens.formats.analysis import (
    accuracy_table,
    dimension_accuracy,
    format_coords,
    one_change_pairs,
)
from psens.formats.published import MIND_YOUR_FORMAT_DATASETS, MIND_YOUR_FORMAT_DIMENSIONS
from psens.stats import resample_counts

ROOT = Path(__file__).resolve().parents[2]
MYF = ROOT / "data" / "reference" / "mind-your-format"
DIMS = list(MIND_YOUR_FORMAT_DIMENSIONS)


@pytest.fixture(scope="module")
def sst2():
    return mind_your_format("sst2")


def _csv_rows():
    with open(MYF / "non_ensemble_runs.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_the_reader_gives_the_format_space_shape(sst2):
    assert dict(sst2.sizes) == {"model": 20, "sample": 23, "template": 30}
    assert sst2["correct"].dims == ("model", "sample", "template")
    assert sst2["status"].dims == ("model", "sample")
    assert (sst2["status"] == psens.store.DONE).all()
    assert list(format_coords(sst2).columns) == DIMS  # what every analysis reads
    lists = json.loads((MYF / "predefined_templates" / "sst2.json").read_text())
    assert list(sst2.template.values[:10]) == [f"t59-{i}" for i in range(10)]
    for name in ("t59-2", "t13-7", "t21-0"):
        lst, i = name[1:].split("-")
        fields = json.loads(lists[lst][int(i)])
        coords = format_coords(sst2).loc[name].to_dict()
        assert coords == {d: fields[d] for d in DIMS}
    run = sst2.sel(sample="4-shot direct z-ICL seed 13")
    assert int(run.n_shots) == 4 and str(run.prediction.item()) == "direct"
    assert str(run.selection.item()) == "z-ICL" and int(run.seed) == 13
    # a run with seed 13 evaluated list 59 only; seed 59's few-shot runs all three lists
    scored = np.isfinite(run.correct).all("model").values
    assert scored.tolist() == [t.startswith("t59-") for t in sst2.template.values]
    assert np.isfinite(sst2.correct.sel(sample="2-shot channel random seed 59")).all()
    assert sorted({str(s) for s in sst2.selection.values}) == [
        "0-shot",
        "implicitly_topic_models",
        "random",
        "z-ICL",
    ]
    assert float(sst2.active_params.sel(model="llama-2-70b-hf")) == 70.0
    assert set(sst2.family.values) >= {"LLaMA", "Llama 2", "Falcon", "OPT", "Pythia", "BLOOM"}


@pytest.mark.parametrize("dataset", MIND_YOUR_FORMAT_DATASETS)
def test_one_accuracy_equals_the_csv_row(dataset):
    ds = mind_your_format(dataset)
    rows = [r for r in _csv_rows() if r["dataset"] == dataset]
    assert np.isfinite(ds.correct.values).sum() == 10 * len(rows)  # every score, once
    row = next(
        r
        for r in rows
        if r["model"] == "llama-65b"
        and r["n_shots"] == "4"
        and r["template_seed"] == "13"
        and r["selection_method"] == "random"
    )
    got = ds.correct.sel(
        model="llama-65b",
        sample=f"4-shot direct random seed {row['seed']}",
        template=[f"t13-{i}" for i in range(10)],
    ).values
    assert got.tolist() == json.loads(row["scores"])
    # a 0-shot row the CSV labels "random" is the run "0-shot direct seed 59"
    zero = next(r for r in rows if r["n_shots"] == "0" and r["selection_method"] == "random")
    method = zero["prediction_method"].split("_")[0]
    got = ds.correct.sel(model=zero["model"], sample=f"0-shot {method} seed 59")
    assert got.sel(template=[f"t59-{i}" for i in range(10)]).values.tolist() == json.loads(
        zero["scores"]
    )


def test_the_scores_follow_the_template_order(sst2):
    """List 13's templates 1 and 2 are one template: their published accuracies agree in
    every run, as they must if scores[i] belongs to template i."""
    assert format_coords(sst2).loc["t13-1"].equals(format_coords(sst2).loc["t13-2"])
    for name in MIND_YOUR_FORMAT_DATASETS:
        ds = mind_your_format(name)
        a, b = ds.correct.sel(template="t13-1"), ds.correct.sel(template="t13-2")
        both = np.isfinite(a.values)
        assert both.sum() > 100 and np.array_equal(a.values[both], b.values[both])


def test_the_existing_accuracy_analyses_apply_unchanged(sst2):
    pairs = one_change_pairs(sst2)
    assert set(pairs.dimension) == set(DIMS)
    table = accuracy_table(sst2, n_boot=50)
    assert len(table) == 20 * 30 and set(DIMS) <= set(table.columns)
    # over the runs that scored every template: seed 59's eight few-shot runs
    ref = sst2.correct.sel(model="llama-7b").dropna("sample").mean("sample")
    got = table[table.model == "llama-7b"].set_index("template")["accuracy"]
    assert np.allclose(got.loc[ref.template.values].values, ref.values)
    assert table.n_items.unique().tolist() == [8]


def test_bad_names_and_folders_fail_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"unknown dataset 'sst-3'.*Use one of") as e:
        mind_your_format("sst-3")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="is missing"):
        mind_your_format("trec", folder=tmp_path)


# ---------------------------------------------------------------------- the literal reference


def _literal_dimension_accuracy(dataset: str, pooled: bool, common: bool):
    """Δ_d from the CSV and the template lists with pandas alone: long scores, every pair of
    templates one change apart by a cross join, |Δ accuracy| per run, means."""
    lists = json.loads((MYF / "predefined_templates" / f"{dataset}.json").read_text())
    tmpl = pd.DataFrame(
        [
            {"template": f"t{lst}-{i}", **json.loads(text)}
            for lst, texts in lists.items()
            for i, text in enumerate(texts)
        ]
    )
    runs = pd.read_csv(MYF / "non_ensemble_runs.csv")
    runs = runs[runs.dataset == dataset]
    long = []
    for r in runs.itertuples():
        run = (
            r.seed,
            r.n_shots,
            r.prediction_method,
            "0-shot" if r.n_shots == 0 else r.selection_method,
        )
        for i, acc in enumerate(json.loads(r.scores)):
            long.append(
                {"model": r.model, "run": run, "template": f"t{r.template_seed}-{i}", "acc": acc}
            )
    long = pd.DataFrame(long)
    order = {t: k for k, t in enumerate(tmpl.template)}
    cross = tmpl.merge(tmpl, how="cross", suffixes=("_a", "_b"))
    cross = cross[cross.template_a.map(order) < cross.template_b.map(order)]
    differ = pd.DataFrame({d: cross[f"{d}_a"] != cross[f"{d}_b"] for d in DIMS})
    cross = cross.assign(
        n_diff=differ.sum(axis=1),
        dimension=differ.idxmax(axis=1).where(differ.sum(axis=1) == 1, "(other)"),
    )
    pairs = cross[["template_a", "template_b", "dimension", "n_diff"]]
    a = pairs.merge(long.rename(columns={"template": "template_a", "acc": "acc_a"}))
    ab = a.merge(long.rename(columns={"template": "template_b", "acc": "acc_b"}))
    ab["delta"] = (ab.acc_a - ab.acc_b).abs()
    one = ab[ab.n_diff == 1]
    per_unit = one.groupby(["model", "run", "dimension"]).delta.mean().unstack("dimension")
    per_unit["(any)"] = ab.groupby(["model", "run"]).delta.mean()
    if pooled:
        per_unit = (
            per_unit.groupby("run").mean().assign(model="all").set_index("model", append=True)
        )
    if common:
        per_unit = per_unit[per_unit[DIMS].notna().all(axis=1)]
    n_pairs = pairs[pairs.n_diff == 1].dimension.value_counts()
    rows = []
    for model, g in per_unit.groupby(level="model"):
        for d in DIMS:
            rows.append(
                {
                    "model": model,
                    "dimension": d,
                    "effect": g[d].mean(),
                    "any_change": g["(any)"].mean(),
                    "n_pairs": int(n_pairs[d]),
                    "n_units": int(g[d].notna().sum()),
                }
            )
    return pd.DataFrame(rows), per_unit


@pytest.mark.parametrize(
    ("dataset", "pooled", "common"),
    [("sst2", True, True), ("trec", True, False), ("agnews", False, True)],
)
def test_dimension_accuracy_is_the_literal_pandas_computation(dataset, pooled, common):
    got = dimension_accuracy(mind_your_format(dataset), pooled=pooled, common=common, n_boot=20)
    ref, _ = _literal_dimension_accuracy(dataset, pooled, common)
    merged = got.merge(ref, on=["model", "dimension"], suffixes=("", "_ref"))
    assert len(merged) == len(ref) == len(got)
    assert np.allclose(merged.effect, merged.effect_ref)
    assert np.allclose(merged.any_change, merged.any_change_ref)
    assert (merged.n_pairs == merged.n_pairs_ref).all()
    assert (merged.n_units == merged.n_units_ref).all()
    for _, g in got.groupby("model", sort=False):  # dimensions by decreasing effect
        assert g.effect.is_monotonic_decreasing


def test_dimension_accuracy_ci_and_p_top_are_the_literal_bootstrap(sst2):
    """Each resample: the units drawn (with their multiplicity), the mean per dimension, then
    the percentile interval and the share of resamples each dimension leads."""
    n_boot = 40
    got = dimension_accuracy(sst2, pooled=True, n_boot=n_boot, seed=3).set_index("dimension")
    _, per_unit = _literal_dimension_accuracy("sst2", pooled=True, common=True)
    label = {
        (int(s.seed), int(s.n_shots), str(s.prediction.item()), str(s.selection.item())): str(name)
        for name, s in ((n, sst2.sel(sample=n)) for n in sst2.sample.values)
    }
    per_run = {
        (label[seed, n, method.split("_")[0], sel], d): v
        for (seed, n, method, sel), row in per_unit.droplevel("model").iterrows()
        for d, v in row.items()
    }
    runs = [str(s) for s in sst2.sample.values]  # the reader's order: the bootstrap's units
    common = [r for r in runs if (r, DIMS[0]) in per_run]
    assert len(common) == 8
    counts = resample_counts(len(runs), n_boot, 3)
    boot = {d: [] for d in DIMS}
    for b in range(n_boot):
        drawn = [
            run for s, run in enumerate(runs) for _ in range(int(counts[b, s])) if run in common
        ]
        for d in DIMS:
            boot[d].append(np.mean([per_run[r, d] for r in drawn]) if drawn else np.nan)
    for d in DIMS:
        lo, hi = np.nanquantile(boot[d], [0.025, 0.975])
        assert np.isclose(got.loc[d, "lo"], lo) and np.isclose(got.loc[d, "hi"], hi)
        lead = [
            max(DIMS, key=lambda k, b=b: boot[k][b] if np.isfinite(boot[k][b]) else -np.inf) == d
            for b in range(n_boot)
        ]
        assert np.isclose(got.loc[d, "p_top"], np.mean(lead))


def test_dimension_accuracy_on_a_psens_run_is_the_flip_share():
    """On items (0/1), Δ_d is the share of items whose correctness differs between the two
    formats of d's pairs, averaged over the pairs."""
    ds = psens.open_run(ROOT / "data" / "runs" / "formats-acc.nc").load()
    got = dimension_accuracy(ds, n_boot=20)
    pairs = one_change_pairs(ds)
    col = {str(t): k for k, t in enumerate(ds.template.values)}
    for m, model in enumerate(str(m) for m in ds.model.values):
        c = ds.correct.values[m]  # [item, template], all items done
        for d, g in pairs.groupby("dimension"):
            flips = [
                np.mean(c[:, col[a]] != c[:, col[b]])
                for a, b in zip(g.template_a, g.template_b, strict=True)
            ]
            row = got[(got.model == model) & (got.dimension == d)].iloc[0]
            assert np.isclose(row.effect, np.mean(flips)) and row.n_units == ds.sizes["sample"]
        every = [
            np.mean(c[:, i] != c[:, j])
            for i, j in itertools.combinations(range(ds.sizes["template"]), 2)
        ]
        assert np.isclose(got[got.model == model].any_change.iloc[0], np.mean(every))


def test_dimension_accuracy_chart_draws_per_dataset():
    pytest.importorskip("altair")
    from psens.formats.charts import dimension_accuracy_chart

    table = pd.concat(
        dimension_accuracy(mind_your_format(d), pooled=True, n_boot=20).assign(dataset=d)
        for d in ("sst2", "trec")
    )
    spec = dimension_accuracy_chart(table, facet="dataset", width=150).to_dict()
    assert spec["spec"]["width"] == 150
    assert spec["facet"]["column"]["field"] == "dataset"
    with pytest.raises(ValueError, match="dataset"):
        dimension_accuracy_chart(table.drop(columns="dataset"), facet="dataset")


@pytest.mark.parametrize("n_boot", [300, 2000])  # the notebook's N_BOOT, tiny and full
def test_notebook_14_quotes_what_the_analysis_gives(n_boot):
    """Every number and claim of notebook 14's reading of the published accuracies."""
    from psens.formats.analysis import accuracy_spread

    text = (ROOT / "notebooks" / "14_format_space.py").read_text(encoding="utf-8")
    for quote in (
        "on 77 of the 80 model–dataset pairs",
        "the three exceptions are on TREC",
        "the median spread is 0.33–0.36 on SST-2, DBpedia and AG News and 0.15 on TREC",
        "largest mean accuracy change on all four datasets (0.06–0.13 per change)",
        "it leads in fewer than 90 % of the resamples",
        "on SST-2 the input–output separator ties it",
        "least on all four (0.04–0.05 per change, never the largest in any resample)",
        "on SST-2, DBpedia and AG News its CI lies below every other dimension's",
        "the output verbalizer has the largest mean change on AG News and DBpedia, and ties the "
        "demonstration separator on TREC",
        "on no dataset does one dimension lead on more than half of the 20 models",
        "the input–output separator on one or two",
        "rest on one to four pairs per dimension",
        "over the eight runs that scored all 30 templates",
        "three demonstration seeds (23 runs)",
    ):
        assert quote.lower() in " ".join(text.split()).lower(), quote
    myf = {d: mind_your_format(d) for d in MIND_YOUR_FORMAT_DATASETS}
    spreads = pd.concat(
        accuracy_spread(ds, n_boot=n_boot, n_perm=n_boot).assign(dataset=d) for d, ds in myf.items()
    )
    assert len(spreads) == 80 and (~spreads.within_noise).sum() == 77
    assert set(spreads[spreads.within_noise].dataset) == {"trec"}
    median = spreads.groupby("dataset").spread.median().round(2)
    assert median[["sst2", "dbpedia", "agnews"]].min() == 0.33
    assert median[["sst2", "dbpedia", "agnews"]].max() == 0.36 and median["trec"] == 0.15
    tops = []
    for d, ds in myf.items():
        t = dimension_accuracy(ds, pooled=True, n_boot=n_boot).set_index("dimension")
        assert (t.n_units == 8).all()
        first, second = t.index[0], t.index[1]
        assert first == "big_sep" and 0.5 < t.loc[first, "p_top"] < 0.9
        assert t.loc[first, "lo"] < t.loc[second, "hi"]  # overlapping CIs
        tops.append(t.loc[first, "effect"])
        assert t.index[-1] == "inp_verbalizer" and t.loc["inp_verbalizer", "p_top"] == 0
        assert round(t.loc["inp_verbalizer", "effect"], 2) in (0.04, 0.05)
        below = t.loc["inp_verbalizer", "hi"] < t.drop("inp_verbalizer").lo.min()
        assert below == (d != "trec")
        assert t.loc["sep", "n_pairs"] in (1, 2)
        if d == "sst2":
            assert (
                second == "sep" and abs(t.loc["big_sep", "effect"] - t.loc["sep", "effect"]) < 0.002
            )
        every = dimension_accuracy(ds, pooled=True, common=False, n_boot=n_boot)
        assert every.set_index("dimension").loc["out_verbalizer", "n_units"] == 23
        assert (every.dimension.iloc[0] == "out_verbalizer") == (d != "sst2")
        if d == "trec":
            assert abs(every.effect.iloc[0] - every.effect.iloc[1]) < 0.001
            assert every.dimension.iloc[1] == "big_sep"
        per_model = dimension_accuracy(ds, n_boot=n_boot)
        leaders = per_model.loc[per_model.groupby("model").effect.idxmax(), "dimension"]
        assert len(leaders) == 20 and leaders.value_counts().max() <= 10
    assert round(min(tops), 2) == 0.06 and round(max(tops), 2) == 0.13
    offline = dimension_accuracy(psens.open_run(ROOT / "data" / "runs" / "formats-acc.nc"))
    assert offline.n_pairs.between(1, 4).all()
