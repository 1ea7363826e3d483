"""Accepted levels: a regression someone has looked at and accepted as the series' new baseline.

A nightly alert stays open until a later night shows the series back, or
until someone accepts the new level with a reason (`flybench accept`), as
Conbench and CodSpeed let users do. Acceptances live in a JSON file kept
with the results (default `results/accepted.json`, committed like them, so a
rebuilt database keeps them): a versioned object whose `accepted` list holds
one entry per acceptance. A step of that series whose first bad commit is
at or before the accepted commit is no longer reported.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flybench.errors import FlybenchError
from flybench.write_target import check_file

DEFAULT_PATH = Path("results") / "accepted.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Acceptance:
    """One accepted level: the series, the commit whose value is the new baseline, and why."""

    subject: str
    machine: str
    benchmark: str
    params: dict[str, Any]
    commit: str
    reason: str
    accepted_at: str

    def matches(self, subject: str, machine: str, benchmark: str, params: dict[str, Any]) -> bool:
        return (self.subject, self.machine, self.benchmark, self.params) == (subject, machine, benchmark, params)


def load(path: Path | None) -> list[Acceptance]:
    """The acceptances in `path` (none when the file does not exist); a malformed file is an error."""
    file = path or DEFAULT_PATH
    if file.is_dir():
        raise FlybenchError(f"accepted-levels file {file} is a directory: pass the file, e.g. {file / 'accepted.json'}")
    if not file.is_file():
        if path is not None and path != DEFAULT_PATH:
            raise FlybenchError(f"accepted-levels file {file} not found; `flybench accept` creates it")
        return []
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise ValueError(f"expected an object with \"version\": {FORMAT_VERSION}")
        return [Acceptance(**entry) for entry in data["accepted"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FlybenchError(f"{file} is not an accepted-levels file ({exc}); fix or remove it") from exc


def add(path: Path | None, acceptance: Acceptance) -> tuple[Path, bool]:
    """Add one acceptance (the file is created if absent): the file, and whether the entry was new.

    The same series accepted at the same commit again changes nothing. The
    file is rewritten whole under an exclusive lock (`<file>.lock`), to a
    temporary file that is synced and then renamed over it, so a full disk
    or a concurrent `accept` never leaves it truncated or loses an entry.
    """
    file = path or DEFAULT_PATH
    if file.is_dir():
        raise FlybenchError(f"accepted-levels file {file} is a directory: pass a file, e.g. {file / 'accepted.json'}")
    check_file(file)  # the rename below would replace a device node (as root, /dev/null itself) with this file
    check_file(_lock_path(file))  # opening a FIFO there would block
    file.parent.mkdir(parents=True, exist_ok=True)
    with _locked(file):
        current = load(file) if file.is_file() else []
        if any(a.matches(acceptance.subject, acceptance.machine, acceptance.benchmark, acceptance.params)
               and a.commit == acceptance.commit for a in current):
            return file, False
        entries = [asdict(a) for a in current] + [asdict(acceptance)]
        text = json.dumps({"version": FORMAT_VERSION, "accepted": entries}, indent=1) + "\n"
        temporary = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        try:
            with temporary.open("w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, file)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise FlybenchError(f"cannot write {file} ({exc.strerror or exc}): it is unchanged; free space or fix "
                                "its folder's permissions, then accept again") from exc
    return file, True


@contextlib.contextmanager
def _locked(file: Path) -> Iterator[None]:
    """An exclusive lock on `<file>.lock`, held while the file is read and replaced."""
    with _lock_path(file).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _lock_path(file: Path) -> Path:
    return file.with_name(file.name + ".lock")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def accepted_through(acceptances: list[Acceptance], subject: str, machine: str, benchmark: str,
                     params: dict[str, Any], commits: list[str]) -> int:
    """The index in `commits` (the series, oldest first) up to which steps are accepted; -1 for none."""
    positions = [commits.index(a.commit) for a in acceptances
                 if a.matches(subject, machine, benchmark, params) and a.commit in commits]
    return max(positions, default=-1)
