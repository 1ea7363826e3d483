"""Kernel resources: one kernel at a time, each metric per architecture across commits, every change exact.

VGPRs, AGPRs, SGPRs, LDS, scratch, spills, occupancy come from compiling
without running (the compile_metrics table, and results of benchmarks whose
unit is deterministic: registers, bytes, waves), so every change is real and
a register or LDS regression shows here before any timing moves. How long
the compile took is not such a metric: it is the compiling machine's noise,
drawn in a section of its own and never listed as a change.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, commits, data, filters, frames, ui
from flybench.benchmark_names import is_compile_duration
from flybench.regress import load_config

COLUMNS = ["kernel_name", "arch", "metric_label", "value", "unit", "short", "commit_date", "message", "status", "why",
           "origin", "subject", "machine"]
CHANGE_COLUMNS = ["arch", "metric", "commits", "base_text", "head_text", "delta", "change", "undone",
                  "first_bad_date", "message", "pr", "compiler", "failed_between", "failures", "author", "worse",
                  "history", "machine"]


def main() -> None:
    st.title("Kernel resources")
    data.require_data(resources=True)
    facets, _ = data.facets()  # the imported-runs rule shows here too; compile metrics are flybench's own
    rows = data.load("resources", units=sorted(load_config().deterministic_units))
    if rows.empty:
        st.info("No compile-time resource metrics in the database yet. They come from the compile-only suite "
                "(VGPRs, LDS, spills... per kernel and architecture, no GPU needed), ingested like any other "
                "results with `flybench ingest`.")
        return
    allowed = filters.scope(rows, ("subject", "arch", "machine"))
    kernel = filters.pick_one("Kernel", "kernel", frames.kernels_first(allowed), sidebar=False)
    if kernel is None:
        ui.no_rows("kernels")
        return
    shown = prepare(allowed[allowed["kernel_name"] == kernel])
    metrics = filters.pick_many("Metric", "metric", shown["metric_label"])
    shown = shown[shown["metric_label"].isin(metrics)]
    st.header(kernel, divider="gray")
    st.subheader("Newest value per architecture")
    newest = shown.sort_values("commit_date", kind="stable").groupby(["arch", "metric_label"]).tail(1)
    table = newest.pivot_table(index="arch", columns="metric_label", values="value", aggfunc="last")
    ui.table(table.map(lambda v: "" if pd.isna(v) else f"{v:,g}").reset_index(), "resources-newest")
    st.caption("A blank cell: the metric does not exist on that architecture (AGPRs on NVIDIA, say).")
    st.subheader("Across commits")
    failed = int((shown["status"] != "ok").sum())
    st.caption("A panel per metric, a step line per architecture (colour, dash and point shape apart, so identical "
               "values on two architectures stay visible); hover a point for its commit and message."
               + (f" ✕ on a panel's bottom edge: one of {failed} failed compiles, where the line breaks."
                  if failed else ""))
    ui.chart(charts.resource_lines(shown), shown, "resources-history", COLUMNS, stretch=False)
    changes(shown)
    durations(facets, kernel)


def prepare(rows: pd.DataFrame) -> pd.DataFrame:
    """One kernel's rows with metric labels as engineers read them, commit messages, reasons."""
    out = commits.annotate(frames.without_failed_values(rows), data.load("commit_titles"))
    out["arch"] = out["arch"].fillna("no architecture")
    out["metric_label"] = out["metric"].map(frames.metric_label)
    notes = data.load("commit_notes")
    told = dict(zip(zip(notes["subject"], notes["hash"]), notes["first_failure"])) if not notes.empty else {}
    reason = [r if isinstance(r, str) and r or s != "failed" else  # asv keeps no message: the commit notes' first
              (f"{told[(u, h)]} (the first failure at this commit)" if told.get((u, h)) else r)
              for s, r, u, h in zip(out["status"], out["reason"], out["subject"], out["commit_hash"])]
    out["why"] = [frames.reason_text(s, r) for s, r in zip(out["status"], reason)]
    return out


def changes(shown: pd.DataFrame) -> None:
    """Every change of the kernel's metrics between consecutive measured commits, with its exact delta."""
    found = analysis.resource_changes(shown)
    if found.empty:
        st.caption("No metric of this kernel changed across the commits measured.")
        return
    found[["arch", "metric"]] = found["parameters"].str.split(", ", n=1, expand=True)
    found["metric"] = found["metric"].map(frames.metric_label)
    found["delta"] = [f"{a:+g}" for a in found["after"] - found["before"]]
    about = shown.drop_duplicates("commit_hash").set_index("commit_hash")
    found["first_bad_date"] = found["first_bad"].map(about["commit_date"])
    found["message"] = found["first_bad"].map(about["message"]).fillna("")
    found["author"] = found["first_bad"].map(about["author"]).fillna("")
    series = shown.drop_duplicates(["arch", "metric_label"]).set_index(["arch", "metric_label"])
    found["history"] = [history_link(series.loc[key]) for key in zip(found["arch"], found["metric"])]
    found["undone"] = frames.undone(found, shown)
    found = frames.change_context(found, shown, data.load("commit_notes"))
    st.subheader("Every change (exact)")
    by_commit = st.toggle("Order by commit (newest first) instead of by how directly it costs speed",
                          key="by_commit", bind="query-params")
    if by_commit:
        found = found.sort_values("first_bad_date", ascending=False, kind="stable")
    st.caption("`undone`: a later commit brought the metric back to its value before the change. `pr`: the first "
               "changed commit's pull request. `compiler`: the FlyDSL wheel and its LLVM on the two sides; "
               "\"changed\" means the compiler moved too, so the change need not be the kernel's code. "
               "`no value`: commits inside the range where this kernel has no value on that architecture (a "
               "line break on the chart): its compile failed, with the compiler's message as the commit notes "
               "record it (the first failure at that commit, without the compiling machine's folders), or it was "
               "not compiled there (unavailable), counted.")
    if found["compiler"].str.startswith("changed").any():
        st.caption(f"{int(found['compiler'].str.startswith('changed').sum())} of {len(found)} changes span a "
                   "change of compiler.")
    ui.table(found, "resources-changes", CHANGE_COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "before", "head_text": "after", "commits": "last..first changed",
        "first_bad_date": st.column_config.DatetimeColumn("date", format="YYYY-MM-DD HH:mm"),
        "failed_between": st.column_config.NumberColumn("no value", format="%d"),
        "failures": "why",
        "history": st.column_config.LinkColumn("history", display_text="open")})


def history_link(row: pd.Series) -> str:
    """The series' History page, where it is a benchmark's (the compile_metrics table's rows have none)."""
    return "" if row["origin"] == "compile_metrics" else ui.history_link(row["subject"], row["origin"],
                                                                          frames.case_text(row["params"]))


def durations(facets: pd.DataFrame, kernel: str) -> None:
    """How long the kernel took to compile, apart: machine noise, never a change or a regression."""
    names = sorted(b for b in facets["benchmark"].unique() if is_compile_duration(b))
    rows = pd.concat([data.load("benchmark_history", benchmark=b) for b in names], ignore_index=True) if names \
        else pd.DataFrame()
    if rows.empty:
        return
    rows = rows[rows["params"].map(lambda p: frames.params_dict(p).get("kernel")) == kernel]
    if rows.empty:
        return
    st.subheader("Compile duration (noise, not a resource)")
    st.caption("Wall time of the compile on the machine that compiled it: it varies with that machine's load, "
               "so it is never listed as a change or a regression.")
    arch = rows["params"].map(lambda p: frames.params_dict(p).get("arch"))
    rows = prepare(rows.assign(kernel=kernel, metric="compile_time", origin=rows["benchmark"],
                               arch=arch.fillna(rows["arch"])))
    ui.chart(charts.resource_lines(rows), rows, "resources-durations", COLUMNS, stretch=False)


main()
