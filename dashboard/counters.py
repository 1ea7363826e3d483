"""Hardware counters on the History page: the chosen case's counter figures across commits, and why it moved.

The counter pass (`flybench run --counters`) stores per case and commit the
figures flybench.counters.DERIVED names. Under the timing panels, a small
multiple per figure draws them for each provider and machine across commits,
and the "why" table lines up two commits' figures and each one's kernels:
what the counters say changed when the time did. The counter pass's figures
are never timings (the profiler replays and flushes), and the page says so.
"""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, filters, frames, ui
from dashboard.names import provider_label
from flybench.counters import DERIVED, format_figure
from flybench.regress.report import literal_markdown

SHOWN = ("hbm_over_min", "hbm_gbps", "l2_hit_rate", "matrix_busy", "occupancy", "lds_conflicts_per_instruction")
"""The figures drawn, in order: bytes against the minimum first, since the roofline reads bytes."""
FIELDS = ["machine", "provider", "figure", "commit_date", "short", "value", "shown", "tool"]
WHY_COLUMNS = ["machine", "provider", "figure", "base", "head", "change"]
KERNEL_COLUMNS = ["commit", "kernel", "time (us)", "DRAM read (MB)", "DRAM write (MB)", "registers", "grid"]


def figure_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """The stored derived figures (queries.case_counter_history) as drawn: a provider label, the figure's label,
    its value as a person reads it."""
    rows = rows[rows["counter"].isin(SHOWN)]
    return rows.assign(
        provider=[provider_label(json.loads(p).get("provider")) for p in rows["params"]],
        figure=rows["counter"].map(lambda name: DERIVED[name].label),
        shown=[format_figure(n, v) for n, v in zip(rows["counter"], rows["value"])],
        short=rows["commit_hash"].str[:8]).reset_index(drop=True)


def chart(frame: pd.DataFrame) -> alt.FacetChart:
    """A small multiple per figure (own y scale, headed with its unit), a line per provider and machine, across
    the commits in order (History's axis)."""
    heads = {name: panel_head(name) for name in SHOWN}
    drawn = frame[[*FIELDS, "counter", "commit_hash"]].assign(
        panel=frame["counter"].map(heads),
        drawn=[v * 100 if DERIVED[n].unit == "fraction" else v for n, v in zip(frame["counter"], frame["value"])])
    drawn, x = charts.in_commit_order(drawn)
    base = alt.Chart().encode(
        x=x,
        y=alt.Y("drawn:Q", title=None, scale=alt.Scale(zero=False),
                axis=alt.Axis(format=charts.NUMBER_FORMAT, tickCount=4)),
        color=alt.Color("provider:N", scale=charts.CATEGORIES, legend=alt.Legend(orient="right", labelLimit=320)),
        detail="machine:N",
        tooltip=[alt.Tooltip("figure:N"), alt.Tooltip("provider:N"), alt.Tooltip("machine:N"),
                 alt.Tooltip("short:N", title="commit"), alt.Tooltip("commit_date:T", title="date"),
                 alt.Tooltip("shown:N", title="value"), alt.Tooltip("tool:N", title="counted by")])
    layers = alt.layer(base.mark_line(opacity=0.6), base.mark_point(filled=True, size=50),
                       data=drawn.drop(columns=["counter", "commit_hash"])).properties(
        width=charts.PANEL_WIDTH, height=110)
    return layers.facet(row=alt.Row("panel:N", title=None, sort=[heads[n] for n in SHOWN], header=alt.Header(
        labelAngle=0, labelAlign="left", labelOrient="top", labelFontSize=13, labelFontWeight="bold"))
    ).resolve_scale(y="independent")


FIGURE_UNITS = {"fraction": "%", "ratio": "ratio"}


def panel_head(name: str) -> str:
    """A figure's panel header: its label and the unit its axis reads in (fractions drawn as percent)."""
    figure = DERIVED[name]
    return f"{figure.label} ({FIGURE_UNITS.get(figure.unit, figure.unit)})"


def why_frame(frame: pd.DataFrame, base: str, head: str) -> pd.DataFrame:
    """Each figure of each provider and machine at `base` and at `head` (commit hashes), with the change."""
    key = ["machine", "provider", "figure", "counter"]
    sides = [frame[frame["commit_hash"] == commit].set_index(key)[["value", "shown"]] for commit in (base, head)]
    joined = sides[0].join(sides[1], how="outer", lsuffix="_base", rsuffix="_head").reset_index()
    change = (joined["value_head"] - joined["value_base"]) / joined["value_base"].abs()
    joined["change"] = [f"{c:+.1%}" if pd.notna(c) else "" for c in change]
    joined["order"] = joined["counter"].map(SHOWN.index)
    return joined.sort_values(["machine", "provider", "order"]).rename(
        columns={"shown_base": "base", "shown_head": "head"}).reset_index(drop=True)


def kernel_frame(cases: pd.DataFrame) -> pd.DataFrame:
    """Every kernel of the profiled call at each commit (queries.case_kernels), launch order kept."""
    rows = []
    for case in cases.itertuples():
        for kernel in json.loads(case.kernels or "[]"):
            v = kernel.get("values", {})
            rows.append({"commit": case.commit_hash[:8], "kernel": kernel["name"],
                         "time (us)": round((kernel.get("duration_s") or 0) * 1e6, 1),
                         "DRAM read (MB)": round(_first(v, "dram__bytes_read.sum") / 1e6, 1),
                         "DRAM write (MB)": round(_first(v, "dram__bytes_write.sum") / 1e6, 1),
                         "registers": _first(v, "launch__registers_per_thread", "VGPR_Count"),
                         "grid": _first(v, "launch__grid_size", "Grid_Size")})
    return pd.DataFrame(rows, columns=KERNEL_COLUMNS)


def diagnosis(figures: dict[str, float], kernels: pd.DataFrame, copy_gbps: float | None,
              copy_basis: str = "") -> list[str]:
    """A kernel engineer's reading of one profiled call's figures (counter name -> value), in plain sentences:
    bandwidth against the machine's copy, bytes against the minimum, occupancy and matrix use, and the time
    the secondary kernels take. Only what the figures hold is said."""
    said = []
    gbps = figures.get("hbm_gbps")
    if gbps and copy_gbps:
        share = gbps / copy_gbps
        said.append(f"DRAM bandwidth {gbps:,.0f} GB/s is {share:.0%} of this machine's copy ({copy_gbps:,.0f} GB/s, "
                    f"{copy_basis}): " + ("memory-bound and near the copy: fewer bytes is the only way left."
                                          if share >= 0.7 else "well below the copy: memory is not what limits it "
                                          "unless the bytes are far above the minimum." if share < 0.4 else
                                          "a memory-bound kernel has room left to the copy."))
    over = figures.get("hbm_over_min")
    if over:
        said.append(f"It moves {over:.2f}x the workload's minimum bytes"
                    + (": re-reads or spills cost traffic." if over >= 1.25 else ": close to the minimum."))
    occupancy = figures.get("occupancy")
    if occupancy is not None:
        said.append(f"Occupancy {occupancy:.0%}" + (": few waves to hide latency; registers or LDS per workgroup "
                                                     "set that (Kernel resources)." if occupancy < 0.3 else "."))
    busy = figures.get("matrix_busy")
    if busy is not None:
        said.append(f"Matrix units busy {busy:.0%} of the time.")
    if len(kernels) > 1 and kernels["time (us)"].sum() > 0:
        total = kernels["time (us)"].sum()
        main = kernels.loc[kernels["time (us)"].idxmax()]
        rest = total - main["time (us)"]
        said.append(f"{len(kernels)} kernels: {main['kernel']} takes {main['time (us)']:.1f} of {total:.1f} us; the "
                    f"other {len(kernels) - 1} take {rest:.1f} us ({rest / total:.0%})"
                    + (", worth fusing." if rest / total >= 0.1 else "."))
    return said


def _first(values: dict, *names: str) -> float:
    """The first of these counters the kernel has (ncu's or rocprofv3's name), 0 without any."""
    return next((float(values[n]) for n in names if n in values), 0.0)


def section(load, benchmark: str, params: list[str], machines: list[str], subject: str,
            steps: pd.DataFrame) -> None:
    """The counters of the chosen case under its timing panels; `load` is dashboard.data.load."""
    st.subheader("Hardware counters")
    rows = load("case_counters", benchmark=benchmark, params=params, machines=machines, subject=subject)
    frame = figure_frame(rows)
    if frame.empty:
        st.caption("No counter pass for this case yet: `flybench run --counters` on a GPU records them "
                   "(Nsight Compute on NVIDIA, rocprofv3 on ROCm; docs/counters.md).")
        return
    st.caption("From the counter pass after timing: one profiled call per case and commit, never a timing "
               "sample (the profiler replays each kernel and flushes the caches). DRAM / minimum is the bytes the "
               "kernels moved over the workload's minimum-byte model.")
    ui.chart(chart(frame), frame, f"counters-{subject}", FIELDS, stretch=False)
    reading(load, rows, benchmark, subject)
    measured = frame.drop_duplicates("commit_hash").sort_values("commit_date")
    hashes = list(measured["commit_hash"])
    if len(hashes) < 2:
        st.caption(f"One profiled commit ({hashes[0][:8]}): a why table needs two. `flybench run --counters` "
                   "on another commit adds one.")
        return
    labels = dict(zip(measured["commit_hash"], measured["short"] + " · " +
                      measured["commit_date"].dt.strftime("%Y-%m-%d").fillna("")))
    base_default, head_default = _pair(hashes, steps)
    left, right = st.columns(2)
    base = filters.pick_one("Why: base commit", f"counters-base-{subject}", hashes, default=base_default,
                            format_func=labels.get, where=left)  # in the URL by hash, as Compare's commits
    head = filters.pick_one("head commit", f"counters-head-{subject}", hashes, default=head_default,
                            format_func=labels.get, where=right)
    ui.table(why_frame(frame, base, head), f"counters-why-{subject}", WHY_COLUMNS)
    with st.expander("Kernels of the profiled call at base and head"):
        for machine in sorted(frame["machine"].unique()):
            for param in params:
                kernels = kernel_frame(load("case_kernels", benchmark=benchmark, params=param, machine=machine,
                                            commits=sorted({base, head})))
                if not kernels.empty:
                    st.caption(literal_markdown(f"{machine} · {provider_label(json.loads(param).get('provider'))}"))
                    ui.table(kernels, f"counters-kernels-{subject}-{machine}-{param}", KERNEL_COLUMNS)


def reading(load, rows: pd.DataFrame, benchmark: str, subject: str) -> None:
    """`diagnosis` of each provider and machine at its newest profiled commit, under the counter charts."""
    newest = rows.sort_values("commit_date").groupby(["machine", "params"]).tail(1)[["machine", "params",
                                                                                      "commit_hash"]]
    latest = frames.provenance(load("latest_cases"))
    for case in newest.itertuples():
        at = rows[(rows["machine"] == case.machine) & (rows["params"] == case.params)
                  & (rows["commit_hash"] == case.commit_hash)]
        figures = dict(zip(at["counter"], at["value"]))
        roofs = frames.ceilings(latest, case.machine)
        copy = roofs[roofs["ceiling"] == "memory copy"]
        kernels = kernel_frame(load("case_kernels", benchmark=benchmark, params=case.params, machine=case.machine,
                                    commits=[case.commit_hash]))
        said = diagnosis(figures, kernels, float(copy["gbps"].iloc[0]) if len(copy) else None,
                         str(copy["basis"].iloc[0]) if len(copy) else "")
        if said:  # kernel and machine names are data: literal text, never markup
            who = literal_markdown(f"{provider_label(json.loads(case.params).get('provider'))} on {case.machine}")
            st.markdown(f"**Reading, {who} at {case.commit_hash[:8]}**\n\n"
                        + "\n".join(f"- {literal_markdown(line)}" for line in said))


def _pair(hashes: list[str], steps: pd.DataFrame) -> tuple[str, str]:
    """Base and head to line up first: the newest detected step whose two commits were both profiled, else the
    two newest profiled commits (one commit: itself twice)."""
    for step in steps.sort_values("first_bad_date", ascending=False).itertuples() if not steps.empty else []:
        if step.last_good in hashes and step.first_bad in hashes:
            return step.last_good, step.first_bad
    return (hashes[-2] if len(hashes) > 1 else hashes[-1]), hashes[-1]
