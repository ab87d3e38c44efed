"""Every public ``psens.ips`` function that takes a run reads τ from the run unless given:
on a run made at τ = 0.2, ``f(ds)`` equals ``f(ds, tau=0.2)`` and differs from
``f(ds, tau=0.1)`` (the default of a run that records none). The functions are found by
introspection, so a new one with ``tau=DEFAULT_TAU`` fails here. The widgets:
tests/widgets/test_run_tau.py."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import psens
import psens.ips
from psens.synthetic import synthetic_run

#: first parameters that take a run Dataset (``I_and`` when ``I_or`` may be left out)
RUN_PARAMS = ("ds", "data", "I_and")


def _run_tau_functions() -> dict[str, object]:
    """Public functions of psens.ips and its modules with a ``tau`` parameter that take a
    run Dataset first."""
    names = ["psens.ips"] + [
        m.name for m in pkgutil.walk_packages(psens.ips.__path__, "psens.ips.")
    ]
    found: dict[str, object] = {}
    for module_name in names:
        module = importlib.import_module(module_name)
        public = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
        for name in public:
            f = getattr(module, name, None)
            if not inspect.isfunction(f) or f in found.values():
                continue
            params = inspect.signature(f).parameters
            if "tau" not in params or next(iter(params)) not in RUN_PARAMS:
                continue
            if next(iter(params)) == "I_and" and params["I_or"].default is inspect.Parameter.empty:
                continue  # arrays only (salient)
            found[f"{f.__module__}.{name}"] = f
    return found


FUNCTIONS = _run_tau_functions()


@pytest.fixture(scope="module")
def run02():
    ds = synthetic_run(n_samples=6, n_vars=(3, 4), seed=3)
    ds.attrs["tau"] = 0.2
    return ds


@pytest.fixture(scope="module")
def shots02():
    ds = synthetic_run(n_samples=6, n_vars=(3, 4), shots=(0, 1), seed=3)
    ds.attrs["tau"] = 0.2
    return ds


#: the functions that need a run with a ``shot`` dim
NEEDS_SHOTS = {"few_shot", "few_shot_claim"}
#: result variables that are not numbers of the run (wall time)
NOT_RESULTS = {"seconds"}


#: the other arguments each function needs (small bootstrap sizes: fast)
EXTRA = {
    "compare_models": lambda ds: {
        "pairs": [tuple(str(m) for m in ds["model"].values[:2])],
        "n_boot": 20,
        "n_perm": 20,
    },
    "few_shot": lambda ds: {"n_boot": 20},
    "few_shot_claim": lambda ds: {"n_boot": 20, "n_perm": 20},
    "ips_vs_consistency": lambda ds: {},
    "representation_metrics": lambda ds: {"n_boot": 20},
    "representation_table": lambda ds: {"n_boot": 20},
    "case_table": lambda ds: {
        "model": str(ds["model"].values[0]),
        "sample": str(ds["sample"].values[0]),
        "templates": tuple(str(t) for t in ds["template"].values[:2]),
    },
    "class_table": lambda ds: {"models": [str(m) for m in ds["model"].values]},
    "run_floor": lambda ds: {"sigma": 0.05},
    "headline": lambda ds: {"n_boot": 20},
    "solver_sensitivity": lambda ds: {
        "solvers": ("canonical", "exact"),
        "progress": False,
        "models": [str(ds["model"].values[0])],
    },
}


def _values(obj):
    """What a result holds, comparable with ``==`` after flattening (numbers and text)."""
    if isinstance(obj, xr.Dataset):
        return _values(obj.drop_vars(NOT_RESULTS & set(obj.variables)).to_dataframe())
    if isinstance(obj, xr.DataArray):
        return _values(obj.to_series())
    if isinstance(obj, pd.DataFrame):
        return [obj.drop(columns=list(NOT_RESULTS & set(obj.columns))).to_string()]
    if isinstance(obj, pd.Series):
        return [obj.to_string()]
    if isinstance(obj, dict):
        return [x for k in sorted(obj, key=str) for x in (str(k), *_values(obj[k]))]
    if isinstance(obj, tuple | list):
        return [x for o in obj for x in _values(o)]
    if hasattr(obj, "__dataclass_fields__"):
        return _values({k: getattr(obj, k) for k in obj.__dataclass_fields__})
    if isinstance(obj, np.ndarray):
        return [np.array2string(obj, precision=12, threshold=10**9)]
    return [repr(obj)]


def test_the_functions_are_found():
    short = {k.rsplit(".", 1)[1] for k in FUNCTIONS}
    assert {"ips", "ips_pairs", "interaction_classes", "sample_ips", "per_sample_ips"} <= short
    assert {"headline", "noise_floor", "compare_models", "case_table"} <= short
    assert len(FUNCTIONS) >= 17


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_function_reads_the_runs_tau(name, run02, shots02):
    f = FUNCTIONS[name]
    short = name.rsplit(".", 1)[1]
    run02 = shots02 if short in NEEDS_SHOTS else run02
    assert inspect.signature(f).parameters["tau"].default is None, f"{name}: tau=None"
    kwargs = EXTRA.get(short, lambda ds: {})(run02)
    implicit = _values(f(run02, **kwargs))
    assert implicit == _values(f(run02, tau=0.2, **kwargs))
    assert implicit != _values(f(run02, tau=0.1, **kwargs))


def test_the_accessor_reads_the_runs_tau(run02):
    rows = run02.psens.to_frame(salient_only=True)
    pd.testing.assert_frame_equal(rows, run02.psens.to_frame(tau=0.2, salient_only=True))
    assert len(rows) < len(run02.psens.to_frame(tau=0.1, salient_only=True))
