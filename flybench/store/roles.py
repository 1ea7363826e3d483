"""Role splits (flybench.model.roles) into the role_splits table, a row per model-lane case the role pass tried.

A results file's role file, `<commit8>-<env>.roles.jsonl`, is ingested after
the results as counter files are (flybench.store.counters): a file at a time,
its rows replaced whole when its bytes changed, tracked as kind `roles`, and
removed only by `--prune`. The rows are keyed like results (subject, machine,
commit, env, benchmark, params) but are no benchmark series: they live in a
table of their own, which the history scan, the heads and the alerts never
read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from flybench.benchmark_names import benchmark_name
from flybench.measure.record import key_of
from flybench.model import roles
from flybench.store.counters import ingest_record_files, remove_rows
from flybench.store.files import FileError, FileTracker

KIND = "roles"
TABLE = "role_splits"
COLUMNS = ("subject", "machine", "commit_hash", "env_name", "benchmark", "params", "status", "reason", "step_ms",
           "roles_ms", "role_events", "rest_top", "steps", "conditions", "tracer", "contract", "run_id", "started_at",
           "source_file")


def ingest_roles(conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, paths: list[Path],
                 warnings: list[str], errors: list[FileError]) -> int:
    """Store every changed role file; returns the case rows written."""
    return ingest_record_files(conn, tracker, subject, paths, KIND, roles.read, _rows, ((TABLE, COLUMNS),),
                               warnings, errors, "role-split")


def remove(conn: duckdb.DuckDBPyConnection, subject: str, relpath: str) -> None:
    """The rows of one role file (the caller holds the transaction)."""
    remove_rows(conn, subject, relpath, [TABLE])


def _rows(subject: str, relpath: str, records: list[dict[str, Any]]) -> tuple[list[dict]]:
    """The last record of each case in the file (a case traced again supersedes itself), as table rows."""
    latest = {key_of(r): r for r in records}
    rows = []
    for (workload, shape_set, case, provider, dtype), r in latest.items():
        rows.append({"subject": subject, "machine": r.get("machine", ""), "commit_hash": r.get("commit", ""),
                     "env_name": r.get("env", ""), "benchmark": benchmark_name(workload, shape_set),
                     "params": json.dumps({"case": case, "provider": provider, "dtype": dtype}),
                     "status": r["status"], "reason": r.get("reason"), "step_ms": r.get("step_ms"),
                     **{name: json.dumps(r.get(name) or {}) for name in ("roles_ms", "role_events", "conditions",
                                                                          "tracer", "contract")},
                     "rest_top": json.dumps(r.get("rest_top") or []), "steps": r.get("steps"),
                     "run_id": r.get("run_id"), "started_at": r.get("started_at"), "source_file": relpath})
    return (rows,)
