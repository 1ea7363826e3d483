"""Fields of the wrong type in asv's files: the message names the file, the field, what asv writes there and
what the file holds, never Python's `'int' object is not subscriptable`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flybench.cli import main
from flybench.store import ingest
from tests.fixtures.asv_files import MACHINE, benchmarks_json, machine_json, results_json

PLAIN = {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1]}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    root.mkdir()
    benchmarks_json(root, {"b.T.time_plain": {}, "b.T.time_grid": {"param_names": ["n"], "params": [["1", "2"]]}})
    machine_json(root)
    results_json(root, PLAIN)
    return root


def edited(path: Path, **fields: Any) -> Path:
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))
    return path


@pytest.mark.parametrize("fields, message", [
    ({"params": 5}, ("'params' must be an object (the environment's parameters: machine, python, ...), but it is "
                     "the number 5")),
    ({"params": []}, ("'params' must be an object (the environment's parameters: machine, python, ...), but it is "
                      "an empty list")),
    ({"results": []}, ("'results' must be an object (benchmark: its values, one per result column), but it is an "
                       "empty list")),
    ({"requirements": 5}, "'requirements' must be an object (package: version), but it is the number 5"),
    ({"env_vars": "x"}, "'env_vars' must be an object (variable: value), but it is the text 'x'"),
    ({"durations": [1]}, "'durations' must be an object (benchmark: seconds), but it is a list of 1 value"),
    ({"commit_hash": None}, "'commit_hash' must be text (the commit's hash), but it is null"),
    ({"env_name": 7}, "'env_name' must be text (the environment's name), but it is the number 7"),
    ({"python": 3.11}, "'python' must be text (the Python version), but it is the number 3.11"),
    ({"date": "today"}, ("'date' must be a number (the commit's date, in ms since the epoch) or null, but it is the "
                         "text 'today'")),
    ({"result_columns": {"result": 0}}, "'result_columns' must be a list of column names, but it is an object"),
    ({"result_columns": ["result", 5]}, ("'result_columns' must be a list of column names, but its item 1 is the "
                                         "number 5")),
    ({"results": {"b.T.time_plain": {"result": 1}}}, ("benchmark 'b.T.time_plain': its entry must be a list of "
                                                      "values, one per result column, but it is an object")),
    ({"results": {"b.T.time_grid": [[1.0, 2.0], 5, "1", 1767268800000, 0.1]}},
     ("benchmark 'b.T.time_grid': 'params' must be a list of lists of values, one list per parameter, but it is the "
      "number 5")),
    ({"results": {"b.T.time_grid": [[1.0, 2.0], ["1", "2"], "1", 1767268800000, 0.1]}},
     ("benchmark 'b.T.time_grid': 'params' must be a list of lists of values, one list per parameter, but its item 0 "
      "is the text '1'")),
    ({"results": {"b.T.time_grid": [{"1": 1.0}, [["1", "2"]], "1", 1767268800000, 0.1]}},
     ("benchmark 'b.T.time_grid': its 'result' must be a list of values, one per parameter combination, or null, "
      "but it is an object")),
])
def test_a_wrong_typed_field_of_a_results_file_is_named_with_what_asv_writes(
        tree: Path, tmp_path: Path, capsys, fields: dict[str, Any], message: str) -> None:
    bad = edited(results_json(tree, PLAIN, commit="b" * 40), **fields)
    assert main(["ingest", str(tree), "--db", str(tmp_path / "db.duckdb"), "--subject", "toy"]) == 2
    err = capsys.readouterr().err
    assert f"error: {bad}: {message}\n" in err
    assert "Traceback" not in err and "object is not" not in err and "object has no" not in err


@pytest.mark.parametrize("fields, message", [
    ({"machine": 5}, "'machine' must be the machine's name (text), but it is the number 5"),
    ({"os": {"name": "Linux"}}, ("'os' must be text (asv writes what it found out about the machine), but it is an "
                                 "object")),
    ({"version": "1"}, "its format 'version' must be 1 (asv's machine.json), but it is the text '1'"),
])
def test_a_wrong_typed_field_of_machine_json_is_named_and_its_results_wait(
        tree: Path, tmp_path: Path, fields: dict[str, Any], message: str) -> None:
    machine = edited(tree / MACHINE / "machine.json", **fields)
    report = ingest(tree, tmp_path / "db.duckdb", "toy")
    assert [(e.path, e.message) for e in report.errors] == [
        (str(machine), f"{message}; the 1 results files beside it were not read")]


def test_machine_json_that_is_no_object_is_named_as_such(tree: Path, tmp_path: Path) -> None:
    machine = tree / MACHINE / "machine.json"
    machine.write_text("[1, 2]")
    [error] = ingest(tree, tmp_path / "db.duckdb", "toy").errors
    assert error.message.startswith("not an asv machine.json: it holds a list of 2 values, and asv writes an object")


@pytest.mark.parametrize("entry, message", [
    (5, "its entry must be an object (asv writes one per benchmark), but it is the number 5"),
    ({"param_names": "nm", "params": [["1"], ["2"]]}, ("'param_names' must be a list of names (text), but it is the "
                                                       "text 'nm'")),
    ({"param_names": ["n"], "params": 5}, ("'params' must be a list of lists of values, one list per parameter, but "
                                           "it is the number 5")),
    ({"param_names": ["n", "m"], "params": [["1"]]}, ("'param_names' names 2 parameters, but 'params' holds 1 lists "
                                                      "of values; asv writes one list per name")),
    ({"unit": 5}, "'unit' must be text, but it is the number 5"),
])
def test_a_wrong_typed_benchmarks_json_entry_is_named_with_the_file_and_advice(
        tree: Path, tmp_path: Path, capsys, entry: Any, message: str) -> None:
    data = json.loads((tree / "benchmarks.json").read_text())
    data["b.T.time_grid"] = entry if not isinstance(entry, dict) else {**data["b.T.time_grid"], **entry}
    (tree / "benchmarks.json").write_text(json.dumps(data))
    assert main(["ingest", str(tree), "--db", str(tmp_path / "db.duckdb"), "--subject", "toy"]) == 2
    err = capsys.readouterr().err
    assert (f"flybench ingest: error: {tree / 'benchmarks.json'}: benchmark 'b.T.time_grid': {message}; asv writes "
            "benchmarks.json with each run: restore that file") in err
    assert "Traceback" not in err
