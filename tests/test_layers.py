"""The layering of psens, in one table, enforced on every import (module level and inside
functions) of every module under psens/ and widgets/; no private name crosses packages; and
docs/layout.md names every package and top-level module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from psens.config_schema import RUN_MODULES

ROOT = Path(__file__).resolve().parents[1]
#: the packages of the method runs (psens.pss, psens.eas, psens.dbsa): each sits in the
#: methods layer because psens.config_schema.RUN_MODULES names it
RUN_PACKAGES = tuple(sorted({".".join(m.split(".")[:2]) for m in RUN_MODULES.values()}))

#: The layers, lowest first: a module may import its own layer and those below it, never
#: one above. Data flows up: datasets and prompts -> models -> interactions -> the store (and
#: the config schema, which the store reads for the list of method runs) ->
#: the methods -> running them -> the public API -> the widgets. The longest matching
#: prefix of a module's name picks its layer.
LAYERS: dict[str, tuple[str, ...]] = {
    "base": (
        "psens._validation",
        "psens._version",
        "psens._packages",
        "psens._charts",
        "psens.stats",
    ),
    "data": (
        "psens.datasets",
        "psens.variants",
        "psens.prompts",
        "psens.perturbations",
        "psens.formats.grammar",
    ),
    "models": ("psens.backends", "psens.models"),
    "interactions": ("psens.interactions",),
    "store": ("psens.store", "psens.settings", "psens.synthetic", "psens.config_schema"),
    "methods": (
        "psens.ips",
        "psens.formats",
        "psens.cloze",
        "psens._runfile",
        *RUN_PACKAGES,
    ),
    "orchestration": (
        "psens.config",
        "psens.config_files",
        "psens.plan",
        "psens.runner",
        "psens.pipeline",
        "psens.method_runs",
        "psens.report",
        "psens.demo",
        "psens.cli",
    ),
    "api": ("psens",),
    "ui": ("psens.widgets",),
}
ORDER = list(LAYERS)


def layer_of(module: str) -> str:
    """The layer of a module: the longest prefix in :data:`LAYERS` that names it."""
    best, size = None, -1
    for layer, prefixes in LAYERS.items():
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > size:
                best, size = layer, len(p)
    assert best is not None, f"{module} has no layer in LAYERS"
    return best


def unit_of(module: str) -> str:
    """The package a module belongs to: its subpackage of psens (``psens.ips``) or, for a
    top-level module, the module itself (``psens.runner``)."""
    return ".".join(module.split(".")[:2])


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "widgets":  # imported as psens.widgets
        parts = ["psens", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    parts = name.split(".")
    if parts[:2] == ["psens", "widgets"]:
        parts = ["widgets", *parts[2:]]
    base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _modules() -> list[Path]:
    return sorted([*ROOT.glob("psens/**/*.py"), *ROOT.glob("widgets/**/*.py")])


def imports(path: Path) -> list[tuple[str, str | None, int]]:
    """``(module, name, line)`` of every psens import of a file, module level and inside
    functions; ``from psens import ips`` is the module ``psens.ips``; ``alias._name`` of an
    imported psens module counts as importing ``_name``."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    found: list[tuple[str, str | None, int]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] not in ("psens", "widgets"):
                continue
            module = "psens." + module if module.startswith("widgets") else module
            for a in node.names:
                sub = f"{module}.{a.name}"
                if _is_module(sub):
                    found.append((sub, None, node.lineno))
                    aliases[a.asname or a.name] = sub
                else:
                    found.append((module, a.name, node.lineno))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("psens", "widgets"):
                    name = "psens." + a.name if a.name.startswith("widgets") else a.name
                    found.append((name, None, node.lineno))
                    if a.asname:
                        aliases[a.asname] = name
    for node in ast.walk(tree):  # datasets._canonical(...) of `from psens import datasets`
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found.append((aliases[node.value.id], node.attr, node.lineno))
    return found


def _private(name: str | None) -> bool:
    return bool(name) and name.startswith("_") and not name.startswith("__")


def _violations() -> tuple[list[str], list[str]]:
    upward, private = [], []
    for path in _modules():
        me = _module_name(path)
        mine = ORDER.index(layer_of(me))
        for module, name, line in imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            theirs = layer_of(module)
            if ORDER.index(theirs) > mine:
                upward.append(f"{where} ({layer_of(me)}) imports {module} ({theirs})")
            if _private(name) and unit_of(module) != unit_of(me):
                private.append(f"{where} imports the private {module}.{name}")
    return upward, private


def test_the_layer_table_names_every_module():
    for path in _modules():
        layer_of(_module_name(path))


def test_no_import_runs_against_the_layers():
    upward, _ = _violations()
    assert not upward, "\n".join(upward)


def test_no_private_name_is_imported_across_packages():
    _, private = _violations()
    assert not private, "\n".join(private)


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("from psens.ips.metric import ips\n", "upward"),
        ("def f():\n    from psens import runner\n", "upward"),
        ("from psens.stats import _rng\n", "private"),
        ("from psens import datasets\nx = datasets._canonical\n", "private"),
    ],
)
def test_the_check_finds_what_it_forbids(tmp_path, monkeypatch, source, problem):
    """A models module that imports a method (or a private name of another package) is
    reported: the check can fail."""
    fake = ROOT / "psens" / "models" / "scorer.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source)
    found = imports(fake)
    assert found
    me = _module_name(fake)
    if problem == "upward":
        assert any(ORDER.index(layer_of(m)) > ORDER.index(layer_of(me)) for m, _, _ in found)
    else:
        assert any(_private(n) and unit_of(m) != unit_of(me) for m, n, _ in found)


def test_layout_names_every_package_and_top_level_module():
    """docs/layout.md has a line for every package (``ips/``) and top-level module
    (``runner.py``) of psens, and every module of psens.store (the run files)."""
    text = (ROOT / "docs" / "layout.md").read_text()
    psens = ROOT / "psens"
    names = [f"{p.name}/" for p in psens.iterdir() if (p / "__init__.py").is_file()]
    names += [p.name for p in psens.glob("*.py") if p.name != "__init__.py"]
    names += [p.name for p in (psens / "store").glob("*.py") if p.name != "__init__.py"]
    missing = [n for n in sorted(names) if n not in text]
    assert not missing, f"docs/layout.md does not name {missing}"
