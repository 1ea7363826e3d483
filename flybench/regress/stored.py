"""Stored regressions: step detection's answer kept in the store, so reading it is a query, not a refit.

Fitting asv's step detection to every series costs about 70 ms per
1,000-commit series (70 s for the million-row load test), too slow for every
`flybench regressions` and every dashboard load. So `flybench ingest` and
`flybench import` end with `refresh`: for each (subject, machine) whose rows
or thresholds changed since its last scan, `find_regressions` runs once and
its steps go to `regression_steps`, beside a `regression_scans` row holding

- a digest of the rows the steps were found in (count and XOR of row hashes
  over what the detector reads: value, status, interval, unit, run context,
  commit date and branch, so a changed commit order counts as a change) and
  of the code attribution it judged them with (main's commits, the commits
  that touched each series, the machine code of the series' kernels), and
- a fingerprint of the thresholds (`flybench.toml`'s `[regress]` fields that
  step detection uses) and of DETECTOR, the version of the detection code.

Readers (`regressions`) compute the same digests (one query, about 25 ms on
a million rows) and read the stored steps where digest and fingerprint
match. Where they do not (a `flybench.toml` edit, a store written by
something that did not refresh), that machine is recomputed in memory: the
answer is always the one `find_regressions` gives, only slower until the
next ingest stores it. Acceptances (`flybench accept`) are applied when the
steps are read, so accepting a level changes no stored row.

The same scan keeps each series' noise over its whole history on the machine
(`series_noise`: `noise.from_history`'s two parts), which `flybench compare`
holds a change against where the case has no rounds: a fit per case, 4 s
for the 100 cases of a load-test machine, is then a read (`history_noise`).
It is not the steps' own fit: compare's history carries no weights.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path

import duckdb
import pandas as pd

from flybench.regress import alerts, checkpoint, noise, scan
from flybench.regress.accepted import Acceptance
from flybench.regress.config import RegressConfig, load_config
from flybench.regress.history import Point, Regression, Step, compile_changes, find_in, series_noise
from flybench.store import queries, schema
from flybench.store.db import DEFAULT_DB, connect

DETECTOR = "8"
"""Bump when step detection changes what it finds: every stored scan is then recomputed."""
THRESHOLD_FIELDS = ("relative", "noise_k", "absolute", "bigger_is_better_units", "deterministic_units", "overrides",
                    "step_floor", "window", "corroborate", "environment_workloads", "control_providers")
"""The RegressConfig fields step detection reads (p_threshold and contract_ignore are base-vs-head only)."""

Scope = tuple[str, str]
"""(subject, machine): the unit a scan covers."""
SeriesKey = tuple[str, str, str, str, str]
"""(subject, machine, environment, benchmark, canonical params JSON): one series."""
NoiseKey = tuple[str, str, str, str | None]
"""(environment, benchmark, params JSON as stored, unit): a series of one machine, as compare asks for its noise."""

_DIGESTS = """
    SELECT subject, machine, count(*)::VARCHAR || ':' || bit_xor(h)::VARCHAR AS digest FROM (
        SELECT r.subject, r.machine, hash(r.commit_hash, r.env_name, r.benchmark, r.params, r.unit, r.value,
                                          r.status, r.ci_99_a, r.ci_99_b, r.run_context, c.date, c.branch) AS h
        FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
        WHERE (?::VARCHAR IS NULL OR r.subject = ?) AND (?::VARCHAR IS NULL OR r.machine = ?)
        UNION ALL
        SELECT m.subject, m.machine, hash(m.commit_hash, m.kernel, m.arch, m.metric, m.value, m.unit, c.date)
        FROM compile_metrics m LEFT JOIN commits c ON c.subject = m.subject AND c.hash = m.commit_hash
        WHERE (?::VARCHAR IS NULL OR m.subject = ?) AND (?::VARCHAR IS NULL OR m.machine = ?)
        UNION ALL
        SELECT s.subject, s.machine, hash(t.hash, t.benchmark, t.params, t.files)
        FROM code_touches t JOIN (SELECT DISTINCT subject, machine FROM results) s ON s.subject = t.subject
        WHERE (?::VARCHAR IS NULL OR s.subject = ?) AND (?::VARCHAR IS NULL OR s.machine = ?)
        UNION ALL
        SELECT s.subject, s.machine, hash(k.hash, k.position, k.merged_pr)
        FROM code_changes k JOIN (SELECT DISTINCT subject, machine FROM results) s ON s.subject = k.subject
        WHERE (?::VARCHAR IS NULL OR s.subject = ?) AND (?::VARCHAR IS NULL OR s.machine = ?)
        UNION ALL
        SELECT s.subject, s.machine, hash(m.hash, m.kernel, m.arch, m.code_hash, m.status, m.detail)
        FROM machine_code m JOIN (SELECT DISTINCT subject, machine FROM results) s ON s.subject = m.subject
        WHERE (?::VARCHAR IS NULL OR s.subject = ?) AND (?::VARCHAR IS NULL OR s.machine = ?)
        UNION ALL
        SELECT s.subject, s.machine, hash(k.benchmark, k.params, k.kernel, k.arch)
        FROM series_kernels k JOIN (SELECT DISTINCT subject, machine FROM results) s ON s.subject = k.subject
        WHERE (?::VARCHAR IS NULL OR s.subject = ?) AND (?::VARCHAR IS NULL OR s.machine = ?)
    ) GROUP BY ALL ORDER BY ALL"""
_NOISE_COLUMNS = ("subject", "machine", "env_name", "benchmark", "params", "unit", "noise", "level")
_STEP_COLUMNS = ("subject", "machine", "env_name", "benchmark", "params", "unit", "kind", "runs", "last_good",
                 "first_bad", "before", "after", "noise", "confidence", "worse", "evidence", "state")
_ALERT_COLUMNS = (*_STEP_COLUMNS[:-1], "status", "opened_through", "closed_by", "flips")
_EVENT_COLUMNS = ("subject", "machine", "env_name", "benchmark", "params", "first_bad", "event", "through", "detail")


def fingerprint(config: RegressConfig) -> str:
    """What the stored steps depend on besides the rows: the thresholds step detection uses, and DETECTOR."""
    fields = {name: value for name, value in asdict(config).items() if name in THRESHOLD_FIELDS}
    text = json.dumps({"detector": DETECTOR, **fields}, sort_keys=True,
                      default=lambda v: sorted(v) if isinstance(v, frozenset) else list(v))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def refresh(db_path: str | Path = DEFAULT_DB, config: RegressConfig | str | Path | None = None,
            say: Callable[[str], None] | None = None) -> list[Scope]:
    """Rescan every (subject, machine) whose rows or thresholds changed since it was stored; the ones rescanned.

    Scans of machines that no longer have rows are dropped. Runs after the
    writer has closed the database (the detector reads through `queries`).
    A stored checkpoint that does not match its store is replayed from the
    first commit, and `say` (default: stderr) is told once why. Ctrl-C
    inside one of the scan's queries, which DuckDB answers with its own
    RuntimeError, ends it as Ctrl-C.
    """
    cfg = config if isinstance(config, RegressConfig) else load_config(config)
    try:
        return _refresh(db_path, cfg, say or _stderr)
    except RuntimeError as exc:
        if str(exc) != "Query interrupted":
            raise
        raise KeyboardInterrupt from None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _refresh(db_path: str | Path, cfg: RegressConfig, say: Callable[[str], None]) -> list[Scope]:
    mark = fingerprint(cfg)
    with connect(db_path) as conn:  # a writer's connection: an older store is migrated first
        current = _digests(conn)
        scans = _scans(conn)
        stale = [scope for scope, digest in current.items() if scans.get(scope) != (digest, mark)]
        units = _series_units(conn, stale)
        if schema.recreate(conn, "scan_checkpoints") and stale:
            say("regressions: the store had no scan_checkpoints table (damaged or edited); made it again, and "
                "every machine is replayed from its first commit")
    replays = {scope: _replayed(db_path, scope, cfg, mark, say) for scope in stale}
    found = {scope: _with_compile_changes(db_path, scope, cfg, r.replay.scan()) for scope, r in replays.items()}
    series = {scope: noise.histories(queries.series_values(db_path, scope[1], scope[0], r.moved))
              for scope, r in replays.items()}
    noises = pd.DataFrame([row for scope in stale for row in _noise_rows(scope, series[scope], units.get(scope, []),
                                                                          cfg)], columns=list(_NOISE_COLUMNS))
    gone = [scope for scope in scans if scope not in current]
    if not stale and not gone:
        return []
    with connect(db_path) as conn:
        conn.begin()
        for subject, machine in [*stale, *gone]:
            for table in ("regression_steps", "regression_scans", "alerts", "alert_events", "scan_checkpoints"):
                conn.execute(f"DELETE FROM {table} WHERE subject = ? AND machine = ?", [subject, machine])
            moved = replays[subject, machine].moved if (subject, machine) in replays else None
            conn.execute("DELETE FROM series_noise WHERE subject = ? AND machine = ? AND (?::VARCHAR[] IS NULL "
                         "OR list_contains(?::VARCHAR[], env_name || chr(0) || benchmark || chr(0) || params))",
                         [subject, machine, *[None if moved is None else [chr(0).join(k) for k in moved]] * 2])
        for scope in stale:
            conn.execute("INSERT INTO regression_scans VALUES (?, ?, ?, ?, now()::TIMESTAMP)",
                         [*scope, current[scope], mark])
            conn.execute("INSERT INTO scan_checkpoints VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [*scope, mark, replays[scope].replay.commits, _rows_digest(conn, scope),
                          replays[scope].attribution.digest(replays[scope].replay.commits),
                          checkpoint.dump(replays[scope].replay.trimmed())])
        steps = pd.DataFrame([_row(r) for scope in stale for r in found[scope].steps], columns=list(_STEP_COLUMNS))
        kept = pd.DataFrame([_alert_row(a) for scope in stale for a in found[scope].alerts],
                            columns=list(_ALERT_COLUMNS))
        events = pd.DataFrame([_event_row(e) for scope in stale for e in found[scope].events],
                              columns=list(_EVENT_COLUMNS))
        events["seen_at"] = pd.Timestamp.now()
        for table, rows in (("regression_steps", steps), ("series_noise", noises), ("alerts", kept),
                            ("alert_events", events)):
            if not rows.empty:
                conn.register("found", rows)
                conn.execute(f"INSERT INTO {table} ({', '.join(rows.columns)}) SELECT * FROM found")
                conn.unregister("found")
        conn.commit()
    return stale


def scan_scope(db_path: str | Path, scope: Scope, cfg: RegressConfig, benchmark: str | None = None) -> scan.Scan:
    """One (subject, machine)'s history replayed from its first commit (`scan.replay`), with every compile-only
    metric's change among its steps: the reference a resumed replay must equal, and what a reader computes where
    the stored scan is stale."""
    subject, machine = scope
    frame = queries.scan_rows(db_path, machine, subject)
    if benchmark:
        frame = frame[[fnmatchcase(b, benchmark) for b in frame["benchmark"]]]
    found = scan.replay(subject, machine, frame, attribution(db_path, subject, machine), cfg)
    return _with_compile_changes(db_path, scope, cfg, found, benchmark)


def attribution(db_path: str | Path, subject: str, machine: str) -> scan.Attribution:
    """The subject's code attribution as the store holds it (`scan.Attribution`), with the machine's paired runs."""
    return scan.Attribution(queries.code_changes(db_path, subject), queries.code_touches(db_path, subject),
                            queries.paired_changes(db_path, subject, machine), queries.machine_code(db_path, subject),
                            queries.series_kernels(db_path, subject), queries.machine_arch(db_path, machine),
                            queries.main_pairs(db_path, subject, machine))


def find_regressions(db_path: str | Path = DEFAULT_DB, machine: str | None = None, subject: str | None = None,
                     benchmark: str | None = None, config: RegressConfig | str | Path | None = None,
                     accepted: list[Acceptance] | None = None) -> list[Regression]:
    """The older rules (`history.find_in`: asv's step detection per series, steps read together) over the stored
    history, worst first; `config` a RegressConfig or a flybench.toml path (default ./flybench.toml when present)."""
    cfg = config if isinstance(config, RegressConfig) else load_config(config)
    return find_in(queries.history(db_path, machine=machine, subject=subject),
                   queries.compile_history(db_path, machine=machine, subject=subject), cfg, benchmark, accepted)


def _with_compile_changes(db_path: str | Path, scope: Scope, cfg: RegressConfig, found: scan.Scan,
                          benchmark: str | None = None) -> scan.Scan:
    found.steps += compile_changes(queries.compile_history(db_path, scope[1], scope[0]), cfg, benchmark)
    return found


@dataclass
class _Replayed:
    """A scope's replay after `refresh`, the attribution it was judged with, and the series the new commits moved
    (None: the whole history was replayed)."""

    replay: scan.Replay
    attribution: scan.Attribution
    moved: list[tuple[str, str, str]] | None


def _replayed(db_path: str | Path, scope: Scope, cfg: RegressConfig, mark: str,
              say: Callable[[str], None] = _stderr) -> _Replayed:
    """The scope's replay, resumed from its stored checkpoint where the history only grew since (in each
    environment the judged commits first, their rows and attribution unchanged, the same thresholds and detector),
    else from the first commit.

    A resumed replay reads only the new commits' rows, so a nightly's scan costs what the night added; it equals
    the whole replay because the replay is a fold over each environment's commits (tests/test_scan.py checks it
    on the month). The checkpoint is data (`checkpoint.load`); one that is not this scope's, or cannot be read,
    is said (`say`) and replayed from the first commit."""
    subject, machine = scope
    known = attribution(db_path, subject, machine)
    order = queries.scan_commits(db_path, machine, subject)
    replay = None
    with connect(db_path, read_only=True) as conn:
        saved = conn.execute("SELECT config, commits, rows_digest, attribution, state FROM scan_checkpoints "
                             "WHERE subject = ? AND machine = ?", list(scope)).fetchone() \
            if schema.exists(conn, "scan_checkpoints") else None
        if saved is not None:
            config, done, rows, attributed, state = saved
            try:
                replay = checkpoint.load(state, subject, machine, done, cfg)
            except checkpoint.Invalid as exc:
                say(f"regressions: the stored scan of {machine} ({subject}) does not match its store ({exc}); "
                    "replayed from the first commit")
            if replay is not None and (config != mark or not _grown(order, set(done))
                                       or _rows_digest(conn, scope, done) != rows
                                       or known.digest(done) != attributed):
                replay = None
    if replay is None:
        frame = queries.scan_rows(db_path, machine, subject)
        return _Replayed(scan.Replay(subject, machine, cfg).feed(frame, known), known, None)
    frame = queries.scan_rows(db_path, machine, subject, skip=done)
    replay = replay.feed(frame, known)
    moved = sorted({(e, b, p) for e, b, p in zip(frame["env_name"], frame["benchmark"], frame["params"])})
    return _Replayed(replay, known, moved)


def _grown(order: dict[str, list[str]], done: set[str]) -> bool:
    """Whether every environment's history only grew past what was judged: in each, no new commit sorts before a
    judged one. The environments of a machine are judged apart (the job's shift, a young series' siblings and
    the reading together are all within one), so a pull request's run of an older commit, which sorts among
    main's, does not undo main's replay."""
    for commits in order.values():
        new = [c not in done for c in commits]
        if True in new and False in new[new.index(True):]:
            return False
    return True


_ROWS = """
    SELECT count(*)::VARCHAR || ':' || coalesce(bit_xor(hash(r.commit_hash, r.env_name, r.benchmark, r.params, r.unit,
           r.value, r.status, r.run_context, c.date, c.branch)), 0)::VARCHAR
    FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
    WHERE r.subject = ? AND r.machine = ? AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], r.commit_hash))"""


def _rows_digest(conn: duckdb.DuckDBPyConnection, scope: Scope, commits: list[str] | None = None) -> str:
    """A digest of what the replay reads of the scope's rows (of `commits` only, when given)."""
    return conn.execute(_ROWS, [*scope, commits, commits]).fetchone()[0]


def summary(rescanned: list[Scope]) -> str:
    """What `refresh` did, in a line for the writers' output."""
    if not rescanned:
        return "regressions: stored steps are current"
    machines = ", ".join(f"{m} ({s})" for s, m in rescanned[:4]) + (" ..." if len(rescanned) > 4 else "")
    return f"regressions: step detection rerun and stored for {len(rescanned)} machine(s): {machines}"


def regressions(
    db_path: str | Path = DEFAULT_DB,
    machine: str | None = None,
    subject: str | None = None,
    benchmark: str | None = None,
    config: RegressConfig | str | Path | None = None,
    accepted: list[Acceptance] | None = None,
    closed: bool = False,
) -> list[Regression]:
    """The open alerts (`flybench.regress.scan`) and the steps that are not alerts (the environment's, every change
    of a deterministic metric), worst first; with `closed`, the recovered and accepted alerts too. Each alert
    carries its state, and its evidence names the pull requests that changed what the series runs.

    Machines whose scan is missing or stale are replayed here and not
    stored (a reader never writes); `refresh` stores them.
    """
    cfg = config if isinstance(config, RegressConfig) else load_config(config)
    mark = fingerprint(cfg)
    with connect(db_path, read_only=True) as conn:
        current = _digests(conn, subject, machine)
        scans = _scans(conn)
        fresh = [scope for scope, digest in current.items() if scans.get(scope) == (digest, mark)]
        stored = _stored_steps(conn, fresh)
        kept = _alerts(conn, list(current))
        orders = _series_orders(conn, accepted or [])
    found: list[Regression] = []
    for scope in current:  # in (subject, machine) order
        if scope in fresh:
            steps, scope_alerts = stored.get(scope, []), kept.get(scope, [])
        else:
            replayed = scan_scope(db_path, scope, cfg, benchmark)
            steps, scope_alerts = replayed.steps, replayed.alerts
        for r in steps:
            if alerts.becomes_alert(r):
                continue
            if not _accepted(r, accepted or [], orders):
                found.append(r)
            elif closed:  # an accepted change (a compile-only resource's, say) is closed: shown, never exit 1
                found.append(replace(r, state="accepted"))
        for a in scope_alerts:
            state = "accepted" if _accepted(a.regression, accepted or [], orders) else a.status
            if alerts.meets(a.regression, cfg) and (closed or state == alerts.OPEN):
                found.append(replace(a.regression, state=state))
    found = [r for r in found if not benchmark or fnmatchcase(r.benchmark, benchmark)]
    # find_regressions lists result series before compile metrics within equal ranks (a stable sort)
    return sorted(found, key=lambda r: (not r.regressed, not r.step.worse, -abs(r.step.relative), not r.env_name))


_ATTRIBUTION_GAPS = """
    SELECT r.subject,
           count(DISTINCT r.commit_hash) FILTER (WHERE r.run_context = 'main'),
           count(DISTINCT r.commit_hash) FILTER (WHERE r.run_context = 'main' AND k.hash IS NULL),
           count(DISTINCT r.commit_hash) FILTER (WHERE r.run_context = 'branch' AND r.pr IS NULL),
           (SELECT count(*) FROM code_changes c WHERE c.subject = r.subject)
    FROM results r LEFT JOIN code_changes k ON k.subject = r.subject AND k.hash = r.commit_hash
    WHERE r.source = 'flydsl-ci' AND (?::VARCHAR IS NULL OR r.subject = ?) AND (?::VARCHAR IS NULL OR r.machine = ?)
    GROUP BY r.subject ORDER BY r.subject"""


def attribution_warnings(db_path: str | Path = DEFAULT_DB, machine: str | None = None,
                         subject: str | None = None) -> list[str]:
    """What the alerts of imported histories cannot rest on, for the report's head: main commits without code
    attribution (no clone, or one that lacked them), and runs FlyDSL marked as main that the clone put on a branch.
    A report that says "0 regressions" over such a history says why it may be missing some."""
    with connect(db_path, read_only=True) as conn:
        rows = conn.execute(_ATTRIBUTION_GAPS, [subject, subject, machine, machine]).fetchall()
    warnings = []
    for name, main, unattributed, branch, attributed in rows:
        if not attributed and main:
            warnings.append(f"{name}: no code attribution: its {main} main commits were imported without a clone "
                            "that holds them (flybench import flydsl-ci HISTORY --flydsl-repo CLONE); its steps are "
                            "judged by the older rules and its alerts rest on no attribution")
        elif unattributed:
            warnings.append(f"{name}: {unattributed} of {main} main commits have no code attribution (the clone "
                            "lacked them: shallow, stale or another repository's); steps over them rest on no "
                            "attribution")
        if branch:
            warnings.append(f"{name}: {branch} commit(s) FlyDSL's CI ran as main are not on the clone's main and "
                            "were taken as branch runs, which the main report does not judge")
    return warnings


def history_noise(db_path: str | Path, machine: str, subject: str | None = None,
                  config: RegressConfig | str | Path | None = None) -> dict[NoiseKey, noise.Noise | None]:
    """`noise.from_history`'s answer for every series of the machine, as the last scan stored it; empty where
    that scan is missing or stale.

    With no subject given the machine must hold one subject's results (compare's history is then that
    subject's); the caller computes whatever is not here.
    """
    cfg = config if isinstance(config, RegressConfig) else load_config(config)
    with connect(db_path, read_only=True) as conn:
        subjects = [subject] if subject is not None else [s for (s,) in conn.execute(
            "SELECT DISTINCT subject FROM results WHERE machine = ?", [machine]).fetchall()]
        if len(subjects) != 1:
            return {}
        scope = (subjects[0], machine)
        digest = _digests(conn, *scope).get(scope)
        if digest is None or _scans(conn).get(scope) != (digest, fingerprint(cfg)):
            return {}
        rows = conn.execute("SELECT env_name, benchmark, params, unit, noise, level FROM series_noise "
                            "WHERE subject = ? AND machine = ?", list(scope)).fetchall()
    return {(env, name, params, unit): None if absolute is None else noise.of_history(absolute, level)
            for env, name, params, unit, absolute, level in rows}


def _digests(conn: duckdb.DuckDBPyConnection, subject: str | None = None,
             machine: str | None = None) -> dict[Scope, str]:
    args = [subject, subject, machine, machine] * 6
    return {(s, m): d for s, m, d in conn.execute(_DIGESTS, args).fetchall()}


def _scans(conn: duckdb.DuckDBPyConnection) -> dict[Scope, tuple[str, str]]:
    return {(s, m): (d, c) for s, m, d, c in
            conn.execute("SELECT subject, machine, digest, config FROM regression_scans").fetchall()}


def _series_units(conn: duckdb.DuckDBPyConnection, scopes: list[Scope]) -> dict[Scope, list[tuple]]:
    """Per scope, each series (environment, benchmark, params as stored) with every unit its rows carry: a
    comparison takes its thresholds from the unit of the rows it compares."""
    rows = conn.execute(
        "SELECT DISTINCT subject, machine, env_name, benchmark, params, unit FROM results "
        "WHERE list_contains(?::VARCHAR[], subject || chr(0) || machine) ORDER BY ALL",
        [[f"{s}\0{m}" for s, m in scopes]]).fetchall()
    units: dict[Scope, list[tuple]] = {}
    for subject, machine, *series in rows:
        units.setdefault((subject, machine), []).append(tuple(series))
    return units


def _noise_rows(scope: Scope, histories: dict[tuple[str, str, str], list[Point]], units: list[tuple],
                cfg: RegressConfig) -> list[dict[str, object]]:
    """Each series' history noise on the scope's machine (`histories`: its points, by environment, benchmark and
    params as stored), per unit (none for deterministic units, which no comparison judges by noise); no fit
    where the history is too short for `noise.from_history` to use."""
    rows = []
    for env, name, params, unit in units:
        if (env, name, params) not in histories:
            continue  # a series the new commits did not move keeps its stored noise
        thresholds = cfg.thresholds(name, ", ".join(map(str, json.loads(params).values())), unit)
        if thresholds.deterministic:
            continue
        points = histories[(env, name, params)]
        level = noise.history_level(points)
        rows.append({"subject": scope[0], "machine": scope[1], "env_name": env, "benchmark": name, "params": params,
                     "unit": unit, "noise": None if level is None else series_noise(points, thresholds),
                     "level": level})
    return rows


def _stored_steps(conn: duckdb.DuckDBPyConnection, scopes: list[Scope]) -> dict[Scope, list[Regression]]:
    """The stored steps of these scopes, each scope's in the order they were stored."""
    rows = conn.execute(
        f"SELECT {', '.join(_STEP_COLUMNS)} FROM regression_steps "
        "WHERE list_contains(?::VARCHAR[], subject || chr(0) || machine) ORDER BY subject, machine, rowid",
        [[f"{s}\0{m}" for s, m in scopes]]).fetchall()
    steps: dict[Scope, list[Regression]] = {}
    for (subject, machine, env, name, params, unit, kind, runs, last_good, first_bad, before, after, level_noise,
         confidence, worse, evidence, state) in rows:
        step = Step(last_good, first_bad, before, after, level_noise, confidence, worse)
        steps.setdefault((subject, machine), []).append(
            Regression(subject, machine, env, name, json.loads(params), unit, step, kind, runs, evidence, state))
    return steps


def _alerts(conn: duckdb.DuckDBPyConnection, scopes: list[Scope]) -> dict[Scope, list[alerts.Alert]]:
    """The stored alerts of these scopes, open and recovered."""
    rows = conn.execute(
        f"SELECT {', '.join(_ALERT_COLUMNS)} FROM alerts "
        "WHERE list_contains(?::VARCHAR[], subject || chr(0) || machine) ORDER BY subject, machine, rowid",
        [[f"{s}\0{m}" for s, m in scopes]]).fetchall()
    found: dict[Scope, list[alerts.Alert]] = {}
    for row in rows:
        (subject, machine, env, name, params, unit, kind, runs, last_good, first_bad, before, after, level_noise,
         confidence, worse, evidence, status, opened_through, closed_by, flips) = row
        step = Step(last_good, first_bad, before, after, level_noise, confidence, worse)
        regression = Regression(subject, machine, env, name, json.loads(params), unit, step, kind, runs, evidence)
        found.setdefault((subject, machine), []).append(alerts.Alert(regression, status, opened_through, closed_by,
                                                                     flips))
    return found


def _alert_row(a: alerts.Alert) -> dict[str, object]:
    return {**_row(a.regression), "status": a.status,
            "opened_through": a.opened_through, "closed_by": a.closed_by, "flips": a.flips}


def _event_row(e: alerts.Event) -> dict[str, object]:
    r = e.alert.regression
    return {"subject": r.subject, "machine": r.machine, "env_name": r.env_name, "benchmark": r.benchmark,
            "params": json.dumps(r.params), "first_bad": r.step.first_bad, "event": e.event, "through": e.through,
            "detail": e.detail}


def _row(r: Regression) -> dict[str, object]:
    return {"subject": r.subject, "machine": r.machine, "env_name": r.env_name, "benchmark": r.benchmark,
            "params": json.dumps(r.params), "unit": r.unit, "kind": r.kind, "runs": r.runs,
            "last_good": r.step.last_good, "first_bad": r.step.first_bad, "before": r.step.before,
            "after": r.step.after, "noise": r.step.noise, "confidence": r.step.confidence, "worse": r.step.worse,
            "evidence": r.evidence, "state": r.state}


def _series_orders(conn: duckdb.DuckDBPyConnection,
                   acceptances: list[Acceptance]) -> dict[SeriesKey, dict[str, int]]:
    """Each commit's position in every series of the benchmarks acceptances name, by environment and
    params (made canonical: the same params can be written as JSON in more than one way)."""
    if not acceptances:
        return {}
    keys = sorted({f"{a.subject}\0{a.machine}\0{a.benchmark}" for a in acceptances})
    rows = conn.execute("""
        SELECT r.subject, r.machine, r.env_name, r.benchmark, r.params, r.commit_hash
        FROM results r LEFT JOIN commits c ON c.subject = r.subject AND c.hash = r.commit_hash
        WHERE list_contains(?::VARCHAR[], r.subject || chr(0) || r.machine || chr(0) || r.benchmark)
        ORDER BY r.subject, r.machine, r.env_name, r.benchmark, r.params, c.date NULLS LAST, r.commit_hash""",
                        [keys]).fetchall()
    orders: dict[SeriesKey, dict[str, int]] = {}
    for subject, machine, env, name, params, commit in rows:
        series = orders.setdefault((subject, machine, env, name, _canonical(json.loads(params))), {})
        series[commit] = len(series)
    return orders


def _accepted(r: Regression, acceptances: list[Acceptance],
              orders: dict[SeriesKey, dict[str, int]]) -> bool:
    """Whether an acceptance covers this step, as in find_regressions: only result series, only where the
    accepted commit was measured in the series (environment included), a first bad commit at or before it."""
    if not r.env_name:
        return False
    order = orders.get((r.subject, r.machine, r.env_name, r.benchmark, _canonical(r.params)), {})
    through = [order[a.commit] for a in acceptances
               if a.matches(r.subject, r.machine, r.benchmark, r.params) and a.commit in order]
    return bool(through) and order[r.step.first_bad] <= max(through)


def _canonical(params: dict[str, object]) -> str:
    return json.dumps(params, sort_keys=True)
