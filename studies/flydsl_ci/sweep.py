"""Which thresholds would have kept quiet series quiet while still catching the steps that really happened?

Only series that can be judged take part: values printed finer than 1% of
the value (a case at 0.8 TFLOPS printed as 0.8 or 0.9 moves in 12% steps),
and same-job A/A runs to say how much the case moves by itself. Real steps
are the corroborated ones (steps.evidence) of at least 3% among
what a permissive scan proposes; a quiet series has none. Each threshold
triple is replayed night by night: an alert on a quiet series is a false
alarm, and a real step is caught when an alert covers it (same case,
direction and an overlapping commit range).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from flybench.regress.history import resolution
from studies.flydsl_ci.data import History, Series, SeriesKey
from studies.flydsl_ci.steps import Alert, evidence, fit_once, nightly, overlaps

PERMISSIVE = (0.01, 1.0, 1)
"""(relative, noise_k, nights) of the scan that proposes candidate steps."""
MATERIAL = 3.0
"""Percent: a real step is at least this big (FlyDSL's own bar)."""
COARSE = 0.01
"""A series printed in units coarser than this fraction of its value cannot be judged at a few percent."""
RELATIVE = (0.02, 0.03, 0.04, 0.05, 0.08, 0.10, 0.15, 0.20)
NOISE_K = (2.0, 3.0, 4.0, 5.0, 6.0)
NIGHTS = (1, 2)


@dataclass(frozen=True)
class Outcome:
    """One threshold triple replayed over the judged series."""

    relative: float
    noise_k: float
    nights: int
    alerts: int
    quiet_alarms: int  # alerts on series with no real step
    caught: int  # real steps covered by an alert

    @property
    def label(self) -> str:
        return f"{self.relative:.0%}, noise_k {self.noise_k:g}, {self.nights} night{'s' if self.nights > 1 else ''}"


def coarse(series: Series) -> bool:
    values = [p.value for p in series.points if p.value]
    return not values or resolution(values) / statistics.median(values) > COARSE


def judged(history: History) -> list[Series]:
    """Series fine enough to judge at a few percent, with A/A runs to compare against."""
    return [s for s in history.series.values()
            if not coarse(s) and any(j.aa and j.delta is not None for j in history.jobs_of(s.key))]


def scan(series: list[Series], relative: float, noise_k: float, nights: int = 1) -> list[Alert]:
    """All alerts of one threshold triple over `series`."""
    with fit_once():
        return [a for s in series for a in nightly(s, relative, noise_k, nights)]


def real_steps(history: History, series: list[Series]) -> list[Alert]:
    """The permissive scan's material steps that the merged PRs' own runs corroborate."""
    return [a for a in scan(series, *PERMISSIVE)
            if abs(a.percent) >= MATERIAL and evidence(history, a).verdict == "corroborated"]


def sweep(history: History, series: list[Series], real: list[Alert]) -> list[Outcome]:
    """Every triple of the grid, replayed (asv's fit is memoised across the grid)."""
    changed: set[SeriesKey] = {a.key for a in real}
    outcomes = []
    with fit_once():
        for nights in NIGHTS:
            for relative in RELATIVE:
                for noise_k in NOISE_K:
                    alerts = scan(series, relative, noise_k, nights)
                    outcomes.append(Outcome(
                        relative, noise_k, nights, len(alerts), sum(a.key not in changed for a in alerts),
                        sum(any(overlaps(r, a, history) for a in alerts) for r in real)))
    return outcomes


def quietest(outcomes: list[Outcome]) -> Outcome:
    """The triple with the fewest false alarms on quiet series (then the one catching most, the most sensitive)."""
    return min(outcomes, key=lambda o: (o.quiet_alarms, -o.caught, o.relative, o.noise_k, o.nights))


def catching(outcomes: list[Outcome]) -> Outcome:
    """Among triples catching the most real steps, the one with fewest false alarms."""
    most = max(o.caught for o in outcomes)
    return min((o for o in outcomes if o.caught == most), key=lambda o: (o.quiet_alarms, -o.relative, -o.noise_k))
