"""Accepted levels: a regression someone has looked at and accepted as the series' new baseline.

A nightly alert stays open until a later night shows the series back, or
until someone accepts the new level with a reason (`flybench accept`), as
Conbench and CodSpeed let users do. Acceptances belong to the store whose
alerts they close: they live beside the database `--db` names, in
`<database name>.accepted.json` (`results/flybench.accepted.json` for the
default store; commit it with the results, so a rebuilt database keeps
them), whatever folder a command runs in. The file is a versioned object
whose `accepted` list holds one entry per acceptance. A step of that series
whose first bad commit is at or before the accepted commit is no longer
reported.

Before, the file was `results/accepted.json` relative to the working folder,
so a command run from another folder left an accepted alert open. Readers
still apply that old file where it exists (a migration path, said wherever
it is applied); `flybench accept` writes only beside the store.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flybench.errors import FlybenchError
from flybench.file_kinds import describe
from flybench.write_target import check_file

OLD_PATH = Path("results") / "accepted.json"
"""Where acceptances lived before they moved beside the store: relative to the working folder."""
SUFFIX = ".accepted.json"
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


def beside(db: Path) -> Path:
    """The acceptances of the store at `db`: `<db's name without its extension>.accepted.json` in its folder."""
    return db.with_name(db.stem + SUFFIX)


def for_store(db: Path, given: Path | None = None) -> tuple[list[Acceptance], str]:
    """The acceptances readers of the store at `db` apply, and a sentence to show where they came from in part.

    `given` (an `--accepted` file) is read alone. Else the store's own file
    (`beside`), plus the old `results/accepted.json` of the working folder
    while it exists: its entries are applied too, and the sentence says so and
    what to do about it.
    """
    if given is not None:
        return load(given), ""
    own = beside(db)
    # Whatever is at either path is read, so a folder or a FIFO there is said (`load`): they were passed over in
    # silence, their alerts shown as open although someone had accepted them. A link to no file yet is no file.
    found = load(own) if os.path.exists(own) else []
    if not os.path.exists(OLD_PATH) or OLD_PATH.resolve() == own.resolve():
        return found, ""
    old = load(OLD_PATH)
    return found + [a for a in old if a not in found], (
        f"also applied: {len(old)} acceptance(s) from {OLD_PATH} in this folder, where `flybench accept` wrote "
        f"them before; it now writes beside the store, to {own}: accept them again there (or move the file) "
        f"and delete {OLD_PATH}")


def load(path: Path) -> list[Acceptance]:
    """The acceptances in `path`; a missing, unreadable or malformed file, or anything but a regular file (a FIFO
    would block the read, /dev/zero never ends), is an error."""
    what = describe(path)
    if what == "a directory":
        raise FlybenchError(f"accepted-levels file {path} is a directory: pass the file, e.g. "
                            f"{path / 'accepted.json'}, or move the folder aside")
    if what == "nothing":
        raise FlybenchError(f"accepted-levels file {path} not found; `flybench accept` creates it")
    if what != "a regular file":
        raise FlybenchError(f"accepted-levels file {path} is {what}, not a file `flybench accept` writes, so it was "
                            "not read and no acceptance applied: move it aside (`flybench accept` then writes the file "
                            "anew) or restore the file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        version = data.get("version") if isinstance(data, dict) else None
        if type(version) is int and version > FORMAT_VERSION:  # a newer flybench's: removing it loses its levels
            raise FlybenchError(f"{path} holds accepted levels of format {version}, written by a newer flybench; "
                                f"this one reads format {FORMAT_VERSION}: upgrade flybench (keep the file: it holds "
                                "the accepted levels)")
        if version != FORMAT_VERSION:
            raise ValueError(f"expected an object with \"version\": {FORMAT_VERSION}")
        found = [Acceptance(**entry) for entry in data["accepted"]]
        wrong = next((a for a in found if not isinstance(a.params, dict) or not all(
            isinstance(v, str) for k, v in asdict(a).items() if k != "params")), None)
        if wrong is not None:  # such an entry matched no series, and closed nothing, without a word
            raise ValueError(f"an entry's params must be an object and its other fields text: {asdict(wrong)}")
        return found
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FlybenchError(f"{path} is not an accepted-levels file ({exc}); fix or remove it") from exc


def add(path: Path, acceptance: Acceptance) -> tuple[Path, bool]:
    """Add one acceptance (the file is created if absent): the file, and whether the entry was new.

    The same series accepted at the same commit again changes nothing. The
    file is rewritten whole under an exclusive lock (`<file>.lock`), to a
    temporary file that is synced and then renamed over it, so a full disk
    or a concurrent `accept` never leaves it truncated or loses an entry. A
    symbolic link is written through: its target is the file replaced, the
    link stays.
    """
    def added(current: list[Acceptance]) -> list[Acceptance] | None:
        if any(a.matches(acceptance.subject, acceptance.machine, acceptance.benchmark, acceptance.params)
               and a.commit == acceptance.commit for a in current):
            return None
        return [*current, acceptance]

    return path, _rewrite(path, added)


def remove(path: Path, acceptance: Acceptance) -> bool:
    """Take one acceptance back (the series at that commit, whatever reason it was given): whether the file held
    it. Its alert opens again on every page and in `flybench regressions`. Written as `add` writes."""
    def kept(current: list[Acceptance]) -> list[Acceptance] | None:
        left = [a for a in current if not (a.matches(acceptance.subject, acceptance.machine, acceptance.benchmark,
                                                     acceptance.params) and a.commit == acceptance.commit)]
        return None if len(left) == len(current) else left

    if not os.path.exists(path):  # a folder or a FIFO there is said by `_rewrite`, not taken for no acceptance
        return False
    return _rewrite(path, kept)


def _rewrite(path: Path, change: Callable[[list[Acceptance]], list[Acceptance] | None]) -> bool:
    """Replace the file's entries with `change(entries)` under the lock (None: leave it as it is); whether it was
    rewritten."""
    if path.is_dir():
        raise FlybenchError(f"accepted-levels file {path} is a directory: pass a file, e.g. {path / 'accepted.json'}")
    check_file(path)  # the rename below would replace a device node (as root, /dev/null itself) with this file
    file = Path(os.path.realpath(path))  # a link's target: replacing the link itself would cut it
    check_file(file)
    check_file(_lock_path(file))  # opening a FIFO there would block
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        with _locked(file):
            entries = change(load(file) if file.is_file() else [])
            if entries is None:
                return False
            _replace(file, json.dumps({"version": FORMAT_VERSION, "accepted": [asdict(a) for a in entries]},
                                      indent=1) + "\n")
    except OSError as exc:
        raise FlybenchError(f"cannot write {path} ({exc.strerror or exc}{': ' + exc.filename if exc.filename else ''}"
                            "): nothing was changed; make its folder writable, or pass --accepted with a file in a "
                            "folder you can write") from exc
    return True


def _replace(file: Path, text: str) -> None:
    """`file` holds `text` whole, or keeps what it held: written to a synced temporary file renamed over it."""
    temporary = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, file)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


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
