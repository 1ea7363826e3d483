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

from flybench.benchmark_names import sql_case_columns
from flybench.errors import FlybenchError
from flybench.store.db import DEFAULT_DB, connect

_RESULTS = """
    SELECT r.*, c.date AS commit_date, c.branch
    FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
    WHERE (?::VARCHAR IS NULL OR r.machine = ?) AND (?::VARCHAR IS NULL OR r.subject = ?)
"""
_SERIES = "r.subject, r.machine, r.env_name, r.benchmark, r.params"
_SERIES_ORDER = f"{_SERIES}, c.date NULLS LAST, r.commit_hash"
_RESULTS_JOIN = "results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash"
_HEADS_JOIN = "series_heads r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash"


def _where(**columns: str | None) -> tuple[str, list[str]]:
    """`r.col = ?` for each column given (None: any), so DuckDB can skip row groups by their min and max."""
    given = {name: value for name, value in columns.items() if value is not None}
    return " AND ".join([f"r.{name} = ?" for name in given] or ["true"]), list(given.values())


def machines(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """Every machine with its accelerator and asv's machine.json fields."""
    return _query(db_path, "SELECT * FROM machines ORDER BY name")


def benchmarks(db_path: str | Path = DEFAULT_DB, subject: str | None = None) -> pd.DataFrame:
    """The benchmark definitions of the latest benchmarks.json of each subject."""
    return _query(db_path, "SELECT * FROM benchmarks WHERE ?::VARCHAR IS NULL OR subject = ? ORDER BY subject, name",
                  [subject, subject])


def commits(db_path: str | Path = DEFAULT_DB, machine: str | None = None, subject: str | None = None) -> pd.DataFrame:
    """Commits with results (on `machine`, if given), oldest first, with the imported run contexts
    (`run_contexts`: main, pr, branch; empty for flybench's own rows) that measured each."""
    return _query(db_path, f"""
        SELECT subject, commit_hash AS hash, any_value(commit_date) AS date, any_value(branch) AS branch,
               coalesce(list(DISTINCT run_context ORDER BY run_context) FILTER (WHERE run_context IS NOT NULL),
                        []::VARCHAR[]) AS run_contexts
        FROM ({_RESULTS}) GROUP BY subject, commit_hash
        ORDER BY date NULLS LAST, hash""", [machine, machine, subject, subject])


def commit_dates(db_path: str | Path, subject: str, hashes: list[str]) -> dict[str, Any]:
    """The stored date of each of these commits of `subject` (those it has)."""
    with connect(db_path, read_only=True) as conn:
        return dict(conn.execute("SELECT hash, date FROM commits WHERE subject = ? AND list_contains(?, hash)",
                                 [subject, hashes]).fetchall())


def shared_cases(db_path: str | Path, machine: str, head: str, subject: str | None = None) -> pd.DataFrame:
    """Per other commit on `machine`: how many of `head`'s measured (ok) series it measured too.

    What a sensible default base for a comparison needs: a commit that shares
    cases with the head, rather than merely the one before it.
    """
    where, args = _where(machine=machine, subject=subject)
    return _query(db_path, f"""
        WITH head AS (SELECT env_name, benchmark, params::VARCHAR AS p FROM results r
                      WHERE {where} AND r.commit_hash = ? AND r.status = 'ok')
        SELECT r.commit_hash, count(*) AS shared FROM results r
        JOIN head h ON h.env_name = r.env_name AND h.benchmark = r.benchmark AND h.p = r.params::VARCHAR
        WHERE {where} AND r.commit_hash <> ? AND r.status = 'ok'
        GROUP BY r.commit_hash""", [*args, head, *args, head])


def latest_results(db_path: str | Path = DEFAULT_DB, machine: str | None = None,
                   subject: str | None = None) -> pd.DataFrame:
    """Per machine, environment, benchmark and parameters: the result of the newest commit.

    The newest commit is the latest date (a commit without one comes last),
    then the greatest hash; the writers keep those rows in series_heads.
    """
    where, args = _where(machine=machine, subject=subject)
    return _query(db_path, f"""
        SELECT r.*, c.date AS commit_date, c.branch
        FROM {_HEADS_JOIN}
        WHERE {where} ORDER BY r.subject, r.machine, r.benchmark, r.params""", args)


def history(db_path: str | Path = DEFAULT_DB, machine: str | None = None, benchmark: str | None = None,
            params: dict[str, Any] | None = None, subject: str | None = None) -> pd.DataFrame:
    """Results ordered by commit date within each series; None selects all (the regression scan uses that).

    `params` matches as a dict, so its key order does not matter.
    """
    where, args = _where(machine=machine, subject=subject, benchmark=benchmark)
    frame = _query(db_path, f"""
        SELECT r.*, c.date AS commit_date, c.branch FROM {_RESULTS_JOIN}
        WHERE {where} ORDER BY {_SERIES_ORDER}""", args)
    if params is not None:
        frame = frame[frame["params"].map(json.loads) == params].reset_index(drop=True)
    return frame


def scan_commits(db_path: str | Path, machine: str, subject: str) -> dict[str, list[str]]:
    """Per environment, the machine's commits in the order the history scan replays them: commit date, then hash,
    undated last."""
    found: dict[str, list[str]] = {}
    with connect(db_path, read_only=True) as conn:
        for env, commit in conn.execute(
                "SELECT r.env_name, r.commit_hash FROM results r "
                "LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash "
                "WHERE r.machine = ? AND r.subject = ? GROUP BY r.env_name, r.commit_hash, c.date "
                "ORDER BY c.date IS NULL, c.date, r.commit_hash", [machine, subject]).fetchall():
            found.setdefault(env, []).append(commit)
    return found


def scan_rows(db_path: str | Path, machine: str, subject: str, skip: list[str] | None = None) -> pd.DataFrame:
    """The columns the history scan reads, of the machine's rows outside the commits `skip` (those a stored replay
    has already judged), in `history`'s order."""
    return _query(db_path, f"""
        SELECT r.env_name, r.benchmark, r.params, r.unit, r.commit_hash, r.value, r.status, r.run_context,
               c.branch, c.date AS commit_date FROM {_RESULTS_JOIN}
        WHERE r.machine = ? AND r.subject = ? AND NOT list_contains(?::VARCHAR[], r.commit_hash)
        ORDER BY {_SERIES_ORDER}""", [machine, subject, skip or []])


def series_values(db_path: str | Path, machine: str, subject: str | None = None,
                  only: list[tuple[str, str, str]] | None = None) -> pd.DataFrame:
    """Each series' value and status per commit on one machine, in `history`'s order, and nothing else:
    what a series' noise needs, without the samples and records a whole history would move. `only`: just these
    series (environment, benchmark, params as stored)."""
    where, args = _where(machine=machine, subject=subject)
    keys = None if only is None else ["\0".join(key) for key in only]
    return _query(db_path, f"""
        SELECT r.env_name, r.benchmark, r.params, r.commit_hash, r.value, r.status FROM {_RESULTS_JOIN}
        WHERE {where} AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[],
                                                                r.env_name || chr(0) || r.benchmark || chr(0) || r.params))
        ORDER BY {_SERIES_ORDER}""", [*args, keys, keys])


def compile_history(db_path: str | Path = DEFAULT_DB, machine: str | None = None,
                    subject: str | None = None) -> pd.DataFrame:
    """Compile-only resource metrics with commit dates, ordered into series per kernel, arch and metric."""
    return _query(db_path, """
        SELECT m.*, c.date AS commit_date FROM compile_metrics m
        LEFT JOIN commits c ON c.subject = m.subject AND c.hash = m.commit_hash
        WHERE (?::VARCHAR IS NULL OR m.machine = ?) AND (?::VARCHAR IS NULL OR m.subject = ?)
        ORDER BY m.subject, m.machine, m.kernel, m.arch, m.metric, c.date NULLS LAST, m.commit_hash""",
        [machine, machine, subject, subject])


def counter_history(db_path: str | Path = DEFAULT_DB, machine: str | None = None,
                    subject: str | None = None) -> pd.DataFrame:
    """The watched (`fixed`) hardware counters of every case, ordered into series per case and counter by commit
    date: instruction counts, launch resources, the DRAM bytes a call moves."""
    return _query(db_path, """
        SELECT k.*, c.date AS commit_date FROM counters k
        LEFT JOIN commits c ON c.subject = k.subject AND c.hash = k.commit_hash
        WHERE k.fixed AND k.value IS NOT NULL
          AND (?::VARCHAR IS NULL OR k.machine = ?) AND (?::VARCHAR IS NULL OR k.subject = ?)
        ORDER BY k.subject, k.machine, k.env_name, k.benchmark, k.params, k.counter, c.date NULLS LAST,
                 k.commit_hash""", [machine, machine, subject, subject])


def series_names(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """(subject, machine, name) of every series the regression scan reads: benchmarks and compile-metric kernels.

    What a `--machine`, `--subject` or `--benchmark` of the reports is checked against.
    """
    return _query(db_path, """
        SELECT DISTINCT subject, machine, benchmark AS name FROM results
        UNION SELECT DISTINCT subject, machine, kernel FROM compile_metrics
        ORDER BY ALL""")


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


def case_counters(db_path: str | Path, machine: str, hashes: list[str], subject: str | None = None) -> pd.DataFrame:
    """The counter pass's derived figures (flybench.counters.DERIVED) of these commits on `machine`, a row each."""
    return _query(db_path, """
        SELECT commit_hash, env_name, benchmark, params, counter, value, unit FROM counters
        WHERE machine = ? AND kind = 'derived' AND commit_hash IN (SELECT unnest(?::VARCHAR[]))
          AND (? IS NULL OR subject = ?)""", [machine, hashes, subject, subject])


def case_counter_history(db_path: str | Path, benchmark: str, params: list[str], machines: list[str] | None = None,
                         subject: str | None = None) -> pd.DataFrame:
    """The counter pass's derived figures of these series (params as stored), with commit dates, oldest first."""
    return _query(db_path, """
        SELECT k.machine, k.env_name, k.params, k.commit_hash, c.date AS commit_date, k.counter, k.value, k.unit,
               k.tool, k.subject
        FROM counters k LEFT JOIN commits c ON c.subject = k.subject AND c.hash = k.commit_hash
        WHERE k.kind = 'derived' AND k.benchmark = ? AND list_contains(?::VARCHAR[], k.params::VARCHAR)
          AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], k.machine)) AND (?::VARCHAR IS NULL OR k.subject = ?)
        ORDER BY k.machine, k.params, k.counter, c.date NULLS LAST, k.commit_hash""",
                  [benchmark, params, machines, machines, subject, subject])


def case_rates(db_path: str | Path, workload: str, case: str, dtype: str) -> pd.DataFrame:
    """Every TFLOP/s stored for one case and dtype of a workload, whoever measured it and whichever commit of
    whichever subject: flybench's rows (the rate derived from their time) and imported ones (the source's own
    TFLOP/s). What lets a page set measured and imported values of one case side by side."""
    return _query(db_path, """
        SELECT * FROM (
            SELECT r.subject, r.machine, m.arch, r.commit_hash, c.date AS commit_date, r.source, r.run_context,
                   r.pr, r.benchmark, r.params->>'provider' AS provider,
                   coalesce(r.tflops, CASE WHEN r.unit IN ('TFLOPS', 'TFLOP/s') THEN r.value END) AS tflops
            FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
            LEFT JOIN machines m ON m.name = r.machine
            WHERE starts_with(r.benchmark, ? || '.') AND r.params->>'case' = ? AND r.params->>'dtype' = ?
              AND r.status = 'ok')
        WHERE tflops IS NOT NULL
        ORDER BY machine, provider, commit_date NULLS LAST""", [workload, case, dtype])


def case_kernels(db_path: str | Path, benchmark: str, params: str, machine: str, commits: list[str]) -> pd.DataFrame:
    """The counter pass's record of one series at these commits: tool, version, status and each kernel's counters."""
    return _query(db_path, """
        SELECT commit_hash, status, reason, tool, tool_version, arch, kernels FROM counter_cases
        WHERE benchmark = ? AND params::VARCHAR = ? AND machine = ? AND list_contains(?::VARCHAR[], commit_hash)""",
                  [benchmark, params, machine, commits])


def role_splits(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """Every stored role split of the model lane (`flybench run --roles`), with its commit's date, newest last."""
    return _query(db_path, """
        SELECT s.*, s.params->>'case' AS "case", s.params->>'provider' AS provider, c.date AS commit_date
        FROM role_splits s LEFT JOIN commits c ON c.subject = s.subject AND c.hash = s.commit_hash
        ORDER BY s.machine, s.benchmark, s.params::VARCHAR, c.date NULLS FIRST, s.started_at NULLS FIRST""")


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts with SQL NULL as None (pandas shows it as NaN, NA or NaT depending on the dtype)."""
    return [{k: None if is_null(v) else v for k, v in row.items()} for row in frame.to_dict("records")]


def is_null(value: Any) -> bool:
    """SQL NULL as pandas hands it back: None, NA, NaT or a float NaN."""
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _query(db_path: str | Path, sql: str, args: list[Any] | None = None) -> pd.DataFrame:
    with connect(db_path, read_only=True) as conn:
        return conn.execute(sql, args or []).df()


# --- Queries for the dashboard: filtered in SQL and without the samples arrays, so that a page over
# a million-row database moves only the rows it draws.

_CASE_COLUMNS = sql_case_columns("r")
_HISTORY_COLUMNS = ("^(subject|machine|commit_hash|env_name|benchmark|params|unit|value|ci_99_a|ci_99_b|status|reason"
                    "|source|run_context|pr)$")
_UNDRAWN = "samples, source_record, started_at, duration, number, repeat, benchmark_version, source_file, run_id"
"""Columns no page draws from the newest rows: leaving them out took the load test's all-machine Overview
from 96 to 88 ms (turning 10,000 rows into a DataFrame is most of what is left)."""


def result_facets(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """One row per (subject, machine, benchmark, case, provider, dtype, source) with results: what the filters offer.

    With the machine's architecture, the benchmark's unit and the number of
    commits measured, so a page can fill its selectors without loading rows;
    `source` (who measured) lets a page keep imported rows apart from flybench's own,
    `run_context` (main, pr, branch) lets every page apply the same rule to imported runs,
    and `workload`/`own_name` keep foreign benchmark names as they are (see benchmark_names).
    Series are counted first and their parameters parsed after (the load test's million rows: 0.44 s
    down to 0.02 s), so `commits` sums each environment's commits.
    """
    return _query(db_path, f"""
        SELECT r.subject, r.machine, m.arch, r.benchmark, {_CASE_COLUMNS}, r.source, r.run_context,
               any_value(r.unit) AS unit, sum(r.commits)::BIGINT AS commits, sum(r.ok_rows)::BIGINT AS ok_rows
        FROM (SELECT subject, machine, env_name, benchmark, params, source, run_context, any_value(unit) AS unit,
                     count(*) AS commits, count(*) FILTER (WHERE status = 'ok') AS ok_rows
              FROM results GROUP BY ALL) r
        LEFT JOIN machines m ON m.name = r.machine
        GROUP BY ALL ORDER BY ALL""")


def latest_cases(db_path: str | Path = DEFAULT_DB, machine: str | None = None, subject: str | None = None,
                 unit: str | None = "seconds", benchmarks: list[str] | None = None) -> pd.DataFrame:
    """Per series of `unit` (a time by default; None: any unit, a missing one included) and of `benchmarks`
    (None: all), the newest commit's row, with the case's derived metrics.

    TFLOP/s, GB/s and the roofline fraction are columns of the case's one
    row (the store derives them from the time and the case record's counts).
    The rows come from series_heads, without the columns no page draws;
    `source_op` is an imported row's own op name (FlyDSL's `flash_attn`), `source_vs_main` its source's
    same-job comparison with main in percent (FlyDSL CI's `vs_main.delta_pct`) and `source_run` its CI run.
    """
    where, args = _where(machine=machine, subject=subject)
    return _query(db_path, f"""
        SELECT r.* EXCLUDE ({_UNDRAWN}), r.source_record->>'op' AS source_op,
               TRY_CAST(r.source_record->'vs_main'->>'delta_pct' AS DOUBLE) AS source_vs_main,
               r.source_record->>'run_id' AS source_run, c.date AS commit_date, c.branch,
               m.arch, {_CASE_COLUMNS}
        FROM {_HEADS_JOIN} LEFT JOIN machines m ON m.name = r.machine
        WHERE (?::VARCHAR IS NULL OR r.unit = ?) AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], r.benchmark))
          AND {where}
        ORDER BY r.subject, r.machine, r.benchmark, r.params""", [unit, unit, benchmarks, benchmarks, *args])


def benchmark_history(db_path: str | Path, benchmark: str, machines: list[str] | None = None,
                      subject: str | None = None, params: list[str] | None = None,
                      max_points: int | None = None, keep: list[str] | None = None) -> pd.DataFrame:
    """One benchmark's rows on the given machines (None: all), oldest commit first.

    Only the columns a history draws (and `source`/`run_context`/`pr` where
    the store has them): a 1,000-commit history is big enough that samples,
    contracts and device records would dominate its cost. `params`: only the
    series of these parameters (JSON, as stored). `max_points`: a series
    longer than that is thinned for drawing, keeping in each of max_points / 2
    commit ranges its lowest and highest value, and always its first and last
    five values, every row that is not ok and the rows of the commits in
    `keep`; `series_rows` is the series' length before thinning.
    """
    series = _SERIES.replace("r.", "")
    thin = "" if max_points is None else f"""QUALIFY series_rows <= {int(max_points)} OR status <> 'ok'
        OR position < 5 OR position >= series_rows - 5 OR list_contains(?::VARCHAR[], commit_hash)
        OR row_number() OVER (PARTITION BY {series}, bucket ORDER BY value) = 1
        OR row_number() OVER (PARTITION BY {series}, bucket ORDER BY value DESC) = 1"""
    return _query(db_path, f"""
        SELECT * EXCLUDE (position, bucket) FROM (
            SELECT *, position * {max(1, (max_points or 2) // 2)} // series_rows AS bucket FROM (
                SELECT r.*, c.date AS commit_date, c.branch, m.arch, {_CASE_COLUMNS},
                       count(*) OVER (PARTITION BY {_SERIES}) AS series_rows,
                       row_number() OVER (PARTITION BY {_SERIES} ORDER BY c.date NULLS LAST, r.commit_hash) - 1
                           AS position
                FROM (SELECT COLUMNS('{_HISTORY_COLUMNS}'), source_record->>'op' AS source_op,
                             source_record->>'run_id' AS source_run FROM results
                      WHERE benchmark = ? AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], machine))
                        AND (?::VARCHAR IS NULL OR subject = ?)
                        AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], params::VARCHAR))) r
                LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
                LEFT JOIN machines m ON m.name = r.machine)
            {thin})
        ORDER BY {series}, position""",
                  [benchmark, machines, machines, subject, subject, params, params, *([keep or []] if thin else [])])


def benchmark_cases(db_path: str | Path, benchmark: str, machines: list[str] | None = None) -> pd.DataFrame:
    """One row per series of one benchmark (and run context): its parameters, case columns and architecture,
    `commits` measured and whether it ever `ran` (a status other than unavailable). What a page picks a
    case from without reading the series' rows."""
    return _query(db_path, f"""
        SELECT r.*, m.arch, {_CASE_COLUMNS} FROM (
            SELECT subject, machine, env_name, benchmark, params::VARCHAR AS params, source, run_context,
                   any_value(unit) AS unit, count(*) AS commits, bool_or(status <> 'unavailable') AS ran
            FROM results WHERE benchmark = ? AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], machine))
            GROUP BY ALL) r
        LEFT JOIN machines m ON m.name = r.machine
        ORDER BY r.subject, r.machine, r.env_name, r.params""", [benchmark, machines, machines])


def resource_history(db_path: str | Path = DEFAULT_DB, units: list[str] | None = None) -> pd.DataFrame:
    """Compile-time resources across commits: the compile_metrics table plus results in deterministic `units`.

    Results rows name the kernel after the benchmark class and keep their
    parameters (`params`; NULL for compile_metrics rows) so a caller can add
    them to the name; the architecture is the `arch` parameter, else the
    machine's.
    """
    return _query(db_path, """
        SELECT m.subject, m.machine, m.commit_hash, c.date AS commit_date, m.kernel, m.arch, m.metric, m.value,
               m.unit, 'ok' AS status, NULL AS reason, 'compile_metrics' AS origin
        FROM compile_metrics m LEFT JOIN commits c ON c.subject = m.subject AND c.hash = m.commit_hash
        UNION ALL BY NAME
        SELECT r.subject, r.machine, r.commit_hash, c.date AS commit_date,
               regexp_replace(r.benchmark, '\\.[^.]*$', '') AS kernel, r.params,
               coalesce(r.params->>'arch', ma.arch) AS arch,
               regexp_replace(regexp_extract(r.benchmark, '[^.]*$'), '^track_', '') AS metric,
               r.value, r.unit, r.status, r.reason, r.benchmark AS origin
        FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
        LEFT JOIN machines ma ON ma.name = r.machine
        WHERE list_contains(?::VARCHAR[], lower(r.unit))
        ORDER BY subject, machine, kernel, arch, metric, commit_date NULLS LAST, commit_hash""", [units or []])


def table_counts(db_path: str | Path = DEFAULT_DB) -> dict[str, int]:
    """Rows per table that the dashboard draws from; all zero means nothing was ingested yet.

    A DuckDB file with no tables at all (created, never ingested into) counts
    as empty too, rather than as a store of an old schema that needs migrating.
    """
    if Path(db_path).is_file() and _no_tables(Path(db_path)):
        return dict.fromkeys(("machines", "commits", "results", "compile_metrics"), 0)
    with connect(db_path, read_only=True) as conn:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in ("machines", "commits", "results", "compile_metrics")}


def _no_tables(path: Path) -> bool:
    """A DuckDB file without a single table; anything unreadable is left to `connect` to explain."""
    try:
        with duckdb.connect(str(path), read_only=True) as bare:
            return not bare.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0]
    except duckdb.Error:
        return False


# Imported results (flybench.importers). Rows of `results` carry `source` ('flybench' for flybench's own
# asv measurements, 'flydsl-ci' for FlyDSL's CI), and imported rows `run_context`, `pr`, `shape`,
# `source_regression` and `source_record`: every frame above already has these columns.

RUN_CONTEXTS = ("main", "pr", "branch")
"""Imported runs: a push to main, a pull request's run, or a run of another branch (PR not resolved)."""


def machine_files(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """Each (subject, machine)'s sources and the files its rows were read from (flybench.store.origin)."""
    return _query(db_path, "SELECT DISTINCT subject, machine, source, source_file FROM results")


def sources(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """Who measured what: rows, commits, machines and dates per (source, subject), flybench's own included."""
    return _query(db_path, """
        SELECT r.source, r.subject, count(*) AS rows, count(DISTINCT r.commit_hash) AS commits,
               count(DISTINCT r.machine) AS machines, min(c.date) AS first_date, max(c.date) AS last_date
        FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
        GROUP BY r.source, r.subject ORDER BY r.source, r.subject""")


def in_context(frame: pd.DataFrame, context: str) -> pd.DataFrame:
    """Rows of one run context: 'main' (flybench's own rows count as main), 'pr' or 'branch'; 'all' keeps all."""
    if context == "all":
        return frame
    if context not in RUN_CONTEXTS:
        raise FlybenchError(f"unknown run context {context!r}; valid: all, {', '.join(RUN_CONTEXTS)}")
    own = frame["run_context"].isna() if context == "main" else False
    return frame[own | (frame["run_context"] == context)].reset_index(drop=True)


def imported_records(db_path: str | Path = DEFAULT_DB, source: str | None = None,
                     subject: str | None = None) -> pd.DataFrame:
    """Every imported record (re-runs included, which `results` collapses), with its commit's order and branch."""
    return _query(db_path, """
        SELECT r.*, c.order_date, c.ordered_by, c.on_main, c.main_position, c.merged_pr, c.title
        FROM imported_records r
        LEFT JOIN imported_commits c ON c.source = r.source AND c.subject = r.subject AND c.hash = r.commit_hash
        WHERE (?::VARCHAR IS NULL OR r.source = ?) AND (?::VARCHAR IS NULL OR r.subject = ?)
        ORDER BY c.order_date, r.run_id, r.runner, r.op, r.shape, r.dtype, r.metric""",
                  [source, source, subject, subject])


def imported_commits(db_path: str | Path = DEFAULT_DB, source: str | None = None,
                     subject: str | None = None) -> pd.DataFrame:
    """Imported commits in order: first CI sighting, order date, and what the clone said (on main, title, PR)."""
    return _query(db_path, """
        SELECT * FROM imported_commits
        WHERE (?::VARCHAR IS NULL OR source = ?) AND (?::VARCHAR IS NULL OR subject = ?)
        ORDER BY order_date, hash""", [source, source, subject, subject])


def commit_titles(db_path: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """(subject, hash, title) of commits whose message an importer recorded; empty where none did."""
    with connect(db_path, read_only=True) as conn:
        known = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'imported_commits'")
        if not known.fetchone()[0]:
            return pd.DataFrame(columns=["subject", "hash", "title"])
        return conn.execute("SELECT DISTINCT subject, hash, title FROM imported_commits WHERE title IS NOT NULL").df()


def commit_notes(db_path: str | Path = DEFAULT_DB, subject: str | None = None) -> pd.DataFrame:
    """(subject, hash, title, pr, wheel, llvm, failed_compiles, first_failure) of each commit a results tree's
    `commits.jsonl` describes (`flybench.store.commit_notes`); empty where none did."""
    return _query(db_path, """
        SELECT subject, commit_hash AS hash, record->>'title' AS title, pr, record->>'wheel' AS wheel,
               record->>'llvm' AS llvm, TRY_CAST(record->>'failed_compiles' AS INTEGER) AS failed_compiles,
               record->>'first_failure' AS first_failure
        FROM imported_records WHERE source = 'commit-notes' AND (?::VARCHAR IS NULL OR subject = ?)
        ORDER BY subject, hash""", [subject, subject])


def imported_run_rows(db_path: str | Path = DEFAULT_DB, context: str = "pr", subject: str | None = None) -> pd.DataFrame:
    """Every imported row of one run context (`pr` or `main`; one per commit, case and runner), with what its
    source measured beside it in the same job: `base_value` and `vs_main` (percent) against the main it rebuilt
    (`base_label`: main, or main~N when main did not build), the source's own flag, its CI run and job time."""
    return _query(db_path, f"""
        SELECT r.subject, r.source, r.machine, m.arch, r.env_name, r.benchmark, r.params, r.unit, r.value, r.status,
               r.commit_hash, r.pr, r.source_regression, r.source_record->>'op' AS source_op,
               TRY_CAST(r.source_record->'vs_main'->>'delta_pct' AS DOUBLE) AS vs_main,
               TRY_CAST(r.source_record->'vs_main'->>'baseline' AS DOUBLE) AS base_value,
               r.source_record->'vs_main'->>'label' AS base_label,
               r.source_record->>'run_id' AS source_run, TRY_CAST(r.source_record->>'ts' AS TIMESTAMP) AS job_time,
               {_CASE_COLUMNS}
        FROM results r LEFT JOIN machines m ON m.name = r.machine
        WHERE r.run_context = ? AND (?::VARCHAR IS NULL OR r.subject = ?)
        ORDER BY r.subject, r.pr, job_time, r.machine, r.benchmark, r.params""", [context, subject, subject])


# --- What the history scan (flybench.regress.scan) reads besides the values: code attribution and paired runs.

def code_changes(db_path: str | Path, subject: str) -> pd.DataFrame:
    """The subject's main commits over its attributed span, in main's order: hash, position, pull request, title,
    and the files each changed."""
    return _query(db_path, "SELECT hash, position, merged_pr, title, files FROM code_changes WHERE subject = ? "
                           "ORDER BY position", [subject])


def code_touches(db_path: str | Path, subject: str) -> pd.DataFrame:
    """Per series (benchmark, params as stored), the main commits that changed what it runs, and which files."""
    return _query(db_path, "SELECT benchmark, params::VARCHAR AS params, hash, files FROM code_touches "
                           "WHERE subject = ?", [subject])


def machine_code(db_path: str | Path, subject: str) -> pd.DataFrame:
    """The machine code of the subject's kernels per commit and target (`machine_code`, v15): its hash where the
    commit's compiler built it, else the status and why."""
    return _query(db_path, "SELECT hash, kernel, arch, code_hash, status, library, detail FROM machine_code "
                           "WHERE subject = ?", [subject])


def series_kernels(db_path: str | Path, subject: str) -> pd.DataFrame:
    """Per imported series (benchmark, params as stored), the registered kernels and targets it runs."""
    return _query(db_path, "SELECT benchmark, params::VARCHAR AS params, kernel, arch FROM series_kernels "
                           "WHERE subject = ?", [subject])


def machine_arch(db_path: str | Path, machine: str) -> str | None:
    """The machine's architecture (gfx942, gfx950, ...), None where the store does not know it: the target whose
    machine code the machine's series are judged on."""
    frame = _query(db_path, "SELECT arch FROM machines WHERE name = ? AND arch IS NOT NULL", [machine])
    return str(frame["arch"].iloc[0]) if len(frame) else None


def paired_changes(db_path: str | Path, subject: str, machine: str) -> pd.DataFrame:
    """Each pull request's own same-job comparison with main, per series on the machine: the change in percent
    that its newest CI run measured against main in that job (an imported record's `vs_main`), signed as the
    metric is (bigger is better for every imported metric)."""
    return _query(db_path, """
        SELECT benchmark, params::VARCHAR AS params, pr,
               arg_max(TRY_CAST(source_record->'vs_main'->>'delta_pct' AS DOUBLE), TRY_CAST(run_id AS BIGINT)) AS delta_pct
        FROM results WHERE subject = ? AND machine = ? AND pr IS NOT NULL
          AND source_record->'vs_main'->>'delta_pct' IS NOT NULL
        GROUP BY ALL""", [subject, machine])


def history_steps(db_path: str | Path, subject: str | None = None, kind: str | None = None) -> pd.DataFrame:
    """The history scan's stored steps that are not alerts (`regression_steps`): kind 'environment' (the runner's),
    'unconfirmed' (a step resting on files alone on a series that flips between runner modes, with nothing that
    separates code from runner: never an alert, never exit 1) or 'change' (a deterministic metric's), each with
    the evidence that decided it. Rows of a scan that is stale are as it left them (`stored.refresh` rewrites)."""
    return _query(db_path, "SELECT subject, machine, env_name, benchmark, params::VARCHAR AS params, unit, kind, runs, "
                           "last_good, first_bad, before, after, evidence FROM regression_steps "
                           "WHERE (?::VARCHAR IS NULL OR subject = ?) AND (?::VARCHAR IS NULL OR kind = ?) "
                           "ORDER BY subject, machine, benchmark, params, first_bad", [subject, subject, kind, kind])


def main_pairs(db_path: str | Path, subject: str, machine: str) -> pd.DataFrame:
    """Per series on the machine and main commit, the change in percent that a main run measured against the
    rebuild of main in its own CI job (an imported main record's `vs_main` labelled 'main'): the same code twice in
    one job, so how far the runner alone moves the series within a job."""
    return _query(db_path, """
        SELECT benchmark, params::VARCHAR AS params, commit_hash AS hash,
               arg_max(TRY_CAST(source_record->'vs_main'->>'delta_pct' AS DOUBLE), TRY_CAST(run_id AS BIGINT)) AS delta_pct
        FROM results WHERE subject = ? AND machine = ? AND pr IS NULL AND run_context = 'main'
          AND source_record->'vs_main'->>'label' = 'main' AND source_record->'vs_main'->>'delta_pct' IS NOT NULL
        GROUP BY ALL""", [subject, machine])


def longest_series(db_path: str | Path, machine: str | None = None, subject: str | None = None) -> int:
    """The most measured commits any one result series has: whether a history is long enough to judge."""
    where, args = _where(machine=machine, subject=subject)
    frame = _query(db_path, f"SELECT count(DISTINCT r.commit_hash) AS runs FROM {_RESULTS_JOIN} WHERE {where} "
                            "AND r.status = 'ok' GROUP BY r.subject, r.machine, r.env_name, r.benchmark, r.params "
                            "ORDER BY runs DESC LIMIT 1", args)
    return int(frame["runs"].iloc[0]) if len(frame) else 0


# --- Machine code on the pages: what each commit's compiler emitted per kernel and target, and the series' kernels.

def machine_code_history(db_path: str | Path = DEFAULT_DB, subject: str | None = None) -> pd.DataFrame:
    """Every machine code record (`machine_code`) with its commit's place on main, date, pull request and title:
    subject, hash, kernel, arch, code_hash, status, library, detail, metrics (JSON text), position, date,
    merged_pr, title, oldest first per (kernel, target). A record of a commit main's attribution does not hold
    has no position and sorts by date."""
    return _query(db_path, """
        SELECT m.subject, m.hash, m.kernel, m.arch, m.code_hash, m.status, m.library, m.detail,
               m.metrics::VARCHAR AS metrics, cc.position, c.date, cc.merged_pr, coalesce(cc.title, '') AS title
        FROM machine_code m
        LEFT JOIN code_changes cc ON cc.subject = m.subject AND cc.hash = m.hash
        LEFT JOIN commits c ON c.subject = m.subject AND c.hash = m.hash
        WHERE (?::VARCHAR IS NULL OR m.subject = ?)
        ORDER BY m.subject, m.kernel, m.arch, cc.position NULLS LAST, c.date NULLS LAST, m.hash""", [subject, subject])


def merged_pull_requests(db_path: str | Path = DEFAULT_DB, subject: str | None = None) -> pd.DataFrame:
    """The subject's main commits that merged a pull request, in main's order: subject, hash, position,
    merged_pr, title, date."""
    return _query(db_path, """
        SELECT cc.subject, cc.hash, cc.position, cc.merged_pr, cc.title, c.date
        FROM code_changes cc LEFT JOIN commits c ON c.subject = cc.subject AND c.hash = cc.hash
        WHERE cc.merged_pr IS NOT NULL AND (?::VARCHAR IS NULL OR cc.subject = ?)
        ORDER BY cc.subject, cc.position""", [subject, subject])

