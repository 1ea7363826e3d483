"""Which files were ingested, whether they changed since, and why one was not.

A file is unchanged when its size and mtime match what was stored; when they
differ its sha256 decides, so a file that was only touched (copied, checked
out again) is not read twice. Paths are stored relative to the results
directory so a moved results tree is still recognised. Something at a
file's path that cannot be read (no permission, a folder, a broken link) is
never taken as unchanged: reading it says why, in the report, every time.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import duckdb

from flybench.file_kinds import describe


@dataclass(frozen=True)
class FileError:
    """A file that was not ingested, and why."""

    path: str
    message: str


class BadInput(ValueError):
    """What is wrong with a file's content, worded for the person who reads the report (shown as it is)."""


def reason(exc: BaseException) -> str:
    """What a file's error says in the report.

    flybench's own refusals (`BadInput`) are shown as they are; a file that
    cannot be read gets what to do about it; anything else (asv's or
    Python's words) keeps its exception's name, which is part of what it says.
    """
    if isinstance(exc, BadInput):
        return str(exc)
    said = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
        return f"{said}; make it readable (chmod u+r) and ingest again (what was stored from it is kept)"
    if isinstance(exc, OSError) and exc.errno == errno.EISDIR:
        return f"{said}; a folder is named like a file asv or flybench writes here: move it aside and ingest again"
    return said


@dataclass(frozen=True)
class Fingerprint:
    """What identifies one version of a file."""

    path: str
    kind: str
    mtime_ns: int
    size: int
    sha256: str


def fingerprint(path: Path, relpath: str, kind: str) -> Fingerprint:
    """The file's fingerprint now, stored under `relpath` (its path relative to the results tree)."""
    return read_fingerprinted(path, relpath, kind)[0]


def refuse_special(path: Path) -> None:
    """Raise BadInput when `path` is a FIFO, a device or a socket: reading a FIFO blocks until someone writes to
    it and /dev/zero never ends, so an ingest named like a results file hung until it was killed. Folders and
    broken links are left to the read, whose error says what they are."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise BadInput(f"it is {describe(path)}, not a file asv or flybench writes, so it was not read (only regular "
                       "files are); move it aside and ingest again (what was stored from it is kept)")


def refuse_binary(path: Path) -> None:
    """Raise BadInput when a record file holds bytes that are not UTF-8. The reader (flybench.jsonl) skips such a
    line as it skips a torn one, which suits a run reading its own records; but a binary file there is no record
    file, and storing it as one with its lines skipped would replace the rows stored from it with none."""
    content = path.read_bytes()
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text (byte {exc.start} is {content[exc.start]:#04x}), so no record file: restore "
                       "it from its runner, or move it aside, and ingest again (what was stored from it is "
                       "kept)") from exc


def read_fingerprinted(path: Path, relpath: str, kind: str) -> tuple[Fingerprint, bytes]:
    """The file's fingerprint and the very bytes it was taken of, so that a file is read only once."""
    refuse_special(path)
    info = path.stat()
    content = path.read_bytes()
    return Fingerprint(relpath, kind, info.st_mtime_ns, info.st_size, hashlib.sha256(content).hexdigest()), content


class FileTracker:
    """The ingested_files rows of one subject, read once and kept in step with the table."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, subject: str, results_dir: Path) -> None:
        self._conn = conn
        self._subject = subject
        self._root = results_dir
        rows = conn.execute(
            "SELECT path, kind, mtime_ns, size, sha256 FROM ingested_files WHERE subject = ?", [subject]
        ).fetchall()
        self._known = {path: (mtime_ns, size, sha) for path, _, mtime_ns, size, sha in rows}
        self._kinds = {path: kind for path, kind, *_ in rows}
        self._refreshed: dict[str, Fingerprint] = {}

    def relpath(self, path: Path) -> str:
        return path.relative_to(self._root).as_posix()

    def fingerprint(self, path: Path, kind: str) -> Fingerprint:
        """Hash the file now; take it before reading the file so a later change is seen next time."""
        return fingerprint(path, self.relpath(path), kind)

    def is_unchanged(self, path: Path, kind: str) -> bool:
        """True when the file is as last ingested (an absent file is unchanged if it was never there)."""
        known = self._known.get(self.relpath(path))
        if known is None or not path.is_file():
            return known is None and not os.path.lexists(path)  # a folder or a broken link is read, to say why
        try:
            info = path.stat()
            if (info.st_mtime_ns, info.st_size) == known[:2]:
                return True
            current = self.fingerprint(path, kind)
        except OSError:
            return False  # cannot be read now: reading it says why, and its stored rows stay
        if current.sha256 != known[2]:
            return False
        # Same bytes, new mtime: remember it (at the next flush) to skip the hash next time.
        self._refreshed[current.path] = current
        self._known[current.path] = (current.mtime_ns, current.size, current.sha256)
        return True

    def record(self, fp: Fingerprint) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO ingested_files VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
            [self._subject, fp.path, fp.kind, fp.mtime_ns, fp.size, fp.sha256],
        )
        self._refreshed.pop(fp.path, None)
        self._known[fp.path] = (fp.mtime_ns, fp.size, fp.sha256)

    def record_many(self, fps: list[Fingerprint]) -> None:
        """`record` for many files in one statement (their paths distinct)."""
        if not fps:
            return
        self._conn.execute(
            "INSERT OR REPLACE INTO ingested_files SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]),"
            " unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::VARCHAR[]), now()::TIMESTAMP",
            [self._subject, [fp.path for fp in fps], [fp.kind for fp in fps], [fp.mtime_ns for fp in fps],
             [fp.size for fp in fps], [fp.sha256 for fp in fps]],
        )
        for fp in fps:
            self._refreshed.pop(fp.path, None)
            self._known[fp.path] = (fp.mtime_ns, fp.size, fp.sha256)

    def flush(self) -> None:
        """Store the new mtimes `is_unchanged` found for files whose bytes had not changed."""
        refreshed = [fp for fp in self._refreshed.values() if self._known.get(fp.path) == (
            fp.mtime_ns, fp.size, fp.sha256)]  # not forgotten or re-recorded since
        self._refreshed = {}
        self.record_many(refreshed)

    def forget_many(self, relpaths: list[str]) -> None:
        if not relpaths:
            return
        self._conn.execute("DELETE FROM ingested_files WHERE subject = ? AND list_contains(?::VARCHAR[], path)",
                           [self._subject, relpaths])
        for relpath in relpaths:
            self._refreshed.pop(relpath, None)
            self._known.pop(relpath, None)

    def forget(self, relpath: str) -> None:
        self._conn.execute("DELETE FROM ingested_files WHERE subject = ? AND path = ?", [self._subject, relpath])
        self._refreshed.pop(relpath, None)
        self._known.pop(relpath, None)

    def is_known(self, relpath: str) -> bool:
        """Whether `relpath` is recorded as ingested (so rows from it may be stored)."""
        return relpath in self._known

    def known_paths(self) -> set[str]:
        return set(self._known)

    def kind(self, relpath: str) -> str | None:
        """The kind a file was stored as (results, cases or benchmarks), when it was stored before this run."""
        return self._kinds.get(relpath)
