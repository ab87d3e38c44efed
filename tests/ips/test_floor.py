"""The noise floor of IPS: two scorings of the same prompt, jitter, and the test against it."""

from __future__ import annotations

import numpy as np
import pytest

from psens.interactions import and_or
from psens.ips import ips, sample_ips
from psens.ips.floor import floor_between, floor_test, jitter_floor, run_floor
from psens.synthetic import synthetic_run


def _games(n=5, batch=6, seed=0):
    return np.random.default_rng(seed).laplace(size=(batch, 2**n))


def test_identical_scorings_have_floor_zero():
    v = _games()
    np.testing.assert_array_equal(floor_between(v, v), 0.0)


def test_floor_is_the_ips_of_the_two_scorings_as_templates():
    v = _games(seed=1)
    w = v + 0.05 * np.random.default_rng(2).normal(size=v.shape)
    both = and_or(np.stack([v, w], axis=-2), "canonical")
    np.testing.assert_allclose(floor_between(v, w), ips(both.I_and, both.I_or, 0.1))
    low = ips(both.I_and, both.I_or, 0.1, order="low")
    np.testing.assert_allclose(floor_between(v, w, order="low"), low, equal_nan=True)


def test_jitter_floor_grows_with_the_noise():
    v = _games(n=5, batch=12, seed=3)
    floors = [np.nanmean(jitter_floor(v, s, draws=2, seed=0)) for s in (1e-4, 1e-2, 0.3)]
    assert floors[0] < floors[1] < floors[2]
    assert floors[0] < 0.05  # tiny noise: nearly the same interactions
    again = jitter_floor(v, 1e-2, draws=2, seed=0)
    np.testing.assert_array_equal(again, jitter_floor(v, 1e-2, draws=2, seed=0))  # seeded
    with pytest.raises(ValueError, match="sigma"):
        jitter_floor(v, 0.0)


def test_run_floor_matches_the_game_path_per_sample():
    ds = synthetic_run(n_samples=4, n_vars=(3, 4), seed=1)
    fl = run_floor(ds, 0.05, orders=("all", "low"), solver="canonical", tau=0.1)
    assert fl.dims == ("model", "sample", "template", "order")
    m, s = 0, 1
    n = int(ds["n_vars"].values[s])
    v = ds["v"].isel(model=m, sample=s).transpose("template", "subset").values[:, : 1 << n]
    ref = jitter_floor(v, 0.05, solver="canonical", tau=0.1)
    np.testing.assert_allclose(fl.isel(model=m, sample=s).sel(order="all").values, ref)


def test_floor_test_separates_signal_from_noise():
    ds = synthetic_run(n_samples=12, n_vars=(4,), seed=2)
    per_sample = sample_ips(ds, 0.1, orders=("all",))
    low_floor = per_sample.copy(data=np.zeros(per_sample.shape) + 0.01).expand_dims(
        template=list(ds["template"].values)
    )
    table = floor_test(per_sample, low_floor, n_perm=199, n_boot=200)
    assert table["exceeds"].all() and (table["effect_size"] > 1).all()
    same = floor_test(per_sample, per_sample.expand_dims(template=["t"]), n_perm=199, n_boot=200)
    assert (same["diff"] == 0).all() and not same["exceeds"].any()


def test_unknown_orders_are_refused():
    ds = synthetic_run(n_samples=2, n_vars=(3,), seed=0)
    with pytest.raises(ValueError, match="Use some of"):
        run_floor(ds, 0.05, orders=("all", "lowest"))
    with pytest.raises(ValueError, match="order"):
        floor_between(_games(), _games(), order="lowest")


def test_floor_bands_is_floor_between_per_band():
    from psens.ips.floor import floor_bands
    from psens.ips.metric import ORDER_LEVELS
    from psens.store import FLOOR_BANDS

    assert FLOOR_BANDS == ORDER_LEVELS  # a run's stored bands are the metric's order levels
    v = _games(n=6, batch=4, seed=4)
    w = v + 0.05 * np.random.default_rng(5).normal(size=v.shape)
    bands = floor_bands(v, w, orders=FLOOR_BANDS, solver="canonical", tau=0.1)
    assert bands.shape == (4, 4)
    for k, band in enumerate(FLOOR_BANDS):
        np.testing.assert_array_equal(bands[:, k], floor_between(v, w, order=band))
    with pytest.raises(ValueError, match="Use some of"):
        floor_bands(v, w, orders=("all", "lowest"))


def test_noise_floor_reads_a_stored_floor_and_leaves_out_unfinished_blocks():
    from psens.ips.floor import noise_floor
    from psens.store import FAILED, FLOOR_BANDS

    ds = synthetic_run(n_samples=3, n_vars=(4,), seed=0)
    values = np.random.default_rng(0).uniform(size=(*ds["p_target"].shape, len(FLOOR_BANDS)))
    dims = (*ds["p_target"].dims, "band")
    ds = ds.assign(floor=(dims, values)).assign_coords(band=list(FLOOR_BANDS))
    ds.attrs["noise_floor"] = "float16"
    ds["status"].values[0, 1] = FAILED
    fl = noise_floor(ds, orders=("all", "high"))
    assert fl.attrs["kind"] == "measured" and fl.attrs["dtype"] == "float16"
    assert fl.dims == ("model", "sample", "template", "order")
    assert list(fl["order"].values) == ["all", "high"]
    assert np.isnan(fl.values[0, 1]).all()
    np.testing.assert_array_equal(fl.values[0, 0], values[0, 0][:, [0, 3]])
    with pytest.raises(ValueError, match="kind"):
        noise_floor(ds, kind="stored")
