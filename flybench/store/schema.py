"""The DuckDB schema as an ordered list of migration steps.

Step N (1-based) brings a database from version N-1 to N. A step is never
edited once released: a change is a new step appended to MIGRATIONS, so old
databases upgrade in place and new ones are built by replaying every step.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from flybench.benchmark_names import LEGACY_METRICS, TRACK
from flybench.errors import FlybenchError
from flybench.store import heads

_LEGACY = "|".join(LEGACY_METRICS)
_IS_LEGACY_SIBLING = (f"s.source = 'flybench' AND regexp_matches(s.benchmark, "
                      f"'^[a-z][a-z0-9_]*\\.(Tiny|Quick|Full)\\.({_LEGACY})$')")
_TIME_BENCHMARK = f"regexp_replace(s.benchmark, '[^.]*$', '{TRACK}')"
_LEGACY_SIBLINGS = f"""
    SELECT s.subject, s.machine, s.commit_hash, s.env_name, {_TIME_BENCHMARK} AS time_benchmark,
           json_extract_string(s.params, '$.*') AS param_values,
           {", ".join(f"max(s.value) FILTER (WHERE s.benchmark LIKE '%.{method}' AND s.status = 'ok') AS {field}"
                      for method, field in LEGACY_METRICS.items() if field != "error")},
           max(s.value) FILTER (WHERE s.benchmark LIKE '%.track_error') AS error
    FROM results s WHERE {_IS_LEGACY_SIBLING} GROUP BY ALL"""
"""Per case of the five-metric suites, its sibling values (v5 folds them into the time row). Matched by
parameter values: a sibling whose definition left benchmarks.json has its parameters named p0, p1, ..."""

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
    [  # v2: results imported from other systems (FlyDSL's CI), marked with their source and kept verbatim.
        # New results columns only: ingest writes results BY NAME, so asv rows get source 'flybench'.
        # commits, machines, environments and benchmarks are written positionally and stay as they are.
        "ALTER TABLE results ADD COLUMN source VARCHAR DEFAULT 'flybench'",  # who measured: flybench or an importer
        "ALTER TABLE results ADD COLUMN run_context VARCHAR",  # imported rows: main, pr or branch
        "ALTER TABLE results ADD COLUMN pr INTEGER",  # imported rows: the pull request the run tested
        "ALTER TABLE results ADD COLUMN shape JSON",  # imported rows: workload shape parsed from the source's name
        "ALTER TABLE results ADD COLUMN source_regression BOOLEAN",  # the source's own verdict (FlyDSL: -3% vs main)
        "ALTER TABLE results ADD COLUMN source_record JSON",  # the source's record, verbatim
        """CREATE TABLE imported_records (
            source VARCHAR NOT NULL,
            subject VARCHAR NOT NULL,
            run_id VARCHAR NOT NULL,
            runner VARCHAR NOT NULL,
            op VARCHAR NOT NULL,
            shape VARCHAR NOT NULL,
            dtype VARCHAR NOT NULL,
            metric VARCHAR NOT NULL,
            commit_hash VARCHAR NOT NULL,
            ts TIMESTAMP NOT NULL,
            pr INTEGER,
            status VARCHAR NOT NULL,
            value DOUBLE,
            record JSON NOT NULL,
            file VARCHAR NOT NULL,
            PRIMARY KEY (source, subject, run_id, runner, op, shape, dtype, metric)
        )""",
        """CREATE TABLE imported_commits (
            source VARCHAR NOT NULL,
            subject VARCHAR NOT NULL,
            hash VARCHAR NOT NULL,
            first_seen TIMESTAMP NOT NULL,
            order_date TIMESTAMP NOT NULL,
            ordered_by VARCHAR NOT NULL,
            on_main BOOLEAN,
            main_position INTEGER,
            title VARCHAR,
            merged_pr INTEGER,
            PRIMARY KEY (source, subject, hash)
        )""",
        """CREATE TABLE imported_files (
            source VARCHAR NOT NULL,
            subject VARCHAR NOT NULL,
            sha256 VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            size BIGINT NOT NULL,
            records INTEGER NOT NULL,
            rejected INTEGER NOT NULL,
            imported_at TIMESTAMP NOT NULL,
            PRIMARY KEY (source, subject, sha256)
        )""",
    ],
    [  # v3: results lose their primary key, whose index cost a third of a large ingest. A row's key is
        # unique because one results file holds one (machine, commit, environment) and each of its
        # (benchmark, params) once (the reader checks); result_files holds that file key, unique.
        "CREATE TABLE results_v3 AS SELECT * FROM results ORDER BY rowid",  # same columns, no key
        *[f"ALTER TABLE results_v3 ALTER COLUMN {column} SET NOT NULL" for column in (
            "subject", "machine", "commit_hash", "env_name", "benchmark", "params", "status", "source_file")],
        "ALTER TABLE results_v3 ALTER COLUMN source SET DEFAULT 'flybench'",
        "DROP TABLE results",
        "ALTER TABLE results_v3 RENAME TO results",
        """CREATE TABLE result_files (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            commit_hash VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            source_file VARCHAR NOT NULL,
            PRIMARY KEY (subject, machine, commit_hash, env_name)
        )""",
        """INSERT INTO result_files SELECT DISTINCT subject, machine, commit_hash, env_name, source_file
           FROM results WHERE source = 'flybench' ON CONFLICT DO NOTHING""",
    ],
    [  # v4: the newest row of every series, kept by the writers (flybench.store.heads)
        "CREATE TABLE series_heads AS SELECT * FROM results LIMIT 0",
        f"INSERT INTO series_heads SELECT * FROM results WHERE rowid IN (SELECT {heads.NEWEST_ROW} GROUP BY {heads.SERIES})",
        "CREATE TABLE stale_heads (subject VARCHAR NOT NULL, machine VARCHAR NOT NULL, PRIMARY KEY (subject, machine))",
    ],
    [  # v5: one row per case. A case's FLOP and byte counts and roofline floor are kept with its time, and
        # the five-metric siblings of rows stored before are folded into the time row's context columns
        # (flybench.store.sidecar.fold does the same to files read from now on), then dropped.
        *[f"ALTER TABLE {table} ADD COLUMN {column} DOUBLE"
          for table in ("results", "series_heads") for column in ("flops", "bytes", "floor_s")],
        f"""UPDATE results AS t SET
                tflops = coalesce(t.tflops, f.tflops), gbps = coalesce(t.gbps, f.gbps),
                roofline_fraction = coalesce(t.roofline_fraction, f.roofline_fraction),
                errors = coalesce(t.errors, CASE WHEN f.error IS NOT NULL THEN json_object('out', f.error) END)
            FROM ({_LEGACY_SIBLINGS}) f
            WHERE t.subject = f.subject AND t.machine = f.machine AND t.commit_hash = f.commit_hash
              AND t.env_name = f.env_name AND t.benchmark = f.time_benchmark
              AND json_extract_string(t.params, '$.*') = f.param_values""",
        f"""DELETE FROM results s WHERE {_IS_LEGACY_SIBLING} AND EXISTS (
                SELECT 1 FROM results t WHERE t.subject = s.subject AND t.machine = s.machine
                  AND t.commit_hash = s.commit_hash AND t.env_name = s.env_name
                  AND t.benchmark = {_TIME_BENCHMARK}
                  AND json_extract_string(t.params, '$.*') = json_extract_string(s.params, '$.*'))""",
        "DELETE FROM series_heads",
        f"INSERT INTO series_heads SELECT * FROM results WHERE rowid IN (SELECT {heads.NEWEST_ROW} GROUP BY {heads.SERIES})",
    ],
    [  # v6: the median of each round that measured a case into one results file (its run-to-run noise)
        *[f"ALTER TABLE {table} ADD COLUMN rounds DOUBLE[]" for table in ("results", "series_heads")],
    ],
    [  # v7: the steps history step detection found, stored per (subject, machine) by flybench.regress.stored,
        # so reports and the dashboard read them instead of refitting every series. A scan row says what the
        # steps were found in (a digest of the rows) and with which thresholds (a fingerprint of the config):
        # a reader whose digest or fingerprint differs recomputes. Acceptances apply when they are read.
        """CREATE TABLE regression_scans (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            digest VARCHAR NOT NULL,
            config VARCHAR NOT NULL,
            scanned_at TIMESTAMP NOT NULL,
            PRIMARY KEY (subject, machine)
        )""",
        """CREATE TABLE regression_steps (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            unit VARCHAR,
            kind VARCHAR NOT NULL,
            runs VARCHAR NOT NULL,
            last_good VARCHAR NOT NULL,
            first_bad VARCHAR NOT NULL,
            before DOUBLE NOT NULL,
            after DOUBLE NOT NULL,
            noise DOUBLE NOT NULL,
            confidence DOUBLE NOT NULL,
            worse BOOLEAN NOT NULL
        )""",
    ],
    [  # v8: hardware counters of the counter pass (flybench.counters), keyed like results. counter_cases holds
        # one row per case the pass tried (its outcome, the tool and version, each kernel's counters); counters
        # one row per (case, counter) summed over the call, and per derived figure (kind 'derived').
        """CREATE TABLE counter_cases (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            commit_hash VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            status VARCHAR NOT NULL,
            reason VARCHAR,
            tool VARCHAR NOT NULL,
            tool_version VARCHAR,
            arch VARCHAR,
            counter_names VARCHAR[],
            kernels JSON,
            min_bytes DOUBLE,
            contract JSON,
            run_id VARCHAR,
            started_at VARCHAR,
            source_file VARCHAR NOT NULL
        )""",
        """CREATE TABLE counters (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            commit_hash VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            counter VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            value DOUBLE,
            unit VARCHAR,
            fixed BOOLEAN NOT NULL,
            tool VARCHAR NOT NULL,
            source_file VARCHAR NOT NULL
        )""",
    ],
    [  # v9: each series' noise over its history on the machine (what `flybench compare` holds a change against
        # where the case has no rounds), found by the same scan as the steps and current under the same digest
        # and fingerprint. `noise` is NULL where the history is too short to say (`level`: the median of the
        # measured values it is relative to). Scans stored before this step have no noise: they are dropped,
        # and the next writer rescans.
        """CREATE TABLE series_noise (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            unit VARCHAR,
            noise DOUBLE,
            level DOUBLE
        )""",
        "DELETE FROM regression_steps",
        "DELETE FROM regression_scans",
    ],
    [  # v10: beside each round's median, the spread of that round's own samples (IQR over median), which a
        # comparison reports next to the rounds it judged (flybench.regress.verdict)
        *[f"ALTER TABLE {table} ADD COLUMN round_spreads DOUBLE[]" for table in ("results", "series_heads")],
    ],
    [  # v11: alerts (flybench.regress.alerts): each worse step a scan found, open until its series recovers, kept
        # across scans whose fit no longer finds it; alert_events holds every change of their state. An alert is
        # named by its series and first bad commit.
        """CREATE TABLE alerts (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            unit VARCHAR,
            kind VARCHAR NOT NULL,
            runs VARCHAR NOT NULL,
            last_good VARCHAR NOT NULL,
            first_bad VARCHAR NOT NULL,
            before DOUBLE NOT NULL,
            after DOUBLE NOT NULL,
            noise DOUBLE NOT NULL,
            confidence DOUBLE NOT NULL,
            worse BOOLEAN NOT NULL,
            status VARCHAR NOT NULL,
            opened_through VARCHAR NOT NULL,
            closed_by VARCHAR,
            flips INTEGER NOT NULL
        )""",
        """CREATE TABLE alert_events (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            first_bad VARCHAR NOT NULL,
            event VARCHAR NOT NULL,
            through VARCHAR NOT NULL,
            detail VARCHAR NOT NULL,
            seen_at TIMESTAMP NOT NULL
        )""",
    ],
    [  # v12: a series' head is its newest row that measured the case (flybench.store.heads.MEASURED), so a run
        # of one provider no longer hides another provider's latest time behind the empty row asv lists for it.
        "DELETE FROM series_heads",
        f"INSERT INTO series_heads SELECT * FROM results WHERE rowid IN (SELECT {heads.NEWEST_ROW} GROUP BY {heads.SERIES})",
    ],
    [  # v13: code attribution for the history scan (flybench.regress.scan). code_changes holds a subject's main
        # commits over an imported span (first-parent order, pull request, title, changed files); code_touches,
        # per series, the commits among them that changed what the series runs (flybench.importers.flydsl_ci.code).
        # Steps and alerts say which evidence they rest on, and a deterministic change whether it was undone. The
        # scan replays every commit, so every stored scan is recomputed.
        """CREATE TABLE code_changes (
            subject VARCHAR NOT NULL,
            hash VARCHAR NOT NULL,
            position INTEGER NOT NULL,
            merged_pr INTEGER,
            title VARCHAR NOT NULL,
            files VARCHAR[] NOT NULL,
            PRIMARY KEY (subject, hash)
        )""",
        """CREATE TABLE code_touches (
            subject VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            hash VARCHAR NOT NULL,
            files VARCHAR[] NOT NULL
        )""",
        *[f"ALTER TABLE {table} ADD COLUMN evidence VARCHAR NOT NULL DEFAULT ''"
          for table in ("regression_steps", "alerts")],
        "ALTER TABLE regression_steps ADD COLUMN state VARCHAR NOT NULL DEFAULT ''",  # a change later undone
        "DELETE FROM regression_scans",
    ],
    [  # v14: the model lane's role split (flybench.model.roles, `flybench run --roles`), a row per case the role
        # pass tried, keyed like results: the step's time, its kernels' time per role, and the conditions an
        # Amdahl check on it holds under. A table of its own, so no scan reads these rows as benchmark series.
        """CREATE TABLE role_splits (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            commit_hash VARCHAR NOT NULL,
            env_name VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            status VARCHAR NOT NULL,
            reason VARCHAR,
            step_ms DOUBLE,
            roles_ms JSON,
            role_events JSON,
            rest_top JSON,
            steps INTEGER,
            conditions JSON,
            tracer JSON,
            contract JSON,
            run_id VARCHAR,
            started_at VARCHAR,
            source_file VARCHAR NOT NULL
        )""",
    ],
    [  # v15: the machine code of a subject's history (flybench.compile.code_history): per main commit, kernel and
        # target, a hash of the code the FlyDSL of that commit emits (status ok), or why there is none (failed,
        # unavailable), with the library that compiled it; stored from `<tree>/machine-code.jsonl` by ingest. And
        # which registered kernels each imported FlyDSL CI series runs (flybench.compile.ci_ops), written by the
        # importer: a series without a row is not covered, and its steps can only be judged by files.
        """CREATE TABLE machine_code (
            subject VARCHAR NOT NULL,
            hash VARCHAR NOT NULL,
            kernel VARCHAR NOT NULL,
            arch VARCHAR NOT NULL,
            code_hash VARCHAR,
            status VARCHAR NOT NULL,
            library VARCHAR NOT NULL,
            detail VARCHAR NOT NULL,
            metrics JSON,
            PRIMARY KEY (subject, hash, kernel, arch)
        )""",
        """CREATE TABLE series_kernels (
            subject VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            params JSON NOT NULL,
            kernel VARCHAR NOT NULL,
            arch VARCHAR NOT NULL,
            exact BOOLEAN NOT NULL
        )""",
    ],
    [  # v16: the history scan's checkpoint per (subject, machine) (flybench.regress.stored): the replay as it stood
        # after the commits it judged, with digests of the rows and attribution it read, so a nightly resumes it
        # and judges only the new commits. Derived like every scan table; a mismatch replays from the first commit.
        """CREATE TABLE scan_checkpoints (
            subject VARCHAR NOT NULL,
            machine VARCHAR NOT NULL,
            config VARCHAR NOT NULL,
            commits VARCHAR[] NOT NULL,
            rows_digest VARCHAR NOT NULL,
            attribution VARCHAR NOT NULL,
            state BLOB NOT NULL,
            PRIMARY KEY (subject, machine)
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
    """The version the marker claims, checked against the tables the store holds: a damaged marker (text,
    or a version below tables that a later step created) would send a migration into those tables."""
    rebuild = (f"the store cannot be migrated safely: move it aside (mv {path} {path}.damaged) and rebuild it with "
               "`flybench ingest` (and `flybench import`) of the results")
    try:
        version = current_version(conn)
    except (duckdb.Error, ValueError, TypeError) as exc:
        raise FlybenchError(f"{path}: its schema marker (table schema_version) is damaged ({exc}); {rebuild}") from exc
    if version > LATEST:
        raise FlybenchError(f"{path} has schema v{version}, newer than this flybench (v{LATEST}): upgrade flybench")
    tables = {name for (name,) in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()").fetchall()}
    later = sorted(table for step in MIGRATIONS[version:] for table in _created(step) if table in tables)
    if later:
        raise FlybenchError(f"{path}: its schema marker says v{version}, but it holds {', '.join(later)}, which later "
                            f"versions create; {rebuild}")
    return version


def _created(step: list[str]) -> list[str]:
    """The tables a migration step creates."""
    return [m[1] for statement in step if (m := re.match(r"\s*CREATE TABLE (\w+)", statement))]


def recreate(conn: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Create `table` as its migration did where a store at the latest version lacks it (a damaged or hand-edited
    store; derived tables only, which a scan fills again); whether it was missing. Only a table no later step
    altered can be made again from its one statement."""
    statements = [s for step in MIGRATIONS for s in step if re.match(rf"\s*(CREATE|ALTER) TABLE {table}\b", s)]
    if len(statements) != 1 or not statements[0].lstrip().startswith("CREATE"):
        raise ValueError(f"{table} is not made by one CREATE TABLE")
    missing = not exists(conn, table)
    if missing:
        conn.execute(statements[0].replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
    return missing


def exists(conn: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether the connection's store (its default database) has `table`."""
    return bool(conn.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ? "
                             "AND database_name = current_database()", [table]).fetchone()[0])
