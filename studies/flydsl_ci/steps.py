"""flybench's history detector replayed night by night over FlyDSL's main series, and checked against evidence.

A nightly `flybench regressions` sees the history up to that night only: a
step is alerted the first night its detection holds, and a regression fixed
later is still an alert that was raised. So each series is scanned on every
prefix, in both directions (improvements are found by reading the metric as
smaller-is-better), with the public `detect()`.

Evidence comes from outside the history: the same-job comparisons of the
pull requests merged inside a step's commit range, on the same runner. A
step is *corroborated* when one of them moved the same way by at least half
the step and by more than any A/A run of that case ever did; *unsupported*
when every PR in the range was measured and none did; otherwise *unknown*.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache
from unittest import mock

from asv import step_detect

from flybench.regress.config import RegressConfig, Thresholds
from flybench.regress.history import Step, detect, series_noise
from studies.flydsl_ci.data import History, Series, SeriesKey

MIN_BAND = 1.0
"""Percent: the smallest A/A band, for cases whose A/A runs never moved (values rounded alike)."""


@dataclass(frozen=True)
class Alert:
    """A step a nightly run would have reported; `night` is the commit whose run first showed it."""

    key: SeriesKey
    direction: str  # "worse" or "better"
    step: Step
    night: str
    in_final: bool  # still reported when the whole month is scanned

    @property
    def percent(self) -> float:
        return 100 * (self.step.after / self.step.before - 1)


@dataclass(frozen=True)
class Evidence:
    """What the merged PRs' own same-job runs said about a step's commit range."""

    prs: tuple[int, ...]
    measured: tuple[tuple[int, float], ...]  # (PR, delta %) on this runner and case
    verdict: str  # corroborated, unsupported or unknown
    backing: tuple[int, ...] = ()  # the PRs whose own run showed the step


def thresholds(series: Series, relative: float, noise_k: float, direction: str = "worse") -> Thresholds:
    """flybench's thresholds for the series' unit; 'better' reads the metric as smaller-is-better."""
    base = RegressConfig(relative=relative, step_floor=relative, noise_k=noise_k).thresholds(series.key[1], "",
                                                                                         series.unit)
    return base if direction == "worse" else replace(base, bigger_is_better=not base.bigger_is_better)


def nightly(series: Series, relative: float, noise_k: float, confirm: int = 1) -> list[Alert]:
    """Every alert a nightly scan of `series` would have raised, both directions, first night each.

    `confirm` is how many measured nights at the new level an alert waits for
    (1: the first night the step shows).
    """
    measured = [i for i, p in enumerate(series.points) if p.value is not None]
    index = {p.commit: i for i, p in enumerate(series.points)}
    alerts: list[Alert] = []
    for direction in ("worse", "better"):
        limits = thresholds(series, relative, noise_k, direction)
        final = {(s.last_good, s.first_bad) for s in detect(series.points, limits)}
        seen: set[tuple[str, str]] = set()
        for end in range(3, len(series.points) + 1):
            for step in detect(series.points[:end], limits):
                where = (step.last_good, step.first_bad)
                nights = sum(1 for i in measured if index[step.first_bad] <= i < end)
                if where not in seen and nights >= confirm:
                    seen.add(where)
                    alerts.append(Alert(series.key, direction, step, series.points[end - 1].commit, where in final))
    return alerts


def relative_noise(series: Series) -> float:
    """The detector's noise for the series as a percentage of its median (NaN with too few values)."""
    values = [p.value for p in series.points if p.value is not None and p.value > 0]
    if len(values) < 5:
        return float("nan")
    return 100 * series_noise(series.points, thresholds(series, 0.0, 0.0)) / statistics.median(values)


def aa_band(history: History, key: SeriesKey) -> float:
    """Percent: the largest move of this case between two builds of the same main in one job."""
    moves = [abs(j.delta) for j in history.jobs_of(key) if j.aa and j.delta is not None]
    return max([MIN_BAND, *moves])


def evidence(history: History, alert: Alert) -> Evidence:
    """The same-job runs of the PRs merged in the alert's range, on its runner and case."""
    merged = history.merged_between(alert.step.last_good, alert.step.first_bad)
    prs = tuple(c.merged_pr for c in merged if c.merged_pr is not None)
    jobs = [j for j in history.jobs_of(alert.key) if j.context == "pr" and j.pr in prs and j.delta is not None]
    latest = {j.pr: j for j in sorted(jobs, key=lambda j: j.ts)}  # a PR's last run is what was merged
    measured = tuple((pr, job.delta) for pr, job in sorted(latest.items()) if job.delta is not None)
    band, half = aa_band(history, alert.key), abs(alert.percent) / 2
    sign = 1 if alert.percent > 0 else -1
    backing = tuple(pr for pr, delta in measured if sign * delta > band and sign * delta >= half)
    if backing:
        verdict = "corroborated"
    elif prs and len(measured) == len(prs) and len(merged) == len(prs):
        verdict = "unsupported"  # every commit in the range was a PR, each measured, none moved beyond A/A
    else:
        verdict = "unknown"
    return Evidence(prs, measured, verdict, backing)


def overlaps(a: Alert, b: Alert, history: History) -> bool:
    """Same case, same direction, commit ranges that share a commit."""
    if a.key != b.key or a.direction != b.direction:
        return False
    pos = history.position
    return (pos[a.step.last_good] < pos[b.step.first_bad]) and (pos[b.step.last_good] < pos[a.step.first_bad])


@contextmanager
def fit_once() -> Iterator[None]:
    """Memoise asv's Potts fit: it depends on the values only, so a threshold sweep need not refit them."""
    original = step_detect.detect_steps

    @lru_cache(maxsize=None)
    def cached(y: tuple, w: tuple | None) -> list:
        return original(list(y), None if w is None else list(w))

    def detect_steps(y: list, w: list | None = None) -> list:
        return cached(tuple(y), None if w is None else tuple(w))

    with mock.patch.object(step_detect, "detect_steps", detect_steps):
        yield
