"""Results trees nobody here wrote: asv's old format, no or an older benchmarks.json, other machine names."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from asv.results import Results
from fixtures.asv_files import MACHINE, benchmarks_json, machine_json, results_json

from flybench.store import ingest

OLD = {  # asv's format 1, as asv 0.4 wrote it
    "commit_hash": "c" * 40, "date": 1767268800000, "python": "3.8", "env_name": "conda-py3.8",
    "params": {"machine": MACHINE, "python": "3.8"}, "requirements": {}, "version": 1,
    "results": {
        "b.T.time_grid": {"result": [1.0, 2.0, None, 4.0], "params": [["1", "2"], ["'x'", "'y'"]],
                          "stats": [{"ci_99": [0.9, 1.1], "q_25": 0.95, "q_75": 1.05, "number": 1, "repeat": 3},
                                    None, None, None]},
        "b.T.time_plain": 0.5,  # the oldest shape: a bare number
    },
    "started_at": {"b.T.time_grid": 1767268800000}, "duration": {"b.T.time_grid": 1.5},
    "benchmark_version": {"b.T.time_grid": "v1", "b.T.time_plain": "v1"},
}
GRID = {"param_names": ["n", "mode"], "params": [["1", "2"], ["'x'", "'y'"]]}


def query(db: Path, sql: str) -> list[tuple]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def old_tree(root: Path) -> Path:
    root.mkdir(parents=True)
    benchmarks_json(root, {"b.T.time_grid": GRID, "b.T.time_plain": {}})
    machine_json(root)
    (root / MACHINE / "cccccccc-conda-py3.8.json").write_text(json.dumps(OLD))
    return root


def test_an_old_format_tree_is_read_as_asv_reads_it_and_left_as_it_was(tmp_path: Path) -> None:
    tree = old_tree(tmp_path / "results")
    old_file = tree / MACHINE / "cccccccc-conda-py3.8.json"
    before = hashlib.sha256(old_file.read_bytes()).hexdigest()
    report = ingest(tree, tmp_path / "db.duckdb", "toy")
    assert report.ok and report.rows == 5, report.summary()
    assert hashlib.sha256(old_file.read_bytes()).hexdigest() == before  # never updated in place
    # asv's own answer: `asv update` on a copy, then asv's loader
    copy = Path(shutil.copytree(tree, tmp_path / "updated"))
    Results.update(str(copy / MACHINE / old_file.name))
    asv = Results.load(str(copy / MACHINE / old_file.name))
    stored = {(b, p): (v, s) for b, p, v, s in query(
        tmp_path / "db.duckdb", "SELECT benchmark, params, value, status FROM results")}
    expected = dict(zip([json.dumps({"n": n, "mode": m}) for n in (1, 2) for m in ("x", "y")],
                        asv.get_result_value("b.T.time_grid", asv.get_result_params("b.T.time_grid"))))
    assert {p: v for (b, p), (v, _) in stored.items() if b == "b.T.time_grid"} == expected
    assert stored["b.T.time_grid", json.dumps({"n": 1, "mode": "y"})] == (2.0, "ok")
    assert stored["b.T.time_grid", json.dumps({"n": 2, "mode": "x"})] == (None, "failed")
    assert stored["b.T.time_plain", "{}"] == (0.5, "ok")
    ((ci_a, ci_b, q25, version, duration),) = query(
        tmp_path / "db.duckdb", "SELECT ci_99_a, ci_99_b, q_25, benchmark_version, duration FROM results "
        """WHERE benchmark = 'b.T.time_grid' AND params->>'n' = '1' AND params->>'mode' = 'x'""")
    assert (ci_a, ci_b, q25, version, duration) == (0.9, 1.1, 0.95, "v1", 1.5)


def test_an_old_file_that_asvs_loader_reads_goes_through_a_temporary_copy(tmp_path: Path) -> None:
    tree = old_tree(tmp_path / "results")
    old = dict(OLD, results={"b.T.time_plain": {"result": [0.5], "params": [], "samples": [[0.4, "0.6"]]}})
    path = tree / MACHINE / "cccccccc-conda-py3.8.json"
    path.write_text(json.dumps(old))  # a text sample: not the plain shape, so asv's own loader reads it
    report = ingest(tree, tmp_path / "db.duckdb", "toy")
    assert report.ok and report.rows == 1, report.summary()
    assert json.loads(path.read_text()) == old
    assert query(tmp_path / "db.duckdb", "SELECT value, samples FROM results") == [(0.5, [0.4, 0.6])]


def test_a_tree_without_benchmarks_json_loads_with_units_from_the_names(tmp_path: Path) -> None:
    tree = old_tree(tmp_path / "results")
    (tree / "benchmarks.json").unlink()
    report = ingest(tree, tmp_path / "db.duckdb", "toy")
    assert report.ok and report.rows == 5 and "no " in report.warnings[0], report.summary()
    assert set(query(tmp_path / "db.duckdb", "SELECT DISTINCT unit FROM results")) == {("seconds",)}
    assert ingest(tree, tmp_path / "db.duckdb", "toy").loaded == []  # and not read again and again


def test_retired_benchmarks_keep_parameter_names_and_a_unit(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    machine_json(root)
    benchmarks_json(root, {"b.T.time_grid": GRID, "b.U.track_count": {
        "param_names": ["size"], "params": [["1", "2"]], "type": "track", "unit": "widgets"}})
    grid = [[1.0, 2.0, 3.0, 4.0], GRID["params"], "1", 1767268800000, 0.2]
    results_json(root, {"b.T.time_grid": grid, "b.U.track_count": [[5, 6], [["1", "2"]], "1"]})
    db = tmp_path / "db.duckdb"
    assert ingest(root, db, "toy").ok
    # The suite moves on: track_count leaves benchmarks.json, and a later file still holds it, along with a
    # retired method of a class still defined and a retired track_ benchmark nothing defined.
    benchmarks_json(root, {"b.T.time_grid": GRID})
    results_json(root, {"b.T.time_grid": grid, "b.T.time_old": grid, "b.U.track_count": [[7, 8], [["1", "2"]], "1"],
                        "b.V.track_gone": [[9], [["'a'"]], "1"]}, commit="d" * 40)
    report = ingest(root, db, "toy")
    assert report.ok, report.summary()
    rows = {(b, p, u) for b, p, u in query(db, f"SELECT benchmark, params, unit FROM results "
                                           f"WHERE commit_hash = '{'d' * 40}'")}
    assert ("b.T.time_old", json.dumps({"n": 1, "mode": "x"}), "seconds") in rows  # named like its class
    assert ("b.U.track_count", json.dumps({"size": 1}), "widgets") in rows  # the stored definition
    assert ("b.V.track_gone", json.dumps({"p0": "a"}), "unknown") in rows  # nothing says more: shown, unit unknown
    assert not [r for r in rows if r[2] is None]


@pytest.mark.parametrize("name, cpu, accelerator, arch", [
    ("ubuntu-22.04", "Intel Xeon", None, None),
    ("windows-2022", "AMD EPYC", None, None),
    ("dev-h200", "x86_64; accelerator: NVIDIA H200 sm_90 cuda 13.0; torch=2.11.0", "NVIDIA H200 sm_90 cuda 13.0",
     "sm_90"),
    ("ci-cpu", "x86_64; accelerator: none; torch=2.11.0", "none", "cpu"),
])
def test_machine_facts_come_from_machine_json_not_the_name(
        tmp_path: Path, name: str, cpu: str, accelerator: str | None, arch: str | None) -> None:
    root = tmp_path / "results"
    root.mkdir()
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root, name, cpu=cpu)
    results_json(root, {"b.T.time_plain": [[1.5], [], "1"]}, machine=name)
    assert ingest(root, tmp_path / "db.duckdb", "toy").ok
    assert query(tmp_path / "db.duckdb", "SELECT name, host, accelerator, arch, cpu FROM machines") == [
        (name, name, accelerator, arch, cpu)]


def test_a_changed_machine_json_updates_its_row_and_an_unchanged_one_leaves_it(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root, cpu="x86_64; accelerator: NVIDIA H200 sm_90 cuda 13.0")
    results_json(root, {"b.T.time_plain": [[1.5], [], "1"]})
    db = tmp_path / "db.duckdb"
    ingest(root, db, "toy")
    before = query(db, "SELECT * FROM machines")
    assert ingest(root, db, "toy").loaded == [] and query(db, "SELECT * FROM machines") == before
    machine_json(root, cpu="x86_64; accelerator: AMD Instinct MI355X gfx950 rocm 7.0")
    assert ingest(root, db, "toy").loaded == []  # no results file changed, and still
    assert query(db, "SELECT accelerator, arch FROM machines") == [("AMD Instinct MI355X gfx950 rocm 7.0", "gfx950")]


def test_a_current_file_that_claims_format_1_is_its_own_error_with_advice(tmp_path: Path, capsys) -> None:
    from flybench.cli import main as cli_main

    tree = old_tree(tmp_path / "results")
    db = tmp_path / "db.duckdb"
    assert ingest(tree, db, "toy").rows == 5
    stored = query(db, "SELECT * FROM results ORDER BY ALL")
    labelled = results_json(tree, {"b.T.time_grid": [[1.0, 2.0, 3.0, 4.0], GRID["params"], "1"]}, commit="d" * 40)
    data = json.loads(labelled.read_text())
    labelled.write_text(json.dumps(dict(data, version=1)))  # once: TypeError: must be real number, not list
    assert cli_main(["ingest", str(tree), "--db", str(db), "--subject", "toy"]) == 2
    err = capsys.readouterr().err
    assert "TypeError" not in err and "Traceback" not in err
    assert str(labelled) in err and "'version' is 1" in err and "'result_columns'" in err
    assert '"version" should be 2' in err
    assert query(db, "SELECT * FROM results ORDER BY ALL") == stored  # nothing lost, nothing half-stored
    labelled.write_text(json.dumps(data))  # the advice taken
    report = ingest(tree, db, "toy")
    assert report.ok and report.rows == 4, report.summary()


@pytest.mark.parametrize("entry, said", [
    ([1.0, [], "1"], "its entry must be a number, null or an object with a 'result', but it is a list of 3 values"),
    ("fast", "its entry must be a number, null or an object with a 'result', but it is the text 'fast'"),
    ({"params": []}, "its entry has no 'result'"),
    ({"result": [[1.0]], "params": [["1"]]}, "its 'result' must be a number, null or a list of them"),
    ({"result": [1.0], "stats": [{"q_25": 1.0}]}, "an object with no 'ci_99'"),
    ({"result": [1.0], "stats": [5]}, "but it holds the number 5"),
])
def test_an_entry_not_in_format_1_is_named_in_a_file_that_claims_it(tmp_path: Path, entry: Any, said: str) -> None:
    tree = old_tree(tmp_path / "results")
    bad = tree / MACHINE / "dddddddd-conda-py3.8.json"
    bad.write_text(json.dumps(dict(OLD, commit_hash="d" * 40, results={"b.T.time_plain": entry})))
    report = ingest(tree, tmp_path / "db.duckdb", "toy")
    assert report.rows == 5 and len(report.loaded) == 1, report.summary()  # the good file still loads
    (error,) = report.errors
    assert error.path == str(bad) and "b.T.time_plain" in error.message and said in error.message, error.message
    assert "'version' is 1" in error.message and "ingest again" in error.message


@pytest.mark.parametrize("value, shown", [([1.5], "a list of 1 value"), ("fast", "the text 'fast'"),
                                          ({"a": 1}, "an object")])
def test_a_result_that_is_not_a_number_is_named_not_a_type_error(tmp_path: Path, value: Any, shown: str) -> None:
    tree = old_tree(tmp_path / "results")
    bad = results_json(tree, {"b.T.time_plain": [[value], [], "1"]}, commit="d" * 40)
    report = ingest(tree, tmp_path / "db.duckdb", "toy")
    assert report.rows == 5, report.summary()
    (error,) = report.errors
    assert error.path == str(bad) and "TypeError" not in error.message
    assert f"benchmark 'b.T.time_plain': its results must be numbers, or null for a case that failed, but one is " \
           f"{shown}" in error.message
