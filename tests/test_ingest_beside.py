"""Record files with no results file beside them are refused by `flybench ingest`, named, and store no row.

A copy of a machine's counter and role-split files under another commit's name once stored every row again
(counters 1,053 -> 1,809, role splits 6 -> 12), exit 0, no word. The files here are the committed dev-h200
results (a counters file and a role-split file with their results files).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from flybench.cli import main
from flybench.store.ingest import ingest

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "flybench"
COUNTED = "53056f0b-existing-py_opt_torch_.venv_bin_python3"
SPLIT = "c956a724-existing-py_opt_torch_.venv_bin_python3"
COPY = "0123abcd-existing-py_opt_torch_.venv_bin_python3"
"""The name the copies are given: a commit no results file of the tree is of."""


def _counts(db: Path) -> dict[str, int]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("results", "counter_cases", "counters", "role_splits")}
    finally:
        conn.close()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The committed results of COUNTED and SPLIT with their record files, machine.json and benchmarks.json."""
    if not (COMMITTED / "dev-h200" / f"{COUNTED}.counters.jsonl").is_file():
        pytest.skip("the committed dev-h200 results are not in this checkout")
    root = tmp_path / "results"
    (root / "dev-h200").mkdir(parents=True)
    shutil.copyfile(COMMITTED / "benchmarks.json", root / "benchmarks.json")
    shutil.copyfile(COMMITTED / "dev-h200" / "machine.json", root / "dev-h200" / "machine.json")
    for stem in (COUNTED, SPLIT):
        for path in (COMMITTED / "dev-h200").glob(f"{stem}.*"):
            shutil.copyfile(path, root / "dev-h200" / path.name)
    return root


def test_record_files_copied_under_another_commits_name_store_no_row(tree: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    assert ingest(tree, db, "flybench").ok
    before = _counts(db)
    assert before["counters"] > 0 and before["role_splits"] > 0
    copies = [tree / "dev-h200" / f"{COPY}.counters.jsonl", tree / "dev-h200" / f"{COPY}.roles.jsonl"]
    shutil.copyfile(tree / "dev-h200" / f"{COUNTED}.counters.jsonl", copies[0])
    shutil.copyfile(tree / "dev-h200" / f"{SPLIT}.roles.jsonl", copies[1])
    assert main(["ingest", str(tree), "--db", str(db), "--subject", "flybench", "--no-rescan"]) == 2
    err = capsys.readouterr().err
    assert _counts(db) == before  # no row stored twice
    for copy in copies:
        assert f"{copy}: not stored: no results file {COPY}.json beside it" in err
    assert "Traceback" not in err


def test_a_fresh_store_refuses_the_copy_and_keeps_the_rest(tree: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole.duckdb"
    assert ingest(tree, whole, "flybench").ok
    shutil.copyfile(tree / "dev-h200" / f"{COUNTED}.counters.jsonl", tree / "dev-h200" / f"{COPY}.counters.jsonl")
    db = tmp_path / "store.duckdb"
    report = ingest(tree, db, "flybench")
    assert not report.ok and [Path(e.path).name for e in report.errors] == [f"{COPY}.counters.jsonl"]
    assert _counts(db) == _counts(whole)
