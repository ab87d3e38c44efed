"""A real browser: JupyterLab + headless Debian Chromium, driven by Python playwright.

Starts JupyterLab on 127.0.0.1 (free port, temporary JUPYTER_* dirs, kernel auto-start,
no news popup) from this interpreter's environment, starts ``/usr/bin/chromium`` with a
DevTools port and a fresh profile, connects playwright over CDP, opens
``notebooks/04_orders.ipynb`` (a copy; tiny size), runs all cells, moves the τ slider of
the first OrderIPS widget with the keyboard and clicks the layout toggle, and asserts that
the chart changed and that no console error or failed request happened. Screenshots go to
``build/browser/``. The server and the browser are stopped by PID in finalizers.

Run with ``make test-browser`` (installs chromium with apt when missing) or
``pytest -m browser tests/browser``. Never ``playwright install``: the browser is Debian's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("PSENS_CHROMIUM", "/usr/bin/chromium")
NOTEBOOK = "04_orders.ipynb"
SHOTS = ROOT / "build" / "browser"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited ({proc.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    raise TimeoutError(f"{url} did not answer in {timeout} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group led by ``proc.pid`` (its own session), then SIGKILL."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(grace)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def lab(tmp_path_factory, request):
    """A JupyterLab server on loopback serving a temp folder with the notebook."""
    pytest.importorskip("jupyterlab")
    home = tmp_path_factory.mktemp("lab")
    root, conf, data, runtime, app_settings = (
        home / d for d in ("root", "config", "data", "runtime", "app-settings")
    )
    for d in (root, conf / "labconfig", data, runtime, app_settings):
        d.mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    (app_settings / "overrides.json").write_text(
        json.dumps(
            {
                "@jupyterlab/notebook-extension:tracker": {"autoStartDefaultKernel": True},
                "@jupyterlab/apputils-extension:notification": {
                    "checkForUpdates": False,
                    "fetchNews": "false",
                },
            }
        )
    )
    (conf / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(conf),
        JUPYTER_DATA_DIR=str(data),
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        PSENS_SIZE="tiny",
        PSENS_RUN="",
    )
    port = _free_port()
    log = home / "lab.log"
    cmd = [
        sys.executable, "-m", "jupyter", "lab", "--allow-root", "--no-browser",
        "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.app_settings_dir={app_settings}",
        f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    request.addfinalizer(lambda: _stop(proc))
    _wait_http(f"http://127.0.0.1:{port}/api/status", 60, proc, log)
    return {"url": f"http://127.0.0.1:{port}", "log": log, "pid": proc.pid}


@pytest.fixture(scope="module")
def browser(tmp_path_factory, request):
    """Debian's headless Chromium, started by us (so we own its PID), reached over CDP."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: apt-get install chromium (make test-browser does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    profile = tmp_path_factory.mktemp("chromium-profile")
    port = _free_port()
    log = profile.parent / "chromium.log"
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        "--disable-dev-shm-usage", f"--user-data-dir={profile}",
        f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1",
        "--window-size=1400,1000", "about:blank",
    ]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [CHROMIUM, *flags], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    request.addfinalizer(lambda: _stop(proc))
    _wait_http(f"http://127.0.0.1:{port}/json/version", 30, proc, log)
    pw = sync_api.sync_playwright().start()
    request.addfinalizer(pw.stop)
    return pw.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")


def test_orders_notebook_runs_and_reacts(lab, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.contexts[0] if browser.contexts else browser.new_context()
    page = context.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    try:
        page.goto(f"{lab['url']}/lab/tree/{NOTEBOOK}", wait_until="domcontentloaded")
        page.wait_for_function(
            "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            " const k = w && w.sessionContext && w.sessionContext.session"
            " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }",
            timeout=90_000,
        )
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_function(
            "() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];"
            " return p.length > 0 && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }",
            timeout=120_000,
        )
        page.wait_for_selector(".widget-slider .noUi-handle", timeout=30_000)
        page.wait_for_selector(".vega-embed svg.marks", timeout=30_000)
        errors = page.locator(".jp-OutputArea-output[data-mime-type*='error']")
        assert errors.count() == 0, errors.first.inner_text()
        page.screenshot(path=str(SHOTS / "04_orders_ran.png"))

        # the first OrderIPS widget: its tau slider and its chart sit in one output area
        output = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider")).first
        output.scroll_into_view_if_needed()
        chart = output.locator(".vega-embed svg.marks").first
        before = chart.evaluate("e => e.outerHTML")
        output.screenshot(path=str(SHOTS / "order_ips_before.png"))
        handle = output.locator(".widget-slider .noUi-handle").first
        handle.focus()
        for _ in range(10):
            handle.press("ArrowRight")
        readout = output.locator(".widget-readout").first
        page.wait_for_function("e => e.textContent.trim() === '0.20'", arg=readout.element_handle())
        # each key press is a value change; wait for the chart of the last one
        page.wait_for_function(
            "e => { const s = e.querySelector('.vega-embed svg.marks');"
            " return s && s.textContent.includes('τ = 0.20'); }",
            arg=output.element_handle(),
            timeout=60_000,
        )
        after = output.locator(".vega-embed svg.marks").first.evaluate("e => e.outerHTML")
        assert after != before  # new bars, new title
        output.screenshot(path=str(SHOTS / "order_ips_tau_0.20.png"))

        # a toggle: fig. 11 layout (one panel per order)
        output.get_by_role("button", name="fig. 11: by order").click()
        page.wait_for_function(  # a faceted chart: column headers appear
            "e => { const s = e.querySelector('.vega-embed svg.marks');"
            " return s && s.querySelector('.role-column-header') !== null; }",
            arg=output.element_handle(),
            timeout=60_000,
        )
        faceted = output.locator(".vega-embed svg.marks").first.evaluate("e => e.outerHTML")
        assert faceted != after
        output.screenshot(path=str(SHOTS / "order_ips_by_order.png"))
    finally:
        page.screenshot(path=str(SHOTS / "04_orders_final.png"))
        page.close()
    assert not problems, "\n".join(problems)


def test_report_with_hostile_ids_runs_no_script(browser, tmp_path):
    """A report built from ids and model names that try to close the chart's <script> tag:
    in a real browser no injected script runs and the chart still renders."""
    from psens.report import write_report
    from psens.synthetic import synthetic_run

    hostile = "</script><script>window.__pwned = 1; alert(1)</script>"
    models = {hostile: ("toy", "toy", "instruct", "dense", 7.0, 7.0, 0.5)}
    ds = synthetic_run(models, n_samples=3, n_vars=(3,))
    ds = ds.assign_coords(sample=[f"{hostile}{k}" for k in range(ds.sizes["sample"])])
    report = write_report(ds, tmp_path / "hostile.html")
    context = browser.contexts[0] if browser.contexts else browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(report.resolve().as_uri(), wait_until="load")
        page.wait_for_selector(".vega-embed svg", timeout=30_000)
        assert page.evaluate("() => window.__pwned === undefined")
        assert dialogs == []
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "hostile_report.png"))
    finally:
        page.close()
