"""The dashboard in a real browser: every page loads in headless Chromium, draws its charts, raises nothing.

Screenshots go to $FLYBENCH_ARTIFACTS (default: pytest's temporary directory,
printed at the end). Locally the test is skipped when Debian's chromium or
Playwright is missing; under CI (CI=true) that is a failure, since .ci/run
installs both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_dashboard_db import DashboardDB, dash_db  # noqa: F401  (the fixture)

from browser.harness import PAGES, browser, chromium, load, screenshot, serve

# Page -> (query string, charts it must draw on the fixture database; None: depends on the H200 results)
EXPECTED: dict[str, tuple[str, int | None]] = {
    "overview": ("?subject=toyproj", 2),
    "history": ("?subject=toyproj&benchmark=attention.Quick.track_time", 1),
    "compare": ("?repo=toyproj&machine_a=m1-gfx950", 1),
    "regressions": ("", 1),
    "resources": ("", 1),
    "roofline": ("?machine=dev-h200", None),
}


def _require(what: str, present: bool) -> None:
    if present:
        return
    message = f"{what} is not installed (apt-get install -y chromium; pip install playwright)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: .ci/run installs it, so CI must not skip the browser tests")
    pytest.skip(message)


@pytest.fixture(scope="module")
def session(dash_db: DashboardDB) -> Iterator[tuple[str, Any]]:  # noqa: F811
    executable = chromium()
    _require("Debian's chromium", executable is not None)
    try:
        import playwright  # noqa: F401
    except ImportError:
        _require("the playwright package", False)
    with serve(dash_db.path, dash_db.asv_config) as url, browser(str(executable)) as page:
        yield url, page


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
    assert not loaded.exceptions, loaded.exceptions
    assert loaded.charts >= charts, f"{name}: {loaded.charts} charts drawn, expected {charts} (see {shot})"
    assert "Traceback" not in loaded.text and shot.stat().st_size > 10_000
