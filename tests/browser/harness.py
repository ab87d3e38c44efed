"""JupyterLab and headless Chromium on loopback, owned by PID: the browser tests' machinery,
also used by ``make docs`` (scripts/docs_images.py) to screenshot widgets and the report.

:func:`start_lab` serves a folder with JupyterLab on 127.0.0.1 (free port, temporary
JUPYTER_* dirs, kernel auto-start, no news popup) from this interpreter's environment;
:func:`start_chromium` starts Debian's ``/usr/bin/chromium`` with a DevTools port and a
fresh profile and connects playwright over CDP (never ``playwright install``). Both return
a ``stop`` callable that ends the process group they started, by PID.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("PSENS_CHROMIUM", "/usr/bin/chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen, log: Path) -> None:
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


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
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


def start_lab(home: Path, root: Path, env: dict[str, str] | None = None):
    """JupyterLab serving ``root`` on loopback; settings under ``home``.

    Returns ``(info, stop)``: ``info`` has ``url``, ``log`` and ``pid``.
    """
    conf, data, runtime, app_settings = (
        home / d for d in ("config", "data", "runtime", "app-settings")
    )
    for d in (root, conf / "labconfig", data, runtime, app_settings):
        d.mkdir(parents=True, exist_ok=True)
    (app_settings / "overrides.json").write_text(
        json.dumps(
            {
                # every cell in the DOM (no windowing), so every chart can be checked
                "@jupyterlab/notebook-extension:tracker": {
                    "autoStartDefaultKernel": True,
                    "windowingMode": "none",
                },
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
    full_env = dict(os.environ)
    full_env.update(
        JUPYTER_CONFIG_DIR=str(conf),
        JUPYTER_DATA_DIR=str(data),
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        **(env or {}),
    )
    port = free_port()
    log = home / "lab.log"
    cmd = [
        sys.executable, "-m", "jupyter", "lab", "--allow-root", "--no-browser",
        "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.app_settings_dir={app_settings}",
        f"--ServerApp.root_dir={root}",
        "--ContentsManager.pre_save_hook=psens.widgets.lab.keep_stored_metadata",  # as make lab
    ]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, env=full_env, cwd=root, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/api/status", 90, proc, log)
    except BaseException:
        stop(proc)
        raise
    return {"url": f"http://127.0.0.1:{port}", "log": log, "pid": proc.pid}, lambda: stop(proc)


def start_chromium(profile: Path) -> tuple[Any, Callable[[], None]]:
    """Headless Chromium (started here, so we own its PID) reached by playwright over CDP.

    Returns ``(browser, stop)``; ``stop`` closes playwright and the browser's process group.
    """
    from playwright.sync_api import sync_playwright

    profile.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = profile.parent / f"{profile.name}.log"
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
    try:
        wait_http(f"http://127.0.0.1:{port}/json/version", 30, proc, log)
        pw = sync_playwright().start()
    except BaseException:
        stop(proc)
        raise

    def done() -> None:
        try:
            pw.stop()
        finally:
            stop(proc)

    return pw.chromium.connect_over_cdp(f"http://127.0.0.1:{port}"), done


# ----------------------------------------------------------------------------- notebook UI


def open_notebook(page, url: str) -> None:
    """Open a notebook in JupyterLab and wait for its kernel to be idle.

    ``?reset`` starts from an empty workspace, so the notebook is the only (current) tab.
    """
    page.goto(f"{url}?reset", wait_until="domcontentloaded")
    page.wait_for_function(
        "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " const k = w && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }",
        timeout=90_000,
    )


def wait_saved(path: Path, quiet: float = 1.0, timeout: float = 30.0) -> None:
    """Wait until ``path`` (and its jupytext pair) has not changed for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        now = [p.stat().st_mtime_ns for p in (path, path.with_suffix(".py")) if p.exists()]
        if now == last:
            return
        last = now
        time.sleep(quiet)


def open_and_run_all(page, url: str, timeout_ms: int = 180_000) -> None:
    """Open a notebook in JupyterLab (:func:`open_notebook`), run all cells, wait for them."""
    open_notebook(page, url)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    wait_cells_done(page, timeout_ms)


def wait_cells_done(page, timeout_ms: int = 180_000) -> None:
    """Wait until every code cell has an execution count and the kernel is idle."""
    page.wait_for_function(
        "() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];"
        " const w = window.jupyterapp.shell.currentWidget;"
        " const k = w && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel;"
        " return p.length > 0 && p.every(e => /\\[\\d+\\]/.test(e.textContent))"
        " && k && k.status === 'idle'; }",
        timeout=timeout_ms,
    )
