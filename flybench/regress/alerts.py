"""Alerts: a regression the history scan found stays open until its series recovers or someone accepts it.

The scan (`flybench.regress.scan`) replays a machine's history commit by
commit and keeps, for each worse statistical step of a result series, an
alert (`Alert`, stored in `alerts`; every change of state is an `Event`, in
`alert_events`). An alert closes when its series is back at the level before
the step for RECOVERY_POINTS runs (one run back is a blip of a bimodal
runner), or when someone accepts the level (`flybench accept`; acceptances
apply when alerts are read). A step found again at the levels of a recovered
alert reopens it and counts a flip. This module holds the alert's shape and
the rules that say whether two steps are one and whether a step is an alert;
the scan applies them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from flybench.regress.config import RegressConfig
from flybench.regress.history import Regression

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
    return _canonical_text(params) if isinstance(params, str) else json.dumps(params, sort_keys=True)


@functools.lru_cache(maxsize=65536)
def _canonical_text(params: str) -> str:
    """A stored params text made canonical, remembered: a machine's series share a few hundred texts, and the
    scan's attribution reads one per stored paired run (tens of thousands after months)."""
    return json.dumps(json.loads(params), sort_keys=True)


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
