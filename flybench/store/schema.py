"""The DuckDB schema as an ordered list of migration steps.

Step N (1-based) brings a database from version N-1 to N. A step is never
edited once released: a change is a new step appended to MIGRATIONS, so old
databases upgrade in place and new ones are built by replaying every step.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from flybench.errors import FlybenchError

MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE machines (
            name VARCHAR PRIMARY KEY,
            host VARCHAR,
            accelerator VARCHAR,
            arch VARCHAR,
            os VARCHAR,
            cpu_arch VARCHAR,
            cpu VARCHAR,
            num_cpu VARCHAR,
            ram VARCHAR,
            machine_json JSON
        )""",
        """CREATE TABLE commits (
            subject VARCHAR NOT NULL,
            hash VARCHAR NOT NULL,
            date TIMESTAMP,
            branch VARCHAR,
            PRIMARY KEY (subject, hash)
        )""",
        """CREATE TABLE environments (
            machine VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            python VARCHAR,
            params JSON,
            requirements JSON,
            env_vars JSON,
            PRIMARY KEY (machine, env_name)
        )""",
        """CREATE TABLE benchmarks (
            subject VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            param_names VARCHAR[],
            params JSON,
            unit VARCHAR,
            type VARCHAR,
            version VARCHAR,
            PRIMARY KEY (subject, name)
        )""",
        """CREATE TABLE results (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            commit_hash VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            unit VARCHAR,
            value DOUBLE,
            ci_99_a DOUBLE,
            ci_99_b DOUBLE,
            q_25 DOUBLE,
            q_75 DOUBLE,
            number INTEGER,
            repeat INTEGER,
            samples DOUBLE[],
            started_at TIMESTAMP,
            duration DOUBLE,
            benchmark_version VARCHAR,
            status VARCHAR NOT NULL,
            reason VARCHAR,
            contract JSON,
            errors JSON,
            tolerance DOUBLE,
            tflops DOUBLE,
            gbps DOUBLE,
            roofline_fraction DOUBLE,
            device JSON,
            run_id VARCHAR,
            source_file VARCHAR NOT NULL,
            PRIMARY KEY (subject, machine, commit_hash, env_name, benchmark, params)
        )""",
        """CREATE TABLE compile_metrics (
            subject VARCHAR NOT NULL,
            commit_hash VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            kernel VARCHAR NOT NULL,
            arch VARCHAR NOT NULL,
            metric VARCHAR NOT NULL,
            value DOUBLE,
            unit VARCHAR,
            source_file VARCHAR,
            PRIMARY KEY (subject, commit_hash, machine, kernel, arch, metric)
        )""",
        """CREATE TABLE ingested_files (
            subject VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            mtime_ns BIGINT NOT NULL,
            size BIGINT NOT NULL,
            sha256 VARCHAR NOT NULL,
            ingested_at TIMESTAMP NOT NULL,
            PRIMARY KEY (subject, path)
        )""",
    ],
]

LATEST = len(MIGRATIONS)


def current_version(conn: duckdb.DuckDBPyConnection) -> int:
    """0 for an empty database, else the highest step applied."""
    exists = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Apply the pending steps, each in its own transaction; returns the version reached."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP)")
    for step in range(_known_version(conn, path) + 1, LATEST + 1):
        conn.begin()
        try:
            for statement in MIGRATIONS[step - 1]:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?, now()::TIMESTAMP)", [step])
            conn.commit()
        except duckdb.Error:
            conn.rollback()
            raise
    return LATEST


def check_version(conn: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Readers cannot migrate; tell them how to get a database they can read."""
    version = _known_version(conn, path)
    if version < LATEST:
        raise FlybenchError(
            f"{path} has schema v{version}, this flybench reads v{LATEST}: "
            f"run `flybench ingest <results dir> --db {path}` to migrate (or delete it and re-ingest)"
        )


def _known_version(conn: duckdb.DuckDBPyConnection, path: Path) -> int:
    version = current_version(conn)
    if version > LATEST:
        raise FlybenchError(f"{path} has schema v{version}, newer than this flybench (v{LATEST}): upgrade flybench")
    return version
