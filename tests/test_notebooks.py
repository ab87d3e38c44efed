"""Every notebook in notebooks/ runs top to bottom at tiny size, within a time budget.

The kernel is ``python3``; jupyter_client starts it with this interpreter (the venv's),
so ipykernel must be installed in the environment that runs pytest. Budget: 60 s per
notebook on a 2-core machine (``PSENS_NB_BUDGET`` overrides it, in seconds).
"""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
BUDGET = float(os.environ.get("PSENS_NB_BUDGET", "60"))


def test_there_are_notebooks():
    names = {p.name[:2] for p in NOTEBOOKS}
    assert {"01", "02", "03", "04", "08"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stripped_and_parametrised(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and "parameters" in code[0].metadata.get("tags", [])
    assert "PSENS_SIZE" in code[0].source
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_at_tiny_size(path, monkeypatch):
    monkeypatch.setenv("PSENS_SIZE", "tiny")
    monkeypatch.setenv("PSENS_RUN", "")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=max(BUDGET, 60),
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert elapsed < BUDGET, f"{path.name} took {elapsed:.0f} s (budget {BUDGET:.0f} s)"
