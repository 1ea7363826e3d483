"""Build the DuckDB store from an asv results tree, idempotently and file by file.

Each results file (with its sidecar) lands whole or not at all: its old rows
are deleted and its new rows inserted in the same transaction as its
fingerprint, so a crash or a corrupt file never leaves half a file in the
database, and running ingest again only reads files whose bytes changed.
Files are parsed completely before anything is written (by worker processes
when the tree is large); the parsed files are then written a batch at a
time, one transaction per batch, and file by file if a batch cannot be
written whole, so each file's outcome is the one it would have had alone.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import errno
import gc
import itertools
import json
import multiprocessing
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from asv import util

from flybench.counters import record as counter_records
from flybench.errors import FlybenchError
from flybench.file_kinds import describe
from flybench.measure.record import SideRecords
from flybench.model import roles
from flybench.store import counters as stored_counters
from flybench.store import interrupts
from flybench.store import roles as stored_roles
from flybench.store import commit_notes, heads, machine_code, sidecar
from flybench.store.asv_files import (BAD_FILE, BenchmarkDef, ResultsFile, impossible_times, load_benchmarks,
                                      machine_row, read_results)
from flybench.store.db import DEFAULT_DB, connect, is_fault
from flybench.store.files import (BadInput, FileError, FileTracker, Fingerprint, fingerprint, read_fingerprinted,
                                  reason, refuse_special)

RESULT_COLUMNS = (
    "subject", "machine", "commit_hash", "env_name", "benchmark", "params", "unit", "value",
    "ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat", "samples", "started_at", "duration",
    "benchmark_version", "status", "reason", "contract", "errors", "tolerance", "tflops", "gbps",
    "roofline_fraction", "device", "run_id", "source_file", "flops", "bytes", "floor_s", "rounds",
    "round_spreads",
)


@dataclass
class IngestReport:
    """What one ingest did: files read, skipped as unchanged, removed as vanished, and failed."""

    db_path: str
    subject: str
    loaded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rows: int = 0
    counter_rows: int = 0  # hardware-counter rows (flybench.store.counters)
    role_rows: int = 0  # model-lane role splits (flybench.store.roles)
    impossible: int = 0  # rows of `rows` whose time no call can take, stored as failed (asv_files.impossible_times)
    machine_code_rows: int | None = None  # records of the tree's machine-code.jsonl (None: the tree has none)
    machine_code_kept: int = 0  # stored machine code rows kept because the file was refused in part or whole
    pruned: bool = False  # --prune was given: `kept` are then files of machines the tree does not hold

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        lines = [
            f"{self.db_path} ({self.subject}): {len(self.loaded)} files loaded ({self.rows} rows), "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} removed, {len(self.errors)} failed"
            + (f"; {self.counter_rows} hardware-counter rows" if self.counter_rows else "")
            + (f"; {self.role_rows} model-lane role splits" if self.role_rows else "")
            + (f"; {self.impossible} rows with a time no call can take (0 s or less, an hour or more), stored as "
               "failed, not as ok" if self.impossible else "")
            + (f"; {self.machine_code_rows} machine code records" if self.machine_code_rows is not None else "")
            + (f" ({self.machine_code_kept} stored before kept, as the file was refused in part or whole)"
               if self.machine_code_kept else "")
        ]
        if self.kept and self.pruned:
            lines.append(f"  {len(self.kept)} stored files of machine folders this tree does not hold, kept: "
                         "`--prune` removes only files of the machines the tree holds")
        elif self.kept:
            lines.append(f"  {len(self.kept)} stored files not in this tree, kept; `--prune` removes them")
        lines += [f"  error: {e.path}: {e.message}" for e in self.errors]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


@interrupts.deferred()  # Ctrl-C stops between files, each stored whole or not at all
def ingest(
    results_dir: str | Path,
    db_path: str | Path = DEFAULT_DB,
    subject: str | None = None,
    *,
    config: str | Path | None = None,
    branch: str | None = None,
    prune: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> IngestReport:
    """Load every new or changed results file under `results_dir` into `db_path`.

    `subject` names the repository whose commits these are (default: the
    `project` of the asv config found at or above `results_dir`, or `config`);
    a subject that the config contradicts is refused, since its rows would
    be filed under the wrong repository. `branch`, when the caller knows it
    (nightly on main, a PR branch), is recorded for the commits read in this
    run. Stored files that this tree lacks are kept (a tree is often one
    runner's artifact among several) unless `prune` is set, and even then
    only those under a machine folder the tree holds are removed. A tree
    without any machine folder (the parent of results trees, a wrong path)
    is refused before anything is written. `progress`, if given, is told
    (files read, files to read) as each file is read.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FlybenchError(f"{root} is not a directory of asv results (asv's results_dir)")
    subject = subject_of(root, subject, Path(config) if config else None)
    benchmarks_path = root / "benchmarks.json"
    report = IngestReport(str(db_path), subject)
    benchmarks = load_benchmarks(benchmarks_path) if benchmarks_path.is_file() else {}
    try:
        refuse_special(benchmarks_path)  # a FIFO there is no benchmarks.json: it is said, and never read
    except BadInput as exc:
        report.errors.append(FileError(str(benchmarks_path), str(exc)))
    if not benchmarks_path.is_file():
        report.warnings.append(f"no {benchmarks_path} (asv writes it with each run): flybench's case suites are named "
                               "by their own scheme (case, provider, dtype), other benchmarks after definitions "
                               "stored before, else p0, p1, ... (copy the tree's benchmarks.json beside it to "
                               "name them)")
    machine_dirs = sorted(p for p in _listing(root) if p.is_dir())
    unreadable = [d for d in machine_dirs if not _readable(d)]
    if unreadable:  # a folder that cannot be listed looks empty: --prune would drop its stored rows
        raise FlybenchError(f"cannot read {', '.join(map(str, unreadable))} (permission denied): nothing was "
                            "stored or removed; make them readable (chmod u+rx) and ingest again")
    if not held_machines(machine_dirs):  # the parent of results trees, say: --prune would drop every stored row
        raise FlybenchError(_no_machine_folder(root, machine_dirs))
    # Benchmarks that left benchmarks.json are still named by the definitions an earlier one gave the store.
    known = {**_stored_definitions(Path(db_path), subject), **benchmarks}
    readers = _Readers(known, _changed_since_last_ingest(Path(db_path), benchmarks_path, machine_dirs), progress)
    notes = commit_notes.read(root)  # what the tree says of its commits (titles, compiler): checked before writing
    code = machine_code.read(root)  # the machine code of its commits (flybench.compile.code_history)
    if code is not None:
        path = root / machine_code.FILE
        report.errors += [FileError(str(path), message.removeprefix(f"{path}, ")) for message in code.refused]
    try:
        with size_limit_as_advice(db_path), connect(db_path) as conn:
            _ingest_tree(conn, report, root, machine_dirs, benchmarks_path, benchmarks, readers, branch, prune)
            if notes:
                with _transaction(conn):
                    commit_notes.store(conn, subject, notes)
            if code is not None:
                with _transaction(conn):
                    report.machine_code_rows = machine_code.store(conn, subject, code)
                    if not code.whole:
                        report.machine_code_kept = machine_code.count(conn, subject) - len(code.records)
    finally:
        readers.close()
    return report


@contextmanager
def size_limit_as_advice(db_path: str | Path) -> Iterator[None]:
    """A write past the largest file allowed here (EFBIG: `ulimit -f`, or the file system's own limit) ends the
    command as a full disk does (flybench.store.db): saying what was kept and what to do, with exit status 2."""
    try:
        yield
    except (duckdb.Error, OSError) as exc:
        if not _over_size_limit(exc):
            raise
        raise FlybenchError(
            f"{db_path} reached the largest file allowed here ({str(exc).strip()}): results files stored before it "
            "are kept, nothing was stored for the files not yet written. Raise the limit (`ulimit -f`) or pass a "
            "--db on a file system that takes larger files, and run the same command again: files already stored "
            "are skipped") from exc


def _over_size_limit(exc: BaseException) -> bool:
    return (isinstance(exc, OSError) and exc.errno == errno.EFBIG) or "File too large" in str(exc)


def _is_fault(exc: BaseException) -> bool:
    """Whether no later write can succeed: a fault of the file or its disk (`is_fault`), or its size limit."""
    return is_fault(exc) or _over_size_limit(exc)


def _listing(root: Path) -> list[Path]:
    try:
        return list(root.iterdir())
    except OSError as exc:
        raise FlybenchError(f"cannot read {root} ({exc.strerror or exc}): nothing was stored or removed") from exc


def held_machines(machine_dirs: list[Path]) -> set[str]:
    """The folders of a tree that are asv machine folders (they hold a machine.json, even a broken one).

    Only files under these are ever pruned: a folder that is not in the tree
    (another runner's, a retired machine's) or is no machine folder says
    nothing about the stored files of its name.
    """
    return {d.name for d in machine_dirs if os.path.lexists(d / "machine.json")}


def _no_machine_folder(root: Path, folders: list[Path]) -> str:
    """Why a tree with no machine folder is refused, and which trees to name instead when it holds some."""
    trees = [d for d in folders if (d / "benchmarks.json").is_file() or any(
        os.path.lexists(sub / "machine.json") for sub in d.iterdir() if sub.is_dir())]
    said = (f"{root} holds no machine folder (<machine>/machine.json beside asv's results files), so it is no asv "
            "results tree: nothing was stored or removed")
    if trees:
        return (f"{said}. It holds the results trees {', '.join(map(str, trees))}: ingest each of them "
                f"(`flybench ingest {trees[0]}`), or run `flybench ingest` without a path to ingest every "
                "subject's tree")
    return f"{said}. Name asv's results_dir (the results_dir of asv.conf.json), which holds one folder per machine"


def _readable(folder: Path) -> bool:
    """Whether a folder's entries can be listed and opened (a folder of mode 300 or 000 cannot)."""
    try:
        with os.scandir(folder) as entries:
            next(entries, None)
    except OSError:
        return False
    return os.access(folder, os.R_OK | os.X_OK)


def _stored_definitions(db_path: Path, subject: str) -> dict[str, BenchmarkDef]:
    """The subject's benchmark definitions already in the store, read before any worker is forked.

    Empty when there is no readable store yet: opening it for writing then says what is wrong.
    """
    if not db_path.is_file():
        return {}
    try:
        conn = duckdb.connect(str(db_path), read_only=True)
    except duckdb.Error:
        return {}
    try:
        rows = conn.execute("SELECT name, param_names, params, unit, type, version FROM benchmarks WHERE subject = ?",
                            [subject]).fetchall()
    except duckdb.Error:
        return {}
    finally:
        conn.close()
    return {name: BenchmarkDef(name, list(names or []), json.loads(params) if params else [], unit, kind, version)
            for name, names, params, unit, kind, version in rows}


def _changed_since_last_ingest(db_path: Path, benchmarks_path: Path, machine_dirs: list[Path]) -> int:
    """About how many results files this ingest will read: those written since the database was.

    Only an estimate, taken before the database is opened, to decide whether
    reading in worker processes is worth starting them (see _Readers).
    """
    results = [p for d in machine_dirs for p in d.glob("*-*.json")]
    if not db_path.is_file():
        return len(results)
    since = db_path.stat().st_mtime_ns
    if benchmarks_path.is_file() and benchmarks_path.stat().st_mtime_ns >= since:
        return len(results)  # a new benchmarks.json: every file is read again
    newer = [p for p in results if _modified(p) >= since]
    sidecars = [p for d in machine_dirs for p in d.glob("*.cases.jsonl") if _modified(p) >= since]
    return len(newer) + len(sidecars)


def _modified(path: Path) -> int:
    """A file's modification time; a broken link or unreadable file counts as new (its read then says why)."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 2**63


def _ingest_tree(
    conn: duckdb.DuckDBPyConnection, report: IngestReport, root: Path, machine_dirs: list[Path],
    benchmarks_path: Path, benchmarks: dict[str, BenchmarkDef], readers: _Readers, branch: str | None,
    prune: bool,
) -> None:
    # Each commit is durable in the write-ahead log; folding it into the database file (a checkpoint,
    # which rewrites the primary-key index whole) is left to the end, when the connection closes,
    # rather than done every 16 MB of log: on a million-row store that rewrite dominated the ingest.
    conn.execute("SET checkpoint_threshold = '16GB'")
    if readers.parallel:
        # The workers parsing the files keep the other cores busy. On one thread, DuckDB inserts a batch
        # in about half the CPU time its parallel insert takes (whose row groups are also left partly
        # filled, for the checkpoint to merge), and the parse goes on beside it.
        conn.execute("SET threads = 1")
    try:
        _ingest_files(conn, report, root, machine_dirs, benchmarks_path, benchmarks, readers, branch, prune)
    finally:
        if readers.parallel:
            with suppress(duckdb.Error):  # never hide what went wrong before
                conn.execute("RESET threads")  # the checkpoint at close, when the files are all parsed, has them all
    with _transaction(conn):
        heads.refresh_stale(conn)  # also machines an interrupted ingest marked


def _ingest_files(
    conn: duckdb.DuckDBPyConnection, report: IngestReport, root: Path, machine_dirs: list[Path],
    benchmarks_path: Path, benchmarks: dict[str, BenchmarkDef], readers: _Readers, branch: str | None,
    prune: bool,
) -> None:
    subject = report.subject
    tracker = FileTracker(conn, subject, root)
    # Param names and units come from benchmarks.json: when it changes, every file is re-read.
    reread_all = not tracker.is_unchanged(benchmarks_path, "benchmarks")
    if reread_all:
        with _transaction(conn):
            if benchmarks_path.is_file():
                _store_benchmarks(conn, tracker, subject, benchmarks, benchmarks_path)
            else:  # gone: read again once, named as it now allows; its definitions stay
                tracker.forget(tracker.relpath(benchmarks_path))
    seen = {tracker.relpath(benchmarks_path)}
    # First what to read, for the whole tree, so that the files are read ahead of the one being stored
    # across machines too; then each machine's files are stored in the order they are listed.
    machines: list[tuple[dict[str, Any], list[_Task]] | FileError] = []
    for machine_dir in machine_dirs:
        files = sorted(p for p in machine_dir.glob("*.json") if p.name != "machine.json")
        seen.update(tracker.relpath(p) for p in files)
        seen.update(tracker.relpath(p) for p in map(sidecar.sidecar_path, files) if p.is_file())
        if files:
            machines.append(_plan_machine(tracker, report, machine_dir, files, reread_all))
    outcomes = readers.read([task for plan in machines if not isinstance(plan, FileError) for task in plan[1]])
    stored = {row[0]: dict(zip(_MACHINE_COLUMNS, row)) for row in conn.execute(
        f"SELECT {', '.join(_MACHINE_COLUMNS)} FROM machines").fetchall()}
    batch = _Batch(conn, tracker, report, branch, set(stored))
    try:
        for plan in machines:
            if isinstance(plan, FileError):
                batch.add_error(plan)
            else:
                _store_machine(conn, batch, *plan, outcomes, stored)
    except Exception:
        batch.store()  # the files read before the failure are kept, as when each file was its own transaction
        raise
    batch.store()
    report.counter_rows = _ingest_beside(conn, tracker, subject, machine_dirs, seen, report, counter_records.FILE,
                                         stored_counters.ingest_counters)
    report.role_rows = _ingest_beside(conn, tracker, subject, machine_dirs, seen, report, roles.FILE,
                                      stored_roles.ingest_roles)
    absent = sorted(tracker.known_paths() - seen)
    held = held_machines(machine_dirs)
    pruned = [path for path in absent if prune and path.split("/", 1)[0] in held]
    report.pruned = prune
    report.kept = [path for path in absent
                   if path not in pruned
                   and tracker.kind(path) in ("results", stored_counters.KIND, stored_roles.KIND)]
    for relpath in pruned:
        with _transaction(conn):
            if tracker.kind(relpath) in (stored_counters.KIND, stored_roles.KIND):
                (stored_counters if tracker.kind(relpath) == stored_counters.KIND else stored_roles).remove(
                    conn, subject, relpath)
                tracker.forget(relpath)
            else:
                _remove(conn, tracker, subject, relpath)
        report.removed.append(relpath)
    tracker.flush()


def _ingest_beside(conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, machine_dirs: list[Path],
                   seen: set[str], report: IngestReport, kind: SideRecords, ingest: Callable[..., int]) -> int:
    """Store the record files of one kind the tree holds beside its results (counters, role splits), except those
    whose results file was refused or is not there; returns the rows written.

    A record file is filed under its results file's commit and machine; one with no results file beside it (a
    copy of a machine's record files under another commit's name) would store every row again under a run that
    never happened. (One that is no regular file, a FIFO say, is left to the reader, which says what it is.)"""
    paths = kind.files_in(machine_dirs)
    seen.update(tracker.relpath(p) for p in paths)
    refused = _refused_beside(paths, report.errors, kind)
    for path in refused:
        report.errors.append(FileError(str(path), "not stored: the results file it belongs to was refused"))
    alone = [p for p in paths if p not in refused and p.is_file() and not os.path.lexists(kind.results_file(p))]
    for path in alone:
        report.errors.append(FileError(str(path), f"not stored: no results file {kind.results_file(path).name} "
                                                  "beside it, so no run to file its records under (a copy under "
                                                  "another commit's name would store every row twice); put it "
                                                  "back beside its results file, or remove it"))
    return ingest(conn, tracker, subject, [p for p in paths if p not in refused and p not in alone],
                  report.warnings, report.errors)


def _refused_beside(paths: list[Path], errors: list[FileError], kind: SideRecords) -> list[Path]:
    """The counter (or role) files whose results file was refused (a copy of another, a broken one, one whose case
    records or machine.json were), which are refused with it: a backup copy of a folder would double their rows."""
    results = {str(kind.beside(sidecar.results_file_of(Path(error.path)))) for error in errors}
    folders = {str(Path(error.path).parent) for error in errors if Path(error.path).name == "machine.json"}
    return [p for p in paths if str(p) in results or str(p.parent) in folders]


def project_name(results_dir: Path, config: Path | None = None) -> str:
    """The asv config's `project`: the default subject of a results tree."""
    found = _config_project(results_dir, config)
    if found is None:
        raise FlybenchError(f"no asv.conf.json at or above {results_dir}, so the repository these results measured is "
                            "unknown: pass --subject NAME (e.g. --subject flydsl) or --config the asv.conf.json")
    return found[1]


def _config_project(results_dir: Path, config: Path | None) -> tuple[Path, str] | None:
    """The asv config that describes `results_dir` (`config`, else the nearest at or above it) and its project."""
    here = results_dir.resolve()
    candidates = [config] if config else [d / "asv.conf.json" for d in (here, *here.parents)]
    for path in candidates:
        if os.path.lexists(path):  # anything there is read (`_asv_config` says why a FIFO or a folder is not)
            return path, _asv_config(path, "project")
    if config:
        raise FlybenchError(f"--config {config}: no such file; name the asv.conf.json of the results tree")
    return None


def subject_of(results_dir: Path, subject: str | None, config: Path | None = None) -> str:
    """The subject to file the tree under: the one given, unless the tree's asv config names another."""
    if subject is None:
        return project_name(results_dir, config)
    found = _config_project(results_dir, config)
    if found is not None and found[1] != subject:
        raise FlybenchError(
            f"{results_dir} holds results of {found[1]!r} (the project of {found[0]}), not of {subject!r}: "
            f"drop --subject to file them under {found[1]!r}, or pass the tree that belongs to {subject!r}")
    return subject


def default_results_dir(config: Path = Path("asv.conf.json")) -> Path:
    """asv's `results_dir` from its config, relative to the config's folder as asv reads it."""
    return config.parent / _asv_config(config, "results_dir")


def _asv_config(path: Path, key: str) -> str:
    """A text setting of an asv config, checked before anything is written: a `project` of `[1, 2]` was filed
    as a subject named "[1, 2]", beside the real one, a second copy of every row."""
    what = describe(path)
    if what == "nothing":
        raise FlybenchError(f"no asv config at {path}, so {key!r} is unknown: run flybench in the folder of the "
                            "project's asv.conf.json, or pass --config and the results tree")
    if what != "a regular file":  # a FIFO blocked the ingest for ever, a link to /dev/zero filled the memory
        raise FlybenchError(f"{path} is {what}, not an asv config, so it was not read and nothing was stored: name "
                            "the asv.conf.json of the results tree (--config), or move this aside")
    try:
        value = util.load_json(str(path), js_comments=True)[key]
    except BAD_FILE as exc:
        raise FlybenchError(f"{path}: cannot read {key!r} ({type(exc).__name__}: {exc})") from exc
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise FlybenchError(f"{path}: {key!r} is {json.dumps(value)}, not a name on one line: asv reads it as text; "
                            f"write it as a string, e.g. \"{key}\": \"{_EXAMPLES[key]}\"; nothing was stored")
    return value


_EXAMPLES = {"project": "flydsl", "results_dir": "results/flydsl"}


def _plan_machine(
    tracker: FileTracker, report: IngestReport, machine_dir: Path, files: list[Path], reread_all: bool,
) -> tuple[dict[str, Any], list[_Task]] | FileError:
    """The machine's row and the files of it to read (new or changed), or why none of them are read."""
    machine_json = machine_dir / "machine.json"
    try:
        refuse_special(machine_json)
        machine = machine_row(machine_json)
    except BAD_FILE as exc:
        why = str(exc) if isinstance(exc, util.UserError) else reason(exc)  # asv's own words name the file
        return FileError(str(machine_json), f"{why}; the {len(files)} results files beside it were not read")
    tasks = []
    for path in files:
        relpath, cases_path = tracker.relpath(path), sidecar.sidecar_path(path)
        if (not reread_all and path.is_file() and tracker.is_unchanged(path, "results")
                and tracker.is_unchanged(cases_path, "cases")):  # a broken link is read, and says why, each time
            report.unchanged.append(relpath)
            continue
        tasks.append(_Task(path, relpath, tracker.relpath(cases_path), machine["name"]))
    return machine, tasks


def _store_machine(
    conn: duckdb.DuckDBPyConnection, batch: _Batch, machine: dict[str, Any], tasks: list[_Task],
    outcomes: Iterator[tuple[list[str], _Parsed | FileError]], machines: dict[str, dict[str, Any]],
) -> None:
    """The machine's row (written only when it changed, as a tree of hundreds of machines is mostly
    unchanged), then its files into `batch` as they come out of `outcomes` (one per task, in order).

    `machines` holds the stored rows as this ingest found them, and is kept up to date.
    """
    if machine["name"] in batch.machines:
        batch.store()  # two directories of one machine: its row is written after the first one's files
        found = _stored_machine(conn, machine["name"])  # with the arch a sidecar of those files gave
        if found:
            machines[machine["name"]] = found
    stored = machines.get(machine["name"])
    if stored and not machine["arch"]:
        machine["arch"] = stored["arch"]  # learnt from a sidecar's device record; machine.json does not say it
    if stored is None or _machine_changed(stored, machine):
        batch.add_machine(machine)
        machines[machine["name"]] = machine
    for warnings, outcome in itertools.islice(outcomes, len(tasks)):
        batch.report.warnings += warnings
        if isinstance(outcome, FileError):
            batch.add_error(outcome)
        else:
            batch.add(outcome)


_MACHINE_COLUMNS = ("name", "host", "accelerator", "arch", "os", "cpu_arch", "cpu", "num_cpu", "ram", "machine_json")


def _stored_machine(conn: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {', '.join(_MACHINE_COLUMNS)} FROM machines WHERE name = ?", [name]).fetchone()
    return dict(zip(_MACHINE_COLUMNS, row)) if row else None


def _machine_changed(stored: dict[str, Any], machine: dict[str, Any]) -> bool:
    """Whether the row differs; machine_json is compared as data (DuckDB may give its text back reformatted)."""
    return any(stored[c] != machine[c] for c in _MACHINE_COLUMNS[:-1]) or (
        json.loads(stored["machine_json"]) != json.loads(machine["machine_json"]) if stored["machine_json"]
        else machine["machine_json"] is not None)


@dataclass(frozen=True)
class _Task:
    """One results file to read, with the relative paths its fingerprints are stored under."""

    path: Path
    relpath: str
    cases_relpath: str
    machine: str


def _read_file(task: _Task, benchmarks: dict[str, BenchmarkDef]) -> tuple[list[str], _Parsed | FileError]:
    """One results file and its sidecar, fingerprinted, parsed and joined; or why it cannot be read.

    The results file is parsed from the very bytes its fingerprint was
    taken of, and the sidecar is fingerprinted before it is read, so a
    change made meanwhile is seen by the next ingest.
    """
    path = task.path
    sidecar_read = _read_sidecar(task)
    if isinstance(sidecar_read, FileError):
        return [], sidecar_read
    sidecar_fingerprints, cases, warnings = sidecar_read
    try:
        results_fingerprint, content = read_fingerprinted(path, task.relpath, "results")
        parsed = read_results(path, task.machine, benchmarks, content)  # the bytes fingerprinted, parsed
        sidecar.check_names(_benchmarks_and_params(parsed) if cases else (), cases, benchmarks)
        if parsed.table is not None:
            table = sidecar.annotate_table(parsed.table, cases)
            # None: a record holds values that only the row path stores as it always did
            parsed = replace(parsed, table=table, rows=None if table is not None else parsed.table.to_pylist())
            if table is None:
                for row in parsed.rows:
                    sidecar.annotate(row, cases)
            elif sidecar.has_legacy_rows(table):  # five-metric results (few files): folded row by row
                parsed = replace(parsed, table=None, rows=table.to_pylist())
        else:
            for row in parsed.rows:
                sidecar.annotate(row, cases)
        if parsed.rows is not None:
            parsed = replace(parsed, rows=sidecar.fold(parsed.rows))
        parsed = impossible_times(parsed)
    except BAD_FILE as exc:
        return warnings, FileError(str(path), reason(exc))
    return warnings, _Parsed(path, task.relpath, parsed, sidecar.device_arch(cases),
                             [results_fingerprint, *sidecar_fingerprints])


def _benchmarks_and_params(parsed: ResultsFile) -> Iterator[tuple[str, str]]:
    """Each row's benchmark and params text."""
    if parsed.table is not None:
        return zip(parsed.table["benchmark"].to_pylist(), parsed.table["params"].to_pylist())
    return ((row["benchmark"], row["params"]) for row in parsed.rows or ())


def _read_sidecar(task: _Task) -> tuple[list[Fingerprint], dict[sidecar.CaseKey, dict[str, Any]], list[str]] | FileError:
    """The results file's case records (none without a sidecar), fingerprinted first; or why they cannot be read.

    Anything at the sidecar's path that cannot be read (no permission, a
    folder, a broken link) is its own error: the results file lands only with
    its records, so both wait for a good one, and what was stored stays.
    """
    cases_path = sidecar.sidecar_path(task.path)
    if not os.path.lexists(cases_path):
        return [], {}, []
    try:
        cases_fingerprint = fingerprint(cases_path, task.cases_relpath, "cases")
        cases, warnings = sidecar.load_cases(cases_path)
    except BAD_FILE as exc:
        return FileError(str(cases_path), f"{reason(exc)}; the case records of {task.path.name} cannot be read, "
                                          "so it was not loaded either")
    return [cases_fingerprint], cases, warnings


class _Readers:
    """Reads results files in file order: in worker processes when there are enough files to repay them.

    Parsing asv's JSON is most of the work of an ingest and holds Python's
    lock, so a large tree is parsed by one process per core while this one
    writes to the database. What a file yields does not depend on where it
    was read. The workers are forked before the database is opened, and only
    from a process with no other thread, so that no lock can be held across
    the fork; they never touch the database.
    """

    MIN_FILES = 32  # to read; fewer are read in this process
    AHEAD_BYTES = 128 << 20  # of results files read ahead, so the workers go on while a batch is written
    CHUNK_BYTES = 1 << 20  # of results files given to a worker at once (a large file goes alone)
    CHUNK_FILES = 64

    def __init__(self, benchmarks: dict[str, BenchmarkDef], files: int,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self._benchmarks = benchmarks
        self._progress = progress
        self._pool: ProcessPoolExecutor | None = None
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        if files >= self.MIN_FILES and cores >= 2 and threading.active_count() == 1 and sys.platform == "linux":
            try:
                self._pool = ProcessPoolExecutor(cores, mp_context=multiprocessing.get_context("fork"),
                                                 initializer=_start_worker, initargs=(benchmarks, os.getpid()))
                self._pool.submit(int).result()  # forks every worker now
            except (OSError, BrokenProcessPool):  # no processes to be had: read here
                self.close()

    @property
    def parallel(self) -> bool:
        """Whether the files are read by worker processes."""
        return self._pool is not None

    def read(self, tasks: list[_Task]) -> Iterator[tuple[list[str], _Parsed | FileError]]:
        """What each task's file yields, in task order, telling `progress` (files read, files to read)."""
        for done, outcome in enumerate(self._read(tasks), start=1):
            if self._progress is not None:
                self._progress(done, len(tasks))
            yield outcome

    def _read(self, tasks: list[_Task]) -> Iterator[tuple[list[str], _Parsed | FileError]]:
        if self._pool is None or len(tasks) < 2:
            for task in tasks:
                with _gc_paused():
                    outcome = _read_file(task, self._benchmarks)
                yield outcome
            return
        queued = deque(tasks)
        running: deque[tuple[Future[list[tuple[list[str], _Parsed | FileError]]], int]] = deque()
        ahead = 0  # bytes of the files submitted and not yet taken
        while queued or running:
            while queued and (not running or ahead < self.AHEAD_BYTES):
                # Small files go to a worker several at a time: each task costs the pool a fraction of a
                # millisecond, as much as parsing a small file.
                chunk, size = [queued.popleft()], 0
                size = _size(chunk[0].path)
                while queued and size < self.CHUNK_BYTES and len(chunk) < self.CHUNK_FILES:
                    chunk.append(queued.popleft())
                    size += _size(chunk[-1].path)
                running.append((self._pool.submit(_read_in_worker, chunk), size))
                ahead += size
            future, size = running.popleft()
            ahead -= size
            yield from future.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # reading it will say why


_WORKER_BENCHMARKS: dict[str, BenchmarkDef] = {}


def _start_worker(benchmarks: dict[str, BenchmarkDef], parent: int) -> None:
    _exit_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the ingest's to take (interrupts), not a worker's
    gc.disable()  # see _gc_paused; a worker lives for one ingest and parses data without cycles
    _WORKER_BENCHMARKS.update(benchmarks)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _exit_with_parent(parent: int) -> None:
    """Have the kernel end this worker when the ingest that forked it dies (SIGKILL, SIGTERM, a crash).

    Otherwise an orphaned worker waits on its task pipe for ever. A parent
    already gone before the request took effect is caught by the check after it.
    """
    with suppress(OSError, AttributeError):  # no libc to ask: the worker ends with its pipe, as before
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:
        os._exit(1)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a file is parsed.

    A results file becomes tens of thousands of lists and floats, none in a
    cycle, and the collector would otherwise walk them again and again while
    they are made (a tenth or more of the parse).
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _read_in_worker(tasks: list[_Task]) -> list[tuple[list[str], _Parsed | FileError]]:
    return [_read_file(task, _WORKER_BENCHMARKS) for task in tasks]


@dataclass(frozen=True)
class _Parsed:
    """A results file read completely, with its sidecar joined on: ready to store."""

    path: Path
    relpath: str
    parsed: ResultsFile
    arch: str | None
    fingerprints: list[Fingerprint]


class _Batch:
    """Parsed files, stored together, each file all or nothing.

    The files are written in one transaction, a few statements for all of
    them, which is what makes a nightly-sized tree quick to load. Only files
    that parsed completely get here. If the batch cannot be stored as a
    whole (a file whose commit and environment another file holds, say), it
    is stored file by file, each in its own transaction, exactly as a lone
    file is: the others land and that one is reported with its error.
    A new machine's row is written with the first of its files that lands,
    so a machine whose files were all refused leaves no row behind.
    """

    MAX_ROWS = 250_000  # above DuckDB's row group (122,880 rows), rows are written once, not also to the log
    ROW_GROUP = 122_880  # DuckDB's rows per row group
    FIRST_ROWS = ROW_GROUP  # the first batch is written sooner: until it is, this process has nothing to do

    def __init__(self, conn: duckdb.DuckDBPyConnection, tracker: FileTracker, report: IngestReport,
                 branch: str | None, stored_machines: set[str]) -> None:
        self._conn, self._tracker, self.report, self._branch = conn, tracker, report, branch
        self._entries: list[_Parsed | FileError] = []  # in file order, so the report lists them as read
        self._rows = 0
        self._least = self.FIRST_ROWS
        self.machines: set[str] = set()
        self._machines: dict[str, dict[str, Any]] = {}  # rows to write, by machine name
        self._stored_machines = stored_machines  # the names the machines table holds

    def add(self, item: _Parsed) -> None:
        self._entries.append(item)
        self._rows += item.parsed.row_count
        self.machines.add(item.parsed.environment["machine"])
        # A batch is stored as full row groups and a last, partial one. Where partial row groups lie close
        # together, the checkpoint merges them, rewriting their full neighbours too (seconds for a million
        # rows, with DuckDB 2.0); it leaves alone partial row groups that are at least half full. So a batch
        # ends once its last row group is, within a row group's worth of rows past MAX_ROWS (FIRST_ROWS for
        # the first batch).
        half_full = self._rows % self.ROW_GROUP >= self.ROW_GROUP // 2
        if self._rows >= self._least and (half_full or self._rows >= self._least + self.ROW_GROUP):
            self._least = self.MAX_ROWS
            self.store()

    def add_error(self, error: FileError) -> None:
        self._entries.append(error)

    def add_machine(self, machine: dict[str, Any]) -> None:
        """A new or changed machine row. A stored machine's changed row is written before the batch's files,
        a new machine's with the first of its files that lands; the rows written together go in one statement
        (a statement per machine cost 5 ms each, seconds for a tree of hundreds of machines)."""
        self._machines[machine["name"]] = machine

    def store(self) -> None:
        changed = [row for name, row in self._machines.items() if name in self._stored_machines]
        _write_machines(self._conn, changed)
        for row in changed:
            del self._machines[row["name"]]
        entries, self._entries, self._rows, self.machines = self._entries, [], 0, set()
        items = [e for e in entries if isinstance(e, _Parsed)]
        one_by_one = items
        if len(items) > 1:
            try:
                self._store_files(items)
                one_by_one = []
            except (*BAD_FILE, duckdb.Error, _OneByOne):
                pass  # each file as if it were alone: the others land, and the one that cannot says why
        failed: dict[str, FileError] = {}
        for item in one_by_one:
            try:
                self._store_files([item])
            except (*BAD_FILE, duckdb.Error) as exc:
                if _is_fault(exc):  # a full disk or a corrupt store is not this file's fault: stop, exit 2
                    raise
                failed[item.relpath] = FileError(str(item.path), f"{type(exc).__name__}: {exc}")
        for entry in entries:
            if isinstance(entry, FileError):
                self.report.errors.append(entry)
            elif entry.relpath in failed:
                self.report.errors.append(failed[entry.relpath])
            else:
                self.report.loaded.append(entry.relpath)
                self.report.rows += entry.parsed.row_count
                self.report.impossible += entry.parsed.impossible

    def _store_files(self, items: list[_Parsed]) -> None:
        """`items` in one transaction, with the rows of the new machines they are the first files of."""
        names = sorted({item.parsed.environment["machine"] for item in items} & self._machines.keys())
        with _transaction(self._conn):
            _write_machines(self._conn, [self._machines[name] for name in names])
            _store_files(self._conn, self._tracker, self.report.subject, items, self._branch)
        for name in names:
            del self._machines[name]
            self._stored_machines.add(name)


def _write_machines(conn: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(
            "INSERT OR REPLACE INTO machines SELECT " + ", ".join(["unnest(?::VARCHAR[])"] * 9) + ", unnest(?::JSON[])",
            [[row[column] for row in rows] for column in _MACHINE_COLUMNS])


class _OneByOne(Exception):
    """The batch must be stored file by file to give the outcome files stored one by one would have."""


def _store_files(
    conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, items: list[_Parsed], branch: str | None,
) -> None:
    """Replace the rows of `items` and record them, as storing them one by one would.

    Runs inside the caller's transaction.
    """
    if not items:
        return
    if len(items) > 1 and any(item.parsed.table is None for item in items):
        raise _OneByOne  # rows read by asv's loader are stored as they always were, a file at a time
    relpaths = [item.relpath for item in items]
    tables, frames, keys = [], [], []
    for item in items:
        parsed, env = item.parsed, item.parsed.environment
        if parsed.table is not None and parsed.table.num_rows:
            tables.append(parsed.table)
            keys.append((env["machine"], parsed.commit_hash, env["env_name"], item.relpath))
        elif parsed.rows:  # read by asv's loader: one dict per row
            frames.append(pd.DataFrame(
                [{**_NO_VALUES, **row, "subject": subject, "machine": env["machine"], "commit_hash": parsed.commit_hash,
                  "env_name": env["env_name"], "source_file": item.relpath} for row in parsed.rows],
                columns=list(RESULT_COLUMNS), dtype=object,  # object keeps None as NULL, never NaN
            ))
    incoming = None
    if tables:
        # One chunk: DuckDB scans a table of thousands of small chunks (a tree of small files) far slower.
        # Each file's key columns are one value repeated: made for all the files at once.
        incoming = pa.concat_tables(tables, promote_options="default").combine_chunks()
        counts = [table.num_rows for table in tables]
        incoming = incoming.append_column("subject", pa.repeat(pa.scalar(subject, pa.string()), incoming.num_rows))
        for i, name in enumerate(("machine", "commit_hash", "env_name", "source_file")):
            incoming = incoming.append_column(name, pa.array(np.repeat(np.array([k[i] for k in keys], object),
                                                                      counts), pa.string()))
    _claim_file_keys(conn, subject, items)
    conn.execute("DELETE FROM results WHERE subject = ? AND list_contains(?::VARCHAR[], source_file)",
                 [subject, relpaths])
    if incoming is not None:
        conn.register("incoming_results", incoming)
        conn.execute("INSERT INTO results BY NAME SELECT * FROM incoming_results")
        conn.unregister("incoming_results")
    for frame in frames:
        conn.register("incoming_results", frame)
        conn.execute("INSERT INTO results BY NAME SELECT * FROM incoming_results")
        conn.unregister("incoming_results")
    # Upserts as one file after another would leave them: a commit keeps its last known date,
    # an environment the last file's description, the machine the last arch a sidecar gave.
    commits: dict[Any, dt.datetime | None] = {}
    environments: dict[tuple[str, str], list[Any]] = {}
    for item in items:
        parsed, env = item.parsed, item.parsed.environment
        if parsed.commit_date is not None or parsed.commit_hash not in commits:
            commits[parsed.commit_hash] = parsed.commit_date
        environments[env["machine"], env["env_name"]] = [
            env["python"], env["params"], env["requirements"], env["env_vars"]]
    if len(items) == 1:  # exactly the statements of a lone file
        parsed, env = items[0].parsed, items[0].parsed.environment
        conn.execute(
            "INSERT INTO commits VALUES (?, ?, ?, ?) ON CONFLICT (subject, hash) DO UPDATE"
            " SET date = coalesce(excluded.date, commits.date), branch = coalesce(excluded.branch, commits.branch)",
            [subject, parsed.commit_hash, parsed.commit_date, branch],
        )
        conn.execute(
            "INSERT OR REPLACE INTO environments VALUES (?, ?, ?, ?, ?, ?)",
            [env["machine"], env["env_name"], env["python"], env["params"], env["requirements"], env["env_vars"]],
        )
    else:
        conn.execute(
            "INSERT INTO commits SELECT ?, unnest(?::VARCHAR[]), unnest(?::TIMESTAMP[]), ?"
            " ON CONFLICT (subject, hash) DO UPDATE"
            " SET date = coalesce(excluded.date, commits.date), branch = coalesce(excluded.branch, commits.branch)",
            [subject, list(commits), list(commits.values()), branch],
        )
        keys, values = list(environments), list(environments.values())
        conn.execute(
            "INSERT OR REPLACE INTO environments SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]),"
            " unnest(?::VARCHAR[]), unnest(?::JSON[]), unnest(?::JSON[]), unnest(?::JSON[])",
            [[k[0] for k in keys], [k[1] for k in keys], *([v[i] for v in values] for i in range(4))],
        )
    heads.mark_stale(conn, subject, sorted({item.parsed.environment["machine"] for item in items}))
    archs = {item.parsed.environment["machine"]: item.arch for item in items if item.arch}  # the last one wins
    for machine, arch in archs.items():
        conn.execute("UPDATE machines SET arch = ? WHERE name = ?", [arch, machine])
    tracker.forget_many([sidecar.sidecar_path(Path(item.relpath)).as_posix()
                         for item in items if len(item.fingerprints) == 1])  # no sidecar (any more)
    tracker.record_many([fp for item in items for fp in item.fingerprints])


_NO_VALUES = dict.fromkeys(RESULT_COLUMNS)
"""A row's columns that its reader or record left out are NULL (a DataFrame would make them NaN)."""


class FileKeyTaken(ValueError):
    """A results file holds the commit and environment of a machine that another file already holds."""


def _claim_file_keys(conn: duckdb.DuckDBPyConnection, subject: str, items: list[_Parsed]) -> None:
    """Record which file holds each (machine, commit, environment): asv writes one file for each.

    This key, kept in result_files, is what keeps results rows unique (a
    file holds each benchmark and params once). A batch in which a key
    moves between files, or is held by a file outside it, is stored file
    by file, so the outcome is that of files stored one after another.
    """
    relpaths = [item.relpath for item in items]
    keys = {item.relpath: (item.parsed.environment["machine"], item.parsed.commit_hash,
                           item.parsed.environment["env_name"]) for item in items if item.parsed.row_count}
    holders = {tuple(key): path for *key, path in conn.execute(
        "SELECT machine, commit_hash, env_name, source_file FROM result_files"
        " WHERE subject = ? AND list_contains(?::VARCHAR[], commit_hash)",
        [subject, sorted({key[1] for key in keys.values()})]).fetchall()}
    for relpath, key in keys.items():
        holder = holders.get(key, relpath)
        if holder != relpath:
            if len(items) > 1:
                raise _OneByOne
            machine, commit, env = key
            raise FileKeyTaken(
                f"commit {commit[:8]} in environment {env} on machine {machine} is already stored from "
                f"{holder}; asv writes one file per commit and environment, so one of the two is a copy: "
                "remove it and ingest again")
    if len(set(keys.values())) < len(keys):
        raise _OneByOne  # two files of the batch hold one key: the first one stored keeps it
    conn.execute("DELETE FROM result_files WHERE subject = ? AND list_contains(?::VARCHAR[], source_file)",
                 [subject, relpaths])
    if keys:
        conn.execute("INSERT INTO result_files SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]),"
                     " unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
                     [subject, *([key[i] for key in keys.values()] for i in range(3)), list(keys)])


def _store_benchmarks(
    conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str,
    benchmarks: dict[str, BenchmarkDef], path: Path,
) -> None:
    # Definitions the file no longer holds stay: retired benchmarks keep naming their stored rows, and an
    # importer's definitions (flybench import) are not the file's to remove.
    conn.execute("DELETE FROM benchmarks WHERE subject = ? AND list_contains(?::VARCHAR[], name)",
                 [subject, list(benchmarks)])
    rows = [[subject, b.name, b.param_names, json.dumps(b.params), b.unit, b.type, b.version]
            for b in benchmarks.values()]
    plain = all(isinstance(v, str) or v is None for row in rows for v in (row[1], *row[4:])) and all(
        isinstance(n, str) for row in rows for n in row[2])
    if plain and rows:  # one statement for all of them
        conn.execute(
            "INSERT INTO benchmarks SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[][]), unnest(?::JSON[]),"
            " unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
            [subject, *([row[i] for row in rows] for i in range(1, 7))],
        )
    else:
        for row in rows:
            conn.execute("INSERT INTO benchmarks VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    tracker.record(tracker.fingerprint(path, "benchmarks"))


def _remove(conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, relpath: str) -> None:
    """A results file that vanished from the tree takes its rows with it."""
    machines = [m for (m,) in conn.execute("SELECT machine FROM result_files WHERE subject = ? AND source_file = ?",
                                           [subject, relpath]).fetchall()]
    conn.execute("DELETE FROM results WHERE subject = ? AND source_file = ?", [subject, relpath])
    conn.execute("DELETE FROM result_files WHERE subject = ? AND source_file = ?", [subject, relpath])
    heads.mark_stale(conn, subject, machines)
    tracker.forget(relpath)


@contextmanager
def _transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """All of one file or none of it; a Ctrl-C pressed before it begins ends the ingest here (interrupts)."""
    interrupts.checkpoint()
    conn.begin()
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
