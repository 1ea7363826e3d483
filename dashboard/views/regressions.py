"""Regressions: the open regressions in the stored history, with commit range, size and confidence.

The list is `flybench regressions`' own (asv's step detection, thresholds and
noise calibration from flybench.toml), so the page, the nightly alert and the
terminal agree. Changes of deterministic metrics (registers, LDS bytes) that
are not worse are listed only on request. A compile's duration is noise of
the machine that compiled, not a property of the kernel: its steps are
counted apart and never listed as regressions. The imported-runs rule applies
to where the first bad commit was measured.
"""

from __future__ import annotations

import streamlit as st

from dashboard import analysis, charts, data, filters, frames, ui
from flybench.benchmark_names import is_compile_duration
from flybench.regress import load_config

COLUMNS = ["machine", "benchmark", "parameters", "commits", "base_text", "head_text", "change", "evidence", "run",
           "history", "subject", "kind", "unit"]


def main() -> None:
    st.title("Regressions")
    st.caption("Open regressions: steps in each series that explain why its newest value is worse than its best, "
               "found by asv's step detection and kept only above the relative, absolute and noise thresholds "
               "(flybench.toml [regress]); every change of a deterministic metric is exact.")
    data.require_data(resources=True)
    facets, rule = data.facets()
    allowed = filters.scope(facets, ("subject", "arch", "machine", "workload"))
    found = []
    config = load_config()  # part of the cache key: new thresholds in flybench.toml are a new answer
    machines = sorted(allowed["machine"].unique())
    progress = st.progress(0.0, "Step detection over the history (once per machine and database version)...")
    for done, machine in enumerate(machines, 1):  # cached per machine: narrowing the filters costs nothing
        found += data.load("regressions", machine=machine, config=config)
        progress.progress(done / len(machines))
    progress.empty()
    rows = filters.within(analysis.regression_rows(found), allowed, ("subject", "machine", "workload"))
    source = facets.groupby("machine")["provenance"].first()
    rows = rows.assign(provenance=rows["machine"].map(source).fillna(frames.FLYBENCH))
    rows["run_context"] = rows["run"].where(frames.imported(rows))  # flybench's own steps have no run context
    rows = filters.in_runs(rows, rule)
    durations = rows["benchmark"].map(is_compile_duration).astype(bool)
    rows = rows[~durations]
    if not st.toggle("Also list resource changes that are not worse", key="all_changes", bind="query-params"):
        rows = rows[rows["worse"]]
    if durations.any():
        st.caption(f"Not listed: {int(durations.sum())} steps in compile durations (how long a compile took on "
                   "its machine is noise of that machine, not a kernel regression; see Kernel resources).")
    if rows.empty:
        st.success("No open regression for this selection.")
        return
    for column in ("base_text", "head_text"):
        rows[column] = [frames.mark(t, p) for t, p in zip(rows[column], rows["provenance"])]
    rows["label"] = [frames.mark(t, p) for t, p in zip(rows["label"], rows["provenance"])]
    rows["history"] = [ui.history_link(s, b, frames.case_text(p)) for s, b, p in
                       zip(rows["subject"], rows["benchmark"], rows["params"])]
    worse = int(rows["worse"].sum())
    st.subheader(f"{worse} open regression{'s' if worse != 1 else ''}"
                 + (f", {len(rows) - worse} other changes" if len(rows) > worse else ""))
    ui.chart(charts.change_bars(rows, "change (first bad vs last good)"), rows, "regressions-chart", COLUMNS)
    ui.table(rows, "regressions", COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "before", "head_text": "after", "commits": "last good..first bad",
        "run": "first bad measured in", "history": st.column_config.LinkColumn("history", display_text="open")})
    ui.provenance_note(rows)


main()
