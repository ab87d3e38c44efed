"""`make docs`: regenerate the README images from the `make demo` run, so they cannot go stale.

* ``docs/img/demo_report.png`` — the demo's HTML report (``psens.report.write_report`` on
  ``runs/demo.zarr``), rendered by headless Chromium;
* ``docs/img/order_ips_widget.png`` — the OrderIPS widget on the same run, in JupyterLab.

JupyterLab (127.0.0.1) and Debian's Chromium are started and stopped by PID through
``tests/browser/harness.py``, as in ``make test-browser``. ``docs/img/dbsa_highlight.png``
comes from the DBSA example (docs/dbsa_example.md), not from the demo run, and is left alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import harness  # noqa: E402

WIDTH = 1000


def _report_png(store: Path, out: Path, browser, work: Path) -> None:
    import psens
    from psens.report import write_report
    from psens.runner import summarize

    ds = psens.open_run(store)
    html = write_report(ds, work / "demo_report.html", summarize(ds))
    page = browser.contexts[0].new_page() if browser.contexts else browser.new_page()
    try:
        page.set_viewport_size({"width": WIDTH, "height": 800})
        page.goto(html.resolve().as_uri(), wait_until="load")
        page.wait_for_selector(".vega-embed svg", timeout=60_000)
        page.screenshot(path=str(out), full_page=True)
    finally:
        page.close()


def _widget_png(store: Path, out: Path, browser, work: Path) -> None:
    import nbformat

    root = work / "lab-root"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            f"import psens\nimport psens.widgets as pw\n\nds = psens.open_run({str(store)!r})\n"
            "pw.OrderIPS(ds)"
        )
    ]
    nbformat.write(nb, root / "order_ips.ipynb")
    info, stop_lab = harness.start_lab(work / "lab", root)
    try:
        page = browser.contexts[0].new_page() if browser.contexts else browser.new_page()
        try:
            page.set_viewport_size({"width": 1400, "height": 1000})
            harness.open_and_run_all(page, f"{info['url']}/lab/tree/order_ips.ipynb")
            output = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider")).first
            page.wait_for_function(
                "e => e.querySelector('.vega-embed svg.marks') !== null",
                arg=output.element_handle(),
                timeout=60_000,
            )
            output.scroll_into_view_if_needed()
            output.screenshot(path=str(out))
        finally:
            page.close()
    finally:
        stop_lab()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="runs/demo.zarr", help="the run (make demo's)")
    parser.add_argument("--out", default="docs/img", help="where the PNGs go")
    args = parser.parse_args(argv)
    store = Path(args.store).resolve()
    out = Path(args.out)
    if not store.exists():
        print(f"make docs: {store} does not exist. Run `make demo` first.", file=sys.stderr)
        return 1
    if not Path(harness.CHROMIUM).exists():
        print(
            f"make docs: {harness.CHROMIUM} not found. Install Debian's chromium "
            "(`make test-browser` does) or set PSENS_CHROMIUM.",
            file=sys.stderr,
        )
        return 1
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="psens-docs-") as tmp:
        work = Path(tmp)
        browser, stop_browser = harness.start_chromium(work / "chromium-profile")
        try:
            _report_png(store, out / "demo_report.png", browser, work)
            _widget_png(store, out / "order_ips_widget.png", browser, work)
        finally:
            stop_browser()
    for name in ("demo_report.png", "order_ips_widget.png"):
        print(f"wrote {out / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
