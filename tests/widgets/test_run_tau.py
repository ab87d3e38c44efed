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


def _run(cls, tau: float | None = None):
    """A run the widget opens (a format-space widget needs the shipped format run)."""
    if cls.__name__ == "FormatSpace":
        import psens
        from tests.support import ROOT

        ds = psens.open_run(ROOT / "data" / "runs" / "formats.nc").load()
    else:
        ds = synthetic_run(n_samples=4, seed=1)
    if tau is not None:
        ds.attrs["tau"] = tau
    return ds


def test_every_tau_widget_is_covered():
    names = {cls.__name__ for cls in TAU_WIDGETS}
    assert {"OrderIPS", "InteractionClasses", "CaseStudy", "FactorCompare", "Sparsity"} <= names
    assert all(cls.class_traits().get("tau") is not None for cls in TAU_WIDGETS)


@pytest.mark.parametrize("cls", TAU_WIDGETS, ids=lambda c: c.__name__)
def test_widget_starts_at_the_runs_tau(cls):
    run_at_02 = _run(cls, 0.2)
    w = cls(run_at_02)
    assert w.tau == pytest.approx(0.2)
    if "tau" in w.controls:  # the slider shows it too
        assert w.controls["tau"].value == pytest.approx(0.2)
    assert cls(run_at_02, tau=0.05).tau == pytest.approx(0.05)  # an explicit τ wins
    assert cls(_run(cls)).tau == pytest.approx(0.1)
