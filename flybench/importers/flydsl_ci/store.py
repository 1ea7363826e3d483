"""Importing a FlyDSL CI history into the store: idempotent, incremental, all of it or nothing.

One file is one transaction. The file is read and checked, and the clone (if
any) read, before the transaction starts; inside it, records new to the
store are added to `imported_records` (keyed as FlyDSL keys them: run id,
runner, op, shape, dtype, metric), and the commits those records touch get
their order and their results rows derived again. A record already stored
is never rewritten, so the same file twice changes nothing and a newer file
(FlyDSL's history is a rolling window) adds only what is new. A record that
comes back with other content is reported and the stored one kept.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from flybench.compile import ci_ops
from flybench.importers.flydsl_ci import code
from flybench.importers.flydsl_ci.axis import DEFAULT_SUBJECT, Resolved, check_subject, resolve, subject_commits
from flybench.importers.flydsl_ci.derive import (SOURCE, CommitRow, below_printed, branches, commit_rows,
                                                 result_rows)
from flybench.importers.flydsl_ci.read import Key, Record, RecordError, from_stored, read_history
from flybench.importers.git_history import Clone, read_clone
from flybench.store import heads
from flybench.store.db import DEFAULT_DB, connect
from flybench.store.ingest import RESULT_COLUMNS, _transaction  # one definition of a file's transaction

IMPORTED_COLUMNS = ("source", "run_context", "pr", "shape", "source_regression", "source_record")
_RECORD_COLUMNS = ("source", "subject", "run_id", "runner", "op", "shape", "dtype", "metric", "commit_hash", "ts",
                   "pr", "status", "value", "record", "file")


@dataclass
class ImportReport:
    """What one import did; `ok` is False when records were rejected (the good ones are in)."""

    file: str
    db_path: str
    subject: str
    records: int = 0
    new: int = 0
    rows: int = 0
    commits: int = 0
    ordered_by: str = "CI timestamps"
    rejected: list[RecordError] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    attributed: int = 0
    """Main commits whose changed files were read from the clone, to tell code steps from the runner's."""
    unresolved: int = 0
    """Short commit hashes of the new records that no full hash was found for: kept as given."""
    clone: str | None = None
    """The FlyDSL clone given (--flydsl-repo), which the short hashes were looked up in too."""
    below_printed: int = 0
    """New records whose value FlyDSL printed as 0 (a rate below its precision): stored as missing, not as ok."""
    clone_notes: list[str] = field(default_factory=list)
    """What the clone could not say (shallow, another repository's, stale, main runs it lacks): `clone_notes`."""
    covered: tuple[int, int] = (0, 0)
    """(series, of all the subject's series) that run a registered kernel (`series_kernels`), a series counted once
    per target it ran on."""

    @property
    def ok(self) -> bool:
        return not self.rejected and not self.conflicts

    def summary(self) -> str:
        lines = [f"{self.file} -> {self.db_path} ({self.subject}, source {SOURCE}): {self.records} records read, "
                 f"{self.new} new, {self.records - self.new} already stored, {len(self.rejected)} rejected; "
                 f"{self.rows} result rows written for {self.commits} commits (ordered by {self.ordered_by})"]
        if self.below_printed:
            lines.append(f"  {self.below_printed} new record(s) printed 0 by FlyDSL's CI (a rate below the precision it "
                         "prints) stored as missing, not as ok values")
        lines += [f"  clone: {note}" for note in self.clone_notes]
        if self.attributed:
            lines.append(f"  code attribution: {self.attributed} main commit(s) not attributed before read from the clone")
        if self.covered[1]:
            lines.append(f"  machine code: {self.covered[0]} of {self.covered[1]} series (per target) run a registered "
                         "kernel; the others can be judged by files only")
        lines += [f"  rejected: {self.file}: {error}" for error in self.rejected]
        lines += [f"  conflict: {self.file}: {conflict}" for conflict in self.conflicts]
        if self.unresolved:
            one = self.unresolved == 1
            advice = (f"pass --flydsl-repo CLONE to resolve {'it' if one else 'them'}" if self.clone is None else
                      f"the clone {self.clone} has no single commit of {'that prefix' if one else 'those prefixes'} "
                      f"either: fetch what FlyDSL's CI ran into it (`git -C {shlex.quote(self.clone)} fetch origin "
                      "'+refs/pull/*/head:refs/remotes/origin/pr/*'`, pull requests' heads included) and import "
                      "again")
            lines.append(f"  warning: {self.unresolved} commit{'' if one else 's'} given as "
                         f"{'a short hash matches' if one else 'short hashes match'} no full hash known for subject "
                         f"{self.subject!r} (unknown or ambiguous) and {'is' if one else 'are'} kept as given: "
                         + advice)
        return "\n".join(lines)


def import_file(path: str | Path, db_path: str | Path = DEFAULT_DB, subject: str = DEFAULT_SUBJECT, *,
                flydsl_repo: str | Path | None = None, main_ref: str | None = None) -> ImportReport:
    """Import one FlyDSL CI history file (plain or gzip JSON, schema 1) into `db_path`.

    With `flydsl_repo` (a clone of FlyDSL), commits are ordered by main's
    history and split into main and branch runs by it; every stored commit
    of the subject is looked at again, not only the file's. A subject of
    another repository's commits is refused, and short commit hashes are
    filed under their full hashes (flydsl_ci.axis).
    """
    history = read_history(path)
    report = ImportReport(str(path), str(db_path), subject, records=len(history.records),
                          rejected=list(history.errors), clone=None if flydsl_repo is None else str(flydsl_repo))
    with connect(db_path) as conn:
        stored = _stored_records(conn, subject, sorted({r.run_id for r in history.records}))
        new = [r for r in history.records if r.key not in stored]
        report.conflicts = [f"record {r.index}: run {r.run_id} on {r.runner}, {' '.join(r.key[2:])} is stored "
                            "with other content; the stored record is kept"
                            for r in history.records if r.key in stored and stored[r.key] != r.canonical]
        report.new = len(new)
        report.below_printed = sum(below_printed(r) for r in new)
        stored_commits = _stored_commits(conn, subject)
        axis, foreign = subject_commits(conn, subject)
        clone = None
        if flydsl_repo is not None:
            clone = read_clone(flydsl_repo, {r.commit for r in history.records} | stored_commits | foreign, main_ref)
            report.ordered_by = f"main's history in {flydsl_repo}"
            report.clone_notes = clone_notes(clone, history.records, Path(flydsl_repo))
        full = resolve({r.commit for r in history.records} | stored_commits,
                       axis | {r.commit for r in history.records}, clone)
        check_subject(conn, subject, foreign, {full(r.commit) for r in history.records}, clone,
                      None if flydsl_repo is None else Path(flydsl_repo))
        new = [replace(r, commit=full(r.commit)) if r.commit in full.full else r for r in new]
        report.unresolved = len({r.commit for r in new} & full.unresolved)
        with _transaction(conn):
            refiled = _refile(conn, subject, full, stored_commits)
            _insert(conn, "imported_records", [_record_row(subject, r, history.path.name) for r in new],
                    _RECORD_COLUMNS)
            series_before = {(b, p) for b, p, _ in _series(conn, subject)}
            report.commits, report.rows = _derive(conn, subject, {r.key: r for r in new}, clone, refiled)
            report.covered = _series_kernels(conn, subject)
            if flydsl_repo is not None:
                report.attributed = _attribute(conn, subject, Path(flydsl_repo), main_ref, series_before)
            conn.execute("INSERT INTO imported_files VALUES (?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP) "
                         "ON CONFLICT DO NOTHING", [SOURCE, subject, history.sha256, history.path.name,
                                                    history.size, len(history.records), len(history.errors)])
    return report


def _series_kernels(conn: duckdb.DuckDBPyConnection, subject: str) -> tuple[int, int]:
    """Which registered kernels each of the subject's series runs (`flybench.compile.ci_ops`, from the registry
    alone), in place of the stored mapping; (series covered, series in all)."""
    series = conn.execute("SELECT DISTINCT benchmark, params::VARCHAR, source_record->>'op', "
                          "source_record->>'shape', source_record->>'dtype', source_record->>'arch' FROM series_heads "
                          "WHERE subject = ? AND source = ? ORDER BY ALL", [subject, SOURCE]).fetchall()
    rows = [{"subject": subject, "benchmark": benchmark, "params": params, "kernel": found.kernel,
             "arch": found.arch, "exact": found.exact}
            for benchmark, params, op, shape, dtype, arch in series
            for found in ci_ops.kernels_for(op, shape, dtype, arch)]
    conn.execute("DELETE FROM series_kernels WHERE subject = ?", [subject])
    _insert(conn, "series_kernels", rows, ("subject", "benchmark", "params", "kernel", "arch", "exact"))
    return len({(r["benchmark"], r["params"], r["arch"]) for r in rows}), len(series)


def clone_notes(clone: Clone, records: list[Record], repo: Path) -> list[str]:
    """What the clone cannot vouch for among the commits FlyDSL's CI ran as main (records without a pull request):
    a shallow clone, a clone of another repository, a stale one, and main runs whose commits its main lacks. The
    import says each, and keeps such runs on main (unattributed) unless the clone is complete and newer."""
    main = {}
    for r in records:
        if r.pr is None:
            main[r.commit] = max(main.get(r.commit, r.ts), r.ts)
    lacking = {c: seen for c, seen in main.items() if c not in clone.commits}
    notes = []
    if clone.shallow:
        notes.append(f"{repo} is a shallow clone: {len(lacking)} of the {len(main)} commits FlyDSL's CI ran as main "
                     f"are beyond its depth; they stay main runs, without code attribution (`git -C {repo} fetch "
                     "--unshallow` and import again)")
    elif main and not clone.commits:
        notes.append(f"{repo} holds none of the history's {len(main)} main commits: it is a clone of another "
                     "repository; the runs stay as FlyDSL's CI marked them, without code attribution (give a clone "
                     "of the repository the history measured)")
    else:
        newer = [c for c, seen in lacking.items() if _naive(seen) >= clone.main_tip]
        older = len(lacking) - len(newer)
        if newer:
            notes.append(f"{repo}'s main ends before {len(newer)} of the commits FlyDSL's CI ran as main: they stay "
                         f"main runs, without code attribution (`git -C {repo} fetch` and import again)")
        if older:
            notes.append(f"{older} commit(s) FlyDSL's CI ran as main are not on {repo}'s main: taken as branch runs "
                         "(pull-request runs FlyDSL could not resolve, or commits the clone lacks)")
    return notes


def _naive(ts: datetime) -> datetime:
    """A record's time as the clone's dates are kept: UTC without a zone."""
    return ts.astimezone(timezone.utc).replace(tzinfo=None) if ts.tzinfo else ts


def _attribute(conn: duckdb.DuckDBPyConnection, subject: str, repo: Path, main_ref: str | None,
               series_before: set[tuple[str, str]]) -> int:
    """The subject's code attribution (`code.read`): the main commits not attributed before, or every stored one
    when the import brought a series that was not stored (`series_before`, as (benchmark, params)); the number of
    main commits attributed."""
    measured = [h for (h,) in conn.execute("SELECT hash FROM imported_commits WHERE source = ? AND subject = ? "
                                           "AND on_main", [SOURCE, subject]).fetchall()]
    series = _series(conn, subject)
    done = set() if {(b, p) for b, p, _ in series} - series_before else {h for (h,) in conn.execute(
        "SELECT hash FROM code_changes WHERE subject = ?", [subject]).fetchall()}
    found = code.read(repo, main_ref, measured, {op for _, _, op in series}, done)
    if not done:
        conn.execute("DELETE FROM code_changes WHERE subject = ?", [subject])
        conn.execute("DELETE FROM code_touches WHERE subject = ?", [subject])
    _insert(conn, "code_changes", [{"subject": subject, **asdict(c), "files": list(c.files)} for c in found.changes],
            ("subject", "hash", "position", "merged_pr", "title", "files"))
    _insert(conn, "code_touches", [{"subject": subject, "benchmark": benchmark, "params": params, "hash": commit,
                                    "files": list(files)}
                                   for benchmark, params, op in series
                                   for commit, files in found.touches.get(op, {}).items()],
            ("subject", "benchmark", "params", "hash", "files"))
    return len(found.changes)


def _series(conn: duckdb.DuckDBPyConnection, subject: str) -> list[tuple[str, str, str]]:
    """The subject's imported series: benchmark, params as stored, FlyDSL's op (from each series' head row, one a
    series, not from every stored row)."""
    return conn.execute("SELECT DISTINCT benchmark, params::VARCHAR, source_record->>'op' FROM series_heads "
                        "WHERE subject = ? AND source = ? ORDER BY ALL", [subject, SOURCE]).fetchall()


def _refile(conn: duckdb.DuckDBPyConnection, subject: str, full: Resolved, stored: set[str]) -> set[str]:
    """Stored records of a short hash that now resolves are filed under the full hash; the full hashes.

    The rows derived from them under the short hash go (`_derive` derives
    them again under the full one), and so does the short hash's commit,
    unless rows of another source still name it. The records stay as stored.
    """
    moved = {short: long for short, long in full.full.items() if short in stored}
    if not moved:
        return set()
    shorts = sorted(moved)
    conn.execute("UPDATE imported_records SET commit_hash = m.long FROM (SELECT unnest(?::VARCHAR[]) AS short, "
                 "unnest(?::VARCHAR[]) AS long) m WHERE source = ? AND subject = ? AND commit_hash = m.short",
                 [shorts, [moved[s] for s in shorts], SOURCE, subject])
    for table, column in (("results", "commit_hash"), ("imported_commits", "hash")):
        conn.execute(f"DELETE FROM {table} WHERE source = ? AND subject = ? AND {column} IN "
                     "(SELECT unnest(?::VARCHAR[]))", [SOURCE, subject, shorts])
    conn.execute("DELETE FROM commits c WHERE subject = ? AND hash IN (SELECT unnest(?::VARCHAR[])) AND NOT EXISTS "
                 "(SELECT 1 FROM results r WHERE r.subject = c.subject AND r.commit_hash = c.hash)", [subject, shorts])
    return set(moved.values())


def _derive(conn: duckdb.DuckDBPyConnection, subject: str, fresh: dict[Key, Record],
            clone: Clone | None, refiled: set[str]) -> tuple[int, int]:
    """Commit order and results rows of every commit that gained records or changed order; (commits, rows).

    `fresh` are the records just inserted, already parsed; the others are read back from the table.
    `refiled` are commits whose records were just filed under them from a short hash.
    """
    renewed = {r.commit for r in fresh.values()} | refiled
    wanted = renewed | (set(clone.asked) if clone else set())
    first_seen = dict(conn.execute(
        "SELECT commit_hash, min(ts) FROM imported_records WHERE source = ? AND subject = ? "
        "AND commit_hash IN (SELECT unnest(?::VARCHAR[])) GROUP BY commit_hash",
        [SOURCE, subject, sorted(wanted)]).fetchall())
    stored_commits = _stored_commit_rows(conn, subject)
    commits = {h: row for h, row in commit_rows(first_seen, clone, stored_commits).items()
               if stored_commits.get(h) != row or h in renewed}
    if not commits:
        return 0, 0
    changed = sorted(commits)
    records = [(fresh.get(tuple(key)) or from_stored(raw, commit), file) for *key, commit, raw, file in conn.execute(
        "SELECT run_id, runner, op, shape, dtype, metric, commit_hash, record, file FROM imported_records "
        "WHERE source = ? AND subject = ? AND commit_hash IN (SELECT unnest(?::VARCHAR[]))",
        [SOURCE, subject, changed]).fetchall()]
    rows = result_rows(subject, records, commits)
    conn.execute("DELETE FROM imported_commits WHERE source = ? AND subject = ? AND hash IN "
                 "(SELECT unnest(?::VARCHAR[]))", [SOURCE, subject, changed])
    _insert(conn, "imported_commits", [{"source": SOURCE, "subject": subject, **asdict(c)} for c in commits.values()],
            ("source", "subject", *(f.name for f in fields(CommitRow))))
    branch = branches(rows)
    _insert(conn, "commits", [{"subject": subject, "hash": c.hash, "date": c.order_date, "branch": branch.get(c.hash)}
                              for c in commits.values()], ("subject", "hash", "date", "branch"),
            "ON CONFLICT (subject, hash) DO UPDATE SET date = excluded.date, branch = excluded.branch")
    conn.execute("DELETE FROM results WHERE subject = ? AND source = ? AND commit_hash IN "
                 "(SELECT unnest(?::VARCHAR[]))", [subject, SOURCE, changed])
    _insert(conn, "results", rows, (*RESULT_COLUMNS, *IMPORTED_COLUMNS))
    heads.refresh(conn, subject)  # commit order can change with new records: every machine of the subject
    _describe(conn, subject, rows)
    return len(commits), len(rows)


def _describe(conn: duckdb.DuckDBPyConnection, subject: str, rows: list[dict[str, Any]]) -> None:
    """Machines, environments and benchmark definitions, so imported rows list like asv's own."""
    runners = {row["machine"]: json.loads(row["device"])["arch"] for row in rows}
    _insert(conn, "machines", [{"name": name, "host": name, "accelerator": arch, "arch": arch,
                                "machine_json": json.dumps({"source": SOURCE, "runner": name})}
                               for name, arch in runners.items()],
            ("name", "host", "accelerator", "arch", "machine_json"), "ON CONFLICT DO NOTHING")
    envs = {(r["machine"], r["env_name"], r["run_context"], r["pr"]) for r in rows}
    _insert(conn, "environments", [{"machine": m, "env_name": e, "params": json.dumps(
        {"source": SOURCE, "run_context": c, "pr": p})} for m, e, c, p in envs],
            ("machine", "env_name", "params"), "ON CONFLICT DO NOTHING")
    defined: dict[str, tuple[str, dict[str, set[str]]]] = {}
    for benchmark, params, unit in conn.execute(
            "SELECT DISTINCT benchmark, params, unit FROM results WHERE subject = ? AND source = ?",
            [subject, SOURCE]).fetchall():
        values = defined.setdefault(benchmark, (unit, {}))[1]
        for name, value in json.loads(params).items():
            values.setdefault(name, set()).add(repr(value))
    _insert(conn, "benchmarks", [
        {"subject": subject, "name": name, "param_names": list(values), "unit": unit, "type": "track",
         "params": json.dumps([sorted(v) for v in values.values()]), "version": SOURCE}
        for name, (unit, values) in defined.items()],
            ("subject", "name", "param_names", "params", "unit", "type", "version"),
            "ON CONFLICT DO UPDATE SET param_names = excluded.param_names, params = excluded.params, "
            "unit = excluded.unit, type = excluded.type, version = excluded.version")


def _record_row(subject: str, record: Record, file: str) -> dict[str, Any]:
    raw = record.raw
    return {"source": SOURCE, "subject": subject, "run_id": record.run_id, "runner": record.runner,
            "op": raw["op"], "shape": raw["shape"], "dtype": raw["dtype"], "metric": raw["metric"],
            "commit_hash": record.commit, "ts": record.ts, "pr": record.pr, "status": record.status,
            "value": record.value, "record": record.canonical, "file": file}


def _insert(conn: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]], columns: Sequence[str],
            conflict: str = "") -> None:
    """Many rows in one statement (DuckDB's executemany runs one statement per row)."""
    if not rows:
        return
    frame = pd.DataFrame(rows, columns=list(columns), dtype=object)  # object keeps None as NULL, never NaN
    conn.register("incoming_rows", frame)
    try:
        conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming_rows {conflict}")
    finally:
        conn.unregister("incoming_rows")


def _stored_records(conn: duckdb.DuckDBPyConnection, subject: str, runs: list[str]) -> dict[Key, str]:
    """The stored records of the given runs (a file's): what a file's records are checked against, read for its
    runs only, so a nightly's import does not read the whole stored history."""
    return {tuple(key): record for *key, record in conn.execute(
        "SELECT run_id, runner, op, shape, dtype, metric, record FROM imported_records "
        "WHERE source = ? AND subject = ? AND list_contains(?::VARCHAR[], run_id)", [SOURCE, subject, runs]).fetchall()}


def _stored_commits(conn: duckdb.DuckDBPyConnection, subject: str) -> set[str]:
    return {h for (h,) in conn.execute("SELECT DISTINCT commit_hash FROM imported_records "
                                       "WHERE source = ? AND subject = ?", [SOURCE, subject]).fetchall()}


def _stored_commit_rows(conn: duckdb.DuckDBPyConnection, subject: str) -> dict[str, CommitRow]:
    rows = conn.execute("SELECT hash, first_seen, order_date, ordered_by, on_main, main_position, title, merged_pr "
                        "FROM imported_commits WHERE source = ? AND subject = ?", [SOURCE, subject]).fetchall()
    return {row[0]: CommitRow(*row) for row in rows}
