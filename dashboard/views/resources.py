"""Kernel resources: VGPRs, AGPRs, SGPRs, LDS, scratch, spills and occupancy per kernel and architecture.

These come from compiling without running (the compile_metrics table, and
results of benchmarks whose unit is deterministic: registers, bytes, waves),
so they are exact: every change is real, and a register or LDS regression
shows here before any timing moves.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, commits, data, filters, frames, ui
from flybench.regress import load_config
from flybench.regress.report import METRIC_LABELS

COLUMNS = ["series", "metric_label", "value", "unit", "short", "commit_date", "status", "why", "origin", "subject",
           "machine"]


def main() -> None:
    st.title("Kernel resources")
    data.require_data(resources=True)
    rows = data.load("resources", units=sorted(load_config().deterministic_units))
    if rows.empty:
        st.info("No compile-time resource metrics in the database yet. They come from the compile-only suite "
                "(VGPRs, LDS, spills... per kernel and architecture, no GPU needed), ingested like any other "
                "results with `flybench ingest`.")
        return
    rows = prepare(rows)
    allowed = filters.scope(rows, ("subject", "arch", "machine"))
    kernels = filters.pick_many("Kernel", "kernel", allowed["kernel_name"])
    metrics = filters.pick_many("Metric", "metric", allowed["metric_label"])
    shown = allowed[allowed["kernel_name"].isin(kernels) & allowed["metric_label"].isin(metrics)]
    st.subheader("Newest value per kernel and architecture")
    newest = shown.sort_values("commit_date", kind="stable").groupby(["series", "metric_label"]).tail(1)
    table = newest.pivot_table(index=["kernel_name", "arch"], columns="metric_label", values="value",
                               aggfunc="last").reset_index()
    ui.table(table, "resources-newest")
    st.subheader("Across commits")
    measured = shown[shown["status"] == "ok"]
    ui.chart(charts.resource_lines(measured), shown, "resources-history", COLUMNS)
    changes = analysis.resource_changes(shown)
    if not changes.empty:
        st.subheader("Every change (exact)")
        ui.table(changes, "resources-changes", ["machine", "benchmark", "parameters", "commits", "base_text",
                                                 "head_text", "worse"])


def prepare(rows: pd.DataFrame) -> pd.DataFrame:
    """Kernel names with their parameters, metric labels as engineers read them, commit short hashes."""
    out = commits.annotate(frames.without_failed_values(rows))
    extra = out["params"].map(lambda p: ", ".join(v for k, v in _items(p) if k != "arch"))
    out["kernel_name"] = out["kernel"] + extra.map(lambda e: f"({e})" if e else "")
    out["series"] = out["kernel_name"] + " @ " + out["arch"].fillna("?")
    out["metric_label"] = out["metric"].map(lambda m: METRIC_LABELS.get(m, m.replace("_", " ")))
    out["why"] = [frames.reason_text(s, r) for s, r in zip(out["status"], out["reason"])]
    return out


def _items(params: object) -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in frames.params_dict(params).items()]


main()
