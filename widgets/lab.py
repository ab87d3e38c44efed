"""What a notebook file of the project holds besides its cells, written once: the stored
``.ipynb`` metadata, and the JupyterLab save hook that keeps it.

JupyterLab fills a notebook's ``language_info`` from the running kernel (the Python patch
version among it) and jupytext adds its pairing settings, so a notebook opened and saved
would differ from the tracked file. ``make lab`` (and the browser tests) start JupyterLab
with :func:`keep_stored_metadata` as the contents manager's pre-save hook::

    jupyter lab --ContentsManager.pre_save_hook=psens.widgets.lab.keep_stored_metadata

so opening, running and saving a tracked notebook (by hand or by autosave) leaves ``git
status`` clean: the hook also drops its outputs, execution counts and the cell metadata the
repository does not store. A notebook git does not track (one you create) keeps its outputs.
``scripts/notebooks.py`` writes the same metadata (:func:`notebook_metadata`,
:func:`stored_cell_metadata`).
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

__all__ = [
    "NOTEBOOK_METADATA",
    "keep_stored_metadata",
    "notebook_metadata",
    "stored_cell_metadata",
    "strip_outputs",
]

#: The metadata of every stored notebook (kernel, language, jupytext pairing).
NOTEBOOK_METADATA: dict[str, Any] = {
    "jupytext": {
        "cell_metadata_filter": "tags,-all",
        "formats": "ipynb,py:percent",
        "notebook_metadata_filter": "-all",
    },
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def notebook_metadata() -> dict[str, Any]:
    """A fresh copy of :data:`NOTEBOOK_METADATA`."""
    return copy.deepcopy(NOTEBOOK_METADATA)


#: the cell metadata a stored notebook keeps: tags, and the spacing jupytext records
STORED_CELL_KEYS = ("tags", "lines_to_next_cell")


def stored_cell_metadata(meta: dict) -> dict[str, Any]:
    """The part of a cell's metadata that the repository stores (:data:`STORED_CELL_KEYS`;
    empty tags dropped): what JupyterLab adds (``execution``, ``scrolled``, ``jupyter``) is not."""
    out: dict[str, Any] = {}
    if meta.get("tags"):
        out["tags"] = list(meta["tags"])
    if "lines_to_next_cell" in meta:
        out["lines_to_next_cell"] = meta["lines_to_next_cell"]
    return out


def strip_outputs(content: dict) -> None:
    """Make a notebook's cells (nbformat 4 JSON, changed in place) as stored: code cells
    without outputs or execution counts, every cell with :func:`stored_cell_metadata`."""
    for cell in content.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell["metadata"] = stored_cell_metadata(cell.get("metadata", {}))


def _tracked(root: str | Path | None, path: str) -> bool:
    """Whether git tracks ``path`` (relative to ``root``); False without git or a repository."""
    if root is None or not path:
        return False
    try:
        run = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--error-unmatch", "--", path],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return run.returncode == 0


def keep_stored_metadata(
    model: dict, path: str = "", contents_manager: Any = None, **kwargs: Any
) -> None:
    """Jupyter server pre-save hook: a notebook is saved with :data:`NOTEBOOK_METADATA`
    (what the kernel and jupytext add is dropped); a notebook git tracks is also saved
    without outputs (:func:`strip_outputs`), so running and saving it leaves ``git status``
    clean; other files are untouched.

    ``path`` is relative to ``contents_manager.root_dir`` (the server's root), as the
    server passes them."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    meta = model["content"].setdefault("metadata", {})
    for key in ("jupytext", "kernelspec", "language_info"):
        meta.pop(key, None)
    meta.update(notebook_metadata())
    if _tracked(getattr(contents_manager, "root_dir", None), path.strip("/")):
        strip_outputs(model["content"])
