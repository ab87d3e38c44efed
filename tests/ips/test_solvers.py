"""Solver sensitivity of IPS: every decomposition by hand, runs sample by sample, the table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psens.interactions import and_or, l1_objective, optimal_vertices
from psens.ips import aggregate, ips, solver_sensitivity, solver_table
from psens.store import DONE, PENDING
from psens.synthetic import synthetic_run
from tests.support import ips_ref

ORDERS = ("all", "low", "mid", "high")
LP_ONLY = ("canonical", "exact")
TOY = {
    "toy-a": ("toy", "toy", "base", "dense", 7.0, 7.0, 0.8),
    "toy-b": ("toy", "toy", "instruct", "dense", 7.0, 7.0, 0.4),
}


def _quick_tour(n: int = 4, templates: int = 4, samples: int = 5, seed: int = 0) -> np.ndarray:
    """The README's quick-tour games (smaller): a shared Laplace game plus template noise."""
    rng = np.random.default_rng(seed)
    base = rng.laplace(size=(samples, 1, 2**n))
    return base + 0.3 * rng.normal(size=(samples, templates, 2**n))


def _by_hand(I_and: np.ndarray, I_or: np.ndarray, tau: float) -> np.ndarray:
    return np.stack([ips(I_and, I_or, tau, None if o == "all" else o) for o in ORDERS], axis=-1)


def test_a_game_batch_equals_and_or_plus_ips_by_hand():
    v = _quick_tour()
    tau = 0.15
    res = solver_sensitivity(
        v, solvers=("canonical", "exact", "sgd", "sgd-paper"), n_vertices=3, tau=tau, seed=4
    )
    names = ["canonical", "exact", "sgd", "sgd-paper", "vertex-0", "vertex-1", "vertex-2"]
    assert res["solver"].values.tolist() == names
    assert res["ips"].dims == ("solver", "sample", "order")
    assert res["order"].values.tolist() == list(ORDERS)
    kwargs = {
        "canonical": {"method": "canonical"},
        "exact": {"method": "exact"},
        "sgd": {"method": "sgd"},
        "sgd-paper": {"method": "sgd", "preset": "paper"},
    }
    parts = {}
    for name, kw in kwargs.items():
        r = and_or(v, **kw)
        parts[name] = (r.I_and, r.I_or)
    vert = optimal_vertices(v, 3, seed=4)
    for j in range(3):
        parts[f"vertex-{j}"] = (vert.I_and[..., j, :], vert.I_or[..., j, :])
    for name in names:
        want = _by_hand(*parts[name], tau)
        np.testing.assert_allclose(res["ips"].sel(solver=name).values, want, rtol=1e-12)
        obj = l1_objective(*parts[name])
        np.testing.assert_allclose(res["objective"].sel(solver=name).values, obj, rtol=1e-12)
    # and the literal eq. 3 on one sample
    a, o = parts["vertex-1"]
    assert float(res["ips"].sel(solver="vertex-1", order="all")[2]) == pytest.approx(
        ips_ref(a[2], o[2], tau), rel=1e-12
    )
    assert res.attrs["tau"] == tau and res.attrs["n_vertices"] == 3 and res.attrs["seed"] == 4
    assert res.attrs["solvers"] == ["canonical", "exact", "sgd", "sgd-paper"]


def test_spread_is_max_minus_min_over_solvers():
    v = _quick_tour(seed=1)
    res = solver_sensitivity(v, solvers=LP_ONLY, n_vertices=4)
    x = res["ips"].values  # [solver, sample, order]
    want = np.full(x.shape[1:], np.nan)
    for i in range(x.shape[1]):
        for o in range(x.shape[2]):
            finite = [float(a) for a in x[:, i, o] if np.isfinite(a)]
            if finite:
                want[i, o] = max(finite) - min(finite)
    np.testing.assert_allclose(res["spread"].values, want, rtol=0, atol=0, equal_nan=True)
    assert np.isfinite(want).sum() >= 10 and np.nanmax(want) > 0
    assert res["spread"].dims == ("sample", "order")
    assert (res["spread"].fillna(0) >= 0).all()


def test_spread_skips_nan_ips():
    """A solver without salient interactions (NaN IPS) is left out of that sample's spread."""
    import xarray as xr

    from psens.ips.solvers import _finish

    value = np.array([[[0.5, np.nan]], [[0.7, np.nan]], [[np.nan, np.nan]]])  # [solver, 1, 2]
    ds = xr.Dataset(
        {
            "ips": (("solver", "sample", "order"), value),
            "objective": (("solver", "sample", "template"), np.ones((3, 1, 2))),
        },
        coords={"solver": ["canonical", "sgd", "vertex-0"]},
    )
    _finish(ds, ("canonical", "sgd"), 1)
    np.testing.assert_allclose(ds["spread"].values, [[0.2, np.nan]], equal_nan=True)
    np.testing.assert_array_equal(ds["excess"].values, 0.0)


def test_lp_splits_are_optimal_and_sgd_is_not_better():
    v = _quick_tour(n=5, seed=2)
    res = solver_sensitivity(v, solvers=("canonical", "exact", "sgd"), n_vertices=2)
    excess = res["excess"]
    for name in ("canonical", "exact", "vertex-0", "vertex-1"):
        assert float(abs(excess.sel(solver=name)).max()) <= 1e-9
    assert float(excess.sel(solver="sgd").min()) >= -1e-9
    assert float(excess.sel(solver="sgd").max()) > 1e-6  # 20 000 steps stop short of z*
    assert (res["seconds"] > 0).all()


def test_no_lp_solver_means_no_excess():
    v = _quick_tour(n=3, templates=3, samples=2)
    res = solver_sensitivity(v, solvers=("sgd-paper",), n_vertices=0)
    assert "excess" not in res and res["solver"].values.tolist() == ["sgd-paper"]
    np.testing.assert_array_equal(res["spread"].fillna(0).values, 0.0)


def test_more_leading_axes_and_a_single_sample():
    v = _quick_tour(n=3, templates=3, samples=6).reshape(2, 3, 3, 8)
    res = solver_sensitivity(v, solvers=("canonical",), n_vertices=1)
    assert res["ips"].dims == ("solver", "dim_0", "sample", "order")
    assert res["objective"].dims == ("solver", "dim_0", "sample", "template")
    flat = solver_sensitivity(v.reshape(6, 3, 8), solvers=("canonical",), n_vertices=1)
    np.testing.assert_array_equal(res["ips"].values.reshape(2, 6, 4), flat["ips"].values)
    one = solver_sensitivity(v[0, 0], solvers=("canonical",), n_vertices=1)
    assert one["ips"].dims == ("solver", "order")
    np.testing.assert_array_equal(one["ips"].values, flat["ips"].values[:, 0])


def test_deterministic_given_seed():
    v = _quick_tour(seed=3)
    a = solver_sensitivity(v, solvers=("exact",), n_vertices=3, seed=7)
    b = solver_sensitivity(v, solvers=("exact",), n_vertices=3, seed=7)
    for name in ("ips", "spread", "objective"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
    c = solver_sensitivity(v, solvers=("exact",), n_vertices=3, seed=8)
    np.testing.assert_array_equal(a["ips"].sel(solver="exact"), c["ips"].sel(solver="exact"))
    vert = optimal_vertices(v, 3, seed=8)
    want = _by_hand(vert.I_and[..., 2, :], vert.I_or[..., 2, :], 0.1)
    np.testing.assert_allclose(c["ips"].sel(solver="vertex-2").values, want, rtol=1e-12)


# ----------------------------------------------------------------------------- runs


def _per_sample(ds, m: int, s: int, **kw):
    """The array path on one stored sample, cut to its own n."""
    games = ds["v"].isel(model=m, sample=s).values
    n = int(ds["n_vars"].values[s])
    assert np.isfinite(games[..., : 1 << n]).all() and np.isnan(games[..., 1 << n :]).all()
    return solver_sensitivity(games[..., : 1 << n], **kw)


def test_a_run_equals_the_array_path_sample_by_sample():
    ds = synthetic_run(TOY, n_samples=4, n_vars=(3, 4, 5))
    kw = {"solvers": LP_ONLY, "n_vertices": 2, "tau": 0.1, "seed": 1}
    res = solver_sensitivity(ds, progress=False, **kw)
    assert res["ips"].dims == ("solver", "model", "sample", "order")
    assert res["objective"].dims == ("solver", "model", "sample", "template")
    assert res["sample"].values.tolist() == ds["sample"].values.tolist()
    assert res["model"].values.tolist() == ["toy-a", "toy-b"]
    assert res["template"].values.tolist() == ds["template"].values.tolist()
    np.testing.assert_array_equal(res["n_players"].values, [[3, 4, 5, 3]] * 2)
    assert res["done"].values.all()
    for m in range(2):
        for s in range(4):
            one = _per_sample(ds, m, s, **kw)
            np.testing.assert_allclose(
                res["ips"].isel(model=m, sample=s).values, one["ips"].values, rtol=1e-12
            )
            np.testing.assert_allclose(
                res["objective"].isel(model=m, sample=s).values,
                one["objective"].values,
                rtol=1e-12,
            )
            np.testing.assert_allclose(
                res["spread"].isel(model=m, sample=s).values,
                one["spread"].values,
                rtol=1e-12,
                equal_nan=True,
            )


def test_a_run_with_sgd_and_shots():
    ds = synthetic_run(TOY, n_samples=2, n_vars=(3,), shots=[0, 1])
    kw = {"solvers": ("canonical", "sgd-paper"), "n_vertices": 1}
    res = solver_sensitivity(ds, models=["toy-b"], progress=False, **kw)
    assert res["ips"].dims == ("solver", "model", "sample", "shot", "order")
    assert res["model"].values.tolist() == ["toy-b"]
    one = solver_sensitivity(ds["v"].isel(model=1, sample=1).values, **kw)  # n = 3: no padding
    np.testing.assert_allclose(
        res["ips"].isel(model=0, sample=1).values, one["ips"].values, rtol=1e-12
    )


def test_a_run_skips_samples_that_are_not_done():
    ds = synthetic_run(TOY, n_samples=3, n_vars=(3, 4))
    ds["status"].values[0, 1] = PENDING
    ds["v"].values[0, 1] = np.nan  # never read
    res = solver_sensitivity(ds, solvers=("canonical",), n_vertices=1, progress=False)
    assert res["done"].values.tolist() == [[True, False, True], [True, True, True]]
    assert res["n_players"].values.tolist() == [[3, -1, 3], [3, 4, 3]]
    assert res["ips"].isel(model=0, sample=1).isnull().all()
    assert res["objective"].isel(model=0, sample=1).isnull().all()
    assert res["ips"].isel(model=1, sample=1).notnull().any()
    table = solver_table(res)
    assert table.loc[("toy-a", "canonical"), "n_all"] <= 2
    ds["status"].values[0, 1] = DONE  # a "done" sample with NaN inside its subsets
    with pytest.raises(
        ValueError, match=r"sample 's001' of 'toy-a' has NaN inside its own subsets"
    ):
        solver_sensitivity(ds, solvers=("canonical",), n_vertices=0, progress=False)


def test_a_slice_of_a_run_without_model_dim():
    ds = synthetic_run(TOY, n_samples=2, n_vars=(3, 4))
    res = solver_sensitivity(ds.isel(model=1), solvers=("exact",), n_vertices=1, progress=False)
    assert res["ips"].dims == ("solver", "sample", "order")
    full = solver_sensitivity(ds, solvers=("exact",), n_vertices=1, progress=False)
    np.testing.assert_array_equal(res["ips"].values, full["ips"].isel(model=1).values)


# ----------------------------------------------------------------------------- table


def test_solver_table_follows_aggregate():
    v = _quick_tour(n=4, samples=8, seed=5)
    res = solver_sensitivity(v, solvers=LP_ONLY, n_vertices=2, tau=0.3)
    table = solver_table(res)
    rows = ["canonical", "exact", "vertex-0", "vertex-1", "spread: mean", "spread: max"]
    assert table.index.tolist() == rows
    assert table.columns.tolist()[:8] == [*ORDERS, *(f"n_{o}" for o in ORDERS)]
    for name in rows[:4]:
        for order in ORDERS:
            da = res["ips"].sel(solver=name, order=order)
            mean = aggregate(da)
            assert table.loc[name, order] == pytest.approx(float(mean), rel=1e-12, nan_ok=True)
            assert table.loc[name, f"n_{order}"] == mean.attrs["n_used"]
        assert abs(table.loc[name, "max_excess"]) <= 1e-9
    for order in ORDERS:
        sp = res["spread"].sel(order=order).values
        assert table.loc["spread: mean", order] == pytest.approx(np.nanmean(sp), rel=1e-12)
        assert table.loc["spread: max", order] == pytest.approx(np.nanmax(sp), rel=1e-12)
    assert table.attrs["tau"] == 0.3


def test_solver_table_of_a_run_has_a_model_level():
    ds = synthetic_run(TOY, n_samples=3, n_vars=(3, 4))
    res = solver_sensitivity(ds, solvers=("canonical",), n_vertices=2, progress=False)
    table = solver_table(res)
    assert table.index.names == ["model", "solver"]
    assert table.loc[("toy-b", "vertex-1"), "all"] == pytest.approx(
        float(aggregate(res["ips"].sel(model="toy-b", solver="vertex-1", order="all")))
    )
    with pytest.raises(ValueError, match=r"solver_table: the result has no 'ips'"):
        solver_table(res[["objective"]])


def test_solver_table_never_pools_shot_settings():
    """A result with a shot dim: one block per shot setting (a ``shot`` level), each the
    table of that shot setting alone, as the headline never pools shots."""
    ds = synthetic_run(TOY, n_samples=3, n_vars=(3, 4), shots=[0, 3])
    res = solver_sensitivity(ds, solvers=("canonical",), n_vertices=1, progress=False)
    table = solver_table(res)
    assert table.index.names == ["shot", "model", "solver"]
    for k in (0, 3):
        alone = solver_table(res.sel(shot=k))
        pd.testing.assert_frame_equal(table.loc[k], alone)
        want = aggregate(res["ips"].sel(shot=k, model="toy-a", solver="canonical", order="all"))
        assert table.loc[(k, "toy-a", "canonical"), "all"] == pytest.approx(float(want))


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"solvers": ("canonical", "simplex")}, ValueError, r"solver 'simplex' is unknown\. Use"),
        ({"solvers": ("vertex-0",)}, ValueError, r"'vertex-0' is unknown.*n_vertices="),
        ({"solvers": ("exact", "exact")}, ValueError, r"repeat a name\. List each solver once"),
        ({"n_vertices": -1}, ValueError, r"n_vertices=-1 is below 0\. Pass n_vertices >= 0"),
        ({"n_vertices": 1.5}, TypeError, r"n_vertices=1\.5 is not an integer"),
        ({"tau": 0.0}, ValueError, r"tau=0\.0 is outside \(0\.0, 1\.0\)"),
        ({"tau": 1.2}, ValueError, r"tau=1\.2 is outside"),
        ({"seed": -2}, ValueError, r"seed=-2 is below 0"),
        ({"solvers": (), "n_vertices": 0}, ValueError, r"no solver is selected"),
        ({"models": ["x"]}, ValueError, r"models= was given with an array"),
    ],
)
def test_bad_arguments_name_the_fix(kwargs, exc, match):
    v = _quick_tour(n=2, templates=2, samples=1)
    with pytest.raises(exc, match=rf"solver_sensitivity: .*{match}"):
        solver_sensitivity(v, **kwargs)


def test_bad_games_and_runs_name_the_fix():
    with pytest.raises(ValueError, match=r"only 1 template\. Put at least two"):
        solver_sensitivity(np.zeros((3, 1, 4)), solvers=("canonical",))
    with pytest.raises(ValueError, match=r"need \[\.\.\., template, 2\*\*n\]"):
        solver_sensitivity(np.zeros(4), solvers=("canonical",))
    with pytest.raises(ValueError, match="not a power of two"):
        solver_sensitivity(np.zeros((2, 3)), solvers=("canonical",))
    ds = synthetic_run(TOY, n_samples=1, n_vars=(3,))
    with pytest.raises(ValueError, match=r"models \['nope'\] are not in the run"):
        solver_sensitivity(ds, models=["nope"], progress=False)
    with pytest.raises(ValueError, match=r"the Dataset has no 'v' variable"):
        solver_sensitivity(ds[["I_and"]], progress=False)
