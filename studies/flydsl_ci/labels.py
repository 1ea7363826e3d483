"""Labels for the nightly's yardstick, from evidence the detector never reads: which commits touched a kernel.

The procedure, per main series (one case of one CI op on one runner), at
each pair of consecutive measured main runs (A, B):

1. **Touched.** A FlyDSL commit merged after A up to B changed the op's
   code, read from that commit's own diff: a file in the directory of the
   op's kernel module (the compile registry's entries for the op,
   `KernelCase.ci_op`; an op the registry lacks takes the directories of
   the registered ops named with the same first word), in
   `kernels/common/`, or the compiler and build (`affected.flydsl_shared`).
2. **Size against scatter.** The median of up to LEVEL runs from B on
   differs from the median of up to LEVEL runs up to A by at least
   SCATTER_K times the series' run-to-run scatter (the robust spread of
   the log ratios of consecutive runs, over the whole month) and at least
   MIN_STEP.
3. **Persistence.** At least PERSIST runs from B on, each nearer the new
   level than the old.
4. **Corroboration.** Another case of the same op on the same runner passes
   2 and 3 at the same pair in the same direction, or a pull request merged
   in the pair's range measured the case on that runner, in its own CI job
   against main (`vs_main`), at least CORROBORATE in that direction.

A pair passing 1-4 is a **code** step, worse or better. A pair passing 2
and 3 with no commit touching the op's code, at which series of at least ENV_OPS
ops of the runner that no commit in the range touched pass 2 and 3 in the
same direction (a runner episode: per-job modes move whole ops; the episode
is its corroboration), is an **environment** step. Nothing else is labelled. The detector's fit,
thresholds and flags are never read, and the imported history is read from
the store (as the study's other parts read it), never copied.

An op with no registered kernel of its first word (the Navi-only ops) can be
touched only by shared code.
"""

from __future__ import annotations

import math
import statistics
import subprocess
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from flybench.compile import affected, registry
from studies.flydsl_ci.data import History, Series, SeriesKey

LEVEL = 3
"""Runs on each side whose median is the level."""
SCATTER_K = 3.0
MIN_STEP = 0.015
PERSIST = 2
CORROBORATE = 2.0  # percent, a pull request's own vs_main
ENV_OPS = 3
MAD_TO_SIGMA = 1.4826


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
    touched_by: tuple[str, ...]  # the merged commits that changed the op's code (short hashes, PR numbers)
    witnesses: tuple[str, ...]  # what corroborates it


@dataclass(frozen=True)
class Candidate:
    """A pair of consecutive measured runs of one series that passes size and persistence."""

    series: Series
    last_good: str
    first_bad: str
    percent: float
    scatter: float


def op_directories(ops: Sequence[str]) -> dict[str, set[str]]:
    """Per CI op, the directories of its kernel modules in the compile registry; an op the registry lacks
    takes those of the registered ops whose names start with the same word (moe_w4a16_s1: every moe op's)."""
    found: dict[str, set[str]] = defaultdict(set)
    for case in registry.CASES.values():
        if case.origin == "checkout" and case.ci_op:
            found[case.ci_op].add(str(PurePosixPath(case.module).parent))
    for op in ops:
        if op not in found:
            kin = {d for name, dirs in list(found.items()) if name.split("_")[0] == op.split("_")[0] for d in dirs}
            if kin:
                found[op] = kin
    return dict(found)


def touches(path: str, directories: set[str]) -> bool:
    return (any(path.startswith(d + "/") for d in directories) or path.startswith("kernels/common/")
            or (affected.flydsl_shared(path) and not affected.is_doc(path)))


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


def scatter(series: Series) -> float:
    """The run-to-run scatter of a series as a fraction: robust spread of consecutive log ratios, / sqrt 2."""
    values = [p.value for p in series.points if p.value]
    ratios = [math.log(b / a) for a, b in zip(values, values[1:]) if a > 0 and b > 0]
    if len(ratios) < 3:
        return math.inf
    center = statistics.median(ratios)
    return MAD_TO_SIGMA * statistics.median(abs(r - center) for r in ratios) / math.sqrt(2)


def candidates(series: Series) -> list[Candidate]:
    """Pairs that pass size against scatter and persistence (steps 2 and 3)."""
    measured = [p for p in series.points if p.value]
    spread = scatter(series)
    found = []
    for i in range(len(measured) - 1):
        before = [p.value for p in measured[max(0, i - LEVEL + 1): i + 1]]
        after_points = measured[i + 1:]
        after = [p.value for p in after_points[:LEVEL]]
        if len(after_points) < PERSIST or not before:
            continue
        old, new = statistics.median(before), statistics.median(after)
        change = math.log(new / old)
        if abs(change) < max(SCATTER_K * spread, MIN_STEP):
            continue
        if not all(abs(p.value - new) < abs(p.value - old) for p in after_points[:PERSIST]):
            continue
        found.append((i, Candidate(series, measured[i].commit, measured[i + 1].commit, 100 * math.expm1(change),
                                   100 * spread)))
    return _one_per_step(found, measured)


def _one_per_step(found: list[tuple[int, Candidate]], measured: list) -> list[Candidate]:
    """Neighbouring pairs (within LEVEL runs) moving the same way are one step, at the pair whose own two runs
    differ most (its edge): the levels' medians let a step show at the pairs beside it too."""
    def jump(i: int) -> float:
        return abs(math.log(measured[i + 1].value / measured[i].value))

    kept: list[tuple[int, Candidate]] = []
    for i, c in found:
        if kept and i - kept[-1][0] < LEVEL and _faster(kept[-1][1]) == _faster(c):
            if jump(i) > jump(kept[-1][0]):
                kept[-1] = (i, c)
            continue
        kept.append((i, c))
    return [c for _, c in kept]


def label(history: History, changed: Callable[[str], list[str]]) -> list[Label]:
    """Every code and environment step of the month's main series, by the procedure above."""
    directories = op_directories(sorted({s.op for s in history.series.values()}))

    def touching(op: str, last_good: str, first_bad: str) -> tuple[str, ...]:
        if op not in directories:
            return ()
        return tuple(_name(m) for m in history.merged_between(last_good, first_bad)
                     if any(touches(f, directories[op]) for f in changed(m.hash)))

    found = {key: candidates(s) for key, s in history.series.items()}
    by_pair: dict[tuple[str, str, str], list[Candidate]] = defaultdict(list)  # (runner, last_good, first_bad)
    for items in found.values():
        for c in items:
            by_pair[c.series.key[0], c.last_good, c.first_bad].append(c)
    labels = []
    for key, items in found.items():
        for c in items:
            faster = _faster(c)
            movers = by_pair[key[0], c.last_good, c.first_bad]
            witnesses = _witnesses(history, c, faster, movers)
            direction = "better" if faster else "worse"
            if by := touching(c.series.op, c.last_good, c.first_bad):
                if witnesses:
                    labels.append(_label(c, "code", direction, by, witnesses))
                continue
            untouched_ops = {m.series.op for m in movers if _faster(m) == faster
                             and not touching(m.series.op, m.last_good, m.first_bad)}
            if len(untouched_ops) >= ENV_OPS:
                labels.append(_label(c, "environment", direction, (), witnesses + (
                    f"{len(untouched_ops)} untouched ops moved the same way on the runner",)))
    return labels


def _faster(c: Candidate) -> bool:
    """Whether the new level is faster: CI's metrics are throughputs and speedups (bigger is better)."""
    return c.percent > 0


def _witnesses(history: History, c: Candidate, faster: bool, movers: Sequence[Candidate]) -> tuple[str, ...]:
    siblings = [m.series.case + " " + m.series.dtype for m in movers
                if m.series.op == c.series.op and m.series.key != c.series.key and _faster(m) == faster]
    witnesses = [f"also {s}" for s in sorted(set(siblings))[:3]]
    prs = {m.merged_pr for m in history.merged_between(c.last_good, c.first_bad) if m.merged_pr is not None}
    sign = 1 if faster else -1
    for job in history.jobs_of(c.series.key):
        if job.context == "pr" and job.pr in prs and job.delta is not None and sign * job.delta >= CORROBORATE:
            witnesses.append(f"#{job.pr} own run {job.delta:+.1f}%")
    return tuple(dict.fromkeys(witnesses))


def _measured_at(series: Series, commit: str) -> bool:
    return any(p.commit == commit and p.value for p in series.points)


def _name(commit) -> str:
    return f"#{commit.merged_pr}" if commit.merged_pr is not None else commit.hash[:8]


def _label(c: Candidate, kind: str, direction: str, touching: tuple[str, ...], witnesses: tuple[str, ...]) -> Label:
    s = c.series
    return Label(s.key, s.arch, s.op, s.case, s.dtype, kind, direction, c.last_good, c.first_bad,
                 round(c.percent, 2), round(c.scatter, 2), touching, witnesses)


def as_dict(item: Label) -> dict:
    return {**asdict(item), "key": list(item.key)}


def scored(labels: Sequence[dict], flags: Sequence, order: dict[str, int]) -> dict[str, object]:
    """Flags (yardstick `Event`s) against the worse code labels of the same series, one run apart at most
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
    labels = label(load(args.db, args.flydsl_repo), git_changed_files(args.flydsl_repo))
    scores = score_nightly(args.db, labels)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"procedure": "studies/flydsl_ci/labels.py", "nightly_as_shipped": scores,
                                    "labels": [as_dict(x) for x in labels]}, indent=1) + "\n")
    print(json.dumps(scores))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
