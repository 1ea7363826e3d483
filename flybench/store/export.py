"""The store's rows as Parquet or CSV files, which DuckDB (or another engine) queries where they lie.

One DuckDB file has one writer at a time. Where many runners share storage,
the store can be exported instead and read in place:
`read_parquet('DIR/results/**/*.parquet', hive_partitioning = true)`. The
files are written by DuckDB itself (its COPY, through the relation API, so
no path is pasted into SQL); the database is opened read-only.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa

from flybench.errors import FlybenchError, unknown_name
from flybench.store.db import connect

FORMATS = ("parquet", "csv")
PARTITIONS = ("subject", "machine", "month")
"""How `results` is split in a whole-store export; `month` is the commit's (YYYY-MM), else the run's."""

_RESULTS_BY_MONTH = """
    SELECT r.*, strftime(coalesce(c.date, r.started_at), '%Y-%m') AS month
    FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash"""


def export_rows(db_path: Path, output: Path, fmt: str, *, query: str | None = None, table: str | None = None) -> int:
    """Write the rows of `query` (SQL over the store) or of one `table` to the file `output`; returns how many."""
    if query is not None:
        return _export_query(db_path, output, fmt, query)
    with connect(db_path, read_only=True) as conn:
        known = tables(conn)
        if table not in known:
            raise unknown_name("table", table, known)
        relation = conn.table(table)
        try:
            _write(relation, output, fmt)
        except duckdb.Error as exc:
            raise FlybenchError(f"cannot write {output}: {exc}") from exc
        return _count(relation)


QUERY_READS_ONLY_THE_STORE = (
    "--query reads only the store's tables: the query runs on a connection that DuckDB lets reach no file, URL "
    "or other database (read_text, read_csv, read_parquet and the like are refused)")


def _export_query(db_path: Path, output: Path, fmt: str, query: str) -> int:
    """A person's SQL over the store, run where it can read nothing else, its rows written to `output`.

    The query's connection is sealed (`connect(sealed=True)`: DuckDB's
    external access off), so it cannot write the output either: its rows
    stream out as Arrow batches to a second, in-memory DuckDB that writes
    the file, with the same types (`arrow_lossless_conversion` keeps JSON
    columns JSON).
    """
    with connect(db_path, read_only=True, sealed=True) as conn:
        _check_query(conn, query)
        conn.execute("SET arrow_lossless_conversion = true")
        try:
            relation = conn.sql(query)
            batches = relation.to_arrow_reader()
        except duckdb.PermissionException as exc:
            raise FlybenchError(f"{QUERY_READS_ONLY_THE_STORE}; DuckDB refused this one ({exc}). Query the "
                                "store's tables, or read other files with DuckDB itself: nothing was written") from exc
        except duckdb.Error as exc:
            raise FlybenchError(f"--query failed: {exc}") from exc
        rows = 0
        failed: list[BaseException] = []

        def counted() -> Iterator[pa.RecordBatch]:
            nonlocal rows
            try:
                for batch in batches:
                    rows += batch.num_rows
                    yield batch
            except Exception as exc:  # the query failed while it ran: said as the query's error, not the file's
                failed.append(exc)
                raise

        writer = duckdb.connect(":memory:")
        try:
            _write(writer.from_arrow(pa.RecordBatchReader.from_batches(batches.schema, counted())), output, fmt)
        except (duckdb.Error, pa.ArrowException) as exc:
            if failed:
                raise FlybenchError(f"--query failed: {failed[0]}") from failed[0]
            raise FlybenchError(f"cannot write {output}: {exc}") from exc
        finally:
            writer.close()
        return rows


def _check_query(conn: duckdb.DuckDBPyConnection, query: str) -> None:
    """One query and nothing else: a statement that is not a SELECT (USE, DETACH, ATTACH, DELETE, COPY, SET)
    could reach past the read-only store, and is refused before anything runs."""
    try:
        statements = conn.extract_statements(query)
    except duckdb.Error as exc:
        raise FlybenchError(f"--query failed: {exc}") from exc
    kinds = [str(statement.type).rsplit(".", 1)[-1] for statement in statements]
    if kinds != ["SELECT"]:
        raise FlybenchError(f"--query must be one query that returns rows (SELECT, FROM, WITH ...); this one is "
                            f"{', '.join(kinds) or 'empty'}: nothing was run")


def export_store(db_path: Path, directory: Path) -> dict[str, int]:
    """Every table as Parquet under `directory`: results partitioned by PARTITIONS, the others a file each.

    Returns the rows written per table. The folder must be new or empty, so no
    earlier export is mixed in, or hold an export that stopped partway (a full
    disk): INCOMPLETE marks it while it is written, and the same command
    writes it again over the files an export writes.
    """
    written: dict[str, int] = {}
    with connect(db_path, read_only=True) as conn:
        names = tables(conn)
        try:
            _start(directory, names)
            for table in names:
                _write_table(conn, directory, table)
                written[table] = _count(conn.table(table))
        except (duckdb.Error, OSError) as exc:
            if not _disk_full(exc):
                raise
            raise FlybenchError(
                f"the disk holding {directory} is full ({str(exc).strip()}): the export stopped after {len(written)} "
                f"of {len(names)} tables, and {directory / INCOMPLETE} says so. Free some space and run the same "
                "command again: it writes the export again, replacing the files this export wrote") from exc
    (directory / INCOMPLETE).unlink()
    return written


INCOMPLETE = ".flybench-export-incomplete"
"""The file that marks an export folder as being written, or stopped partway: readers should wait."""


def _start(directory: Path, names: list[str]) -> None:
    """Make `directory` ready for an export of the tables `names`, and mark it unfinished.

    An export that stopped partway is written again from the start: its
    results folder goes (the store may have changed since), its table files
    are written over. A folder holding anything else is refused.
    """
    present = {entry.name for entry in directory.iterdir()} if directory.is_dir() else set()
    if directory.exists() and (not directory.is_dir() or (present and INCOMPLETE not in present)):
        raise FlybenchError(f"{directory} exists and is not an empty folder: name a new folder for the export")
    other = sorted(present - {INCOMPLETE, "results", *(f"{table}.parquet" for table in names)})
    if other:
        raise FlybenchError(f"{directory} holds an export that stopped partway, and {', '.join(other)}, which "
                            f"flybench export did not write: move {'it' if len(other) == 1 else 'them'} away, or "
                            "name a new folder for the export")
    if (directory / "results").is_dir():
        shutil.rmtree(directory / "results")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / INCOMPLETE).write_text("flybench export is writing this folder, or stopped partway: run the same "
                                        "`flybench export --dir` again to finish it.\n")


def _write_table(conn: duckdb.DuckDBPyConnection, directory: Path, table: str) -> None:
    """One table of a whole-store export: results partitioned by PARTITIONS, any other table one file."""
    if table == "results":
        conn.sql(_RESULTS_BY_MONTH).write_parquet(str(directory / table), partition_by=list(PARTITIONS))
    else:
        conn.table(table).write_parquet(str(directory / f"{table}.parquet"))


def _disk_full(exc: BaseException) -> bool:
    """ENOSPC, as Python raises it or as DuckDB words it."""
    return (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "No space left on device" in str(exc)


def tables(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """The store's tables, by name."""
    return [name for (name,) in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
        "ORDER BY table_name").fetchall()]


def _count(relation: duckdb.DuckDBPyRelation) -> int:
    return relation.count("*").fetchall()[0][0]


def _write(relation: duckdb.DuckDBPyRelation, output: Path, fmt: str) -> None:
    if fmt == "parquet":
        relation.write_parquet(str(output))
    elif fmt == "csv":
        relation.write_csv(str(output), header=True)
    else:
        raise unknown_name("format", fmt, FORMATS)
