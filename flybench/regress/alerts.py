"""Alerts: a regression the history scan found stays open until its series recovers or someone accepts it.

Step detection refits every series' whole history on each scan, and a step
it found on one night can be gone from a later night's fit while the
regression stays: over a longer history a small step can come out as one
segment. So the scan's worse steps are not the report. Each one opens an
alert, kept in the store (`alerts`, with every change of state in
`alert_events`), and an alert closes only when

- its series returns to the level before the step: the newest
  RECOVERY_POINTS values measured after the first bad commit all lie nearer
  that level than the level after it (the first of them closes the alert),
  or
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
from collections.abc import Sequence
from dataclasses import dataclass, replace

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
            points: dict[tuple[str, str, str, str, str], list[Point]]) -> tuple[list[Alert], list[Event]]:
    """One scan's effect on the alerts of the series it covered: `found` (its steps) matched, opened or
    reopened, then every open alert checked for recovery against `points` (each series, oldest first)."""
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
        if alert.status == OPEN and (back := recovered_at(alert.regression, points.get(alert.key, []))):
            alerts[i] = replace(alert, status=RECOVERED, closed_by=back)
            events.append(Event(alerts[i], "recovered", newest(alert.key), f"back at the old level at {back}"))
    return alerts, events


def recovered_at(r: Regression, series: Sequence[Point]) -> str | None:
    """The commit from which the series' newest RECOVERY_POINTS measured values after the first bad commit all
    lie nearer the level before the step than the level after it; None while they do not."""
    commits = [p.commit for p in series]
    if r.step.first_bad not in commits:
        return None
    after = [p for p in series[commits.index(r.step.first_bad):] if p.value is not None]
    tail = after[-RECOVERY_POINTS:]
    if len(after) <= RECOVERY_POINTS or len(tail) < RECOVERY_POINTS:
        return None  # the bad level itself must have been seen before the series can return from it
    if all(abs(p.value - r.step.before) < abs(p.value - r.step.after) for p in tail):
        return tail[0].commit
    return None


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
