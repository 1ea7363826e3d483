"""The dashboard in a real browser: every page loads in headless Chromium, draws its charts, raises nothing.

Screenshots go to $FLYBENCH_ARTIFACTS (default: pytest's temporary directory,
printed at the end). Locally the test is skipped when Debian's chromium or
Playwright is missing; under CI (CI=true) that is a failure, since .ci/run
installs both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from test_dashboard_db import DashboardDB, ci_store, dash_db  # noqa: F401  (the fixtures)

from browser.harness import (PAGES, Loaded, browser, chromium, drawn, load, runs_rule, screenshot, serve,
                             shows_runs_rule)

MIN_PLOT_HEIGHT = 100  # px: a plot area flatter than this has been squeezed (by its legend, say)
MAX_LEGEND = 12  # entries: a legend longer than this is a chart that should have been split
FORBIDDEN = re.compile(r"\bNone\b|\bnan\b|0\.000000|\bNaT\b")  # what a person must never read on a page
IMPORTED_PAGES = {"overview": ("", 2), "history": ("?benchmark=attention.FlydslCI.track_tflops", 1),
                  "compare": ("", 1), "pull_request": ("?pr=812", 0), "regressions": ("", 1), "resources": ("", 1),
                  "roofline": ("", 0), "model": ("", 0)}
"""Pages on the fixture database plus FlyDSL's imported CI month: the query and the charts each must draw."""
WITHOUT_RUNS_RULE = ("pull_request", "model")
"""Pages without the imported-runs control: a pull request's runs are the page; the model lane imports nothing."""

# Page -> (query string, charts it must draw on the fixture database; None: depends on the H200 results)
EXPECTED: dict[str, tuple[str, int | None]] = {
    "overview": ("?subject=toyproj", 2),
    "history": ("?subject=toyproj&benchmark=attention.Quick.track_time", 1),
    "compare": ("?repo=toyproj&machine_a=m1-gfx950", 1),
    "pull_request": ("", 0),
    "regressions": ("", 1),
    "resources": ("", 1),
    "roofline": ("?machine=dev-h200", None),
    "model": ("", 0),
}


def _require(what: str, present: bool) -> None:
    if present:
        return
    message = f"{what} is not installed (apt-get install -y chromium; pip install playwright)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: .ci/run installs it, so CI must not skip the browser tests")
    pytest.skip(message)


@pytest.fixture(scope="module")
def tab() -> Iterator[Any]:
    """One headless Chromium page for the module (Playwright's sync API allows one instance at a time)."""
    executable = chromium()
    _require("Debian's chromium", executable is not None)
    try:
        import playwright  # noqa: F401
    except ImportError:
        _require("the playwright package", False)
    with browser(str(executable)) as page:
        yield page


@pytest.fixture(scope="module")
def session(dash_db: DashboardDB, tab: Any) -> Iterator[tuple[str, Any]]:  # noqa: F811
    with serve(dash_db.path, dash_db.asv_config) as url:
        yield url, tab


@pytest.fixture(scope="module")
def imported_session(ci_store: Path, dash_db: DashboardDB, tab: Any) -> Iterator[tuple[str, Any]]:  # noqa: F811
    with serve(ci_store, dash_db.asv_config) as url:
        yield url, tab


def readable(name: str, page: Any, loaded: Loaded) -> None:
    """What a person sees is fit to read: no squeezed plot, no overlong or cut legend, no None or 0.000000."""
    assert not loaded.exceptions, loaded.exceptions
    for chart in drawn(page):
        if chart.continuous_y:  # a heatmap of one row is short by right; a value axis squeezed flat is not
            assert all(h >= MIN_PLOT_HEIGHT for h in chart.plot_heights), f"{name}: plot areas {chart.plot_heights} px"
        for legend in chart.legends:
            assert len(legend) <= MAX_LEGEND, f"{name}: a legend of {len(legend)} entries"
            assert not any(label.endswith("…") for label in legend), f"{name}: legend labels cut: {legend}"
        bad = [t for t in chart.texts if FORBIDDEN.search(t)]
        assert not bad, f"{name}: the chart reads {bad[:5]}"
    found = FORBIDDEN.findall(loaded.text)
    assert not found, f"{name}: the page reads {found[:5]}"


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(os.environ.get("FLYBENCH_ARTIFACTS") or tmp_path_factory.getbasetemp() / "screenshots")


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_its_charts_without_exceptions(name: str, session: tuple[str, Any], artifacts: Path,
                                                    dash_db: DashboardDB) -> None:  # noqa: F811
    url, page = session
    query, charts = EXPECTED[name]
    if charts is None:
        charts = 1 if dash_db.has_h200 else 0
    loaded = load(page, url, name, query, charts)
    shot = screenshot(page, artifacts / f"{name}.png")
    assert loaded.charts >= charts, f"{name}: {loaded.charts} charts drawn, expected {charts} (see {shot})"
    assert "Traceback" not in loaded.text and shot.stat().st_size > 10_000
    readable(name, page, loaded)


@pytest.mark.parametrize("name", list(PAGES))
def test_page_on_imported_data_is_readable_and_marks_every_import(name: str, imported_session: tuple[str, Any],
                                                                  artifacts: Path) -> None:
    url, page = imported_session
    query, charts = IMPORTED_PAGES[name]
    loaded = load(page, url, name, query, charts)
    screenshot(page, artifacts / f"imported-{name}.png")
    assert loaded.charts >= charts
    readable(name, page, loaded)
    # every page that shows imported rows shows the rule, main only by default; Pull request shows pull-request
    # runs by definition, the Model lane only flybench's own runs
    if name in WITHOUT_RUNS_RULE:
        assert not shows_runs_rule(page)
    else:
        assert runs_rule(page) == "main only"
    shows_imports = any(t.endswith(" †") for chart in drawn(page) for t in chart.texts) or " †" in loaded.text
    if shows_imports or name in ("overview", "history", "compare"):
        assert "† Imported from flydsl-ci" in loaded.text, f"{name} shows imported values without the mark's note"


@pytest.mark.parametrize("runs", ["pull requests", "all"])
def test_every_page_agrees_on_the_imported_runs_rule(runs: str, imported_session: tuple[str, Any]) -> None:
    url, page = imported_session
    query = "?runs=" + runs.replace(" ", "+")
    seen = {name: (load(page, url, name, query, 0), runs_rule(page))[1] for name in PAGES
            if name not in WITHOUT_RUNS_RULE}
    assert set(seen.values()) == {runs}, seen


def test_an_address_with_more_parameters_than_streamlit_reads_says_so(session: tuple[str, Any]) -> None:
    """Streamlit drops a query string of over 1,000 parameters whole: the page must not silently show everything."""
    url, page = session
    crowded = "?" + "&".join(f"machine=m{i}" for i in range(1001))
    loaded = load(page, url, "history", crowded, 0)
    note = page.locator("#flybench-address-limit")
    note.wait_for(state="visible", timeout=10_000)
    assert note.inner_text().startswith("This address holds 1001 parameters; the dashboard reads at most 1000")
    load(page, url, "history", "?machine=m1", 0)
    assert not page.locator("#flybench-address-limit").is_visible()
    assert "Traceback" not in loaded.text


HOSTILE_VALUES = ("https://evil.example/login", "www.evil.example", "admin@evil.example", "$x^2 + y$")
"""Values a crafted address can carry: a bare URL, a `www.` name and an e-mail address, which Streamlit's markdown
links even when escaped, and `$...$`, which it renders as math."""


def _live_from(page: Any) -> tuple[list[str], int]:
    """The links on the page that lead to the crafted values, and how many math formulas it drew."""
    hrefs = page.locator("[data-testid=stMainBlockContainer] a").evaluate_all("links => links.map(a => a.href)")
    away = [h for h in hrefs if (urlsplit(h).hostname or "").endswith("evil.example") or h.startswith("mailto:")]
    return away, page.locator(".katex").count()  # (a header's own anchor carries the address: it stays here)


@pytest.mark.parametrize("name, field", [("overview", "machine"), ("regressions", "series")])
def test_a_value_from_the_address_is_never_a_link_or_math(name: str, field: str,
                                                         session: tuple[str, Any]) -> None:
    url, page = session
    for value in HOSTILE_VALUES:
        loaded = load(page, url, name, "?" + urlencode({field: value}), 0)
        assert _live_from(page) == ([], 0), (name, value)
        seen = loaded.text.replace("\u200b", "")  # the zero-width space that breaks an autolink reads as nothing
        assert value in seen, (name, value)  # said, as the text it is


def test_a_pull_request_from_the_address_is_never_a_link_or_math(imported_session: tuple[str, Any]) -> None:
    url, page = imported_session
    for value in HOSTILE_VALUES:
        load(page, url, "pull_request", "?" + urlencode({"pr": value}), 0)
        assert _live_from(page) == ([], 0), value


_FAILED_COMPILES = """() => {
    const svg = document.querySelector('.vega-embed svg');
    const plots = [...svg.querySelectorAll('g.mark-group.role-scope.cell > g > path.background, '
                                           + 'g.mark-group.role-scope[class*="concat_"] > g > path.background')]
        .map(p => p.getBoundingClientRect()).map(r => [r.top, r.bottom]);
    const crosses = [...svg.querySelectorAll('g.mark-symbol path')]
        .filter(p => (p.getAttribute('fill') || '').toLowerCase() === '#d62728')
        .map(p => p.getBoundingClientRect()).map(r => [r.top, r.bottom]);
    const pieces = [...svg.querySelectorAll('g.mark-line path')].map(p => ((p.getAttribute('d') || '').match(/M/g) || []).length);
    return {plots, crosses, pieces};
}"""
"""The first chart's plot areas, its red crosses (top and bottom of each) and how many pieces each line is in."""


@pytest.fixture(scope="module")
def compile_session(tab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """The committed compile-only history (results/flydsl), ingested as a new user's first store holds it."""
    from browser.harness import REPO

    from flybench.store import ingest

    tree = REPO / "results" / "flydsl"
    if not any(tree.glob("*/*.json")):
        pytest.skip("no committed compile-only history in this checkout")
    db = tmp_path_factory.mktemp("compile") / "compile.duckdb"
    assert ingest(tree, db).ok
    with serve(db) as url:
        yield url, tab


def test_a_failed_compile_is_a_cross_on_the_bottom_edge_and_breaks_the_line(compile_session: tuple[str, Any]) -> None:
    """moe_gemm_2stage:stage2_prefill failed to compile at 22 commits: each panel shows a cross at its bottom edge
    (the caption says so) for each, and its lines stop there instead of dropping to the floor or bridging."""
    url, page = compile_session
    loaded = load(page, url, "resources", "?kernel=moe_gemm_2stage%3Astage2_prefill", 1)
    assert "on a panel's bottom edge" in loaded.text
    drawn_ = page.evaluate(_FAILED_COMPILES)
    assert drawn_["plots"] and drawn_["crosses"]
    for top, bottom in drawn_["crosses"]:  # each cross sits on the bottom edge of the panel it is drawn in
        centre = (top + bottom) / 2
        assert any(high - 12 <= centre <= high + 2 for _, high in drawn_["plots"]), (top, bottom, drawn_["plots"])
    assert max(drawn_["pieces"]) > 1  # a line broken where the compile failed, neither bridged nor dropped


def test_a_failed_case_is_a_cross_on_the_bottom_edge_of_its_history(session: tuple[str, Any]) -> None:
    """flydsl failed its correctness check at the newest commit on m1-gfx950: History's cross sits on the bottom edge
    of that panel, as its caption says, not above the panel's top (a facet's cell has no `height` signal)."""
    url, page = session
    loaded = load(page, url, "history", "?subject=toyproj&benchmark=attention.Quick.track_time", 1)
    assert "✕ on the bottom edge" in loaded.text
    drawn_ = page.evaluate(_FAILED_COMPILES)
    assert drawn_["crosses"]
    for top, bottom in drawn_["crosses"]:
        centre = (top + bottom) / 2
        assert any(high - 12 <= centre <= high + 2 for _, high in drawn_["plots"]), (top, bottom, drawn_["plots"])


_X_LABELS = """() => [...document.querySelectorAll('.vega-embed svg g.role-axis[aria-label^="X-axis"]')].map(
    axis => [...axis.querySelectorAll('g.role-axis-label text')].map(t => t.textContent))"""


def test_historys_commit_axis_never_prints_one_date_twice(imported_session: tuple[str, Any]) -> None:
    """FlyDSL CI's month has several main commits a day: the axis printed six dates in three identical pairs."""
    url, page = imported_session
    load(page, url, "history", "?" + urlencode({"benchmark": "attention.FlydslCI.track_tflops"}), 1)
    axes = [labels for labels in page.evaluate(_X_LABELS) if len(labels) > 1]
    assert axes and all(len(set(labels)) == len(labels) for labels in axes), axes
