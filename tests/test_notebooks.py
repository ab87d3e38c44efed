"""Every notebook is a synced pair (.py + .ipynb) and runs top to bottom without an error
cell, in time: each IPS notebook (00–08, 12) on three runs — the shipped real run
(``data/runs/arc.nc``, or a synthetic stand-in of its layout while it is absent), a real
one-model run like ``runs/demo.zarr`` and the tiny synthetic run — the others at tiny size.

The kernel is ``python3``; jupyter_client starts it with this interpreter (the venv's),
so ipykernel must be installed in the environment that runs pytest. Budget: 60 s per
notebook and run on a 2-core machine (``PSENS_NB_BUDGET`` overrides it, in seconds).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.support import ROOT, shipped_standin, single_model_run

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: the IPS notebooks, run on every kind of run
IPS_NOTEBOOKS = [p for p in NOTEBOOKS if p.name[:2] in {f"{k:02d}" for k in (*range(9), 12)}]
BUDGET = float(os.environ.get("PSENS_NB_BUDGET", "60"))
SHIPPED = ROOT / "data" / "runs" / "arc.nc"


SYNC = [sys.executable, str(ROOT / "scripts" / "notebooks.py")]


def test_there_are_notebooks():
    names = {p.name[:2] for p in NOTEBOOKS}
    assert {"01", "02", "03", "04", "08"} <= names


def test_every_notebook_is_a_py_ipynb_pair_in_sync():
    assert {p.stem for p in NOTEBOOKS} == {p.stem for p in (ROOT / "notebooks").glob("*.py")}
    out = subprocess.run([*SYNC, "check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def _sync_script():
    """scripts/notebooks.py as a module: its ``main`` runs in this process (the command line
    itself is run by the test above), so each call does not re-import psens."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_psens_notebooks", SYNC[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("side", ["py", "ipynb", "missing"])
def test_the_sync_check_fails_when_one_side_is_edited_alone(tmp_path, side, capsys):
    src = ROOT / "notebooks" / "01_interactions_faithfulness"
    for ext in ("py", "ipynb"):
        shutil.copy(f"{src}.{ext}", tmp_path / f"01_x.{ext}")
    script = _sync_script()
    check = ["check", "--dir", str(tmp_path)]
    assert script.main(check) == 0
    if side == "py":
        path = tmp_path / "01_x.py"
        path.write_text(path.read_text().replace("import pandas as pd", "import pandas as pd  # x"))
    elif side == "ipynb":
        nb = nbformat.read(tmp_path / "01_x.ipynb", as_version=4)
        nb.cells[-1].source += "\nprint('edited in Jupyter')"
        nbformat.write(nb, tmp_path / "01_x.ipynb")
    else:
        (tmp_path / "01_x.ipynb").unlink()
    capsys.readouterr()
    assert script.main(check) == 1 and "01_x" in capsys.readouterr().err
    # sync repairs it, whichever side was edited (the newer file wins)
    assert script.main(["sync", "--dir", str(tmp_path)]) == 0
    assert script.main(check) == 0
    assert not (tmp_path / "01_x.py").read_text().startswith("# ---")  # no metadata header


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stripped_and_parametrised(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and "parameters" in code[0].metadata.get("tags", [])
    assert "PSENS_SIZE" in code[0].source
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)


def _errors(nb, cells=None) -> list[str]:
    cells = nb.cells if cells is None else cells
    return [
        f"{o.get('ename')}: {o.get('evalue')}"
        for c in cells
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]


def _execute(nb, path, timeout: float) -> float:
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=max(timeout, 60),
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


OTHER_NOTEBOOKS = [p for p in NOTEBOOKS if p not in IPS_NOTEBOOKS]


@pytest.mark.parametrize("path", OTHER_NOTEBOOKS, ids=[p.stem for p in OTHER_NOTEBOOKS])
def test_notebook_runs_at_tiny_size(path, monkeypatch):
    monkeypatch.setenv("PSENS_SIZE", "tiny")
    monkeypatch.setenv("PSENS_RUN", "")
    nb = nbformat.read(path, as_version=4)
    elapsed = _execute(nb, path, BUDGET)
    assert not _errors(nb)
    assert elapsed < BUDGET, f"{path.name} took {elapsed:.0f} s (budget {BUDGET:.0f} s)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """``{name: (PSENS_RUN, PSENS_SIZE)}`` of the three runs every IPS notebook must handle."""
    folder = tmp_path_factory.mktemp("notebook-runs")
    shipped = SHIPPED if SHIPPED.exists() else shipped_standin(folder / "arc.nc")
    return {
        "tiny": ("", "tiny"),
        "single-model": (str(single_model_run(folder / "single")), ""),
        "shipped": (str(shipped), ""),
    }


@pytest.mark.parametrize("path", IPS_NOTEBOOKS, ids=[p.stem for p in IPS_NOTEBOOKS])
def test_ips_notebook_runs_on_every_kind_of_run(path, runs):
    """One kernel runs the notebook once per run; ``%reset -f`` between the runs, so no
    variable of one run can hide a missing one of the next."""
    original = nbformat.read(path, as_version=4)
    nb = nbformat.v4.new_notebook(metadata=original.metadata)
    spans = {}
    for name, (run, size) in runs.items():
        setup = f"%reset -f\nimport os\nos.environ.update(PSENS_RUN={run!r}, PSENS_SIZE={size!r})"
        start = len(nb.cells)
        nb.cells += [nbformat.v4.new_code_cell(setup), *copy.deepcopy(original.cells)]
        spans[name] = (start, len(nb.cells))
    elapsed = _execute(nb, path, BUDGET * len(runs))
    for name, (a, b) in spans.items():
        assert not _errors(nb, nb.cells[a:b]), (name, _errors(nb, nb.cells[a:b]))
    budget = BUDGET * len(runs)
    assert elapsed < budget, f"{path.name} took {elapsed:.0f} s on {len(runs)} runs"


def test_prosa_notebook_shows_a_real_pss_run_without_a_synthetic_label(monkeypatch, tmp_path):
    """Notebook 09 on a real PSS run (the tiny random model, ``n_vars = 0``): no synthetic
    label anywhere; with ``PSENS_SIZE=tiny`` (the tiny-size test above) it is labelled."""
    import psens
    from tests.support import write_tiny_dataset, write_tiny_model

    fields = (("question", "q"), ("option:A", "a"), ("option:B", "b"), ("option:C", "c"))
    names = []
    for k, layout in enumerate(
        ("{q}\nA. {a}\nB. {b}\nC. {c}\nAnswer:", "Q: {q} A. {a} B. {b} C. {c}")
    ):
        t = psens.prompts.Template(f"nb-lay{k}", layout=layout, layout_fields=fields)
        psens.prompts.register(t, overwrite=True)
        names.append(t.name)
    store = tmp_path / "pss.zarr"
    psens.run(
        {
            "store": str(store),
            "models": [str(write_tiny_model(tmp_path / "model"))],
            "dataset": "arc-challenge",
            "dataset_path": str(write_tiny_dataset(tmp_path / "data.jsonl")),
            "samples": 4,
            "templates": names,
            "n_vars": 0,
            "shots": [0, 1],
            "threads": 1,
            "generate": False,
        },
        progress=False,
        quiet=True,
    )
    run = psens.store.to_netcdf(psens.open_run(store), tmp_path / "pss.nc")
    path = ROOT / "notebooks" / "09_prosa_pss.ipynb"
    monkeypatch.setenv("PSENS_SIZE", "")
    monkeypatch.setenv("PSENS_RUN", str(run))
    nb = nbformat.read(path, as_version=4)
    _execute(nb, path, BUDGET)
    assert not _errors(nb)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if "text" in o)
    assert "pss: models [" in text and "0-shot PSS" in text
    assert "synthetic" not in text.lower()


#: the notebooks of the output-level methods, the shipped runs each opens by default and
#: what its printed output must hold
METHOD_RUNS = {
    "09_prosa_pss": (
        ("pss-arc.nc", "pss-csqa.nc", "pss-alpaca.nc"),
        ("ARC-Challenge: models [", "CommonsenseQA: models [", "subjective PSS run (alpaca)"),
    ),
    "10_eas": (("eas.nc",), ("EAS run:",)),
    "11_dbsa": (("dbsa.nc",), ("DBSA run:",)),
}


@pytest.mark.parametrize("name", sorted(METHOD_RUNS))
def test_method_notebook_opens_its_shipped_run_by_default(name, monkeypatch):
    files, expected = METHOD_RUNS[name]
    for file in files:
        shipped = ROOT / "data" / "runs" / file
        assert shipped.is_file(), f"{shipped} is missing: make shipped-run writes it"
    monkeypatch.setenv("PSENS_SIZE", "")
    monkeypatch.setenv("PSENS_RUN", "")
    path = ROOT / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    elapsed = _execute(nb, path, BUDGET)
    assert not _errors(nb)
    text = "".join(
        o.get("text", "")
        for c in nb.cells
        for o in c.get("outputs", [])
        if o.get("name") == "stdout"
    )
    assert "synthetic" not in text.lower()
    for needle in expected:
        assert needle in text
    assert elapsed < BUDGET, f"{path.name} took {elapsed:.0f} s (budget {BUDGET:.0f} s)"


# ------------------------------------------------------------ notebook 00 as a start


@pytest.fixture(scope="module")
def start_here() -> list:
    """Notebook 00 run top to bottom on its defaults (the shipped letters and cloze runs):
    its cells, outputs included."""
    path = ROOT / "notebooks" / "00_start_here.ipynb"
    nb = nbformat.read(path, as_version=4)
    setup = (
        "import os, sys\nos.environ.update(PSENS_RUN='', PSENS_SIZE='')\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import tests.conftest  # psens.widgets from this checkout, as the tests import it"
    )
    nb.cells.insert(0, nbformat.v4.new_code_cell(setup))
    _execute(nb, path, BUDGET)
    assert not _errors(nb), _errors(nb)
    return nb.cells[1:]


def _reading(cells) -> list[tuple[str, str]]:
    """What a reader meets, in order: ``("markdown", source)`` and ``("output", text)`` (a
    printed stream or a display's plain text)."""
    parts = []
    for cell in cells:
        if cell.cell_type == "markdown":
            parts.append(("markdown", cell.source))
        for o in cell.get("outputs", []):
            text = o.get("text") or o.get("data", {}).get("text/plain", "")
            parts.append(("output", text))
    return parts


def _table_rows(text: str) -> dict[str, list[str]]:
    """A small DataFrame's plain text as ``{first column: the other columns}``."""
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}


def _answers_shown(cells, run, sample: str) -> None:
    """Some display of notebook 00 is the table of ``run``'s answers to ``sample``: one row
    per model, one column per template, the predictions in template order."""
    want = run["prediction"].sel(sample=sample)
    templates = [str(t) for t in run["template"].values]
    for _, text in _reading(cells):
        rows = _table_rows(text)
        if rows.get("template") == templates:
            for model in run["model"].values:
                assert rows[str(model)] == [str(x).strip() for x in want.sel(model=model).values]
            return
    raise AssertionError(f"notebook 00 shows no table of the answers to {sample}")


def test_notebook_00_shows_one_item_whole(start_here):
    """The question, its options, the right answer and each model's answer under each
    template, of the first item of the shipped letters run and of the cloze run."""
    import psens
    from psens.datasets import load

    text = "\n".join(t for kind, t in _reading(start_here) if kind == "output")
    for file, formulation in (("arc.nc", "letters"), ("cloze-arc-easy.nc", "cloze")):
        run = psens.open_run(ROOT / "data" / "runs" / file)
        if "shot" in run.dims:
            run = run.sel(shot=run["shot"].values[0])
        sample = str(run["sample"].values[0])
        item = next(x for x in load(run.attrs["dataset"], "validation") if x.id == sample)
        assert item.question in text, formulation
        for _, option in item.options:
            assert option in text, (formulation, option)
        right = str(run["target"].sel(sample=sample).values).strip()
        assert right == item.answer
        label = "right answer:" if formulation == "letters" else "right option:"
        assert f"{label} {right}" in " ".join(text.split()), formulation
        _answers_shown(start_here, run, sample)


def test_notebook_00_draws_a_chart(start_here):
    charts = [
        o
        for c in start_here
        for o in c.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        and "altair" in o["data"].get("text/plain", "")
    ]
    assert len(charts) >= 1


#: each term of the verdict and the sentence that explains it in notebook 00
TERMS = {
    r"\bfloor\b": "The **noise floor** is",
    r"IPS − floor": "**IPS − floor** is",
    r"\bd_z\b": "**d_z** is",
    r"(?<![\w\\^$.\-])p(?![\w(])": "**p** is",
}


@pytest.mark.parametrize("term", list(TERMS))
def test_notebook_00_explains_each_term_where_it_first_appears(start_here, term):
    """A reader of notebook 00 (its Markdown, headings aside, and its outputs, in order) meets
    floor, IPS − floor, d_z and p first in the sentence that explains it."""
    import re

    for kind, text in _reading(start_here):
        lines = [ln for ln in text.splitlines() if not (kind == "markdown" and ln.startswith("#"))]
        first = next((ln for ln in lines if re.search(term, ln)), None)
        if first is not None:
            assert kind == "markdown" and TERMS[term] in first, (term, kind, first)
            return
    raise AssertionError(f"notebook 00 never uses {term}")


def test_notebook_00_tells_letters_then_cloze(start_here):
    """The workshop's story on the shipped runs: the same models asked for a letter are at
    chance and no finding; in the cloze form they are above chance, and what IPS finds there
    (its verdict, the paper's order claim) is printed — each from the one verdict rule."""
    import psens
    import psens.widgets as pw
    from psens.ips.verdicts import findings_models

    text = "\n".join(t for kind, t in _reading(start_here) if kind == "output")
    html = "".join(
        o["data"].get("text/html", "")
        for c in start_here
        for o in c.get("outputs", [])
        if "data" in o
    )
    assert "formulation" in html
    for file, above in (("arc.nc", False), ("cloze-arc-easy.nc", True)):
        run = psens.open_run(ROOT / "data" / "runs" / file)
        if "shot" in run.dims:
            run = run.sel(shot=run["shot"].values[0])
        head = run.psens.headline()
        why = findings_models(run, heads=head)
        for r in head[head["order"] == "all"].itertuples():
            assert (r.accuracy > r.chance) is above, (file, r.model)
            assert (why[r.model] == "") is above, (file, r.model, why[r.model])
            verdict = f"not a finding — {why[r.model]}" if why[r.model] else "a finding"
            assert f">{verdict}</td>" in html, (file, r.model, verdict)  # whole, not cut
        if above:
            for line in pw.order_verdicts(head, run):
                assert line in text, line
