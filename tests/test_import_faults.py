"""`flybench import flydsl-ci` faults: FlyDSL's commits kept off another repository's axis, one commit per hash.

The records are written here (FlyDSL's schema 1, as its CI publishes them),
so these tests need neither the shared data folder nor a FlyDSL clone; the
clone cases use a small repository made on the spot.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from test_import_flydsl_ci import _repo
from test_ingest_keeps import runner_tree

from flybench.cli import main as cli
from flybench.importers.flydsl_ci import import_file
from flybench.store import ingest

FLYDSL_A = "42ae6972b00dd3d2936c5b80a2c96ae4d2fd6608"
FLYDSL_B = "11c4174d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"


def record(commit: str, run_id: int, ts: str = "2026-07-09T00:21:27Z", runner: str = "linux-flydsl-mi325-1") -> dict:
    """One FlyDSL CI record of a flash attention case, as history.json holds it."""
    return {"op": "flash_attn", "shape": "B16S8192H16Hkv16D128_causal", "dtype": "bf16", "metric": "TFLOPS",
            "value": 512.5, "status": "ok", "vs_main": None, "vs_tag": None, "regression": False, "extra": None,
            "ts": ts, "commit": commit, "pr": None, "run_id": run_id, "source": "ci", "runner": runner,
            "arch": "gfx942"}


def history(path: Path, *records: dict) -> Path:
    path.write_text(json.dumps({"schema": 1, "repo": "ROCm/FlyDSL", "records": list(records)}))
    return path


def rows(db: Path, sql: str, *params: object) -> list[tuple]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute(sql, list(params)).fetchall()
    finally:
        conn.close()


def commits(db: Path, subject: str = "flydsl") -> list[str]:
    """The subject's commit axis, and the commits its rows name, as one sorted list each must equal."""
    axis = [h for (h,) in rows(db, "SELECT hash FROM commits WHERE subject = ? ORDER BY hash", subject)]
    named = [h for (h,) in rows(db, "SELECT DISTINCT commit_hash FROM results WHERE subject = ? ORDER BY 1", subject)]
    stored = [h for (h,) in rows(db, "SELECT DISTINCT commit_hash FROM imported_records WHERE subject = ? "
                                     "ORDER BY 1", subject)]
    assert axis == named == stored
    return axis


@pytest.fixture
def flybench_store(tmp_path: Path) -> Path:
    """A store whose subject 'flybench' holds flybench's own results (`flybench ingest`, source 'flybench')."""
    db = tmp_path / "store.duckdb"
    assert ingest(runner_tree(tmp_path / "results", "runner-a", "c" * 40), db, "flybench").ok
    return db


def test_flydsl_records_are_refused_on_a_subject_of_flybench_commits(flybench_store: Path, tmp_path: Path,
                                                                     capsys) -> None:
    before = rows(flybench_store, "SELECT subject, source, commit_hash, value FROM results ORDER BY ALL")
    path = history(tmp_path / "h.json", record(FLYDSL_A, 1))
    assert cli(["import", "flydsl-ci", str(path), "--subject", "flybench", "--db", str(flybench_store)]) == 2
    err = capsys.readouterr().err
    assert "flybench import: error: subject 'flybench' already holds 1 commit that no FlyDSL CI import stored " \
           "(1 result row of source 'flybench')" in err
    assert "and it is not one of this file's commits, so FlyDSL's commits would share another repository's " \
           "commit axis" in err
    assert "import into --subject flydsl or a new subject name; nothing was imported" in err
    assert "Traceback" not in err
    assert rows(flybench_store, "SELECT subject, source, commit_hash, value FROM results ORDER BY ALL") == before
    assert rows(flybench_store, "SELECT count(*) FROM imported_records") == [(0,)]
    assert rows(flybench_store, "SELECT count(*) FROM commits WHERE subject = 'flybench'") == [(1,)]


def test_an_empty_subject_or_one_of_flydsl_ci_imports_takes_them(flybench_store: Path, tmp_path: Path) -> None:
    first = history(tmp_path / "first.json", record(FLYDSL_A, 1))
    second = history(tmp_path / "second.json", record(FLYDSL_B, 2, ts="2026-07-10T00:00:00Z"))
    assert cli(["import", "flydsl-ci", str(first), "--db", str(flybench_store)]) == 0  # flydsl: empty
    assert cli(["import", "flydsl-ci", str(second), "--db", str(flybench_store)]) == 0  # flydsl-ci's only
    assert cli(["import", "flydsl-ci", str(first), "--subject", "ci-copy", "--db", str(flybench_store)]) == 0
    assert commits(flybench_store) == sorted([FLYDSL_A, FLYDSL_B])
    assert commits(flybench_store, "ci-copy") == [FLYDSL_A]


def test_a_subject_of_flybench_measured_flydsl_commits_takes_them(tmp_path: Path, capsys) -> None:
    """flybench's own runs over FlyDSL's commits share the axis with FlyDSL's CI: the commits show it."""
    db = tmp_path / "store.duckdb"
    assert ingest(runner_tree(tmp_path / "results", "runner-a", FLYDSL_A), db, "fly").ok
    assert import_file(history(tmp_path / "shared.json", record(FLYDSL_A, 1), record(FLYDSL_B, 2)), db, "fly").ok
    assert rows(db, "SELECT source, count(DISTINCT commit_hash) FROM results GROUP BY 1 ORDER BY 1") == [
        ("flybench", 1), ("flydsl-ci", 2)]
    other = tmp_path / "other.duckdb"  # no commit shared with the file: refused, unless a clone shows them
    repo = tmp_path / "FlyDSL"
    hashes = _repo(repo)
    assert ingest(runner_tree(tmp_path / "other", "runner-a", hashes["m1"]), other, "fly").ok
    path = history(tmp_path / "clone.json", record(hashes["m2"], 3))
    assert cli(["import", "flydsl-ci", str(path), "--subject", "fly", "--db", str(other)]) == 2
    assert "if its commits are FlyDSL's, --flydsl-repo CLONE shows it" in capsys.readouterr().err
    assert cli(["import", "flydsl-ci", str(path), "--subject", "fly", "--db", str(other),
                "--flydsl-repo", str(repo)]) == 0
    assert rows(other, "SELECT count(*) FROM results WHERE source = 'flydsl-ci'") == [(1,)]


def test_a_clone_that_lacks_the_subjects_commits_refuses_even_flydsl(tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    assert ingest(runner_tree(tmp_path / "results", "runner-a", "c" * 40), db, "flydsl").ok
    repo = tmp_path / "FlyDSL"
    hashes = _repo(repo)
    path = history(tmp_path / "h.json", record(hashes["m1"], 1))
    assert cli(["import", "flydsl-ci", str(path), "--db", str(db), "--flydsl-repo", str(repo)]) == 2
    err = capsys.readouterr().err
    assert f"it is not a commit of {repo}" in err and "import into a new subject name" in err
    assert rows(db, "SELECT count(*) FROM imported_records") == [(0,)]


def test_a_commit_given_short_and_in_full_is_one_commit(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    both = history(tmp_path / "both.json", record(FLYDSL_A, 1), record(FLYDSL_A[:7], 2, ts="2026-07-09T01:00:00Z"))
    report = import_file(both, db)
    assert report.ok and report.commits == 1 and "warning" not in report.summary()
    assert commits(db) == [FLYDSL_A]
    verbatim = {json.loads(r)["commit"] for (r,) in rows(db, "SELECT source_record FROM results")}
    assert verbatim == {FLYDSL_A[:7]}  # the later run's row, its record as FlyDSL wrote it
    later = history(tmp_path / "later.json", record(FLYDSL_A[:9], 3, ts="2026-07-09T02:00:00Z"))
    assert import_file(later, db).ok  # a short hash resolved against the full one already stored
    assert commits(db) == [FLYDSL_A]
    assert rows(db, "SELECT count(*) FROM imported_records") == [(3,)]


def test_a_short_hash_stored_first_joins_its_full_hash_when_that_arrives(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    report = import_file(history(tmp_path / "short.json", record(FLYDSL_A[:7], 1)), db)
    assert report.ok and "warning: 1 commit given as a short hash" in report.summary()
    assert commits(db) == [FLYDSL_A[:7]]  # kept as given: nothing to resolve it against yet
    full = history(tmp_path / "full.json", record(FLYDSL_A, 2, ts="2026-07-09T03:00:00Z"))
    assert import_file(full, db).ok
    assert commits(db) == [FLYDSL_A]
    assert rows(db, "SELECT count(*), count(DISTINCT machine) FROM results") == [(1, 1)]  # the later job's row


def test_unknown_and_ambiguous_short_hashes_are_kept_with_one_warning(tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    twins = ["abcdef1" + "0" * 33, "abcdef1" + "1" * 33]  # two full hashes that share their first seven digits
    path = history(tmp_path / "h.json", record(twins[0], 1), record(twins[1], 2), record("abcdef1", 3),
                   record("1234567", 4), record("1234567", 5, runner="linux-flydsl-mi325-2"))
    assert cli(["import", "flydsl-ci", str(path), "--db", str(db)]) == 0  # a warning, not bad input
    out = capsys.readouterr().out
    assert out.count("warning") == 1
    assert ("warning: 2 commits given as short hashes match no full hash known for subject 'flydsl' (unknown or "
            "ambiguous) and are kept as given: pass --flydsl-repo CLONE to resolve them") in out
    assert commits(db) == sorted(["1234567", "abcdef1", *twins])


def test_a_clone_resolves_a_short_hash_no_record_gives_in_full(tmp_path: Path) -> None:
    repo = tmp_path / "FlyDSL"
    hashes = _repo(repo)
    db = tmp_path / "store.duckdb"
    path = history(tmp_path / "h.json", record(hashes["m1"][:8], 1))
    report = import_file(path, db, flydsl_repo=repo)
    assert report.ok and "warning" not in report.summary()
    assert commits(db) == [hashes["m1"]]
    assert rows(db, "SELECT ordered_by FROM imported_commits") == [("git-main",)]
