"""Dashboard pages given hostile or unmatched input: no traceback, and nothing from outside rendered live.

Streamlit's markdown turns a bare URL or a `www.` name into a live link and
`$...$` into math, even when markdown's own characters are escaped; values
from the address and names from stored files must show as the text they are.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.asv_project import MACHINE, PROJECT
from test_dashboard_db import SECOND, DashboardDB, dash_db  # noqa: F401  (fixtures)
from test_dashboard_pages import db, open_page, texts  # noqa: F401  (fixtures)


def test_regressions_of_one_series_where_the_selection_has_none(db: DashboardDB) -> None:  # noqa: F811
    """`?series=` on a selection with no step or change raised KeyError: 'base_text' (an empty frame indexed
    by an empty list of booleans lost its columns)."""
    at = open_page(db.path, "regressions", subject=PROJECT, machine=SECOND, series="anything")
    assert "No open regression for this selection." in texts(at, "success")
