"""Regressions: the open regressions in the stored history, with commit range, size and confidence.

The list is `flybench regressions`' own (asv's step detection, thresholds and
noise calibration from flybench.toml), so the page, the nightly alert and the
terminal agree. Changes of deterministic metrics (registers, LDS bytes) that
are not worse are listed only on request.
"""

from __future__ import annotations

import streamlit as st

from dashboard import analysis, charts, data, filters, ui

COLUMNS = ["machine", "benchmark", "parameters", "commits", "base_text", "head_text", "change", "evidence",
           "subject", "kind", "unit"]


def main() -> None:
    st.title("Regressions")
    st.caption("Open regressions: steps in each series that explain why its newest value is worse than its best, "
               "found by asv's step detection and kept only above the relative, absolute and noise thresholds "
               "(flybench.toml [regress]); every change of a deterministic metric is exact.")
    data.require_data(resources=True)
    allowed = filters.scope(data.load("facets"), ("subject", "arch", "machine", "workload"))
    found = []
    machines = sorted(allowed["machine"].unique())
    progress = st.progress(0.0, "Step detection over the history (once per machine and database version)...")
    for done, machine in enumerate(machines, 1):  # cached per machine: narrowing the filters costs nothing
        found += data.load("regressions", machine=machine)
        progress.progress(done / len(machines))
    progress.empty()
    rows = filters.within(analysis.regression_rows(found), allowed, ("subject", "machine", "workload"))
    if not st.toggle("Also list resource changes that are not worse", key="all_changes", bind="query-params"):
        rows = rows[rows["worse"]]
    if rows.empty:
        st.success("No open regression for this selection.")
        return
    worse = int(rows["worse"].sum())
    st.subheader(f"{worse} open regression{'s' if worse != 1 else ''}"
                 + (f", {len(rows) - worse} other changes" if len(rows) > worse else ""))
    ui.chart(charts.change_bars(rows, "change (first bad vs last good)"), rows, "regressions-chart", COLUMNS)
    ui.table(rows, "regressions", COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "before", "head_text": "after", "commits": "last good..first bad"})


main()
