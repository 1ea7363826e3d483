"""The history scan: a machine's stored history replayed commit by commit, so its alerts depend on nothing else.

A nightly that ingests one run at a time and an import of a month in one go
must open the same alerts. So the scan does not fit "the newest runs": it
walks the machine's commits oldest first and, at each one, judges what a
nightly that had just ingested that commit would judge, from the rows up to
it. The alerts it leaves (open, recovered, with every change of state) are a
function of the stored rows, the code attribution and the thresholds.

At each commit, each series that measured it is judged at the boundaries
whose new level has PERSIST to AFTER runs so far:

- **Level against scatter.** The median of up to AFTER runs from the
  boundary against the median of up to LEVEL runs before it must be worse by
  the step floor and by `noise_k` times the series' run-to-run scatter
  (robust spread of successive differences over its newest SCATTER_RUNS
  runs, floored at half a unit of the last printed digit), and every run
  after the boundary must be at least half that far out (one run is what a
  runner's per-job mode looks like), and the run just before the boundary
  nearer the old level than the new (else the step came earlier, and this
  boundary's old level straddles it). A level the series already visited in
  the MODE_RUNS runs before (VISITS of them nearer it) is a bimodal series
  flipping, not a step. And a step must exceed DIGITS halves of the last
  printed digit.
- **Net of the job.** One runner's job moves many series together (FlyDSL's
  MI355X switches between speed modes of 2-5% per job, by op family). Each
  job's shift per (environment, workload) is the median move of the series
  of that workload whose code the commit range did not touch, when at least
  WITNESSES of them measured it; levels are judged on values net of it.
- **Code attribution** (`code_changes`, `code_touches`, written by an
  import with a clone). A step over a range that changed something the
  series runs is a code step: an alert. A range whose commits are all known
  and none changed what the series runs is the environment's: listed, never
  an alert. A merged pull request's own same-job comparison with main
  (`vs_main`) showing the series worse by the step floor is named as a
  witness either way (paired evidence); alone it opens nothing: a pull
  request that changed nothing the series runs measured the runner. Nor does
  the compiler count (`flybench.importers.flydsl_ci.code`). A range the store has no commits for is judged without
  attribution, by the older rules of `episodes.read_together` (its kernel's
  other series stepping with it, the environment's when many workloads or a
  control provider stepped at that commit), and says so.

An alert opens at the first commit its step is seen, and closes when the
newest RECOVERY_POINTS net values after its first bad commit all lie nearer
its old level than its new one; a step found again at the levels of a
recovered alert reopens it. Each alert and environment step says which
evidence it rests on. Deterministic metrics are not judged: every change is
listed, a worse one that a later commit undid as such
(`history.deterministic_regressions`). A compile's duration is not judged at
all: it is the compiling machine's noise.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from flybench.benchmark_names import is_compile_duration, workload_of
from flybench.regress import alerts, episodes
from flybench.regress.config import RegressConfig, Thresholds
from flybench.regress.history import PERSIST, Point, Regression, Step, deterministic_regressions, resolution
from flybench.store import queries

LEVEL = 4
"""Measured runs before a boundary whose median is the old level."""
AFTER = 4
"""The most runs after a boundary whose median is the new level: a step is judged within AFTER runs of it."""
MIN_BEFORE = 3
"""Measured runs a series needs before a boundary to have a level there."""
JUDGED_RUNS = MIN_BEFORE + PERSIST
"""The shortest series that can show a step: below it a history is too short to judge."""
SCATTER_RUNS = 30
"""The newest runs a series' scatter is taken over: the noise the next judgement faces is the recent one."""
WITNESSES = 3
"""Series of untouched code a job's shift is estimated from, at least; with fewer the shift is taken as 0."""
MODE_RUNS = 10
"""Runs before a step's old level that are searched for its new level (`_visited`)."""
VISITS = 2
"""Runs among them at the new level that make the series bimodal there, not stepping."""
DIGITS = 3
"""A step must exceed this many halves of the last printed digit: values printed to one decimal, such as
FlyDSL's 1.6 TFLOPS, move by one unit of the digit between runs of the same code."""
MAD_TO_SIGMA = 1.4826

SeriesKey = tuple[str, str, str]
"""(environment, benchmark, canonical params JSON): one series of a machine."""


@dataclass(frozen=True)
class Verdict:
    """What the commits between two measured runs say about a series' step."""

    kind: str  # "code", "untouched" or "unknown"
    evidence: str


class Attribution:
    """The subject's code attribution and paired runs as the store holds them (`queries.code_changes` etc.)."""

    def __init__(self, changes: pd.DataFrame, touches: pd.DataFrame, paired: pd.DataFrame) -> None:
        self._order = list(changes["hash"])
        self._position = {h: i for i, h in enumerate(self._order)}
        self._pr = {h: (None if pd.isna(pr) else int(pr)) for h, pr in zip(changes["hash"], changes["merged_pr"])}
        self._touches: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(dict)
        for benchmark, params, commit, files in zip(touches["benchmark"], touches["params"], touches["hash"],
                                                    touches["files"]):
            self._touches[benchmark, alerts.canonical(params)][commit] = list(files)
        self._paired = {(b, alerts.canonical(p), int(pr)): d for b, p, pr, d in
                        zip(paired["benchmark"], paired["params"], paired["pr"], paired["delta_pct"])}

    @classmethod
    def stored(cls, db_path: str | Path, subject: str, machine: str) -> Attribution:
        return cls(queries.code_changes(db_path, subject), queries.code_touches(db_path, subject),
                   queries.paired_changes(db_path, subject, machine))

    def commits(self, last_good: str, first_bad: str) -> list[str] | None:
        """Main's commits after `last_good` up to `first_bad`; None when the store does not know both."""
        if last_good not in self._position or first_bad not in self._position:
            return None
        return self._order[self._position[last_good] + 1:self._position[first_bad] + 1]

    def touched(self, benchmark: str, params: str, commit: str) -> bool:
        return commit in self._touches.get((benchmark, params), {})

    def judge(self, benchmark: str, params: str, last_good: str, first_bad: str, thresholds: Thresholds) -> Verdict:
        """Code, untouched or unknown, with the evidence in words (module docstring)."""
        between = self.commits(last_good, first_bad)
        if between is None:
            return Verdict("unknown", "no code attribution: the range's commits are not in the store")
        touches = self._touches.get((benchmark, params), {})
        hit = [c for c in between if c in touches]
        paired = self._worse_in_pair(benchmark, params, between, thresholds)
        if hit:
            files = sorted({f for c in hit for f in touches[c]})
            text = f"code: {self._names(hit)} changed what it runs ({_some(files, 3)})"
            return Verdict("code", "; ".join([text, *paired]))
        return Verdict("untouched", "; ".join([f"environment: none of the {len(between)} commit(s) in the range "
                                               f"({self._names(between)}) changed what it runs", *paired]))

    def _worse_in_pair(self, benchmark: str, params: str, between: list[str], thresholds: Thresholds) -> list[str]:
        """A pull request merged in the range whose own CI job measured the series worse than main there."""
        found = []
        for commit in between:
            pr = self._pr.get(commit)
            delta = self._paired.get((benchmark, params, pr)) if pr is not None else None
            if delta is None or not math.isfinite(delta):
                continue
            worse = -delta if thresholds.bigger_is_better else delta
            if worse >= 100 * thresholds.step_floor:
                found.append(f"paired: #{pr}'s own CI job measured it {delta:+.1f}% against main")
        return found

    def _names(self, commits: list[str]) -> str:
        names = [f"#{self._pr[c]}" if self._pr.get(c) is not None else c[:8] for c in commits]
        return _some(names, 4)


@dataclass
class _Series:
    """One series' measured runs so far, with values net of each job's shift, in the detector's space (log of the
    value, oriented so that up is worse)."""

    key: SeriesKey
    params: dict
    params_text: str
    unit: str | None
    thresholds: Thresholds
    group: tuple[str, str]
    half_digit: float  # half a unit of the last printed digit, relative
    commits: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    nets: list[float] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


@dataclass
class Scan:
    """What replaying one machine's history leaves: its alerts, every change of their state, and the steps that
    are not alerts (the environment's, and every change of a deterministic metric)."""

    alerts: list[alerts.Alert]
    events: list[alerts.Event]
    steps: list[Regression]


def replay(subject: str, machine: str, frame: pd.DataFrame, attribution: Attribution,
           cfg: RegressConfig) -> Scan:
    """The machine's history (`queries.history` rows of one subject and machine) replayed commit by commit."""
    series, points, deterministic = _read(subject, machine, frame, cfg)
    state = _State(subject, machine, cfg)
    for commit in _commit_order(frame):
        here = points.get(commit, [])
        _advance_nets(here, commit, attribution)
        candidates = []
        for s in {id(p[0]): p[0] for p in here}.values():
            found = _judge(s, attribution)
            if found is not None:
                candidates.append((s, *found))
        state.take(candidates, series)
        for s, *_ in here:
            state.recover(s)
    return Scan(state.alerts, state.events, [*state.environment, *deterministic])


def _read(subject: str, machine: str, frame: pd.DataFrame, cfg: RegressConfig
          ) -> tuple[dict[SeriesKey, _Series], dict[str, list[tuple[_Series, float, float, str]]], list[Regression]]:
    """The machine's statistical series, each measured point by commit, and every deterministic change."""
    series: dict[SeriesKey, _Series] = {}
    points: dict[str, list] = defaultdict(list)
    deterministic: list[Regression] = []
    columns = [frame[c].tolist() if c in frame else [None] * len(frame) for c in _Row._fields]
    grouped: dict[tuple, list] = defaultdict(list)
    canonical: dict[str, str] = {}  # a machine's series share a few params texts: one JSON round trip each
    for row in map(_Row._make, zip(*columns)):
        params = canonical.get(row.params) or canonical.setdefault(row.params, alerts.canonical(row.params))
        grouped[row.env_name, row.benchmark, params].append(row)
    for (env, benchmark, params), rows_of in grouped.items():
        decoded = json.loads(rows_of[0].params)  # as stored: the order of its names is the series' name
        unit = rows_of[0].unit
        thresholds = cfg.thresholds(benchmark, ", ".join(map(str, decoded.values())), unit)
        if thresholds.deterministic:
            measured = [Point(r.commit_hash, r.value if r.status == "ok" else None) for r in rows_of]
            deterministic += deterministic_regressions(
                subject, machine, env, benchmark, decoded, unit, measured, thresholds,
                {r.commit_hash: _text(r.run_context) or _text(r.branch) for r in rows_of})
            continue
        if is_compile_duration(benchmark):
            continue  # how long a compile took is the compiling machine's noise, not a kernel's regression
        values = [r.value for r in rows_of if r.status == "ok" and _fits(r.value)]
        level = statistics.median(values) if values else 1.0
        s = _Series((env, benchmark, params), decoded, params, unit, thresholds, (env, workload_of(benchmark)),
                    resolution(values) / 2 / abs(level) if level else 0.0)
        series[s.key] = s
        for r in rows_of:
            if r.status == "ok" and _fits(r.value):
                bad = -math.log(r.value) if thresholds.bigger_is_better else math.log(r.value)
                points[r.commit_hash].append((s, bad, r.value, _text(r.run_context) or _text(r.branch)))
    return series, points, deterministic


class _Row(NamedTuple):
    """The columns of a stored row the scan reads."""

    env_name: str
    benchmark: str
    params: str
    unit: str | None
    commit_hash: str
    value: float | None
    status: str
    run_context: str | None
    branch: str | None


def _fits(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _text(value: object) -> str:
    """A text cell, '' where the store has NULL (pandas gives None or NaN)."""
    return value if isinstance(value, str) else ""


def _commit_order(frame: pd.DataFrame) -> list[str]:
    """The machine's commits in the store's order (commit date, then hash, as `queries.history` orders series)."""
    if frame.empty:
        return []
    dates = frame[["commit_hash", "commit_date"]].drop_duplicates("commit_hash")
    dates = dates.assign(missing=dates["commit_date"].isna()).sort_values(["missing", "commit_date", "commit_hash"])
    return list(dates["commit_hash"])


def _advance_nets(here: list, commit: str, attribution: Attribution) -> None:
    """Each point of `commit` appended to its series, net of its job's shift per (environment, workload): the
    median move, from their level, of the workload's series whose code did not change since the oldest of the runs
    their level is the median of (a code step inside that window would pass for the job's)."""
    moves: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s, bad, _, _ in here:
        if len(s.nets) >= 2:  # a witness: nothing it runs changed since the oldest run of its level
            between = attribution.commits(s.commits[-LEVEL:][0], commit)
            if between is not None and not any(attribution.touched(s.key[1], s.params_text, c) for c in between):
                moves[s.group].append(bad - statistics.median(s.nets[-LEVEL:]))
    shift = {g: statistics.median(m) if len(m) >= WITNESSES else 0.0 for g, m in moves.items()}
    for s, bad, value, runs in here:
        s.commits.append(commit)
        s.values.append(value)
        s.nets.append(bad - shift.get(s.group, 0.0))
        s.runs.append(runs)


def _scatter(s: _Series) -> float:
    """Robust run-to-run spread of the series' newest net values (scaled MAD of successive differences / sqrt 2),
    at least half a unit of the last printed digit."""
    nets = s.nets[-SCATTER_RUNS:]
    jumps = [b - a for a, b in zip(nets, nets[1:])]
    if len(jumps) < 2:
        return s.half_digit
    center = statistics.median(jumps)
    return max(MAD_TO_SIGMA * statistics.median(abs(j - center) for j in jumps) / math.sqrt(2), s.half_digit)


def _visited(before: list[float], old: float, new: float) -> bool:
    """Whether the series already sat at the new level before the boundary: VISITS of its last MODE_RUNS runs
    before the old level's window lie nearer the new level than the old. A bimodal series (a runner's modes, a
    kernel's two tunings) flips between levels it has; a step reaches a level it has not had."""
    earlier = before[-(MODE_RUNS + LEVEL):-LEVEL]
    return sum(abs(x - new) < abs(x - old) for x in earlier) >= VISITS


def _judge(s: _Series, attribution: Attribution) -> tuple[Step, float, float, Verdict] | None:
    """The series' worst step among the boundaries with PERSIST to AFTER runs after them, if one passes: the step,
    its old and new net levels, and what the range's commits say."""
    t = s.thresholds
    floor = -math.log(1 - t.step_floor) if t.bigger_is_better else math.log(1 + t.step_floor)
    n = len(s.nets)
    if n < MIN_BEFORE + PERSIST or min(s.nets[-PERSIST:]) - min(s.nets[max(0, n - AFTER - LEVEL):n - PERSIST]) \
            < floor / 2:
        return None  # no boundary's old level can lie half the floor below its newest runs: nothing to judge
    noise = _scatter(s)
    needed = max(floor, t.noise_k * noise, DIGITS * s.half_digit)
    best = None
    for after in range(PERSIST, AFTER + 1):
        i = n - after
        if i < MIN_BEFORE:
            break
        window = s.nets[max(0, i - LEVEL):i]
        old, new = statistics.median(window), statistics.median(s.nets[i:])
        rise = new - old
        if rise < needed or min(s.nets[i:]) - old < needed / 2 or _visited(s.nets[:i], old, new) \
                or window[-1] - old > new - window[-1]:  # the run before the boundary is at the old level
            continue
        before = statistics.median(s.values[max(0, i - LEVEL):i])
        after_value = statistics.median(s.values[i:])
        if abs(after_value - before) < t.absolute:
            continue
        if best is None or rise > best[0] + 1e-12:
            best = (rise, i, old, new, before, after_value)
    if best is None:
        return None
    rise, i, old, new, before, after_value = best
    z = rise / (noise * math.sqrt(1 / min(LEVEL, i) + 1 / (n - i))) if noise else math.inf
    step = Step(s.commits[i - 1], s.commits[i], before, after_value, noise * abs(before),
                math.erf(z / math.sqrt(2)), worse=True)
    return step, old, new, attribution.judge(s.key[1], s.params_text, step.last_good, step.first_bad, t)


class _State:
    """The alerts as the replay goes (`alerts.Alert`), with each one's old and new net level for recovery, and
    the environment's steps; both indexed by series, which every commit asks about."""

    def __init__(self, subject: str, machine: str, cfg: RegressConfig) -> None:
        self.subject, self.machine, self.cfg = subject, machine, cfg
        self.alerts: list[alerts.Alert] = []
        self.levels: list[tuple[float, float]] = []
        self.events: list[alerts.Event] = []
        self.environment: list[Regression] = []
        self._alerts_of: dict[SeriesKey, list[int]] = defaultdict(list)
        self._environment_of: dict[SeriesKey, list[Regression]] = defaultdict(list)
        self._series_per_kernel: dict[episodes.KernelKey, int] = {}

    def regression(self, s: _Series, step: Step, kind: str, evidence: str) -> Regression:
        return Regression(self.subject, self.machine, s.key[0], s.key[1], s.params, s.unit, step, kind,
                          s.runs[s.commits.index(step.first_bad)], evidence)

    def take(self, candidates: list[tuple[_Series, Step, float, float, Verdict]],
             series: dict[SeriesKey, _Series]) -> None:
        """One commit's steps: code steps become alerts, untouched ones environment steps, and steps
        without attribution are read together (`episodes.read_together`) first."""
        unknown = [(s, self.regression(s, step, "step", v.evidence), old, new)
                   for s, step, old, new, v in candidates if v.kind == "unknown"]
        if unknown:
            read = {alerts.series_key(r): r for r in episodes.read_together([r for _, r, _, _ in unknown],
                                                                            self._kernels(series), self.cfg)}
            for s, r, old, new in unknown:
                judged = read.get(alerts.series_key(r))
                if judged is None:
                    continue
                if judged.kind == episodes.ENVIRONMENT:
                    self._environment(s, replace(judged, evidence=r.evidence + "; moved with the environment"))
                else:
                    self._alert(judged, old, new, s)
        for s, step, old, new, v in candidates:
            if v.kind == "untouched":
                self._environment(s, self.regression(s, step, episodes.ENVIRONMENT, v.evidence))
            elif v.kind == "code":
                self._alert(self.regression(s, step, "step", v.evidence), old, new, s)

    def _kernels(self, series: dict[SeriesKey, _Series]) -> dict[episodes.KernelKey, int]:
        if not self._series_per_kernel:
            for s in series.values():
                key = episodes.kernel_key(self.subject, self.machine, s.key[0], s.key[1], s.params)
                self._series_per_kernel[key] = self._series_per_kernel.get(key, 0) + 1
        return self._series_per_kernel

    def _environment(self, s: _Series, r: Regression) -> None:
        """List the environment's step once, and not at all where it is an alert's step seen from a later run."""
        if not any(alerts.same_step(e, r) for e in self._environment_of[s.key]) \
                and not any(alerts.same_step(self.alerts[i].regression, r) for i in self._alerts_of[s.key]):
            self._environment_of[s.key].append(r)
            self.environment.append(r)

    def _alert(self, r: Regression, old: float, new: float, s: _Series) -> None:
        same = [i for i in self._alerts_of[s.key] if alerts.same_step(self.alerts[i].regression, r)]
        through = s.commits[-1]
        if any(self.alerts[i].status == alerts.OPEN for i in same):
            return
        if same:
            i = same[-1]
            self.alerts[i] = replace(self.alerts[i], status=alerts.OPEN, closed_by=None, flips=self.alerts[i].flips + 1)
            self.events.append(alerts.Event(self.alerts[i], "reopened", through, f"flip {self.alerts[i].flips}"))
            return
        self._alerts_of[s.key].append(len(self.alerts))
        self.alerts.append(alerts.Alert(r, alerts.OPEN, through))
        self.levels.append((old, new))
        self.events.append(alerts.Event(self.alerts[-1], "opened", through, r.evidence))

    def recover(self, s: _Series) -> None:
        """Close the series' open alerts whose newest RECOVERY_POINTS net values lie nearer the old level."""
        for i in self._alerts_of.get(s.key, ()):
            a = self.alerts[i]
            if a.status != alerts.OPEN or a.regression.step.first_bad not in s.commits:
                continue
            old, new = self.levels[i]
            after = s.nets[s.commits.index(a.regression.step.first_bad):]
            back = 0
            while back < len(after) and abs(after[-1 - back] - old) < abs(after[-1 - back] - new):
                back += 1
            if back >= alerts.RECOVERY_POINTS and len(after) > alerts.RECOVERY_POINTS:
                closed = s.commits[len(s.commits) - back]
                self.alerts[i] = replace(a, status=alerts.RECOVERED, closed_by=closed)
                self.events.append(alerts.Event(self.alerts[i], "recovered", s.commits[-1],
                                                f"back at the old level at {closed}"))


def _some(names: Sequence[str], most: int) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
