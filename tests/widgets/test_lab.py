"""The JupyterLab pre-save hook (psens.widgets.lab.keep_stored_metadata) through the contents
manager JupyterLab uses with jupytext: a tracked notebook run and saved is the tracked file."""

from __future__ import annotations

import shutil

import nbformat
import pytest

from psens.widgets.lab import keep_stored_metadata, strip_outputs
from tests.support import ROOT, git_checkout, git_status

#: jupyter_server validates a configured hook twice and warns that it replaces itself
pytestmark = pytest.mark.filterwarnings("ignore:Overriding existing pre_save_hook")

NAME = "00_start_here"
HOOK = "psens.widgets.lab.keep_stored_metadata"


def _manager(root):
    jupytext = pytest.importorskip("jupytext")
    return jupytext.TextFileContentsManager(root_dir=str(root), pre_save_hook=keep_stored_metadata)


def _run(model) -> None:
    """What running every cell in JupyterLab leaves in the model: outputs, counts, the
    kernel's language_info, cell metadata JupyterLab adds."""
    nb = model["content"]
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.9"}
    for i, cell in enumerate(nb["cells"]):
        cell["metadata"]["scrolled"] = True
        cell["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [nbformat.v4.new_output("stream", name="stdout", text=f"{i}\n")]


def _outputs(path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(len(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code")


def test_running_and_saving_a_tracked_notebook_leaves_git_clean(tmp_path):
    root = git_checkout(tmp_path, [NAME])
    cm = _manager(root)
    path = f"notebooks/{NAME}.ipynb"
    model = cm.get(path)
    _run(model)
    assert any(c.get("outputs") for c in model["content"]["cells"])
    cm.save(model, path)
    assert git_status(root) == ""
    assert (root / path).read_bytes() == (ROOT / path).read_bytes()


def test_a_notebook_git_does_not_track_keeps_its_outputs(tmp_path):
    root = git_checkout(tmp_path, [NAME])
    shutil.copy(root / "notebooks" / f"{NAME}.ipynb", root / "mine.ipynb")
    cm = _manager(root)
    model = cm.get("mine.ipynb")
    _run(model)
    cm.save(model, "mine.ipynb")
    assert _outputs(root / "mine.ipynb") > 0
    stored = nbformat.read(root / "mine.ipynb", as_version=4).metadata
    assert stored["language_info"] == {"name": "python"}  # the metadata is still the stored one


def test_without_git_a_notebook_keeps_its_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "nb.ipynb").write_text((ROOT / "notebooks" / f"{NAME}.ipynb").read_text())
    cm = _manager(tmp_path)
    model = cm.get("nb.ipynb")
    _run(model)
    cm.save(model, "nb.ipynb")
    assert _outputs(tmp_path / "nb.ipynb") > 0


def test_strip_outputs_keeps_tags_and_jupytext_spacing_only():
    cell = nbformat.v4.new_code_cell("x = 1", execution_count=3)
    cell["outputs"] = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    cell["metadata"] = {"tags": ["parameters"], "lines_to_next_cell": 2, "scrolled": True}
    md = nbformat.v4.new_markdown_cell("# t", metadata={"tags": [], "jupyter": {"x": 1}})
    nb = {"cells": [cell, md]}
    strip_outputs(nb)
    assert cell["outputs"] == [] and cell["execution_count"] is None
    assert cell["metadata"] == {"tags": ["parameters"], "lines_to_next_cell": 2}
    assert md["metadata"] == {}


def test_make_lab_and_the_browser_harness_install_the_hook():
    flag = f"--ContentsManager.pre_save_hook={HOOK}"
    assert flag in (ROOT / "Makefile").read_text()
    assert flag in (ROOT / "tests" / "browser" / "harness.py").read_text()


def test_other_files_are_untouched():
    model = {"type": "file", "content": "text"}
    keep_stored_metadata(model, path="notebooks/00_start_here.py")
    assert model == {"type": "file", "content": "text"}
