"""A run's settings are read back in one place (psens.settings) and a model entry is
resolved once (psens.models.spec)."""

from __future__ import annotations

import json

import pytest

import psens
from psens.interactions import SolverSettings
from psens.models.spec import ModelSpec
from psens.settings import DEFAULT_TAU, run_settings
from psens.synthetic import synthetic_run


def test_solver_settings_round_trip_through_attrs():
    for s in (
        SolverSettings(),
        SolverSettings(method="exact", qthres=0.02, tol=1e-7),
        SolverSettings(method="sgd", steps=300, lr=1e-3, momentum=0.5),
        SolverSettings(method="sgd", preset="paper"),
    ):
        assert SolverSettings.from_attrs(s.to_attrs()) == s
    # a store writes None as "" and numbers may come back as numpy scalars
    import numpy as np

    attrs = {**SolverSettings(method="sgd", steps=300).to_attrs(), "solver_preset": ""}
    attrs["solver_steps"] = np.int64(300)
    back = SolverSettings.from_attrs(attrs)
    assert back.steps == 300 and back.preset is None and back.method == "sgd"
    # another solver keeps only what every solver takes
    other = SolverSettings.from_attrs(attrs | {"solver_qthres": 0.03}, method="canonical")
    assert other == SolverSettings(method="canonical", qthres=0.03)


def test_run_settings_reads_tau_solvers_precision_and_floor():
    ds = synthetic_run(n_samples=2, seed=0)
    assert run_settings(ds).tau == DEFAULT_TAU
    ds.attrs.update(
        {
            "tau": 0.2,
            **SolverSettings(method="sgd", steps=50).to_attrs(),
            "config": json.dumps({"dtype": "bf16"}),
            "noise_floor": "float16",
        }
    )
    s = run_settings(ds)
    assert s.tau == 0.2 and s.solver == "sgd" and s.settings().steps == 50
    assert s.dtype == "bfloat16" and s.noise_floor == "float16"
    assert s.and_or_kwargs()["steps"] == 50 and "method" not in s.and_or_kwargs()
    # a table built from the run carries its attrs: the same reader answers
    assert run_settings(ds.attrs).tau == 0.2
    assert run_settings({}).tau == DEFAULT_TAU and run_settings({}).noise_floor is None


def test_run_settings_of_a_run_with_several_solvers():
    ds = synthetic_run(n_samples=2, seed=0)
    each = {m: SolverSettings(method=m).to_attrs() for m in ("canonical", "sgd")}
    each["sgd"]["solver_steps"] = 77
    ds = ds.expand_dims(solver=["canonical", "sgd"])
    ds.attrs.update({**each["canonical"], "solvers": json.dumps(each)})
    s = run_settings(ds)
    assert s.solvers == ("canonical", "sgd") and s.settings("sgd").steps == 77
    assert psens.ips.solver_names(ds) == ["canonical", "sgd"]


def test_the_summary_and_the_floor_use_the_runs_tau():
    from psens.ips import tables
    from psens.runner import summarize

    ds = synthetic_run(n_samples=4, seed=2)
    ds.attrs["tau"] = 0.3
    text = summarize(ds)
    expected = tables.per_sample_ips(ds, 0.3).isel(model=0).values[:, 0].mean()
    assert f"IPS {expected:.3f}" in text
    assert f"IPS {tables.per_sample_ips(ds, 0.1).isel(model=0).values[:, 0].mean():.3f}" not in text


def test_model_spec_resolves_local_and_served_entries_once():
    local = ModelSpec.from_entry("smollm2-135m-instruct")
    assert not local.is_served and local.identity() == "smollm2-135m-instruct"
    assert local.source["kind"] == "gguf"
    entry = {
        "name": "srv",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "tokenizer": "smollm2-135m-instruct",
        "concurrency": 2,
    }
    served = ModelSpec.from_entry(entry)
    assert served.is_served and served.name == "srv"
    assert served.identity() == {"name": "srv", "model": "m", "tokenizer": "smollm2-135m-instruct"}
    with pytest.raises(ValueError, match="unknown model 'no-such-model'"):
        ModelSpec.from_entry("no-such-model")
    with pytest.raises(ValueError, match="unknown tokenizer"):
        ModelSpec.from_entry({**entry, "tokenizer": "no-such-tokenizer"})
    with pytest.raises(ValueError, match="must be a name or a served-model table"):
        ModelSpec.from_entry(3)


def test_a_config_resolves_each_model_once(monkeypatch):
    from psens.config import RunConfig
    from psens.models import loading

    calls = []
    real = loading.resolve_source

    def counting(name, cache_dir=None):
        calls.append(str(name))
        return real(name, cache_dir)

    monkeypatch.setattr(loading, "resolve_source", counting)
    cfg = RunConfig.from_dict(
        {"store": "x.zarr", "models": ["smollm2-135m-instruct"], "dataset": "arc-challenge"}
    )
    cfg.check()
    cfg.fingerprint()
    _ = cfg.model_names, cfg.model_specs
    assert calls == ["smollm2-135m-instruct"]
    cfg.models = ["gemma3-270m"]  # a changed entry is resolved anew
    assert cfg.model_names == ["gemma3-270m"]
