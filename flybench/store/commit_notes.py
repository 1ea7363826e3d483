"""What a subject's results tree says about its commits beyond asv's hash and date: `commits.jsonl`.

asv records a commit's hash and date only. A tree whose commits are another
repository's (FlyDSL's compile history, `results/flydsl/`) can carry one JSON
object a line in `<tree>/commits.jsonl`, written by
`python -m flybench.compile.history --notes` from the clone the history was
compiled from:

    {"hash": "...", "title": "...", "pr": 945, "wheel": "0.3.1", "llvm": "e2a39f50...",
     "failed_compiles": 16, "first_failure": "TypeError: ..."}

`wheel` is the FlyDSL wheel that compiled the commit's kernels and `llvm` the
LLVM that wheel was built from (its build commit's
`thirdparty/llvm-build-info.json`): when either differs between two commits,
the compiler changed, not only the kernel. `first_failure` is the first of the
compiler's messages at that commit, any kernel (asv stores a failed compile as
a value-less result, without the message).

`flybench ingest` keeps the notes verbatim in `imported_records` (source
`commit-notes`, one record per commit) and the titles and pull requests in
`imported_commits`, where every page already reads commit titles
(`queries.commit_titles`). Re-reading the file replaces the subject's notes.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb

from flybench.errors import FlybenchError
from flybench.file_kinds import describe

FILE = "commits.jsonl"
SOURCE = "commit-notes"
FIELDS = ("title", "pr", "wheel", "llvm", "failed_compiles", "first_failure")


def read(tree: Path) -> list[dict[str, Any]]:
    """The tree's commit notes, checked; [] when it has none. Anything at the file's path but a regular file of
    UTF-8 text is an error, said before anything is stored: a FIFO or a folder there was passed over in silence,
    and bytes that are not text raised a traceback."""
    path = tree / FILE
    what = describe(path)
    if what == "nothing":
        return []
    if what != "a regular file":
        raise FlybenchError(f"{path} is {what}, not the commit notes file flybench writes, so it was not read and "
                            "nothing was stored: move it aside (python -m flybench.compile.history --notes writes "
                            "the file) and ingest again")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FlybenchError(f"{path}: not UTF-8 text (byte {exc.start}), so no commit notes file; nothing was "
                            "stored: restore it or move it aside, and ingest again") from exc
    except OSError as exc:
        raise FlybenchError(f"cannot read {path} ({exc.strerror or exc}); nothing was stored") from exc
    notes = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            note = json.loads(line)
        except ValueError as exc:
            raise FlybenchError(f"{path}:{number}: not JSON ({exc})") from exc
        if not isinstance(note, dict) or not isinstance(note.get("hash"), str) or not note["hash"]:
            raise FlybenchError(f"{path}:{number}: a commit note is an object with a \"hash\"")
        wrong = next((k for k in FIELDS if note.get(k) is not None and (
            not isinstance(note[k], _KINDS[k][0]) or isinstance(note[k], bool))), None)
        if wrong is not None:
            raise FlybenchError(f"{path}:{number}: \"{wrong}\" is {_KINDS[wrong][1]} or null, "
                                f"not {json.dumps(note[wrong])}")
        notes.append({"hash": note["hash"], **{k: note.get(k) for k in FIELDS}})
    return notes


_KINDS = {"title": (str, "text"), "pr": (int, "a pull request number"), "wheel": (str, "a version (text)"),
          "llvm": (str, "a commit (text)"), "failed_compiles": (int, "a count"), "first_failure": (str, "text")}
"""What each field of a note holds: a title as a list was stored as the text "[1, 2]"."""


def store(conn: duckdb.DuckDBPyConnection, subject: str, notes: list[dict[str, Any]]) -> int:
    """Replace the subject's stored notes with `notes`; how many were stored."""
    conn.execute("DELETE FROM imported_records WHERE source = ? AND subject = ?", [SOURCE, subject])
    conn.execute("DELETE FROM imported_commits WHERE source = ? AND subject = ?", [SOURCE, subject])
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    for note in notes:
        conn.execute("INSERT INTO imported_records (source, subject, run_id, runner, op, shape, dtype, metric, "
                     "commit_hash, ts, pr, status, value, record, file) VALUES (?, ?, ?, '', 'commit', '', '', "
                     "'notes', ?, ?, ?, 'ok', NULL, ?, ?)",
                     [SOURCE, subject, note["hash"], note["hash"], now, note["pr"], json.dumps(note), FILE])
        conn.execute("INSERT INTO imported_commits (source, subject, hash, first_seen, order_date, ordered_by, "
                     "on_main, main_position, title, merged_pr) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)",
                     [SOURCE, subject, note["hash"], now, now, FILE, note["title"], note["pr"]])
    return len(notes)
