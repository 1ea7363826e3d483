"""Opening the DuckDB file: one place that turns DuckDB's errors into advice.

DuckDB lets one process write a database file, or several processes read it,
never both. A dashboard left open therefore blocks `flybench ingest`; the
error says so instead of showing DuckDB's lock message bare.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from flybench.errors import FlybenchError
from flybench.store.schema import check_version, migrate

DEFAULT_DB = Path("results") / "flybench.duckdb"
"""Git-ignored and always rebuildable from the asv results with `flybench ingest`."""


@contextmanager
def connect(db_path: str | Path = DEFAULT_DB, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection with the schema up to date (writers migrate it, readers check it)."""
    path = Path(db_path)
    if read_only:
        with _attached(path) as conn:
            check_version(conn, path)
            yield conn
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = duckdb.connect(str(path))
    except duckdb.IOException as exc:
        raise _explain(path, exc) from exc
    try:
        migrate(conn, path)
        yield conn
    finally:
        conn.close()


_READER_LOCK = threading.Lock()
_reader: duckdb.DuckDBPyConnection | None = None


@contextmanager
def _attached(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The file attached read-only, as the default database, to this process's one in-memory DuckDB.

    Starting a DuckDB instance and loading a file's catalog takes 40-60 ms,
    attaching a file to a running instance a few; a dashboard page runs many
    short queries. The file is detached after each use, so no lock outlives a
    query. Reads take turns (one `store` at a time per process).
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
            conn.execute(f"ATTACH '{quoted}' AS store (READ_ONLY)")
        except duckdb.IOException as exc:
            raise _explain(path, exc) from exc
        try:
            conn.execute("USE store")
            yield conn
        finally:
            conn.execute("USE memory")
            conn.execute("DETACH store")


def _explain(path: Path, exc: duckdb.IOException) -> FlybenchError:
    message = str(exc)
    if "lock" not in message.lower():
        return FlybenchError(f"cannot open {path}: {message}")
    holder = re.search(r"held in (.+?) \(PID (\d+)\)", message)
    who = f"process {holder.group(2)} ({holder.group(1)})" if holder else "another process"
    return FlybenchError(
        f"{path} is locked by {who}. DuckDB allows one writer or several readers at a time: "
        "close the dashboard or the other flybench command using this file and retry, "
        "or pass another database path."
    )
