"""Overview: where FlyDSL stands against each baseline on each architecture, at the newest commit measured.

A heatmap of FlyDSL's speedup over each baseline per workload case, a panel
per machine (named with its architecture); then every provider's latest time
per case, coloured by the fraction of the roofline it reaches. Machines with
no FlyDSL results (FlyDSL cannot run there yet) get the same ratios against a
reference provider the reader picks, and the page says so plainly.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data, filters, frames, ui

SPEEDUP_COLUMNS = ["section", "arch", "machine", "label", "provider", "baseline", "speedup", "shown", "why", "value",
                   "value_base", "roofline_fraction", "roofline_fraction_base", "commit_hash", "provenance"]
LATEST_COLUMNS = ["section", "arch", "machine", "label", "provider", "status", "shown", "roofline_fraction", "tflops", "gbps",
                  "why", "commit_hash", "commit_date", "provenance"]
SPEEDUP_SCALE = alt.Scale(type="log", scheme="redblue", domainMid=1, domain=[0.5, 2], clamp=True)
SPEEDUP_TOOLTIP = ["section:N", "label:N", "provider:N", "baseline:N", alt.Tooltip("speedup:Q", format=".3f"),
                   alt.Tooltip("why:N", title="failed because"),
                   alt.Tooltip("roofline_fraction:Q", format=".1%", title="provider's roofline"),
                   alt.Tooltip("roofline_fraction_base:Q", format=".1%", title="baseline's roofline"), "provenance:N"]


def main() -> None:
    st.title("Overview")
    st.caption("The newest result of every case on every machine. Speedup = baseline time / provider time "
               "(above 1: faster). A case that failed its correctness check shows as failed, never as a speed.")
    data.require_data()
    allowed = filters.scope(data.load("facets").query("unit == 'seconds'"))
    latest = filters.within(data.load("latest_cases"), allowed)
    if latest.empty:
        ui.no_rows("timed cases")
        return
    latest = latest.assign(section=latest["arch"].fillna("?") + " · " + latest["machine"])
    pairs = frames.speedup_pairs(latest)
    has_subject = latest.groupby("section")["provider"].agg(lambda p: frames.SUBJECT_PROVIDER in set(p))
    speedups(pairs[pairs["section"].isin(has_subject[has_subject].index)
                   & (pairs["provider"] == frames.SUBJECT_PROVIDER)])
    relative(latest[latest["section"].isin(has_subject[~has_subject].index)], pairs)
    latest_results(latest)


def speedups(shown: pd.DataFrame) -> None:
    """FlyDSL against each baseline, on the machines where FlyDSL has results."""
    if shown.empty:
        return
    st.header("Speedup of FlyDSL over each baseline", divider="gray")
    ui.chart(charts.heatmap(shown[SPEEDUP_COLUMNS], "baseline", "label", "speedup", "speedup", SPEEDUP_SCALE,
                            "datum.speedup > 1.6 || datum.speedup < 0.62", SPEEDUP_TOOLTIP),
             shown, "speedup", SPEEDUP_COLUMNS, stretch=False)


def relative(rows: pd.DataFrame, pairs: pd.DataFrame) -> None:
    """Machines without FlyDSL: every provider against a reference provider the reader picks."""
    if rows.empty:
        return
    machines = ", ".join(sorted(rows["machine"].unique()))
    st.header("Machines without FlyDSL results", divider="gray")
    st.warning(f"No FlyDSL results exist yet on {machines}: nothing there measures FlyDSL. "
               "Shown instead: each provider's speed relative to a reference provider.")
    providers = sorted(rows.loc[rows["status"] != "unavailable", "provider"].dropna().unique())
    reference = filters.pick_one("Reference provider", "reference", providers, default="torch", sidebar=False)
    shown = pairs[pairs["section"].isin(set(rows["section"])) & (pairs["baseline"] == reference)]
    if shown.empty:
        st.caption(f"No case there was measured by {reference} and another provider, so there is no ratio to show.")
        return
    ui.chart(charts.heatmap(shown[SPEEDUP_COLUMNS], "provider", "label", "speedup", f"speed vs {reference}",
                            SPEEDUP_SCALE,
                            "datum.speedup > 1.6 || datum.speedup < 0.62", SPEEDUP_TOOLTIP),
             shown, "relative", SPEEDUP_COLUMNS, stretch=False)


def latest_results(latest: pd.DataFrame) -> None:
    """Every provider's newest time per case, coloured by its fraction of the roofline."""
    measured = frames.newest_per_case(latest[latest["status"] != "unavailable"])
    unavailable = int((latest["status"] == "unavailable").sum())
    st.header("Latest results and fraction of the roofline reached", divider="gray")
    bases = frames.roofline_basis(measured)
    st.caption("Cell: median time. Colour: fraction of the roofline"
               + (f" (computed against: {', '.join(bases)})" if bases else " (not recorded for these runs)")
               + (f". Not shown: {unavailable} cases whose provider cannot run on their machine." if unavailable
                  else "."))
    if measured.empty:
        return
    figure = charts.heatmap(measured[LATEST_COLUMNS], "provider", "label", "roofline_fraction", "of roofline",
                            alt.Scale(scheme="blues", domain=[0, 1]), "datum.roofline_fraction > 0.6",
                            ["section:N", "label:N", "provider:N", alt.Tooltip("shown:N", title="time"), "status:N",
                             alt.Tooltip("why:N", title="failed because"),
                             alt.Tooltip("roofline_fraction:Q", format=".1%", title="of roofline"),
                             alt.Tooltip("tflops:Q", format=".4g", title="TFLOP/s"),
                             alt.Tooltip("gbps:Q", format=".4g", title="GB/s"),
                             alt.Tooltip("commit_hash:N", title="commit"), "provenance:N"])
    ui.chart(figure, measured, "latest", LATEST_COLUMNS, stretch=False)
    ui.provenance_note(measured)


main()
