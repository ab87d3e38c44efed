"""Every ```python block of README.md and of docs/*.md runs as written, each in a fresh
interpreter, in time; the example config of the README's shell blocks parses and is small;
the README stays a front door (at most 250 lines) whose links resolve.

Blocks run in a scratch folder that looks like the checkout to them (``data/`` holds links
to the repository's data, ``runs/`` starts empty), so they may read ``data/...`` and write
``runs/...``. While ``data/runs/arc.nc`` (the shipped real run) is absent, a synthetic
stand-in of its layout takes its place there. Budget: 120 s per block on a 2-core machine
(``PSENS_README_BUDGET`` overrides it, in seconds). Blocks that load the offline model are
``slow`` (``make test-slow``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ROOT, shipped_standin

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PYTHON = r"^```python\n(.*?)^```"
BLOCKS = re.findall(PYTHON, README.read_text(), flags=re.S | re.M)
DOC_BLOCKS = [
    (page.stem, code)
    for page in DOCS
    for code in re.findall(PYTHON, page.read_text(), flags=re.S | re.M)
]
BUDGET = float(os.environ.get("PSENS_README_BUDGET", "120"))
#: what makes a block load a language model (minutes on a loaded 2-core machine)
MODEL = ("psens.models.load(", "psens.run(")


def _label(code: str) -> str:
    first = next(line for line in code.splitlines() if line and not line.startswith("import"))
    return re.sub(r"\W+", "-", first)[:40].strip("-")


def _params(blocks=None):
    for k, (page, code) in enumerate(blocks or [("readme", b) for b in BLOCKS]):
        marks = [pytest.mark.slow] if any(m in code for m in MODEL) else []
        yield pytest.param(code, id=f"{page}-{k}-{_label(code)}", marks=marks)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A folder whose ``data/`` links to the repository's data (plus the shipped run)."""
    work = tmp_path_factory.mktemp("readme")
    data = work / "data"
    data.mkdir()
    for entry in (ROOT / "data").iterdir():
        if entry.name != "runs":
            (data / entry.name).symlink_to(entry)
    runs = data / "runs"
    runs.mkdir()
    shipped = ROOT / "data" / "runs" / "arc.nc"
    if shipped.exists():
        (runs / "arc.nc").symlink_to(shipped)
    else:
        shipped_standin(runs / "arc.nc")
    return work


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 5 and len(DOC_BLOCKS) >= 5
    assert any("data/runs/arc.nc" in b for b in BLOCKS)


def test_no_block_uses_the_demo_store_without_making_it():
    for code in BLOCKS:
        if "runs/demo.zarr" in code:
            assert "psens.run(" in code or "psens.demo" in code, code


def test_the_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    first_screen = "\n".join(text.splitlines()[:40])
    for must in ("make demo", "make test", "make lab", "00_start_here"):
        assert must in first_screen, must
    links = re.findall(r"\]\(([^)#]+)\)", text)
    for page in DOCS:
        links += [str(Path("docs") / x) for x in re.findall(r"\]\(([^)#:]+)\)", page.read_text())]
    missing = [x for x in links if not (ROOT / x).exists()]
    assert missing == [], missing


def test_the_notebook_ranges_named_are_the_notebooks_there_are():
    """The README's and docs/layout.md's "NN–MM" span every notebook; docs/notebooks.md
    describes each one (**NN**)."""
    numbers = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    span = f"{numbers[0]}–{numbers[-1]}"
    assert f"The notebooks ({span})" in README.read_text()
    layout = (ROOT / "docs" / "layout.md").read_text()
    assert f"{numbers[-1]} " in layout.split("notebooks/")[1].split("data/")[0]
    described = (ROOT / "docs" / "notebooks.md").read_text()
    assert [n for n in numbers if f"**{n}**" not in described] == []


def test_each_docs_page_is_linked_from_the_readme():
    text = README.read_text()
    assert [p.name for p in DOCS if f"docs/{p.name}" not in text] == []


def test_the_docs_have_python_blocks():
    assert {"runs", "store-schema", "methods", "long-inputs"} <= {p for p, _ in DOC_BLOCKS}


@pytest.mark.parametrize("code", list(_params()) + list(_params(DOC_BLOCKS)))
def test_readme_python_block_runs(code, checkout):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=max(3 * BUDGET, 300),
    )
    elapsed = time.perf_counter() - start
    assert out.returncode == 0, out.stderr[-3000:]
    assert elapsed < BUDGET, f"the block took {elapsed:.0f} s (budget {BUDGET:.0f} s)"


def test_the_example_config_parses_and_is_small():
    from psens.config import load_config
    from psens.runner import Plan, estimate

    cfg = load_config(ROOT / "data" / "examples" / "arc.toml")
    assert cfg.models == ["smollm2-135m-instruct"] and cfg.store == "runs/arc.zarr"
    est = estimate(Plan(cfg))
    assert est["forward_passes"] <= 1000 and est["seconds"] < 120, est


def test_shell_blocks_use_the_example_configs():
    from psens.config import load_config

    shell = re.findall(r"^```bash\n(.*?)^```", README.read_text(), flags=re.S | re.M)
    runs = [line for block in shell for line in block.splitlines() if "psens run " in line]
    assert runs and all("data/examples/" in line for line in runs), runs
    assert any("data/examples/arc.toml" in line for line in runs), runs
    for line in runs:
        path = ROOT / line.split("psens run ")[1].split()[0]
        assert path.exists(), path
        load_config(path)  # parses and passes the checks that need no model or server


@pytest.mark.slow
def test_the_example_config_runs(tmp_path):
    """`psens run data/examples/arc.toml` as the README shows it (the offline model)."""
    from psens.cli import main

    os.chdir(tmp_path)
    try:
        assert main(["run", str(ROOT / "data" / "examples" / "arc.toml"), "--no-progress"]) == 0
        assert main(["summary", "runs/arc.zarr"]) == 0
    finally:
        os.chdir(ROOT)
