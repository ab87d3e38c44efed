"""A run resolved once: ``psens.plan(config)`` checks the config and reads the dataset once,
``psens.run`` / ``psens run`` execute the resolved run, and dask workers receive it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import psens
import psens.runner as runner
from psens import datasets, store
from psens.cli import main
from psens.config import RunConfig
from psens.plan import ResolvedRun
from tests.test_runner import (
    _config,
    _toml,
    assets,  # noqa: F401  (the tiny model and dataset)
)

#: What the dask tasks received (:func:`_unit`: dask pickles a task's function by
#: reference, so a module-level spy is the one that runs).
_SHIPPED: list = []
_REAL_UNIT = runner._work_unit


def _unit(rr, m, samples, run_id=None):
    _SHIPPED.append(rr)
    return _REAL_UNIT(rr, m, samples, run_id)


def _spy(monkeypatch) -> dict[str, int]:
    """Count the dataset reads and the config checks from here on."""
    calls = {"load": 0, "check": 0}
    load, check = datasets.load, RunConfig.check

    def counted_load(*args, **kwargs):
        calls["load"] += 1
        return load(*args, **kwargs)

    def counted_check(self):
        calls["check"] += 1
        return check(self)

    monkeypatch.setattr(datasets, "load", counted_load)
    monkeypatch.setattr(RunConfig, "check", counted_check)
    return calls


def test_cli_run_checks_the_config_and_reads_the_dataset_once(assets, tmp_path, monkeypatch):  # noqa: F811
    """``psens run CONFIG``: one config check, one dataset read (a run with a shot pool,
    drawn from the same dataset), and a resumed run neither more."""
    path = _toml(_config(assets, tmp_path / "r.zarr", shots=[0, 1]), tmp_path / "c.toml")
    calls = _spy(monkeypatch)
    assert main(["run", str(path), "--no-progress"]) == 0
    assert calls == {"load": 1, "check": 1}
    assert main(["run", str(path), "--no-progress", "--scheduler", "local:1"]) == 0  # resumed
    assert calls == {"load": 2, "check": 2}


def test_plan_is_a_frozen_resolved_run(assets, tmp_path, monkeypatch):  # noqa: F811
    cfg = _config(assets, tmp_path / "r.zarr", batch_size=4, tau=0.2)
    calls = _spy(monkeypatch)
    rr = psens.plan(cfg)
    assert calls == {"load": 1, "check": 1}
    assert isinstance(rr, ResolvedRun) and psens.plan.resolve(rr) is rr
    assert (rr.tau, rr.batch, rr.device, rr.solvers) == (0.2, 4, "cpu", ("exact",))
    assert rr.normalization == rr.config.normalization and rr.scheduler is None
    assert len(rr.plan.items) == 3 and rr.plan.prompts.shape == (3, 1, 5)
    assert rr.cost["forward_passes"] == rr.plan.forward_passes()
    assert set(rr.loading) == {rr.models[0].name} and rr.scoring.batch_size == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        rr.batch = 8
    ds = psens.run(rr, progress=False, quiet=True)  # executes it: nothing read again
    assert calls == {"load": 1, "check": 1}
    assert (ds["status"].values == store.DONE).all()
    # resumed from the resolved run: the same arrays
    store.write_block(rr.config.store, 0, 1, {"status": store.PENDING}, run_id=ds.attrs["run_id"])
    again = psens.run(rr, progress=False, quiet=True)
    for name in ("v", "I_and", "I_or", "p_target"):
        np.testing.assert_array_equal(again[name].values, ds[name].values)


def test_dask_blocks_receive_the_resolved_run(assets, tmp_path, monkeypatch):  # noqa: F811
    """The dask path sends the resolved run to its tasks, not the config: no task checks a
    config or reads the dataset (an in-process cluster, so the spies see the tasks)."""
    pytest.importorskip("distributed")
    import dask.distributed

    real_cluster = dask.distributed.LocalCluster

    def in_process(**kwargs):
        return real_cluster(
            n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None
        )

    monkeypatch.setattr(dask.distributed, "LocalCluster", in_process)
    _SHIPPED.clear()
    monkeypatch.setattr(runner, "_work_unit", _unit)
    calls = _spy(monkeypatch)
    cfg = _config(assets, tmp_path / "d.zarr", scheduler="local:1")
    ds = psens.run(cfg, progress=False, quiet=True)
    assert (ds["status"].values == store.DONE).all()
    assert len(_SHIPPED) == 3 and all(isinstance(rr, ResolvedRun) for rr in _SHIPPED)
    assert calls == {"load": 1, "check": 1}  # the run's own, none in the blocks
    serial = psens.run(
        _config(assets, tmp_path / "s.zarr"), progress=False, quiet=True
    )  # the same numbers as a serial run
    for name in ("v", "I_and", "I_or"):
        np.testing.assert_allclose(ds[name].values, serial[name].values, equal_nan=True)
