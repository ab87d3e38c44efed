"""Project-level checks: set-up files agree, the core stays UI- and torch-free."""

from __future__ import annotations

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
