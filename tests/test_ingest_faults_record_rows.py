"""A counter or role-split file read in part, or holding no record at all, never takes stored rows with it.

An emptied counter file (a full disk, a damaged copy) took 756 of the tree's
1,053 counter rows with exit 0 and no word; a role file whose one line was
torn took every role split the same way. A file that holds no record is now
refused, its rows kept; a file read in part replaces only the rows of the
cases its good lines hold.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from flybench.store import ingest

ROOT = Path(__file__).resolve().parents[1]
COUNTERS = "dev-h200/53056f0b-existing-py_opt_torch_.venv_bin_python3.counters.jsonl"
ROLES = "dev-h200/c956a724-existing-py_opt_torch_.venv_bin_python3.roles.jsonl"


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, Path]:
    """The committed H200 tree (counter and role files beside its results), ingested: (tree, store)."""
    tree = tmp_path / "flybench"
    shutil.copytree(ROOT / "results" / "flybench", tree)
    db = tmp_path / "store.duckdb"
    assert ingest(tree, db, "flybench").ok
    return tree, db


def rows(db: Path, table: str, relpath: str) -> list[tuple]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute(f"SELECT benchmark, params::VARCHAR FROM {table} WHERE source_file = ? ORDER BY ALL",
                            [relpath]).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize(("relpath", "table", "content"), [
    (COUNTERS, "counters", ""), (COUNTERS, "counter_cases", "\n\n"), (ROLES, "role_splits", ""),
    (ROLES, "role_splits", "{torn\n"), (COUNTERS, "counter_cases", '{"a": 1}\n'),
])
def test_a_record_file_that_holds_no_record_is_refused_and_its_rows_kept(stored, relpath: str, table: str,
                                                                         content: str) -> None:
    tree, db = stored
    before = rows(db, table, relpath)
    assert before
    (tree / relpath).write_text(content)
    report = ingest(tree, db, "flybench")
    (error,) = report.errors
    assert error.path == str(tree / relpath) and "holds no" in error.message and "stored from it is kept" in error.message
    assert rows(db, table, relpath) == before
    assert ingest(tree, db, "flybench").errors == report.errors  # said again each time, until the file is restored


def test_a_record_file_read_in_part_replaces_only_the_rows_of_its_good_lines(stored) -> None:
    tree, db = stored
    cases, counters = rows(db, "counter_cases", COUNTERS), rows(db, "counters", COUNTERS)
    lines = (tree / COUNTERS).read_text().splitlines()
    assert len(set(cases)) == len(cases) == len(lines) > 2
    (tree / COUNTERS).write_text("\n".join([lines[0], "{torn", *lines[2:-1], lines[-1][:20]]) + "\n")
    report = ingest(tree, db, "flybench")
    assert report.ok
    assert any("line 2 skipped" in w for w in report.warnings)
    assert any("rows of cases no good line holds are kept" in w for w in report.warnings)
    assert rows(db, "counter_cases", COUNTERS) == cases and rows(db, "counters", COUNTERS) == counters
    (tree / COUNTERS).write_text("\n".join(lines[:3]) + "\n")  # read whole, the file is the truth again
    assert ingest(tree, db, "flybench").ok
    assert len(rows(db, "counter_cases", COUNTERS)) == 3


@pytest.mark.parametrize("content", ["", "{torn\n"])
def test_case_records_that_hold_no_record_keep_the_results_as_stored(stored, content: str) -> None:
    """Emptied, the case records of a results file were passed over and its 298 rows stored again without their
    contracts and failure reasons (145 contracts and 3 reasons gone), exit 0."""
    tree, db = stored
    cases = "dev-h200/31f37507-existing-py_opt_torch_.venv_bin_python3.cases.jsonl"

    def described() -> list[tuple]:
        conn = duckdb.connect(str(db), read_only=True)
        try:
            return conn.execute("SELECT status, count(*), count(contract), count(reason) FROM results WHERE "
                                "source_file = ? GROUP BY ALL ORDER BY ALL",
                                [cases.replace(".cases.jsonl", ".json")]).fetchall()
        finally:
            conn.close()

    before = described()
    assert any(contracts for _, _, contracts, _ in before)
    (tree / cases).write_text(content)
    report = ingest(tree, db, "flybench")
    (error,) = report.errors
    assert error.path == str(tree / cases) and "holds no case record" in error.message
    assert described() == before
