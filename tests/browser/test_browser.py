"""A real browser: JupyterLab + headless Debian Chromium, driven by Python playwright.

JupyterLab (on 127.0.0.1, started as ``make lab`` starts it) serves a git checkout of every
notebook (found by glob, so new ones are covered) at tiny size, with every request to another
host blocked. Each notebook is opened and saved — the files must stay byte for byte the
tracked ones — then run top to bottom in its own kernel: no error output, no console error,
no failed or blocked request, and every chart drew marks (offline Vega); then saved with
Ctrl+S, outputs on the page: the stored notebook has no outputs and ``git status --porcelain``
is clean for its pair. Its kernel is shut down before the next notebook opens.
Notebooks 00, 02 and 04 also get a control changed, asserting that the chart changed, that
dropdowns display their value (not a blank box) and show long names in full. The report
test opens a report built from hostile ids. Screenshots go to ``build/browser/``. The
machinery (servers started and stopped by PID) is :mod:`tests.browser.harness`.

Run with ``make test-browser`` (installs chromium with apt when missing) or
``pytest -m browser tests/browser``. Never ``playwright install``: the browser is Debian's.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.browser import harness

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the browser tests skip without playwright
    PlaywrightTimeout = TimeoutError
from tests.support import ROOT, git_checkout, git_status

pytestmark = pytest.mark.browser

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
SHOTS = ROOT / "build" / "browser"
#: hosts a page may reach: the JupyterLab server only
LOCAL = {"127.0.0.1"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, request):
    """A JupyterLab server on loopback serving a temp git checkout (as ``make lab`` serves
    the repository): the notebook pairs, ``jupytext.toml`` and ``.gitignore`` committed,
    ``data/`` linked (and excluded: the shipped runs are not part of this checkout)."""
    pytest.importorskip("jupyterlab")
    home = tmp_path_factory.mktemp("lab")
    root = git_checkout(home / "root", [n.removesuffix(".ipynb") for n in NOTEBOOKS])
    (root / "data").symlink_to(ROOT / "data")
    with open(root / ".git" / "info" / "exclude", "a") as exclude:
        exclude.write("/data\n")
    assert git_status(root) == ""
    info, stop = harness.start_lab(home, root, {"PSENS_SIZE": "tiny", "PSENS_RUN": ""})
    request.addfinalizer(stop)
    return {**info, "root": root}


@pytest.fixture(scope="module")
def browser(tmp_path_factory, request):
    """Debian's headless Chromium, started by us (so we own its PID), reached over CDP."""
    if not Path(harness.CHROMIUM).exists():
        pytest.skip(f"{harness.CHROMIUM} not found: apt-get install chromium (make test-browser)")
    pytest.importorskip("playwright.sync_api")
    browser, stop = harness.start_chromium(tmp_path_factory.mktemp("chromium") / "profile")
    request.addfinalizer(stop)
    return browser


def _page(browser):
    """A new page that can reach 127.0.0.1 only, and the list its console errors, page
    errors, failed and blocked requests go to."""
    context = browser.contexts[0] if browser.contexts else browser.new_context()
    page = context.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    problems: list[str] = []

    def route(r):
        url = urlparse(r.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOCAL:
            problems.append(f"blocked request: {r.request.url}")
            return r.abort()
        return r.continue_()

    page.route("**/*", route)
    page.on(
        "console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    return page, problems


def _shutdown_kernel(page) -> None:
    """Shut down the current notebook's kernel (through the page, as File > Shut Down
    Kernel does), so each notebook runs in its own kernel and finished ones free memory."""
    page.evaluate(
        "async () => { const w = window.jupyterapp.shell.currentWidget;"
        " if (w && w.sessionContext && w.sessionContext.session)"
        " { await w.sessionContext.shutdown(); } }"
    )


def _save_with_ctrl_s(page, path: Path) -> None:
    """Save the current notebook as a user does (focus it, Ctrl+S) and wait for the files."""
    page.locator(".jp-Notebook").first.click()  # focus the notebook, as a user does
    page.keyboard.press("Control+s")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
    )
    harness.wait_saved(path)


def _no_error_outputs(page) -> None:
    errors = page.locator(".jp-OutputArea-output[data-mime-type*='error']")
    assert errors.count() == 0, errors.first.inner_text()


#: JS: for every <select> in ``root``: the shown text, whether it is blank, and whether the
#: text fits the box (measured with the select's own font; 28 px for padding and arrow)
_SELECTS = """root => [...root.querySelectorAll('.widget-dropdown select')].map(s => {
    const opt = s.selectedIndex >= 0 ? s.options[s.selectedIndex] : null;
    const text = opt ? opt.textContent.replace(/\u00a0/g, ' ') : '';
    const ctx = document.createElement('canvas').getContext('2d');
    const st = getComputedStyle(s);
    ctx.font = `${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
    const need = ctx.measureText(text).width + 28;
    return {text, index: s.selectedIndex, fits: need <= s.clientWidth,
            need: Math.round(need), width: s.clientWidth};
})"""


def _check_selects(output) -> list[dict]:
    """Every dropdown of a widget output shows its value, in full."""
    selects = output.evaluate(_SELECTS)
    assert selects, "no dropdown found"
    for s in selects:
        assert s["index"] >= 0 and s["text"].strip(), f"a dropdown shows a blank value: {s}"
        assert s["fits"], f"a dropdown cuts its value: {s}"
    return selects


#: JS: the (normalised: ipywidgets writes non-breaking spaces) text of every option
_OPTIONS = "s => [...s.options].map(o => o.textContent.replace(/\\u00a0/g, ' '))"
_SHOWN = "s => s.options[s.selectedIndex].textContent.replace(/\\u00a0/g, ' ')"


def _select(select, label: str) -> None:
    """Pick the option shown as ``label`` (as a user does: a change event on the select)."""
    select.select_option(index=select.evaluate(_OPTIONS).index(label))


def _chart_svg(output) -> str:
    return output.locator(".vega-embed svg.marks").first.evaluate("e => e.outerHTML")


def _wait_chart_text(page, output, text: str, timeout: int = 60_000) -> None:
    page.wait_for_function(
        "([e, t]) => { const s = e.querySelector('.vega-embed svg.marks');"
        " return s && s.textContent.includes(t); }",
        arg=[output.element_handle(), text],
        timeout=timeout,
    )


#: JS: per chart of the page, how many drawn marks it has (shapes of role-mark groups:
#: bars, points, lines, rules, text; not axes or legends) and whether it has an svg yet
_MARKS = """() => [...document.querySelectorAll('.vega-embed')].map(e => {
    const s = e.querySelector('svg.marks');
    const n = s ? s.querySelectorAll(
        '.role-mark > path, .role-mark > line, .role-mark > text, .role-mark > rect,'
        + ' .role-mark > image').length : 0;
    return {svg: !!s, marks: n, title: s ? (s.getAttribute('aria-label') || '') : ''};
})"""


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_saves_unchanged_runs_offline_and_draws(lab, browser, name):
    """Open and save: the pair is unchanged; run all: no error, every chart drew marks; save
    with Ctrl+S (outputs on the page): no outputs stored, ``git status`` clean for the pair."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, problems = _page(browser)
    stem = name.removesuffix(".ipynb")
    files = {ext: lab["root"] / "notebooks" / f"{stem}.{ext}" for ext in ("ipynb", "py")}
    tracked = {ext: path.read_bytes() for ext, path in files.items()}
    try:
        harness.open_notebook(page, f"{lab['url']}/lab/tree/notebooks/{name}")
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
        )
        harness.wait_saved(files["ipynb"])
        for ext, path in files.items():
            assert path.read_bytes() == tracked[ext], (
                f"opening and saving {stem}.{ext} in JupyterLab changed it"
            )
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        harness.wait_cells_done(page)
        _no_error_outputs(page)
        try:  # every chart drew its marks (rendering, and re-rendering, is asynchronous)
            page.wait_for_function(f"() => ({_MARKS})().every(c => c.marks > 0)", timeout=60_000)
        except PlaywrightTimeout:
            pass  # the assertion below names the blank charts
        charts = page.evaluate(_MARKS)
        (SHOTS / f"{stem}_charts.json").write_text(json.dumps(charts, indent=1))
        blank = [c for c in charts if not c["marks"]]
        assert not blank, f"{name}: {len(blank)} of {len(charts)} charts drew no marks: {blank}"

        # run, then saved as a user saves: the tracked files again (the pre-save hook drops
        # outputs, execution counts and the kernel's metadata)
        assert page.locator(".jp-OutputArea-output").count() > 0  # outputs in the browser
        _save_with_ctrl_s(page, files["ipynb"])
        stored = json.loads(files["ipynb"].read_text())
        assert not any(c.get("outputs") for c in stored["cells"] if c["cell_type"] == "code")
        assert not any(c.get("execution_count") for c in stored["cells"] if "execution_count" in c)
        pair = [f"notebooks/{stem}.ipynb", f"notebooks/{stem}.py"]
        assert git_status(lab["root"], pair) == "", f"saving the run {name} changed the checkout"
    finally:
        page.screenshot(path=str(SHOTS / f"{stem}_all.png"), full_page=True)
        _shutdown_kernel(page)
        page.close()
    assert not problems, "\n".join(problems)


def test_orders_notebook_runs_and_reacts(lab, browser):
    """Notebook 04: the tau slider and the layout toggle of the first OrderIPS widget."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, problems = _page(browser)
    try:
        harness.open_and_run_all(page, f"{lab['url']}/lab/tree/notebooks/04_orders.ipynb")
        page.wait_for_selector(".widget-slider .noUi-handle", timeout=30_000)
        page.wait_for_selector(".vega-embed svg.marks", timeout=30_000)
        _no_error_outputs(page)
        page.screenshot(path=str(SHOTS / "04_orders_ran.png"))

        # the first OrderIPS widget: its tau slider and its chart sit in one output area
        output = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider")).first
        output.scroll_into_view_if_needed()
        _check_selects(output)
        before = _chart_svg(output)
        output.screenshot(path=str(SHOTS / "order_ips_before.png"))
        handle = output.locator(".widget-slider .noUi-handle").first
        handle.focus()
        for _ in range(10):
            handle.press("ArrowRight")
        readout = output.locator(".widget-readout").first
        page.wait_for_function("e => e.textContent.trim() === '0.20'", arg=readout.element_handle())
        # each key press is a value change; wait for the chart of the last one
        _wait_chart_text(page, output, "τ = 0.20")
        after = _chart_svg(output)
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
        assert _chart_svg(output) != after
        output.screenshot(path=str(SHOTS / "order_ips_by_order.png"))
    finally:
        page.screenshot(path=str(SHOTS / "04_orders_final.png"))
        _shutdown_kernel(page)
        page.close()
    assert not problems, "\n".join(problems)


def test_case_studies_notebook_pair_dropdown(lab, browser):
    """Notebook 02: the template-pair dropdown shows "all pairs" (it was blank), every
    dropdown shows its value in full, and picking a pair redraws the classes chart."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, problems = _page(browser)
    try:
        harness.open_and_run_all(page, f"{lab['url']}/lab/tree/notebooks/02_case_studies.ipynb")
        page.wait_for_selector(".vega-embed svg.marks", timeout=30_000)
        _no_error_outputs(page)
        case = page.locator(".jp-OutputArea-output", has=page.locator(".widget-dropdown")).first
        shown = [s["text"] for s in _check_selects(case)]  # model, sample, templates
        assert any(t.startswith("toy-") for t in shown), shown

        output = page.locator(
            ".jp-OutputArea-output",
            has=page.locator(".widget-dropdown select option", has_text="all pairs"),
        ).first
        output.scroll_into_view_if_needed()
        pair = output.locator(".widget-dropdown", has_text="templates").locator("select")
        _check_selects(output)  # not blank (a None value showed an empty box), not cut
        assert pair.evaluate(_SHOWN) == "all pairs"
        _wait_chart_text(page, output, "all pairs")
        before = _chart_svg(output)
        output.screenshot(path=str(SHOTS / "classes_all_pairs.png"))

        _select(pair, "ips1|ips2")
        _wait_chart_text(page, output, "ips1|ips2")
        assert _chart_svg(output) != before
        assert pair.evaluate(_SHOWN) == "ips1|ips2"
        output.screenshot(path=str(SHOTS / "classes_ips1_ips2.png"))
    finally:
        page.screenshot(path=str(SHOTS / "02_case_studies_final.png"))
        _shutdown_kernel(page)
        page.close()
    assert not problems, "\n".join(problems)


def test_start_here_notebook_with_a_widget(lab, browser):
    """Notebook 00 runs; a widget added at its end (on the notebook's ``ds``) reacts to its
    samples dropdown."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, problems = _page(browser)
    try:
        harness.open_and_run_all(page, f"{lab['url']}/lab/tree/notebooks/00_start_here.ipynb")
        _no_error_outputs(page)
        page.screenshot(path=str(SHOTS / "00_start_here_ran.png"))
        page.evaluate(
            """async () => {
            const app = window.jupyterapp, nb = app.shell.currentWidget.content;
            nb.activeCellIndex = nb.widgets.length - 1;
            await app.commands.execute('notebook:insert-cell-below');
            await app.commands.execute('notebook:change-cell-to-code');
            nb.activeCell.model.sharedModel.setSource(
                'import psens.widgets as pw\\nw = pw.OrderIPS(ds)\\nw');
            await app.commands.execute('notebook:run-cell');
        }"""
        )
        harness.wait_cells_done(page)
        output = page.locator(
            ".jp-OutputArea-output", has=page.locator(".widget-dropdown", has_text="samples")
        ).last
        output.wait_for(timeout=60_000)
        output.scroll_into_view_if_needed()
        _wait_chart_text(page, output, "samples: all")
        samples = output.locator(".widget-dropdown", has_text="samples").locator("select")
        options = samples.evaluate(_OPTIONS)
        assert options[0] == "all" and len(options) > 1, options
        _check_selects(output)
        before = _chart_svg(output)
        _select(samples, options[1])
        _wait_chart_text(page, output, f"samples: {options[1]}")
        assert _chart_svg(output) != before
        output.screenshot(path=str(SHOTS / "00_order_ips_subset.png"))

        # long model names (hub ids) are shown in full by a model dropdown
        page.evaluate(
            """async () => {
            const app = window.jupyterapp, nb = app.shell.currentWidget.content;
            nb.activeCellIndex = nb.widgets.length - 1;
            await app.commands.execute('notebook:insert-cell-below');
            nb.activeCell.model.sharedModel.setSource(
                'hub = ds.assign_coords(model=["meta-llama/Llama-3.1-8B-Instruct-" + str(m)'
                + ' for m in ds.model.values])\\npw.CaseStudy(hub)');
            await app.commands.execute('notebook:run-cell');
        }"""
        )
        harness.wait_cells_done(page)
        case = page.locator(
            ".jp-OutputArea-output", has=page.locator(".widget-dropdown", has_text="model")
        ).last
        case.scroll_into_view_if_needed()
        page.wait_for_function(
            "e => e.querySelector('.vega-embed svg.marks') !== null",
            arg=case.element_handle(),
            timeout=60_000,
        )
        shown = [x["text"] for x in _check_selects(case)]
        assert any(t.startswith("meta-llama/Llama-3.1-8B-Instruct-") for t in shown), shown
        case.screenshot(path=str(SHOTS / "00_case_study_long_names.png"))
    finally:
        page.screenshot(path=str(SHOTS / "00_start_here_final.png"))
        _shutdown_kernel(page)
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
