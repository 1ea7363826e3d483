"""Storing a subject's machine code history (`<tree>/machine-code.jsonl`, flybench.compile.machine_code) in the
`machine_code` table.

The file is the truth: each ingest replaces the subject's rows with the
file's records, so ingesting twice stores the same rows once, and the store
can always be rebuilt from the file. A line that is no record is refused
with its line number and reason; the others are stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from flybench.compile import machine_code

FILE = machine_code.FILE
COLUMNS = ("subject", "hash", "kernel", "arch", "code_hash", "status", "library", "detail", "metrics")


def read(tree: Path) -> tuple[list[dict[str, Any]], list[str]] | None:
    """The tree's records and a message per refused line; None when the tree has no such file."""
    path = tree / FILE
    return machine_code.read(path) if path.is_file() else None


def store(conn: duckdb.DuckDBPyConnection, subject: str, records: list[dict[str, Any]]) -> int:
    """Replace the subject's machine code rows with `records`; how many were stored."""
    conn.execute("DELETE FROM machine_code WHERE subject = ?", [subject])
    if not records:
        return 0
    frame = pd.DataFrame([{"subject": subject, **{k: r.get(k) for k in COLUMNS[1:-1]},
                           "metrics": json.dumps(r["metrics"]) if r.get("metrics") is not None else None}
                          for r in records], columns=list(COLUMNS), dtype=object)
    conn.register("incoming_machine_code", frame)
    try:
        conn.execute("INSERT INTO machine_code BY NAME SELECT * FROM incoming_machine_code")
    finally:
        conn.unregister("incoming_machine_code")
    return len(records)
