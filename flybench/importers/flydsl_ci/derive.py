"""From stored FlyDSL CI records to flybench's tables: run context, commit order, result rows.

`imported_records` keeps every record FlyDSL published, re-runs included.
`results` gets one row per (runner, commit, run context, case), as asv keeps
one result per commit and machine: when a commit was run twice in the same
context, the later job's record wins (the earlier stays in
`imported_records`). Results are derived again from the stored records
whenever their commits gain records, so the outcome never depends on the
order in which files were imported.

Run context, which separates the series the regression scan walks:

- `pr`: a run that carries a PR number on any of its records (FlyDSL's ingest
  sometimes resolves the PR for one runner's job and not another's). Each PR
  is its own environment, `flydsl-ci-pr<N>`: a PR's pushes form a short
  history of their own and never mix into main's.
- `branch`: no PR number, and a clone says the commit is not on main (a PR
  run whose PR FlyDSL could not resolve). Each run is its own environment.
- `main`: the rest, environment `flydsl-ci`. Without a clone this is
  FlyDSL's convention (`pr: null` is main), which is known to admit some
  unresolved PR runs; docs/flydsl-ci-study.md counts them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from flybench.importers.flydsl_ci.mapping import map_case
from flybench.importers.flydsl_ci.read import Record
from flybench.importers.git_history import Clone

SOURCE = "flydsl-ci"
MAIN_ENV = "flydsl-ci"
STATUS = {"ok": "ok", "skip": "skipped", "missing": "missing"}
_REASON = {
    "skip": "FlyDSL's CI skipped this case (its table says 'skip')",
    "missing": "FlyDSL's CI printed no value for this case (its table says '-' or 'missing')",
}
BELOW_PRINTED = ("FlyDSL's CI printed 0.0 {metric}: a rate below the precision it prints, not one a kernel can "
                 "have; kept as missing, not as a value")


def below_printed(record: Record) -> bool:
    """An ok record whose value is 0: FlyDSL prints rates to a fixed precision, and its tiniest cases (S1, S7
    attention: 752 records of its 2026-06/07 month) print 0.0. Stored, never as an ok value of 0."""
    return record.status == "ok" and record.value == 0


CONTRACT = {"source": SOURCE, "method": "FlyDSL tests/test_common.perftest", "values": "one per CI job, no samples"}
"""Imported rows compare with each other, never with a flybench contract."""
_CONTRACT_JSON = json.dumps(CONTRACT)


@dataclass(frozen=True)
class CommitRow:
    """One `imported_commits` row: what orders the commit and whether it is on main."""

    hash: str
    first_seen: datetime
    order_date: datetime
    ordered_by: str  # git-main, git or ci-timestamp
    on_main: bool | None
    main_position: int | None = None
    title: str | None = None
    merged_pr: int | None = None


def commit_rows(first_seen: dict[str, datetime], clone: Clone | None,
                stored: dict[str, CommitRow]) -> dict[str, CommitRow]:
    """Order and membership of each commit: from the clone when given, else as stored, else by CI time."""
    rows: dict[str, CommitRow] = {}
    for commit, seen in first_seen.items():
        info = clone.commits.get(commit) if clone else None
        if info is not None:
            rows[commit] = CommitRow(commit, seen, info.order_date, "git-main" if info.on_main else "git",
                                     info.on_main, info.main_position, info.title, info.merged_pr)
        elif clone is not None:
            rows[commit] = CommitRow(commit, seen, seen, "ci-timestamp", clone.on_main(commit, seen))
        elif commit in stored:  # an earlier import had a clone: keep what it learnt
            old = stored[commit]
            rows[commit] = replace(old, first_seen=seen, order_date=seen if old.ordered_by == "ci-timestamp"
                                   else old.order_date)
        else:
            rows[commit] = CommitRow(commit, seen, seen, "ci-timestamp", None)
    return rows


def result_rows(subject: str, records: Iterable[tuple[Record, str]],
                commits: dict[str, CommitRow]) -> list[dict[str, Any]]:
    """One results row per (runner, commit, context, case): the latest job's record of it."""
    records = list(records)
    run_pr: dict[str, int] = {}
    for record, _ in records:
        if record.pr is not None:
            run_pr[record.run_id] = record.pr
    chosen: dict[tuple, tuple[Record, str, dict[str, Any]]] = {}
    for record, file in records:
        row = _row(subject, record, file, run_pr.get(record.run_id), commits[record.commit].on_main)
        key = (row["machine"], row["commit_hash"], row["env_name"], row["benchmark"], row["params"])
        if key not in chosen or _later(record, chosen[key][0]):
            chosen[key] = (record, file, row)
    return [row for _, _, row in chosen.values()]


def branches(rows: Iterable[dict[str, Any]]) -> dict[str, str | None]:
    """The commits table's branch: main if any main run measured it, else the first PR that did."""
    seen: dict[str, set[tuple[str, int | None]]] = defaultdict(set)
    for row in rows:
        seen[row["commit_hash"]].add((row["run_context"], row["pr"]))
    result: dict[str, str | None] = {}
    for commit, contexts in seen.items():
        prs = sorted(pr for ctx, pr in contexts if ctx == "pr" and pr is not None)
        result[commit] = "main" if ("main", None) in contexts else (f"pull/{prs[0]}" if prs else None)
    return result


def run_context(run_pr: int | None, on_main: bool | None, run_id: str) -> tuple[str, str]:
    """(run context, environment name) of a run, from its PR (if any record of it has one) and its commit."""
    if run_pr is not None:
        return "pr", f"{MAIN_ENV}-pr{run_pr}"
    if on_main is False:
        return "branch", f"{MAIN_ENV}-run{run_id}"
    return "main", MAIN_ENV


def _row(subject: str, record: Record, file: str, pr: int | None, on_main: bool | None) -> dict[str, Any]:
    raw = record.raw
    context, env = run_context(pr, on_main, record.run_id)
    benchmark, params, shape = _mapped(raw["op"], raw["shape"], raw["dtype"], raw["metric"])
    value = record.value
    status, reason = STATUS[record.status], _REASON.get(record.status)
    if below_printed(record):
        status, reason, value = "missing", BELOW_PRINTED.format(metric=raw["metric"]), None
    return {
        "subject": subject, "machine": record.runner, "commit_hash": record.commit, "env_name": env,
        "benchmark": benchmark, "params": params, "unit": raw["metric"], "value": value,
        "started_at": record.ts, "status": status, "reason": reason,
        "contract": _CONTRACT_JSON,
        "tflops": value if raw["metric"] == "TFLOPS" else None,
        "gbps": value * 1000 if raw["metric"] == "TB/s" and value is not None else None,
        "device": _device(raw["arch"], record.runner),
        "run_id": record.run_id, "source_file": file, "source": SOURCE, "run_context": context, "pr": pr,
        "shape": shape, "source_regression": raw["regression"], "source_record": record.canonical,
    }


@lru_cache(maxsize=None)
def _mapped(op: str, shape: str, dtype: str, metric: str) -> tuple[str, str, str | None]:
    """Benchmark name, params JSON and shape JSON of a case (a file repeats each case once per job)."""
    mapped = map_case(op, shape, dtype, metric)
    return mapped.benchmark, json.dumps(mapped.params), None if mapped.shape is None else json.dumps(mapped.shape)


@lru_cache(maxsize=None)
def _device(arch: str, runner: str) -> str:
    return json.dumps({"arch": arch, "runner": runner})


def _later(a: Record, b: Record) -> bool:
    """Job completion time decides; the run id breaks ties (GitHub's run ids grow with time)."""
    return (a.ts, a.run_id.zfill(20)) > (b.ts, b.run_id.zfill(20))
