"""Storing a subject's machine code history (`<tree>/machine-code.jsonl`, flybench.compile.machine_code) in the
`machine_code` table.

The file is the truth when it is read whole: each ingest then replaces the
subject's rows with the file's records, so ingesting twice stores the same
rows once, and the store can always be rebuilt from the file. A file read in
part is no such truth: a line that is no record (torn, another format's, as a
newer writer would write it) is refused with its line number and reason, the
good lines are stored over the rows of the same (commit, kernel, target), and
every other stored row is kept, since the refused lines may be the very
records those rows came from. A file that cannot be read at all (a FIFO, a
device, a folder, no permission) or that holds no record is refused whole and
the stored rows are kept, as a refused results file keeps its rows: a file
emptied by a full disk or a damaged copy must not wipe a month's machine code.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from flybench.compile import machine_code
from flybench.file_kinds import describe

FILE = machine_code.FILE
COLUMNS = ("subject", "hash", "kernel", "arch", "code_hash", "status", "library", "detail", "metrics")


@dataclass(frozen=True)
class CodeFile:
    """What a tree's machine code file gave: its good records, and a message per line (or for the whole file)
    refused. Only a file without refusals replaces the stored rows (`whole`)."""

    records: list[dict[str, Any]]
    refused: list[str] = field(default_factory=list)

    @property
    def whole(self) -> bool:
        return not self.refused


def read(tree: Path) -> CodeFile | None:
    """The tree's machine code file, checked; None when the tree has none (nothing at its path). A refusal of a
    line starts with the file's path; one of the whole file does not."""
    path = tree / FILE
    if not os.path.lexists(path):
        return None
    what = describe(path)
    if what != "a regular file":  # a FIFO blocks the read, /dev/zero never ends, a folder or dead link says nothing
        return CodeFile([], [f"it is {what}, not a file flybench writes, so it was not read; the machine code "
                             "stored before is kept: move it aside (or restore the file) and ingest again"])
    try:
        records, refused = machine_code.read(path)
    except OSError as exc:
        return CodeFile([], [f"it cannot be read ({exc.strerror or exc}); the machine code stored before is kept: "
                             "make it readable (chmod u+r) and ingest again"])
    if not records and not refused:
        refused = ["it holds no record: an empty file is taken for a damaged one, not as the end of the "
                   "subject's machine code, so the machine code stored before is kept; restore the file (python -m "
                   "flybench.compile.code_history writes it) and ingest again"]
    return CodeFile(records, refused)


def store(conn: duckdb.DuckDBPyConnection, subject: str, code: CodeFile) -> int:
    """Store the file's records: in place of the subject's rows when the file was read whole, else over the rows
    of the same (commit, kernel, target) only; how many were stored."""
    if code.whole:
        conn.execute("DELETE FROM machine_code WHERE subject = ?", [subject])
    if not code.records:
        return 0
    frame = pd.DataFrame([{"subject": subject, **{k: r.get(k) for k in COLUMNS[1:-1]},
                           "metrics": json.dumps(r["metrics"]) if r.get("metrics") is not None else None}
                          for r in code.records], columns=list(COLUMNS), dtype=object)
    conn.register("incoming_machine_code", frame)
    try:
        conn.execute("INSERT OR REPLACE INTO machine_code BY NAME SELECT * FROM incoming_machine_code")
    finally:
        conn.unregister("incoming_machine_code")
    return len(code.records)


def count(conn: duckdb.DuckDBPyConnection, subject: str) -> int:
    """How many machine code rows the subject has stored."""
    return conn.execute("SELECT count(*) FROM machine_code WHERE subject = ?", [subject]).fetchone()[0]
