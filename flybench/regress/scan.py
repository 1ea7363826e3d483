"""The history scan: a machine's stored history replayed commit by commit, so its alerts depend on nothing else.

A nightly that ingests one run at a time and an import of a month in one go
must open the same alerts. So the scan does not fit "the newest runs": it
walks the machine's commits oldest first (`Replay`, a fold that can be
stored and resumed) and, at each one, judges what a nightly that had just
ingested that commit would judge, from the rows up to it and nothing later.
The alerts it leaves (open, recovered, with every change of state) are a
function of the stored rows, the code attribution and the thresholds.

At each commit, each series that measured it is judged at the boundaries
whose new level has PERSIST to AFTER runs so far:

- **Level against scatter.** The median of up to AFTER runs from the
  boundary against the median of up to LEVEL runs before it, less how far
  the series' own trend carries it (`_drift`), must be worse by the step
  floor and by `noise_k` times the series' run-to-run scatter (`_scatter`;
  a series of YOUNG runs or fewer is held to its workload's typical
  scatter, and one alone is not judged yet), every run after the boundary
  at least half that far out, the run just before the boundary at the old
  level; a step spread over two runs is judged as one over both ranges. A
  level the series already visited in the MODE_RUNS runs before is a
  bimodal series flipping, unless the range changed its code. And a step
  must exceed DIGITS halves of the last printed digit.
- **Net of the job.** One runner's job moves many series together (FlyDSL's
  MI355X switches between speed modes of 2-5% per job, by op family). Each
  job's shift per (environment, workload) is the median move of the series
  of that workload whose code the commit range did not change, when at
  least WITNESSES of them measured it; levels are judged on values net of it.
- **Code attribution** (`Attribution`): a range where the machine code of
  the series' kernels changed is a code step whatever file changed; where
  it is identical and nothing else the series runs changed, the
  environment's; where no machine code can be had, the files decide, the
  compiler's counted as code (kind COMPILER). A merged pull request's own
  same-job comparison with main (`vs_main`) showing the series worse is
  named as a witness; alone it opens nothing. A range the store has no
  commits for is judged by the older rules of `episodes.read_together` and
  says so.

An alert opens at the first commit its step is seen; while it is open a
further step of its series worsens it rather than opening another (unless
the machine code changed again). It closes when the newest RECOVERY_POINTS
net values after its first bad commit all lie nearer its old level than its
new one; a step found again at the levels of a recovered alert reopens it.
Each alert and environment step says which evidence it rests on.
Deterministic metrics are not judged: every change is listed, a worse one
that a later commit undid as such (`history.deterministic_regressions`). A
compile's duration is not judged at all: it is the compiling machine's noise.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import pandas as pd

from flybench.benchmark_names import is_compile_duration, workload_of
from scipy.stats import chi2

from flybench.compile.affected import flydsl_shared
from flybench.regress import alerts, episodes
from flybench.regress.config import RegressConfig, Thresholds
from flybench.regress.history import PERSIST, Point, Regression, Step, deterministic_regressions, resolution

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
YOUNG = 10
"""Runs of a series up to which its own scatter is not trusted alone (`Replay._typical`)."""
KEPT = LEVEL + AFTER + MODE_RUNS + SCATTER_RUNS
"""Runs of a series a stored replay keeps (besides those of its open alerts): more than any judgement reads."""
TREND_Z = 2.0
"""Standard errors of its slope by which the runs before a boundary must slope for their trend to be one (`_drift`)."""
SEEN = 5
"""Kernels compiled at both ends of a compiler-only range, all identical, that say the change emitted nothing new."""
PAIRS = 5
"""A series' other paired A/Bs needed to say how its paired runs scatter; with fewer a pair separates nothing."""
MAD_TO_SIGMA = 1.4826
CONFIDENCE = 0.8
"""How sure the scatter a step must beat is not an underestimate (`_few_runs`)."""

SeriesKey = tuple[str, str, str]
"""(environment, benchmark, canonical params JSON): one series of a machine."""


class Verdict(NamedTuple):
    """What the commits between two measured runs say about a series' step.

    `kind` is "code", COMPILER, "untouched", "unknown" or UNCONFIRMED (`_confirmed`); `basis` the evidence it rests on: "machine code" (the series'
    kernels compiled at both ends), "files" (which files the range changed, the compiler's counted as code) or
    "none" (the store has no commits for the range)."""

    kind: str
    evidence: str
    basis: str = "files"


MACHINE_CODE, FILES, NO_ATTRIBUTION = "machine code", "files", "none"
UNCONFIRMED = episodes.UNCONFIRMED
COMPILER = "compiler"
"""The kind of a range that changed the compiler and nothing else the series runs, where no machine code says
what the compiler emitted: an alert, but one the series' modes and its job's shift can still explain (a compiler
change reaches every kernel on paper, and FlyDSL merges one most days)."""


class Attribution:
    """The subject's code attribution as the store holds it: main's commits and the files each changed
    (`queries.code_changes`), the commits that changed what each series runs (`code_touches`), each pull
    request's same-job A/B (`paired_changes`), and the machine code of the series' kernels at measured commits
    (`machine_code`, `series_kernels`).

    A series is judged on the machine code of its own runner's target only (`arch`, the machine's architecture):
    a benchmark and its parameters name the same series on every runner, and the MI355X's step is not the gfx942
    code's. Without `arch` (a machine whose architecture the store does not know) every target's code is read,
    and each evidence names the target of the code it cites."""

    def __init__(self, changes: pd.DataFrame, touches: pd.DataFrame, paired: pd.DataFrame,
                 machine_code: pd.DataFrame | None = None, series_kernels: pd.DataFrame | None = None,
                 arch: str | None = None, main_pairs: pd.DataFrame | None = None) -> None:
        self.arch = arch
        self._main_pairs: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
        if main_pairs is not None:
            for benchmark, params, commit, delta in zip(main_pairs["benchmark"], main_pairs["params"],
                                                        main_pairs["hash"], main_pairs["delta_pct"]):
                self._main_pairs[benchmark, alerts.canonical(params)][commit] = delta
        self._order = list(changes["hash"])
        self._position = {h: i for i, h in enumerate(self._order)}
        self._pr = {h: (None if pd.isna(pr) else int(pr)) for h, pr in zip(changes["hash"], changes["merged_pr"])}
        files = changes["files"] if "files" in changes else [()] * len(changes)
        self._compiler = {h: sorted(f for f in fs if flydsl_shared(f)) for h, fs in zip(changes["hash"], files)
                          if any(flydsl_shared(f) for f in fs)}
        self._touches: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(dict)
        for benchmark, params, commit, changed in zip(touches["benchmark"], touches["params"], touches["hash"],
                                                      touches["files"]):
            self._touches[benchmark, alerts.canonical(params)][commit] = list(changed)
        self._paired = {(b, alerts.canonical(p), int(pr)): d for b, p, pr, d in
                        zip(paired["benchmark"], paired["params"], paired["pr"], paired["delta_pct"])}
        self._cxx = {h for h, fs in zip(changes["hash"], files) if any(_cxx(f) for f in fs)}
        self._code: dict[tuple[str, str], dict[str, tuple[str, str | None, str, str]]] = defaultdict(dict)
        if machine_code is not None:
            for commit, kernel, target, code, status, detail, library in zip(
                    machine_code["hash"], machine_code["kernel"], machine_code["arch"], machine_code["code_hash"],
                    machine_code["status"], machine_code["detail"], machine_code["library"]):
                self._code[kernel, target][commit] = (status, None if pd.isna(code) else code, detail, library)
        self._kernels: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        if series_kernels is not None:
            for benchmark, params, kernel, target in zip(series_kernels["benchmark"], series_kernels["params"],
                                                         series_kernels["kernel"], series_kernels["arch"]):
                if self.arch is None or target == self.arch:
                    self._kernels[benchmark, alerts.canonical(params)].append((kernel, target))
        self._kinds: dict[tuple[str, str, str, str], str] = {}

    def digest(self, judged: list[str]) -> str:
        """What the attribution says of ranges among the commits `judged` (main's commits up to the newest of them
        the store knows, the files, touches and pull requests of those, the machine code at `judged`, the series'
        kernels): a replay resumed after `judged` is the whole replay only if this is unchanged."""
        known = [self._position[c] for c in judged if c in self._position]
        span = self._order[:max(known) + 1] if known else []
        inside, measured = set(span), set(judged)
        facts = (span, [self._pr.get(c) for c in span], sorted((c, f) for c, f in self._compiler.items() if c in inside),
                 sorted((k, sorted((c, f) for c, f in t.items() if c in inside)) for k, t in self._touches.items()),
                 sorted((k, sorted((c, e) for c, e in v.items() if c in measured)) for k, v in self._code.items()),
                 sorted((k, sorted(v)) for k, v in self._kernels.items()),
                 sorted((k, sorted((c, d) for c, d in v.items() if c in measured)) for k, v in self._main_pairs.items()),
                 sorted((k, d) for k, d in self._paired.items() if k[2] in {self._pr.get(c) for c in span}))
        return hashlib.sha256(repr(facts).encode()).hexdigest()[:16]

    def commits(self, last_good: str, first_bad: str) -> list[str] | None:
        """Main's commits after `last_good` up to `first_bad`; None when the store does not know both."""
        if last_good not in self._position or first_bad not in self._position:
            return None
        return self._order[self._position[last_good] + 1:self._position[first_bad] + 1]

    def kind(self, benchmark: str, params: str, last_good: str, through: str) -> str:
        """`judge`'s kind alone, remembered: the job's shift asks it of every series at every commit."""
        key = (benchmark, params, last_good, through)
        if key not in self._kinds:
            self._kinds[key] = self._verdict(benchmark, params, last_good, through, None)[0]
        return self._kinds[key]

    def judge(self, benchmark: str, params: str, last_good: str, through: str, thresholds: Thresholds) -> Verdict:
        """Code, untouched or unknown over the range after `last_good` up to `through`, with the evidence in words
        (module docstring)."""
        kind, basis, text = self._verdict(benchmark, params, last_good, through, thresholds)
        return Verdict(kind, text, basis)

    def _verdict(self, benchmark: str, params: str, last_good: str, through: str,
                 thresholds: Thresholds | None) -> tuple[str, str, str]:
        between = self.commits(last_good, through)
        if between is None:
            return "unknown", NO_ATTRIBUTION, "no code attribution: the range's commits are not in the store"
        touches = self._touches.get((benchmark, params), {})
        own, _ = self.changed(benchmark, params, between)
        paired = self._worse_in_pair(benchmark, params, between, thresholds) if thresholds is not None else []
        machine = self._machine(benchmark, params, last_good, through)
        if isinstance(machine, list):
            harness = sorted({f for c in own for f in touches[c] if not _compiled(f)})
            culprits = self._names([c for c in between if c in touches or c in self._compiler])
            if machine:
                text = (f"code (machine code): the machine code of {_some(machine, 3)} changed between "
                        f"{last_good[:8]} and {through[:8]}" + (f" ({culprits})" if culprits else ""))
                return "code", MACHINE_CODE, "; ".join([text, *paired])
            kernels = _some(sorted({f"{k} ({a})" for k, a in self._kernels[benchmark, params]}), 3)
            if harness:
                hit = [c for c in own if any(f in harness for f in touches[c])]
                text = (f"code (machine code identical, files): {self._names(hit)} changed what the benchmark runs "
                        f"({_some(harness, 3)}); the machine code of {kernels} is identical")
                return "code", MACHINE_CODE, "; ".join([text, *paired])
            text = (f"environment (machine code): the machine code of {kernels} is identical at {last_good[:8]} and "
                    f"{through[:8]} over {len(between)} commit(s) ({self._names(between)})")
            return "untouched", MACHINE_CODE, "; ".join([text, *paired])
        hit = [c for c in between if c in touches or c in self._compiler]
        if hit:
            files = sorted({f for c in hit for f in [*touches.get(c, ()), *self._compiler.get(c, ())]})
            what = "changed what it runs" if own else "changed the compiler"
            text = f"code (files only: {machine}): {self._names(hit)} {what} ({_some(files, 3)})"
            return "code" if own else COMPILER, FILES, "; ".join([text, *paired])
        text = (f"environment (files only: {machine}): none of the {len(between)} commit(s) in the range "
                f"({self._names(between)}) changed what it runs or the compiler")
        return "untouched", FILES, "; ".join([text, *paired])

    def changed(self, benchmark: str, params: str, between: list[str]) -> tuple[list[str], list[str]]:
        """Of the commits `between`, those that changed what the series runs, and those that changed the compiler."""
        touches = self._touches.get((benchmark, params), {})
        return [c for c in between if c in touches], [c for c in between if c in self._compiler]

    def compiler_seen(self, last_good: str, through: str) -> tuple[int, int]:
        """(kernels, of them changed): the runner's-target kernels whose machine code the store holds at both ends
        (status ok), and how many of them differ. What a compiler-only range emitted where it can be seen; none
        where the range changed C++ that code built on one wheel at both ends does not hold."""
        between = self.commits(last_good, through) or []
        cxx = any(c in self._cxx for c in between)
        compiled = changed = 0
        for (kernel, target), by_commit in self._code.items():
            ends = [by_commit.get(last_good), by_commit.get(through)]
            if (self.arch is not None and target != self.arch) or any(e is None or e[0] != "ok" for e in ends):
                continue
            if cxx and _wheel(ends[0][3]) == _wheel(ends[1][3]):
                return 0, 0
            compiled += 1
            changed += ends[0][1] != ends[1][1]
        return compiled, changed

    def _machine(self, benchmark: str, params: str, last_good: str, through: str) -> list[str] | str:
        """The series' kernels whose machine code differs at the two ends (empty: identical), or why that cannot
        be said: no registered kernel covers the series, or a kernel was not compiled at one end."""
        kernels = self._kernels.get((benchmark, params))
        if not kernels:
            return "no registered kernel covers this series"
        changed = []
        for kernel, arch in kernels:
            ends = [self._code.get((kernel, arch), {}).get(c) for c in (last_good, through)]
            missing = [c for c, end in zip((last_good, through), ends) if end is None or end[0] != "ok"]
            if missing:
                end = ends[0] if ends[0] is None or ends[0][0] != "ok" else ends[1]
                why = "not compiled" if end is None else f"{end[0]}: {end[2]}" if end[2] else end[0]
                return f"machine code of {kernel} ({arch}) at {missing[0][:8]} {why}"
            if ends[0][1] != ends[1][1]:
                changed.append(f"{kernel} ({arch})")
            elif _wheel(ends[0][3]) == _wheel(ends[1][3]) and any(c in self._cxx for c in self.commits(last_good,
                                                                                                      through)):
                return (f"the range changed the compiler's C++, which the machine code of {kernel} ({arch}) at both "
                        f"ends, built on {_wheel(ends[0][3])}, does not hold")
        return changed

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

    def other_pairs(self, benchmark: str, params: str, between: list[str]) -> list[tuple[str, float]]:
        """The series' same-job comparisons (who, change in percent) that say how the runner alone moves it within a
        job, up to the range's end: main runs against the job's rebuild of main (the same code twice), and the
        paired A/Bs of pull requests merged outside the range that did not change what it runs."""
        if not between or between[-1] not in self._position:
            return []
        end = self._position[between[-1]]
        inside = {self._pr.get(c) for c in between} - {None}
        touched = {self._pr.get(c) for c in self._touches.get((benchmark, params), {})} - {None}
        merged = {pr for c, pr in self._pr.items() if pr is not None and self._position[c] <= end}
        pairs = [(f"#{pr}", d) for (b, p, pr), d in self._paired.items() if b == benchmark and p == params
                 and pr in merged and pr not in inside and pr not in touched and math.isfinite(d)]
        pairs += [(f"main at {c[:8]}", d) for c, d in self._main_pairs.get((benchmark, params), {}).items()
                  if c in self._position and self._position[c] <= end and math.isfinite(d)]
        return sorted(pairs)

    def paired_separates(self, benchmark: str, params: str, between: list[str], thresholds: Thresholds
                         ) -> tuple[bool, str]:
        """Whether a pull request merged in the range measured the series worse in its own CI job (`vs_main`) by
        more than the step floor and `noise_k` times the scatter of the series' other paired A/Bs (`other_pairs`),
        and the words for it.

        A runner that flips between modes within a job can put a pull request's run and main's in different
        modes, so a pair is evidence only beyond what the series' pairs show without a change."""
        inside = {self._pr.get(c) for c in between} - {None}
        others = [d for _, d in self.other_pairs(benchmark, params, between)]
        sign = -1.0 if thresholds.bigger_is_better else 1.0
        mine = sorted(((sign * d, pr) for (b, p, pr), d in self._paired.items()
                       if b == benchmark and p == params and pr in inside and math.isfinite(d)), reverse=True)
        if not mine:
            return False, "no pull request of the range has a paired A/B of it"
        worse, pr = mine[0]
        if len(others) < PAIRS:
            return False, (f"#{pr}'s paired A/B ({sign * worse:+.1f}%) cannot be told from the runner: the series has "
                           f"{len(others)} other same-job comparison(s), too few to say how they scatter")
        center = statistics.median(others)
        spread = MAD_TO_SIGMA * statistics.median(abs(d - center) for d in others)
        needed = max(100 * thresholds.step_floor, thresholds.noise_k * spread)
        if worse >= needed:
            return True, (f"#{pr}'s own CI job measured it {sign * worse:+.1f}% against main, beyond "
                          f"{thresholds.noise_k:g} x the scatter of its {len(others)} other same-job comparisons "
                          f"({spread:.1f}%)")
        return False, (f"#{pr}'s paired A/B ({sign * worse:+.1f}%) is within {thresholds.noise_k:g} x the scatter "
                       f"of its {len(others)} other same-job comparisons ({spread:.1f}%) or the step floor")

    def _names(self, commits: list[str]) -> str:
        names = [f"#{self._pr[c]}" if self._pr.get(c) is not None else c[:8] for c in commits]
        return _some(names, 4)


def _cxx(path: str) -> bool:
    """FlyDSL's C++ (its dialects and passes, their build): what a wheel holds compiled, and a commit's
    `python/flydsl` laid over an older wheel does not."""
    return path.startswith(("lib/", "include/", "thirdparty/", "cmake/")) or path == "CMakeLists.txt"


def _wheel(library: str) -> str:
    """The wheel a machine code record was built on: 'flydsl 0.2.4' of 'flydsl 0.2.4 + python/flydsl of ...'."""
    return library.split(" + ", 1)[0]


def _compiled(path: str) -> bool:
    """A kernel module's source, which its machine code covers; the rest an op runs (its test script, the
    measuring harness, the benchmark script, tuning tables) decides what is launched and how it is measured."""
    return path.startswith("kernels/") and path.endswith(".py")


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
    resolution: float | None = None  # the finest printed unit of its values so far (0: full precision)
    commits: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    nets: list[float] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)

    def half_digit(self) -> float:
        """Half a unit of the last printed digit, relative to the series' recent level."""
        level = statistics.median(self.values[-SCATTER_RUNS:]) if self.values else 0.0
        return (self.resolution or 0.0) / 2 / abs(level) if level else 0.0


@dataclass
class _Changes:
    """A deterministic series' points so far, and its changes as last listed (recomputed when it grows)."""

    env: str
    benchmark: str
    params: dict
    unit: str | None
    thresholds: Thresholds
    points: list[Point] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)
    listed: list[Regression] | None = None


@dataclass
class Scan:
    """What replaying one machine's history leaves: its alerts, every change of their state, and the steps that
    are not alerts (the environment's, and every change of a deterministic metric)."""

    alerts: list[alerts.Alert]
    events: list[alerts.Event]
    steps: list[Regression]


class Replay:
    """A machine's history replayed so far: fed commit by commit, oldest first, and resumable.

    `feed` takes the rows of commits after the last one fed; the state it leaves is everything the next commit's
    judgement reads, so a replay fed a month at once and one fed night by night are the same replay (the
    stored checkpoint of `flybench.regress.stored` is this state, written as data by `checkpoint`)."""

    def __init__(self, subject: str, machine: str, cfg: RegressConfig) -> None:
        self.subject, self.machine, self.cfg = subject, machine, cfg
        self.commits: list[str] = []
        self.series: dict[SeriesKey, _Series] = {}
        self.changes: dict[SeriesKey, _Changes] = {}
        self.state = _State(subject, machine, cfg)

    def feed(self, frame: pd.DataFrame, attribution: Attribution) -> Replay:
        """Judge each commit of `frame` (`queries.history` rows of this subject and machine, all of commits newer
        than every commit fed before) in the store's order."""
        points = self._read(frame)
        for commit in _commit_order(frame):
            self.commits.append(commit)
            here = points.get(commit, [])
            _advance_nets(here, commit, attribution)
            candidates = []
            for s in {id(p[0]): p[0] for p in here}.values():
                found = _judge(s, attribution, self._typical)
                if found is not None:
                    candidates.append((s, *found))
            self.state.take(candidates, self.series)
            for s, *_ in here:
                self.state.recover(s)
        return self

    def _typical(self, s: _Series) -> float:
        """The median scatter of the other series of `s`'s (environment, workload): the least noise a young series
        is held to (four runs can agree by chance far more closely than its kernel's runs do; the median over its
        workload's series rests on many more)."""
        others = [_scatter(o) for o in self.series.values() if o is not s and o.group == s.group
                  and len(o.nets) > MIN_BEFORE]
        return statistics.median(others) if others else 0.0

    def trimmed(self) -> Replay:
        """The replay with each series' runs cut to what later judgements read (the newest KEPT runs, and every run
        since the first bad commit of its open alerts), so a stored checkpoint grows with alerts, not with
        history."""
        first_bad = defaultdict(list)
        for a in self.state.alerts:
            if a.status == alerts.OPEN:
                first_bad[alerts.series_key(a.regression)[2:]].append(a.regression.step.first_bad)
        for key, s in self.series.items():
            open_since = [s.commits.index(c) for c in first_bad.get(key, ()) if c in s.commits]
            cut = max(0, min([len(s.commits) - KEPT, *open_since]))
            if cut:
                for name in ("commits", "values", "nets", "runs"):
                    setattr(s, name, getattr(s, name)[cut:])
        return self

    def scan(self) -> Scan:
        """The alerts, their events and the steps that are not alerts, as of the newest commit fed."""
        listed = []
        for c in self.changes.values():
            if c.listed is None:
                c.listed = deterministic_regressions(self.subject, self.machine, c.env, c.benchmark, c.params, c.unit,
                                                     c.points, c.thresholds, c.runs)
            listed += c.listed
        return Scan(list(self.state.alerts), list(self.state.events), [*self.state.environment, *listed])

    def _read(self, frame: pd.DataFrame) -> dict[str, list[tuple[_Series, float, float, str]]]:
        """The frame's statistical points by commit (new series joining the replay) and its deterministic points."""
        points: dict[str, list] = defaultdict(list)
        columns = [frame[c].tolist() if c in frame else [None] * len(frame) for c in _Row._fields]
        grouped: dict[tuple, list] = defaultdict(list)
        canonical: dict[str, str] = {}  # a machine's series share a few params texts: one JSON round trip each
        for row in map(_Row._make, zip(*columns)):
            params = canonical.get(row.params) or canonical.setdefault(row.params, alerts.canonical(row.params))
            grouped[row.env_name, row.benchmark, params].append(row)
        for key, rows_of in grouped.items():
            env, benchmark, params = key
            if key in self.changes or (key not in self.series and self._deterministic(key, rows_of)):
                c = self.changes[key]
                c.points += [Point(r.commit_hash, r.value if r.status == "ok" else None) for r in rows_of]
                c.runs.update({r.commit_hash: _text(r.run_context) or _text(r.branch) for r in rows_of})
                c.listed = None
                continue
            if is_compile_duration(benchmark):
                continue  # how long a compile took is the compiling machine's noise, not a kernel's regression
            s = self.series.get(key)
            if s is None:
                decoded = json.loads(rows_of[0].params)  # as stored: the order of its names is the series' name
                thresholds = self.cfg.thresholds(benchmark, ", ".join(map(str, decoded.values())), rows_of[0].unit)
                s = self.series[key] = _Series(key, decoded, params, rows_of[0].unit, thresholds,
                                               (env, workload_of(benchmark)))
            for r in rows_of:
                if r.status == "ok" and _fits(r.value):
                    bad = -math.log(r.value) if s.thresholds.bigger_is_better else math.log(r.value)
                    points[r.commit_hash].append((s, bad, r.value, _text(r.run_context) or _text(r.branch)))
        return points

    def _deterministic(self, key: SeriesKey, rows_of: list[_Row]) -> bool:
        """Whether the series is a deterministic metric's; if so it joins `changes`."""
        env, benchmark, params = key
        decoded = json.loads(rows_of[0].params)
        thresholds = self.cfg.thresholds(benchmark, ", ".join(map(str, decoded.values())), rows_of[0].unit)
        if not thresholds.deterministic:
            return False
        self.changes[key] = _Changes(env, benchmark, decoded, rows_of[0].unit, thresholds)
        return True


def replay(subject: str, machine: str, frame: pd.DataFrame, attribution: Attribution,
           cfg: RegressConfig) -> Scan:
    """The machine's history (`queries.history` rows of one subject and machine) replayed commit by commit."""
    return Replay(subject, machine, cfg).feed(frame, attribution).scan()


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
        if len(s.nets) >= 2 and attribution.kind(s.key[1], s.params_text, s.commits[-LEVEL:][0], commit) \
                in ("untouched", COMPILER):  # a witness: nothing it runs changed since the oldest run of its level
            moves[s.group].append(bad - statistics.median(s.nets[-LEVEL:]))
    shift = {g: statistics.median(m) if len(m) >= WITNESSES else 0.0 for g, m in moves.items()}
    for s, bad, value, runs in here:
        if s.resolution != 0.0:  # the printed digit of the runs so far: full precision stays full precision
            unit = resolution([value])
            s.resolution = unit if s.resolution is None or not unit else min(s.resolution, unit)
        s.commits.append(commit)
        s.values.append(value)
        s.nets.append(bad - shift.get(s.group, 0.0))
        s.runs.append(runs)


def _scatter(s: _Series) -> float:
    """The run-to-run spread a step must beat: the robust spread of the series' newest successive differences
    (scaled MAD / sqrt 2), raised to the upper CONFIDENCE bound of a spread estimated from that few differences
    (a young series' few runs can agree by chance), and at least half a unit of the last printed digit."""
    nets = s.nets[-SCATTER_RUNS:]
    jumps = [b - a for a, b in zip(nets, nets[1:])]
    if len(jumps) < 2:
        return s.half_digit()
    center = statistics.median(jumps)
    spread = MAD_TO_SIGMA * statistics.median(abs(j - center) for j in jumps) / math.sqrt(2)
    return max(spread * _few_runs(len(jumps)), s.half_digit())


def _few_runs(df: int) -> float:
    """sqrt(df / chi2.ppf(1 - CONFIDENCE, df)): how far a spread estimated from `df` differences may lie below
    the true one, at CONFIDENCE (1.15 at 29 differences, 1.5 at 5, 2.1 at 2)."""
    if df not in _FEW_RUNS:
        _FEW_RUNS[df] = math.sqrt(df / chi2.ppf(1 - CONFIDENCE, df))
    return _FEW_RUNS[df]


_FEW_RUNS: dict[int, float] = {}


def _drift(before: list[float], window: int, after: int, noise: float) -> float:
    """How far the series' own trend before the boundary carries it from the old level's middle to the new level's:
    the trend's slope over the runs before (toward worse only) times the runs between the two medians. A series
    that slides a little every run reaches a new level without a step.

    A trend is one only where the runs before show it beyond their scatter: the least-squares slope must exceed
    TREND_Z standard errors of a slope fitted to that many runs of the series' run-to-run scatter `noise`. Four runs
    that scatter (FlyDSL's MI355X gemm 9728 fp8 before #768: 2028, 2015, 1992, 2007 TFLOP/s) have a median move
    toward worse of 0.65% a run, which read as a trend took 2.6% off a 5.5% step; their slope is within one
    standard error of none."""
    n = len(before)
    if n < 3:
        return 0.0
    middle = (n - 1) / 2
    spread = sum((x - middle) ** 2 for x in range(n))
    slope = sum((x - middle) * y for x, y in zip(range(n), before)) / spread
    if slope <= 0 or slope < TREND_Z * noise / math.sqrt(spread):
        return 0.0
    return slope * ((window + 1) / 2 + (after - 1) / 2)


def _visited(before: list[float], old: float, new: float) -> bool:
    """Whether the series already sat at the new level before the boundary: VISITS of its last MODE_RUNS runs
    before the old level's window lie nearer the new level than the old. A bimodal series (a runner's modes, a
    kernel's two tunings) flips between levels it has; a step reaches a level it has not had, or goes back to one
    over a range that changed its code."""
    earlier = before[-(MODE_RUNS + LEVEL):-LEVEL]
    return sum(abs(x - new) < abs(x - old) for x in earlier) >= VISITS


def _flip(s: _Series, series: list[float], k: int, needed: float, attribution: Attribution) -> str | None:
    """The series' latest move between two runs before the boundary `k` (within the MODE_RUNS + LEVEL runs the
    bimodal rule searches, `_visited`) as large as a step must be, over a range that did not change its code: words
    for it, or None where it made none. Such a move is a runner's mode flip (or a compiler change that no machine
    code says reached it)."""
    for j in range(k - 1, max(0, k - MODE_RUNS - LEVEL), -1):
        jump = series[j] - series[j - 1]
        if abs(jump) >= needed and attribution.kind(s.key[1], s.params_text, s.commits[j - 1], s.commits[j]) \
                != "code":
            moved = s.values[j] / s.values[j - 1] - 1
            return f"{moved:+.1%} at {s.commits[j - 1][:8]}..{s.commits[j][:8]}"
    return None


def _confirmed(s: _Series, k: int, i: int, needed: float, verdict: Verdict, attribution: Attribution) -> Verdict:
    """A step that rests on files alone (no machine code says what the range emitted for the series) is an alert
    only where evidence separates the code from the runner; else UNCONFIRMED.

    A range that changed the compiler and nothing else the series runs, where every kernel compiled at both ends
    for the runner's target (SEEN at least) emitted identical machine code, has shown that the change emitted
    nothing new wherever it can be seen: only the range's own paired A/B then makes the step the code's.
    Otherwise the rule below is for a series that flips between runner modes.

    The series flips where the runner alone has moved it as far as a step must: between two of its main runs
    before the boundary over a range that did not change its code (`_flip`), or between two runs of unchanged code
    in one job (`Attribution.other_pairs`: a main run and the job's rebuild of main, or main and a pull request
    that did not change what it runs). Two kinds
    of evidence separate:
    - **the job's shift**: its main runs flipped with its workload, not net of the job's shift, and no pair did,
      so its step net of that shift is its own;
    - **the paired A/B**: a pull request of the range measured it worse in its own job, beyond the scatter of
      the series' other pairs (`Attribution.paired_separates`).
    The evidence says which decided."""
    between = attribution.commits(s.commits[k - 1], s.commits[i]) or []
    if verdict.kind == COMPILER:
        compiled, changed = attribution.compiler_seen(s.commits[k - 1], s.commits[i])
        if compiled >= SEEN and not changed:
            separated, paired = attribution.paired_separates(s.key[1], s.params_text, between, s.thresholds)
            if separated:
                return verdict._replace(evidence=f"{verdict.evidence}; confirmed by the paired A/B: {paired}")
            target = f" for {attribution.arch}" if attribution.arch else ""
            return Verdict(UNCONFIRMED, f"unconfirmed (files only: the compiler change emitted identical machine "
                                        f"code for all {compiled} kernels compiled at both ends{target}, and no paired "
                                        f"A/B separates code from runner: {paired}): {verdict.evidence}", FILES)
    sign = -1.0 if s.thresholds.bigger_is_better else 1.0
    raw = [sign * math.log(v) for v in s.values]
    net_flip, raw_flip = _flip(s, s.nets, k, needed, attribution), _flip(s, raw, k, needed, attribution)
    limit = 100 * math.expm1(needed)
    pairs = [f"{who} {d:+.1f}%" for who, d in attribution.other_pairs(s.key[1], s.params_text, between)
             if abs(d) >= limit]
    flips = ([f"it moved {net_flip} net of its job's shift"] if net_flip else []) + (
        [f"{len(pairs)} same-job comparison(s) of unchanged code differ by a step's size ({_some(pairs, 3)})"]
        if pairs else [])
    if not flips and raw_flip is None:
        return verdict
    if not flips:
        return verdict._replace(evidence=f"{verdict.evidence}; confirmed by the job's shift: the series flipped "
                                         f"({raw_flip}) with its workload, not net of it")
    separated, paired = attribution.paired_separates(s.key[1], s.params_text, between, s.thresholds)
    if separated:
        return verdict._replace(evidence=f"{verdict.evidence}; confirmed by the paired A/B: {paired}")
    return Verdict(UNCONFIRMED, f"unconfirmed (files only, on a series that flips between runner modes: "
                                f"{'; '.join(flips)}; neither the job's shift nor a paired A/B separates code from "
                                f"runner: {paired}): {verdict.evidence}", FILES)


def _judge(s: _Series, attribution: Attribution, typical: Callable[[_Series], float]
           ) -> tuple[Step, float, float, Verdict] | None:
    """The series' worst step among the boundaries with PERSIST to AFTER runs after them, if one passes: the step,
    its old and new net levels, and what the range's commits say.

    A boundary's old level is the median of up to LEVEL runs before it, and the run just before must be at the
    old level. A step spread over two runs (the run between the levels is a job that caught half of it) is judged
    as one: its old level is taken before that run, and its range covers both. The run between must lie half to
    three quarters of the way: a run nearer the old level belongs to it (as the one-run boundary after it
    requires), and a two-run boundary taken there out-rises that one-run boundary by the run's scatter alone
    (FlyDSL's MI355X gemm_async 5120 fp8, a quarter of the way at #762, put its #768 step one commit early). A series of YOUNG runs or fewer is
    held to at least the typical scatter of its workload's series on the machine (`typical`)."""
    t = s.thresholds
    floor = -math.log(1 - t.step_floor) if t.bigger_is_better else math.log(1 + t.step_floor)
    n = len(s.nets)
    if n < MIN_BEFORE + PERSIST or min(s.nets[-PERSIST:]) - min(s.nets[max(0, n - AFTER - LEVEL - 1):n - PERSIST]) \
            < floor / 2:
        return None  # no boundary's old level can lie half the floor below its newest runs: nothing to judge
    boundaries = []  # (k, i, old, new): the first run after the old level's window, the first at the new level
    for after in range(PERSIST, AFTER + 1):
        i = n - after
        for spread in (1, 2):
            k = i - spread + 1
            if k >= MIN_BEFORE:
                old, new = statistics.median(s.nets[max(0, k - LEVEL):k]), statistics.median(s.nets[i:])
                if new - old >= floor:
                    boundaries.append((k, i, old, new))
    if not boundaries:
        return None  # no boundary's levels differ by the floor: the scatter need not be estimated
    noise = _scatter(s)
    if len(s.nets) <= YOUNG:
        held = typical(s)
        if not held:
            return None  # a young series with no other series of its workload: nothing says how its runs scatter
        noise = max(noise, held)
    needed = max(floor, t.noise_k * noise, DIGITS * s.half_digit())
    best = None
    for k, i, old, new in boundaries:
        window = s.nets[max(0, k - LEVEL):k]
        if new - old < needed:
            continue
        rise = new - old - _drift(s.nets[max(0, k - 2 * LEVEL):k], len(window), n - i, noise)
        if rise < needed or min(s.nets[i:]) - old < needed / 2 or window[-1] - old > new - window[-1]:
            continue  # too small, a run at the new level too near the old, or the step came before the window
        if k != i and not (rise / 2 <= s.nets[k] - old <= rise * 3 / 4):
            continue  # the run between is nearer the old level, or at the new: a one-run boundary judges it
        before = statistics.median(s.values[max(0, k - LEVEL):k])
        after_value = statistics.median(s.values[i:])
        if abs(after_value - before) < t.absolute or (best is not None and rise <= best[0] + 1e-12):
            continue
        verdict = attribution.judge(s.key[1], s.params_text, s.commits[k - 1], s.commits[i], t)
        if verdict.kind != "code" and _visited(s.nets[:k], old, new):  # a code range may go back to a level
            continue
        if verdict.basis == FILES and verdict.kind in ("code", COMPILER):
            verdict = _confirmed(s, k, i, needed, verdict, attribution)
        best = (rise, k, i, old, new, before, after_value, verdict)
    if best is None:
        return None
    rise, k, i, old, new, before, after_value, verdict = best
    z = rise / (noise * math.sqrt(1 / min(LEVEL, k) + 1 / (n - i))) if noise else math.inf
    step = Step(s.commits[k - 1], s.commits[k], before, after_value, noise * abs(before),
                math.erf(z / math.sqrt(2)), worse=True)
    if k != i:
        verdict = verdict._replace(evidence=f"{verdict.evidence}; the step spread over two runs "
                                            f"({s.commits[k][:8]}, {s.commits[i][:8]}), judged as one")
    return step, old, new, verdict


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

    def regression(self, s: _Series, step: Step, kind: str, evidence: str) -> Regression:
        return Regression(self.subject, self.machine, s.key[0], s.key[1], s.params, s.unit, step, kind,
                          s.runs[s.commits.index(step.first_bad)], evidence)

    def take(self, candidates: list[tuple[_Series, Step, float, float, Verdict]],
             series: dict[SeriesKey, _Series]) -> None:
        """One commit's steps: code steps become alerts, untouched ones environment steps, and steps
        without attribution are read together (`episodes.read_together`) first."""
        unknown = [(s, self.regression(s, step, "step", v.evidence), old, new, v)
                   for s, step, old, new, v in candidates if v.kind == "unknown"]
        if unknown:
            read = {alerts.series_key(r): r for r in episodes.read_together([r for _, r, _, _, _ in unknown],
                                                                            self._kernels(series), self.cfg)}
            for s, r, old, new, v in unknown:
                judged = read.get(alerts.series_key(r))
                if judged is None:
                    continue
                if judged.kind == episodes.ENVIRONMENT:
                    self._environment(s, replace(judged, evidence=r.evidence + "; moved with the environment"))
                else:
                    self._alert(judged, old, new, s, v)
        for s, step, old, new, v in candidates:
            if v.kind == "untouched":
                self._environment(s, self.regression(s, step, episodes.ENVIRONMENT, v.evidence))
            elif v.kind == UNCONFIRMED:
                self._environment(s, self.regression(s, step, UNCONFIRMED, v.evidence))
            elif v.kind in ("code", COMPILER):
                self._alert(self.regression(s, step, "step", v.evidence), old, new, s, v)

    def _kernels(self, series: dict[SeriesKey, _Series]) -> dict[episodes.KernelKey, int]:
        """How many series each kernel has measured so far (a later series must not change an earlier verdict)."""
        counts: dict[episodes.KernelKey, int] = {}
        for s in series.values():
            if s.commits:
                key = episodes.kernel_key(self.subject, self.machine, s.key[0], s.key[1], s.params)
                counts[key] = counts.get(key, 0) + 1
        return counts

    def _environment(self, s: _Series, r: Regression) -> None:
        """List a step that is no alert (the environment's, an unconfirmed one) once, and not at all where it is an
        alert's step seen from a later run."""
        if not any(alerts.same_step(e, r) for e in self._environment_of[s.key]) \
                and not any(alerts.same_step(self.alerts[i].regression, r) for i in self._alerts_of[s.key]):
            self._environment_of[s.key].append(r)
            self.environment.append(r)

    def _alert(self, r: Regression, old: float, new: float, s: _Series, v: Verdict) -> None:
        """Open an alert, reopen a recovered one at the same levels, or fold a further step into the series' open
        alert: a slow drift moves a series step by step, and is one alert. Only machine code that changed again
        opens a second alert while one is open."""
        same = [i for i in self._alerts_of[s.key] if alerts.same_step(self.alerts[i].regression, r)]
        through = s.commits[-1]
        if any(self.alerts[i].status == alerts.OPEN for i in same):
            return
        if same:
            i = same[-1]
            self.alerts[i] = replace(self.alerts[i], status=alerts.OPEN, closed_by=None, flips=self.alerts[i].flips + 1)
            self.events.append(alerts.Event(self.alerts[i], "reopened", through, f"flip {self.alerts[i].flips}"))
            return
        still = [i for i in self._alerts_of[s.key] if self.alerts[i].status == alerts.OPEN]
        if still and v.basis != MACHINE_CODE:
            i = still[-1]
            self.levels[i] = (self.levels[i][0], max(self.levels[i][1], new))
            self.events.append(alerts.Event(self.alerts[i], "worsened", through,
                                            f"{r.step.last_good[:8]}..{r.step.first_bad[:8]}: {r.evidence}"))
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
