"""Alerts: a regression the history scan found stays open until its series recovers or someone accepts it.

Step detection refits every series' whole history on each scan, and a step
it found on one night can be gone from a later night's fit while the
regression stays: over a longer history a small step can come out as one
segment. So the scan's worse steps are not the report. Each one opens an
alert, kept in the store (`alerts`, with every change of state in
`alert_events`), and an alert closes only when

- its series returns to the level before the step: the newest
  RECOVERY_POINTS values measured after the first bad commit (or more) all
  lie nearer that level than the level after it (the first of them closes
  the alert), and the return is its own: when series of other workloads on
  the machine moved the same way at that commit, a runner episode lifted
  everything, and the regression is still there underneath; or
- someone accepts the level (`flybench accept`; acceptances apply when
  alerts are read, as they do to steps).

A later fit that no longer finds the step changes nothing. A step the fit
finds again on the same series, at the levels of an open alert (the fit may
move its first bad commit), is that alert seen again; at the levels of a
recovered one it reopens that alert, so a series that flips between two
modes keeps one alert and counts its flips instead of opening one a night.
Only statistical steps of result series become alerts; every change of a
deterministic metric is listed as a change anyway.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from flybench.benchmark_names import workload_of
from flybench.regress.config import RegressConfig
from flybench.regress.history import Point, Regression

RECOVERY_POINTS = 2
"""Consecutive newest values at the old level that close an alert: one is a blip of a bimodal runner."""
OPEN, RECOVERED = "open", "recovered"


@dataclass(frozen=True)
class Alert:
    """One regression of one series, and where its state stands."""

    regression: Regression
    status: str  # OPEN or RECOVERED
    opened_through: str  # the newest commit of the series when the alert opened
    closed_by: str | None = None  # the commit at which the series was back at its old level
    flips: int = 0  # times it reopened after a recovery

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return series_key(self.regression)


@dataclass(frozen=True)
class Event:
    alert: Alert  # as it stands after the event
    event: str  # opened, seen, reopened, recovered
    through: str  # the newest commit of the series at that scan
    detail: str = ""


def series_key(r: Regression) -> tuple[str, str, str, str, str]:
    """(subject, machine, environment, benchmark, params as canonical JSON)."""
    return r.subject, r.machine, r.env_name, r.benchmark, canonical(r.params)


def canonical(params: dict | str) -> str:
    return json.dumps(json.loads(params) if isinstance(params, str) else params, sort_keys=True)


def advance(alerts: Sequence[Alert], found: Sequence[Regression],
            points: dict[tuple[str, str, str, str, str], list[Point]],
            units: dict[tuple[str, str, str, str, str], str | None] | None = None,
            config: RegressConfig | None = None) -> tuple[list[Alert], list[Event]]:
    """One scan's effect on the alerts of the series it covered: `found` (its steps) matched, opened or
    reopened, then every open alert checked for recovery against `points` (each series, oldest first). A return
    that series of other workloads in the same unit (`units`) shared is the environment's, not a fix."""
    cfg = config or RegressConfig()
    alerts = list(alerts)
    events: list[Event] = []

    def newest(key: tuple) -> str:
        series = points.get(key, [])
        return series[-1].commit if series else ""

    for r in found:
        if not becomes_alert(r):
            continue
        key = series_key(r)
        same = [i for i, a in enumerate(alerts) if a.key == key and same_step(a.regression, r)]
        opened = [i for i in same if alerts[i].status == OPEN]
        if opened:
            events.append(Event(alerts[opened[0]], "seen", newest(key)))
        elif same:
            i = same[-1]
            alerts[i] = replace(alerts[i], status=OPEN, closed_by=None, flips=alerts[i].flips + 1)
            events.append(Event(alerts[i], "reopened", newest(key), f"flip {alerts[i].flips}"))
        else:
            alerts.append(Alert(r, OPEN, newest(key)))
            events.append(Event(alerts[-1], "opened", newest(key)))
    for i, alert in enumerate(alerts):
        back = recovered_at(alert.regression, points.get(alert.key, [])) if alert.status == OPEN else None
        if back and not shared_return(alert.regression, back, points, units or {}, cfg):
            alerts[i] = replace(alert, status=RECOVERED, closed_by=back)
            events.append(Event(alerts[i], "recovered", newest(alert.key), f"back at the old level at {back}"))
    return alerts, events


def recovered_at(r: Regression, series: Sequence[Point]) -> str | None:
    """Where the series came back: the first of its newest measured values after the first bad commit that all
    lie nearer the level before the step than the level after it, when there are at least RECOVERY_POINTS of
    them; None while there are not."""
    commits = [p.commit for p in series]
    if r.step.first_bad not in commits:
        return None
    after = [p for p in series[commits.index(r.step.first_bad):] if p.value is not None]
    back = 0
    while back < len(after) and _nearer_old(r, after[-1 - back]):
        back += 1
    if back < RECOVERY_POINTS or len(after) <= RECOVERY_POINTS:
        return None  # the bad level must have had its runs before the series can return from it
    return after[-back].commit


def _nearer_old(r: Regression, point: Point) -> bool:
    return abs(point.value - r.step.before) < abs(point.value - r.step.after)


def shared_return(r: Regression, back: str, points: dict[tuple[str, str, str, str, str], list[Point]],
                  units: dict[tuple[str, str, str, str, str], str | None], cfg: RegressConfig) -> bool:
    """Whether series of at least `environment_workloads - 1` other workloads, in the alert's unit on its machine
    and environment, moved the way the alert's series came back, by `step_floor` or more, at `back`: a runner
    episode that lifted everything (the median of up to RECOVERY_POINTS values on each side)."""
    toward = 1 if r.step.before > r.step.after else -1
    moved = set()
    for key, series in points.items():
        if key[:3] != series_key(r)[:3] or units.get(key) != r.unit or workload_of(key[3]) == workload_of(r.benchmark):
            continue
        measured = [p for p in series if p.value is not None]
        at = next((i for i, p in enumerate(measured) if p.commit == back), None)
        if not at:
            continue
        old = statistics.median(p.value for p in measured[max(0, at - RECOVERY_POINTS):at])
        new = statistics.median(p.value for p in measured[at:at + RECOVERY_POINTS])
        if old and toward * (new - old) / abs(old) >= cfg.step_floor:
            moved.add(workload_of(key[3]))
    return len(moved) >= cfg.environment_workloads - 1


def becomes_alert(r: Regression) -> bool:
    """A worse statistical step of a result series (a deterministic metric's changes are listed anyway)."""
    return r.step.worse and r.kind == "step" and bool(r.env_name)


def meets(r: Regression, cfg: RegressConfig) -> bool:
    """Whether the alert's step still clears the step floor and absolute threshold (a config may have changed
    since the scan that opened it)."""
    limits = cfg.thresholds(r.benchmark, ", ".join(map(str, r.params.values())), r.unit)
    return abs(r.step.relative) >= limits.step_floor and abs(r.step.absolute) >= limits.absolute


def same_step(a: Regression, b: Regression) -> bool:
    """The same change of level: the same first bad commit, or both levels within the larger of 3 noise and
    a third of the step (a refit moves a step's edges and levels a little)."""
    if a.step.first_bad == b.step.first_bad:
        return True
    tolerance = max(3 * a.step.noise, abs(a.step.after - a.step.before) / 3)
    return abs(a.step.before - b.step.before) <= tolerance and abs(a.step.after - b.step.after) <= tolerance
