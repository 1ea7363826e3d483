"""Dashboard pages given hostile or unmatched input: no traceback, and nothing from outside rendered live.

Streamlit's markdown turns a bare URL or a `www.` name into a live link and
`$...$` into math, even when markdown's own characters are escaped; values
from the address and names from stored files must show as the text they are.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fixtures.asv_files import benchmarks_json, machine_json, results_json
from fixtures.asv_project import PROJECT
from test_dashboard_db import SECOND, DashboardDB, ci_store, dash_db  # noqa: F401  (fixtures)
from test_dashboard_pages import ci_db, db, open_page, texts  # noqa: F401  (fixtures)

from flybench.regress.compare import Comparison
from flybench.regress.report import literal_markdown, markdown
from flybench.store import ingest


def test_regressions_of_one_series_where_the_selection_has_none(db: DashboardDB) -> None:  # noqa: F811
    """`?series=` on a selection with no step or change raised KeyError: 'base_text' (an empty frame indexed
    by an empty list of booleans lost its columns)."""
    at = open_page(db.path, "regressions", subject=PROJECT, machine=SECOND, series="anything")
    assert "No open regression for this selection." in texts(at, "success")


LIVE = re.compile(r"https?:/{2}|www\.|[\w.+-]@\w|(?<!\\)\$|(?<!\\)\]\(|(?<!\\)<[a-z/]", re.IGNORECASE)
"""What GitHub's or Streamlit's markdown would render live out of a value: a bare URL, a `www.` name, an e-mail
address (each autolinked, even with markdown's characters escaped), `$` (math), a link, HTML."""

HOSTILE = ["[Session expired, sign in](https:evil.example)", "https://evil.example/login", "www.evil.example",
           "admin@evil.example", "$\\frac{1}{0}$"]


def shown(at, kinds=("markdown", "caption", "info", "warning", "success", "error", "header", "subheader")) -> list[str]:
    """Every piece of markdown the page hands Streamlit to render."""
    return [str(e.value) for kind in kinds for e in at.get(kind)]


def _read(markdown_text: str) -> str:
    """Roughly what a person reads: escapes and zero-width spaces gone."""
    return markdown_text.replace("\u200b", "").replace("\\", "")


def test_the_escaper_leaves_nothing_live() -> None:
    for text in HOSTILE:
        escaped = literal_markdown(text)
        assert not LIVE.search(escaped), escaped
        assert _read(escaped) == _read(text)  # and reads the same


@pytest.mark.parametrize("value", HOSTILE[1:])
@pytest.mark.parametrize("page, field", [("overview", "machine"), ("pull_request", "pr"), ("regressions", "series")])
def test_values_from_the_address_are_never_rendered_live(page: str, field: str, value: str,
                                                         request: pytest.FixtureRequest) -> None:
    """(Pull requests: on the store with FlyDSL's imported CI month, the one that has some.)"""
    path = request.getfixturevalue("ci_db") if page == "pull_request" else request.getfixturevalue("db").path
    at = open_page(path, page, **{field: value})
    said = [text for text in shown(at) if _read(value)[:10] in _read(text)]
    assert said, shown(at)
    assert not [text for text in said if LIVE.search(text)], said


def _tree_of(root: Path, machine: str) -> Path:
    """A results tree of one machine that measured a case with torch only (no FlyDSL there)."""
    grid = [["'c1'"], ["'torch'"], ["'bf16'"]]
    root.mkdir()
    benchmarks_json(root, {"attention.Quick.track_time": {"param_names": ["case", "provider", "dtype"],
                                                           "params": grid}})
    machine_json(root, machine)
    results_json(root, {"attention.Quick.track_time": [[1e-3], grid, "1", 1767268800000, 0.1]}, machine=machine)
    return root


def test_a_machine_named_like_a_link_is_literal_text_on_the_page_and_in_the_comment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine (or an imported runner) named `[Session expired, sign in](https:evil.example)` was stored, and
    Overview's "No FlyDSL results" warning and `compare --format markdown`'s header showed it as a live link."""
    phish = HOSTILE[0]
    tree = _tree_of(tmp_path / "results", phish)  # its folder is named so too, as asv names it
    db = tmp_path / "db.duckdb"
    assert ingest(tree, db, "toy").ok
    monkeypatch.setenv("FLYBENCH_DB", str(db))
    at = open_page(db)
    (warning,) = [w for w in texts(at, "warning") if w.startswith("No FlyDSL results exist yet on ")]
    assert literal_markdown(phish) in warning and not LIVE.search(warning)
    comment = markdown(Comparison(phish, "a" * 40, "b" * 40, 0.001))
    header = next(line for line in comment.splitlines() if line.startswith("### "))
    assert literal_markdown(phish) in header and not LIVE.search(header)
