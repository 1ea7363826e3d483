"""series_heads: the newest row of every series, kept beside `results` by every writer.

The dashboard's Overview shows one row per series (subject, machine,
environment, benchmark, params): the one of the newest commit. Finding those
rows among a million takes about 70 ms and reading them whole 40 ms more, so
writers keep them in a table of their own, refreshed in the same transaction
as the rows they change, or marked stale there and refreshed before the
writer is done: ingest marks each machine whose files it stores or removes
and refreshes them all once at the end (per batch, the refresh cost a fifth
of a million-row ingest); a mark left by an interrupted ingest is picked up
by the next one. The importer refreshes its subject directly (commit order
can change with new records). The table has the columns of `results`; a
migration that adds a column to one adds it to the other.
"""

from __future__ import annotations

import duckdb

MEASURED = "r.status <> 'unavailable' OR r.reason IS NOT NULL OR r.value IS NOT NULL"
"""A row that measured its case, or said why not. asv lists every case of a benchmark in each results file, the
ones a run's selection left out with no value; such a row (unavailable, with no value and no reason) is no newer
result of its series: a run of one provider must not hide another provider's latest time."""

NEWEST_ROW = f"""arg_max(r.rowid, [({MEASURED})::BIGINT, coalesce(o.position, 0)]) AS row_id FROM results r LEFT JOIN (
    SELECT subject, hash, row_number() OVER (PARTITION BY subject ORDER BY date IS NOT NULL, date, hash) AS position
    FROM commits) o ON o.subject = r.subject AND o.hash = r.commit_hash"""
"""A series' newest row: among the rows that measured the case (`MEASURED`), the latest commit date (a commit
without one comes last), then the greatest hash; a series no run measured keeps its newest row.
Found on the key columns and each commit's position alone, so only the newest rows are read whole.
Use as `SELECT {NEWEST_ROW} WHERE ... GROUP BY <series>`."""

SERIES = "r.subject, r.machine, r.env_name, r.benchmark, r.params"


def refresh(conn: duckdb.DuckDBPyConnection, subject: str, machines: list[str] | None = None) -> None:
    """Recompute the heads of `subject` on `machines` (None: all of them), inside the caller's transaction."""
    args = [subject, machines, machines]
    conn.execute(f"DELETE FROM series_heads WHERE {_on('series_heads')}", args)
    conn.execute(f"INSERT INTO series_heads SELECT * FROM results WHERE rowid IN "
                 f"(SELECT {NEWEST_ROW} WHERE {_on('r')} GROUP BY {SERIES})", args)


def _on(table: str) -> str:
    return f"{table}.subject = ? AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], {table}.machine))"


def mark_stale(conn: duckdb.DuckDBPyConnection, subject: str, machines: list[str]) -> None:
    """In the transaction that changes these machines' rows: their heads are to be refreshed."""
    conn.execute("INSERT OR IGNORE INTO stale_heads SELECT ?, unnest(?::VARCHAR[])", [subject, machines])


def refresh_stale(conn: duckdb.DuckDBPyConnection) -> None:
    """Refresh every machine marked stale, and clear the marks, inside the caller's transaction."""
    stale = conn.execute("SELECT subject, list(machine ORDER BY machine) FROM stale_heads GROUP BY subject").fetchall()
    for subject, machines in stale:
        refresh(conn, subject, machines)
    conn.execute("DELETE FROM stale_heads")

