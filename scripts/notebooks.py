"""Keep every notebook's two files in sync.

Each notebook is a pair in ``notebooks/``: ``NN_name.py`` (jupytext py:percent — the file
that is reviewed and linted) and ``NN_name.ipynb`` (the same cells, outputs stripped, for
Jupyter). Edit either one, then::

    python scripts/notebooks.py sync    # the newer file of each pair rewrites the other
    python scripts/notebooks.py check   # exit 1 and name the pairs that differ

(``make notebooks`` runs ``sync``; the test suite runs ``check``.) JupyterLab with jupytext
installed saves both files at once (``jupytext.toml`` declares the pairing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]


def cells(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    """What a pair must agree on: each cell's type, source and tags."""
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", ()))) for c in nb.cells]


def read_py(path: Path):
    return jupytext.read(path, fmt="py:percent")


def render_ipynb(nb, path: Path) -> str:
    """``nb`` as the text of a stored notebook: no outputs, the stored metadata
    (:data:`psens.widgets.lab.NOTEBOOK_METADATA`), stable cell ids, and the cell spacing
    jupytext records (``lines_to_next_cell``), so a notebook saved from JupyterLab is the
    same file."""
    from psens.widgets.lab import notebook_metadata, stored_cell_metadata

    out = nbformat.v4.new_notebook()
    out.metadata.update(notebook_metadata())
    for i, cell in enumerate(nb.cells):
        meta = stored_cell_metadata(cell.metadata)
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(cell.source, metadata=meta)
        else:
            new = nbformat.v4.new_markdown_cell(cell.source, metadata=meta)
        new["id"] = f"{path.stem[:2]}-{i:02d}"
        out.cells.append(new)
    nbformat.validate(out)
    return nbformat.writes(out) + "\n"


def write_ipynb(nb, path: Path) -> None:
    """Write ``nb`` as :func:`render_ipynb` renders it."""
    path.write_text(render_ipynb(nb, path))


def write_py(nb, path: Path) -> None:
    """``nb`` as py:percent text without a metadata header (cell tags kept)."""
    nb = nbformat.from_dict(nb)
    nb.metadata = {
        "jupytext": {"notebook_metadata_filter": "-all", "cell_metadata_filter": "tags,-all"}
    }
    jupytext.write(nb, path, fmt="py:percent")


def pairs(folder: Path) -> list[tuple[Path, Path]]:
    stems = sorted({p.stem for p in folder.glob("*.py")} | {p.stem for p in folder.glob("*.ipynb")})
    return [(folder / f"{s}.py", folder / f"{s}.ipynb") for s in stems]


def check(folder: Path) -> list[str]:
    """Problems of the pairs in ``folder`` (empty when every pair agrees)."""
    problems = []
    for py, ipynb in pairs(folder):
        if not py.exists() or not ipynb.exists():
            missing = py if not py.exists() else ipynb
            problems.append(f"{missing.name} is missing (run: python scripts/notebooks.py sync)")
            continue
        nb = nbformat.read(ipynb, as_version=4)
        if cells(read_py(py)) != cells(nb):
            problems.append(
                f"{py.name} and {ipynb.name} differ (edit one, then: python scripts/notebooks.py"
                " sync)"
            )
        if any(c.get("outputs") or c.get("execution_count") for c in nb.cells):
            problems.append(f"{ipynb.name} holds outputs (sync strips them)")
        elif ipynb.read_text() != render_ipynb(read_py(py), ipynb):
            problems.append(
                f"{ipynb.name} holds other metadata than the stored form (run: python "
                "scripts/notebooks.py sync)"
            )
    return problems


def sync(folder: Path) -> None:
    """Rewrite the older file of every pair from the newer one (a lone file makes its pair)."""
    for py, ipynb in pairs(folder):
        if py.exists() and ipynb.exists():
            nb = nbformat.read(ipynb, as_version=4)
            if cells(read_py(py)) == cells(nb):
                if ipynb.read_text() != render_ipynb(read_py(py), ipynb):
                    write_ipynb(read_py(py), ipynb)  # same cells: outputs, metadata
                continue
        if py.exists() and (not ipynb.exists() or py.stat().st_mtime >= ipynb.stat().st_mtime):
            write_ipynb(read_py(py), ipynb)
            print(f"{py.name} -> {ipynb.name}")
        else:
            nb = nbformat.read(ipynb, as_version=4)
            write_py(nb, py)
            write_ipynb(nb, ipynb)  # strip outputs, stable ids
            print(f"{ipynb.name} -> {py.name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("sync", "check"))
    parser.add_argument("--dir", type=Path, default=ROOT / "notebooks")
    args = parser.parse_args(argv)
    if args.action == "sync":
        sync(args.dir)
        return 0
    problems = check(args.dir)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
