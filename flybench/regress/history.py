"""Regressions in the history of each benchmark series, found the way `asv publish` finds them.

asv's Potts-model step detection (`detect_steps`, which fits with
`solve_potts_approx`) segments each series ordered by commit date, over its
newest `window` runs, and `detect_regressions` picks the upward steps that
explain why the latest value is worse than the best. flybench then keeps a
step only if it clears three bars: the step floor, the absolute threshold,
and `noise_k` times the series' own noise (the robust spread of its
residuals around the fitted steps; for series of one value per run, without
samples, at least their robust run-to-run spread over the whole history;
and never less than half a unit of the last digit the values were written
with), so a noisy benchmark needs a bigger step than a quiet one; and only
once PERSIST runs show the new level. The steps of one machine are then read
together (`flybench.regress.episodes`): a lone series' step is dropped, and
one that moved with the environment is marked so. Deterministic metrics
(register counts, LDS bytes) skip all of this: every change is reported.
An infinite or NaN value counts as not measured: asv's step detection never
returns on an infinite one.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import pandas as pd
from asv import step_detect
from asv._stats import get_weight  # the data-point weight asv publish gives step detection

from flybench.benchmark_names import series_name
from flybench.regress import episodes
from flybench.regress.accepted import Acceptance, accepted_through
from flybench.regress.config import RegressConfig, Thresholds

MAD_TO_SIGMA = 1.4826
"""Scales a median absolute deviation to a standard deviation for normal noise."""
MAX_DECIMALS = 6
"""Values with more decimals than this count as unrounded (resolution 0)."""
PERSIST = 2
"""Measured points a statistical step needs at its new level before it is reported."""
NOISE_POINTS = 100
"""The newest measured points a series' noise is fitted over (`series_noise`)."""


CLOSED = ("recovered", "accepted", "undone")
"""States that no longer count as a regression: an alert's that recovered or was accepted, a change undone later."""


@dataclass(frozen=True)
class Point:
    """One commit of a series; `value` is None where the benchmark failed or was not run."""

    commit: str
    value: float | None
    weight: float | None = None


@dataclass(frozen=True)
class Step:
    """A change between two consecutive measured commits of one series."""

    last_good: str
    first_bad: str
    before: float
    after: float
    noise: float
    confidence: float
    worse: bool

    @property
    def absolute(self) -> float:
        return self.after - self.before

    @property
    def relative(self) -> float:
        return self.absolute / abs(self.before) if self.before else math.inf


@dataclass(frozen=True)
class Regression:
    """A step in one (machine, environment, benchmark, parameters) series, with where it is."""

    subject: str
    machine: str
    env_name: str
    benchmark: str
    params: dict[str, Any]
    unit: str | None
    step: Step
    kind: str  # "step" (statistical), "environment" (a step that moved with the machine) or "change" (deterministic)
    runs: str = ""  # where the first bad commit was measured: "main", "pr", another branch, or "" unknown
    evidence: str = ""  # what the step rests on besides its size: code attribution, a paired run, corroboration
    state: str = ""  # an alert's: "open", "recovered" or "accepted"; a deterministic change's: "undone" or ""

    @property
    def series(self) -> str:
        """`benchmark(param, ...)`: how reports, `flybench bisect` and `flybench accept` name the series."""
        return series_name(self.benchmark, list(self.params.values()))

    @property
    def regressed(self) -> bool:
        """A worse step or change that counts as a regression: not one the environment made, nor an unconfirmed
        one, nor an alert that recovered or was accepted."""
        return self.step.worse and self.kind not in (episodes.ENVIRONMENT, episodes.UNCONFIRMED) \
            and self.state not in CLOSED

    @property
    def context(self) -> str:
        """"main", "pr" or "branch": imported runs say which; flybench's own name their branch (main, or none)."""
        return self.runs if self.runs in ("pr", "branch") else "main" if self.runs in ("main", "") else "branch"


def detect(points: Sequence[Point], thresholds: Thresholds, window: int = 0) -> list[Step]:
    """The steps of one series, oldest first: worse steps only, or every change if deterministic.

    With a `window`, the fit reads only the newest `window` measured points:
    over a long history asv's fit merges a small step into one segment, while
    the alert a step opens (`flybench.regress.alerts`) keeps it once found.
    A statistical step needs PERSIST measured points at its new level: one
    point is what a runner's per-job mode looks like.
    """
    if thresholds.deterministic:
        return changes(points, thresholds)
    history = _finite(points)
    points = _newest(history, window)
    bad = [_badness(p.value, thresholds) for p in points]
    if sum(b is not None for b in bad) < 2:
        return []
    segments = step_detect.detect_steps(bad, [p.weight for p in points])
    if len(segments) < 2:
        return []
    # detect_regressions looks for rises; for bigger-is-better metrics `bad` is 1/value,
    # where a relative drop r of the value is a relative rise r / (1 - r).
    floor = thresholds.step_floor
    rise = floor / (1 - floor) if thresholds.bigger_is_better else floor
    _, _, jumps = step_detect.detect_regressions(segments, threshold=min(rise, 1e9))
    noise = _series_noise(history, points, bad, segments, thresholds)
    steps = []
    for last_good, first_bad, _, _ in jumps or []:
        left = next(s for s in segments if s[1] - 1 == last_good)
        right = next(s for s in segments if s[0] == first_bad)
        rise_bad = right[2] - left[2]
        if rise_bad < thresholds.noise_k * noise or sum(b is not None for b in bad[first_bad:]) < PERSIST:
            continue
        step = Step(
            points[last_good].commit, points[first_bad].commit,
            _value(left[2], thresholds), _value(right[2], thresholds), _value_noise(noise, left[2], thresholds),
            _confidence(rise_bad, noise, _count(bad, left), _count(bad, right)), worse=True,
        )
        if abs(step.relative) >= floor and abs(step.absolute) >= thresholds.absolute:
            steps.append(step)
    return steps


def _newest(points: list[Point], window: int) -> list[Point]:
    """The points from the `window`-th newest measured one on (all of them when window is 0)."""
    measured = [i for i, p in enumerate(points) if p.value is not None]
    if not window or len(measured) <= window:
        return points
    return points[measured[-window]:]


def series_noise(points: Sequence[Point], thresholds: Thresholds) -> float:
    """The noise detect() holds a step against, in the metric's unit near the series' median (0: too few points).

    For series of one value per run there is no other estimate of the spread:
    the larger of the robust spread around the fitted levels and the robust
    run-to-run spread, floored at half a unit of the last printed digit.
    Remembered per series and thresholds: comparing any two commits of a
    machine asks again about the same histories, and each costs a fit. The
    fit reads the newest NOISE_POINTS measured points: the noise the next
    comparison faces is the machine's recent one, and asv's fit grows faster
    than linearly with a series' length (a 4,675-file public history spent
    most of its scan here).
    """
    return _series_noise_of(tuple(_newest(_finite(points), NOISE_POINTS)), thresholds)


@functools.lru_cache(maxsize=4096)
def _series_noise_of(points: tuple[Point, ...], thresholds: Thresholds) -> float:
    points = _finite(points)
    bad = [_badness(p.value, thresholds) for p in points]
    measured = [p.value for p, b in zip(points, bad) if b is not None]
    if len(measured) < 2:
        return 0.0
    segments = step_detect.detect_steps(bad, [p.weight for p in points])
    noise = _series_noise(points, points, bad, segments, thresholds)
    return _value_noise(noise, _badness(statistics.median(measured), thresholds) or 1.0, thresholds)


def find_in(rows: pd.DataFrame, compile_rows: pd.DataFrame, cfg: RegressConfig, benchmark: str | None = None,
            accepted: list[Acceptance] | None = None) -> list[Regression]:
    """Open regressions over a stored history (`queries.history` rows, and `queries.compile_history` rows for
    every compile-metric change), worst first: the store is read by `flybench.regress.stored.find_regressions`.

    `benchmark` is a glob on benchmark names. A step at or before a level
    someone `accepted` for its series is not reported.
    """
    found: list[Regression] = []
    series_per_kernel: Counter[episodes.KernelKey] = Counter()
    for (subj, mach, env, name, params), series in _series(
            rows, ["subject", "machine", "env_name", "benchmark", "params"], "benchmark", benchmark):
        decoded = json.loads(params)
        unit = series[0]["unit"]
        thresholds = cfg.thresholds(name, ", ".join(map(str, decoded.values())), unit)
        points = [Point(r["commit_hash"], r["value"] if r["status"] == "ok" else None, _weight(r)) for r in series]
        kind = "change" if thresholds.deterministic else "step"
        commits = [p.commit for p in points]
        through = accepted_through(accepted or [], subj, mach, name, decoded, commits)
        runs = {r["commit_hash"]: r.get("run_context") or r.get("branch") or "" for r in series}
        series_per_kernel[episodes.kernel_key(subj, mach, env, name, decoded)] += 1
        found += [Regression(subj, mach, env, name, decoded, unit, s, kind, runs[s.first_bad])
                  for s in detect(points, thresholds, cfg.window) if commits.index(s.first_bad) > through]
    found = episodes.read_together(found, series_per_kernel, cfg)
    found += compile_changes(compile_rows, cfg, benchmark)
    return sorted(found, key=lambda r: (not r.regressed, not r.step.worse, -abs(r.step.relative)))


def compile_changes(rows: pd.DataFrame, cfg: RegressConfig, kernel: str | None = None) -> list[Regression]:
    """Every change of a compile-only metric (deterministic: no statistics), per kernel, arch and metric, in
    `queries.compile_history` rows."""
    found = []
    for (subj, mach, name, arch, metric), series in _series(
            rows, ["subject", "machine", "kernel", "arch", "metric"], "kernel", kernel):
        unit = series[0]["unit"]
        thresholds = cfg.thresholds(name, f"{arch}, {metric}", unit)
        points = [Point(r["commit_hash"], r["value"]) for r in series]
        found += deterministic_regressions(subj, mach, "", name, {"arch": arch, "metric": metric}, unit, points,
                                           thresholds)
    return found


SCANNED = ("subject", "machine", "env_name", "benchmark", "params", "kernel", "arch", "metric", "unit",
           "commit_hash", "value", "status", "ci_99_a", "ci_99_b", "run_context", "branch")
"""The columns a scan reads: turning a million rows' samples and source records into dicts cost most of it."""


def _series(frame: pd.DataFrame, key: list[str], name: str,
            name_glob: str | None) -> Iterator[tuple[tuple, list[dict]]]:
    """Rows grouped into series (already in commit-date order) whose `name` column (the benchmark, or the
    compile-only kernel, as Regression.benchmark names them) matches the glob."""
    groups: dict[tuple, list[dict]] = {}
    columns = [c for c in SCANNED if c in frame]  # samples and source records stay behind
    values = [[None if pd.isna(v) else v for v in frame[c].tolist()] for c in columns]
    for row in (dict(zip(columns, cells)) for cells in zip(*values)):
        groups.setdefault(tuple(row[k] for k in key), []).append(row)
    for series_key, rows in groups.items():
        if not name_glob or fnmatchcase(rows[0][name], name_glob):
            yield series_key, rows


def _weight(row: dict[str, Any]) -> float | None:
    """asv publish's weight (2 / CI width), None where asv stored no interval."""
    if row["ci_99_a"] is None or row["ci_99_b"] is None:
        return None
    return get_weight({"ci_99_a": row["ci_99_a"], "ci_99_b": row["ci_99_b"]})


MAGNITUDE = 1e150
"""Values beyond this (or, except 0, below its inverse) are not fitted: their squares overflow or vanish in a
double, and asv's Potts solver then never converges. No timing, rate or count comes near either bound."""


def _finite(points: Sequence[Point]) -> list[Point]:
    """The points with values and weights the detector cannot fit (NaN, infinite, absurdly large or small) as
    not measured (None), as asv's detector needs them."""
    return [Point(p.commit, _finite_or_none(p.value), _finite_or_none(p.weight)) for p in points]


def _finite_or_none(x: float | None) -> float | None:
    fits = x is not None and math.isfinite(x) and (x == 0 or 1 / MAGNITUDE <= abs(x) <= MAGNITUDE)
    return x if fits else None


def changes(points: Sequence[Point], thresholds: Thresholds) -> list[Step]:
    """Every change of a deterministic metric between consecutive measured commits, oldest first."""
    measured = [p for p in _finite(points) if p.value is not None]
    return [
        Step(a.commit, b.commit, a.value, b.value, 0.0, 1.0,
             worse=(b.value < a.value) if thresholds.bigger_is_better else (b.value > a.value))
        for a, b in zip(measured, measured[1:]) if a.value != b.value
    ]


def undone_at(points: Sequence[Point], step: Step, thresholds: Thresholds) -> str | None:
    """The first later commit at which a worse deterministic change is back at its old value or better: a spill
    that a later commit removed is history, not a regression standing today. None while it stands."""
    if not step.worse:
        return None
    measured = [p for p in _finite(points) if p.value is not None]
    commits = [p.commit for p in measured]
    later = measured[commits.index(step.first_bad) + 1:] if step.first_bad in commits else []
    back = (lambda v: v >= step.before) if thresholds.bigger_is_better else (lambda v: v <= step.before)
    return next((p.commit for p in later if back(p.value)), None)


def deterministic_regressions(subject: str, machine: str, env_name: str, benchmark: str, params: dict[str, Any],
                              unit: str | None, points: Sequence[Point], thresholds: Thresholds,
                              runs: dict[str, str] | None = None) -> list[Regression]:
    """Every change of a deterministic series as a report row; a worse one a later commit undid says so."""
    found = []
    for step in changes(points, thresholds):
        back = undone_at(points, step, thresholds)
        found.append(Regression(subject, machine, env_name, benchmark, params, unit, step, "change",
                                (runs or {}).get(step.first_bad, ""), f"undone at {back[:8]}" if back else "",
                                "undone" if back else ""))
    return found


def _badness(value: float | None, thresholds: Thresholds) -> float | None:
    """The value oriented so that up is worse; non-positive rates are not measurements."""
    if value is None:
        return None
    if thresholds.bigger_is_better:
        return 1 / value if value > 0 else None
    return value


def _value(bad: float, thresholds: Thresholds) -> float:
    return 1 / bad if thresholds.bigger_is_better else bad


def _value_noise(noise: float, level: float, thresholds: Thresholds) -> float:
    """Noise in the metric's own unit (for 1/x, d(1/b) = db / b^2 near the level)."""
    return noise / level**2 if thresholds.bigger_is_better else noise


def _series_noise(history: Sequence[Point], points: Sequence[Point], bad: list[float | None], segments: list[tuple],
                  thresholds: Thresholds) -> float:
    """The noise a step must beat, in the detector's space (see series_noise): the residuals of the fitted
    `points`; the rounding and, without weights, the run-to-run spread of the whole `history`."""
    noise = max(_noise(bad, segments), _rounding_noise([p.value for p in history], thresholds))
    if all(p.weight is None for p in history):
        noise = max(noise, _jitter([_badness(p.value, thresholds) for p in history]))
    return noise


def _jitter(bad: list[float | None]) -> float:
    """Robust run-to-run spread of a series with one value per run: scaled MAD of successive differences / sqrt 2.

    Without samples, residuals around the fitted levels understate the noise:
    the Potts fit explains a run-to-run jump as a step of its own and leaves
    little residual. Successive differences see every jump, and the few that
    straddle a real step barely move their median.
    """
    measured = [b for b in bad if b is not None]
    jumps = [abs(b - a) for a, b in zip(measured, measured[1:])]
    return MAD_TO_SIGMA * statistics.median(jumps) / math.sqrt(2) if jumps else 0.0


def _noise(bad: list[float | None], segments: list[tuple]) -> float:
    """Robust spread (scaled MAD) of the residuals around the fitted step levels."""
    residuals = [bad[i] - level for left, right, level, _, _ in segments
                 for i in range(left, right) if bad[i] is not None]
    return MAD_TO_SIGMA * statistics.median(abs(r) for r in residuals) if residuals else 0.0


def resolution(values: Sequence[float | None]) -> float:
    """The unit the values were written in: 0.1 when none has more than one decimal, 0 for full-precision floats.

    Series of one number per run, such as FlyDSL's CI tables (printed with 1 to 3
    decimals, no samples), move in whole units of the last digit: two runs of the
    same code differ by one unit or not at all, and the residuals' MAD is often 0.
    """
    measured = [v for v in values if v is not None and math.isfinite(v)]
    for decimals in range(MAX_DECIMALS + 1):
        scale = 10**decimals
        if measured and all(_whole(v * scale) for v in measured):
            return 1 / scale
    return 0.0


def _whole(x: float) -> bool:
    """Whether `x` is a whole number; a product that overflowed came from a value far above 2**53, which is one."""
    return not math.isfinite(x) or abs(x - round(x)) <= 1e-9 * max(1.0, abs(x))


def _rounding_noise(values: Sequence[float | None], thresholds: Thresholds) -> float:
    """Half a unit of the last written digit (a rounded value is off by up to that), in the detector's space.

    It is a floor under the series' noise, so a value flipping between two
    neighbouring printed values is never a step with certainty 1.
    """
    half = resolution(values) / 2
    if not half or not thresholds.bigger_is_better:
        return half
    positive = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return half / statistics.median(positive) ** 2 if positive else 0.0  # d(1/v) = dv / v^2 near the typical value


def _count(bad: list[float | None], segment: tuple) -> int:
    return sum(1 for i in range(segment[0], segment[1]) if bad[i] is not None)


def _confidence(rise: float, noise: float, n_before: int, n_after: int) -> float:
    """1 - p of a two-sample z test of the two levels, with the series' noise as sigma."""
    if noise == 0:
        return 1.0
    z = rise / (noise * math.sqrt(1 / n_before + 1 / n_after))
    return math.erf(z / math.sqrt(2))
