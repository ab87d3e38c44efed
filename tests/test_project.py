"""Project-level checks: set-up files agree, the core stays UI- and torch-free."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
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


def _run_packages() -> list[str]:
    """The folders under psens/ of the method runs' packages (``pss``, ``eas``, ``dbsa``)."""
    from psens.config_schema import RUN_MODULES

    return sorted({m.split(".")[1] for m in RUN_MODULES.values()})


def test_each_method_is_a_package_with_its_paper_cited():
    methods = ["ips", *_run_packages()]
    for method in methods:
        init = ROOT / "psens" / method / "__init__.py"
        assert init.exists(), method
    sources = [p for m in [*methods, "interactions"] for p in (ROOT / "psens" / m).rglob("*.py")]
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

    # (|a| + |b|) / 2 written with np.abs or with |a| and |b| already at hand
    term = re.compile(r"(np\.abs\(\w+\)\s*\+\s*np\.abs\(\w+\)|abs_\w+\s*\+\s*abs_\w+)\)\s*/\s*2")
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


# ----------------------------------------------------------------------------- one pipeline

#: the places docs/adding-a-method.md lists, in its order (its table, first column)
PLACES = (
    "psens/<method>/",
    "psens/config_schema.py",
    "docs/runs.md",
    "pyproject.toml",
    "docs/layout.md",
    "tests/<method>/",
    "widgets/",
    "notebooks/",
)
#: what mentions a method's key (a config's ``method``, a run file's ``psens_method``)
_NAMES_A_METHOD = r"\bmethod\b|METHOD_ATTR|psens_method"


def test_every_method_run_module_declares_its_run():
    """Each module of RUN_MODULES declares ``RUN``, a MethodRun of its own key whose config
    class has exactly the key's rows of the schema; no other registration is left."""
    import dataclasses
    import importlib

    from psens._runfile import MethodConfig, MethodRun
    from psens.config_schema import RUN_MODULES, RUNS, fields_for
    from psens.method_runs import declared
    from psens.store import METHODS

    assert RUNS == tuple(RUN_MODULES) == METHODS and "ips" not in RUN_MODULES
    for key, name in RUN_MODULES.items():
        module = importlib.import_module(name)
        run = module.RUN
        assert isinstance(run, MethodRun) and run.method == key, name
        assert "RUN" in module.__all__ and not hasattr(module, "CONFIG"), name
        assert issubclass(run.config, MethodConfig), name
        fields = [f.name for f in dataclasses.fields(run.config)]
        assert fields == [f.name for f in fields_for(key)], name
        assert run.config().method == key, name
        assert callable(run.run) and callable(run.summarize), name
        assert run.reread is None or callable(run.reread), name
        assert declared(key) is run


def _places_table() -> tuple[str, list[list[str]]]:
    text = (ROOT / "docs" / "adding-a-method.md").read_text()
    start = text.index("<!-- places:")
    table = text[start : text.index("<!-- /places -->")].splitlines()[1:]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in table
        if line.startswith("|")
    ]
    return text, rows[2:]  # the header and its rule


def test_adding_a_method_lists_the_places_the_code_reads():
    """docs/adding-a-method.md lists exactly the places a new method with a run touches
    (at most 8, the count stated), and each holds what it says for every method run."""
    import re
    import tomllib

    from psens import config_schema
    from psens.config_schema import FIELDS, RUN_MODULES, RUNS

    text, rows = _places_table()
    places = tuple(row[0].strip("`") for row in rows)
    assert places == PLACES
    stated = re.search(r"touches \*\*(\d+) places\*\*", text)
    assert stated and int(stated.group(1)) == len(places) <= 8
    for name in ("RUN_MODULES", "MethodRun", "RUN = MethodRun(", "declared"):
        assert name in text, name
    # the existing methods named in the third column are there
    for row in rows:
        for name in re.findall(r"`([^`]+)`", row[2]):
            if "/" in name or "." in name:
                assert (ROOT / name).exists(), name
            else:
                assert hasattr(config_schema, name), name
    # and every method run has each place
    packages = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    layout = (ROOT / "docs" / "layout.md").read_text()
    runs_md = (ROOT / "docs" / "runs.md").read_text().splitlines()
    for key, module in RUN_MODULES.items():
        package = module.split(".")[1]
        assert (ROOT / "psens" / package / "__init__.py").is_file(), key
        assert (ROOT / Path(*module.split("."))).with_suffix(".py").is_file(), key
        assert any(key in f.methods and f.methods != RUNS for f in FIELDS), key
        assert any(
            key in line.split("|")[2].replace(",", " ").split()
            for line in runs_md
            if line.startswith("| `")
        ), key
        assert f"psens.{package}" in packages, key
        assert f"  {package}/" in layout, key
        assert (ROOT / "tests" / package).is_dir(), key


def _method_branches(path: Path, source: str | None = None) -> list[str]:
    """``path:line`` of every branch on a method run's key: a comparison of a key with
    something that names a method, a ``match`` on it, or a table keyed by two keys."""
    import ast
    import re

    from psens.config_schema import RUNS

    def keys(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and node.value in RUNS:
            return {node.value}
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return set().union(*(keys(e) for e in node.elts)) if node.elts else set()
        return set()

    def names_a_method(node: ast.AST) -> bool:
        return bool(re.search(_NAMES_A_METHOD, ast.unparse(node)))

    where = path.relative_to(ROOT) if path.is_absolute() else path
    hits = []
    for node in ast.walk(ast.parse(source if source is not None else path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(keys(s) for s in sides) and any(names_a_method(s) for s in sides):
                hits.append(f"{where}:{node.lineno}")
        elif isinstance(node, ast.Match) and names_a_method(node.subject):
            values = [p for c in node.cases for p in ast.walk(c.pattern)]
            if any(isinstance(p, ast.MatchValue) and keys(p.value) for p in values):
                hits.append(f"{where}:{node.lineno}")
        elif isinstance(node, ast.Dict):
            if len(set().union(*(keys(k) for k in node.keys if k is not None))) >= 2:
                hits.append(f"{where}:{node.lineno}")
    return hits


def test_no_module_branches_on_a_method_run():
    """A method run is found through RUN_MODULES alone: no module of psens, widgets or
    scripts compares a method's key with a method (``if method == "eas"``) or keeps a table
    keyed by methods, but RUN_MODULES itself."""
    from psens.config_schema import RUN_MODULES

    allowed = {
        ROOT / "psens" / "_runfile.py",
        ROOT / "psens" / "method_runs.py",
        *((ROOT / Path(*m.split("."))).with_suffix(".py") for m in RUN_MODULES.values()),
    }
    files = [*_code_files(), *(ROOT / "scripts").glob("*.py")]
    hits = [h for p in files if p not in allowed for h in _method_branches(p)]
    assert hits == [f"psens/config_schema.py:{_run_modules_line()}"]


def _run_modules_line() -> int:
    lines = (ROOT / "psens" / "config_schema.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith("RUN_MODULES"))


@pytest.mark.parametrize(
    "source",
    [
        'if method == "eas":\n    pass\n',
        'if cfg.method != "dbsa":\n    pass\n',
        'ok = str(obj.attrs.get(METHOD_ATTR)) not in ("eas", "subjective")\n',
        'match method:\n    case "dbsa":\n        pass\n',
        'MODULES = {"eas": "psens.eas.run", "dbsa": "psens.dbsa.run"}\n',
    ],
)
def test_the_branch_check_finds_what_it_forbids(source):
    assert _method_branches(Path("x.py"), source) == ["x.py:1"]
