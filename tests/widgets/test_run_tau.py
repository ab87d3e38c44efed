"""Every widget with a τ opens at the run's own τ (not a default of its own)."""

from __future__ import annotations

import pytest

import psens.widgets as W
from psens.synthetic import synthetic_run

TAU_WIDGETS = sorted(
    (
        getattr(W, name)
        for name in W.__all__
        if isinstance(getattr(W, name), type)
        and issubclass(getattr(W, name), W.ChartWidget)
        and getattr(W, name) is not W.ChartWidget
    ),
    key=lambda cls: cls.__name__,
)


@pytest.fixture(scope="module")
def run_at_02():
    ds = synthetic_run(n_samples=4, seed=1)
    ds.attrs["tau"] = 0.2
    return ds


def test_every_tau_widget_is_covered():
    names = {cls.__name__ for cls in TAU_WIDGETS}
    assert {"OrderIPS", "InteractionClasses", "CaseStudy", "FactorCompare", "Sparsity"} <= names
    assert all(cls.class_traits().get("tau") is not None for cls in TAU_WIDGETS)


@pytest.mark.parametrize("cls", TAU_WIDGETS, ids=lambda c: c.__name__)
def test_widget_starts_at_the_runs_tau(cls, run_at_02):
    w = cls(run_at_02)
    assert w.tau == pytest.approx(0.2)
    if "tau" in w.controls:  # the slider shows it too
        assert w.controls["tau"].value == pytest.approx(0.2)
    assert cls(run_at_02, tau=0.05).tau == pytest.approx(0.05)  # an explicit τ wins
    untouched = synthetic_run(n_samples=4, seed=1)
    assert cls(untouched).tau == pytest.approx(0.1)
