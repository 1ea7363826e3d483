"""Step labels for FlyDSL's imported CI month, from FlyDSL's diffs and the data alone (no detector's rules).

The procedure (docs/data/flydsl-labels/README.md says the same with the reasons), on main runs only, per
series (runner, op, shape, dtype, metric), at each pair (A, B) of consecutive measured main runs:

1. **Size.** The median of up to LEVEL main runs from B on differs from the median of up to LEVEL runs up to
   A by at least SCATTER_K times the series' run-to-run scatter (robust spread of consecutive log ratios over
   the month, floored at a third of the value's printed resolution) and at least MIN_STEP.
2. **Persistence.** At least PERSIST main runs from B on, B itself and at least PERSIST_SHARE of the first
   HOLD of them nearer the new level than the old (one run at a new level is not a step).
3. **The level distribution changes** (bimodal series, per-job runner modes). Every CI job that measured
   main on that runner is a sample of main's level: the main runs, and the main that each pull-request or
   branch job rebuilt and measured beside its own commit (`vs_main` baseline "main"), placed on main by the
   job's time. Of up to DENSE samples on each side (a sample whose main is not surely at or before A, or
   surely at or after B, is left out), the share nearer the new level must be at least NEW_SHARE after and
   rise by at least SHARE_RISE. A series that alternates between two levels all month, or a runner whose
   jobs switch speed modes, visits the "new" level before the pair too, and fails this.
4. **Attribution from the diffs.** The merged commits after A up to B, each read as its diff against its
   first parent. An op's own files are derived, at B, from FlyDSL's CI script `scripts/run_benchmark.sh`:
   the test script that emits the op's rows (`tests/kernels/test_*.py`, or the module the script imports),
   the test helpers it imports from `tests/`, every `kernels/` module it imports (transitively), and the
   non-Python files (tuning tables) beside those kernel modules; a change to `run_benchmark.sh` whose diff
   names the op or its test script counts too. Shared files are the compiler and the build
   (`flybench.compile.affected.flydsl_shared`) and `kernels/common/`.

A series' pair passing 1-3 is a **step**. Its kind:

- own files changed: a **code** step, worse or better. Confidence "high" when corroborated: another shape of
  the same op on the runner steps the same way at the same pair, or a pull request merged in the range moved
  the series at least CORROBORATE percent that way in its own CI job (`vs_main`: same job, same runner, A/B
  against main), and no merged pull request's own job contradicts it; else "medium".
- only shared files changed: a **code** step only when corroborated as above (confidence "medium");
  otherwise it is not labelled (the compiler touches every kernel, so the diff alone cannot tell).
- nothing of the op changed: an **environment** step; "high" when series of at least ENV_OPS ops of the
  runner step the same way at the pair, else "medium".

**Runner episodes.** A pair where series of at least ENV_OPS ops of the runner, none of whose own files the
range changed, move the same way by the size rule (1) and hold for the next run (a naive reading of the
series sees a step there) but fail 2 or 3, is a per-job environment episode: each of those series gets an
**environment** label (confidence "high" when the dense samples show both levels before the pair, i.e. it
failed 3). Nothing else is labelled. Pairs too near the month's end (fewer than PERSIST runs after) are
not judged. Neighbouring pairs (within LEVEL runs) moving the same way are one step, at the pair whose own
two runs differ most.

The imported history is read back from the store (`studies.flydsl_ci.data.load`), never copied.
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
import subprocess
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from pathlib import Path, PurePosixPath

from flybench.compile import affected
from studies.flydsl_ci.data import History, Job, Series, SeriesKey

LEVEL = 3
"""Main runs on each side whose median is the level."""
HOLD = 4
"""Main runs from B on that the persistence rule reads."""
SCATTER_K = 3.0
MIN_STEP = 0.015
PERSIST = 3
PERSIST_SHARE = 0.75
DENSE = 40
NEW_SHARE = 0.75
SHARE_RISE = 0.5
JOB_SPAN = timedelta(hours=2)
"""How long before its completion a job may have checked main out."""
CORROBORATE = 2.0  # percent, a pull request's own vs_main
CONTRADICT = 1.0  # percent: a pull request's own job that moved the series less than this, or the other way
ENV_OPS = 3
MAD_TO_SIGMA = 1.4826

Files = Callable[[str, str], "OpFiles"]
"""(op, commit) -> the op's own files at that commit."""


@dataclass(frozen=True)
class Label:
    key: SeriesKey
    arch: str
    op: str
    case: str
    dtype: str
    kind: str  # "code" or "environment"
    direction: str  # "worse" or "better"
    last_good: str
    first_bad: str
    percent: float  # the level's change, signed so that negative is slower
    scatter: float  # percent, run to run
    touched_by: tuple[str, ...]  # merged commits that changed the op's own files (or shared files: "shared")
    witnesses: tuple[str, ...]  # what corroborates it
    confidence: str = "medium"  # "high" or "medium"
    evidence: str = ""  # "own files", "shared files", "no change", "episode"


@dataclass(frozen=True)
class OpFiles:
    """An op's own files at one commit: exact paths, and directories whose non-Python files are tuning data."""

    paths: frozenset[str]
    data_dirs: frozenset[str]
    names: frozenset[str]  # strings whose appearance in a run_benchmark.sh diff touches the op

    def own(self, path: str) -> bool:
        if path in self.paths:
            return True
        parent = str(PurePosixPath(path).parent)
        return parent in self.data_dirs and not path.endswith(".py") and not affected.is_doc(path)


@dataclass
class Candidate:
    series: Series
    index: int  # position of the pair in the series' measured runs
    last_good: str
    first_bad: str
    percent: float
    scatter: float
    size_ok: bool
    persists: bool  # rule 2
    holds_next: bool  # the run after B is nearer the new level too (what a naive reading sees)
    shares: tuple[float, float] | None  # rule 3: share of dense samples nearer the new level, before and after
    jump: float = 0.0  # |log ratio| of the pair's own two runs
    notes: list[str] = field(default_factory=list)

    @property
    def faster(self) -> bool:
        return self.percent > 0

    @property
    def distribution_changes(self) -> bool:
        if self.shares is None:
            return False
        before, after = self.shares
        return after >= NEW_SHARE and after - before >= SHARE_RISE

    @property
    def step(self) -> bool:
        return self.size_ok and self.persists and self.distribution_changes

    @property
    def move(self) -> bool:
        return self.size_ok and self.holds_next


# ---------------------------------------------------------------- the op's own files, from the CI script

_TEST = re.compile(r"tests[/.]kernels[/.](\w+)(?:\.py)?")
_EMIT = re.compile(r'(?:_emit_row|_emit_moe_s2_rows|_py_parse_and_emit)\s+"?([A-Za-z0-9_]+)"?')
_IMPORT = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+import\s+([\w, ()*]+)|import\s+([\w.]+))", re.M)


class Tree:
    """Files of the clone at commits, read through `git cat-file`, remembered by blob."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._trees: dict[str, dict[str, str]] = {}
        self._blobs: dict[str, str] = {}

    def paths(self, commit: str) -> dict[str, str]:
        if commit not in self._trees:
            out = subprocess.run(["git", "-C", str(self.repo), "ls-tree", "-r", commit], capture_output=True,
                                 text=True, check=False).stdout
            self._trees[commit] = {line.split("\t", 1)[1]: line.split()[2] for line in out.splitlines()}
        return self._trees[commit]

    def text(self, commit: str, path: str) -> str:
        blob = self.paths(commit).get(path)
        if blob is None:
            return ""
        if blob not in self._blobs:
            self._blobs[blob] = subprocess.run(["git", "-C", str(self.repo), "cat-file", "-p", blob],
                                               capture_output=True, text=True, check=False).stdout
        return self._blobs[blob]


def script_tests(script: str) -> dict[str, set[str]]:
    """Per op name (or emitted prefix), the test modules (repository paths) that the CI script runs for it:
    each emitted op belongs to the test script named last before it."""
    found: dict[str, set[str]] = defaultdict(set)
    current = None
    for line in script.splitlines():
        if m := _TEST.search(line):
            current = f"tests/kernels/{m.group(1)}.py"
        if current and (m := _EMIT.search(line)) and not m.group(1).startswith("$"):
            found[m.group(1)].add(current)
    return found


def _module_path(paths: dict[str, str], name: str, package: str = "") -> list[str]:
    if name.startswith("."):
        dots = len(name) - len(name.lstrip("."))
        base = package.split(".")[: len(package.split(".")) - dots + 1] if package else []
        name = ".".join([*base, name.lstrip(".")]).strip(".")
    parts = name.split(".")
    found = []
    for candidate in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if candidate in paths:
            found.append(candidate)
    return found


def imported_files(tree: Tree, commit: str, start: str) -> set[str]:
    """`start` and the files of `kernels/` and `tests/` it imports, transitively (also imports inside
    functions: a test imports its kernels where it builds them)."""
    paths = tree.paths(commit)
    seen, todo = set(), [start]
    while todo:
        path = todo.pop()
        if path in seen or path not in paths:
            continue
        seen.add(path)
        package = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        package = package if path.endswith("__init__.py") else package.rsplit(".", 1)[0]
        for m in _IMPORT.finditer(tree.text(commit, path)):
            module, names, plain = m.group(1), m.group(2), m.group(3)
            targets = []
            if plain:
                targets = [plain]
            elif module is not None:
                targets = [module] + [f"{module}.{n.strip(' ()')}" if not module.endswith(".") else
                                      f"{module}{n.strip(' ()')}" for n in names.split(",") if n.strip(" ()")]
            for target in targets:
                if not target.lstrip(".").startswith(("kernels", "tests")) and not target.startswith("."):
                    continue
                todo.extend(_module_path(paths, target, package))
    return seen


def op_files(tree: Tree) -> Files:
    """The op's own files at a commit, derived from that commit's run_benchmark.sh (remembered)."""
    cache: dict[tuple[str, str], OpFiles] = {}

    def files(op: str, commit: str) -> OpFiles:
        if (op, commit) in cache:
            return cache[op, commit]
        script = tree.text(commit, "scripts/run_benchmark.sh")
        tests = script_tests(script)
        mine = set(tests.get(op, set()))
        names = {op}
        if not mine:  # a prefix the script emits (moe_gemm2 -> moe_gemm2_atomic), longest first
            for prefix in sorted(tests, key=len, reverse=True):
                if op.startswith(prefix):
                    mine, names = set(tests[prefix]), {op, prefix}
                    break
        if not mine:  # rows the script prints from a module's table (the RDNA sweep): the module naming the op
            modules = {m for ms in tests.values() for m in ms} | {
                f"tests/kernels/{m}.py" for m in _TEST.findall(script)}
            mine = {m for m in modules if f'"{op}"' in tree.text(commit, m) or f"'{op}'" in tree.text(commit, m)}
        paths: set[str] = set()
        for test in mine:
            paths |= imported_files(tree, commit, test)
            names.add(PurePosixPath(test).name)
        data_dirs = {str(PurePosixPath(p).parent) for p in paths if p.startswith("kernels/")}
        cache[op, commit] = OpFiles(frozenset(paths), frozenset(data_dirs), frozenset(names))
        return cache[op, commit]
    return files


def git_changed_files(repo: Path) -> Callable[[str], list[str]]:
    """A commit's changed files against its first parent, read from the clone (remembered)."""
    cache: dict[str, list[str]] = {}

    def changed(commit: str) -> list[str]:
        if commit not in cache:
            out = subprocess.run(["git", "-C", str(repo), "diff", "--name-only", f"{commit}^1", commit],
                                 capture_output=True, text=True, check=False).stdout
            cache[commit] = out.split()
        return cache[commit]
    return changed


def git_script_diff(repo: Path) -> Callable[[str], str]:
    """The diff text of run_benchmark.sh in a commit (remembered)."""
    cache: dict[str, str] = {}

    def diff(commit: str) -> str:
        if commit not in cache:
            cache[commit] = subprocess.run(
                ["git", "-C", str(repo), "diff", "-U0", f"{commit}^1", commit, "--", "scripts/run_benchmark.sh"],
                capture_output=True, text=True, check=False).stdout
        return cache[commit]
    return diff


def shared(path: str) -> bool:
    return (affected.flydsl_shared(path) and not affected.is_doc(path)) or path.startswith("kernels/common/")


# ---------------------------------------------------------------- the series' levels

def scatter(values: Sequence[float]) -> float:
    """Run-to-run scatter as a fraction: robust spread of consecutive log ratios / sqrt 2, floored at a third
    of the printed resolution (CI prints small values with two digits)."""
    ratios = [math.log(b / a) for a, b in zip(values, values[1:]) if a > 0 and b > 0]
    if len(ratios) < 3:
        return math.inf
    center = statistics.median(ratios)
    spread = MAD_TO_SIGMA * statistics.median(abs(r - center) for r in ratios) / math.sqrt(2)
    gaps = [abs(a - b) for a, b in zip(sorted(set(values)), sorted(set(values))[1:])]
    resolution = min(gaps) / statistics.median(values) if gaps else 0.0
    return max(spread, resolution / 3)


def dense_samples(history: History, key: SeriesKey) -> list[tuple[int, int, float]]:
    """Main's level as every job on the runner measured it: (earliest main position, latest main position,
    value). A main run is at its commit; a job's rebuilt main lies between main's tip JOB_SPAN before the job
    ended and its tip when it ended."""
    dates = [c.order_date for c in history.main]

    def tip(ts) -> int:
        return bisect.bisect_right(dates, ts) - 1

    out = []
    for job in history.jobs_of(key):
        if job.context == "main" and job.on_main and job.commit in history.position and job.value:
            at = history.position[job.commit]
            out.append((at, at, job.value))
            continue
        if job.baseline == "main" and job.baseline_value and job.ts is not None:
            ts = job.ts if job.ts.tzinfo else job.ts.replace(tzinfo=dates[0].tzinfo)
            out.append((max(tip(ts - JOB_SPAN), 0), max(tip(ts), 0), job.baseline_value))
    return out


def _shares(samples: list[tuple[int, int, float]], a: int, b: int, old: float, new: float,
            ) -> tuple[float, float] | None:
    before = sorted((s for s in samples if s[1] <= a), key=lambda s: -s[1])[:DENSE]
    after = sorted((s for s in samples if s[0] >= b), key=lambda s: s[0])[:DENSE]
    if len(before) < 3 or len(after) < 3:
        return None

    def share(items) -> float:
        return sum(abs(math.log(v / new)) < abs(math.log(v / old)) for _, _, v in items) / len(items)
    return share(before), share(after)


def candidates(history: History, series: Series) -> list[Candidate]:
    """Every pair of consecutive measured main runs with rules 1-3 evaluated (a pair passing none is left out)."""
    measured = [p for p in series.points if p.value and p.commit in history.position]
    values = [p.value for p in measured]
    spread = scatter(values)
    samples = dense_samples(history, series.key)
    found = []
    for i in range(len(measured) - 1):
        before = values[max(0, i - LEVEL + 1): i + 1]
        after = values[i + 1: i + 1 + LEVEL]
        if len(after) < 2:
            continue
        old, new = statistics.median(before), statistics.median(after)
        change = math.log(new / old)
        threshold = max(SCATTER_K * spread, MIN_STEP)
        size_ok = abs(change) >= threshold
        naive = statistics.median(after[:2])  # what a reading of the next two runs sees
        naive_ok = abs(math.log(naive / old)) >= threshold
        if not (size_ok or naive_ok):
            continue
        nearer = [abs(math.log(v / new)) < abs(math.log(v / old)) for v in values[i + 1: i + 1 + HOLD]]
        persists = (size_ok and len(values) - i - 1 >= PERSIST and nearer[0]
                    and sum(nearer) / len(nearer) >= PERSIST_SHARE)
        if not size_ok:
            new, change = naive, math.log(naive / old)
        holds = all(abs(math.log(v / new)) < abs(math.log(v / old)) for v in after[:2])
        shares = _shares(samples, history.position[measured[i].commit], history.position[measured[i + 1].commit],
                         old, new)
        found.append(Candidate(series, i, measured[i].commit, measured[i + 1].commit, 100 * math.expm1(change),
                               100 * spread, size_ok, persists, (size_ok or naive_ok) and holds, shares,
                               abs(math.log(values[i + 1] / values[i]))))
    return found


def one_per_step(found: list[Candidate], touched: Callable[[Candidate], bool]) -> list[Candidate]:
    """Neighbouring pairs (within LEVEL runs) moving the same way are one step: the levels' medians let a step
    show at the pairs beside it too, and a run caught half way (a mode, a noisy run) can move it one pair. The
    cluster is judged by its best member (passing the rules, else a move a naive reading sees, else the
    largest own jump); it is placed at the one pair of the cluster whose range changed the op's own files,
    when exactly one did (the diff places what the levels cannot), else at its best member."""
    def rank(c: Candidate) -> tuple[bool, bool, float]:
        return c.step, c.move, c.jump

    clusters: list[list[Candidate]] = []
    for c in found:
        if clusters and c.index - clusters[-1][-1].index < LEVEL and clusters[-1][-1].faster == c.faster:
            clusters[-1].append(c)
        else:
            clusters.append([c])
    kept = []
    for cluster in clusters:
        best = max(cluster, key=rank)
        placed = [c for c in cluster if touched(c)]
        if len(placed) == 1 and placed[0] is not best:
            where = placed[0]
            best = replace(best, index=where.index, last_good=where.last_good, first_bad=where.first_bad,
                           notes=[*best.notes, f"placed at the pair whose range changed the op's files "
                                               f"(the levels put it at {best.first_bad[:8]})"])
        kept.append(best)
    return kept


# ---------------------------------------------------------------- attribution and labels

def label(history: History, changed: Callable[[str], list[str]], files: Files,
          script_diff: Callable[[str], str] = lambda commit: "") -> list[Label]:
    """Every code and environment label of the month's main series, by the procedure above."""
    touch_cache: dict[tuple[str, str, str], tuple[tuple[str, ...], bool]] = {}

    def touching(op: str, last_good: str, first_bad: str) -> tuple[tuple[str, ...], bool]:
        """(merged commits that changed the op's own files, whether any changed shared files)."""
        if (op, last_good, first_bad) not in touch_cache:
            mine = files(op, first_bad)
            own, common = [], False
            for commit in history.merged_between(last_good, first_bad):
                paths = changed(commit.hash)
                hit = any(mine.own(p) for p in paths)
                if not hit and "scripts/run_benchmark.sh" in paths:
                    text = script_diff(commit.hash)
                    hit = any(re.search(rf"\b{re.escape(n)}\b", text) for n in mine.names)
                if hit:
                    own.append(_name(commit))
                common = common or any(shared(p) for p in paths)
            touch_cache[op, last_good, first_bad] = (tuple(own), common)
        return touch_cache[op, last_good, first_bad]

    found = {key: one_per_step(candidates(history, s), lambda c: bool(touching(c.series.op, c.last_good,
                                                                                c.first_bad)[0]))
             for key, s in history.series.items()}
    at_pair: dict[tuple[str, str, str], list[Candidate]] = defaultdict(list)
    for items in found.values():
        for c in items:
            at_pair[c.series.key[0], c.last_good, c.first_bad].append(c)

    labels = []
    for key, items in found.items():
        for c in items:
            direction = "better" if c.faster else "worse"
            movers = at_pair[key[0], c.last_good, c.first_bad]
            own, common = touching(c.series.op, c.last_good, c.first_bad)
            if c.step:
                witnesses, contra = _witnesses(history, c, movers)
                if own:
                    confidence = "high" if witnesses and not contra else "medium"
                    if contra and not witnesses:
                        continue  # the merged pull request's own A/B says it did not move: not labelled
                    labels.append(_label(c, "code", direction, own, witnesses + contra + tuple(c.notes),
                                         confidence, "own files"))
                elif common:
                    if witnesses and not contra:
                        labels.append(_label(c, "code", direction, ("shared",), witnesses, "medium",
                                             "shared files"))
                else:
                    ops = {m.series.op for m in movers if m.faster == c.faster and m.step
                           and not touching(m.series.op, m.last_good, m.first_bad)[0]}
                    labels.append(_label(c, "environment", direction, (), witnesses + (
                        f"{len(ops)} ops of the runner step the same way, none of their own files changed",),
                        "high" if len(ops) >= ENV_OPS else "medium", "no change"))
            elif c.move and not own:
                ops = {m.series.op for m in movers if m.faster == c.faster and (m.move or m.step)
                       and not touching(m.series.op, m.last_good, m.first_bad)[0]}
                if len(ops) >= ENV_OPS:
                    why = "levels seen before the pair" if c.shares is not None and not c.distribution_changes \
                        else "does not persist"
                    labels.append(_label(c, "environment", direction, (), (
                        f"episode: {len(ops)} ops of the runner moved the same way, none of their own files "
                        f"changed; {why}",), "high" if why.startswith("levels") else "medium", "episode"))
    return labels


def _witnesses(history: History, c: Candidate, movers: Sequence[Candidate]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(corroboration, contradiction): same-op shapes stepping the same way at the pair, and the own CI jobs of
    the pull requests merged in the range (their last job on the runner, for this series)."""
    siblings = sorted({f"{m.series.case} {m.series.dtype}" for m in movers if m.series.op == c.series.op
                       and m.series.key != c.series.key and m.faster == c.faster and m.step})
    witnesses = [f"also {s}" for s in siblings[:3]] + ([f"and {len(siblings) - 3} more shapes"]
                                                       if len(siblings) > 3 else [])
    contra = []
    prs = {m.merged_pr for m in history.merged_between(c.last_good, c.first_bad) if m.merged_pr is not None}
    sign = 1 if c.faster else -1
    last: dict[int, Job] = {}
    for job in history.jobs_of(c.series.key):
        if job.context == "pr" and job.pr in prs and job.delta is not None and job.baseline == "main":
            if job.pr not in last or job.ts > last[job.pr].ts:
                last[job.pr] = job
    moved = [job for job in last.values() if sign * job.delta >= CORROBORATE]
    for job in sorted(last.values(), key=lambda j: j.pr):
        if sign * job.delta >= CORROBORATE:
            witnesses.append(f"#{job.pr} own run {job.delta:+.1f}%")
        elif not moved and (sign * job.delta < CONTRADICT) and abs(c.percent) >= 2 * CORROBORATE:
            contra.append(f"#{job.pr} own run {job.delta:+.1f}% (against)")
    return tuple(dict.fromkeys(witnesses)), tuple(contra)


def _name(commit) -> str:
    return f"#{commit.merged_pr}" if commit.merged_pr is not None else commit.hash[:8]


def _label(c: Candidate, kind: str, direction: str, touching: tuple[str, ...], witnesses: tuple[str, ...],
           confidence: str, evidence: str) -> Label:
    s = c.series
    return Label(s.key, s.arch, s.op, s.case, s.dtype, kind, direction, c.last_good, c.first_bad,
                 round(c.percent, 2), round(c.scatter, 2), touching, witnesses, confidence, evidence)


def as_dict(item: Label) -> dict:
    return {**asdict(item), "key": list(item.key)}


def summary(labels: Sequence[Label]) -> list[dict]:
    """Per architecture: worse and better code steps, environment labels, and how many are high confidence."""
    rows = []
    for arch in sorted({x.arch for x in labels}):
        mine = [x for x in labels if x.arch == arch]
        row: dict[str, object] = {"arch": arch}
        for name, pick in (("code worse", lambda x: x.kind == "code" and x.direction == "worse"),
                           ("code better", lambda x: x.kind == "code" and x.direction == "better"),
                           ("environment", lambda x: x.kind == "environment")):
            chosen = [x for x in mine if pick(x)]
            row[name] = len(chosen)
            row[name + " high"] = sum(x.confidence == "high" for x in chosen)
        rows.append(row)
    return rows


def scored(labels: Sequence[dict], flags: Sequence, order: dict[str, int]) -> dict[str, object]:
    """Scoring, kept for the studies that use it (it reads no label rule). Flags (yardstick `Event`s) against the worse code labels of the same series, one run apart at most
    (`yardstick.match`), with `order` placing each labelled first bad commit; flags that fall on environment
    labels are counted apart."""
    from studies.flydsl_ci.yardstick import Event, match

    events = {kind: [Event(tuple(x["key"]), "worse", order[x["first_bad"]]) for x in labels
                     if x["kind"] == kind and x["direction"] == "worse" and x["first_bad"] in order]
              for kind in ("code", "environment")}
    hits = len(match(events["code"], flags))
    return {"labels": len(events["code"]), "flags": len(flags), "hits": hits,
            "precision": hits / len(flags) if flags else None,
            "recall": hits / len(events["code"]) if events["code"] else None,
            "flags_on_environment_labels": len(match(events["environment"], flags))}


def score_nightly(db: Path, labels: Sequence[Label]) -> dict[str, object]:
    """The nightly as shipped (the default configuration, worse steps on main, replayed night by night by the
    study's `Replay`) against the labels."""
    from flybench.regress.config import RegressConfig
    from studies.flydsl_ci.yardstick import Replay

    replay = Replay(db)
    return scored([as_dict(x) for x in labels], [replay.at(f) for f in replay.flags(RegressConfig())],
                  replay.position)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from studies.flydsl_ci.data import load

    parser = argparse.ArgumentParser(prog="python -m studies.flydsl_ci.labels", description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a store holding the imported FlyDSL CI month")
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="labels.json to write")
    args = parser.parse_args(argv)
    history = load(args.db, args.flydsl_repo)
    labels = label(history, git_changed_files(args.flydsl_repo), op_files(Tree(args.flydsl_repo)),
                   git_script_diff(args.flydsl_repo))
    labels.sort(key=lambda x: (x.arch, history.position[x.first_bad], x.op, x.case, x.dtype))
    rows = summary(labels)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"procedure": "studies/flydsl_ci/labels.py (docs/data/flydsl-labels/README.md)",
                                    "summary": rows, "labels": [as_dict(x) for x in labels]}, indent=1) + "\n")
    heads = list(rows[0]) if rows else []
    print(" | ".join(heads))
    for row in rows:
        print(" | ".join(str(row[h]) for h in heads))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
