"""The queries the dashboard and the regression reports share.

Every function opens the database read-only for the duration of one query,
so a dashboard never holds the lock that `flybench ingest` needs, and returns
a pandas DataFrame with the commit date joined on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from flybench.errors import FlybenchError
from flybench.store.db import DEFAULT_DB, connect

_RESULTS = """
    SELECT r.*, c.date AS commit_date, c.branch
    FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
    WHERE (?::VARCHAR IS NULL OR r.machine = ?) AND (?::VARCHAR IS NULL OR r.subject = ?)
"""
_SERIES_ORDER = "r.subject, r.machine, r.env_name, r.benchmark, r.params, c.date NULLS LAST, r.commit_hash"


def machines(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """Every machine with its accelerator and asv's machine.json fields."""
    return _query(db_path, "SELECT * FROM machines ORDER BY name")


def benchmarks(db_path: str | Path = DEFAULT_DB, subject: str | None = None) -> pd.DataFrame:
    """The benchmark definitions of the latest benchmarks.json of each subject."""
    return _query(db_path, "SELECT * FROM benchmarks WHERE ?::VARCHAR IS NULL OR subject = ? ORDER BY subject, name",
                  [subject, subject])


def commits(db_path: str | Path = DEFAULT_DB, machine: str | None = None, subject: str | None = None) -> pd.DataFrame:
    """Commits with results (on `machine`, if given), oldest first."""
    return _query(db_path, f"""
        SELECT DISTINCT subject, commit_hash AS hash, commit_date AS date, branch FROM ({_RESULTS})
        ORDER BY date NULLS LAST, hash""", [machine, machine, subject, subject])


def latest_results(db_path: str | Path = DEFAULT_DB, machine: str | None = None,
                   subject: str | None = None) -> pd.DataFrame:
    """Per machine, environment, benchmark and parameters: the result of the newest commit."""
    return _query(db_path, f"""
        SELECT * FROM ({_RESULTS}) r
        QUALIFY row_number() OVER (PARTITION BY subject, machine, env_name, benchmark, params
                                   ORDER BY commit_date DESC NULLS LAST, commit_hash DESC) = 1
        ORDER BY subject, machine, benchmark, params""", [machine, machine, subject, subject])


def history(db_path: str | Path = DEFAULT_DB, machine: str | None = None, benchmark: str | None = None,
            params: dict[str, Any] | None = None, subject: str | None = None) -> pd.DataFrame:
    """Results ordered by commit date within each series; None selects all (the regression scan uses that).

    `params` matches as a dict, so its key order does not matter.
    """
    frame = _query(db_path, f"{_RESULTS} AND (?::VARCHAR IS NULL OR r.benchmark = ?) ORDER BY {_SERIES_ORDER}",
                   [machine, machine, subject, subject, benchmark, benchmark])
    if params is not None:
        frame = frame[frame["params"].map(json.loads) == params].reset_index(drop=True)
    return frame


def compile_history(db_path: str | Path = DEFAULT_DB, machine: str | None = None,
                    subject: str | None = None) -> pd.DataFrame:
    """Compile-only resource metrics with commit dates, ordered into series per kernel, arch and metric."""
    return _query(db_path, """
        SELECT m.*, c.date AS commit_date FROM compile_metrics m
        LEFT JOIN commits c ON c.subject = m.subject AND c.hash = m.commit_hash
        WHERE (?::VARCHAR IS NULL OR m.machine = ?) AND (?::VARCHAR IS NULL OR m.subject = ?)
        ORDER BY m.subject, m.machine, m.kernel, m.arch, m.metric, c.date NULLS LAST, m.commit_hash""",
        [machine, machine, subject, subject])


def commit_pair(db_path: str | Path, machine: str, base: str, head: str,
                subject: str | None = None) -> tuple[str, str, pd.DataFrame, pd.DataFrame]:
    """The full hashes of `base` and `head` (prefixes allowed) and their results and compile metrics on `machine`."""
    with connect(db_path, read_only=True) as conn:
        known = conn.execute(
            "SELECT DISTINCT name FROM machines m JOIN results r ON r.machine = m.name ORDER BY name").fetchall()
        if machine not in {name for (name,) in known}:
            raise FlybenchError(f"no results for machine {machine!r}; known machines: "
                                f"{', '.join(name for (name,) in known) or 'none (run flybench ingest)'}")
        hashes = [_resolve(conn, machine, ref, subject) for ref in (base, head)]
        args = [machine, machine, subject, subject, hashes]
        rows = conn.execute(f"{_RESULTS} AND r.commit_hash IN (SELECT unnest(?::VARCHAR[]))", args).df()
        resources = conn.execute(
            "SELECT * FROM compile_metrics WHERE machine = ? AND commit_hash IN (SELECT unnest(?::VARCHAR[]))",
            [machine, hashes]).df()
    return hashes[0], hashes[1], rows, resources


def _resolve(conn: duckdb.DuckDBPyConnection, machine: str, ref: str, subject: str | None) -> str:
    """A full hash from a unique prefix, or an error that lists the commits this machine has."""
    known = conn.execute(f"""
        SELECT DISTINCT commit_hash, commit_date FROM ({_RESULTS}) ORDER BY commit_date NULLS LAST, commit_hash""",
        [machine, machine, subject, subject]).fetchall()
    matches = [h for h, _ in known if ref and h.startswith(ref.lower())]
    if len(matches) == 1:
        return matches[0]
    listing = ", ".join(f"{h[:8]} ({d:%Y-%m-%d})" if d else h[:8] for h, d in known)
    what = "is ambiguous" if matches else "has no results"
    raise FlybenchError(f"commit {ref!r} {what} on {machine}; known commits: {listing or 'none'}")


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts with SQL NULL as None (pandas shows it as NaN, NA or NaT depending on the dtype)."""
    return [{k: None if _is_null(v) else v for k, v in row.items()} for row in frame.to_dict("records")]


def _is_null(value: Any) -> bool:
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _query(db_path: str | Path, sql: str, args: list[Any] | None = None) -> pd.DataFrame:
    with connect(db_path, read_only=True) as conn:
        return conn.execute(sql, args or []).df()
