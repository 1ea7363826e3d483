"""flybench's dashboard: where FlyDSL stands against each baseline, how kernels moved, how close to the roofline.

Start it with `flybench dashboard [--db PATH]`, or directly with
`streamlit run dashboard/app.py -- --db results/flybench.duckdb`. It only
reads the DuckDB store (read-only, one query at a time), so `flybench ingest`
can update the database while it is open; pages pick the change up on reload.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `streamlit run` puts only dashboard/ on the path; the pages import `dashboard.*`
    sys.path.insert(0, str(ROOT))

import streamlit as st

from dashboard import data, ui

VIEWS = Path(__file__).resolve().parent / "views"
PAGES = [
    ("overview.py", "Overview", ":material/grid_view:"),
    ("history.py", "History", ":material/timeline:"),
    ("compare.py", "Compare", ":material/compare_arrows:"),
    ("pull_request.py", "Pull request", ":material/merge:"),
    ("regressions.py", "Regressions", ":material/trending_down:"),
    ("resources.py", "Kernel resources", ":material/memory:"),
    ("roofline.py", "Roofline", ":material/show_chart:"),
    ("model.py", "Model lane", ":material/model_training:"),
]


def main() -> None:
    st.set_page_config(page_title="flybench", page_icon=":material/speed:", layout="wide")
    page = st.navigation([st.Page(VIEWS / file, title=title, icon=icon, default=file == "overview.py")
                          for file, title, icon in PAGES])
    st.sidebar.caption(f"Database: `{data.db_path()}` (read-only)")
    ui.address_limit_note()
    page.run()


main()
