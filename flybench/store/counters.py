"""Counter records (flybench.counters.record) into the counter_cases and counters tables.

A results file's counter sidecar, `<commit8>-<env>.counters.jsonl`, is
ingested after the results, a file at a time: its rows are replaced whole
when its bytes changed, and left alone when they did not. A file read in
part (lines skipped) replaces only the rows of the cases its good lines
hold, and one that holds no record is refused with its rows kept: an
emptied file took its rows with it, without a word. It is tracked
like every other ingested file (kind `counters`), so a file that vanished
takes its rows only when the user asks (`--prune`). A counter pass never
adds timing rows; these tables are read beside results, never instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from flybench.benchmark_names import benchmark_name
from flybench.counters import DERIVED, WATCHED_DERIVED
from flybench.counters import record as counter_records
from flybench.measure.record import key_of
from flybench.store.files import BadInput, FileError, FileTracker, reason, refuse_binary

KIND = "counters"
CASE_COLUMNS = ("subject", "machine", "commit_hash", "env_name", "benchmark", "params", "status", "reason", "tool",
                "tool_version", "arch", "counter_names", "kernels", "min_bytes", "contract", "run_id", "started_at",
                "source_file")
COUNTER_COLUMNS = ("subject", "machine", "commit_hash", "env_name", "benchmark", "params", "counter", "kind",
                   "value", "unit", "fixed", "tool", "source_file")


def ingest_counters(conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, paths: list[Path],
                    warnings: list[str], errors: list[FileError]) -> int:
    """Store every changed counter file; returns the counter rows written. Runs each file in its own
    transaction, so one file that cannot be read (an error of the ingest) keeps the others and its own old rows."""
    return ingest_record_files(conn, tracker, subject, paths, KIND, counter_records.read, _rows,
                               (("counter_cases", CASE_COLUMNS), ("counters", COUNTER_COLUMNS)), warnings, errors,
                               "counter")


def ingest_record_files(conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, paths: list[Path],
                        kind: str, read: Callable[[Path], tuple[list[dict], list[str]]],
                        rows: Callable[[str, str, list[dict]], tuple[list[dict], ...]],
                        tables: tuple[tuple[str, tuple[str, ...]], ...], warnings: list[str],
                        errors: list[FileError], what: str) -> int:
    """Store every changed record file of one kind beside the results (counter records, role splits): its rows,
    `rows(subject, relpath, records)` one list per table of `tables`, replace the file's old rows whole, in a
    transaction of its own. Returns the rows written to the last table."""
    written = 0
    for path in paths:
        if tracker.is_unchanged(path, kind):
            continue
        try:
            fingerprint = tracker.fingerprint(path, kind)
            refuse_binary(path)
            records, skipped = read(path)
        except (OSError, BadInput) as exc:  # a FIFO, a device or a binary file there is refused (BadInput)
            errors.append(FileError(str(path), f"{reason(exc)}; its {what} rows were not loaded"))
            continue
        relpath = tracker.relpath(path)
        if not records:  # emptied (a full disk, a damaged copy) or of another format: not the end of its rows
            first = skipped[0].removeprefix(f"{path}, ") if skipped else ""
            errors.append(FileError(str(path), f"it holds no {what} record"
                                    + (f" ({len(skipped)} line{'s' * (len(skipped) > 1)} skipped; {first})"
                                       if skipped else "")
                                    + "; what was stored from it is kept: restore it from its runner, or move it "
                                    "aside, and ingest again"))
            continue
        warnings += skipped
        found = rows(subject, relpath, records)
        # A file read in part replaces only the rows of the cases its good lines hold: the skipped lines may be
        # the very records the other stored rows came from.
        cases = {(row["benchmark"], row["params"]) for table_rows in found for row in table_rows} if skipped else None
        if skipped and tracker.is_known(relpath):
            warnings.append(f"{path}: the stored {what} rows of cases no good line holds are kept")
        conn.begin()
        try:
            remove_rows(conn, subject, relpath, [table for table, _ in tables], cases)
            for (table, columns), table_rows in zip(tables, found):
                if table_rows:
                    conn.register("incoming_records", pd.DataFrame(table_rows, columns=list(columns), dtype=object))
                    conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming_records")
                    conn.unregister("incoming_records")
            tracker.record(fingerprint)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        written += len(found[-1])
    return written


def remove(conn: duckdb.DuckDBPyConnection, subject: str, relpath: str) -> None:
    """The rows of one counter file (the caller holds the transaction)."""
    remove_rows(conn, subject, relpath, ["counter_cases", "counters"])


def remove_rows(conn: duckdb.DuckDBPyConnection, subject: str, relpath: str, tables: list[str],
                cases: set[tuple[str, str]] | None = None) -> None:
    """The rows one record file put in these tables, or only those of `cases` (benchmark, params) when given (the
    caller holds the transaction)."""
    for table in tables:
        if cases is None:
            conn.execute(f"DELETE FROM {table} WHERE subject = ? AND source_file = ?", [subject, relpath])
        else:
            conn.execute(f"DELETE FROM {table} WHERE subject = ? AND source_file = ? AND list_contains("
                         "?::VARCHAR[], benchmark || chr(31) || params::VARCHAR)",
                         [subject, relpath, [f"{benchmark}\x1f{params}" for benchmark, params in cases]])


def _rows(subject: str, relpath: str, records: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """The last record of each case in the file (a case profiled again supersedes itself), as table rows."""
    latest = {key_of(r): r for r in records}
    cases, counters = [], []
    for (workload, shape_set, case, provider, dtype), r in latest.items():
        key = {"subject": subject, "machine": r.get("machine", ""), "commit_hash": r.get("commit", ""),
               "env_name": r.get("env", ""), "benchmark": benchmark_name(workload, shape_set),
               "params": json.dumps({"case": case, "provider": provider, "dtype": dtype}), "source_file": relpath}
        cases.append({**key, "status": r["status"], "reason": r.get("reason"), "tool": r.get("tool", ""),
                      "tool_version": r.get("tool_version"), "arch": r.get("arch"),
                      "counter_names": sorted(r.get("counters", {})), "kernels": json.dumps(r.get("kernels", [])),
                      "min_bytes": r.get("min_bytes"), "contract": json.dumps(r.get("contract", {})),
                      "run_id": r.get("run_id"), "started_at": r.get("started_at")})
        described = r.get("counters", {})
        for name, value in r.get("total", {}).items():
            unit, _, fixed = (described.get(name) or ["", "", False])[:3]
            counters.append({**key, "counter": name, "kind": "counter", "value": value, "unit": unit,
                             "fixed": bool(fixed), "tool": r.get("tool", "")})
        for name, value in r.get("derived", {}).items():
            counters.append({**key, "counter": name, "kind": "derived", "value": value,
                             "unit": DERIVED[name].unit if name in DERIVED else "", "fixed": name in WATCHED_DERIVED,
                             "tool": r.get("tool", "")})
    return cases, counters
