"""Faults while the store is written (a file-size limit) and a machine whose files are all refused."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from flybench.cli import main
from flybench.store import ingest
from tests.fixtures.asv_files import MACHINE, benchmarks_json, machine_json, results_json

COMMITS = ("a" * 40, "b" * 40, "c" * 40)


def tree_of(root: Path, machine: str = MACHINE, commits: tuple[str, ...] = COMMITS) -> Path:
    root.mkdir(exist_ok=True)
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root, machine)
    for i, commit in enumerate(commits):
        results_json(root, {"b.T.time_plain": [[1e-3 * (i + 1)], [], "1", 1767268800000, 0.1]}, commit=commit,
                     machine=machine)
    return root


def query(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def _ingest_under_a_file_size_limit(root: Path, db: Path, limit: int) -> subprocess.CompletedProcess[str]:
    """`flybench ingest` in a process whose files may not grow past `limit` bytes (`ulimit -f`): each write past
    it fails with EFBIG in the kernel (Python ignores the SIGXFSZ that would otherwise end the process)."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-m", "flybench", "ingest", str(root), "--db", str(db), "--subject", "toy"],
                          preexec_fn=limited, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def test_a_file_size_limit_mid_ingest_is_advice_with_exit_2_and_the_next_run_stores_the_rest(
        tmp_path: Path, capsys) -> None:
    """EFBIG (a file-size limit) gave a traceback, or each file reported as failed; it now ends the ingest as a
    full disk does (flybench.store.db), and nothing stored before is lost."""
    root, db = tree_of(tmp_path / "results"), tmp_path / "store.duckdb"
    newest = root / MACHINE / f"{COMMITS[-1][:8]}-existing-py.json"
    aside = Path(shutil.move(newest, tmp_path / newest.name))
    assert main(["ingest", str(root), "--db", str(db), "--subject", "toy"]) == 0
    capsys.readouterr()
    shutil.move(aside, newest)
    stored = query(db, "SELECT commit_hash, value FROM results ORDER BY ALL")
    done = _ingest_under_a_file_size_limit(root, db, limit=4096)  # the store's log cannot grow past its start
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert (f"flybench ingest: error: {db} reached the largest file allowed here (" in done.stderr
            and "File too large" in done.stderr)
    assert ("results files stored before it are kept, nothing was stored for the files not yet written. Raise the "
            "limit (`ulimit -f`) or pass a --db on a file system that takes larger files, and run the same command "
            "again: files already stored are skipped") in done.stderr
    assert f"{newest.name}: TransactionException" not in done.stdout + done.stderr  # not the file's own failure
    assert set(stored) <= set(query(db, "SELECT commit_hash, value FROM results"))
    assert main(["ingest", str(root), "--db", str(db), "--subject", "toy"]) == 0
    fresh = tmp_path / "fresh.duckdb"
    assert main(["ingest", str(root), "--db", str(fresh), "--subject", "toy"]) == 0
    for sql in ("SELECT * EXCLUDE (ingested_at) FROM ingested_files ORDER BY ALL", "SELECT * FROM results ORDER BY ALL",
                "SELECT * FROM series_heads ORDER BY ALL"):
        assert query(db, sql) == query(fresh, sql)


def test_a_machine_json_naming_another_machine_names_the_users_files_and_leaves_no_machine_row(
        tmp_path: Path, capsys) -> None:
    """The message named asv's temporary copy (/tmp/tmpXXXX/...), and an empty machine row stayed behind."""
    root, db = tree_of(tmp_path / "results"), tmp_path / "store.duckdb"
    data = json.loads((root / MACHINE / "machine.json").read_text())
    (root / MACHINE / "machine.json").write_text(json.dumps({**data, "machine": "other"}))
    assert main(["ingest", str(root), "--db", str(db), "--subject", "toy"]) == 2
    err = capsys.readouterr().err
    for commit in COMMITS:
        path = root / MACHINE / f"{commit[:8]}-existing-py.json"
        assert (f"error: {path}: its params.machine is {MACHINE!r}, but the machine.json of its folder {MACHINE!r} "
                "names the machine 'other': asv keeps each machine's results in a folder of its own, named after "
                "it. Correct the name that is wrong") in err
    assert "/tmp/tmp" not in err and "Traceback" not in err
    assert query(db, "SELECT name FROM machines") == []


@pytest.mark.parametrize("fault", ["not results", "refused as it is stored"])
def test_a_machine_whose_files_are_all_refused_leaves_no_row_until_one_lands(tmp_path: Path, fault: str) -> None:
    root, db = tree_of(tmp_path / "results"), tmp_path / "store.duckdb"
    assert ingest(root, db, "toy").ok
    machine_json(root, "newbox")
    if fault == "not results":
        bad = results_json(root, {}, machine="newbox", raw="[]")
    else:  # a count beyond the INTEGER column: only writing the row finds out, inside the file's transaction
        bad = results_json(root, {"b.T.time_plain": [[2e-3], [], "1", 1767268800000, 0.1, [2**40]]},
                           machine="newbox", columns=["result", "params", "version", "started_at", "duration",
                                                      "stats_number"])
    report = ingest(root, db, "toy")
    assert [e.path for e in report.errors] == [str(bad)], report.summary()
    assert query(db, "SELECT name FROM machines") == [(MACHINE,)]
    bad.unlink()
    results_json(root, {"b.T.time_plain": [[2e-3], [], "1", 1767268800000, 0.1]}, commit="d" * 40, machine="newbox")
    assert ingest(root, db, "toy").ok
    assert query(db, "SELECT name FROM machines ORDER BY 1") == [(MACHINE,), ("newbox",)]
