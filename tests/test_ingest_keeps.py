"""Ingest removes stored rows only when asked: trees of several runners merge, a wrong subject is refused."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from fixtures.asv_files import benchmarks_json, machine_json, results_json

from flybench.cli import main as cli
from flybench.store import ingest

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "flydsl-ci-history-2026-06-11_2026-07-12.json.gz"


def runner_tree(root: Path, machine: str, commit: str) -> Path:
    """One runner's artifact: its machine and one results file."""
    root.mkdir(parents=True)
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root, machine)
    results_json(root, {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1]}, commit=commit, machine=machine)
    return root


def scalar(db: Path, sql: str) -> object:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def test_trees_of_several_runners_merge_and_absent_files_are_kept(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    first = runner_tree(tmp_path / "a" / "results", "runner-a", "a" * 40)
    second = runner_tree(tmp_path / "b" / "results", "runner-b", "b" * 40)
    assert ingest(first, db, "toy").ok
    report = ingest(second, db, "toy")
    assert report.ok and report.kept == ["runner-a/aaaaaaaa-existing-py.json"] and not report.removed
    assert "1 stored files not in this tree, kept; `--prune` removes them" in report.summary()
    assert scalar(db, "SELECT count(DISTINCT machine) FROM results") == 2
    again = ingest(second, db, "toy")
    assert again.loaded == [] and again.kept == report.kept  # still kept, still counted
    pruned = ingest(second, db, "toy", prune=True)  # runner-a's folder is not in this tree: its rows stay
    assert not pruned.removed and pruned.kept == ["runner-a/aaaaaaaa-existing-py.json"]
    assert "1 stored files of machine folders this tree does not hold, kept" in pruned.summary()
    assert scalar(db, "SELECT count(DISTINCT machine) FROM results") == 2


def test_prune_on_the_parent_of_results_trees_removes_nothing(tmp_path: Path, capsys) -> None:
    """`flybench ingest results --prune`, one folder above the tree, emptied the store: each subject tree looked
    like a machine folder, and every stored file was absent from it."""
    tree = runner_tree(tmp_path / "results" / "toy", "runner-a", "a" * 40)
    (tmp_path / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "toy", "results_dir": "results/toy"}))
    db = tmp_path / "db.duckdb"
    assert cli(["ingest", str(tree), "--db", str(db)]) == 0
    capsys.readouterr()
    assert cli(["ingest", str(tmp_path / "results"), "--db", str(db), "--prune"]) == 2
    err = capsys.readouterr().err
    assert "holds no machine folder" in err and "nothing was stored or removed" in err
    assert f"ingest each of them (`flybench ingest {tree}`)" in err and "Traceback" not in err
    assert scalar(db, "SELECT count(*) FROM results") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli(["ingest", str(empty), "--db", str(db), "--subject", "toy", "--prune"]) == 2
    assert "Name asv's results_dir" in capsys.readouterr().err
    assert scalar(db, "SELECT count(*) FROM results") == 1


def test_prune_removes_only_files_of_the_machine_folders_the_tree_holds(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    tree = runner_tree(tmp_path / "results", "runner-a", "a" * 40)
    machine_json(tree, "runner-b")
    results_json(tree, {"b.T.time_plain": [[2.5], [], "1", 1767268800000, 0.1]}, commit="b" * 40,
                 machine="runner-b")
    assert ingest(tree, db, "toy").ok
    (tree / "runner-a" / "aaaaaaaa-existing-py.json").unlink()  # a file gone from a folder the tree holds
    shutil.rmtree(tree / "runner-b")  # a whole machine gone from this copy of the tree
    pruned = ingest(tree, db, "toy", prune=True)
    assert pruned.removed == ["runner-a/aaaaaaaa-existing-py.json"]
    assert pruned.kept == ["runner-b/bbbbbbbb-existing-py.json"]
    assert scalar(db, "SELECT list(DISTINCT machine) FROM results") == ["runner-b"]


def test_cli_prune_and_a_subject_the_config_contradicts(tmp_path: Path, capsys) -> None:
    tree = runner_tree(tmp_path / "results", "runner-a", "a" * 40)
    (tmp_path / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "toy", "results_dir": "results"}))
    db = str(tmp_path / "db.duckdb")
    assert cli(["ingest", str(tree), "--db", db]) == 0
    assert cli(["ingest", str(tree), "--db", db, "--subject", "flydsl"]) == 2
    err = capsys.readouterr().err
    assert "holds results of 'toy'" in err and "not of 'flydsl'" in err and "Traceback" not in err
    assert scalar(Path(db), "SELECT count(*) FROM results") == 1  # nothing deleted, nothing filed wrongly
    (tree / "runner-a" / "aaaaaaaa-existing-py.json").unlink()
    assert cli(["ingest", str(tree), "--db", db]) == 0
    assert "1 stored files not in this tree, kept" in capsys.readouterr().out
    assert cli(["ingest", str(tree), "--db", db, "--prune"]) == 0
    assert "1 removed" in capsys.readouterr().out
    assert scalar(Path(db), "SELECT count(*) FROM results") == 0


def test_definitions_left_out_of_a_new_benchmarks_json_stay(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    tree = runner_tree(tmp_path / "results", "runner-a", "a" * 40)
    ingest(tree, db, "toy")
    benchmarks_json(tree, {"b.T.time_new": {}})  # time_plain retired: its rows and definition stay
    assert ingest(tree, db, "toy").ok
    assert scalar(db, "SELECT list(name ORDER BY name) FROM benchmarks") == ["b.T.time_new", "b.T.time_plain"]


@pytest.mark.skipif(not SHARED.is_file(), reason=f"{SHARED} not found (the shared data folder)")
def test_importer_definitions_survive_an_ingest_of_a_changed_benchmarks_json(tmp_path: Path) -> None:
    from flybench.importers.flydsl_ci import SOURCE, import_file

    db = tmp_path / "db.duckdb"
    history = tmp_path / "history.json"
    records = json.loads(gzip.decompress(SHARED.read_bytes()))["records"][:200]
    history.write_text(json.dumps({"schema": 1, "repo": "ROCm/FlyDSL", "records": records}))
    assert import_file(history, db, "flydsl").ok
    imported = scalar(db, f"SELECT count(*) FROM benchmarks WHERE subject = 'flydsl' AND version = '{SOURCE}'")
    assert imported
    tree = runner_tree(tmp_path / "results", "cpu-compile", "a" * 40)
    assert ingest(tree, db, "flydsl").ok
    benchmarks_json(tree, {"b.T.time_plain": {"unit": "bytes"}})  # a changed benchmarks.json
    assert ingest(tree, db, "flydsl").ok
    assert scalar(db, f"SELECT count(*) FROM benchmarks WHERE subject = 'flydsl' AND version = '{SOURCE}'") == imported
    assert scalar(db, "SELECT unit FROM benchmarks WHERE name = 'b.T.time_plain'") == "bytes"


def test_a_machine_folder_that_cannot_be_read_is_an_error_not_a_removal(tmp_path: Path, monkeypatch,
                                                                       capsys) -> None:
    """A folder of mode 000 or 300 lists as empty: --prune then dropped all its rows. (The tests run as root,
    whom permissions do not stop, so the folder's listing is made to fail as it does for its owner.)"""
    import importlib
    import os

    ingest_module = importlib.import_module("flybench.store.ingest")

    tree = runner_tree(tmp_path / "results", "runner-a", "a" * 40)
    db = tmp_path / "db.duckdb"
    assert ingest(tree, db, "toy").ok
    locked = tree / "runner-a"
    real_scandir = os.scandir

    def denied(path):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(ingest_module.os, "scandir", denied)
    for prune in ([], ["--prune"]):
        assert cli(["ingest", str(tree), "--db", str(db), "--subject", "toy", *prune]) == 2
        err = capsys.readouterr().err
        assert f"cannot read {locked} (permission denied): nothing was stored or removed" in err
    assert scalar(db, "SELECT count(*) FROM results") == 1


def test_a_tree_without_a_config_asks_for_subject_by_its_flag(tmp_path: Path, capsys) -> None:
    tree = runner_tree(tmp_path / "results", "runner-a", "a" * 40)
    assert cli(["ingest", str(tree), "--db", str(tmp_path / "db.duckdb")]) == 2
    assert "pass --subject NAME (e.g. --subject flydsl)" in capsys.readouterr().err


@pytest.mark.parametrize("project", [[1, 2], {"a": 1}, 7, None, "", "two\nlines"])
def test_a_config_whose_project_is_no_name_stores_nothing(project, tmp_path: Path, capsys) -> None:
    """`{"project": [1, 2]}` filed a second copy of every row under a subject named "[1, 2]", with exit 0."""
    tree = runner_tree(tmp_path / "results", "runner-a", "a" * 40)
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "project": "toy", "results_dir": "results"}))
    db = tmp_path / "db.duckdb"
    assert cli(["ingest", str(tree), "--db", str(db)]) == 0
    capsys.readouterr()
    config.write_text(json.dumps({"version": 1, "project": project, "results_dir": "results"}))
    for subject in ([], ["--subject", "toy"]):
        assert cli(["ingest", str(tree), "--db", str(db), *subject]) == 2
        err = capsys.readouterr().err
        assert f"{config}: 'project' is {json.dumps(project)}, not a name on one line" in err
        assert 'write it as a string, e.g. "project": "flydsl"' in err and "Traceback" not in err
    assert scalar(db, "SELECT list(DISTINCT subject) FROM results") == ["toy"]
    assert scalar(db, "SELECT count(*) FROM results") == 1


def test_a_bad_config_of_a_later_subject_tree_stops_the_ingest_before_any_tree_is_written(tmp_path: Path,
                                                                                           monkeypatch, capsys):
    runner_tree(tmp_path / "results" / "toy", "runner-a", "a" * 40)
    (tmp_path / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "toy", "results_dir": "results/toy"}))
    other = runner_tree(tmp_path / "results" / "other", "runner-b", "b" * 40)
    (other / "asv.conf.json").write_text(json.dumps({"version": 1, "project": [1, 2], "results_dir": "."}))
    monkeypatch.chdir(tmp_path)
    assert cli(["ingest", "--db", "db.duckdb", "--no-rescan"]) == 2
    assert "'project' is [1, 2]" in capsys.readouterr().err
    assert not (tmp_path / "db.duckdb").exists()


def test_a_unit_that_contradicts_a_time_suite_is_refused(tmp_path: Path, capsys) -> None:
    """`"unit": "bytes"` on attention.Quick.track_time relabelled every row of it, and bytes being exact, every
    change between commits became an "exact" regression."""
    tree = tmp_path / "results"
    tree.mkdir()
    grid = [["'c1'"], ["'torch'"], ["'bf16'"]]
    suite = {"param_names": ["case", "provider", "dtype"], "params": grid}
    benchmarks_json(tree, {"attention.Quick.track_time": suite})
    machine_json(tree, "runner-a")
    results_json(tree, {"attention.Quick.track_time": [[1e-3], grid, "1", 1767268800000, 0.1]}, machine="runner-a")
    db = tmp_path / "db.duckdb"
    assert cli(["ingest", str(tree), "--db", str(db), "--subject", "toy"]) == 0
    capsys.readouterr()
    benchmarks_json(tree, {"attention.Quick.track_time": {**suite, "unit": "bytes"}})
    assert cli(["ingest", str(tree), "--db", str(db), "--subject", "toy"]) == 2
    err = capsys.readouterr().err
    assert "benchmark 'attention.Quick.track_time': 'unit' is 'bytes', but flybench's time suites measure " \
           "seconds" in err and "restore that file" in err and "Traceback" not in err
    assert scalar(db, "SELECT list(DISTINCT unit) FROM results") == ["seconds"]
    assert scalar(db, "SELECT unit FROM benchmarks WHERE name = 'attention.Quick.track_time'") == "seconds"
