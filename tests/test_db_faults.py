"""Faults of the database file: each ends the command with advice and exit status 2, and nothing foreign is written."""

from __future__ import annotations

import errno
import hashlib
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest
from fixtures.asv_files import machine_json
from fixtures.asv_project import MACHINE, AsvProject, build

from flybench.cli import main
from flybench.errors import FlybenchError
from flybench.store import connect
from flybench.store.db import is_fault

DATA_BLOCKS = 3 * 4096
"""DuckDB's file starts with three 4 KiB headers; the blocks after them hold the catalog and the data."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


@pytest.fixture
def results(project: AsvProject, tmp_path: Path) -> Path:
    shutil.copy(project.root / "asv.conf.json", tmp_path / "asv.conf.json")
    return Path(shutil.copytree(project.results_dir, tmp_path / "results"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def ingest(capsys: pytest.CaptureFixture[str], results: Path, db: Path) -> None:
    code, err = run(capsys, "ingest", str(results), "--db", str(db))
    assert code == 0, err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_corrupt_blocks_give_the_rebuild_command(results: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    ingest(capsys, results, db)
    with db.open("r+b") as f:  # every block after the headers overwritten: the checksums no longer match
        f.seek(DATA_BLOCKS)
        f.write(b"\xa5" * (db.stat().st_size - DATA_BLOCKS))
    for argv in (["ingest", str(results)], ["regressions"], ["compare", "HEAD~1", "HEAD", "--machine", MACHINE]):
        code, err = run(capsys, *argv, "--db", str(db))
        assert code == 2, argv
        assert "is corrupt" in err and "Traceback" not in err
        assert f"mv {db} {db}.corrupt && flybench ingest --db {db}" in err


def test_another_applications_database_is_refused_and_left_alone(results: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "orders.duckdb"
    with duckdb.connect(str(db)) as conn:
        conn.execute("CREATE TABLE orders AS SELECT range AS id FROM range(10)")
    before = digest(db)
    for argv in (["ingest", str(results)], ["regressions"]):
        code, err = run(capsys, *argv, "--db", str(db))
        assert code == 2, argv
        assert f"{db} is a DuckDB database of another application (it holds orders" in err
        assert "pass another --db" in err
    with pytest.raises(FlybenchError, match="another application"):  # what `flybench import` opens
        with connect(db):
            pass
    assert digest(db) == before
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SHOW TABLES").fetchall() == [("orders",)]


@pytest.mark.parametrize("kind", ["text", "sqlite"])
def test_a_file_that_is_no_duckdb_database_is_refused_and_left_alone(kind: str, results: Path, tmp_path: Path,
                                                                      capsys) -> None:
    db = tmp_path / "other.db"
    if kind == "text":
        db.write_text("not a database\n" * 100)
    else:
        with sqlite3.connect(db) as conn:  # DuckDB itself would open this one through its sqlite extension
            conn.execute("CREATE TABLE notes (body TEXT)")
    before = digest(db)
    code, err = run(capsys, "ingest", str(results), "--db", str(db))
    assert code == 2
    assert f"{db} is not a DuckDB database file; flybench did not write to it. Pass another --db" in err
    assert digest(db) == before and not db.with_name(db.name + ".wal").exists()


def test_an_empty_flybench_database_is_still_ours(results: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "fresh.duckdb"
    duckdb.connect(str(db)).close()  # a DuckDB file with no table yet: flybench may fill it
    ingest(capsys, results, db)


def test_a_full_disk_at_the_first_write_stops_with_exit_2(results: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    db.with_name(db.name + ".wal").symlink_to("/dev/full")  # every write to DuckDB's log fails with ENOSPC
    code, err = run(capsys, "ingest", str(results), "--db", str(db))
    assert code == 2
    assert f"the disk holding {db} is full" in err and "nothing was stored for the files not yet written" in err
    assert "Traceback" not in err


def test_is_fault_tells_file_faults_from_bad_input() -> None:
    assert is_fault(OSError(errno.ENOSPC, "No space left on device"))
    assert is_fault(duckdb.Error("Corrupt database file: computed checksum 1 does not match stored checksum 2"))
    assert not is_fault(duckdb.ConstraintException("Duplicate key"))
    assert not is_fault(OSError(errno.ENOENT, "No such file or directory"))


def test_a_full_disk_mid_ingest_stops_with_exit_2_and_the_next_run_stores_the_rest(
        results: Path, project: AsvProject, tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    newest = results / MACHINE / project.results_file(-1).name
    aside = Path(shutil.move(newest, tmp_path / newest.name))
    ingest(capsys, results, db)
    shutil.move(aside, newest)
    wal = db.with_name(db.name + ".wal")
    wal.symlink_to("/dev/full")  # every write to DuckDB's log fails with ENOSPC, as on a full disk
    code, err = run(capsys, "ingest", str(results), "--db", str(db))
    assert code == 2, err
    assert f"the disk holding {db} is full" in err and "nothing was stored for the files not yet written" in err
    wal.unlink()
    ingest(capsys, results, db)
    fresh = tmp_path / "fresh.duckdb"
    ingest(capsys, results, fresh)
    query = "SELECT * EXCLUDE (ingested_at) FROM ingested_files ORDER BY ALL"
    rows = "SELECT count(*), count(DISTINCT commit_hash) FROM results"
    with connect(db, read_only=True) as conn:
        stored = conn.execute(query).fetchall(), conn.execute(rows).fetchall()
    with connect(fresh, read_only=True) as conn:
        assert stored == (conn.execute(query).fetchall(), conn.execute(rows).fetchall())


@pytest.mark.parametrize("damage, message", [
    (["DELETE FROM schema_version WHERE version > 4"], "its schema marker says v4, but it holds"),
    (["DROP TABLE schema_version", "CREATE TABLE schema_version (version VARCHAR, applied_at TIMESTAMP)",
      "INSERT INTO schema_version VALUES ('eleven', now())"], "its schema marker (table schema_version) is damaged"),
])
def test_a_damaged_schema_marker_gets_advice_that_works(damage: list[str], message: str, tmp_path: Path,
                                                        capsys) -> None:
    """"Ingest to migrate" led straight into the crash: readers and writers alike now say to rebuild."""
    db = tmp_path / "store.duckdb"
    with connect(db):
        pass
    with duckdb.connect(str(db)) as conn:
        for statement in damage:
            conn.execute(statement)
    machine_json(tmp_path / "results")  # a results tree of one machine and no results yet
    for argv in (["regressions", "--db", str(db)],
                 ["ingest", str(tmp_path / "results"), "--db", str(db), "--subject", "toy"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and f"mv {db} {db}.damaged" in err and "Traceback" not in err


def test_a_db_or_config_that_is_not_a_file_is_named_as_such(tmp_path: Path, capsys) -> None:
    """`--db /dev/null` once advised `mv /dev/null /dev/null.corrupt`; a folder as --config was "not found"."""
    for db, kind in (("/dev/null", "a device or pipe"), (str(tmp_path), "a directory")):
        assert main(["regressions", "--db", db]) == 2
        err = capsys.readouterr().err
        assert f"--db {db} is not a file ({kind})" in err and "mv " not in err
    from flybench.regress.config import load_config

    with pytest.raises(FlybenchError, match=f"config file {tmp_path} is a directory: pass the file"):
        load_config(tmp_path)
