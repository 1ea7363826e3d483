"""Opening the DuckDB file: one place that turns DuckDB's errors into advice.

DuckDB lets one process write a database file, or several processes read it,
never both. A dashboard left open therefore blocks `flybench ingest`; the
error says so instead of showing DuckDB's lock message bare.

The same place guards the file itself. A file that is not flybench's own
database (another application's DuckDB file, or no DuckDB file at all) is
refused before anything is written to it. A database DuckDB finds corrupt, or
a disk that fills while it is written, ends the command with what to do: the
store is always rebuildable from the asv results files.
"""

from __future__ import annotations

import errno
import re
import shlex
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from flybench.errors import FlybenchError
from flybench.store.schema import check_version, current_version, migrate

DEFAULT_DB = Path("results") / "flybench.duckdb"
"""Git-ignored and always rebuildable from the asv results with `flybench ingest`."""


@contextmanager
def connect(db_path: str | Path = DEFAULT_DB, read_only: bool = False,
            sealed: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection with the schema up to date (writers migrate it, readers check it).

    A writer first reads an existing file as a reader would and refuses one that is not flybench's.
    `sealed` (read-only): a connection of its own that reaches nothing but the store, for SQL a person
    wrote (`export --query`); see `_attached`.
    """
    path = Path(db_path)
    if path.exists() and not path.is_file():
        raise FlybenchError(f"--db {path} is not a file (a {'directory' if path.is_dir() else 'device or pipe'}): "
                            "pass the path of a database file, e.g. results/flybench.duckdb")
    if sealed and not read_only:
        raise ValueError("a sealed connection is read-only")
    if read_only:
        with (_sealed(path) if sealed else _attached(path)) as conn:
            try:
                check_version(conn, path)
            except FlybenchError:
                _check_ours(conn, path)  # another application's file gets that said, not advice to migrate it
                raise
            conn.complete()  # the checks' last result ends here, so the caller may use relations too
            yield conn
        return
    if path.exists():
        with _attached(path) as probe:
            _check_ours(probe, path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = duckdb.connect(str(path))
    except (duckdb.Error, OSError) as exc:
        raise _explain(path, exc) from exc
    try:
        with _faults(path):
            migrate(conn, path)
            conn.complete()
            yield conn
    finally:
        with _faults(path):
            conn.close()  # the checkpoint: it writes the file, and can fill the disk too


def _check_ours(conn: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a database that holds tables but not flybench's schema_version: another application's file."""
    try:
        if current_version(conn) > 0:
            return
    except (duckdb.Error, ValueError, TypeError):
        return  # flybench's marker, damaged: reading or migrating it says so, with the advice to rebuild
    tables = sorted(name for (name,) in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()").fetchall())
    if tables and "schema_version" not in tables:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise FlybenchError(f"{path} is a DuckDB database of another application (it holds {shown}, and not "
                            "flybench's schema_version table); flybench did not write to it: pass another --db")


_READER_LOCK = threading.Lock()
_reader: duckdb.DuckDBPyConnection | None = None


@contextmanager
def _attached(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The file attached read-only, as the default database, to this process's one in-memory DuckDB.

    Starting a DuckDB instance and loading a file's catalog takes 40-60 ms,
    attaching a file to a running instance a few; a dashboard page runs many
    short queries. The file is detached after each use, so no lock outlives a
    query. Reads take turns (one `store` at a time per process). `TYPE duckdb`:
    DuckDB would otherwise open a SQLite file through its extension.
    """
    global _reader
    if not path.exists():
        raise FlybenchError(f"no database at {path}: run `flybench ingest <results dir> --db {path}` first")
    with _READER_LOCK:
        if _reader is None:
            _reader = duckdb.connect(":memory:")
        conn = _reader
        quoted = str(path).replace("'", "''")
        try:
            conn.execute(f"ATTACH '{quoted}' AS store (READ_ONLY, TYPE duckdb)")
        except duckdb.Error as exc:
            raise _explain(path, exc) from exc
        try:
            conn.execute("USE store")
            with _faults(path):
                yield conn
        finally:
            conn.execute("USE memory")
            conn.execute("DETACH store")


@contextmanager
def _sealed(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The file attached read-only to an in-memory DuckDB of its own, which then can reach nothing else.

    DuckDB's `enable_external_access` is turned off once the file is
    attached: no file on disk (read_text, read_csv, read_parquet, glob ...),
    no URL, no other database can be read through it, and it cannot be turned
    on again while the connection lives. The shared reader of `_attached`
    must keep it on (it attaches a file per use), so this one is separate and
    closed after use.
    """
    if not path.exists():
        raise FlybenchError(f"no database at {path}: run `flybench ingest <results dir> --db {path}` first")
    conn = duckdb.connect(":memory:")
    try:
        quoted = str(path).replace("'", "''")
        try:
            conn.execute(f"ATTACH '{quoted}' AS store (READ_ONLY, TYPE duckdb)")
        except duckdb.Error as exc:
            raise _explain(path, exc) from exc
        conn.execute("USE store")
        conn.execute("SET enable_external_access = false")
        with _faults(path):
            yield conn
    finally:
        conn.close()


@contextmanager
def _faults(path: Path) -> Iterator[None]:
    """Errors of the database file itself (corrupt blocks, a full disk), raised while it is used, as advice."""
    try:
        yield
    except (duckdb.Error, OSError) as exc:
        fault = _fault(path, exc)
        if fault is None:
            raise
        raise fault from exc


def is_fault(exc: BaseException) -> bool:
    """Whether `exc` is a fault of the database file or its disk (corrupt blocks, a full disk).

    No later write can succeed after one, so a writer that reports a bad
    input file and goes on must re-raise these instead: `connect` turns them
    into advice when they leave it.
    """
    return _fault(Path(), exc) is not None


def _fault(path: Path, exc: BaseException) -> FlybenchError | None:
    """The advice for a fault of the file or its disk, or None for any other error."""
    message = str(exc)
    if (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "No space left on device" in message:
        return FlybenchError(
            f"the disk holding {path} is full ({message.strip()}): results files stored before it filled are "
            "kept, nothing was stored for the files not yet written. Free some space and run the same command "
            "again: files already stored are skipped")
    if "Corrupt database file" in message:
        return FlybenchError(f"{path} is corrupt ({message.strip()}). {_rebuild(path)}")
    return None


def _rebuild(path: Path) -> str:
    quoted = shlex.quote(str(path))
    return ("The store is rebuilt from the asv results files: move the file aside and ingest again, "
            f"`mv {quoted} {shlex.quote(str(path) + '.corrupt')} && flybench ingest --db {quoted}` "
            "(name the results folders you had ingested if they are not this project's; "
            "`flybench import` again what was imported)")


def _explain(path: Path, exc: BaseException) -> FlybenchError:
    message = str(exc)
    if "not a valid DuckDB database file" in message:
        return FlybenchError(
            f"{path} is not a DuckDB database file; flybench did not write to it. Pass another --db, or, if it "
            f"was flybench's database and is damaged: {_rebuild(path)}")
    fault = _fault(path, exc)
    if fault is not None:
        return fault
    if "lock" not in message.lower():
        return FlybenchError(f"cannot open {path}: {message}")
    holder = re.search(r"held in (.+?) \(PID (\d+)\)", message)
    who = f"process {holder.group(2)} ({holder.group(1)})" if holder else "another process"
    return FlybenchError(
        f"{path} is locked by {who}. DuckDB allows one writer or several readers at a time: "
        "close the dashboard or the other flybench command using this file and retry, "
        "or pass another database path."
    )
