"""Sidebar filters whose choices live in the URL's query parameters, so a view can be shared as a link.

Streamlit's `bind="query-params"` keeps a widget and the parameter of the
same name in step both ways (`?machine=m1-gfx950&provider=flydsl&provider=torch`).
Filters cascade: each offers only the values the filters above it leave.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

SCOPE = (("subject", "Subject (repository)"), ("arch", "Architecture"), ("machine", "Machine"),
         ("workload", "Workload"), ("provider", "Provider"), ("dtype", "Dtype"), ("case", "Shape (case)"))
"""The filters every page shares, in the order they narrow each other."""
RUNS = ("main only", "pull requests", "all")
"""Which runs of an imported history (FlyDSL's CI) to show; flybench's own rows have no run context."""


def _options(values: Iterable[Any]) -> list[str]:
    return sorted({str(v) for v in values if not pd.isna(v)})


def pick_many(label: str, key: str, values: Iterable[Any], help: str | None = None) -> list[str]:
    """The chosen values; choosing none means all of them."""
    options = _options(values)
    chosen = st.sidebar.multiselect(label, options, key=key, bind="query-params", placeholder="all", help=help)
    return [c for c in chosen if c in options] or options


def pick_one(label: str, key: str, values: Sequence[Any], default: Any = None, sidebar: bool = True) -> Any:
    """One value (the default, else the first, until someone picks); None when there is nothing to pick.

    No format_func: a bound widget writes its *label* into the URL, so options are kept readable as they are.
    """
    options = list(dict.fromkeys(values))
    if not options:
        return None
    where = st.sidebar if sidebar else st
    index = options.index(default) if default in options else 0
    return where.selectbox(label, options, index=index, key=key, bind="query-params")


def scope(facets: pd.DataFrame, fields: Sequence[str] = tuple(f for f, _ in SCOPE)) -> pd.DataFrame:
    """`facets` narrowed by each shared filter in `fields`, each offering what the ones above it leave."""
    rows = facets
    for field, label in SCOPE:
        if field in fields and field in rows:
            chosen = pick_many(label, field, rows[field])
            rows = rows[rows[field].isin(chosen) | rows[field].isna()]
    return rows


def within(frame: pd.DataFrame, allowed: pd.DataFrame, fields: Sequence[str] = tuple(f for f, _ in SCOPE)) -> pd.DataFrame:
    """Rows of `frame` whose values in `fields` are among those left in `allowed` (missing values pass)."""
    keep = pd.Series(True, index=frame.index)
    for field in fields:
        if field in frame and field in allowed:
            keep &= frame[field].isin(set(allowed[field].dropna())) | frame[field].isna()
    return frame[keep]


def imported_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Imported histories (FlyDSL's CI) hold main-branch and pull-request runs: main only unless asked.

    flybench's own rows have no run context and always pass. The choice is the
    `runs` URL parameter, so every page that shows imported rows agrees on it.
    """
    contexts = set(rows["run_context"].dropna()) if "run_context" in rows else set()
    if not contexts - {"main"}:
        return rows
    choice = st.sidebar.radio("Imported runs", RUNS, key="runs", bind="query-params",
                              help="FlyDSL's CI measured main pushes and pull requests; each PR is its own series.")
    keep = {"main only": {"main"}, "pull requests": contexts - {"main"}, "all": contexts}[choice]
    return rows[rows["run_context"].isna() | rows["run_context"].isin(keep)]
