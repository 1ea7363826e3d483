"""Which files were ingested, and whether they changed since.

A file is unchanged when its size and mtime match what was stored; when they
differ its sha256 decides, so a file that was only touched (copied, checked
out again) is not read twice. Paths are stored relative to the results
directory so a moved results tree is still recognised.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import duckdb


@dataclass(frozen=True)
class Fingerprint:
    """What identifies one version of a file."""

    path: str
    kind: str
    mtime_ns: int
    size: int
    sha256: str


class FileTracker:
    """The ingested_files rows of one subject, read once and kept in step with the table."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, subject: str, results_dir: Path) -> None:
        self._conn = conn
        self._subject = subject
        self._root = results_dir
        rows = conn.execute(
            "SELECT path, mtime_ns, size, sha256 FROM ingested_files WHERE subject = ?", [subject]
        ).fetchall()
        self._known = {path: (mtime_ns, size, sha) for path, mtime_ns, size, sha in rows}

    def relpath(self, path: Path) -> str:
        return path.relative_to(self._root).as_posix()

    def fingerprint(self, path: Path, kind: str) -> Fingerprint:
        """Hash the file now; take it before reading the file so a later change is seen next time."""
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return Fingerprint(self.relpath(path), kind, stat.st_mtime_ns, stat.st_size, digest)

    def is_unchanged(self, path: Path, kind: str) -> bool:
        """True when the file is as last ingested (an absent file is unchanged if it was never there)."""
        known = self._known.get(self.relpath(path))
        if known is None or not path.is_file():
            return known is None and not path.is_file()
        stat = path.stat()
        if (stat.st_mtime_ns, stat.st_size) == known[:2]:
            return True
        current = self.fingerprint(path, kind)
        if current.sha256 != known[2]:
            return False
        self.record(current)  # same bytes, new mtime: remember it to skip the hash next time
        return True

    def record(self, fp: Fingerprint) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO ingested_files VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
            [self._subject, fp.path, fp.kind, fp.mtime_ns, fp.size, fp.sha256],
        )
        self._known[fp.path] = (fp.mtime_ns, fp.size, fp.sha256)

    def forget(self, relpath: str) -> None:
        self._conn.execute("DELETE FROM ingested_files WHERE subject = ? AND path = ?", [self._subject, relpath])
        self._known.pop(relpath, None)

    def known_paths(self) -> set[str]:
        return set(self._known)
