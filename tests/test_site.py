"""The course website and its live widgets, checked in a real browser (Debian's Chromium driven by Playwright).

Part 1, over the site that ``make book`` built in build/site/: every page loads without console errors or failed
requests, every figure loads (naturalWidth > 0), every formula is typeset by MathJax (no ``$`` or ``\\(`` left in the
text outside code), the next/previous links walk through the pages in order, and a full-page screenshot of each page
is saved under build/site-screenshots/.

Part 2: JupyterLab on a free 127.0.0.1 port (token set, always shut down) opens the smoke-profile copy of each
notebook with a widget (01, 02, 08), cut after its widget cell, runs it, moves every slider and checks that the
figure changes (the PNG the kernel sent before and after differ); screenshots and hashes are saved under
build/site-screenshots/widgets/ (evidence.json).

Run by ``make site-test`` (after ``make book`` and ``make browser``), which sets CALIBMED_REQUIRE_BROWSER=1 so a
missing site or browser fails instead of skipping.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "build" / "site"
SHOTS = ROOT / "build" / "site-screenshots"
WIDGET_COPIES = ROOT / "build" / "widget-lab"
REQUIRE = os.environ.get("CALIBMED_REQUIRE_BROWSER") == "1"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
WIDGET_NOTEBOOKS = ("01", "02", "08")
TIMEOUT_MS = 60_000


def unavailable(message: str) -> None:
    (pytest.fail if REQUIRE else pytest.skip)(message)


def chromium_path() -> str | None:
    return os.environ.get("CALIBMED_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def api_modules() -> list[str]:
    """The modules of the API reference, in the order of book/api.rst's autosummary list."""
    return re.findall(r"^   (helpers(?:\.\w+)+)$", (ROOT / "book" / "api.rst").read_text(), re.MULTILINE)


def site_pages() -> list[str]:
    """Pages in reading order (the order of the site's next links): the landing page, the notebooks, the notes in
    the order of book/index.md's "Notes" toctree, then its "Reference" toctree: the API reference followed by its
    module pages, the changelog."""
    index = (ROOT / "book" / "index.md").read_text()
    notebooks = [f"notebooks/{p.stem}.html" for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    notes = re.findall(r"^/(docs/[\w-]+)$", index, re.MULTILINE)
    reference = []
    for entry in re.findall(r"^/([\w/-]+)$", index.split(":caption: Reference", 1)[1], re.MULTILINE):
        reference.append(f"{entry}.html")
        if entry == "book/api":
            reference += [f"book/generated/{module}.html" for module in api_modules()]
    return ["book/index.html", *notebooks, *[f"{note}.html" for note in notes], *reference]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ----------------------------------------------------------------------------------------------------------------
# fixtures: the browser, the static site server


@pytest.fixture(scope="module")
def browser():
    executable = chromium_path()
    if executable is None:
        unavailable("no chromium on PATH: run `make browser` (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed: `pip install -e '.[dev]'`")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / "book" / "index.html").is_file():
        unavailable(f"no site at {SITE}: run `make book` first")
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reports failed requests itself
        pass


class PageProblems:
    """Console errors, uncaught exceptions, failed requests and HTTP errors of one page."""

    def __init__(self, page):
        self.items: list[str] = []
        page.on("console", lambda m: self.items.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.items.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: self.items.append(f"request failed: {r.url} ({r.failure})"))
        page.on("response", lambda r: self.items.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)


# ----------------------------------------------------------------------------------------------------------------
# part 1: the static site

UNTYPESET_MATH_JS = """() => {
    const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "MJX-CONTAINER", "TEXTAREA"]);
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const raw = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        let parent = node.parentElement, skipped = false;
        while (parent) { if (skip.has(parent.tagName)) { skipped = true; break; } parent = parent.parentElement; }
        if (!skipped && /\\$|\\\\\\(|\\\\\\[/.test(node.textContent)) raw.push(node.textContent.slice(0, 80));
    }
    const math = Array.from(document.querySelectorAll("span.math, div.math"));
    return {raw: raw, math: math.length, typeset: math.filter(m => m.querySelector("mjx-container")).length};
}"""


@pytest.mark.parametrize("path", site_pages())
def test_page_loads_with_figures_and_typeset_math(browser, site_url, path):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    problems = PageProblems(page)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{site_url}/{path}", wait_until="load")
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise.then(() => true) : null")
    images = page.evaluate("() => Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth])")
    math = page.evaluate(UNTYPESET_MATH_JS)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / (path.replace("/", "__").removesuffix(".html") + ".png")), full_page=True)
    page.close()

    assert problems.items == [], f"{path}: {problems.items[:5]}"
    broken = [src for src, width in images if width == 0]
    assert not broken, f"{path}: figures that did not load: {broken[:5]}"
    if path.startswith("notebooks/"):
        assert len(images) >= 1, f"{path}: a notebook page without a single figure"
    assert math["raw"] == [], f"{path}: math left as raw TeX: {math['raw'][:3]}"
    assert math["typeset"] == math["math"], f"{path}: {math['math'] - math['typeset']} formulas not typeset"


NOTEBOOK_PAGES = [f"notebooks/{p.stem}.html" for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]

# every DataFrame of a page: its cells whose text runs over more than one line (a cell spanning several rows aside),
# whether it is a paired comparison (an index headed "vs <reference>", helpers.metrics.difference_table), its
# width and the width of the main column
DATAFRAMES_JS = """() => {
    const column = document.querySelector("article.bd-article").clientWidth;
    return Array.from(document.querySelectorAll("article table.dataframe")).map(table => {
        const wrapped = Array.from(table.querySelectorAll("th, td")).filter(cell => {
            if (cell.rowSpan > 1) return false;
            const style = getComputedStyle(cell);
            const text = cell.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
            return text > 1.5 * parseFloat(style.lineHeight);
        }).map(cell => cell.textContent.trim().slice(0, 40));
        const comparison = Array.from(table.querySelectorAll("thead th")).some(th => /^vs /.test(th.textContent));
        return {wrapped: wrapped, comparison: comparison, width: table.scrollWidth, column: column};
    });
}"""


# every figure of a page at a phone's width: its drawn size on the page over its natural size, and whether the page
# itself (not a figure's own scrolling box) runs wider than the screen because of it
FIGURES_JS = """() => Array.from(document.querySelectorAll("article div.cell_output img"))
    .filter(img => img.naturalWidth > 200)
    .map(img => ({scale: img.clientWidth / img.naturalWidth, src: img.src.slice(-20)}))"""


@pytest.mark.parametrize("path", NOTEBOOK_PAGES)
def test_figures_stay_legible_at_a_phones_width(browser, site_url, path):
    """At 390 px a figure keeps at least half its drawn size (its box scrolls sideways) instead of shrinking to the
    screen, where a two-panel figure's labels drop to a quarter of their size."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(f"{site_url}/{path}", wait_until="load")
        figures = page.evaluate(FIGURES_JS)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    finally:
        page.close()
    small = [f for f in figures if f["scale"] < 0.5]
    assert not small, f"{path}: {len(small)} of {len(figures)} figures drawn below half size at 390 px: {small[:3]}"
    assert overflow <= 20, (
        f"{path}: the page runs {overflow} px wider than a 390 px screen (a figure's box must scroll)"
    )


@pytest.mark.parametrize("path", NOTEBOOK_PAGES)
def test_tables_keep_each_cell_on_one_line_and_comparisons_fit_at_1440_px(browser, site_url, path):
    """Issue 16 item 8: at a 1,440 px window the main column is wide (about 1,150 px, not 880 beside the page's
    table of contents), no DataFrame cell wraps onto a second line, and every paired-comparison table fits the
    column without scrolling sideways."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{site_url}/{path}", wait_until="load")
    tables = page.evaluate(DATAFRAMES_JS)
    contents = page.locator(".bd-sidebar-secondary")
    toc_hidden_until_asked = not contents.is_visible()
    page.click("button.secondary-toggle")  # the "Contents" button opens the page's table of contents
    toc_opens = contents.is_visible()
    page.close()
    assert tables and tables[0]["column"] >= 1100, f"{path}: main column {tables[0]['column'] if tables else '?'} px"
    assert toc_hidden_until_asked and toc_opens
    wrapped = [t["wrapped"] for t in tables if t["wrapped"]]
    assert not wrapped, f"{path}: {len(wrapped)} tables wrap cells, e.g. {wrapped[0][:3]}"
    too_wide = [t["width"] for t in tables if t["comparison"] and t["width"] > t["column"]]
    assert not too_wide, f"{path}: comparison tables wider than the {tables[0]['column']} px column: {too_wide}"


SOLUTIONS_JS = """() => Array.from(document.querySelectorAll("div.cell.tag_solution")).map(cell => {
    const code = cell.querySelector(".cell_input pre");
    const toggle = cell.querySelector("details.above-input");
    return {folded: toggle !== null && !toggle.open, code_visible: code !== null && code.checkVisibility()};
})"""


@pytest.mark.parametrize("path", NOTEBOOK_PAGES)
def test_solutions_are_folded_until_the_reader_opens_them(browser, site_url, path):
    """Issue 16 item 8: an exercise's solution cell (tagged ``solution``) shows its code only after a click."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{site_url}/{path}", wait_until="load")
    solutions = page.evaluate(SOLUTIONS_JS)
    if solutions:
        page.locator("div.cell.tag_solution details.above-input summary").first.click()
        opened = page.evaluate(SOLUTIONS_JS)[0]
    page.close()
    if not solutions:
        pytest.skip(f"{path} has no solution cell")
    assert all(s["folded"] and not s["code_visible"] for s in solutions), f"{path}: {solutions}"
    assert opened["code_visible"], f"{path}: the first solution did not open on a click"


@pytest.mark.parametrize("path", NOTEBOOK_PAGES)
def test_the_parameter_cells_are_not_shown(site_url, path):
    """Issue 16 item 5: neither the ``parameters`` cell nor papermill's injected cell reaches the website (a plain
    check of the built HTML, no browser needed)."""
    html = (SITE / path).read_text(encoding="utf-8")
    assert "tag_parameters" not in html and "tag_injected-parameters" not in html
    # the injected cell starts with "# Parameters"; the parameters cell assigns `profile = "…"` (the configure call
    # passes `profile=profile`, no spaces)
    assert "# Parameters" not in html
    assert not re.search(r'<span class="n">profile</span>\s+<span class="o">=</span>\s+<span class="s2">', html)


def test_next_and_previous_links_walk_the_course_in_order(browser, site_url):
    pages = site_pages()
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{site_url}/{pages[0]}")
    visited = [pages[0]]
    for _ in pages[1:]:
        page.click("a.right-next")
        page.wait_for_load_state("load")
        visited.append(page.url.removeprefix(f"{site_url}/").split("#")[0])
    assert visited == pages
    assert page.locator("a.right-next").count() == 0  # the last page has no next link
    back = [visited[-1]]
    for _ in pages[1:]:
        page.click("a.left-prev")
        page.wait_for_load_state("load")
        back.append(page.url.removeprefix(f"{site_url}/").split("#")[0])
    page.close()
    assert back == pages[::-1]


def test_site_root_leads_to_the_landing_page(browser, site_url):
    page = browser.new_page()
    page.goto(f"{site_url}/")
    page.wait_for_url(re.compile(r".*/book/index\.html$"), timeout=TIMEOUT_MS)
    assert "CalibMed" in page.title()
    links = page.eval_on_selector_all("a[href*='notebooks/']", "els => els.map(e => e.getAttribute('href'))")
    page.close()
    # the course map of the README links every notebook
    for notebook in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert any(notebook.stem in link for link in links), f"the landing page does not link {notebook.stem}"


def test_the_download_button_of_a_notebook_page_gives_that_notebook(browser, site_url, tmp_path):
    """The header's download menu, entry ".ipynb": the file saved is the committed notebook (valid nbformat, the
    same cells), for every notebook page."""
    import nbformat

    page = browser.new_page(accept_downloads=True)
    problems = PageProblems(page)
    page.set_default_timeout(TIMEOUT_MS)
    for committed in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page.goto(f"{site_url}/notebooks/{committed.stem}.html", wait_until="load")
        page.click(".dropdown-download-buttons button.dropdown-toggle")
        link = page.locator(".dropdown-download-buttons a.btn-download-source-button")
        assert link.inner_text().strip() == ".ipynb"
        with page.expect_download() as pending:
            link.click()
        saved = tmp_path / pending.value.suggested_filename
        pending.value.save_as(saved)
        assert saved.name == committed.name
        downloaded = nbformat.read(saved, as_version=4)
        nbformat.validate(downloaded)
        assert downloaded.cells == nbformat.read(committed, as_version=4).cells, f"{saved.name}: other cells"
        assert saved.read_bytes() == committed.read_bytes()
    page.close()
    assert problems.items == [], problems.items[:5]


def test_the_api_reference_is_in_the_navigation_and_documents_the_metrics(browser, site_url):
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{site_url}/book/index.html", wait_until="load")
    page.click("nav.bd-links a[href$='api.html']")
    page.wait_for_load_state("load")
    assert page.url.endswith("/book/api.html")
    modules = page.eval_on_selector_all(
        "article a[href*='generated/helpers.'][href*='#module-']",
        "els => [...new Set(els.map(e => e.getAttribute('href')))]",
    )
    assert len(modules) == len(api_modules()), modules
    documented = []
    for module in ("calibration", "bootstrapping"):
        page.click(f"article a[href^='generated/helpers.metrics.{module}.html']")
        page.wait_for_load_state("load")
        documented += page.eval_on_selector_all("dl.py.function > dt", "els => els.map(e => e.id)")
        page.go_back(wait_until="load")
    page.close()
    for name in (
        "calibration.ece",
        "calibration.adaptive_ece",
        "bootstrapping.paired_bootstrap",
        "bootstrapping.weighted_evaluator",
    ):
        assert f"helpers.metrics.{name}" in documented


# ----------------------------------------------------------------------------------------------------------------
# part 2: live widgets in JupyterLab


# the call that makes a slider cell: ipywidgets' interact or interact_manual, or the course's wrapper of them
SLIDER_CALL = re.compile(r"(widgets|course)\.interact(_manual)?\(")


def slider_cell(nb, name: str) -> int:
    """The index of a notebook's first slider cell (a code cell calling :data:`SLIDER_CALL`); an error naming the
    notebook when it has none, since the JupyterLab test drives that cell."""
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and SLIDER_CALL.search("".join(cell["source"])):
            return index
    raise AssertionError(
        f"{name} has no code cell calling widgets.interact(...), widgets.interact_manual(...) or "
        "course.interact(...): the JupyterLab slider test needs one (restore the slider cell or drop the notebook "
        "from WIDGET_NOTEBOOKS)"
    )


def widget_copies() -> dict[str, Path]:
    """Smoke-profile copies of 01, 02 and 08 that end with their (first) widget cell, outputs cleared."""
    import nbformat

    from helpers import course

    shutil.rmtree(WIDGET_COPIES, ignore_errors=True)
    shutil.rmtree(SHOTS / "widgets", ignore_errors=True)
    course.run_course(WIDGET_COPIES, profile="smoke", selection=list(WIDGET_NOTEBOOKS), prepare_only=True)
    copies = {}
    for path in sorted((WIDGET_COPIES / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nb.cells = nb.cells[: slider_cell(nb, path.name) + 1]
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nb.metadata.pop("widgets", None)
        nbformat.write(nb, path)
        copies[path.stem[:2]] = path
    return copies


@pytest.fixture(scope="module")
def jupyterlab():
    """(base URL, token, copies): a JupyterLab server on a free loopback port, shut down after the tests."""
    copies = widget_copies()
    port, token = free_port(), secrets.token_hex(16)
    runtime = WIDGET_COPIES / "jupyter-runtime"
    # a kernel of this server is looked at (by the browser): no headless settings from the calling shell
    headless = ("MPLBACKEND", "CALIBMED_PROGRESS", "CALIBMED_HEADLESS", "CI")
    env = {k: v for k, v in os.environ.items() if k not in headless}
    env.update(
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTER_CONFIG_DIR=str(WIDGET_COPIES / "jupyter-config"),
        JUPYTER_DATA_DIR=str(WIDGET_COPIES / "jupyter-data"),
        JUPYTERLAB_WORKSPACES_DIR=str(WIDGET_COPIES / "workspaces"),
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        *(["--debug"] if os.environ.get("CALIBMED_LAB_DEBUG") else []),
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={ROOT}",
        "--ServerApp.allow_root=True",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    settings = WIDGET_COPIES / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env["JUPYTERLAB_SETTINGS_DIR"] = str(WIDGET_COPIES / "lab-settings")
    # the kernel runs in the copies' folder: make it import this checkout's helpers whatever is installed
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    log = open(WIDGET_COPIES / "jupyterlab.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start: see {log.name}") from None
                time.sleep(0.5)
        yield base, token, copies
    finally:
        try:
            request = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(request, timeout=10)
            server.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        log.close()


def figure_png(widget) -> str | None:
    """The base64 PNG the kernel last drew into the widget's output area, or None."""
    images = widget.locator(".widget-output img, .jp-OutputArea-output img")
    return images.last.get_attribute("src") if images.count() else None


def wait_for_new_figure(page, widget, previous: str | None) -> str:
    """The figure once it differs from ``previous`` and has stayed the same for 1.5 s (a slider moved by several
    steps redraws once per step: the evidence is the figure of the final value)."""
    deadline = time.monotonic() + 60
    current, stable_since = None, time.monotonic()
    while time.monotonic() < deadline:
        latest = figure_png(widget)
        if latest != current:
            current, stable_since = latest, time.monotonic()
        elif current and current != previous and time.monotonic() - stable_since >= 1.5:
            return current
        page.wait_for_timeout(200)
    raise AssertionError("the figure did not change (or did not settle) within 60 s")


def accept_kernel_dialog(page) -> None:
    """Accept JupyterLab's dialog if one opens: the kernel to start (the notebook's python3), a restart."""
    dialog = page.locator(".jp-Dialog")
    try:
        dialog.wait_for(state="visible", timeout=5_000)
    except Exception:  # playwright's TimeoutError: no dialog this time
        return
    dialog.locator("button.jp-mod-accept").click()
    dialog.wait_for(state="hidden")


def digest(data_url: str) -> str:
    return hashlib.sha256(data_url.split(",", 1)[-1].encode()).hexdigest()[:16]


@pytest.mark.parametrize("prefix", WIDGET_NOTEBOOKS)
def test_every_slider_redraws_the_figure_in_jupyterlab(browser, jupyterlab, prefix):
    base, token, copies = jupyterlab
    path = copies[prefix].relative_to(ROOT).as_posix()
    out = SHOTS / "widgets"
    out.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        evidence = drive_widget(page, base, token, path, prefix, out)
    except Exception:
        page.screenshot(path=str(out / f"{prefix}-failure.png"))
        raise
    finally:
        page.close()
    record = out / "evidence.json"
    collected = json.loads(record.read_text()) if record.exists() else {}
    collected[prefix] = evidence
    record.write_text(json.dumps(collected, indent=2))


def drive_widget(page, base: str, token: str, path: str, prefix: str, out: Path) -> dict:
    """Open the copy, run all its cells, move every slider of its widget; return the before/after evidence."""
    # a workspace of its own, reset: only this notebook is open, whatever the previous test left
    page.goto(f"{base}/lab/workspaces/widgets-{prefix}/tree/{path}?reset&token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    accept_kernel_dialog(page)
    # "Restart Kernel and Run All Cells" waits for a ready kernel (a plain "Run All" sent while the kernel is still
    # connecting can be lost) and asks for confirmation
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Kernel$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel and Run All Cells")).click()
    accept_kernel_dialog(page)

    widget = page.locator(".widget-interact").last
    widget.wait_for(state="visible", timeout=150_000)
    widget.scroll_into_view_if_needed()
    manual = widget.locator("button", has_text="Run Interact")
    if manual.count():  # interact_manual draws only when asked
        manual.click()
    figure = wait_for_new_figure(page, widget, None)
    sliders = widget.locator(".widget-slider")
    assert sliders.count() >= 1, "no slider in the widget"
    evidence = {"notebook": Path(path).stem, "initial": digest(figure), "sliders": []}
    widget.screenshot(path=str(out / f"{prefix}-0-initial.png"))
    for index in range(sliders.count()):
        slider = sliders.nth(index)
        label = slider.locator(".widget-label").inner_text().strip() or f"slider {index}"
        readout = slider.locator(".widget-readout")
        before_value = readout.inner_text().strip()
        slider.locator(".noUi-handle").first.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        if manual.count():
            manual.click()
        new_figure = wait_for_new_figure(page, widget, figure)
        after_value = readout.inner_text().strip()
        assert after_value != before_value, f"{label}: the slider did not move ({before_value})"
        assert digest(new_figure) != digest(figure)
        shot = out / f"{prefix}-{index + 1}-{re.sub(r'[^A-Za-z0-9]+', '_', label).strip('_')}.png"
        widget.screenshot(path=str(shot))
        evidence["sliders"].append(
            {
                "slider": label,
                "value_before": before_value,
                "value_after": after_value,
                "figure_before": digest(figure),
                "figure_after": digest(new_figure),
                "screenshot": shot.relative_to(ROOT).as_posix(),
            }
        )
        figure = new_figure
    return evidence
