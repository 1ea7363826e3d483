"""`flybench export`: what it writes, read back with DuckDB, equals the store row for row."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from fixtures.asv_project import MACHINE, PROJECT, AsvProject, build

from flybench.cli import main
from flybench.store import connect
from flybench.store.export import tables


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


@pytest.fixture(scope="module")
def db(project: AsvProject, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("export")
    results = Path(shutil.copytree(project.results_dir, where / "results"))
    shutil.copy(project.root / "asv.conf.json", where / "asv.conf.json")
    assert main(["ingest", str(results), "--db", str(where / "store.duckdb")]) == 0
    return where / "store.duckdb"


def differences(conn: duckdb.DuckDBPyConnection, stored: str, exported: str) -> int:
    """Rows in one and not the other, counted with multiplicity, both ways."""
    return sum(conn.execute(f"SELECT count(*) FROM (({a}) EXCEPT ALL ({b}))").fetchone()[0]
               for a, b in ((stored, exported), (exported, stored)))


def test_the_whole_store_reads_back_equal_with_hive_partitions(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "shared" / "store"
    assert main(["export", "--dir", str(out), "--db", str(db)]) == 0
    partitions = sorted(p.relative_to(out / "results").parent.as_posix() for p in out.glob("results/**/*.parquet"))
    assert partitions == [f"subject={PROJECT}/machine={MACHINE}/month=2026-01"]  # the toy's commits are all January's
    with connect(db, read_only=True) as conn:
        names = tables(conn)
        assert {"results", "commits", "machines", "benchmarks", "schema_version"} <= set(names)
        counts = {}
        for table in names:
            columns = ", ".join(f'"{c}"' for c in conn.table(table).columns)
            if table == "results":
                exported = (f"SELECT {columns} FROM read_parquet('{out}/results/**/*.parquet', "
                            "hive_partitioning = true, hive_types_autocast = false)")
            else:
                exported = f"SELECT {columns} FROM read_parquet('{out}/{table}.parquet')"
            assert differences(conn, f"SELECT {columns} FROM {table}", exported) == 0, table
            counts[table] = conn.execute(f"SELECT count(*) FROM ({exported})").fetchone()[0]
        assert counts["results"] == conn.execute("SELECT count(*) FROM results").fetchone()[0] > 0


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_query_reads_back_equal(fmt: str, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    query = "SELECT commit_hash, benchmark, params::VARCHAR AS params, value, status FROM results WHERE value > 0"
    out = tmp_path / f"rows.{fmt}"
    assert main(["export", "--query", query, "--format", fmt, "--output", str(out), "--db", str(db)]) == 0
    reader = "read_parquet" if fmt == "parquet" else "read_csv"
    with connect(db, read_only=True) as conn:
        expected = conn.execute(f"SELECT count(*) FROM ({query})").fetchone()[0]
        assert expected > 0
        assert f"wrote {expected} rows to {out}" in capsys.readouterr().out
        assert differences(conn, query, f"SELECT * FROM {reader}('{out}')") == 0


def test_a_table_reads_back_equal(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "commits.parquet"
    assert main(["export", "--table", "commits", "--output", str(out), "--db", str(db)]) == 0
    with connect(db, read_only=True) as conn:
        assert differences(conn, "SELECT * FROM commits", f"SELECT * FROM read_parquet('{out}')") == 0


@pytest.mark.parametrize("argv, message", [
    (["--query", "SELEC 1", "--output", "x.csv"], "--query failed: Parser Error"),
    (["--query", "SELECT * FROM nothere", "--output", "x.csv"], "--query failed: Catalog Error"),
    (["--query", "CREATE TABLE t (i INTEGER)", "--output", "x.csv"], "this one is CREATE: nothing was run"),
    (["--table", "nothere", "--output", "x.csv"], "unknown table 'nothere'; valid tables: alert_events, alerts, benchmarks"),
    (["--table", "results"], "--output FILE is needed with --query or --table"),
    (["--dir", "DIR", "--format", "csv"], "--dir exports the whole store as Parquet"),
    (["--dir", "DIR"], "exists and is not an empty folder"),
])
def test_bad_input_is_exit_2(argv: list[str], message: str, db: Path, tmp_path: Path, monkeypatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DIR").mkdir()
    (tmp_path / "DIR" / "earlier.parquet").write_text("")
    assert main(["export", *argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert (tmp_path / "DIR" / "earlier.parquet").exists()
    with connect(db, read_only=True) as conn:
        assert "t" not in tables(conn)


def test_a_query_cannot_reach_past_the_read_only_store(db: Path, tmp_path: Path, capsys) -> None:
    """The statements before a final SELECT ran before: detach the read-only store, attach it writable, delete."""
    with connect(db, read_only=True) as conn:
        rows = conn.execute("SELECT count(*) FROM results").fetchone()[0]
    attack = f"USE memory; DETACH store; ATTACH '{db}' AS w; DELETE FROM w.results; SELECT 42"
    assert main(["export", "--query", attack, "--output", str(tmp_path / "x.csv"), "--db", str(db)]) == 2
    assert "this one is SET, DETACH, ATTACH, DELETE, SELECT: nothing was run" in capsys.readouterr().err
    with connect(db, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM results").fetchone()[0] == rows > 0
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("reads", [
    "read_text('{secret}')", "read_csv('{secret}')", "read_parquet('{parquet}')", "read_blob('{secret}')",
    "glob('{folder}/*')", "read_json('{secret}')", "read_csv('https://example.com/x.csv')",
])
def test_a_query_reads_only_the_stores_tables(reads: str, db: Path, tmp_path: Path, capsys) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("a,b\n1,2\n")
    parquet = tmp_path / "other.parquet"
    duckdb.sql("SELECT 1 AS a").write_parquet(str(parquet))
    query = f"SELECT * FROM {reads.format(secret=secret, parquet=parquet, folder=tmp_path)}"
    out = tmp_path / "x.csv"
    assert main(["export", "--query", query, "--output", str(out), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "--query reads only the store's tables" in err and "nothing was written" in err
    assert "Traceback" not in err and "1,2" not in err
    assert not out.exists()
    # and the store's own tables still export after it, in the same process
    assert main(["export", "--query", "SELECT count(*) AS n FROM results", "--output", str(out), "--db", str(db)]) == 0


def test_a_query_keeps_the_stores_types_and_says_so_in_help(db: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rows.parquet"
    assert main(["export", "--query", "SELECT params, value FROM results", "--output", str(out), "--db", str(db)]) == 0
    assert [t for _, t, *_ in duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{out}')").fetchall()] == [
        "JSON", "DOUBLE"]
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert "reads only the store's tables" in " ".join(capsys.readouterr().out.split())


def test_a_query_that_fails_while_it_runs_is_the_querys_error(db: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.csv"
    query = "SELECT CAST(benchmark AS INTEGER) AS n FROM results"
    assert main(["export", "--query", query, "--output", str(out), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "--query failed" in err and "Conversion Error" in err and "Traceback" not in err
