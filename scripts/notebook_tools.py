"""Shared by the notebook generators (``make_*notebook*.py``): metadata, cell ids, writing.

The notebooks in ``notebooks/`` are generated files: each generator holds the cell texts,
this module turns them into validated, output-free notebooks with stable cell ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import nbformat
from nbformat.v4 import new_notebook

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "notebooks"

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def notebook(cells: Sequence, prefix: str) -> nbformat.NotebookNode:
    """A validated notebook of ``cells`` with the python3 kernel and ids ``<prefix>-NN``."""
    nb = new_notebook(cells=list(cells))
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{prefix}-{i:02d}"
    nbformat.validate(nb)
    return nb


def write_all(notebooks: dict[str, Callable[[], Sequence]], names: Sequence[str] = ()) -> int:
    """Write the notebooks ``{file name: cells()}`` (all, or those in ``names``) to OUT."""
    OUT.mkdir(exist_ok=True)
    for name in names or list(notebooks):
        path = OUT / name
        nbformat.write(notebook(notebooks[name](), name[:2]), path)
        print("wrote", path.relative_to(ROOT))
    return 0
