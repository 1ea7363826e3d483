"""A case's process-to-process noise over its history on one machine, and the least absolute change ever called.

Where a comparison has too few rounds a side to show a case's own noise
between measuring processes (two nightly commits, each one process), the
series' history on the machine stands in: its values over at least
`MIN_HISTORY` commits, whose robust spread `regress.history.series_noise`
finds the way step detection does. Each nightly value is one process, so
that spread is the noise of one round. The rules that use it are
`flybench.regress.verdict`'s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from flybench.regress.config import Thresholds
from flybench.regress.history import Point, series_noise

MIN_HISTORY = 5
"""Measured commits of a series below which its history says nothing about its noise."""


@dataclass(frozen=True)
class Noise:
    """One case's noise, relative to its level, and where it came from."""

    relative: float  # robust standard deviation of one run's value, over the level
    source: str  # "history"


def from_history(points: Sequence[Point], thresholds: Thresholds) -> Noise | None:
    """The series' own run-to-run noise over its history on this machine."""
    level = history_level(points)
    return None if level is None else of_history(series_noise(points, thresholds), level)


def history_level(points: Sequence[Point]) -> float | None:
    """The median of the series' measured values, which its history noise is relative to (None: too few)."""
    values = [p.value for p in points if p.value is not None and math.isfinite(p.value) and p.value > 0]
    return statistics.median(values) if len(values) >= MIN_HISTORY else None


def of_history(absolute: float, level: float) -> Noise:
    """A history's noise from `series_noise`'s answer and `history_level`'s (kept apart in the stored scan)."""
    return Noise(absolute / level, "history")


def histories(frame: pd.DataFrame) -> dict[tuple[str, str, str], list[Point]]:
    """Every series' values over a machine's stored history (`queries.series_values` rows), oldest commit first,
    keyed by (environment, benchmark, params as stored): the points `from_history` takes."""
    values = frame["value"].where(frame["status"] == "ok").tolist()  # NULL and a failed row's value: NaN
    series: dict[tuple[str, str, str], list[Point]] = {}
    for env, name, params, commit, value in zip(frame["env_name"], frame["benchmark"], frame["params"],
                                                frame["commit_hash"], values):  # columns, not records: 3x faster
        series.setdefault((env, name, params), []).append(Point(commit, None if math.isnan(value) else value))
    return series


FIXED_MINIMUM = {"seconds": 1e-6}
"""Per unit, the least absolute change a comparison ever calls: 1 us, a few launch gaps."""
