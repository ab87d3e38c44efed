"""ProSA PSS, decoding confidence, subjective versions, PSS charts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psens.pss import (
    arena_label_score,
    confidence,
    find_dim,
    instance_confidence,
    instance_pss,
    load_prosa_versions,
    pss,
    pss_tables,
    top_token_probability,
    variant_dim,
    variant_disagreement,
)
from tests.support import REFERENCE


def literal_pss_row(row):
    """ProSA eq. 1 as a literal double loop over unordered pairs of the valid variants."""
    y = [v for v in row if not math.isnan(v)]
    if len(y) < 2:
        return math.nan
    pairs = list(itertools.combinations(y, 2))
    return sum(abs(a - b) for a, b in pairs) / len(pairs)


def test_instance_pss_known_values():
    s = instance_pss(np.array([[1, 0, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0], [0.0, 0.5, 1.0, 0.5]]))
    # 4 of 6 pairs differ; none; 3 of 6; graded: |0-.5|+|0-1|+|0-.5|+|.5-1|+0+|1-.5| = 3 / 6
    np.testing.assert_allclose(s, [4 / 6, 0.0, 3 / 6, 0.5])
    assert pss(np.array([[1, 0, 1, 0], [1, 1, 1, 1]])) == pytest.approx(1 / 3)


def test_binary_pss_is_fraction_of_disagreeing_pairs():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=(50, 12))
    k = y.sum(axis=1)
    np.testing.assert_allclose(instance_pss(y), k * (12 - k) / (12 * 11 / 2))
    np.testing.assert_allclose(instance_pss(y.astype(bool)), instance_pss(y))


@settings(max_examples=200, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 6), st.integers(1, 9)),
        elements=st.one_of(st.floats(0, 1), st.just(np.nan)),
    )
)
def test_instance_pss_matches_literal_double_loop(a):
    expected = np.array([literal_pss_row(r) for r in a])
    np.testing.assert_allclose(instance_pss(a), expected, rtol=1e-12, atol=1e-12)


def test_failed_variants_are_excluded_and_counted():
    a = np.array([[1, np.nan, 0, np.nan], [1, 1, np.nan, np.nan], [np.nan, 1, np.nan, np.nan]])
    s = instance_pss(a)
    assert s[0] == 1.0 and s[1] == 0.0 and np.isnan(s[2])
    summary = pss(a, return_counts=True)
    assert summary.pss == pytest.approx(0.5)
    assert (summary.n_used, summary.n_skipped) == (2, 1)


def test_leading_axes_and_xarray_roundtrip():
    rng = np.random.default_rng(1)
    y = rng.random((3, 20, 12))  # model x sample x template
    np.testing.assert_allclose(pss(y), [instance_pss(y[m]).mean() for m in range(3)])
    da = xr.DataArray(y, dims=("model", "sample", "template"), coords={"model": ["a", "b", "c"]})
    s = instance_pss(da)
    assert isinstance(s, xr.DataArray) and s.dims == ("model", "sample")
    p = pss(da)
    assert p.dims == ("model",)
    np.testing.assert_allclose(p.values, pss(y))
    # transposed input gives the same answer (dims by name, not position)
    np.testing.assert_allclose(pss(da.transpose("template", "sample", "model")).values, pss(y))


def test_pss_refuses_bad_input():
    with pytest.raises(ValueError, match="outside \\[0, 1\\]"):
        instance_pss(np.array([[0.0, 2.0]]))
    with pytest.raises(ValueError, match="Reshape a single instance"):
        instance_pss(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="none of the dims"):
        instance_pss(xr.DataArray(np.zeros((2, 3)), dims=("a", "b")))


def test_one_dim_finder_with_each_call_site_order():
    both = xr.DataArray(np.zeros((2, 3, 4)), dims=("sample", "template", "variant"))
    assert find_dim(both, ("template", "variant")) == "template"
    assert find_dim(both, ("template", "variant"), prefer="variant") == "variant"
    assert find_dim(both, ("template",), given="variant") == "variant"
    assert variant_dim(both) == "variant"  # the tables try "variant" first ...
    assert instance_pss(both).dims == ("sample", "variant")  # ... the metric "template"
    with pytest.raises(ValueError, match="where: dim 'x'"):
        find_dim(both, ("template",), given="x", where="where")
    with pytest.raises(ValueError, match=r"none of the dims .* \('variant', 'prompt'\)"):
        find_dim(both.rename(variant="v", template="t"), ("prompt", "variant"), prefer="variant")


def test_pss_tables_per_model_variant_style_and_shot():
    rng = np.random.default_rng(3)
    y = (rng.random((2, 5, 2, 4)) < 0.5).astype(float)
    y[0, 0, 0, 1:] = np.nan  # one instance with a single valid variant
    da = xr.DataArray(
        y,
        dims=("model", "item", "shot", "variant"),
        coords={
            "model": ["a", "b"],
            "shot": [0, 3],
            "variant": ["P01", "P02", "P04", "P05"],
            "style": ("variant", ["simple", "simple", "role", "role"]),
        },
    )
    t = pss_tables(da, shot=3)
    by_model = t["model"].set_index("model")
    for m, name in enumerate(["a", "b"]):
        summary = pss(y[m, :, 1], return_counts=True)
        assert by_model.loc[name, "pss"] == pytest.approx(summary.pss)
        assert by_model.loc[name, "n_skipped"] == summary.n_skipped
        d = variant_disagreement(y[m, :, 1])
        got = t["variant"][t["variant"].model == name]
        np.testing.assert_allclose(got["disagreement"], np.nanmean(d, axis=0))
        np.testing.assert_allclose(got["mean_score"], np.nanmean(y[m, :, 1], axis=0))
        role = t["style"].set_index(["model", "style"]).loc[(name, "role"), "pss"]
        assert role == pytest.approx(pss(y[m, :, 1, 2:]))
        for s, shot in enumerate([0, 3]):
            row = t["shot"][(t["shot"].model == name) & (t["shot"].shot == shot)]
            assert float(row["pss"].iloc[0]) == pytest.approx(pss(y[m, :, s]))
    assert pss_tables(da, models=["b"])["model"]["model"].tolist() == ["b"]
    plain = pss_tables(da.isel(shot=0, drop=True).drop_vars("style").sel(model="a"))
    assert plain["style"].empty and plain["shot"].empty and len(plain["variant"]) == 4
    with pytest.raises(ValueError, match="pss_tables"):
        pss_tables(da.rename(item="row"))


# ---------------------------------------------------------------------------- confidence


def test_decoding_confidence_full_and_option_tokens():
    # 1 instance x 2 variants x vocab 5; option tokens are ids 1 and 2
    probs = np.array([[[0.5, 0.2, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.05, 0.05]]])
    np.testing.assert_allclose(top_token_probability(probs, over="full"), [[0.5, 0.6]])
    np.testing.assert_allclose(instance_confidence(probs), [0.55])
    opt = instance_confidence(probs, over="options", option_ids=[1, 2])
    np.testing.assert_allclose(opt, [(0.2 + 0.6) / 2])
    ren = instance_confidence(probs, over="options", option_ids=[1, 2], renormalize=True)
    np.testing.assert_allclose(ren, [(0.2 / 0.3 + 0.6 / 0.8) / 2])
    assert confidence(probs) == pytest.approx(0.55)
    logits = np.log(probs)
    np.testing.assert_allclose(instance_confidence(logits, from_logits=True), [0.55])
    with pytest.raises(ValueError, match="needs option_ids"):
        instance_confidence(probs, over="options")


def test_decoding_confidence_xarray():
    probs = xr.DataArray(np.full((4, 3, 10), 0.1), dims=("sample", "template", "vocab")).copy()
    probs[0, 0] = [0.9] + [0.1 / 9] * 9
    c = instance_confidence(probs)
    assert c.dims == ("sample",)
    assert float(c[0]) == pytest.approx((0.9 + 0.1 + 0.1) / 3)
    assert float(confidence(probs)) == pytest.approx(float(c.mean()))


# ------------------------------------------------------------------------ subjective PSS


def test_arena_label_scores():
    assert arena_label_score("[[B>>A]]") == 1.0
    assert arena_label_score("A=B") == 0.5
    assert arena_label_score("A>B", model_position="A") == 0.75
    with pytest.raises(ValueError, match="not an Arena-Hard verdict"):
        arena_label_score("tie")


def test_load_prosa_versions_and_subjective_pss():
    df = load_prosa_versions(REFERENCE / "prosa", "arena")
    assert len(df) == 1500 and df.groupby("instance").size().eq(3).all()
    alp = load_prosa_versions(REFERENCE / "prosa", "alpaca")
    assert len(alp) == 3 * 805
    # graded judge scores per (instance, version) -> subjective PSS
    scores = df.assign(score=np.tile([0.0, 0.5, 1.0], 500)).pivot(
        index="instance", columns="version", values="score"
    )
    assert pss(scores.to_numpy()) == pytest.approx((0.5 + 1.0 + 0.5) / 3)


# --------------------------------------------------------------------------------- charts


def test_pss_charts_have_one_row_per_model_and_shot():
    pytest.importorskip("altair")
    from psens.pss.charts import pss_by_model, pss_by_shot

    by_model = pd.DataFrame({"model": ["a", "b", "c"], "pss": [0.1, 0.2, 0.3]})
    chart = pss_by_model(by_model)
    assert len(chart.data) == 3
    chart.to_dict()
    da = xr.DataArray(
        np.random.default_rng(0).random((2, 5)),
        dims=("model", "shot"),
        coords={"model": ["a", "b"], "shot": [0, 1, 3, 5, 7]},
    )
    chart = pss_by_shot(da)
    assert len(chart.data) == 10
    assert sorted(chart.data["shot"].unique()) == [0, 1, 3, 5, 7]
    chart.to_dict()
