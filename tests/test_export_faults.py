"""`flybench export --dir` on a disk that fills: the advice it gives works, and a rerun finishes the export."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from test_export import differences
from test_ingest_keeps import runner_tree

from flybench.cli import main
from flybench.store import connect, ingest
from flybench.store import export as store_export
from flybench.store.export import tables


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    assert ingest(runner_tree(tmp_path / "results", "runner-a", "a" * 40), path, "toy").ok
    return path


def fill_the_disk_at(table_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export writes the tables before `table_name`; that one leaves a partial file and the disk is full."""
    real = store_export._write_table

    def write(conn: duckdb.DuckDBPyConnection, directory: Path, table: str) -> None:
        if table != table_name:
            return real(conn, directory, table)
        partial = directory / "results" / "subject=toy" / "machine=runner-a" / "month=2026-01" / "data_0.parquet" \
            if table == "results" else directory / f"{table}.parquet"
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(b"PAR1\x00\x00")  # what a write cut short leaves
        raise duckdb.IOException(f'IO Error: Could not write file "{partial}": No space left on device')

    monkeypatch.setattr(store_export, "_write_table", write)


def same_as_the_store(db: Path, out: Path) -> None:
    with connect(db, read_only=True) as conn:
        for table in tables(conn):
            columns = ", ".join(f'"{c}"' for c in conn.table(table).columns)
            source = (f"read_parquet('{out}/results/**/*.parquet', hive_partitioning = true, "
                      "hive_types_autocast = false)" if table == "results" else f"read_parquet('{out}/{table}.parquet')")
            assert differences(conn, f"SELECT {columns} FROM {table}", f"SELECT {columns} FROM {source}") == 0, table


@pytest.mark.parametrize("where", ["results", "schema_version"])
def test_a_rerun_after_a_full_disk_finishes_the_export(where: str, db: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    out = tmp_path / "export"
    with monkeypatch.context() as patch:
        fill_the_disk_at(where, patch)
        assert main(["export", "--dir", str(out), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"flybench export: error: the disk holding {out} is full" in err and "Traceback" not in err
    assert "No space left on device" in err
    assert "Free some space and run the same command again: it writes the export again, replacing the files " \
           "this export wrote" in err
    assert (out / ".flybench-export-incomplete").is_file()  # readers can tell the folder is unfinished
    assert main(["export", "--dir", str(out), "--db", str(db)]) == 0
    assert "exported" in capsys.readouterr().out
    assert not (out / ".flybench-export-incomplete").exists()
    same_as_the_store(db, out)


def test_a_finished_export_or_anothers_file_is_not_written_over(db: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    out = tmp_path / "export"
    assert main(["export", "--dir", str(out), "--db", str(db)]) == 0
    assert main(["export", "--dir", str(out), "--db", str(db)]) == 2
    assert "exists and is not an empty folder: name a new folder for the export" in capsys.readouterr().err
    stopped = tmp_path / "stopped"
    with monkeypatch.context() as patch:
        fill_the_disk_at("results", patch)
        assert main(["export", "--dir", str(stopped), "--db", str(db)]) == 2
    (stopped / "notes.txt").write_text("mine")
    assert main(["export", "--dir", str(stopped), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{stopped} holds an export that stopped partway, and notes.txt, which flybench export did not " \
           "write: move it away, or name a new folder for the export" in err
    assert (stopped / "notes.txt").read_text() == "mine"
