"""The scan's stored checkpoint is data: a hostile blob runs nothing, another machine's state or a damaged one is
replayed from the first commit and said once, a store without the table is no traceback, and Ctrl-C during the
scan that ends an import is exit 130 (FlyDSL's CI month read from ../shared/data, never copied here)."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pandas as pd
import pytest

from flybench.regress import RegressConfig, checkpoint, stored
from flybench.store import connect
from tests.test_scan import BENCH, DATA, history, noisy

A_STEP = noisy(1000, 10, 1) + [v * 0.94 for v in noisy(1000, 8, 2)]
FLAT = noisy(1000, 18, 3)


def store(db: Path, machines: dict[str, list[float]], upto: int) -> None:
    """The machines' runs of commits c00 .. c{upto-1} stored (rows already there are kept)."""
    with connect(db) as conn:
        have = {h for (h,) in conn.execute("SELECT DISTINCT commit_hash FROM results").fetchall()}
        for machine, values in machines.items():
            rows = history({(BENCH, "a"): values[:upto]}).assign(subject="flydsl", machine=machine)
            rows = rows[~rows["commit_hash"].isin(have)]
            conn.register("rows", rows)
            conn.execute("INSERT INTO commits (subject, hash, date, branch) SELECT DISTINCT 'flydsl', commit_hash, "
                         "commit_date, 'main' FROM rows WHERE commit_hash NOT IN (SELECT hash FROM commits)")
            conn.execute("INSERT INTO results (subject, machine, commit_hash, env_name, benchmark, params, unit, "
                         "value, status, run_context, source_file) SELECT subject, machine, commit_hash, env_name, "
                         "benchmark, params, unit, value, status, run_context, 'f' FROM rows")
            conn.unregister("rows")


def stored_alerts(db: Path, machine: str) -> list[tuple]:
    with connect(db, read_only=True) as conn:
        return conn.execute("SELECT first_bad, status, opened_through FROM alerts WHERE machine = ? ORDER BY ALL",
                            [machine]).fetchall()


def fresh_alerts(db: Path, machine: str) -> list[tuple]:
    found = stored.scan_scope(db, ("flydsl", machine), RegressConfig())
    return sorted((a.regression.step.first_bad, a.status, a.opened_through) for a in found.alerts)


class _Payload:
    """What a hostile store would hold: unpickling it creates `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return open, (str(self.marker), "w")


def test_a_hostile_checkpoint_runs_nothing_and_is_replayed_from_the_first_commit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, marker = tmp_path / "store.duckdb", tmp_path / "ran"
    store(db, {"mi355": A_STEP}, 14)
    stored.refresh(db)
    with connect(db) as conn:
        conn.execute("UPDATE scan_checkpoints SET state = ?", [pickle.dumps(_Payload(marker))])
    store(db, {"mi355": A_STEP}, 18)
    capsys.readouterr()
    assert stored.refresh(db) == [("flydsl", "mi355")]
    assert not marker.exists()
    err = capsys.readouterr().err
    assert err.count("replayed from the first commit") == 1
    assert "the stored scan of mi355 (flydsl) does not match its store (not JSON)" in err
    assert stored_alerts(db, "mi355") == fresh_alerts(db, "mi355") != []


def test_another_machine_s_checkpoint_is_not_resumed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two machines' states swapped, every other column kept: each is replayed from its first commit."""
    db = tmp_path / "store.duckdb"
    machines = {"mi325": FLAT, "mi355": A_STEP}
    store(db, machines, 14)
    stored.refresh(db)
    with connect(db) as conn:
        states = dict(conn.execute("SELECT machine, state FROM scan_checkpoints").fetchall())
        for machine, other in (("mi325", "mi355"), ("mi355", "mi325")):
            conn.execute("UPDATE scan_checkpoints SET state = ? WHERE machine = ?", [states[other], machine])
    store(db, machines, 18)
    capsys.readouterr()
    stored.refresh(db)
    err = capsys.readouterr().err
    assert err.count("replayed from the first commit") == 2
    assert "the replay of 'mi325' ('flydsl'), stored under mi355 (flydsl)" in err
    for machine in machines:
        assert stored_alerts(db, machine) == fresh_alerts(db, machine)
    assert stored_alerts(db, "mi355") != []


@pytest.mark.parametrize("state", [b"", b"{", b'{"format": "flybench scan checkpoint", "version": 99}',
                                   b'{"format": "flybench scan checkpoint", "version": 1, "subject": "flydsl", '
                                   b'"machine": "mi355", "commits": [], "series": 7}', "\u00e9".encode("latin-1")])
def test_a_damaged_or_foreign_checkpoint_is_replayed_and_said_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], state: bytes) -> None:
    db = tmp_path / "store.duckdb"
    store(db, {"mi355": A_STEP}, 14)
    stored.refresh(db)
    with connect(db) as conn:
        conn.execute("UPDATE scan_checkpoints SET state = ?", [state])
    store(db, {"mi355": A_STEP}, 18)
    capsys.readouterr()
    stored.refresh(db)
    assert capsys.readouterr().err.count("replayed from the first commit") == 1
    assert stored_alerts(db, "mi355") == fresh_alerts(db, "mi355") != []


def test_a_checkpoint_whose_judged_commits_are_not_its_row_s_is_refused() -> None:
    frame = history({(BENCH, "a"): A_STEP})
    from tests.test_scan import attribution

    replay = stored.scan.Replay("flydsl", "mi355", RegressConfig()).feed(frame, attribution(len(A_STEP)))
    blob = checkpoint.dump(replay.trimmed())
    assert checkpoint.load(blob, "flydsl", "mi355", replay.commits, RegressConfig()).scan() == replay.scan()
    with pytest.raises(checkpoint.Invalid, match="its commits are not the ones"):
        checkpoint.load(blob, "flydsl", "mi355", replay.commits[:-1], RegressConfig())
    with pytest.raises(checkpoint.Invalid, match="stored under mi325"):
        checkpoint.load(blob, "flydsl", "mi325", replay.commits, RegressConfig())


def test_a_store_without_its_checkpoint_table_is_replayed_and_the_table_made_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "store.duckdb"
    store(db, {"mi355": A_STEP}, 14)
    stored.refresh(db)
    with connect(db) as conn:
        conn.execute("DROP TABLE scan_checkpoints")
    store(db, {"mi355": A_STEP}, 18)
    capsys.readouterr()
    assert stored.refresh(db) == [("flydsl", "mi355")]
    assert capsys.readouterr().err.count("no scan_checkpoints table") == 1
    assert stored_alerts(db, "mi355") == fresh_alerts(db, "mi355") != []
    with connect(db, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM scan_checkpoints").fetchone()[0] == 1


@pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} not found (the shared data folder)")
def test_ctrl_c_inside_a_query_of_the_import_s_scan_is_exit_130(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB answers a SIGINT that lands inside a query with RuntimeError('Query interrupted') (DuckDB 2.0.1,
    seen with a real signal); the scan that ends `flybench import` reads its rows in such a query. Where a real
    signal lands cannot be waited for, so the query raises what DuckDB raises."""
    from flybench.cli import main
    from flybench.store import queries

    with gzip.open(DATA, "rt") as f:
        document = json.load(f)
    first = sorted({r["ts"] for r in document["records"] if r.get("pr") is None})[2]
    part = tmp_path / "part.json"
    part.write_text(json.dumps({**document, "records": [r for r in document["records"] if r["ts"] <= first]}))

    def interrupted(*args: object, **kwargs: object) -> pd.DataFrame:
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(queries, "scan_rows", interrupted)
    capsys.readouterr()
    assert main(["import", "flydsl-ci", str(part), "--db", str(tmp_path / "store.duckdb")]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err and "RuntimeError" not in err
