"""IPS metrics against the literal eq. 3 reference, edge cases and classification."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psens.interactions import mobius_and, mobius_or
from psens.ips import (
    aggregate,
    class_shares,
    interaction_classes,
    ips,
    ips_pairs,
    normalize,
    order_masks,
    salient,
    sparsity_curve,
    topk_matching_error,
)
from tests.support import ips_ref


def _random_interactions(rng, n_templates=4, n=4, batch=()):
    shape = (*batch, n_templates, 1 << n)
    return rng.laplace(size=shape), rng.laplace(size=shape)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 4),
    st.integers(2, 5),
    st.sampled_from([None, "low", "mid", "high"]),
    st.floats(0.01, 0.9),
)
def test_ips_matches_literal_reference(seed, n_templates, n, order, tau):
    rng = np.random.default_rng(seed)
    a, o = _random_interactions(rng, n_templates, n)
    got = ips(a, o, tau=tau, order=order)
    want = ips_ref(a, o, tau, order)
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(want, rel=1e-12)
        assert 0.0 <= got <= 2.0


def test_identical_games_give_zero_and_sign_flip_gives_two():
    rng = np.random.default_rng(0)
    a, o = rng.normal(size=(2, 32))
    assert ips(np.stack([a, a, a]), np.stack([o, o, o])) == 0.0
    assert ips(np.stack([a, -a]), np.stack([o, -o])) == pytest.approx(2.0)


def test_no_salient_interaction_is_nan_and_skipped():
    flat = np.ones((2, 8))  # all magnitudes equal -> normalised to 0 -> nothing salient
    assert np.isnan(ips(flat, flat))
    values = np.array([0.5, np.nan, 1.5])
    mean, skipped = aggregate(values)
    assert mean == pytest.approx(1.0)
    assert skipped == 1


def test_batched_and_padded_samples():
    """A sample with fewer variables is NaN-padded; its IPS equals the unpadded one."""
    rng = np.random.default_rng(1)
    a3, o3 = _random_interactions(rng, 3, 3)
    a4, o4 = _random_interactions(rng, 3, 4)
    pad = np.full((3, 16), np.nan)
    pa, po = pad.copy(), pad.copy()
    pa[:, :8], po[:, :8] = a3, o3
    batch_a, batch_o = np.stack([pa, a4]), np.stack([po, o4])
    for order in (None, "low", "mid", "high"):
        got = ips(batch_a, batch_o, order=order)
        for k, (x, y) in enumerate(((a3, o3), (a4, o4))):
            want = ips(x, y, order=order)
            assert (np.isnan(got[k]) and np.isnan(want)) or got[k] == pytest.approx(want)


def test_order_bands_partition_nonempty_subsets():
    for n in range(1, 9):
        masks = [order_masks(np.array(n), 1 << n, o) for o in ("low", "mid", "high")]
        total = sum(m.astype(int) for m in masks)
        assert total[0] == 0 and np.all(total[1:] == 1)


def test_normalize_excludes_bias_and_scales_to_unit():
    a, o = normalize(np.array([100.0, 2.0, -1.0, 0.5]), np.array([-50.0, 0.5, 0.0, 3.0]))
    assert np.isnan(a[0]) and np.isnan(o[0])
    both = np.abs(np.concatenate([a[1:], o[1:]]))
    assert both.max() == 1.0 and both.min() == 0.0
    assert a[2] < 0  # sign kept


def test_salient_masks():
    sa, so = salient(np.array([0.0, 1.0, 0.05, 0.0]), np.array([0.0, 0.0, 0.5, 0.2]), tau=0.3)
    assert sa.tolist() == [False, True, False, False]
    assert so.tolist() == [False, False, True, False]


def test_interaction_classes_known_cases():
    # three interactions (AND singles), template 0 vs 1
    a0 = np.array([0.0, 1.0, 1.0, 1.0])
    a1 = np.array([0.0, -1.0, 0.3, 0.9])  # flip, shrink below half, similar
    zeros = np.zeros((2, 4))
    res = interaction_classes(np.stack([a0, a1]), zeros, tau=0.05, predictions=["A", "B"])
    assert res["counts"].tolist() == [[1, 1, 1]]
    assert res["changed"].tolist() == [True]
    shares = class_shares(res["counts"], res["changed"])
    np.testing.assert_allclose(shares["changed"], [1 / 3] * 3)
    assert np.all(np.isnan(shares["unchanged"]))


def test_ips_pairs_shape():
    a, o = _random_interactions(np.random.default_rng(2), 5, 3, batch=(7,))
    assert ips_pairs(a, o).shape == (7, 10)
    assert ips(a, o).shape == (7,)


def test_sparsity_curve_sorted():
    rng = np.random.default_rng(3)
    c = sparsity_curve(*_random_interactions(rng, 2, 4))
    assert c.shape == (2, 30)
    assert np.all(np.diff(c, axis=-1) <= 0)
    assert c[:, 0].tolist() == [1.0, 1.0]


def test_topk_matching_error_full_is_zero_and_decreasing():
    rng = np.random.default_rng(4)
    v = rng.normal(size=(3, 32))
    gamma = rng.normal(size=(3, 32))
    ia, io = mobius_and(v / 2 + gamma), mobius_or(v / 2 - gamma)
    errs = [topk_matching_error(v, ia, io, f) for f in (0.05, 0.3, 1.0)]
    np.testing.assert_allclose(errs[-1], 0.0, atol=1e-9)
    assert np.all(errs[0] >= errs[1] - 1e-12)


def test_bad_tau_and_shapes():
    a = np.zeros((2, 4))
    for tau in (0.0, 1.0, -0.1, 2):
        with pytest.raises(ValueError, match="tau"):
            ips(a, a, tau=tau)
    with pytest.raises(ValueError, match="shape"):
        ips(a, np.zeros((2, 8)))
    with pytest.raises(ValueError, match="template"):
        ips(np.zeros((1, 4)), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="power of two"):
        ips(np.zeros((2, 6)), np.zeros((2, 6)))
    with pytest.raises(ValueError, match="order"):
        ips(a, a, order="huge")


def test_dataset_input():
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(5)
    a, o = _random_interactions(rng, 3, 3, batch=(2, 4))
    ds = xr.Dataset(
        {
            "I_and": (("model", "sample", "template", "subset"), a),
            "I_or": (("model", "sample", "template", "subset"), o),
        },
        coords={"model": ["m1", "m2"], "sample": list("abcd")},
    )
    out = ips(ds)
    assert out.dims == ("model", "sample")
    np.testing.assert_allclose(out.values, ips(a, o))
    agg = aggregate(out, "sample")
    assert agg.dims == ("model",) and agg.attrs["n_skipped"] == 0


def test_dataset_path_on_a_lazy_store_equals_the_array_path(tmp_path, monkeypatch):
    """ips(ds) goes through the block-wise run engine: a lazily opened store is read one
    block at a time and gives the numbers of the array path."""
    from psens import store
    from psens.ips import metric
    from psens.synthetic import synthetic_run

    run = synthetic_run(n_samples=5, n_vars=(3, 4), shots=[0, 2])
    lazy = store.open_run(store.save(run, tmp_path / "r.zarr"))
    assert lazy["I_and"].chunks is not None  # dask-backed: nothing loaded yet
    blocks = []
    block = metric._pair_block

    def spy(a, *args):
        blocks.append(a.shape[0])
        return block(a, *args)

    monkeypatch.setattr(metric, "_pair_block", spy)
    monkeypatch.setattr(metric, "_CHUNK_ELEMENTS", 1)  # one sample per block
    a = run["I_and"].transpose(..., "template", "subset").values
    o = run["I_or"].transpose(..., "template", "subset").values
    for order in (None, "low", "mid", "high"):
        blocks.clear()
        got = ips(lazy, tau=0.1, order=order)
        assert blocks == [1] * (run.sizes["model"] * run.sizes["sample"])
        assert got.dims == run["I_and"].dims[:-2]
        assert got.name == ("ips" if order is None else f"ips_{order}")
        assert got.attrs == {
            "tau": 0.1,
            "order": order or "all",
            "blocks_pending": 0,
            "blocks_failed": 0,
        }
        assert list(got["sample"].values) == list(run["sample"].values)
        np.testing.assert_array_equal(got["n_vars"].values, run["n_vars"].values)
        want = ips(a, o, tau=0.1, order=order)
        np.testing.assert_allclose(got.values, want, rtol=1e-12, equal_nan=True)


def test_dataset_path_on_a_slice():
    from psens.synthetic import synthetic_run

    run = synthetic_run(n_samples=3)
    one = run.isel(model=1, sample=2)
    got = ips(one, tau=0.2, order="low")
    assert got.dims == () and str(got["model"].values) == str(run["model"].values[1])
    want = ips(one["I_and"].values, one["I_or"].values, tau=0.2, order="low")
    np.testing.assert_allclose(got.values, want, rtol=1e-12, equal_nan=True)


def test_nanmean_and_n_players():
    from psens.ips import n_players, nanmean

    assert nanmean(np.array([[1.0, np.nan, 3.0], [np.nan] * 3])).tolist()[0] == 2.0
    assert np.isnan(nanmean(np.array([[np.nan, np.nan]])))[0]
    padded = np.full((2, 16), np.nan)
    padded[0, :8], padded[1, :] = 0.0, 1.0
    assert n_players(padded).tolist() == [3, 4]
    padded[0, :6] = 0.0
    padded[0, 6:8] = np.nan
    with pytest.raises(ValueError, match="power of two"):
        n_players(padded)


# ----------------------------------------------------------------------------- input checks


def _game(n_templates=2, n=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n_templates, 1 << n)), rng.normal(size=(n_templates, 1 << n))


@pytest.mark.parametrize("tau", ["0.1", b"0.1", True, None, [0.1]])
def test_tau_that_is_not_a_number_is_refused(tau):
    a, o = _game()
    if tau is not None:  # for ips, None is the default: τ = 0.1 for arrays
        with pytest.raises(TypeError, match="tau"):
            ips(a, o, tau=tau)
    with pytest.raises(TypeError, match="tau"):
        salient(a, o, tau=tau)


def test_no_tau_for_arrays_is_the_papers():
    a, o = _game(n_templates=3, n=3)
    assert np.array_equal(ips(a, o), ips(a, o, tau=0.1), equal_nan=True)
    assert np.array_equal(ips(a, o, tau=None), ips(a, o, tau=0.1), equal_nan=True)


def test_nan_in_I_or_where_I_and_is_finite_is_refused():
    a, o = _game()
    o[0, 1] = np.nan
    with pytest.raises(ValueError, match="I_or is NaN where I_and is not"):
        ips(a, o)
    with pytest.raises(ValueError, match="NaN"):
        normalize(a, o)


def test_nan_at_a_non_padding_subset_is_refused():
    a, o = _game(n=3)
    a[1, 2] = o[1, 2] = np.nan  # subset 2 of a 3-player game is no padding
    with pytest.raises(ValueError, match=r"NaN at subset 2 .*not padding"):
        ips(a, o)


def test_padding_and_all_nan_games_are_still_accepted():
    a, o = _game(n=3)
    a[:, 4:] = o[:, 4:] = np.nan  # a 2-player game padded to 3 players
    assert np.isfinite(ips(a, o))
    a2, o2 = np.stack([a, a]), np.stack([o, o])
    a2[1] = o2[1] = np.nan  # a failed block: every subset NaN
    out = ips(a2, o2)
    assert np.isfinite(out[0]) and np.isnan(out[1])


@pytest.mark.parametrize("shape", [(0, 2, 4), (3, 0, 4)])
def test_empty_batch_is_refused(shape):
    with pytest.raises(ValueError, match="empty"):
        ips(np.zeros(shape), np.zeros(shape))
    with pytest.raises(ValueError, match="empty"):
        normalize(np.zeros(shape), np.zeros(shape))
