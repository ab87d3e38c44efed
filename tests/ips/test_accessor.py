"""The analyst's API: ds.psens (words, pairs by name, tidy rows) and Datasets everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import psens  # noqa: F401  (registers ds.psens)
from psens.ips import interaction_classes, ips, ips_pairs, normalize, order_masks, sample_ips
from psens.ips.tables import subset_words
from psens.synthetic import synthetic_run


@pytest.fixture(scope="module")
def run():
    return synthetic_run(n_samples=5, n_vars=(3, 4, 5), shots=[0, 1], seed=3)


def _arrays(ds):
    a = ds["I_and"].transpose(..., "template", "subset").values
    o = ds["I_or"].transpose(..., "template", "subset").values
    return a, o


def test_words_and_labels_follow_the_bitmask(run):
    for s in run["sample"].values[:3]:
        words = [str(w) for w in run["word"].sel(sample=s).values if str(w)]
        for mask in (0, 1, 0b101, (1 << len(words)) - 1):
            assert run.psens.words(mask, sample=s) == subset_words(mask, words)
        labels = run.psens.labels(sample=s)
        assert labels.sizes["subset"] == 2 ** len(words)
        assert labels.values[0b11] == "{" + ", ".join(words[:2]) + "}"
    with pytest.raises(ValueError, match="outside"):
        run.psens.words(1 << 10, sample=run["sample"].values[0])
    with pytest.raises(ValueError, match="not in the run"):
        run.psens.words(1, sample="nope")


def test_template_pairs_by_name_in_either_order(run):
    labels = run.psens.pair_labels()
    k = run.psens.pair("ips4", "ips1")
    assert k == run.psens.pair("ips1", "ips4") and labels[k] == "ips1|ips4"
    assert str(run.psens.sel_pair("ips1", "ips4")["template_b"].values) == "ips4"
    assert labels == list(sample_ips(run, per_pair=True, orders="all")["pair"].values)
    with pytest.raises(ValueError, match="no template pair"):
        run.psens.pair("ips1", "ips1")


def test_to_frame_has_one_row_per_interaction_with_the_run_values(run):
    frame = run.psens.to_frame()
    a, _ = _arrays(run)
    n = np.log2(np.isfinite(a).sum(-1)).round().astype(int)
    expected = int((2 * (2.0**n - 1)).sum())  # AND and OR, S != ∅, within each game's n
    assert len(frame) == expected
    assert list(frame.columns[:4]) == ["model", "sample", "shot", "template"]
    row = frame[(frame.kind == "OR") & (frame.subset == 3)].iloc[0]
    ref = run["I_or"].sel(
        model=row.model, sample=row["sample"], shot=row.shot, template=row.template, subset=3
    )
    assert row.value == float(ref)
    assert row.words == "{" + ", ".join(run.psens.words(3, sample=row["sample"])) + "}"
    assert not frame.duplicated(["model", "sample", "shot", "template", "kind", "subset"]).any()


def test_to_frame_filters_match_the_metric(run):
    a, o = _arrays(run)
    na, no = normalize(a, o)
    salient = run.psens.to_frame(0.2, salient_only=True)
    inside = order_masks(np.log2(np.isfinite(a).sum(-1)).round().astype(int), a.shape[-1], None)
    assert len(salient) == int(
        ((np.abs(na) > 0.2) & inside).sum() + ((np.abs(no) > 0.2) & inside).sum()
    )
    assert salient.salient.all()
    low = run.psens.to_frame(order="low")
    assert set(low.order) == {"low"}
    band = order_masks(np.log2(np.isfinite(a).sum(-1)).round().astype(int), a.shape[-1], "low")
    assert len(low) == 2 * int(band.sum())
    with pytest.raises(ValueError, match="order"):
        run.psens.to_frame(order="lowest")


def test_ips_pairs_and_classes_take_a_run_dataset(run):
    a, o = _arrays(run)
    p = ips_pairs(run, tau=0.15, order="mid")
    assert p.dims[-1] == "pair" and p.name == "ips_mid"
    np.testing.assert_allclose(p.values, ips_pairs(a, o, 0.15, "mid"), equal_nan=True)
    pred = run["prediction"].transpose(..., "template").values.astype(str)
    c = interaction_classes(run, 0.1)
    ref = interaction_classes(a, o, 0.1, predictions=pred)
    assert c["counts"].dims[-2:] == ("pair", "class")
    assert (c["counts"].values == ref["counts"]).all()
    assert (c["changed"].values == ref["changed"]).all()
    with pytest.raises(ValueError, match="Dataset"):
        ips_pairs(run, o)
    # f(ds, 0.2) means tau=0.2 for every function, as f(ds, tau=0.2)
    np.testing.assert_array_equal(ips(run, 0.2).values, ips(run, tau=0.2).values)
    assert not np.array_equal(ips(run, 0.2).values, ips(run).values, equal_nan=True)
    np.testing.assert_array_equal(ips_pairs(run, 0.2).values, ips_pairs(run, tau=0.2).values)


def test_pairs_are_selectable_by_name(run):
    """`res.sel(pair=...)` takes a pair's name in either order, with `|` or `-`."""
    p = ips_pairs(run, tau=0.1)
    k = list(p["pair"].values).index("ips1|ips4")
    want = p.isel(pair=k).values
    for name in (
        "ips1|ips4",
        "ips4|ips1",
        "ips1-ips4",
        "ips4-ips1",
        "ips1 vs ips4",
        ("ips4", "ips1"),
    ):
        np.testing.assert_array_equal(p.sel(pair=name).values, want)
    assert (p["pair_a"].values[k], p["pair_b"].values[k]) == ("ips1", "ips4")
    two = p.sel(pair=["ips2-ips1", "ips5|ips4"])
    assert list(two["pair"].values) == ["ips1|ips2", "ips4|ips5"]
    assert list(two["pair_b"].values) == ["ips2", "ips5"]
    means = p.mean("sample")  # the index survives reductions and slices
    assert float(means.sel(pair="ips4-ips1", model=p["model"].values[0], shot=0)) == float(
        means.isel(pair=k, model=0, shot=0)
    )
    c = interaction_classes(run, 0.1)
    assert (c["counts"].sel(pair="ips2-ips1").values == c["counts"].isel(pair=0).values).all()
    per = sample_ips(run, per_pair=True, orders="all")
    assert float(per.sel(pair="ips5-ips3").isel(model=0, sample=0, shot=0)) == float(
        per.isel(pair=-2, model=0, sample=0, shot=0)
    )
    with pytest.raises(KeyError, match=r"no template pair 'ips1-ips9'.*ips5"):
        p.sel(pair="ips1-ips9")
    # on the run itself, through the accessor
    assert (
        run.psens.pair("ips4-ips1") == run.psens.pair("ips1|ips4") == run.psens.pair("ips1", "ips4")
    )
    assert str(run.psens.sel_pair("ips4-ips1")["template_a"].values) == "ips1"
    with pytest.raises(ValueError, match="no template pair 'ips1-ips1'"):
        run.psens.pair("ips1-ips1")


def test_ambiguous_pair_names_are_refused():
    from psens.store.pairs import resolve_pair

    # template names with a "-": "a-b-c" is {a-b, c} and also {a, b-c}
    with pytest.raises(ValueError, match="names 2 pairs"):
        resolve_pair("a-b-c", ["a-b", "a"], ["c", "b-c"], "t")
    assert resolve_pair(("a-b", "c"), ["a-b", "a"], ["c", "b-c"]) == 0
    assert resolve_pair("a|b-c", ["a-b", "a"], ["c", "b-c"]) == 1
