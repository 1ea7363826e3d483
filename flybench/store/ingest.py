"""Build the DuckDB store from an asv results tree, idempotently and file by file.

Each results file (with its sidecar) is one transaction: its old rows are
deleted and its new rows inserted together with its fingerprint, so a crash
or a corrupt file never leaves half a file in the database, and running
ingest again only reads files whose bytes changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from asv import util

from flybench.errors import FlybenchError
from flybench.store import sidecar
from flybench.store.asv_files import BAD_FILE, BenchmarkDef, ResultsFile, load_benchmarks, machine_row, read_results
from flybench.store.db import DEFAULT_DB, connect
from flybench.store.files import FileTracker, Fingerprint

RESULT_COLUMNS = (
    "subject", "machine", "commit_hash", "env_name", "benchmark", "params", "unit", "value",
    "ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat", "samples", "started_at", "duration",
    "benchmark_version", "status", "reason", "contract", "errors", "tolerance", "tflops", "gbps",
    "roofline_fraction", "device", "run_id", "source_file",
)


@dataclass(frozen=True)
class FileError:
    """A file that was not ingested, and why."""

    path: str
    message: str


@dataclass
class IngestReport:
    """What one ingest did: files read, skipped as unchanged, removed as vanished, and failed."""

    db_path: str
    subject: str
    loaded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rows: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        lines = [
            f"{self.db_path} ({self.subject}): {len(self.loaded)} files loaded ({self.rows} rows), "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} removed, {len(self.errors)} failed"
        ]
        lines += [f"  error: {e.path}: {e.message}" for e in self.errors]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def ingest(
    results_dir: str | Path,
    db_path: str | Path = DEFAULT_DB,
    subject: str | None = None,
    *,
    config: str | Path | None = None,
    branch: str | None = None,
) -> IngestReport:
    """Load every new or changed results file under `results_dir` into `db_path`.

    `subject` names the repository whose commits these are (default: the
    `project` of the asv config found at or above `results_dir`, or `config`).
    `branch`, when the caller knows it (nightly on main, a PR branch), is
    recorded for the commits read in this run.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FlybenchError(f"{root} is not a directory of asv results (asv's results_dir)")
    subject = subject or project_name(root, Path(config) if config else None)
    benchmarks_path = root / "benchmarks.json"
    benchmarks = load_benchmarks(benchmarks_path)
    report = IngestReport(str(db_path), subject)
    with connect(db_path) as conn:
        tracker = FileTracker(conn, subject, root)
        # Param names and units come from benchmarks.json: when it changes, every file is re-read.
        reread_all = not tracker.is_unchanged(benchmarks_path, "benchmarks")
        if reread_all:
            with _transaction(conn):
                _store_benchmarks(conn, tracker, subject, benchmarks, benchmarks_path)
        seen = {tracker.relpath(benchmarks_path)}
        for machine_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            files = sorted(p for p in machine_dir.glob("*.json") if p.name != "machine.json")
            seen.update(tracker.relpath(p) for p in files)
            seen.update(tracker.relpath(p) for p in map(sidecar.sidecar_path, files) if p.is_file())
            if files:
                _ingest_machine(conn, tracker, report, machine_dir, files, benchmarks, reread_all, branch)
        for relpath in sorted(tracker.known_paths() - seen):
            with _transaction(conn):
                _remove(conn, tracker, subject, relpath)
            report.removed.append(relpath)
    return report


def project_name(results_dir: Path, config: Path | None = None) -> str:
    """The asv config's `project`: the default subject of a results tree."""
    here = results_dir.resolve()
    candidates = [config] if config else [d / "asv.conf.json" for d in (here, *here.parents)]
    for path in candidates:
        if path.is_file():
            return str(_asv_config(path, "project"))
    raise FlybenchError(f"no asv.conf.json at or above {results_dir}: pass a subject (the repository measured)")


def default_results_dir(config: Path = Path("asv.conf.json")) -> Path:
    """asv's `results_dir` from its config, relative to the config's folder as asv reads it."""
    return config.parent / str(_asv_config(config, "results_dir"))


def _asv_config(path: Path, key: str) -> Any:
    try:
        return util.load_json(str(path), js_comments=True)[key]
    except BAD_FILE as exc:
        raise FlybenchError(f"{path}: cannot read {key!r} ({type(exc).__name__}: {exc})") from exc


def _ingest_machine(
    conn: duckdb.DuckDBPyConnection, tracker: FileTracker, report: IngestReport, machine_dir: Path,
    files: list[Path], benchmarks: dict[str, BenchmarkDef], reread_all: bool, branch: str | None,
) -> None:
    machine_json = machine_dir / "machine.json"
    try:
        machine = machine_row(machine_json)
    except BAD_FILE as exc:
        skipped = f"{exc}; the {len(files)} results files beside it were not read"
        report.errors.append(FileError(str(machine_json), skipped))
        return
    stored = conn.execute("SELECT arch FROM machines WHERE name = ?", [machine["name"]]).fetchone()
    if stored and not machine["arch"]:
        machine["arch"] = stored[0]  # learnt from a sidecar's device record; the name does not say it
    conn.execute("INSERT OR REPLACE INTO machines VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", list(machine.values()))
    for path in files:
        relpath, cases_path = tracker.relpath(path), sidecar.sidecar_path(path)
        if not reread_all and tracker.is_unchanged(path, "results") and tracker.is_unchanged(cases_path, "cases"):
            report.unchanged.append(relpath)
            continue
        try:
            fingerprints = [tracker.fingerprint(path, "results")]
            cases: dict[sidecar.CaseKey, dict[str, Any]] = {}
            if cases_path.is_file():
                fingerprints.append(tracker.fingerprint(cases_path, "cases"))
                cases, warnings = sidecar.load_cases(cases_path)
                report.warnings += warnings
            parsed = read_results(path, machine["name"], benchmarks)
            for row in parsed.rows:
                sidecar.annotate(row, cases)
            with _transaction(conn):
                _store_file(conn, tracker, report.subject, relpath, parsed, cases, fingerprints, branch)
        except (*BAD_FILE, duckdb.Error) as exc:
            report.errors.append(FileError(str(path), f"{type(exc).__name__}: {exc}"))
            continue
        report.loaded.append(relpath)
        report.rows += len(parsed.rows)


def _store_file(
    conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, relpath: str, parsed: ResultsFile,
    cases: dict[sidecar.CaseKey, dict[str, Any]], fingerprints: list[Fingerprint], branch: str | None,
) -> None:
    machine = parsed.environment["machine"]
    conn.execute("DELETE FROM results WHERE subject = ? AND source_file = ?", [subject, relpath])
    if parsed.rows:
        frame = pd.DataFrame(
            [{**row, "subject": subject, "machine": machine, "commit_hash": parsed.commit_hash,
              "env_name": parsed.environment["env_name"], "source_file": relpath} for row in parsed.rows],
            columns=list(RESULT_COLUMNS), dtype=object,  # object keeps None as NULL, never NaN
        )
        conn.register("incoming_results", frame)
        conn.execute("INSERT INTO results BY NAME SELECT * FROM incoming_results")
        conn.unregister("incoming_results")
    conn.execute(
        "INSERT INTO commits VALUES (?, ?, ?, ?) ON CONFLICT (subject, hash) DO UPDATE"
        " SET date = coalesce(excluded.date, commits.date), branch = coalesce(excluded.branch, commits.branch)",
        [subject, parsed.commit_hash, parsed.commit_date, branch],
    )
    env = parsed.environment
    conn.execute(
        "INSERT OR REPLACE INTO environments VALUES (?, ?, ?, ?, ?, ?)",
        [machine, env["env_name"], env["python"], env["params"], env["requirements"], env["env_vars"]],
    )
    arch = sidecar.device_arch(cases)
    if arch:
        conn.execute("UPDATE machines SET arch = ? WHERE name = ?", [arch, machine])
    if len(fingerprints) == 1:  # no sidecar (any more)
        tracker.forget(sidecar.sidecar_path(Path(relpath)).as_posix())
    for fp in fingerprints:
        tracker.record(fp)


def _store_benchmarks(
    conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str,
    benchmarks: dict[str, BenchmarkDef], path: Path,
) -> None:
    conn.execute("DELETE FROM benchmarks WHERE subject = ?", [subject])
    for b in benchmarks.values():
        conn.execute(
            "INSERT INTO benchmarks VALUES (?, ?, ?, ?, ?, ?, ?)",
            [subject, b.name, b.param_names, json.dumps(b.params), b.unit, b.type, b.version],
        )
    tracker.record(tracker.fingerprint(path, "benchmarks"))


def _remove(conn: duckdb.DuckDBPyConnection, tracker: FileTracker, subject: str, relpath: str) -> None:
    """A results file that vanished from the tree takes its rows with it."""
    conn.execute("DELETE FROM results WHERE subject = ? AND source_file = ?", [subject, relpath])
    tracker.forget(relpath)


@contextmanager
def _transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """All of one file or none of it."""
    conn.begin()
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
