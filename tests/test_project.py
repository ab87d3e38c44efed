"""Project-level checks: set-up files agree, the core stays UI- and torch-free."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import yaml

from tests.support import ROOT


def test_environment_yml_installs_the_pyproject_extras():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    python = [d for d in deps if isinstance(d, str) and d.startswith("python=")]
    assert python == ["python=3.11"]
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == ["-e .[all]"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert extras["all"] == [f"psens[{','.join(k for k in extras if k != 'all')}]"]
    assert project["requires-python"] == ">=3.11"


def test_import_psens_loads_no_ui_and_no_torch():
    code = (
        "import sys, psens, psens.ips, psens.interactions;"
        "bad = [m for m in ('ipywidgets', 'torch', 'altair', 'transformers') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_core_sources_never_import_ipywidgets():
    offenders = [
        p.relative_to(ROOT) for p in (ROOT / "psens").rglob("*.py") if "ipywidgets" in p.read_text()
    ]
    assert offenders == []


def test_public_api_is_explicit():
    import psens

    assert sorted(psens.__all__) == sorted(set(psens.__all__))
    for name in psens.__all__:
        assert hasattr(psens, name), name


def test_every_subpackage_is_packaged():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    found = {"psens.widgets"} | {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "psens").rglob("__init__.py")
    }
    assert found == listed


def _module_imports() -> dict[str, set[str]]:
    """Module-level (import-time) imports between psens modules, as dotted names."""
    import ast

    files = {}
    for base, pkg in ((ROOT / "psens", "psens"), (ROOT / "widgets", "psens.widgets")):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            files[".".join([pkg, *parts])] = (path, is_pkg)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in files.items():
        here = name if is_pkg else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):  # lazy imports count too
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    mod = ".".join([*up, mod] if mod else up)
                targets = [
                    f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod for a in node.names
                ]
            else:
                continue
            edges |= {t for t in targets if t in files and t != name}
        graph[name] = edges
    return graph


def test_no_import_cycle_between_modules():
    graph = _module_imports()
    assert graph["psens.config"] and "psens.runner" not in graph["psens.config"]
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    # a package's __init__ re-exporting its submodules is not a cycle unless a submodule
    # imports the package back at import time
    assert cycles == []


def test_widgets_import_no_private_psens_names():
    import ast

    offenders = []
    for path in (ROOT / "widgets").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("psens"):
                parts = (node.module or "").split(".")
                names = [a.name for a in node.names]
                if any(p.startswith("_") and p not in ("_charts", "_validation") for p in parts):
                    offenders.append(f"{path.name}: {node.module}")
                offenders += [f"{path.name}: {n}" for n in names if n.startswith("_")]
    assert offenders == []


def test_the_names_users_type_keep_working():
    import psens
    import psens.dbsa
    import psens.eas
    import psens.ips.factors
    import psens.pss
    from psens.factors import few_shot
    from psens.factors.stats import paired_test

    assert psens.factors is psens.ips.factors and few_shot is psens.ips.factors.few_shot
    assert paired_test is psens.stats.paired_test
    assert callable(psens.run) and callable(psens.open_run) and callable(psens.ips.ips)
    assert callable(psens.pss.pss) and callable(psens.eas.instance_metrics)
    assert callable(psens.dbsa.dbsa)
    from psens.dbsa.analysis import dbsa  # the DBSA modules' names before the method layout
    from psens.dbsa.plots import compare_top_k_chart
    from psens.dbsa.view import dbsa_view

    assert dbsa is psens.dbsa.metric.dbsa and dbsa_view is psens.dbsa.tables.dbsa_view
    assert compare_top_k_chart is psens.dbsa.charts.compare_top_k_chart


def test_each_method_is_a_package_with_its_paper_cited():
    for method in ("ips", "pss", "eas", "dbsa"):
        init = ROOT / "psens" / method / "__init__.py"
        assert init.exists(), method
    sources = [
        p
        for m in ("ips", "pss", "eas", "dbsa", "interactions")
        for p in (ROOT / "psens" / m).rglob("*.py")
    ]
    missing = [
        str(p.relative_to(ROOT))
        for p in sources
        if "\nReferences\n----------\n" not in p.read_text()
    ]
    assert missing == []


def test_nothing_refers_to_documents_outside_the_repository():
    import re

    pattern = re.compile(r"\bshared/|DESIGN\.md|DESIGN \"|seed (paper|`)|\bseeds/|issue #?\d")
    places = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for folder in ("psens", "widgets", "notebooks", "scripts", "tests"):
        places += [p for p in (ROOT / folder).rglob("*.py")]
    places += sorted((ROOT / "notebooks").glob("*.ipynb"))
    hits = [str(p.relative_to(ROOT)) for p in places if pattern.search(p.read_text())]
    assert hits == []


def test_openmp_threads_sleep_at_barriers_unless_the_user_says_otherwise():
    code = "import os, psens; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "PASSIVE"
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "ACTIVE"


# ----------------------------------------------------------------------------- one way


def _code_files():
    return [*(ROOT / "psens").rglob("*.py"), *(ROOT / "widgets").glob("*.py")]


def test_model_entries_are_told_apart_only_by_the_model_spec():
    """'Is this model served?' is decided by psens.models.spec.ModelSpec alone."""
    import re

    pattern = re.compile(
        r"isinstance\((m|model|entry|name), (dict|Mapping)\)|\b_served\(|is_served\("
    )
    allowed = {
        ROOT / "psens" / "models" / "spec.py",
        ROOT / "psens" / "models" / "served" / "entry.py",
    }
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _code_files()
        if p not in allowed
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_run_settings_are_read_back_in_one_place():
    """τ and the solver of a run are read from its attrs by psens.settings.run_settings."""
    import re

    pattern = re.compile(
        r"attrs\.get\(\s*[\"'](tau|solver_method)[\"']|attrs\[[\"']tau[\"']\](?!\s*=[^=])"
    )
    allowed = {ROOT / "psens" / "settings.py"}
    files = [*_code_files(), *(ROOT / "notebooks").glob("*.py")]
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in files
        if p not in allowed
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []
    # and no default τ but the one constant
    literal = re.compile(r"\btau: float[^=]*= 0\.1\b|Float\(0\.1|solver: str = \"canonical\"")
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _code_files()
        if p != ROOT / "psens" / "settings.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert hits == []


def test_the_ips_term_and_the_class_rule_are_defined_once():
    import re

    term = re.compile(r"np\.abs\(\w+\)\s*\+\s*np\.abs\(\w+\)\)\s*/\s*2")
    rule = re.compile(r"ratio > 2")
    found = {"term": [], "rule": []}
    for p in (ROOT / "psens").rglob("*.py"):
        text = p.read_text()
        found["term"] += [str(p.relative_to(ROOT))] * len(term.findall(text))
        found["rule"] += [str(p.relative_to(ROOT))] * len(rule.findall(text))
    assert found == {"term": ["psens/ips/metric.py"], "rule": ["psens/ips/metric.py"]}


def test_a_runs_models_are_read_by_model_names_alone():
    """Code, scripts and notebooks name a run's models with psens.store.labels.model_names;
    nothing else reads the model coordinate's values by hand."""
    import re

    pattern = re.compile(r"""\[["']model["']\]\.values|\.model\.values""")
    files = [
        *_code_files(),
        *(ROOT / "scripts").glob("*.py"),
        *(ROOT / "notebooks").glob("*.py"),
    ]
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in files
        if p != ROOT / "psens" / "store" / "labels.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_the_model_table_is_read_by_the_registry_alone():
    hits = [
        str(p.relative_to(ROOT))
        for p in _code_files()
        if p != ROOT / "psens" / "models" / "registry.py"
        and ('"models.csv"' in p.read_text() or "'models.csv'" in p.read_text())
    ]
    assert hits == []
