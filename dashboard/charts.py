"""Altair charts for the pages. Each takes the rows it draws and nothing else, so the page can offer exactly
those rows for download.

A failed case is drawn as a mark that says "failed" (a grey cell, a cross on a
strip below a history), never at a height or in a colour that reads as a speed.
Imported rows (provenance other than flybench) get their own point shape and a
dashed line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from flybench import envvars


MISSING = "#dddddd"
HISTORY_FIELDS = ["panel", "series", "provider", "commit_date", "short", "message", "author", "url", "y", "y_lo", "y_hi",
                  "status", "why", "provenance", "run"]
PANEL_HEIGHT = 200
PANEL_WIDTH = 720
"""A history panel's plot area: small multiples stay readable at this size whatever their legend holds."""
CATEGORIES = alt.Scale(scheme="tableau10")  # distinct hues; Streamlit's default palette pairs near-identical ones
VERDICT_COLORS = {"regression": "#d62728", "broken": "#8c1c13", "improvement": "#2ca02c", "fixed": "#98df8a",
                  "incomparable": "#ff7f0e", "skipped": "#bbbbbb", "unchanged": "#1f77b4"}


_ALTAIR_GLOBALS = threading.Lock()
SVG_ROWS = 5000  # charts up to this many rows draw as SVG; bigger ones as canvas, which draws them faster


@dataclass(frozen=True)
class Spec:
    """A chart already converted to Vega-Lite (`spec`, shared: never changed), its rows by dataset name apart."""

    spec: dict[str, Any]
    datasets: dict[str, pd.DataFrame]


def vega_spec(figure: alt.TopLevelMixin | Spec) -> dict[str, Any]:
    """The chart as a Vega-Lite spec, its data frames kept as named datasets (Streamlit sends them as Arrow).

    What `st.altair_chart` does, minus Altair's JSON-schema validation, which
    costs a few hundred milliseconds per chart on every rerun and so decided
    whether a page met its 1 s budget. The tests validate every chart instead
    ($FLYBENCH_VALIDATE_CHARTS=1).
    """
    if isinstance(figure, Spec):
        return _with_renderer({**figure.spec, "datasets": dict(figure.datasets)}, figure.datasets)
    datasets: dict[str, Any] = {}

    def named(data: Any) -> dict[str, str]:
        key = f"data-{id(data)}"
        datasets[key] = data
        return {"name": key}

    with _ALTAIR_GLOBALS:  # data transformers and themes are process-wide; sessions run in threads
        alt.data_transformers.register("flybench-named", named)
        theme = alt.theme.enable("none") if alt.theme.active == "default" else contextlib.nullcontext()
        with alt.data_transformers.enable("flybench-named"), theme:
            spec = figure.to_dict(validate=os.environ.get(envvars.VALIDATE_CHARTS) == "1")
    spec["datasets"] = {**spec.get("datasets", {}), **datasets}
    return _with_renderer(spec, datasets)


def _with_renderer(spec: dict[str, Any], datasets: dict[str, Any]) -> dict[str, Any]:
    if sum(len(d) for d in datasets.values() if hasattr(d, "__len__")) <= SVG_ROWS:
        spec["usermeta"] = {"embedOptions": {"renderer": "svg"}}  # readable to screen readers and to the tests
    return spec



def _valid(field: str) -> str:
    return f"isValid(datum['{field}']) && isFinite(datum['{field}'])"


def heatmap(frame: pd.DataFrame, x: str, y: str, color: str, title: str, scale: alt.Scale,
            dark: str, tooltip: list[alt.Tooltip | str], section: str = "section", x_first: str | None = None,
            cell_width: int = 140) -> Spec:
    """Cells coloured by `color` and labelled with `shown`, one panel per `section` (a machine); a cell
    without a valid value is grey. The column `x_first` (if any) leads, the others follow in order.

    One faceted chart instead of one chart per machine: a page's cost grows
    with its number of charts, not with its number of cells. `dark` is a Vega
    expression on `datum` saying where the label must be white.

    Its spec depends on the rows only through the order of the columns, so it
    is built once per set of arguments and reused with the rows of each
    rerun: building and converting it cost the Overview about 60 ms a
    heatmap on every widget change.
    """
    order = sorted(set(frame[x]), key=lambda v: (v != x_first, str(v)))
    key = repr((x, y, color, title, scale, dark, tooltip, section, order, cell_width))
    spec = _HEATMAPS.get(key)
    if spec is None:
        if len(_HEATMAPS) >= MAX_TEMPLATES:
            _HEATMAPS.clear()
        spec = _HEATMAPS[key] = vega_spec(_heatmap(x, y, color, title, scale, dark, tooltip, section, order,
                                                    cell_width))
    return Spec(spec, {HEATMAP_DATA: frame})


HEATMAP_DATA = "cells"
MAX_TEMPLATES = 256
_HEATMAPS: dict[str, dict[str, Any]] = {}
"""Heatmap specs by their arguments, their rows left out (`heatmap`)."""


def _heatmap(x: str, y: str, color: str, title: str, scale: alt.Scale, dark: str,
             tooltip: list[alt.Tooltip | str], section: str, order: list[Any], cell_width: int) -> alt.FacetChart:
    base = alt.Chart(alt.NamedData(name=HEATMAP_DATA)).encode(
        x=alt.X(f"{x}:N", title=None, axis=alt.Axis(orient="top", labelAngle=0, labelLimit=200), sort=order),
        y=alt.Y(f"{y}:N", title=None, axis=alt.Axis(labelLimit=420)),
        tooltip=tooltip,
    )
    valid = _valid(color)  # two layers: Vega-Lite would drop (or colour) invalid values in a scaled channel
    cells = base.mark_rect(stroke="white", strokeWidth=2).encode(color=alt.Color(
        f"{color}:Q", scale=scale, title=title,
        legend=alt.Legend(orient="bottom", direction="horizontal", gradientLength=240, format=".2~g")),
    ).transform_filter(valid)
    empty = base.mark_rect(stroke="white", strokeWidth=2, color=MISSING).transform_filter(f"!({valid})")
    text = base.mark_text(fontSize=12).encode(
        text="shown:N",
        color=alt.when(f"{valid} && ({dark})").then(alt.value("white")).otherwise(alt.value("black")))
    return (empty + cells + text).properties(height=alt.Step(30), width=alt.Step(cell_width)).facet(
        row=alt.Row(f"{section}:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top",
                                                                  labelFontSize=15, labelFontWeight="bold")),
    ).resolve_scale(x="independent", y="independent")


GAP_DAYS = 3
"""Days between two neighbouring commits that a commit axis marks as a gap."""


def commit_order(rows: pd.DataFrame) -> pd.Series:
    """Each row's commit's place on a commit axis: the commits of `rows` by date (then hash), one step each."""
    place = rows.drop_duplicates("commit_hash").sort_values(["commit_date", "commit_hash"], na_position="first")
    return rows["commit_hash"].map({h: i for i, h in enumerate(place["commit_hash"])})


def commit_ticks(rows: pd.DataFrame, most: int = 8) -> tuple[dict[int, str], pd.DataFrame]:
    """Up to `most` evenly spread commit positions (`order`), the first and the last always among them, labelled
    with their dates, no date twice (with the time where the commits drawn all fall on one day), and the gaps: positions whose commit came GAP_DAYS or more after the one before it
    (columns order, days)."""
    dated = rows.drop_duplicates("order").sort_values("order")[["order", "commit_date"]]
    if dated.empty:
        return {}, pd.DataFrame(columns=["order", "days"])
    shown = min(most, len(dated))
    picks = sorted({round(i * (len(dated) - 1) / max(1, shown - 1)) for i in range(shown)})
    day = [f"{d:%Y-%m-%d}" for d in dated["commit_date"]]
    kept: list[int] = []
    for i in picks:  # one label a date: six ticks read as three identical pairs when commits share a day
        if kept and day[i] == day[kept[-1]]:
            if i == picks[-1] and len(kept) > 1:
                kept[-1] = i  # the last commit keeps its label
            continue
        kept.append(i)
    if len(kept) == 1 and picks[-1] != kept[0]:  # every commit of one day: the first and the last by time
        kept.append(picks[-1])
    same_day = len({day[i] for i in kept}) < len(kept)
    ticks = {int(dated["order"].iloc[i]): f"{dated['commit_date'].iloc[i]:%Y-%m-%d %H:%M}" if same_day else day[i]
             for i in kept}
    days = dated["commit_date"].diff().dt.days
    gaps = dated.assign(days=days)[days >= GAP_DAYS][["order", "days"]].astype({"days": int})
    return ticks, gaps.reset_index(drop=True)


def commit_axis(ticks: dict[int, str], last: int | None = None, title: str = "commits in order (labels: commit date)"
                ) -> alt.X:
    """The x axis of a history: commits in order (`order`), one step each as asv draws them, labelled with the
    dates of `ticks` (position -> text). The domain runs to `last` (the last position drawn; the last tick
    without it), so no point falls outside the plot."""
    names = json.dumps({str(k): v for k, v in ticks.items()})
    top = max([*ticks, *([last] if last is not None else [])], default=0)
    return alt.X("order:Q", title=title, scale=alt.Scale(domain=[-0.5, top + 0.5], nice=False),
                 axis=alt.Axis(values=sorted(ticks), labelExpr=f"{names}[''+datum.value] || ''", labelAngle=0,
                               grid=False))


def in_commit_order(rows: pd.DataFrame, title: str = "commits in order (labels: commit date)"
                    ) -> tuple[pd.DataFrame, alt.X]:
    """`rows` with their place on a commit axis (`order`) and that axis: what every chart across commits draws
    on, as History does."""
    rows = rows.assign(order=commit_order(rows))
    ticks, _ = commit_ticks(rows)
    return rows, commit_axis(ticks, int(rows["order"].max()) if len(rows) else None, title)


NUMBER_FORMAT = ",.4~r"
"""A numeric axis's labels: at most four significant digits, thousands grouped, never scientific notation."""


STEP_COLOR = alt.condition("datum.closed", alt.value("#888888"), alt.value("#d62728"))
"""A detected step's rule and label: red while its alert is open, grey once recovered or accepted."""


def history(rows: pd.DataFrame, bands: pd.DataFrame, steps: pd.DataFrame, unit_label: str,
            log: bool = False, ticks: dict[int, str] | None = None,
            gaps: pd.DataFrame | None = None, modes: pd.DataFrame | None = None) -> alt.FacetChart:
    """One case across commits, a small multiple per machine (`panel`), a line per provider (`series`).

    The x axis is the commits in order (`order`; `ticks` label some with their
    dates), as asv draws a history: a busy week keeps its width and a quiet
    fortnight takes one step, marked by a grey rule with the days it held
    (`gaps`). Each line has its 99% CI band, its alert threshold (`bands`: the
    band a value must leave to count as a change, from `start` to `end`) and
    its detected steps (`steps`: red dashed rules at `first_bad_order`,
    labelled with the first bad commit's message). A failed commit is a red
    cross on the panel's bottom edge, with the reason in its hover. Every
    layer travels in one table (`layer` says which) so that one faceted chart
    serves any number of machines. `modes`: grey bands (`start`..`end`, `lo`..`hi`, named by `mode`) at the levels
    a series flips between (`flybench.regress.modes`).
    """
    modes = modes if modes is not None else pd.DataFrame(columns=["panel", "start", "end", "lo", "hi", "mode"])
    gaps = gaps if gaps is not None else pd.DataFrame(columns=["order", "days"])
    rows = rows[[c for c in [*HISTORY_FIELDS, "order"] if c in rows]]  # only what is drawn travels to the browser
    panels = rows["panel"].drop_duplicates()
    gap_rows = gaps.merge(panels.to_frame(), how="cross") if len(gaps) else gaps.assign(panel=[])
    data = pd.concat([rows.assign(layer=rows["status"].where(rows["status"] == "failed", "point")),
                      bands.assign(layer="band"),
                      modes.assign(layer="mode"), steps.assign(layer="step"), gap_rows.assign(layer="gap")],
                     ignore_index=True)
    x = commit_axis(ticks or {}, int(rows["order"].max()) if len(rows) else None)
    color = alt.Color("series:N", title="provider", scale=CATEGORIES,
                      legend=alt.Legend(orient="right", labelLimit=320, symbolOpacity=1))
    y_scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    y = alt.Y("y:Q", title=unit_label + (" (log scale)" if log else ""), scale=y_scale,
              axis=alt.Axis(format=NUMBER_FORMAT, tickCount=5))
    tooltip = [alt.Tooltip("series:N", title="provider"), alt.Tooltip("provider:N", title="provider id"),
               alt.Tooltip("panel:N", title="machine"),
               alt.Tooltip("short:N", title="commit"),
               alt.Tooltip("commit_date:T", title="date", format="%Y-%m-%d %H:%M"), alt.Tooltip("run:N"),
               alt.Tooltip("message:N"), alt.Tooltip("author:N"), alt.Tooltip("y:Q", title=f"value ({unit_label})", format=".4~g"),
               alt.Tooltip("provenance:N", title="measured by")]
    base = alt.Chart().encode(x=x)
    point = "datum.layer == 'point'"
    layers = [
        base.mark_rule(color="#bbbbbb", strokeDash=[2, 2]).encode(
            x=alt.X("gap_at:Q"), tooltip=[alt.Tooltip("gap:N", title="between these commits")])
        .transform_calculate(gap_at="datum.order - 0.5", gap="datum.days + ' days without a commit'")
        .transform_filter("datum.layer == 'gap'"),
        base.mark_rect(opacity=0.08).encode(x="start:Q", x2="end:Q", y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q",
                                           color=color, tooltip=["series:N", "band:N"])
        .transform_filter("datum.layer == 'band'"),
        base.mark_rect(opacity=0.18, color="#7f7f7f").encode(
            x="start:Q", x2="end:Q", y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q",
            tooltip=[alt.Tooltip("mode:N", title="runner mode")]).transform_filter("datum.layer == 'mode'"),
        base.mark_line().encode(y=y, color=color).transform_filter(point),
        base.mark_area(opacity=0.15).encode(y=alt.Y("y_lo:Q", scale=y_scale), y2="y_hi:Q", color=color)
        .transform_filter(point),
        base.mark_point(filled=True, size=50, opacity=1, cursor="pointer").encode(
            y=y, color=color, href="url:N", tooltip=tooltip, shape=alt.Shape("provenance:N", title="measured by"))
        .transform_filter(point),
        base.mark_point(shape="cross", size=140, filled=True, color="#d62728").encode(
            y=alt.value(PANEL_HEIGHT - 4),  # pixels from the top: a facet's cell has no `height` signal, so
            # "height - 4" put the crosses 4 px above its top edge
            tooltip=[alt.Tooltip("series:N", title="provider"), alt.Tooltip("short:N", title="commit"),
                     alt.Tooltip("commit_date:T", title="date"), alt.Tooltip("why:N", title="failed because")])
        .transform_filter("datum.layer == 'failed'"),
        base.mark_rule(strokeDash=[6, 3], size=2).encode(
            x="first_bad_order:Q", color=STEP_COLOR, tooltip=[alt.Tooltip("what:N", title="detected step"),
                                                              alt.Tooltip("state:N")])
        .transform_filter("datum.layer == 'step'"),
        base.mark_text(align="left", dx=4, fontSize=11, limit=260).encode(
            x="first_bad_order:Q", y=alt.Y("tag_y:Q", scale=None), text="tag:N", color=STEP_COLOR)
        .transform_filter("datum.layer == 'step' && datum.tag != ''"),
    ]
    return alt.layer(*layers, data=data).properties(height=PANEL_HEIGHT, width=PANEL_WIDTH).facet(
        row=alt.Row("panel:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top",
                                                             labelFontSize=14, labelFontWeight="bold")),
    ).resolve_scale(y="independent")


def change_bars(frame: pd.DataFrame, title: str) -> alt.Chart:
    """Relative change per case (`label`), coloured by verdict.

    Cases without a finite change (one side failed, or a step from 0, as 0 -> 28
    AGPRs) have no bar to draw and are left to the table; the legend names only
    the verdicts drawn, in full. The axis's ticks are set here, each labelled
    with as many decimals as their spacing needs, so no two read alike
    (-0.4% to +0.3% once read "-0%, -0%, +0%, +0%").
    """
    shown = frame[np.isfinite(frame["change"].astype(float))]
    drawn = [v for v in VERDICT_COLORS if v in set(shown["verdict"])]
    values, fmt = percent_ticks(shown["change"].astype(float))
    return alt.Chart(shown).mark_bar().encode(
        x=alt.X("change:Q", title=title, scale=alt.Scale(domain=[values[0], values[-1]], nice=False),
                axis=alt.Axis(format=fmt, values=values)),
        y=alt.Y("label:N", title=None, sort="-x", axis=alt.Axis(labelLimit=0)),  # never cut: the runner is in it
        color=alt.Color("verdict:N", scale=alt.Scale(domain=drawn, range=[VERDICT_COLORS[v] for v in drawn]),
                        legend=alt.Legend(orient="bottom", labelLimit=0, title=None)),
        tooltip=["label:N", "verdict:N", "base_text:N", "head_text:N",
                 alt.Tooltip("change:Q", format="+.1%"), "evidence:N"],
    ).properties(height=max(120, 24 * len(shown)))


def percent_ticks(changes: pd.Series, count: int = 6) -> tuple[list[float], str]:
    """Tick positions for relative changes (0 and every bar inside them, at a round step: 1, 2 or 5 times a
    power of ten, about `count` of them) and the percent format whose decimals tell each from its neighbours."""
    low, high = min(0.0, float(changes.min()) if len(changes) else 0.0), max(0.0, float(changes.max()) if
                                                                              len(changes) else 0.0)
    high = high if high > low else low + 0.01  # no bar, or one of 0: an axis from 0 to 1%
    span = high - low
    raw = span / max(1, count - 1)
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if step * m >= raw * (1 - 1e-9))
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    decimals = max(0, -math.floor(math.log10(step * 100) + 1e-9))
    values = [round(i * step, decimals + 4) for i in range(first, last + 1)]
    return values, f"+.{decimals}%"


def roofline(points: pd.DataFrame, roofs: pd.DataFrame) -> alt.FacetChart:
    """Achieved TFLOP/s against arithmetic intensity under each machine's roofs (log-log), a panel per machine.

    Points and roofs travel in one table (`layer` says which) so that one
    faceted chart serves any number of machines.
    """
    data = pd.concat([points.assign(layer="point"), roofs.assign(layer="roof")], ignore_index=True)
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)",
               axis=alt.Axis(format=NUMBER_FORMAT))
    y = alt.Y("tflops:Q", scale=alt.Scale(type="log"), title="achieved TFLOP/s", axis=alt.Axis(format=NUMBER_FORMAT))
    base = alt.Chart(data).encode(x=x, y=y)
    lines = base.mark_line(color="#555555", strokeDash=[5, 3]).encode(detail="roof:N", tooltip=["roof:N"]) \
        .transform_filter("datum.layer == 'roof'")
    names = base.mark_text(align="right", dy=-8, color="#555555").encode(text="roof:N").transform_filter(
        "datum.layer == 'roof' && datum.end")
    marks = base.mark_point(filled=True, size=90, opacity=1).encode(
        color=alt.Color("provider:N", scale=CATEGORIES), shape=alt.Shape("workload:N"),
        tooltip=["label:N", "provider:N", "machine:N", alt.Tooltip("tflops:Q", format=".4g", title="TFLOP/s"),
                 alt.Tooltip("gbps:Q", format=".4g", title="GB/s"), alt.Tooltip("intensity:Q", format=".4g"),
                 alt.Tooltip("of_roof:Q", format=".1%", title="of the roof drawn"),
                 alt.Tooltip("roof_basis:N", title="roofs"), "provenance:N"],
    ).transform_filter("datum.layer == 'point'")
    return (lines + names + marks).properties(height=420, width=640).facet(
        row=alt.Row("machine:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top",
                                                               labelFontSize=15, labelFontWeight="bold")))


def resource_lines(frame: pd.DataFrame) -> alt.FacetChart:
    """One kernel: a small chart per metric (headed with its unit), each architecture as a step line across the
    commits in order (History's axis).

    Architectures differ in colour, dash and point shape, so two with identical
    values stay apart (the dashed one drawn over the solid). A failed compile
    (`status` not ok) breaks its line and is a red cross on the panel's bottom
    edge, never bridged as if the metric had held.
    """
    frame = frame[["metric_label", "arch", "commit_hash", "commit_date", "value", "unit", "short", "message",
                   "status"]].assign(value=lambda f: f["value"].where(f["status"] == "ok"))
    frame = frame.assign(panel=[f"{m} ({unit_text(u)})" if unit_text(u) else m
                                for m, u in zip(frame["metric_label"], frame["unit"])])
    frame, x = in_commit_order(frame)
    frame = frame.drop(columns="commit_hash")
    arch = {"color": alt.Color("arch:N", title="architecture", scale=CATEGORIES, legend=alt.Legend(orient="right")),
            "strokeDash": alt.StrokeDash("arch:N", title="architecture"),
            "shape": alt.Shape("arch:N", title="architecture")}
    tooltip = ["arch:N", "metric_label:N", alt.Tooltip("value:Q", format=",~g"), "unit:N",
               alt.Tooltip("short:N", title="commit"), alt.Tooltip("commit_date:T", title="date"), "message:N",
               "status:N"]
    y = alt.Y("value:Q", title=None, scale=alt.Scale(zero=False), axis=alt.Axis(format=NUMBER_FORMAT, tickCount=4))
    base = alt.Chart().encode(x=x)
    layers = alt.layer(
        base.mark_line(interpolate="step-after", invalid="break-paths-filter-domains").encode(
            y=y, color=arch["color"], strokeDash=arch["strokeDash"]),  # a failed compile breaks the line: no drop
        # to the panel's floor (invalid=None drew its missing value as 0), no bridge either
        base.mark_point(filled=True, size=45, opacity=1).encode(y=y, color=arch["color"], shape=arch["shape"],
                                                                 tooltip=tooltip).transform_filter("datum.status == 'ok'"),
        base.mark_point(shape="cross", size=120, filled=True, color="#d62728").encode(
            y=alt.value(PANEL_HEIGHT // 2 - 4), tooltip=tooltip).transform_filter("datum.status != 'ok'"),
        data=frame)
    return layers.properties(height=PANEL_HEIGHT // 2, width=PANEL_WIDTH).facet(
        row=alt.Row("panel:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top",
                                                            labelFontWeight="bold")),
    ).resolve_scale(y="independent")


UNIT_TEXT = {"count": "", "waves": "waves per SIMD", "seconds": "s"}


def unit_text(unit: object) -> str:
    """A unit as a panel's header names it ('' where the metric's name says it all)."""
    return UNIT_TEXT.get(unit, unit) if isinstance(unit, str) else ""
