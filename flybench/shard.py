"""Dealing a run's cases to workers (the GPUs of a node) or shards (the runners of a pool), longest first.

A case's expected duration is what its earlier measurements took: the
`measure_s` of its latest record on the same machine, plus the per-case
overhead of a process of its own. A case never measured there takes an
estimate (`estimate`): the median of the known cases of its workload and
provider, else of its workload, else a stated figure per shape set. The
cases are then dealt greedily, longest first, each to the least-loaded
list (LPT): its longest list is within 4/3 of the best possible.

The deal is a function of the selection and the durations alone, sorted by
(duration, case) with ties to the lowest list, so every runner of a pool
computes the same deal from the same records: the nightly's shards read the
records committed in the checkout they all share. Runners that read
different records may deal differently, and then a case can be measured by
two shards or by none; `fingerprint` names a deal, and each shard prints it
so that the logs show whether the shards of a night agree.
"""

from __future__ import annotations

import hashlib
import heapq
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from flybench.errors import FlybenchError
from flybench.measure import record as records
from flybench.measure.record import CaseKey

CASE_OVERHEAD_S = 0.4
"""Seconds a case costs beyond its `measure_s`: asv forks its process and collects its result (0.36-0.43 s per
case over whole quick workloads on the H200, docs/measurement.md)."""
UNKNOWN_S = {"tiny": 3.0, "quick": 10.0, "full": 20.0}
"""The estimate for a case whose workload has no measured case on this machine, per shape set. Tiny (what a fresh
clone runs on a CPU): the attention workload's 25 tiny cases on this project's 2-core development machine took
3.4 s a case of measure_s (median 3.7 s: FlexAttention and XLA compile each case, 3-7 s; torch 1-1.6 s) plus 0.9 s
of process start, 109 s in all at a load average of 3-5; the 1.0 s this was before estimated 36 s for them, 3x
too low. Quick: the H200's committed quick records average 5.2 s a case, and FlexAttention's cold compiles take
10-16 s. Full: a guess (no full run has been recorded yet) that its larger shapes take twice the quick figure."""


@dataclass(frozen=True)
class Case:
    """One case to measure, with the seconds it is expected to take and whether that was measured or estimated."""

    key: CaseKey
    seconds: float
    measured: bool


def stored_durations(where: Path) -> dict[CaseKey, float]:
    """`measure_s` of each case's latest record in the case-record files at `where` (a machine's folder of a
    results tree, or one record file); nothing when it holds none."""
    paths = [where] if where.is_file() else records.files_in(where) if where.is_dir() else []
    found: dict[CaseKey, float] = {}
    for path in paths:
        for key, record in records.latest(records.read(path)[0]).items():
            seconds = record.get("measure_s")
            if type(seconds) in (int, float) and seconds >= 0:
                found[key] = float(seconds)
    return found


def estimate(keys: Iterable[CaseKey], durations: dict[CaseKey, float]) -> list[Case]:
    """Each case with its expected seconds: stored, else the median of its (workload, provider), else of its
    workload, else UNKNOWN_S of its shape set; each plus CASE_OVERHEAD_S."""
    by_pair: dict[tuple[str, str], list[float]] = {}
    by_workload: dict[str, list[float]] = {}
    for (workload, _, _, provider, _), seconds in durations.items():
        by_pair.setdefault((workload, provider), []).append(seconds)
        by_workload.setdefault(workload, []).append(seconds)
    cases = []
    for key in keys:
        workload, shape_set, _, provider, _ = key
        if key in durations:
            cases.append(Case(key, durations[key] + CASE_OVERHEAD_S, True))
            continue
        known = by_pair.get((workload, provider)) or by_workload.get(workload)
        guess = statistics.median(known) if known else UNKNOWN_S.get(shape_set, UNKNOWN_S["full"])
        cases.append(Case(key, guess + CASE_OVERHEAD_S, False))
    return cases


def deal(cases: Sequence[Case], n: int) -> list[list[Case]]:
    """`n` lists, longest case first, each case onto the list with the least expected seconds so far (ties: the
    lowest index); the same cases give the same lists in any order."""
    if n < 1:
        raise ValueError(f"cannot deal to {n} lists")
    lists: list[list[Case]] = [[] for _ in range(n)]
    loads = [(0.0, i) for i in range(n)]
    for case in sorted(cases, key=lambda c: (-c.seconds, c.key)):
        load, i = heapq.heappop(loads)
        lists[i].append(case)
        heapq.heappush(loads, (load + case.seconds, i))
    return lists


def load(cases: Iterable[Case]) -> float:
    """Expected seconds of a list."""
    return sum(c.seconds for c in cases)


def fingerprint(cases: Sequence[Case]) -> str:
    """A short name of the deal's input (cases and their expected seconds): shards that print the same one dealt
    the same lists."""
    text = "\n".join(f"{'/'.join(c.key)} {c.seconds:.3f}" for c in sorted(cases, key=lambda c: c.key))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (1 <= I <= N) as (I, N); anything else is bad input."""
    index, slash, total = text.partition("/")
    if slash and index.strip().isdigit() and total.strip().isdigit() and 1 <= int(index) <= int(total):
        return int(index), int(total)
    raise FlybenchError(f"--shard {text!r}: write I/N with 1 <= I <= N, e.g. --shard 2/4 for the second of four "
                        "shards")
