"""Case and counter records that cannot be used or read: a per-file error naming the file, never a traceback,
and nothing stored before is lost."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from flybench.cli import main
from tests.fixtures.asv_files import MACHINE, benchmarks_json, machine_json, results_json

SUITE = "gemm.Quick.track_time"
GRID = [["'c1'"], ["'flydsl'", "'torch'"], ["'bf16'"]]
FIRST, SECOND = "a" * 40, "b" * 40
HUGE = int("9" * 400)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """One machine, two commits of a case suite (two cases each), each results file with its case records."""
    root = tmp_path / "results"
    root.mkdir()
    benchmarks_json(root, {SUITE: {"param_names": ["case", "provider", "dtype"], "params": GRID}})
    machine_json(root)
    for commit in (FIRST, SECOND):
        results_json(root, {SUITE: [[1e-3, 2e-3], GRID, "1", 1767268800000, 0.1]}, commit=commit)
        write_records(cases_file(root, commit), record())
    return root


def record(**fields: Any) -> dict[str, Any]:
    return {"version": 2, "run_id": "r1", "workload": "gemm", "shape_set": "quick", "case": "c1",
            "provider": "flydsl", "dtype": "bf16", "status": "ok", "flops": 2e9, "bytes": 1e6, "floor_s": 1e-6,
            "median_s": 1e-3, "samples_s": [1e-3] * 5, **fields}


def cases_file(root: Path, commit: str) -> Path:
    return root / MACHINE / f"{commit[:8]}-existing-py.cases.jsonl"


def counters_file(root: Path, commit: str) -> Path:
    return root / MACHINE / f"{commit[:8]}-existing-py.counters.jsonl"


def write_records(path: Path, *records: dict[str, Any]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def stored(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute("SELECT commit_hash, params->>'provider', value, status, flops, tflops "
                            "FROM results ORDER BY ALL").fetchall()


def run(capsys: pytest.CaptureFixture[str], root: Path, db: Path) -> tuple[int, str]:
    code = main(["ingest", str(root), "--db", str(db), "--subject", "toy"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("fields, field", [
    ({"flops": HUGE}, "'flops'"),
    ({"median_s": HUGE}, "'median_s'"),
    ({"tolerance": HUGE}, "'tolerance'"),
    ({"samples_s": [1e-3, HUGE]}, "'samples_s[1]'"),
    ({"errors": {"out": HUGE}}, "'errors.out'"),
])
def test_a_400_digit_integer_in_a_case_record_refuses_that_file_naming_case_and_field(
        tree: Path, tmp_path: Path, capsys, fields: dict[str, Any], field: str) -> None:
    """The battery's 400-digit `flops` gave a traceback and exit 1; a `tolerance` was stored as infinity."""
    db = tmp_path / "db.duckdb"
    code, _ = run(capsys, tree, db)
    assert code == 0
    before = stored(db)
    bad = cases_file(tree, SECOND)
    write_records(bad, record(), record(run_id="r2", **fields))
    code, out = run(capsys, tree, db)
    assert code == 2 and "Traceback" not in out
    assert (f"error: {bad}: the record of case gemm / quick / c1 / flydsl / bf16 (run 'r2') holds in {field} an "
            "integer of 400 digits, beyond any number flybench stores") in out
    assert "correct or delete that record, then ingest again" in out
    assert f"the case records of {SECOND[:8]}-existing-py.json cannot be read, so it was not loaded either" in out
    assert stored(db) == before  # the file's earlier rows stay, the other file is untouched


def _unreadable(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Reading `path` fails as a file of mode 000 does for a user other than root (the tests run as root)."""
    refused = path.resolve()
    read_bytes, open_ = Path.read_bytes, Path.open

    def deny(self: Path) -> None:
        if self.resolve() == refused:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", lambda self: deny(self) or read_bytes(self))
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: deny(self) or open_(self, *a, **k))


def test_an_unreadable_case_record_file_is_named_with_advice_and_nothing_is_removed(
        tree: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    db = tmp_path / "db.duckdb"
    assert run(capsys, tree, db)[0] == 0
    before = stored(db)
    bad = cases_file(tree, SECOND)
    write_records(bad, record(), record(run_id="r2"))  # changed since: its fingerprint must be read again
    _unreadable(monkeypatch, bad)
    for prune in ([], ["--prune"]):
        code = main(["ingest", str(tree), "--db", str(db), "--subject", "toy", *prune])
        captured = capsys.readouterr()
        out = captured.out + captured.err
        assert code == 2 and "Traceback" not in out
        assert f"error: {bad}: PermissionError" in out and "make it readable (chmod u+r) and ingest again" in out
        assert stored(db) == before
    monkeypatch.undo()
    assert run(capsys, tree, db)[0] == 0  # readable again: it loads


def test_a_folder_named_like_a_case_record_file_is_reported_not_passed_over(tree: Path, tmp_path: Path,
                                                                            capsys) -> None:
    """Before, a folder there was taken as no records at all, and the results loaded without them."""
    db = tmp_path / "db.duckdb"
    bad = cases_file(tree, SECOND)
    bad.unlink()
    bad.mkdir()
    code, out = run(capsys, tree, db)
    assert code == 2 and "Traceback" not in out
    assert f"error: {bad}: IsADirectoryError" in out and "move it aside and ingest again" in out
    assert {row[0] for row in stored(db)} == {FIRST}


def _counter_record(value: float) -> dict[str, Any]:
    return {"version": 1, "run_id": "r1", "workload": "gemm", "shape_set": "quick", "case": "c1",
            "provider": "flydsl", "dtype": "bf16", "status": "ok", "tool": "ncu",
            "counters": {"dram__bytes_read.sum": ["byte", "sum", False]}, "total": {"dram__bytes_read.sum": value}}


def _counters(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute("SELECT source_file, counter, value FROM counters ORDER BY ALL").fetchall()


def test_an_unreadable_counter_file_is_an_error_with_advice_and_its_rows_stay(
        tree: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    db = tmp_path / "db.duckdb"
    counters = counters_file(tree, SECOND)
    write_records(counters, _counter_record(5e8))
    assert run(capsys, tree, db)[0] == 0
    before = _counters(db)
    assert [value for *_, value in before] == [5e8]
    write_records(counters, _counter_record(5e8), _counter_record(6e8))
    _unreadable(monkeypatch, counters)
    code, out = run(capsys, tree, db)
    assert code == 2 and "Traceback" not in out
    assert f"error: {counters}: PermissionError" in out and "make it readable (chmod u+r)" in out
    assert "its counter rows were not loaded" in out
    assert _counters(db) == before


def test_a_new_counter_file_that_cannot_be_read_is_an_error_too(tree: Path, tmp_path: Path, capsys,
                                                               monkeypatch) -> None:
    db = tmp_path / "db.duckdb"
    counters = counters_file(tree, SECOND)
    write_records(counters, _counter_record(5e8))
    _unreadable(monkeypatch, counters)
    code, out = run(capsys, tree, db)
    assert code == 2 and f"error: {counters}: PermissionError" in out and "Traceback" not in out
    assert {row[0] for row in stored(db)} == {FIRST, SECOND}  # the results themselves were readable


def test_a_changed_results_file_that_cannot_be_read_is_named_with_advice(tree: Path, tmp_path: Path, capsys,
                                                                        monkeypatch) -> None:
    """Its changed size sent the planning step to hash it, outside any error handling: a traceback."""
    db = tmp_path / "db.duckdb"
    assert run(capsys, tree, db)[0] == 0
    before = stored(db)
    bad = results_json(tree, {SUITE: [[1e-3, 3e-3], GRID, "1", 1767268800000, 0.25]}, commit=SECOND)
    _unreadable(monkeypatch, bad)
    code, out = run(capsys, tree, db)
    assert code == 2 and "Traceback" not in out
    assert f"error: {bad}: PermissionError" in out and "make it readable (chmod u+r) and ingest again" in out
    assert stored(db) == before


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
@pytest.mark.parametrize("name", ["results", "cases", "counters", "machine.json", "benchmarks.json"])
def test_a_fifo_or_a_device_named_like_a_file_of_the_tree_is_reported_not_read(kind: str, name: str, tree: Path,
                                                                               tmp_path: Path, capsys) -> None:
    """A FIFO blocked ingest until it was killed, and /dev/zero never ends: only regular files are read."""
    import os
    import threading

    db = tmp_path / "db.duckdb"
    assert run(capsys, tree, db)[0] == 0
    machine = next(p.parent for p in tree.glob("*/machine.json"))
    odd = {"results": machine / "eeeeeeee-existing-py.json", "cases": cases_file(tree, SECOND),
           "counters": machine / "eeeeeeee-existing-py.counters.jsonl", "machine.json": machine / "machine.json",
           "benchmarks.json": tree / "benchmarks.json"}[name]
    odd.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to("/dev/zero")
    answer: list[tuple[int, str]] = []
    reader = threading.Thread(target=lambda: answer.append(run(capsys, tree, db)), daemon=True)
    reader.start()
    reader.join(timeout=600)  # generous for a loaded machine; a hang never ends
    if reader.is_alive():  # let the blocked open return, so that the test process can end
        with open(odd, "wb", buffering=0) if kind == "fifo" else open(os.devnull, "wb"):
            pass
        pytest.fail(f"ingest still reading {odd} after 600 s")
    code, out = answer[0]
    said = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert code == 2 and "Traceback" not in out
    assert f"error: {odd}: it is {said}, not a file asv or flybench writes, so it was not read" in out
    assert {row[0] for row in stored(db)} >= ({FIRST} if name == "cases" else {FIRST, SECOND})
