"""History: the chosen case as every system measured it, imported and measured side by side, in TFLOP/s.

flybench's case suites time a case (seconds); FlyDSL's CI reports its own
TFLOP/s of the same op, shape and dtype, which the importer lands on the
same case name. The one quantity both have is TFLOP/s (flybench's derived
from its time and the case's FLOP count), so this section draws that: a
small multiple per machine, named by architecture, imported panels marked
with †. Each system's commits are its own repository's, so every panel has
its own commit axis.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, filters, frames, ui
from dashboard.names import provider_label
from flybench.regress.report import code_span, literal_markdown

FIELDS = ["panel", "provider", "commit_date", "short", "tflops", "provenance", "subject", "run", "benchmark"]


def rate_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """queries.case_rates rows as drawn: machine panels by architecture, provider labels, provenance marks."""
    rows = frames.provenance(rows)
    run = [f"PR #{int(p)}" if pd.notna(p) else (c if isinstance(c, str) else "flybench run")
           for p, c in zip(rows["pr"], rows["run_context"])]
    return rows.assign(panel=frames.panel_labels(rows), provider=rows["provider"].map(provider_label),
                       short=rows["commit_hash"].str[:8], run=run).reset_index(drop=True)


def chart(frame: pd.DataFrame) -> alt.VConcatChart:
    """TFLOP/s across each machine's own commits in order (History's axis: each panel its repository's commits),
    a line per provider and run (main, each pull request), imported points their own shape."""
    panels = []
    for panel, rows in frame.groupby("panel", sort=True):
        rows, x = charts.in_commit_order(rows[[*FIELDS, "commit_hash"]],
                                         "commits in order, this system's own repository (labels: commit date)")
        base = alt.Chart().encode(
            x=x,
            y=alt.Y("tflops:Q", title="TFLOP/s", scale=alt.Scale(zero=False),
                    axis=alt.Axis(format=charts.NUMBER_FORMAT, tickCount=4)),
            color=alt.Color("provider:N", scale=charts.CATEGORIES, legend=alt.Legend(orient="right", labelLimit=320)),
            tooltip=[alt.Tooltip("provider:N"), alt.Tooltip("panel:N", title="machine"),
                     alt.Tooltip("short:N", title="commit"), alt.Tooltip("commit_date:T", title="date"),
                     alt.Tooltip("subject:N", title="repository"), alt.Tooltip("run:N"),
                     alt.Tooltip("tflops:Q", title="TFLOP/s", format=".4~g"),
                     alt.Tooltip("provenance:N", title="measured by")])
        panels.append(alt.layer(base.mark_line(opacity=0.5).encode(detail="run:N"),  # a PR is not main's line
                                base.mark_point(filled=True, size=40).encode(
                                    shape=alt.Shape("provenance:N", title="measured by")),
                                data=rows.drop(columns="commit_hash")).properties(
            width=charts.PANEL_WIDTH, height=150,
            title=alt.TitleParams(str(panel), anchor="start", fontSize=13, fontWeight="bold")))
    return alt.vconcat(*panels).resolve_scale(x="independent", y="independent")


def section(load, workload: str, case: str, dtype: str, rule: set[str] | None) -> None:
    """The case's TFLOP/s from every source, when more than one system measured it; `load` is data.load.

    The sidebar's architecture and machine filters apply here as on every panel; its subject filter does not,
    since this section is where two systems' subjects meet."""
    rows = filters.in_runs(load("case_rates", workload=workload, case=case, dtype=dtype), rule)
    for field in ("arch", "machine"):
        if chosen := st.query_params.get_all(field):
            rows = rows[rows[field].isin(chosen)]
    if rows.empty:
        return
    frame = rate_frame(rows)
    if frame["provenance"].nunique() < 2:
        return
    st.subheader("This case, measured and imported")
    st.caption(f"{code_span(case)}, {literal_markdown(dtype)}: flybench's TFLOP/s (from its time and the case's "
               "FLOP count) beside the TFLOP/s other systems report for the same op, shape and dtype († imported, "
               "never measured here). Each panel runs along its own repository's commits.")
    ui.chart(chart(frame), frame, f"elsewhere-{workload}-{case}-{dtype}", FIELDS, stretch=False)
