"""Roofline: achieved TFLOP/s against arithmetic intensity, under each machine's ceilings.

The ceilings are the machine's own measurements where it has them (the gemm
workload's best matrix rate per dtype and its device-copy bandwidth) and the
vendor's figures otherwise, labelled as such. Arithmetic intensity is FLOPs
per byte moved, from the same case's TFLOP/s and GB/s.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, filters, frames, ui

POINT_COLUMNS = ["machine", "label", "provider", "tflops", "gbps", "intensity", "roofline_fraction", "shown",
                 "commit_hash", "provenance"]


def main() -> None:
    st.title("Roofline")
    st.caption("Dashed: the roofs, min(peak matrix rate, memory bandwidth x intensity). A point's height is the "
               "TFLOP/s it achieved; its distance below the roof is what is left on the table.")
    data.require_data()
    allowed = filters.scope(data.load("facets").query("unit == 'seconds'"))
    latest = data.load("latest_cases")
    points = frames.intensity_points(filters.within(latest, allowed))
    if points.empty:
        st.info("No case in this selection has both TFLOP/s and GB/s measured, so none can be placed on a "
                "roofline. `flybench run` records both for every timed case.")
        return
    low, high = points["intensity"].min() / 2, points["intensity"].max() * 2
    roofs = pd.concat([frames.ceilings(latest, m).assign(machine=m) for m in sorted(points["machine"].unique())],
                      ignore_index=True)
    lines = pd.concat([frames.roof_lines(group, low, high).assign(machine=m) for m, group in roofs.groupby("machine")],
                      ignore_index=True) if not roofs.empty else pd.DataFrame()
    ui.chart(charts.roofline(points, lines), points, "roofline", POINT_COLUMNS, stretch=False)
    st.subheader("Ceilings (the dashed roofs)")
    if roofs.empty:
        st.caption("None: no gemm ceiling measurements on these machines and no vendor figures for their "
                   "accelerators. Run the gemm workload (`flybench run -w gemm`) to measure them.")
    else:
        ui.table(roofs, "roofs", ["machine", "ceiling", "tflops", "gbps", "basis"])
    ui.provenance_note(points)


main()
