"""Ingest of hand-made asv trees: bad results files are reported, one file at a time, never a traceback."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import duckdb
import pytest

from fixtures.asv_files import MACHINE, benchmarks_json, machine_json, results_json

from flybench.store import ingest

@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree of one machine: one plain benchmark and one over two parameters (2 x 2 cases)."""
    root = tmp_path / "results"
    root.mkdir()
    benchmarks_json(root, {"b.T.time_plain": {}, "b.T.time_grid": {
        "param_names": ["n", "mode"], "params": [["1", "2"], ["'x'", "'y'"]]}})
    machine_json(root)
    results_json(root, {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1],
                        "b.T.time_grid": [[1.0, 2.0, 3.0, 4.0], [["1", "2"], ["'x'", "'y'"]], "1", 1767268800000, 0.2]})
    return root


def rows(db: Path, sql: str = "SELECT benchmark, params, value, status, reason FROM results ORDER BY ALL") -> list:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def second_file(tree: Path, results: dict[str, list[Any]] | None = None, **kwargs: Any) -> Path:
    return results_json(tree, results if results is not None else {}, commit="b" * 40, **kwargs)


def test_the_good_file_loads(tree: Path, tmp_path: Path) -> None:
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    assert report.ok and report.rows == 5, report.summary()


@pytest.mark.parametrize("content, reason", [
    ('{"x": "\xff\xfe"}'.encode("latin-1") + bytes(range(256)), "not UTF-8 JSON"),
    (b"[]", "not an asv results file"),
    (b'{"foo": 1}', "not an asv results file"),
])
def test_a_file_that_is_not_asv_results_is_reported_with_its_path(
        tree: Path, tmp_path: Path, content: bytes, reason: str) -> None:
    bad = second_file(tree)
    bad.write_bytes(content)
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    assert report.rows == 5 and len(report.loaded) == 1  # the good file still loads
    (error,) = report.errors
    assert error.path == str(bad) and reason in error.message, error.message
    assert "Traceback" not in report.summary()


def test_entries_with_more_values_than_columns_are_a_bad_file(tree: Path, tmp_path: Path) -> None:
    bad = second_file(tree, {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1, 7, 8, 9]})
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    (error,) = report.errors
    assert error.path == str(bad) and "b.T.time_plain" in error.message and "8 values for 5 columns" in error.message


def test_value_arrays_shorter_than_the_parameter_grid_are_a_bad_file(tree: Path, tmp_path: Path) -> None:
    bad = second_file(tree, {"b.T.time_grid": [[1.0, 2.0], [["1", "2"], ["'x'", "'y'"]], "1", 1767268800000, 0.2]})
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    (error,) = report.errors
    assert error.path == str(bad) and "b.T.time_grid" in error.message
    assert "2 results for 4 parameter combinations" in error.message
    assert len(rows(tmp_path / "db.duckdb")) == 5  # nothing made up for the missing cases


def test_duplicate_parameter_combinations_after_parsing_are_a_bad_file(tree: Path, tmp_path: Path) -> None:
    bad = second_file(tree, {"b.T.time_grid": [[1.0, 2.0], [["(1, 2)", "[1, 2]"]], "1", 1767268800000, 0.2]})
    benchmarks_json(tree, {"b.T.time_grid": {"param_names": ["shape"], "params": [["(1, 2)", "[1, 2]"]]}})
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    bad_errors = [e for e in report.errors if e.path == str(bad)]
    assert len(bad_errors) == 1 and "b.T.time_grid" in bad_errors[0].message
    assert "twice" in bad_errors[0].message and "[1, 2]" in bad_errors[0].message


def test_a_garbage_sidecar_is_named_itself(tree: Path, tmp_path: Path) -> None:
    results_file = next((tree / MACHINE).glob("*-*.json"))
    cases = results_file.with_suffix(".cases.jsonl")
    cases.write_bytes(b"\x00\xff garbage\n")
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    (error,) = report.errors
    assert error.path == str(cases) and "case records" in error.message and results_file.name in error.message


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_non_finite_values_asv_did_not_mark_are_failed_with_the_reason(
        tree: Path, tmp_path: Path, value: float) -> None:
    second_file(tree, {"b.T.time_plain": [[value], [], "1", 1767268800000, 0.1]})  # json writes Infinity
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    assert report.ok, report.summary()
    ((stored, status, reason),) = rows(tmp_path / "db.duckdb", "SELECT value, status, reason FROM results "
                                       f"WHERE commit_hash = '{'b' * 40}'")
    assert stored is None and status == "failed"
    assert "non-finite" in reason and str(value) in reason


def test_nan_stays_asvs_mark_of_a_skipped_case(tree: Path, tmp_path: Path) -> None:
    second_file(tree, {"b.T.time_plain": [[math.nan], [], "1", 1767268800000, 0.1]})
    assert ingest(tree, tmp_path / "db.duckdb", subject="toy").ok
    assert rows(tmp_path / "db.duckdb", f"SELECT value, status FROM results WHERE commit_hash = '{'b' * 40}'") == [
        (None, "unavailable")]


def test_cli_reports_a_bad_file_with_exit_2_and_no_traceback(tree: Path, tmp_path: Path, capsys) -> None:
    from flybench.cli import ingest as ingest_cli

    second_file(tree).write_bytes(b"[]")
    parser = argparse.ArgumentParser()
    ingest_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["ingest", str(tree), "--db", str(tmp_path / "db.duckdb"), "--subject", "toy"])
    assert ingest_cli.main(args) == 2
    assert "not an asv results file" in capsys.readouterr().err


def test_unknown_result_columns_are_a_bad_file(tree: Path, tmp_path: Path) -> None:
    columns = ["result", "params", "version", "started_at", "duration", "extra1", "extra2", "extra3"]
    bad = second_file(tree, {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1, 7, 8, 9]}, columns=columns)
    report = ingest(tree, tmp_path / "db.duckdb", subject="toy")
    (error,) = report.errors
    assert error.path == str(bad) and "unknown result columns ['extra1', 'extra2', 'extra3']" in error.message


def test_a_date_beyond_any_clock_and_broken_links_are_reported_files_not_a_crash(tmp_path: Path, capsys) -> None:
    """The battery's `"date": 1e300` crashed ingest and blocked every file after it, on every rerun."""
    import json
    import os

    from flybench.cli import main

    root = tmp_path / "results"
    root.mkdir()
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root, MACHINE)
    far = results_json(root, {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1]}, commit="a" * 40)
    far.write_text(json.dumps({**json.loads(far.read_text()), "date": 1e300}))
    results_json(root, {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1]}, commit="b" * 40)
    os.symlink(tmp_path / "nowhere.json", root / MACHINE / "cccccccc-existing-py.json")
    loop = root / MACHINE / "dddddddd-existing-py.json"
    os.symlink(loop, loop)
    db = tmp_path / "db.duckdb"
    for _ in range(2):  # and again: the good file stays stored, the bad ones are named each time
        assert main(["ingest", str(root), "--db", str(db), "--subject", "toy"]) == 2
        captured = capsys.readouterr()
        out = captured.out + captured.err
        assert "date 1e+300 is not a time between 2000 and 2100" in out
        assert "cccccccc-existing-py.json: FileNotFoundError" in out and "Too many levels of symbolic links" in out
        assert "Traceback" not in out
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT list(DISTINCT commit_hash) FROM results").fetchone()[0] == ["b" * 40]


def test_impossible_times_are_kept_as_failed_with_the_value_in_the_reason(tmp_path: Path) -> None:
    """0, negative and 1e308 s were stored as ok, and compare read -0.2 ms as a -200% improvement."""
    from flybench.store.asv_files import ResultsFile, impossible_times

    root = tmp_path / "results"
    root.mkdir()
    times = {"b.T.time_zero": 0.0, "b.T.time_negative": -2e-4, "b.T.time_huge": 1e308, "b.T.time_fine": 1e-3}
    benchmarks_json(root, {name: {} for name in times})
    machine_json(root, MACHINE)
    results_json(root, {name: [[t], [], "1", 1767268800000, 0.1] for name, t in times.items()})
    db = tmp_path / "db.duckdb"
    assert ingest(root, db, "toy").ok
    with duckdb.connect(str(db), read_only=True) as conn:
        rows = dict(conn.execute("SELECT benchmark, status || ': ' || coalesce(reason, '') FROM results").fetchall())
    assert rows["b.T.time_fine"] == "ok: "
    assert rows["b.T.time_negative"] == ("failed: impossible time -0.0002 s (a call takes more than 0 s and less "
                                         "than 3600 s)")
    assert rows["b.T.time_zero"].startswith("failed: impossible time 0.0 s")
    assert rows["b.T.time_huge"].startswith("failed: impossible time 1e+308 s")
    # asv's own loader's rows (files the direct reader leaves to it) go through the same rule
    parsed = impossible_times(ResultsFile("c", None, {}, [{"unit": "seconds", "status": "ok", "value": -1.0},
                                                          {"unit": "TFLOP/s", "status": "ok", "value": 0.0}]))
    assert [r["status"] for r in parsed.rows] == ["failed", "ok"]


def test_a_huge_parameter_grid_is_refused_before_it_is_expanded(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A 260 KB file naming a 250^3 grid (its result null: all failed) ran for minutes and passed 1.7 GB."""
    import itertools

    product = itertools.product

    def refusing(*iterables, **kwargs):  # what expanding the grid would call: it must never be asked to
        lists = [list(values) for values in iterables]
        assert math.prod(map(len, lists)) <= 100_000, "the grid was expanded"
        return product(*lists, **kwargs)

    monkeypatch.setattr(itertools, "product", refusing)
    root = tmp_path / "results"
    root.mkdir()
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root, MACHINE)
    grid = [[repr(i) for i in range(250)]] * 3
    results_json(root, {"b.T.time_plain": [None, grid, "1", 1767268800000, 0.1]})
    report = ingest(root, tmp_path / "db.duckdb", "toy")  # a fraction of a second; it took minutes when expanded
    [error] = report.errors
    assert "its parameter grid has 15,625,000 combinations, more than the 100,000" in error.message
