"""A case's run-to-run noise on one machine, and the smallest change a comparison can call there.

A fixed absolute floor hides a 10% slowdown of a 67 us decode kernel and
lets a noisy multi-millisecond case through, so each case's floor comes
from its own noise, measured one of two ways (the first that exists):

- rounds: a pull request's job measures base and head in several
  interleaved rounds (`flybench run --append-samples`), and the store keeps
  each round's median (`results.rounds`); the robust spread of the rounds'
  medians around their side's median is the noise of one round;
- history: the series' nightly values on the machine (at least
  `MIN_HISTORY` commits), whose robust spread `regress.history.series_noise`
  finds the way step detection does.

The minimum detectable change is then the larger of the configured relative
threshold, a small fixed absolute minimum (`FIXED_MINIMUM`) over the base
value, and `noise_k` standard errors of the difference of the two sides'
means. With no noise known (one round, no history) it is the configured
relative and absolute thresholds, as before, and the row says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from flybench.regress.config import Thresholds
from flybench.regress.history import MAD_TO_SIGMA, Point, series_noise
from flybench.store import queries

MIN_ROUNDS = 2
"""Rounds per side below which they say nothing about run-to-run noise."""
MIN_HISTORY = 5
"""Measured commits of a series below which its history says nothing about its noise."""


@dataclass(frozen=True)
class Noise:
    """One case's noise, relative to its level, and where it came from."""

    relative: float  # robust standard deviation of one run's value, over the level
    source: str  # "rounds" or "history"
    runs: tuple[int, int]  # runs whose mean each side's value is: rounds per side, or (1, 1)


def from_rounds(base: Sequence[float] | None, head: Sequence[float] | None) -> Noise | None:
    """The spread of each side's round medians around that side's median, pooled."""
    sides = [[v for v in side or () if v is not None and math.isfinite(v) and v > 0] for side in (base, head)]
    if any(len(side) < MIN_ROUNDS for side in sides):
        return None
    deviations = [abs(v / statistics.median(side) - 1) for side in sides for v in side]
    return Noise(MAD_TO_SIGMA * statistics.median(deviations), "rounds", (len(sides[0]), len(sides[1])))


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
    return Noise(absolute / level, "history", (1, 1))


def histories(db_path: str | Path, machine: str, subject: str | None) -> dict[tuple[str, str, str], list[Point]]:
    """Every series' values over the machine's stored history, oldest commit first, keyed by (environment,
    benchmark, params as stored): the points `from_history` takes."""
    frame = queries.series_values(db_path, machine, subject)
    values = frame["value"].where(frame["status"] == "ok").tolist()  # NULL and a failed row's value: NaN
    series: dict[tuple[str, str, str], list[Point]] = {}
    for env, name, params, commit, value in zip(frame["env_name"], frame["benchmark"], frame["params"],
                                                frame["commit_hash"], values):  # columns, not records: 3x faster
        series.setdefault((env, name, params), []).append(Point(commit, None if math.isnan(value) else value))
    return series


FIXED_MINIMUM = {"seconds": 1e-6}
"""Per unit, the least absolute change a case with known noise is ever called for: 1 us, a few launch gaps."""


def detectable(noise: Noise | None, base: float, unit: str | None, thresholds: Thresholds) -> float:
    """The smallest relative change of `base` a comparison calls a change, at this noise and these thresholds.

    Without a noise estimate the configured absolute floor stands in for it
    (launch-bound cases of about 10 us move by 20-30% between two runs of the
    same code on the H200).
    """
    absolute = thresholds.absolute if noise is None else FIXED_MINIMUM.get(unit or "", 0.0)
    floor = max(thresholds.relative, absolute / abs(base) if base else 0.0)
    if noise is None:
        return floor
    n_base, n_head = noise.runs
    return max(floor, thresholds.noise_k * noise.relative * math.sqrt(1 / n_base + 1 / n_head))
