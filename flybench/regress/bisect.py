"""The first bad commit of one series between a good and a bad commit of its subject's repository.

    flybench bisect 'compile_metrics.Amd.track_vgprs(flash_attn_gfx950:causal, gfx950)' 7dac0826 772f0703 \\
        --flydsl-repo ~/FlyDSL

The search walks the first-parent commits of BAD back to GOOD (the commits
of the subject's main line, as the nightly sees them), measures GOOD and
BAD, and then halves the range: each probe measures the series at the
commit nearest the middle of what is still undecided and keeps the half
that holds the change. A commit that cannot be measured (its kernel does
not compile with the FlyDSL wheel of its time, its case fails) is skipped:
the next probe is its nearest neighbour that has not been tried, as asv
find steps to a neighbour. With no skips, a range of n commits after GOOD
takes ceil(log2(n)) probes besides GOOD and BAD.

A probe is bad by one of two rules, chosen by the series' unit:

- a deterministic metric (registers, bytes, waves, instructions: the units
  `flybench regressions` reports exactly) is bad when its value differs
  from GOOD's. Any change away from the known-good value is a change, so
  the search ends at a commit whose value really moved; when the value
  moved more than once in the range, that is the first move, and the report
  says that BAD's value came later.
- a timing (or any other noisy number) is bad when its median is closer to
  BAD's median than to GOOD's, i.e. past the midpoint of the two. asv find
  compares each probe with the current ends of its bracket (a three-way
  relative difference), which are earlier probes with their own noise;
  measured once each, GOOD and BAD are fixed references instead, so every
  verdict stands on one measurement against the same two, and the report
  gives each probe's position between them (0 is GOOD's level, 1 BAD's).
  GOOD and BAD whose interquartile ranges overlap are refused: their
  difference is inside one measurement's noise, so no probe could be told
  apart.

How a commit is measured (a `Probe`):

- `FlydslCompile`: a compile-only metric of one of FlyDSL's kernels on a
  CPU. The commit's `kernels/` tree is exported and compiled with the
  FlyDSL wheel of its time, as `flybench.compile.history` compiles FlyDSL's
  history (`wheel_for`, `install_wheel`, `export_kernels`), through
  `python -m flybench.compile` for that one kernel and target.
- `FlybenchCompile`: a compile-only metric over flybench's own commits: the
  same compile, run from a git worktree of this repository at the commit.
- `AsvCase`: a timing (a case suite's `track_time`), on the machine that
  runs its provider: an asv run of exactly that case with
  `--set-commit-hash`, with the subject's code at the commit (FlyDSL: its
  kernels as FLYBENCH_FLYDSL_SRC and its wheel on ASV_PYTHONPATH; flybench:
  a git worktree as ASV_PYTHONPATH and benchmark directory), into a results
  directory of the bisection's own. Not yet run on a GPU.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from flybench import benchmark_names, envvars
from flybench.errors import FlybenchError
from flybench.subject_code import INSTALLED, OF_ITS_TIME, Wheels, git_run, resolve, work_root, worktree  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
MAX_SKIPS = 10


# --- the series --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One series as the store and the reports name it: an asv benchmark and one value of each parameter."""

    benchmark: str
    params: dict[str, str]
    param_texts: tuple[str, ...]  # the parameters as benchmarks.json spells them (Python literals)
    unit: str | None
    type: str | None
    subject: str

    @property
    def label(self) -> str:
        return benchmark_names.series_name(self.benchmark, list(self.params.values()))

    @property
    def asv_regex(self) -> str:
        """An asv `--bench` regex matching exactly this parameter combination (asv matches `name(p, ...)`)."""
        return rf"^{re.escape(self.benchmark)}\({re.escape(', '.join(self.param_texts))}\)$"

    @property
    def metric(self) -> str:
        """The compile metric a `compile_metrics.*.track_<metric>` benchmark tracks."""
        return self.benchmark.rsplit(".", 1)[-1].removeprefix("track_")

    def deterministic(self) -> bool:
        from flybench.regress.config import load_config

        return load_config().thresholds(self.benchmark, ", ".join(self.params.values()), self.unit).deterministic


def subject_trees(root: Path = ROOT) -> dict[str, tuple[Path, Path]]:
    """Every subject with a results tree here: its asv config and results directory, by the config's project."""
    found = {}
    for config in [root / "asv.conf.json", *sorted((root / "results").glob("*/asv.conf.json"))]:
        try:
            conf = json.loads(config.read_text())
            found.setdefault(str(conf["project"]), (config, (config.parent / conf.get("results_dir", ".")).resolve()))
        except (OSError, ValueError, KeyError):
            continue
    return found


def subject_tree(subject: str, root: Path = ROOT) -> tuple[Path, Path]:
    trees = subject_trees(root)
    if subject not in trees:
        raise FlybenchError(f"unknown subject {subject!r}; subjects with a results tree here: "
                            f"{', '.join(sorted(trees))} (each is the `project` of an asv.conf.json)")
    return trees[subject]


def load_benchmarks(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        raise FlybenchError(f"{path} is missing, so no series can be checked: run asv once in that results tree "
                            "(it writes benchmarks.json), or pass --subject for a tree that has one")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FlybenchError(f"{path} is not asv's benchmarks.json: {exc}") from exc
    return {name: entry for name, entry in data.items() if name != "version" and isinstance(entry, dict)}


def parse_series(text: str, subject: str, benchmarks: dict[str, dict[str, Any]], where: Path) -> Series:
    """The series `text` names, checked against the subject's benchmarks.json, or an error that says what exists."""
    try:
        name, values = benchmark_names.parse_series(text)
    except ValueError as exc:
        raise FlybenchError(str(exc)) from exc
    if name not in benchmarks:
        close = difflib.get_close_matches(name, list(benchmarks), n=4, cutoff=0.6)
        family = sorted(n for n in benchmarks if n.rsplit(".", 1)[0] == name.rsplit(".", 1)[0])
        hint = (f"did you mean {', '.join(close)}?" if close else
                f"benchmarks of {name.rsplit('.', 1)[0]}: {', '.join(family)}" if family else
                f"its benchmarks include {', '.join(sorted(benchmarks)[:6])} (and {max(len(benchmarks) - 6, 0)} more)")
        raise FlybenchError(f"no benchmark {name!r} in {where}; {hint}")
    entry = benchmarks[name]
    names, params = list(entry.get("param_names") or []), list(entry.get("params") or [])
    if len(values) != len(params):
        raise FlybenchError(f"{name} takes {len(params)} parameter{'s' * (len(params) != 1)}"
                            f"{' (' + ', '.join(names) + ')' if names else ''}, {len(values)} given: write "
                            f"{benchmark_names.series_name(name, [_literal(p[0]) for p in params]) if params else name}")
    texts = []
    for param, value, choices in zip(names, values, params):
        by_value = {str(_literal(c)): c for c in choices}
        if value not in by_value:
            close = difflib.get_close_matches(value, list(by_value), n=3, cutoff=0.6)
            raise FlybenchError(f"{name} has no {param} {value!r}"
                                + (f" (did you mean {', '.join(close)}?)" if close else "")
                                + f"; its {param}s: {', '.join(by_value)}")
        texts.append(by_value[value])
    return Series(name, dict(zip(names, values)), tuple(texts), entry.get("unit"), entry.get("type"), subject)


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


# --- the commits -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitInfo:
    hash: str
    date: str
    subject: str

    @property
    def short(self) -> str:
        return self.hash[:10]


def first_parent_range(repo: Path, good: str, bad: str) -> list[CommitInfo]:
    """GOOD, then every first-parent commit after it up to BAD, oldest first; an error says why a pair is no range."""
    if not (repo / ".git").exists() and git_run(repo, "rev-parse", "--git-dir").returncode != 0:
        raise FlybenchError(f"{repo} is not a git repository: point at a clone with its history")
    good_sha, bad_sha = resolve(repo, good, "GOOD"), resolve(repo, bad, "BAD")
    if good_sha == bad_sha:
        raise FlybenchError(f"GOOD and BAD are the same commit ({good_sha[:10]}): give the last commit known good "
                            "and the first known bad, e.g. as `flybench regressions` prints them")
    lines = git_run(repo, "log", "--first-parent", "--format=%H%x09%cs%x09%s", bad_sha, f"^{good_sha}").stdout.splitlines()
    oldest = lines[-1].split("\t", 1)[0] if lines else None
    parent = git_run(repo, "rev-parse", "--verify", "--quiet", f"{oldest}^1").stdout.strip() if oldest else None
    if parent != good_sha:
        ancestor = git_run(repo, "merge-base", "--is-ancestor", good_sha, bad_sha).returncode == 0
        if not lines or git_run(repo, "merge-base", "--is-ancestor", bad_sha, good_sha).returncode == 0:
            raise FlybenchError(f"BAD {bad} ({bad_sha[:10]}) is older than GOOD {good} ({good_sha[:10]}): "
                                "swap them (GOOD first)")
        if ancestor:
            raise FlybenchError(f"GOOD {good} is an ancestor of BAD {bad} but not on its first-parent line (it came "
                                "in through a merge): give the main-line commit before that merge as GOOD "
                                f"(`git -C {repo} log --first-parent --oneline {bad_sha[:10]}`)")
        raise FlybenchError(f"GOOD {good} is not an ancestor of BAD {bad}: they are on different branches; give two "
                            f"commits of one line (`git -C {repo} log --first-parent --oneline {bad_sha[:10]}`)")
    head = git_run(repo, "log", "-1", "--format=%H%x09%cs%x09%s", good_sha).stdout.strip()
    return [CommitInfo(*line.split("\t", 2)) for line in [head, *reversed(lines)]]


# --- measuring ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """A series' value at one commit, or why there is none."""

    value: float | None
    reason: str | None = None  # why there is no value (the commit is skipped)
    spread: tuple[float, float] | None = None  # interquartile range of a timing's samples
    note: str = ""  # what measured it, e.g. "flydsl 0.3.1"
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.value is not None and math.isfinite(self.value)


class Probe(Protocol):
    def __call__(self, commit: str) -> Measurement: ...


class Rule(Protocol):
    name: str

    def is_bad(self, m: Measurement) -> bool: ...

    def describe(self) -> str: ...

    def position(self, m: Measurement) -> float | None: ...


@dataclass(frozen=True)
class DifferentFromGood:
    """Deterministic metrics: a commit is bad when its value is not GOOD's."""

    good: float
    bad: float
    unit: str = ""
    name: str = "differs-from-good"

    def is_bad(self, m: Measurement) -> bool:
        return m.value != self.good

    def position(self, m: Measurement) -> float | None:
        return None

    def describe(self) -> str:
        return (f"deterministic ({self.unit or 'exact'}): a commit is bad when its value differs from GOOD's "
                f"({format_value(self.good)}); BAD has {format_value(self.bad)}")


@dataclass(frozen=True)
class NearerToBad:
    """Noisy numbers: a commit is bad when its median is closer to BAD's than to GOOD's."""

    good: float
    bad: float
    unit: str = ""
    name: str = "nearer-to-bad"

    def is_bad(self, m: Measurement) -> bool:
        return abs(m.value - self.bad) < abs(m.value - self.good)

    def position(self, m: Measurement) -> float | None:
        return (m.value - self.good) / (self.bad - self.good)

    def describe(self) -> str:
        return (f"noisy ({self.unit or 'no unit'}): a commit is bad when its median is closer to BAD's "
                f"({format_value(self.bad)}) than to GOOD's ({format_value(self.good)}), i.e. past {format_value((self.good + self.bad) / 2)}")


def rule_for(series: Series, good: Measurement, bad: Measurement) -> Rule:
    """The rule for this series and these ends, or an error when GOOD and BAD cannot be told apart."""
    if series.deterministic():
        if good.value == bad.value:
            raise FlybenchError(f"{series.label} is {format_value(good.value)} at GOOD and at BAD: nothing changed in this "
                                "range; give a GOOD and a BAD whose values differ (`flybench regressions` lists "
                                "each change)")
        return DifferentFromGood(good.value, bad.value, series.unit or "")
    if good.value == bad.value:
        raise FlybenchError(f"{series.label} has the same median at GOOD and at BAD ({format_value(good.value)}): there is no "
                            "step to find between them")
    if good.spread and bad.spread and good.spread[0] <= bad.spread[1] and bad.spread[0] <= good.spread[1]:
        raise FlybenchError(f"GOOD's and BAD's medians ({format_value(good.value)}, {format_value(bad.value)}) lie inside each "
                            "other's interquartile range: the step is within the noise of one measurement, so no "
                            "probe could be told apart; confirm it with `flybench compare GOOD BAD` (several "
                            "rounds) or bisect a larger step")
    return NearerToBad(good.value, bad.value, series.unit or "")


# --- the search --------------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One probe: which commit (index into the range), what it measured, the verdict."""

    index: int
    commit: str
    measurement: Measurement
    verdict: str  # "good", "bad" or "skipped"
    position: float | None = None


@dataclass
class Search:
    """Where the search ended. `status`: "found" (last_good + 1 == first_bad), "untestable" (every commit
    between them was skipped) or "stopped" (the skip limit was reached with commits between them untried)."""

    status: str
    last_good: int
    first_bad: int
    steps: list[Step]
    rule: Rule
    between: list[int] = field(default_factory=list)  # commits between last_good and first_bad, undecided

    @property
    def probes(self) -> int:
        return len(self.steps)

    @property
    def skipped(self) -> list[Step]:
        return [s for s in self.steps if s.verdict == "skipped"]


def search(commits: list[str], probe: Callable[[str], Measurement], make_rule: Callable[[Measurement, Measurement], Rule],
           max_skips: int = MAX_SKIPS, progress: Callable[[Step, int], None] | None = None) -> Search:
    """Binary search for the first bad commit of `commits` (GOOD first, BAD last), measuring with `probe`.

    GOOD and BAD are measured first and must be measurable; the rule is made from their values. Each
    further probe is the untried commit nearest the middle of the undecided range (the lower one on a
    tie); a commit that cannot be measured is skipped and its nearest untried neighbour probed next.
    """
    if len(commits) < 2:
        raise FlybenchError("a bisection needs GOOD and BAD: two different commits, GOOD older")
    steps: list[Step] = []

    def measure(index: int) -> Measurement:
        start = time.perf_counter()
        m = probe(commits[index])
        if not m.seconds:
            m = Measurement(m.value, m.reason, m.spread, m.note, time.perf_counter() - start)
        return m

    ends = {}
    for index, role in ((0, "GOOD"), (len(commits) - 1, "BAD")):
        ends[role] = measure(index)
        if not ends[role].ok:
            raise FlybenchError(f"{role} {commits[index][:10]} cannot be measured: {ends[role].reason or 'no value'}; "
                                f"give a {role} where the series has a value")
    rule = make_rule(ends["GOOD"], ends["BAD"])
    for index, role in ((0, "good"), (len(commits) - 1, "bad")):
        steps.append(Step(index, commits[index], ends[role.upper()], role, rule.position(ends[role.upper()])))
        if progress:
            progress(steps[-1], len(commits) - 1)
    lo, hi, skipped = 0, len(commits) - 1, set()
    status = "found"
    while hi - lo > 1:
        untried = [i for i in range(lo + 1, hi) if i not in skipped]
        if not untried:
            status = "untestable"
            break
        if len(skipped) >= max_skips:
            status = "stopped"
            break
        middle = (lo + hi) / 2
        index = min(untried, key=lambda i: (abs(i - middle), i))
        m = measure(index)
        if not m.ok:
            skipped.add(index)
            steps.append(Step(index, commits[index], m, "skipped"))
        else:
            bad = rule.is_bad(m)
            steps.append(Step(index, commits[index], m, "bad" if bad else "good", rule.position(m)))
            lo, hi = (lo, index) if bad else (index, hi)
        if progress:
            progress(steps[-1], len(commits) - 1)
    return Search(status, lo, hi, steps, rule, list(range(lo + 1, hi)))


# --- probes ------------------------------------------------------------------------------------------------------


def compile_one(kernel: str, arch: str, metric: str, *, cwd: Path, pythonpath: list[str], flydsl_src: Path | None,
                env: dict[str, str] | None = None) -> Measurement:
    """`python -m flybench.compile` for one kernel and target; the metric, or the compile's reason for none."""
    command = [sys.executable, "-m", "flybench.compile", "--arch", arch, "-k", kernel, "--format", "json",
               *(["--flydsl-src", str(flydsl_src)] if flydsl_src else [])]
    environment = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(pythonpath)}
    start = time.time()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=environment, check=False)
    try:
        records = json.loads(done.stdout) if done.stdout.strip() else []
    except ValueError:
        records = []
    record = next((r for r in records if r.get("kernel") == kernel and r.get("arch") == arch), None)
    if record is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Measurement(None, f"python -m flybench.compile gave no record (exit {done.returncode}): {tail[:300]}")
    if record["status"] != "ok":
        return Measurement(None, f"{record['status'].replace('_', ' ')}: {(record.get('reason') or '')[:300]}")
    value = (record.get("metrics") or {}).get(metric)
    if value is None:
        return Measurement(None, f"the compile reports no {metric} for {kernel} on {arch}")
    return Measurement(float(value), note="from the compile cache" if _cached(record, environment, start) else "")


def _cached(record: dict[str, Any], environment: dict[str, str], start: float) -> bool:
    """Whether the compile's record was in the cache before this probe started (an earlier probe compiled the
    same sources with the same wheel)."""
    from flybench.compile.cache import entry_dir

    root = Path(environment.get(envvars.COMPILE_CACHE) or ROOT / "results" / "compile-cache")
    try:
        return (entry_dir(root, record["kernel"], record["arch"], record.get("key") or "") / "record.json"
                ).stat().st_mtime < start
    except OSError:
        return False


class FlydslCompile:
    """A compile-only metric of one FlyDSL kernel at a FlyDSL commit, with the wheel of its time (or one wheel)."""

    def __init__(self, repo: Path, series: Series, wheel: str = OF_ITS_TIME, work: Path | None = None) -> None:
        from flybench.compile.registry import CHECKOUT_CASES

        if not series.benchmark.startswith("compile_metrics.Amd."):
            raise FlybenchError(f"{series.benchmark} is not a compile metric of FlyDSL's kernels for gfx942/gfx950 "
                                "(compile_metrics.Amd.track_*); FlyDSL's kernels are not compiled for sm_90")
        kernel, arch = series.params["kernel"], series.params["arch"]
        ours = sorted(c.name for c in CHECKOUT_CASES)
        if kernel not in ours:
            raise FlybenchError(f"{kernel} is not one of FlyDSL's kernels (it is flybench's own): FlyDSL's commits do "
                                f"not change it; bisect it over flybench's commits with --subject flybench, or pick "
                                f"one of FlyDSL's: {', '.join(ours)}")
        self.kernel, self.arch, self.metric = kernel, arch, series.metric
        self.wheels = Wheels(repo, wheel, work)

    def __call__(self, commit: str) -> Measurement:
        try:
            src, path, note = self.wheels.checkout(commit)
        except FlybenchError as exc:
            return Measurement(None, str(exc))
        m = compile_one(self.kernel, self.arch, self.metric, cwd=ROOT, pythonpath=[*path, str(ROOT)], flydsl_src=src)
        return Measurement(m.value, m.reason, m.spread, f"{note}, {m.note}" if m.note else note)


class FlybenchCompile:
    """A compile-only metric at one of flybench's own commits: `python -m flybench.compile` in a worktree of it."""

    def __init__(self, series: Series, repo: Path = ROOT, work: Path | None = None) -> None:
        if not series.benchmark.startswith("compile_metrics."):
            raise FlybenchError(f"{series.benchmark} is not a compile metric")
        self.series, self.repo, self.work = series, repo, work or work_root()

    def __call__(self, commit: str) -> Measurement:
        from flybench.compile.cache import cache_root

        src = os.environ.get(envvars.FLYDSL_SRC)
        with worktree(self.repo, commit, self.work / "worktrees") as tree:
            return compile_one(self.series.params["kernel"], self.series.params["arch"], self.series.metric, cwd=tree,
                               pythonpath=[str(tree)], flydsl_src=Path(src) if src else None,
                               env={envvars.COMPILE_CACHE: str(cache_root())})


class AsvCase:
    """A case's median time at a commit: an asv run of exactly that case with --set-commit-hash (not yet run on a GPU).

    FlyDSL (subject flydsl): the commit's kernels/ exported as FLYBENCH_FLYDSL_SRC and its wheel on
    ASV_PYTHONPATH, benchmarks from this checkout, the clone as asv's repo (for the commit's date).
    flybench (subject flybench): a git worktree of this repository at the commit, as ASV_PYTHONPATH and
    benchmark directory. Results go to `<work>/results/<machine>/`, never into the committed results.
    """

    def __init__(self, series: Series, config: Path, repo: Path, machine: str, *, flydsl: bool,
                 wheel: str = OF_ITS_TIME, work: Path | None = None) -> None:
        self.series, self.config, self.repo, self.machine, self.flydsl = series, config, repo, machine, flydsl
        self.work = work or (work_root().parent / "bisect" / time.strftime("%Y%m%d-%H%M%S"))
        self.results = self.work / "results"
        self.wheels = Wheels(repo, wheel) if flydsl else None
        self._registered = False

    def _asv_config(self, benchmark_dir: Path) -> Path:
        conf = json.loads(self.config.read_text())
        conf.update(repo=str(self.repo), benchmark_dir=str(benchmark_dir), results_dir=str(self.results),
                    html_dir=str(self.work / "html"), env_dir=str(self.work / "env"))
        self.work.mkdir(parents=True, exist_ok=True)
        path = self.work / "asv.conf.json"
        path.write_text(json.dumps(conf, indent=2))
        return path

    @contextlib.contextmanager
    def _checkout(self, commit: str) -> Iterator[tuple[Path, list[str], dict[str, str], str]]:
        """(benchmark dir, ASV_PYTHONPATH entries, extra environment, note) with the subject's code at `commit`."""
        if self.wheels is not None:
            src, path, note = self.wheels.checkout(commit)
            yield ROOT / "benchmarks", [*path, str(ROOT)], {envvars.FLYDSL_SRC: str(src)}, note
        else:
            with worktree(self.repo, commit, self.work / "worktrees") as tree:
                yield tree / "benchmarks", [str(tree)], {}, f"flybench {commit[:10]}"

    def _register(self) -> None:
        """asv's machine entry for the probes' results (asv machine --yes: this host's details)."""
        config = self._asv_config(ROOT / "benchmarks")
        done = subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--config", str(config),
                               "--machine", self.machine], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise FlybenchError(f"asv could not record machine {self.machine!r}: "
                                f"{(done.stderr or done.stdout).strip()[-400:]}")
        self._registered = True

    def __call__(self, commit: str) -> Measurement:
        if not self._registered:
            self._register()
        try:
            with self._checkout(commit) as (benchmark_dir, path, extra, note):
                config = self._asv_config(benchmark_dir)
                env = {**os.environ, **extra, "ASV_PYTHONPATH": os.pathsep.join(
                    [*path, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])}
                command = [sys.executable, "-m", "asv", "run", "--config", str(config), "--python=same",
                           "--set-commit-hash", commit, "--machine", self.machine, "--record-samples",
                           "--show-stderr", "--bench", self.series.asv_regex]
                done = subprocess.run(command, cwd=config.parent, env=env, capture_output=True, text=True,
                                      check=False)
        except FlybenchError as exc:
            return Measurement(None, str(exc))
        m = read_asv_value(self.results / self.machine, commit, self.series, done.stdout + done.stderr)
        return Measurement(m.value, m.reason, m.spread, note)


def read_asv_value(machine_dir: Path, commit: str, series: Series, output: str = "") -> Measurement:
    """The series' value (and interquartile range) in asv's results file of `commit`, or why there is none."""
    from asv.results import Results

    files = [p for p in machine_dir.glob(f"{commit[:8]}-*.json")]
    why = (output.strip().splitlines() or ["no output"])[-1][:300]
    if not files:
        return Measurement(None, f"asv wrote no results for {commit[:10]}: {why}")
    results = Results.load(str(files[0]))
    if series.benchmark not in results.get_all_result_keys():
        return Measurement(None, _case_reason(machine_dir, commit, series) or f"asv has no result: {why}")
    params = results.get_result_params(series.benchmark)
    combos = list(itertools.product(*params))
    if series.param_texts not in combos:
        return Measurement(None, f"asv's result has no {series.label}: {why}")
    i = combos.index(series.param_texts)
    value = results.get_result_value(series.benchmark, params)[i]
    stats = results.get_result_stats(series.benchmark, params)[i] or {}
    if value is None or not math.isfinite(value):
        return Measurement(None, _case_reason(machine_dir, commit, series) or f"the case failed: {why}")
    spread = (stats["q_25"], stats["q_75"]) if stats.get("q_25") is not None and stats.get("q_75") is not None else None
    return Measurement(float(value), spread=spread)


def _case_reason(machine_dir: Path, commit: str, series: Series) -> str | None:
    """The case record's reason (a failed correctness gate, an unavailable provider) for this series, if any."""
    from flybench.measure import record as records

    parsed = benchmark_names.parse(series.benchmark)
    if parsed is None:
        return None
    key = (parsed.workload, parsed.shape_set, *series.params.values())
    for path in machine_dir.glob(f"{commit[:8]}-*{records.SUFFIX}"):
        found = records.latest(records.read(path)[0]).get(key)
        if found and found.get("status") != "ok":
            return f"{found['status']}: {found.get('reason')}"
    return None


# --- the whole bisection -----------------------------------------------------------------------------------------


@dataclass
class Bisection:
    series: Series
    repo: Path
    commits: list[CommitInfo]
    search: Search
    seconds: float
    method: str  # how each commit was measured

    @property
    def first_bad(self) -> CommitInfo:
        return self.commits[self.search.first_bad]

    @property
    def last_good(self) -> CommitInfo:
        return self.commits[self.search.last_good]

    def value_at(self, index: int) -> Measurement | None:
        return next((s.measurement for s in self.search.steps if s.index == index and s.measurement.ok), None)

    def notes(self) -> list[str]:
        notes = []
        s = self.search
        first = self.value_at(s.first_bad)
        bad = self.value_at(len(self.commits) - 1)
        if isinstance(s.rule, DifferentFromGood) and first and bad and first.value != bad.value:
            notes.append(f"the value moved again after {self.first_bad.short} ({format_value(first.value)} there, "
                         f"{format_value(bad.value)} at BAD): bisect {self.first_bad.short}..BAD for the next change")
        wheel_of = {index: m.note.split(",")[0] for index in (s.first_bad, s.last_good)
                    if (m := self.value_at(index)) and m.note.startswith("flydsl")}
        if s.status == "found" and len(set(wheel_of.values())) == 2:
            notes.append(f"the first bad commit is also where the wheel changes ({wheel_of[s.last_good]} -> "
                         f"{wheel_of[s.first_bad]}): the "
                         "change may come from the wheel, not from the commit's kernels; compare both with one "
                         "wheel (--wheel VERSION)")
        if s.status == "untestable":
            notes.append(f"every commit between {self.last_good.short} and {self.first_bad.short} could not be "
                         "measured: the first bad commit is one of them or " + self.first_bad.short)
        if s.status == "stopped":
            notes.append(f"stopped after {len(s.skipped)} skipped commits (--max-skips): the first bad commit is "
                         f"after {self.last_good.short} and at or before {self.first_bad.short}")
        return notes

    def to_dict(self) -> dict[str, Any]:
        def commit(index: int) -> dict[str, Any]:
            c = self.commits[index]
            m = self.value_at(index)
            return {"hash": c.hash, "date": c.date, "subject": c.subject, "index": index,
                    "value": m.value if m else None}

        return {
            "series": self.series.label, "benchmark": self.series.benchmark, "params": self.series.params,
            "unit": self.series.unit, "subject": self.series.subject, "repo": str(self.repo), "method": self.method,
            "rule": self.search.rule.name, "rule_text": self.search.rule.describe(), "status": self.search.status,
            "range": {"good": commit(0), "bad": commit(len(self.commits) - 1),
                      "commits_after_good": len(self.commits) - 1},
            "first_bad": commit(self.search.first_bad), "last_good": commit(self.search.last_good),
            "undecided": [commit(i) for i in self.search.between],
            "probes": [{**asdict(s.measurement), "index": s.index, "commit": s.commit, "verdict": s.verdict,
                        "position": s.position} for s in self.search.steps],
            "probe_count": self.search.probes, "skipped": len(self.search.skipped),
            "seconds": round(self.seconds, 1), "notes": self.notes(),
        }


def bisect(series: Series, repo: Path, good: str, bad: str, probe: Probe, method: str, *, max_skips: int = MAX_SKIPS,
           progress: Callable[[Step, int], None] | None = None) -> Bisection:
    start = time.perf_counter()
    commits = first_parent_range(repo, good, bad)
    found = search([c.hash for c in commits], probe, lambda g, b: rule_for(series, g, b), max_skips=max_skips,
                   progress=progress)
    return Bisection(series, repo, commits, found, time.perf_counter() - start, method)


def exit_status(b: Bisection) -> int:
    """0: the first bad commit was found; 1: it lies among commits that could not be measured."""
    return 0 if b.search.status == "found" else 1


def format_value(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:.4g}"


def render(b: Bisection, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(b.to_dict(), indent=1)
    md = fmt == "markdown"
    s, n = b.search, len(b.commits) - 1
    lines = [f"{'### ' if md else ''}bisect {b.series.label} (subject {b.series.subject})", "",
             (f"- range: {b.commits[0].short}..{b.commits[-1].short}, {n} first-parent commit{'s' * (n != 1)} "
              f"after GOOD in {b.repo}"),
             f"- measured by: {b.method}", f"- rule: {s.rule.describe()}", ""]
    header = ["#", "commit", "position", "value", "verdict", "measured with", "seconds", "reason"]
    rows = []
    for number, step in enumerate(s.steps, 1):
        m = step.measurement
        rows.append([str(number), f"{step.commit[:10]}", f"{step.index}/{n}", format_value(m.value) if m.ok else "-",
                     step.verdict + (f" ({step.position:.2f})" if step.position is not None else ""), m.note,
                     f"{m.seconds:.0f}", (m.reason or "")[:120]])
    if md:
        lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(r).replace("\n", " ") + " |" for r in rows]
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines += ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    first, last = b.value_at(s.first_bad), b.value_at(s.last_good)
    lines += ["", (f"{'**' if md else ''}first bad commit{' (or earlier, see below)' if s.status != 'found' else ''}: "
                   f"{b.first_bad.hash} {b.first_bad.date} {b.first_bad.subject}{'**' if md else ''}"
                   f"  value {format_value(first.value) if first else '-'}"),
              (f"last good commit{' (its parent)' if s.status == 'found' else ''}: {b.last_good.hash} "
               f"{b.last_good.date} {b.last_good.subject}  value {format_value(last.value) if last else '-'}")]
    if b.search.between:
        lines.append("undecided (could not be measured or not tried): "
                     + ", ".join(b.commits[i].short for i in b.search.between))
    lines += [f"note: {note}" for note in b.notes()]
    lines.append(f"{s.probes} probes: GOOD, BAD, {s.probes - 2 - len(s.skipped)} measured between them, "
                 f"{len(s.skipped)} skipped; {b.seconds:.0f} s")
    return "\n".join(lines)
