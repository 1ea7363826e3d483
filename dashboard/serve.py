"""`python dashboard/serve.py run dashboard/app.py ...`: `streamlit run`, with the pages' modules imported first.

Streamlit runs a page's script only when a browser connects, so the first
visitor of a fresh server waited for every import the pages need (pandas,
DuckDB, Altair, asv, and scipy through the regression engine): about 2 s of
the first page's 2.8 s on the load test. Importing them before the server
starts moves that wait to the start, before `flybench dashboard` serves its
address. The arguments are `streamlit`'s own.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = ("dashboard.data", "dashboard.analysis", "dashboard.charts", "dashboard.filters", "dashboard.commits")
"""What every page imports; the views themselves are scripts Streamlit runs, not modules."""


def main() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # st.cache_data declared before the server runs says "No runtime found" twice in the terminal of everyone
    # who starts the dashboard; the pages' caches work all the same. Streamlit sets a logger's level as it
    # creates it, so the module is imported before its logger is quietened.
    importlib.import_module("streamlit.runtime.caching.cache_data_api")
    caching = logging.getLogger("streamlit.runtime.caching.cache_data_api")
    level = caching.level
    caching.setLevel(logging.ERROR)
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    finally:
        caching.setLevel(level)
    from streamlit.web import cli

    sys.argv = ["streamlit", *sys.argv[1:]]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
