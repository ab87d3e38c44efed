"""What a notebook file of the project holds besides its cells, written once: the stored
``.ipynb`` metadata, and the JupyterLab save hook that keeps it.

JupyterLab fills a notebook's ``language_info`` from the running kernel (the Python patch
version among it) and jupytext adds its pairing settings, so a notebook opened and saved
would differ from the tracked file. ``make lab`` (and the browser tests) start JupyterLab
with :func:`keep_stored_metadata` as the contents manager's pre-save hook::

    jupyter lab --ContentsManager.pre_save_hook=psens.widgets.lab.keep_stored_metadata

so opening and saving a notebook leaves ``git status`` clean; ``scripts/notebooks.py``
writes the same metadata (:func:`notebook_metadata`).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["NOTEBOOK_METADATA", "keep_stored_metadata", "notebook_metadata"]

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


def keep_stored_metadata(model: dict, **kwargs: Any) -> None:
    """Jupyter server pre-save hook: a notebook is saved with :data:`NOTEBOOK_METADATA`
    (what the kernel and jupytext add is dropped); other files are untouched."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    meta = model["content"].setdefault("metadata", {})
    for key in ("jupytext", "kernelspec", "language_info"):
        meta.pop(key, None)
    meta.update(notebook_metadata())
