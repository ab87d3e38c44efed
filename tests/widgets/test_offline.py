"""Offline charts from one place: importing psens.widgets renders every chart offline, and
no notebook keeps renderer code of its own."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support import ROOT


def test_importing_psens_widgets_renders_every_chart_offline():
    code = (
        "import altair as alt\n"
        "assert alt.renderers.active != 'jupyter'\n"
        "import psens.widgets as pw\n"
        "assert alt.renderers.active == 'jupyter', alt.renderers.active\n"
        "assert alt.renderers.options.get('offline') is True, alt.renderers.options\n"
        "assert alt.renderers.options['embed_options'] == pw.EMBED_OPTIONS\n"
        "from altair.jupyter import jupyter_chart\n"
        "assert jupyter_chart.JupyterChart._is_offline, 'JupyterChart loads Vega from a CDN'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_no_notebook_has_its_own_renderer_code():
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        text = path.read_text()
        assert re.search(r"^import psens\.widgets", text, flags=re.M), path.name
        assert "renderers.enable" not in text and "enable_offline" not in text, path.name
