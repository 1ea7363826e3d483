"""Drive the dashboard in headless Chromium: start the app on a free port, load its pages, take screenshots.

The browser tests use it, and so do the README's screenshots:

    python -m tests.browser.harness --db results/flybench.duckdb --out docs/img overview history

It uses Debian's chromium (`apt-get install chromium`), never a browser that
Playwright would download: only the package registries are reachable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "dashboard" / "app.py"
SERVE = REPO / "dashboard" / "serve.py"  # as `flybench dashboard` starts it: the pages' modules imported first
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PAGES = {"overview": "", "history": "history", "compare": "compare", "pull_request": "pull_request",
         "regressions": "regressions", "resources": "resources", "roofline": "roofline", "model": "model"}
"""Page name -> URL path (st.navigation derives it from the view's file name; the default page is '/')."""
TITLES = {"overview": "Overview", "history": "History", "compare": "Compare", "pull_request": "Pull request",
          "regressions": "Regressions", "resources": "Kernel resources", "roofline": "Roofline",
          "model": "Model lane"}
"""Page name -> the title its script writes first: a load is the page's own once that title shows."""


@dataclass(frozen=True)
class Loaded:
    """What a page showed once it finished running."""

    charts: int
    exceptions: list[str]
    text: str


def chromium() -> str | None:
    """Debian's chromium, if installed."""
    return next((p for p in (shutil.which("chromium"), "/usr/bin/chromium") if p and Path(p).is_file()), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(db: Path, asv_config: Path | None = None, timeout: float = 60.0) -> Iterator[str]:
    """The app on 127.0.0.1 and a free port, started as `flybench dashboard` starts it; yields its URL, stops it
    afterwards."""
    with server(db, asv_config, timeout) as (url, _process):
        yield url


@contextmanager
def server(db: Path, asv_config: Path | None = None,
           timeout: float = 60.0) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`serve`, yielding the server's process too (the speed study reads its CPU time). The command and its
    settings are `flybench dashboard`'s own (`flybench.cli.dashboard.command`), started in this checkout."""
    from flybench.cli import build_parser
    from flybench.cli import dashboard as verb

    port = free_port()
    args = build_parser().parse_args(["dashboard", "--db", str(db), "--port", str(port), "--address", "127.0.0.1",
                                      *(["--config", str(asv_config)] if asv_config is not None else [])])
    cmd, env = verb.command(args)  # exactly what `flybench dashboard` runs: its settings are what is measured
    process = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start on {url}:\n{process.stdout.read() if process.stdout else ''}")
            time.sleep(0.2)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def browser(executable: str) -> Iterator[Any]:
    """A headless Chromium page (1400 px wide) from Playwright, driving the given executable."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield instance.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            instance.close()


def load(page: Any, url: str, name: str, query: str = "", charts: int = 1, timeout_ms: int = 60_000) -> Loaded:
    """Open one page and wait until its script finished and at least `charts` charts are drawn."""
    page.goto(f"{url}/{PAGES[name]}{query}", wait_until="domcontentloaded")
    # the page's own title: a run of another page (the default one, as a URL is resolved) does not count
    page.locator("[data-testid=stMainBlockContainer] h1", has_text=TITLES[name]).first.wait_for(timeout=timeout_ms)
    page.wait_for_function(  # the app says when its script has ended; the status widget may lag behind
        "() => document.querySelector('[data-testid=stApp]').getAttribute('data-test-script-state') === 'notRunning'"
        " && !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout_ms)
    embeds = page.locator(".vega-embed")  # locators see into the shadow DOM where Vega draws
    deadline = time.monotonic() + timeout_ms / 1000
    while embeds.count() < charts and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    for index in range(embeds.count()):
        embeds.nth(index).locator("svg, canvas").first.wait_for(timeout=timeout_ms)
    return Loaded(embeds.count(), page.locator("[data-testid=stException]").all_inner_texts(),
                  page.locator("[data-testid=stMainBlockContainer]").inner_text())


@dataclass(frozen=True)
class Drawn:
    """What one SVG chart drew, read from Vega's scenegraph in the page."""

    plot_heights: list[float]  # each plot area's (a facet's cell's, a concatenated view's) height in pixels
    continuous_y: bool  # a value axis (linear, log) runs up the plot; False for heatmaps and bar lists
    legends: list[list[str]]  # each symbol legend's labels as drawn (Vega ends a cut label with an ellipsis)
    texts: list[str]  # every text the chart drew: axis labels, titles, legend labels


_DRAWN = """() => [...document.querySelectorAll('.vega-embed svg')].map(svg => {
    // a facet's cells, or the views of a concatenation (panels stacked one per machine): each is a plot area
    const cells = [...svg.querySelectorAll('g.mark-group.role-scope.cell > g > path.background, '
                                           + 'g.mark-group.role-scope[class*="concat_"] > g > path.background')];
    const areas = cells.length ? cells : [...svg.querySelectorAll('g.mark-group.role-frame.root > g > path.background')];
    const yAxes = [...svg.querySelectorAll('g.role-axis[aria-label^="Y-axis"]')].map(a => a.getAttribute('aria-label'));
    return {plot_heights: areas.map(p => p.getBBox().height),
            continuous_y: yAxes.some(a => /linear|log|pow|sqrt|symlog/.test(a)),
            legends: [...svg.querySelectorAll('g.mark-group.role-legend')]
                .filter(g => g.querySelector('.role-legend-symbol')).map(
                g => [...g.querySelectorAll('.role-legend-label text')].map(t => t.textContent)),
            texts: [...svg.querySelectorAll('text')].map(t => t.textContent)};
})"""


def drawn(page: Any) -> list[Drawn]:
    """Every SVG chart on the page (charts too big for SVG draw on a canvas and are not read)."""
    return [Drawn(**chart) for chart in page.evaluate(_DRAWN)]


RUNS_RULE = "[data-testid=stSidebar] [data-testid=stRadio]"


def runs_rule(page: Any, timeout_ms: int = 60_000) -> str:
    """The imported-runs choice the sidebar shows as selected, on a page that shows the control.

    It waits for what it reads, the control's checked option, never for a
    fixed time: the sidebar can be drawn a moment after the main block, and
    on a loaded machine that moment was once longer than the 3 s this used
    to wait, so a page read as showing no choice at all.
    """
    checked = page.locator(RUNS_RULE).filter(has_text="Imported runs").first.locator("label:has(input:checked)")
    checked.wait_for(timeout=timeout_ms)
    return checked.inner_text().strip()


def shows_runs_rule(page: Any) -> bool:
    """Whether a page `load` has finished shows the imported-runs control at all."""
    return page.locator(RUNS_RULE).filter(has_text="Imported runs").count() > 0


def screenshot(page: Any, path: Path, max_height: int = 6000) -> Path:
    """The whole page as PNG: Streamlit scrolls inside its main section, so the viewport grows to fit it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": page.viewport_size["width"], "height": min(int(height) + 40, max_height)})
    page.wait_for_timeout(500)  # let the charts re-layout to the new size
    page.screenshot(path=str(path))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshots of dashboard pages in headless Chromium.")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--config", type=Path, help="asv config for commit messages and links")
    parser.add_argument("--out", type=Path, required=True, help="directory for <page>.png")
    parser.add_argument("--query", default="", help="query string for every page, e.g. '?machine=dev-h200'")
    parser.add_argument("--charts", type=int, default=1, help="wait for at least this many charts per page")
    parser.add_argument("pages", nargs="+", choices=list(PAGES))
    args = parser.parse_args(argv)
    executable = chromium()
    if executable is None:
        raise SystemExit("chromium is not installed: apt-get install -y chromium")
    with serve(args.db.resolve(), args.config.resolve() if args.config else None) as url, browser(executable) as page:
        for name in args.pages:
            loaded = load(page, url, name, args.query, args.charts)
            print(f"{name}: {loaded.charts} charts, {len(loaded.exceptions)} exceptions -> "
                  f"{screenshot(page, args.out / f'{name}.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
