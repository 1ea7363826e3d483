"""History: one benchmark across commits, a line per provider and machine, with its CI band and detected steps.

The commit axis belongs to one subject (repository): each subject gets its own
chart, so commits of two repositories are never drawn on one axis. Hover shows
the commit, its date and its message where the subject's checkout is at hand;
a click on a point opens the commit.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, commits, data, filters, frames, ui
from flybench.benchmark_names import TRACK

# More lines than this are unreadable (and slow to draw): the page asks for narrower filters instead.
MAX_SERIES = 24
COLUMNS = ["series", "short", "commit_date", "message", "status", "value", "ci_99_a", "ci_99_b",
           "unit", "why", "provenance", "commit_hash", "machine", "env_name", "params"]


def main() -> None:
    st.title("History")
    data.require_data()
    allowed = filters.scope(data.load("facets"))
    benchmarks = sorted(allowed["benchmark"].unique())
    benchmark = filters.pick_one("Benchmark", "benchmark", benchmarks,
                                 default=next((b for b in benchmarks if b.endswith(f".{TRACK}")), None))
    if benchmark is None:
        ui.no_rows("benchmarks")
        return
    log = st.sidebar.toggle("Logarithmic value axis", key="log", bind="query-params",
                            help="For series whose values differ by orders of magnitude (tiny and large shapes).")
    mine = allowed[allowed["benchmark"] == benchmark]
    for subject, rows in mine.groupby("subject", sort=True):
        st.header(f"{benchmark} · {subject}", divider="gray")
        subject_history(str(subject), benchmark, rows, log)


def subject_history(subject: str, benchmark: str, allowed: pd.DataFrame, log: bool) -> None:
    """The chart, its rows and the detected steps of one subject's series of `benchmark`."""
    machines = sorted(allowed["machine"].unique())
    rows = filters.within(data.load("benchmark_history", benchmark=benchmark, machines=machines, subject=subject),
                          allowed)
    rows = filters.imported_runs(rows)
    measured = (rows["status"] != "unavailable").groupby([rows["machine"], rows["env_name"], rows["params"]])
    rows = rows[measured.transform("any")]  # a series the provider never ran in has nothing to draw
    if rows.empty:
        st.caption(f"No provider could run {benchmark} on {', '.join(machines)}.")
        return
    labels = frames.series_labels(rows)
    if labels.nunique() > MAX_SERIES:  # cut before preparing: the work per row is what costs
        st.warning(f"{labels.nunique()} series match; drawing the first {MAX_SERIES}. "
                   "Narrow the filters in the sidebar to see the others.")
        rows = rows[labels.isin(labels.drop_duplicates().head(MAX_SERIES))]
    rows = prepare(rows)
    drawn = sorted(rows[["machine", "env_name", "params"]].drop_duplicates().itertuples(index=False, name=None))
    steps = step_marks(data.load("history_steps", benchmark=benchmark, machines=machines, subject=subject,
                                 series=drawn), rows)
    ui.chart(charts.history(rows, steps, rows.attrs["axis"], log), rows, f"history-{subject}", COLUMNS)
    ui.provenance_note(rows)
    if (rows["status"] == "failed").any():
        st.caption("✕ on the bottom edge: a commit where the case failed (correctness or a crash); "
                   "it has no time to draw. Hover for the reason.")
    if steps.empty:
        st.caption("Detected steps: none in these series clears the regression thresholds (flybench.toml [regress]).")
        return
    st.caption("Detected steps, found by asv's step detection with flybench's noise calibration as "
               "`flybench regressions` finds them; the red dashed rules mark the first bad commit.")
    ui.table(steps, f"steps-{subject}", ["what", "last_good", "first_bad"])


def prepare(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows ready to draw: provenance, commit message and link, series label, scaled values, texts."""
    out = commits.annotate(frames.provenance(frames.without_failed_values(rows)), data.load("commit_titles"))
    out["series"] = frames.series_labels(out)
    factor, axis = frames.display_scale(out["unit"].iloc[0], out["value"])
    out["y"], out["y_lo"], out["y_hi"] = (out[c] * factor for c in ("value", "ci_99_a", "ci_99_b"))
    out["why"] = ""
    failing = out["status"] != "ok"  # texts only where they differ from the number (hovers format the rest)
    out.loc[failing, "why"] = [frames.reason_text(s, r) for s, r in zip(out.loc[failing, "status"],
                                                                         out.loc[failing, "reason"])]
    out.attrs["axis"] = axis
    return out


def step_marks(steps: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The detected steps of the drawn series, each with its series label and a sentence for the hover."""
    labels = rows.drop_duplicates(["machine", "env_name", "params"])[["machine", "env_name", "params", "series"]]
    marked = steps.merge(labels, on=["machine", "env_name", "params"])
    marked["what"] = [f"{s}: {frames.step_text(r)}" for s, r in zip(marked["series"], marked.itertuples())]
    return marked


main()
