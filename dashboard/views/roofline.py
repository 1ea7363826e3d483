"""Roofline: achieved TFLOP/s against arithmetic intensity, under each machine's ceilings.

The ceilings are the machine's own measurements where it has them (the gemm
workload's best matrix rate per dtype and its device-copy bandwidth) and the
vendor's figures otherwise, labelled as such. Arithmetic intensity is FLOPs
per byte moved, from the same case's TFLOP/s and GB/s. A point's fraction is
of the roof drawn above it, so the hover and the dashed line share a basis.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, filters, frames, ui

POINT_COLUMNS = ["machine", "label", "provider", "tflops", "gbps", "intensity", "of_roof", "roof_basis", "shown",
                 "history", "commit_hash", "provenance"]
NUMBERS = {"tflops": st.column_config.NumberColumn("TFLOP/s", format="%.1f"),
           "gbps": st.column_config.NumberColumn("GB/s", format="%.0f"),
           "intensity": st.column_config.NumberColumn("FLOP/byte", format="%.1f"),
           "of_roof": st.column_config.NumberColumn("of the roof drawn", format="percent"),
           "history": st.column_config.LinkColumn("history", display_text="open")}


def main() -> None:
    st.title("Roofline")
    st.caption("Dashed: the roofs, min(peak matrix rate, memory bandwidth x intensity). A point's height is the "
               "TFLOP/s it achieved; its distance below the roof is what is left on the table.")
    data.require_data()
    facets, rule = data.facets()
    allowed = filters.scope(facets[(facets["unit"] == "seconds") | frames.imported(facets)])
    latest = frames.provenance(filters.in_runs(data.load("latest_cases"), rule))
    timed = filters.within(latest, allowed)
    points = frames.intensity_points(timed)
    if not points.empty:
        low, high = points["intensity"].min() / 2, points["intensity"].max() * 2
        everything = data.roofs()
        roofs = everything[everything["machine"].isin(set(points["machine"]))]
        lines = pd.concat([frames.roof_lines(g, low, high).assign(machine=m) for m, g in roofs.groupby("machine")],
                          ignore_index=True) if not roofs.empty else pd.DataFrame()
        points = frames.against_roofs(points, roofs)
        points["history"] = ui.history_links(points)
        st.caption(ui.roof_statement(points))
        ui.chart(data.chart_spec(charts.roofline, points=points, roofs=lines), points, "roofline", POINT_COLUMNS,
                 stretch=False)
        st.subheader("Cases on the chart")
        ui.table(points, "roofline-cases", POINT_COLUMNS, column_config=NUMBERS)
        st.subheader("Ceilings (the dashed roofs)")
        ui.table(roofs, "roofs", ["machine", "ceiling", "tflops", "gbps", "basis"], column_config=NUMBERS)
    else:
        st.info("No case in this selection has both TFLOP/s and GB/s measured, so none can be placed on a "
                "roofline. `flybench run` records both for every timed case.")
    not_placed(timed, allowed)


def not_placed(timed: pd.DataFrame, allowed: pd.DataFrame) -> None:
    """Which cases the chart leaves out, and why (FlyDSL CI's imported rows carry no byte counts)."""
    own = frames.unplaced(timed[~frames.imported(timed)]) if not timed.empty else pd.DataFrame()
    foreign = allowed[frames.imported(allowed)]
    imported = foreign.groupby("machine").apply(lambda g: len(g.drop_duplicates(["benchmark", "case", "dtype"])),
                                                include_groups=False).rename("cases").reset_index() \
        if not foreign.empty else pd.DataFrame(columns=["machine", "cases"])
    imported["reason"] = "imported (†): the source records no FLOP or byte counts, so FlyDSL cannot be placed"
    left = pd.concat([own, imported], ignore_index=True)
    if left.empty:
        return
    st.subheader("Cases not on the chart")
    ui.table(left, "roofline-unplaced", ["machine", "cases", "reason"])


main()
