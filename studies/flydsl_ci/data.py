"""The imported FlyDSL CI history as the study reads it back from the store, never from the file.

Two kinds of measurement sit in it, and the study keeps them apart:

- main series: one value per main commit and runner, each from a different CI
  job: what `flybench regressions` walks. Their noise is run-to-run noise.
- same-job comparisons: every job also rebuilt main (or `main~N` when main
  did not build) and benchmarked it on the same runner right after the
  commit under test; `vs_main.delta_pct` is the difference. On a push to main
  the job compares main with itself (an A/A run); on a pull request it is the
  PR against main, which is what FlyDSL's 3% rule (`regression: true`) reads.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd

from flybench.importers.flydsl_ci.derive import SOURCE, run_context
from flybench.importers.flydsl_ci.mapping import map_case
from flybench.importers.git_history import CommitInfo, main_history
from flybench.regress.history import Point
from flybench.store import queries

SeriesKey = tuple[str, str, str]
"""(runner, benchmark, params JSON): one case on one machine."""


@dataclass(frozen=True)
class Series:
    """A main-branch series in commit order; values are None where the case was skipped or missing."""

    key: SeriesKey
    arch: str
    op: str
    case: str
    dtype: str
    unit: str
    points: tuple[Point, ...]

    @property
    def label(self) -> str:
        return f"{self.arch} {self.op} {self.case} {self.dtype}"


@dataclass(frozen=True)
class Job:
    """One record with FlyDSL's same-job comparison against main (re-runs included)."""

    key: SeriesKey
    arch: str
    op: str
    run_id: str
    commit: str
    ts: datetime
    context: str
    pr: int | None
    on_main: bool | None
    value: float | None
    delta: float | None  # percent, vs the main built in the same job
    baseline: str | None  # "main", "main~1", ...
    baseline_value: float | None
    flagged: bool

    @property
    def aa(self) -> bool:
        """A push to main compared with main itself: same code measured twice in one job."""
        return self.context == "main" and bool(self.on_main) and self.baseline == "main"


@dataclass
class History:
    """Everything the study needs, loaded once."""

    series: dict[SeriesKey, Series]
    jobs: list[Job]
    main: list[CommitInfo]
    position: dict[str, int] = field(init=False)
    _by_key: dict[SeriesKey, list[Job]] = field(init=False)

    def __post_init__(self) -> None:
        self.position = {c.hash: i for i, c in enumerate(self.main)}
        self._by_key = defaultdict(list)
        for job in self.jobs:
            self._by_key[job.key].append(job)

    def jobs_of(self, key: SeriesKey) -> list[Job]:
        return self._by_key.get(key, [])

    def merged_between(self, last_good: str, first_bad: str) -> list[CommitInfo]:
        """Main's commits after `last_good` up to and including `first_bad`."""
        return self.main[self.position[last_good] + 1: self.position[first_bad] + 1]

    def merge_of(self, pr: int) -> CommitInfo | None:
        return next((c for c in self.main if c.merged_pr == pr), None)


def load(db_path: str | Path, repo: str | Path, subject: str = "flydsl", main_ref: str | None = None) -> History:
    """Main series from `results`, every same-job comparison from `imported_records`, main from the clone."""
    results = queries.history(db_path, subject=subject)
    results = results[(results["source"] == SOURCE) & (results["run_context"] == "main")]
    series: dict[SeriesKey, Series] = {}
    for (machine, benchmark, params), rows in results.groupby(["machine", "benchmark", "params"], sort=False):
        record = json.loads(rows["source_record"].iloc[0])
        points = tuple(Point(c, v if s == "ok" else None)
                       for c, v, s in zip(rows["commit_hash"], rows["value"], rows["status"]))
        series[(machine, benchmark, params)] = Series(
            (machine, benchmark, params), record["arch"], record["op"], record["shape"], record["dtype"],
            rows["unit"].iloc[0], points)
    return History(series, _jobs(queries.imported_records(db_path, SOURCE, subject)), main_history(repo, main_ref))


def _jobs(records: pd.DataFrame) -> list[Job]:
    run_pr = records.groupby("run_id")["pr"].max()
    jobs = []
    for row in queries.records(records):
        raw = json.loads(row["record"])
        mapped = map_case(raw["op"], raw["shape"], raw["dtype"], raw["metric"])
        pr = run_pr.get(row["run_id"])
        pr = None if pd.isna(pr) else int(pr)
        vs_main = raw.get("vs_main") or {}
        jobs.append(Job(
            (row["runner"], mapped.benchmark, json.dumps(mapped.params)), raw["arch"], raw["op"], row["run_id"],
            row["commit_hash"], row["ts"], run_context(pr, row["on_main"], row["run_id"])[0], pr, row["on_main"],
            row["value"], vs_main.get("delta_pct"), vs_main.get("label"), vs_main.get("baseline"),
            bool(raw["regression"])))
    return jobs
