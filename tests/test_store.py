"""The DuckDB store, built from real `asv run` results of a throwaway project."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import duckdb
import pytest
from fixtures.heads import heads_mismatches
from fixtures.old_schema import database_at
from fixtures.asv_project import (
    FAILED_AT, FLYDSL_MS, MACHINE, PROJECT, TORCH_MS, AsvProject, build, case_record, write_sidecar,
)

from flybench.errors import FlybenchError
from flybench.store import connect, ingest, queries
from flybench.store import schema
from flybench.store.schema import LATEST

FLYDSL = {"case": "c1", "provider": "flydsl", "dtype": "bf16"}
TORCH = {"case": "c1", "provider": "torch", "dtype": "bf16"}
TABLES = ("machines", "commits", "environments", "benchmarks", "results", "compile_metrics", "ingested_files",
          "result_files", "series_heads", "stale_heads", "schema_version")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


@pytest.fixture
def results(project: AsvProject, tmp_path: Path) -> Path:
    """A private copy of the results tree (and the asv config that names the subject)."""
    shutil.copy(project.root / "asv.conf.json", tmp_path / "asv.conf.json")
    return Path(shutil.copytree(project.results_dir, tmp_path / "results"))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


def dump(db: Path) -> dict[str, list[tuple]]:
    """Every table's rows, sorted, to compare whole databases."""
    with connect(db, read_only=True) as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}


def count(db: Path, sql: str, args: list | None = None) -> int:
    with connect(db, read_only=True) as conn:
        return conn.execute(sql, args or []).fetchone()[0]


def test_asv_wrote_results_for_every_commit(project: AsvProject) -> None:
    machine_dir = project.results_dir / MACHINE
    assert (machine_dir / "machine.json").is_file() and (project.results_dir / "benchmarks.json").is_file()
    assert [project.results_file(i).name[:8] for i in range(len(project.commits))] == [c[:8] for c in project.commits]


def test_ingest_loads_values_samples_and_params(results: Path, db: Path, project: AsvProject) -> None:
    report = ingest(results, db)
    assert report.ok and report.subject == PROJECT
    assert len(report.loaded) == 6 and report.rows == 6 * 4

    history = queries.history(db, MACHINE, "attention.Quick.track_time", {"provider": "flydsl", "dtype": "bf16",
                                                                          "case": "c1"})
    assert list(history.commit_hash) == project.commits
    assert list(history.value) == pytest.approx([ms * 1e-3 for ms in FLYDSL_MS])
    assert list(history.commit_date) == [dt.datetime(2026, 1, i + 1, 12) for i in range(6)]
    first = queries.records(history)[0]
    assert json.loads(first["params"]) == FLYDSL
    assert first["unit"] == "seconds" and first["status"] == "ok" and first["repeat"] == 9
    assert list(first["samples"]) == pytest.approx([1e-3 * (1 + 0.002 * (i - 4)) for i in range(9)], rel=1e-4)
    assert first["ci_99_a"] < first["q_25"] < first["value"] < first["q_75"] < first["ci_99_b"]
    assert first["contract"] is None  # no sidecar

    tflops = queries.records(queries.history(db, MACHINE, "attention.Rates.track_tflops", TORCH))
    assert [r["status"] for r in tflops].count("failed") == 1
    assert tflops[FAILED_AT]["value"] is None and tflops[FAILED_AT]["status"] == "failed"
    assert tflops[0]["value"] == pytest.approx(100 / TORCH_MS[0], rel=1e-4)
    assert tflops[0]["samples"] is None and tflops[0]["unit"] == "TFLOP/s"

    (machine,) = queries.records(queries.machines(db))
    assert (machine["name"], machine["host"], machine["accelerator"], machine["arch"]) == (
        MACHINE, MACHINE, "Toy GPU gfx950 rocm 6.4", "gfx950")  # from machine.json's cpu, as flybench run writes it
    assert machine["os"] == "Linux" and machine["cpu"].startswith("toy cpu; accelerator: ")
    benchmarks = queries.records(queries.benchmarks(db))
    assert {b["name"]: (list(b["param_names"]), b["unit"]) for b in benchmarks} == {
        "attention.Quick.track_time": (["case", "provider", "dtype"], "seconds"),
        "attention.Rates.track_tflops": (["case", "provider", "dtype"], "TFLOP/s"),
    }
    assert count(db, "SELECT count(*) FROM environments WHERE python = ?", [sys.executable]) == 1
    assert count(db, "SELECT max(version) FROM schema_version") == LATEST


def test_ingest_twice_changes_nothing(results: Path, db: Path) -> None:
    ingest(results, db)
    before = dump(db)
    again = ingest(results, db)
    assert again.loaded == [] and len(again.unchanged) == 6 and again.ok
    assert dump(db) == before

    touched = next((results / MACHINE).glob("*-*.json"))
    os.utime(touched, ns=(1, 1))  # same bytes, other mtime: hashed, found equal, not re-read
    assert ingest(results, db).loaded == []
    assert dump(db)["results"] == before["results"]


def test_ingest_reads_only_new_and_changed_files(results: Path, db: Path, project: AsvProject, tmp_path: Path) -> None:
    newest = project.results_file(5).relative_to(project.results_dir)
    held_back = tmp_path / "held_back.json"
    shutil.move(results / newest, held_back)
    assert len(ingest(results, db).loaded) == 5

    shutil.move(held_back, results / newest)
    report = ingest(results, db)
    assert report.loaded == [newest.as_posix()] and len(report.unchanged) == 5

    changed = results / project.results_file(0).relative_to(project.results_dir)
    data = json.loads(changed.read_text())
    data["results"]["attention.Rates.track_tflops"][0] = [12.5, 25.0]
    changed.write_text(json.dumps(data))
    assert ingest(results, db).loaded == [changed.relative_to(results).as_posix()]
    rows = queries.records(queries.history(db, MACHINE, "attention.Rates.track_tflops"))
    assert [r["value"] for r in rows if r["commit_hash"] == project.commits[0]] == [12.5, 25.0]
    assert count(db, "SELECT count(*) FROM results") == 24

    changed.unlink()
    kept = ingest(results, db)  # a tree without a stored file keeps its rows, and says so
    assert kept.kept == [changed.relative_to(results).as_posix()] and not kept.removed
    assert "1 stored files not in this tree, kept; `--prune` removes them" in kept.summary()
    assert count(db, "SELECT count(*) FROM results WHERE commit_hash = ?", [project.commits[0]]) == 4
    assert ingest(results, db, prune=True).removed == [changed.relative_to(results).as_posix()]
    assert count(db, "SELECT count(*) FROM results WHERE commit_hash = ?", [project.commits[0]]) == 0


def test_corrupt_file_is_reported_and_the_others_load(results: Path, db: Path, project: AsvProject) -> None:
    corrupt = results / project.results_file(2).relative_to(project.results_dir)
    good_bytes = corrupt.read_bytes()
    corrupt.write_bytes(good_bytes[: len(good_bytes) // 2])

    report = ingest(results, db)
    assert len(report.loaded) == 5 and not report.ok
    (error,) = report.errors
    assert error.path == str(corrupt) and "JSON" in error.message
    assert count(db, "SELECT count(*) FROM results WHERE commit_hash = ?", [project.commits[2]]) == 0
    assert count(db, "SELECT count(*) FROM ingested_files WHERE path LIKE ?", [f"%{project.commits[2][:8]}%"]) == 0

    corrupt.write_bytes(good_bytes)
    fixed = ingest(results, db)
    assert fixed.ok and fixed.loaded == [corrupt.relative_to(results).as_posix()]
    assert count(db, "SELECT count(*) FROM results") == 24


def test_sidecar_status_reason_and_contract_join(results: Path, db: Path, project: AsvProject) -> None:
    target = results / project.results_file(3).relative_to(project.results_dir)
    sidecar = write_sidecar(target, [
        case_record("flydsl", contract={"flush": "none"}),
        case_record("flydsl", run_id="run-2"),  # appended later: wins
        case_record("torch", status="failed", reason="relative error 0.3 > tolerance 0.02"),
    ], extra='{"workload": "attention", "shape_set": "qu')  # a torn last line
    write_sidecar(results / project.results_file(FAILED_AT).relative_to(project.results_dir), [case_record("torch")])
    report = ingest(results, db)
    assert report.ok and len(report.warnings) == 1 and "line 4" in report.warnings[0]

    rows = queries.records(queries.history(db, MACHINE))
    at_step = {(r["benchmark"], json.loads(r["params"])["provider"]): r
               for r in rows if r["commit_hash"] == project.commits[3]}
    flydsl = at_step["attention.Quick.track_time", "flydsl"]
    assert flydsl["status"] == "ok" and flydsl["run_id"] == "run-2"
    assert json.loads(flydsl["contract"])["flush"] == "llc"
    assert flydsl["tflops"] == 100.0 and json.loads(flydsl["errors"]) == {"out": 1e-3}
    torch = at_step["attention.Quick.track_time", "torch"]
    assert torch["status"] == "failed" and torch["reason"].startswith("relative error")
    assert at_step["attention.Rates.track_tflops", "torch"]["contract"] is None  # not a case suite: no record
    elsewhere = [r for r in rows if r["commit_hash"] == project.commits[2]]
    assert all(r["contract"] is None and r["status"] == "ok" for r in elsewhere)

    sidecar.write_text(json.dumps(case_record("torch", status="unavailable", reason="needs ROCm")) + "\n")
    assert ingest(results, db).loaded == [target.relative_to(results).as_posix()]  # the sidecar alone changed
    statuses = {json.loads(r["params"])["provider"]: r["status"] for r in queries.records(queries.history(
        db, MACHINE, "attention.Quick.track_time")) if r["commit_hash"] == project.commits[3]}
    assert statuses == {"flydsl": "ok", "torch": "unavailable"}


def test_rates_are_derived_from_asv_time_and_the_records_counts(results: Path, db: Path, project: AsvProject) -> None:
    target = results / project.results_file(0).relative_to(project.results_dir)
    write_sidecar(target, [case_record("flydsl", version=2, flops=3e9, bytes=4e6, floor_s=2e-4, tflops=999.0),
                           case_record("torch", version=2, flops=None, bytes=4e6, floor_s=None)])
    assert ingest(results, db).ok
    rows = {json.loads(r["params"])["provider"]: r for r in queries.records(queries.history(
        db, MACHINE, "attention.Quick.track_time")) if r["commit_hash"] == project.commits[0]}
    flydsl, torch = rows["flydsl"], rows["torch"]
    seconds = FLYDSL_MS[0] * 1e-3  # asv's median of the toy's samples
    assert flydsl["value"] == pytest.approx(seconds)
    assert (flydsl["flops"], flydsl["bytes"], flydsl["floor_s"]) == (3e9, 4e6, 2e-4)
    assert flydsl["tflops"] == pytest.approx(3e9 / seconds / 1e12)  # from the counts, not the record's 999
    assert flydsl["gbps"] == pytest.approx(4e6 / seconds / 1e9)
    assert flydsl["roofline_fraction"] == pytest.approx(2e-4 / seconds)
    assert torch["tflops"] is None and torch["roofline_fraction"] is None
    assert torch["gbps"] == pytest.approx(4e6 / (TORCH_MS[0] * 1e-3) / 1e9)


def test_subject_is_recorded_and_kept_apart(results: Path, db: Path,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    ingest(results, db)
    with pytest.raises(FlybenchError, match="holds results of 'toyproj' .* not of 'flydsl'"):
        ingest(results, db, subject="flydsl")  # the tree's own config says otherwise
    unconfigured = shutil.copytree(results, tmp_path_factory.mktemp("no_config") / "results")
    ingest(unconfigured, db, subject="flydsl")
    assert count(db, "SELECT count(DISTINCT subject) FROM results") == 2
    assert len(queries.commits(db, MACHINE, subject="flydsl")) == 6
    latest = queries.latest_results(db, MACHINE, subject=PROJECT)
    assert len(latest) == 4 and set(latest.commit_date) == {dt.datetime(2026, 1, 6, 12)}


def test_locked_database_names_the_file_and_the_remedy(results: Path, db: Path) -> None:
    ingest(results, db)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(db)!r}); print('ok', flush=True); "
                               "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        with pytest.raises(FlybenchError, match="locked by process") as err:
            ingest(results, db)
        assert str(db) in str(err.value) and "close the dashboard" in str(err.value)
    finally:
        holder.communicate("")


def test_missing_inputs_are_clear_errors(tmp_path: Path, results: Path) -> None:
    with pytest.raises(FlybenchError, match="run `flybench ingest"):
        queries.machines(tmp_path / "none.duckdb")
    (results / "benchmarks.json").write_text("[]")
    with pytest.raises(FlybenchError, match="benchmarks.json: not an asv benchmarks.json"):
        ingest(results, tmp_path / "db.duckdb")


def test_cli_ingest_reads_the_asv_config(results: Path, db: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from flybench.cli import ingest as ingest_cli

    parser = argparse.ArgumentParser()
    ingest_cli.add_parser(parser.add_subparsers())
    monkeypatch.chdir(results.parent)  # where asv.conf.json says results_dir = "results"
    assert ingest_cli.main(parser.parse_args(["ingest", "--db", str(db)])) == 0
    assert "6 files loaded (24 rows)" in capsys.readouterr().out
    next((results / MACHINE).glob("*-*.json")).write_text("{")
    assert ingest_cli.main(parser.parse_args(["ingest", "--db", str(db)])) == 2  # bad input; 1 means regression
    assert "error:" in capsys.readouterr().err


def test_migrations_apply_in_order_and_once(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with connect(db):
        pass
    step = ["ALTER TABLE results ADD COLUMN note VARCHAR", "UPDATE results SET note = 'migrated'"]
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, step])
    monkeypatch.setattr(schema, "LATEST", len(schema.MIGRATIONS))
    with pytest.raises(FlybenchError, match=f"schema v{LATEST}, this flybench reads v{LATEST + 1}: run `flybench"):
        queries.machines(db)  # readers cannot migrate
    for _ in range(2):
        with connect(db):
            pass
    raw = duckdb.connect(str(db), read_only=True)
    assert [v for (v,) in raw.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()] == [
        *range(1, LATEST + 2)]
    assert "note" in [c for (c, *_) in raw.execute("DESCRIBE results").fetchall()]
    raw.close()


def test_files_read_by_worker_processes_give_the_same_database(
        results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_ingest = sys.modules["flybench.store.ingest"]
    serial = ingest(results, tmp_path / "serial.duckdb")
    monkeypatch.setattr(store_ingest._Readers, "MIN_FILES", 0)  # fork workers even for this small tree
    pools = []
    monkeypatch.setattr(store_ingest, "ProcessPoolExecutor", lambda *a, **k: pools.append(ProcessPoolExecutor(*a, **k))
                        or pools[-1])
    parallel = ingest(results, tmp_path / "parallel.duckdb")
    assert len(pools) == 1
    assert (parallel.loaded, parallel.rows, parallel.errors) == (serial.loaded, serial.rows, serial.errors)
    drop_times = {"ingested_files": lambda row: row[:-1], "schema_version": lambda row: row[:1]}
    tables = [{t: sorted((drop_times.get(t, tuple)(r) for r in rows), key=repr) for t, rows in dump(db).items()}
              for db in (tmp_path / "serial.duckdb", tmp_path / "parallel.duckdb")]
    assert tables[0] == tables[1]


def test_a_v2_database_migrates_to_results_without_a_primary_key(results: Path, db: Path, tmp_path: Path) -> None:
    ingest(results, tmp_path / "v3.duckdb")
    before = dump(tmp_path / "v3.duckdb")["results"]
    assert len(before) == 24
    # the database a v2 flybench wrote: the same rows, results keyed
    database_at(db, 2, tmp_path / "v3.duckdb", ("machines", "commits", "environments", "benchmarks", "results",
                                                "ingested_files"))
    machine_dir = results / MACHINE
    changed = sorted(machine_dir.glob("*-*.json"))[0]
    changed.write_text(changed.read_text().replace('"version": 2', '"version": 2 '))  # new bytes, same rows
    report = ingest(results, db)  # migrates, then re-reads the one changed file
    assert report.ok and len(report.loaded) == 1 and report.unchanged
    assert dump(db)["results"] == before  # every row kept, none twice
    with connect(db, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'results'"
                            " AND constraint_type = 'PRIMARY KEY'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'results'"
                            " AND constraint_type = 'NOT NULL'").fetchone()[0] == 8
        held = conn.execute("SELECT source_file, count(*) FROM result_files GROUP BY ALL").fetchall()
    assert sorted(path for path, _ in held) == sorted(f"{MACHINE}/{p.name}" for p in machine_dir.glob("*-*.json"))
    assert {n for _, n in held} == {1}
    assert heads_mismatches(db) == (4, 0)  # filled by the v4 step


def test_series_heads_follow_new_changed_and_removed_files(results: Path, db: Path, project: AsvProject) -> None:
    machine_dir = results / MACHINE
    files = sorted(machine_dir.glob("*-*.json"), key=lambda p: project.commits.index(
        next(c for c in project.commits if c.startswith(p.name[:8]))))
    ingest(results, db)
    assert heads_mismatches(db) == (4, 0)  # 2 benchmarks x 2 providers, each from the newest commit
    newest = json.loads(files[-1].read_text())
    at = newest["result_columns"].index("result")
    for entry in newest["results"].values():
        entry[at] = [None if v is None else v * 2 for v in entry[at]]
    files[-1].write_text(json.dumps(newest))
    ingest(results, db)
    assert heads_mismatches(db) == (4, 0)
    assert count(db, "SELECT count(*) FROM series_heads WHERE commit_hash = ?", [project.commits[-1]]) == 4
    files[-1].unlink()
    assert ingest(results, db, prune=True).removed
    assert heads_mismatches(db) == (4, 0)
    assert count(db, "SELECT count(*) FROM series_heads WHERE commit_hash = ?", [project.commits[-2]]) == 4


def test_heads_an_interrupted_ingest_marked_stale_are_refreshed_by_the_next(results: Path, db: Path) -> None:
    ingest(results, db)
    raw = duckdb.connect(str(db))  # as an ingest cut off after storing files, before refreshing their heads
    raw.execute("DELETE FROM series_heads")
    raw.execute("INSERT INTO stale_heads VALUES (?, ?)", [PROJECT, MACHINE])
    raw.close()
    report = ingest(results, db)
    assert report.ok and not report.loaded  # nothing new to read, and still
    assert heads_mismatches(db) == (4, 0)
    assert count(db, "SELECT count(*) FROM stale_heads") == 0


def test_a_file_holding_a_combination_twice_is_refused(results: Path, db: Path, project: AsvProject) -> None:
    path = results / project.results_file(2).relative_to(project.results_dir)
    data = json.loads(path.read_text())
    name = "attention.Quick.track_time"
    at = data["result_columns"].index("params")
    data["results"][name][at][1] = ["'flydsl'", "'flydsl'"]  # asv's loader reads it; its rows would repeat
    path.write_text(json.dumps(data))
    report = ingest(results, db)
    (error,) = report.errors
    assert error.path == str(path) and "twice" in error.message
    assert len(report.loaded) == 5 and count(db, "SELECT count(*) FROM results") == 20


def test_a_file_whose_rows_collide_is_reported_and_the_others_load(results: Path, db: Path,
                                                                   project: AsvProject) -> None:
    original = results / project.results_file(1).relative_to(project.results_dir)
    copy = original.with_name("ffffffff-" + original.name.split("-", 1)[1])  # same commit and env: same keys
    shutil.copy(original, copy)
    report = ingest(results, db)  # one batch: it cannot be written whole, so file by file
    (error,) = report.errors
    assert error.path == str(copy) and "FileKeyTaken" in error.message and original.name in error.message
    assert len(report.loaded) == 6 and count(db, "SELECT count(*) FROM results") == 24
    assert count(db, "SELECT count(*) FROM ingested_files WHERE path LIKE '%ffffffff-%'") == 0


def test_files_orjson_cannot_read_exactly_are_read_as_json_reads_them(results: Path, db: Path,
                                                                      project: AsvProject) -> None:
    for index in range(6):
        path = results / project.results_file(index).relative_to(project.results_dir)
        data = json.loads(path.read_text())
        data["requirements"] = {"big": 2**70, "negative": -(10**19)}  # beyond 64 bits: orjson would give floats
        if index == 5:
            data["results"]["attention.Rates.track_tflops"][0][0] = float("nan")  # flydsl skipped: asv writes NaN
        if index == 4:
            data["results"]["attention.Rates.track_tflops"][0][0] = 2**64  # stored as a double either way
        path.write_text(json.dumps(data))
    assert "NaN" in path.read_text()
    assert ingest(results, db).ok
    tflops = queries.records(queries.history(db, MACHINE, "attention.Rates.track_tflops", {**FLYDSL}))
    assert tflops[5]["value"] is None and tflops[5]["status"] == "unavailable"
    assert tflops[4]["status"] == "ok" and tflops[4]["value"] == float(2**64)
    with connect(db, read_only=True) as conn:
        (requirements,) = conn.execute("SELECT requirements FROM environments").fetchone()
    assert json.loads(requirements) == {"big": 2**70, "negative": -(10**19)}


@pytest.mark.parametrize("document", [
    '{"v": [1.5, NaN, Infinity, -Infinity, 1e400]}', '{"v": 123456789012345678901234567890}',
    '{"v": -9999999999999999999, "w": 18446744073709551616}', '{"v": "\\ud800"}', '{"v": 1, "v": 2}',
    '{"v": [0.1, 1e-300, 0.00012345678901234567, -0.0, 9007199254740993]}', '{"v": "12345678901234567890123"}',
])
def test_results_json_is_parsed_as_asv_parses_it(tmp_path: Path, document: str) -> None:
    from flybench.store.asv_files import load_json

    path = tmp_path / "results.json"
    path.write_text(document[:-1] + ', "version": 2}')
    expected = json.loads(document)
    assert repr(load_json(path, 2)) == repr(expected)  # repr: NaN, -0.0 and int versus float told apart
    path.write_text(document[:-1] + ', "version": 1}')
    with pytest.raises(Exception, match="old file format"):
        load_json(path, 2)
    path.write_text(document[: len(document) // 2])
    with pytest.raises(Exception, match="Error parsing JSON"):
        load_json(path, 2)


def test_a_tree_without_benchmarks_json_names_case_suites_by_their_scheme(results: Path, db: Path,
                                                                          tmp_path: Path) -> None:
    """Ingested first into an empty store, a copied tree without benchmarks.json still matches later trees:
    the case suite's parameters are case, provider and dtype, not p0, p1, p2; other benchmarks say why not."""
    (results / "benchmarks.json").unlink()
    report = ingest(results, db)
    assert report.ok and any("case suites are named by their own scheme" in w for w in report.warnings)
    with connect(db, read_only=True) as conn:
        keys = {tuple(json.loads(p)) for (p,) in conn.execute(
            "SELECT DISTINCT params FROM results WHERE benchmark = 'attention.Quick.track_time'").fetchall()}
        units = {u for (u,) in conn.execute(
            "SELECT DISTINCT unit FROM results WHERE benchmark = 'attention.Quick.track_time'").fetchall()}
    assert keys == {("case", "provider", "dtype")} and units == {"seconds"}
