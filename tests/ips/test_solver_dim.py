"""Runs holding several solvers' interactions (a ``solver`` dim): every reader picks one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psens.ips import interaction_classes, ips, ips_pairs, sample_ips, select_solver, solver_names
from psens.ips.tables import class_table, matching_error_table, per_sample_ips
from tests.support import two_solver_run


def test_select_solver_picks_one_solver_and_its_settings():
    ds, a, b = two_solver_run()
    assert solver_names(ds) == ["exact", "sgd"] and solver_names(a) == ["canonical"]
    picked = select_solver(ds, "sgd")
    assert "solver" not in picked.dims and "solver" not in picked.coords
    np.testing.assert_array_equal(picked["I_and"].values, b["I_and"].values)
    assert picked.attrs["solver_method"] == "sgd" and picked.attrs["solver_steps"] == 7
    np.testing.assert_array_equal(select_solver(ds)["I_or"].values, a["I_or"].values)
    assert select_solver(a) is a and select_solver(a, "canonical") is a
    with pytest.raises(ValueError, match="Use one of"):
        select_solver(a, "sgd")


def test_readers_take_a_solver_and_default_to_the_first():
    ds, a, b = two_solver_run()
    for other, solver in ((a, None), (a, "exact"), (b, "sgd")):
        np.testing.assert_array_equal(ips(ds, solver=solver).values, ips(other).values)
        np.testing.assert_array_equal(
            ips_pairs(ds, order="low", solver=solver).values, ips_pairs(other, order="low").values
        )
        np.testing.assert_array_equal(
            sample_ips(ds, 0.2, solver=solver).values, sample_ips(other, 0.2).values
        )
        np.testing.assert_array_equal(
            per_sample_ips(ds, solver=solver).values, per_sample_ips(other).values
        )
        np.testing.assert_array_equal(
            interaction_classes(ds, solver=solver)["counts"].values,
            interaction_classes(other)["counts"].values,
        )
        pd.testing.assert_frame_equal(
            ds.psens.to_frame(solver=solver, words=False), other.psens.to_frame(words=False)
        )
        models = [str(m) for m in ds["model"].values[:2]]
        pd.testing.assert_frame_equal(
            class_table(ds, models, solver=solver), class_table(other, models)
        )
        pd.testing.assert_frame_equal(
            matching_error_table(ds, models[:1], fractions=(0.1,), solver=solver),
            matching_error_table(other, models[:1], fractions=(0.1,)),
        )
    assert not np.allclose(ips(ds, solver="sgd").values, ips(ds).values)
    with pytest.raises(ValueError, match="solver= was given with arrays"):
        ips(a["I_and"].values, a["I_or"].values, solver="exact")
