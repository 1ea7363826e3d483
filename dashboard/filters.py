"""Sidebar filters whose choices live in the URL's query parameters, so a view can be shared as a link.

Streamlit's `bind="query-params"` keeps a widget and the parameter of the
same name in step both ways (`?machine=m1-gfx950&provider=flydsl&provider=torch`).
Filters cascade: each offers only the values the filters above it leave.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from flybench.regress.report import literal_markdown

SCOPE = (("subject", "Subject (repository)"), ("arch", "Architecture"), ("machine", "Machine"),
         ("workload", "Workload"), ("provider", "Provider"), ("dtype", "Dtype"), ("case", "Shape (case)"))
"""The filters every page shares, in the order they narrow each other."""
RUNS = ("main only", "pull requests", "all")
"""Which runs of an imported history (FlyDSL's CI) to show; flybench's own rows have no run context."""
RUN_NAMES = {"main": "main pushes", "pr": "pull-request runs", "branch": "runs of other branches"}


def _options(values: Iterable[Any]) -> list[str]:
    """The distinct values, as text, sorted (unique first: a facet column repeats each value many times)."""
    column = values if isinstance(values, pd.Series) else pd.Series(list(values), dtype=object)
    return sorted({str(v) for v in column.dropna().unique()})


def pick_many(label: str, key: str, values: Iterable[Any], help: str | None = None) -> list[str]:
    """The chosen values; choosing none means all of them.

    A value asked for in the URL that this page has no results for is said
    out loud and selects nothing, rather than silently showing everything
    else (`?arch=gfx950` on a page with only sm_90 results).
    """
    options = _options(values)
    unknown = [v for v in st.query_params.get_all(key) if v not in options]
    chosen = st.sidebar.multiselect(label, options, key=key, bind="query-params", placeholder="all", help=help)
    if unknown:
        st.warning(f"{label} {literal_markdown(', '.join(unknown))}: nothing on this page for it "
                   f"(available: {literal_markdown(', '.join(options)) or 'none'}). Clear it in the sidebar.")
        return []
    return [c for c in chosen if c in options] or options


def pick_one(label: str, key: str, values: Sequence[Any], default: Any = None, sidebar: bool = True,
             format_func: Callable[[Any], str] | None = None, help: str | None = None, where: Any = None) -> Any:
    """One value (the default, else the first, until someone picks); None when there is nothing to pick.

    With `format_func` the options read as labels while the URL keeps the value
    itself (a commit's hash, a benchmark's id): a bound widget would write its
    label into the URL, so that one is kept in step with the URL by hand. A
    value the URL names stays in it, the default too (a link names what it
    showed); one that matches no option is said, as literal text, and the
    default shown. `where` places the widget (a column); else the sidebar or
    the page.
    """
    options = list(dict.fromkeys(values))
    if not options:
        return None
    where = where if where is not None else st.sidebar if sidebar else st
    index = options.index(default) if default in options else 0
    fallback = options[index]
    wanted = st.query_params.get(key)
    text = {str(o): o for o in options}
    if key not in st.session_state and wanted is not None and wanted not in text:
        shown = format_func(fallback) if format_func else str(fallback)
        st.warning(f"{label} {literal_markdown(wanted)}: nothing on this page for it. "
                   f"Showing {literal_markdown(shown)}.")
    if format_func is None:
        return where.selectbox(label, options, index=index, key=key, bind="query-params", help=help)
    if key not in st.session_state and wanted in text:
        index = options.index(text[wanted])
    choice = where.selectbox(label, options, index=index, key=key, format_func=format_func, help=help)
    if str(choice) != st.query_params.get(key) and (choice != fallback or key in st.query_params):
        st.query_params[key] = str(choice)  # a choice, or a link's value changed back to the default
    return choice


def known(label: str, key: str, options: Sequence[str]) -> None:
    """Say a value of `key` in the URL that none of `options` matches (a bound radio or toggle would ignore it)."""
    wanted = st.query_params.get(key)
    if key not in st.session_state and wanted is not None and wanted not in options:
        st.warning(f"{label} {literal_markdown(wanted)}: no such choice (choices: "
                   f"{literal_markdown(', '.join(options))}).")


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


def run_rule(facets: pd.DataFrame) -> set[str] | None:
    """The one rule for imported runs, shown in the sidebar of every page alike and kept in the URL (`runs`).

    Imported histories (FlyDSL's CI) hold main pushes and pull-request runs;
    the rule is main only unless the reader asks for more. It is offered on
    every page as soon as the database holds any non-main imported run, so no
    page can disagree with another about it. None: there is nothing to choose.
    """
    contexts = set(facets["run_context"].dropna())
    if not contexts - {"main"}:
        return None
    known("Imported runs", "runs", RUNS)
    choice = st.sidebar.radio("Imported runs", RUNS, key="runs", bind="query-params",
                              help="FlyDSL's CI measured main pushes and pull requests; each PR is its own series. "
                                   "flybench's own results are always shown.")
    return {"main only": {"main"}, "pull requests": contexts - {"main"}, "all": contexts}[choice]


def in_runs(rows: pd.DataFrame, rule: set[str] | None, column: str = "run_context") -> pd.DataFrame:
    """Rows the rule keeps: flybench's own (no run context) always, imported ones of the chosen runs."""
    if rule is None or column not in rows:
        return rows
    return rows[rows[column].isna() | rows[column].isin(rule)]
