"""The study's figures, drawn with altair and written as PNG (vl-convert), from frames the study computed.

Every figure carries the data's provenance in its title: these are FlyDSL's
CI measurements, not flybench's.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd

from studies.flydsl_ci.data import History
from studies.flydsl_ci.steps import Alert
from studies.flydsl_ci.sweep import Outcome

PROVENANCE = "FlyDSL CI (MI325X gfx942, MI355X gfx950, Radeon gfx1201), main, 2026-06-11..07-12"
FLOOR = 0.01
"""Percent: where cases whose A/A runs never moved are drawn on a log axis."""
ARCH_COLORS = alt.Scale(domain=["gfx942", "gfx950", "gfx1201"], range=["#1f77b4", "#d62728", "#7f7f7f"])


def save(chart: alt.TopLevelMixin, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    chart.save(str(path), format="png", scale_factor=2)
    return path


def noise(frame: pd.DataFrame) -> alt.Chart:
    """Per case: run-to-run noise of the main series against the same-job noise of its A/A runs, log-log.

    Both are robust per-measurement spreads (an A/A delta is the difference of
    two measurements, hence the sqrt 2); cases whose A/A runs never moved sit
    on the floor of the plot.
    """
    data = frame.assign(aa_sigma=frame["aa_sigma"].clip(lower=FLOOR)).dropna(subset=["history_noise", "aa_sigma"])
    base = alt.Chart(data, title=alt.TitleParams("Noise per case: run to run vs within one job", subtitle=PROVENANCE))
    points = base.mark_point(filled=True, opacity=0.7).encode(
        x=alt.X("history_noise:Q", scale=alt.Scale(type="log"), title="run-to-run noise of main (% of value)"),
        y=alt.Y("aa_sigma:Q", scale=alt.Scale(type="log"), title=f"same-job noise from A/A runs (%, floor {FLOOR})"),
        color=alt.Color("arch:N", scale=ARCH_COLORS), shape=alt.Shape("coarse:N", title="printed coarser than 1%"),
        tooltip=["label", "history_noise", "aa_sigma"])
    diagonal = alt.Chart(pd.DataFrame({"x": [FLOOR, 60], "y": [FLOOR, 60]})).mark_line(
        color="gray", strokeDash=[4, 4]).encode(x="x:Q", y="y:Q")
    return (diagonal + points).properties(width=520, height=380)


def by_op(frame: pd.DataFrame) -> alt.Chart:
    """Run-to-run noise of every main series, one row per op, coloured by architecture."""
    title = alt.TitleParams("Run-to-run noise of each main series", subtitle=PROVENANCE)
    return alt.Chart(frame, title=title).mark_tick(thickness=2, size=12).encode(
        x=alt.X("history_noise:Q", scale=alt.Scale(type="log"), title="noise (% of value, log)"),
        y=alt.Y("op:N", title=None, sort="ascending"), color=alt.Color("arch:N", scale=ARCH_COLORS),
        tooltip=["label", "history_noise"]).properties(width=520)


def steps(history: History, alerts: list[Alert]) -> alt.Chart:
    """The series behind the given alerts, with the two levels the nightly run saw the night it alerted."""
    rows = []
    for alert in alerts:
        series = history.series[alert.key]
        title = f"{series.label} ({alert.percent:+.1f}%)"
        commits = [p.commit for p in series.points]
        cut, night = commits.index(alert.step.first_bad), commits.index(alert.night)
        rows += [{"panel": title, "i": i, "value": p.value, "commit": p.commit[:8],
                  "level": None if i > night else alert.step.before if i < cut else alert.step.after}
                 for i, p in enumerate(series.points)]
    base = alt.Chart(pd.DataFrame(rows)).encode(x=alt.X("i:Q", title="main commit (measured, in order)"))
    line = base.mark_line(point=True).encode(y=alt.Y("value:Q", scale=alt.Scale(zero=False), title="TFLOPS"),
                                             tooltip=["commit", "value"])
    fit = base.mark_line(color="orange", strokeDash=[5, 3], interpolate="step-before").encode(y="level:Q")
    return (line + fit).properties(width=300, height=160).facet(
        facet=alt.Facet("panel:N", title=None), columns=2,
        title=alt.TitleParams("Steps on main corroborated by the merged PR's own run (dashed: the levels "
                              "the nightly run saw when it alerted)", subtitle=PROVENANCE)
    ).resolve_scale(y="independent")


def flags(frame: pd.DataFrame) -> alt.Chart:
    """FlyDSL's flagged records by the study's verdict, stacked by run context."""
    return alt.Chart(frame, title=alt.TitleParams("FlyDSL's 568 flagged records (-3% vs main), judged",
                                                  subtitle=PROVENANCE)).mark_bar().encode(
        y=alt.Y("verdict:N", sort=None, title=None), x=alt.X("records:Q", title="flagged records"),
        color=alt.Color("context:N", title="run"), tooltip=["verdict", "context", "records"]).properties(width=460)


def sweep(outcomes: list[Outcome], real: int) -> alt.Chart:
    """False alarms on quiet series against real steps caught, one point per threshold triple."""
    frame = pd.DataFrame([{"relative": f"{o.relative:.0%}", "noise_k": o.noise_k, "nights": str(o.nights),
                           "quiet alarms": o.quiet_alarms, "caught": o.caught, "setting": o.label}
                          for o in outcomes])
    return alt.Chart(frame, title=alt.TitleParams(f"Thresholds replayed night by night ({real} real steps)",
                                                  subtitle=PROVENANCE)).mark_point(filled=True, size=70).encode(
        x=alt.X("quiet alarms:Q", title="alerts on quiet series (false alarms)"),
        y=alt.Y("caught:Q", title="real steps caught"), color=alt.Color("relative:N", sort=None),
        shape=alt.Shape("nights:N", title="nights to confirm"), tooltip=["setting", "quiet alarms", "caught"]
    ).properties(width=460, height=320)
