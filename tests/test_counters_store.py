"""Counter records in the store: ingested beside results, replaced when they change, kept unless pruned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from flybench.counters.record import CounterRecord, append
from flybench.store import ingest

from tests.fixtures.asv_files import COMMIT, MACHINE, benchmarks_json, machine_json, results_json

H200_RESULTS = Path(__file__).parents[1] / "results" / "flybench"
CASE = ("moe", "quick", "mixtral8x7b-t16", "triton", "bf16")


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "results"
    tree.mkdir()
    benchmarks_json(tree, {"moe.Quick.track_time": {"param_names": ["case", "provider", "dtype"],
                                                     "params": [["'mixtral8x7b-t16'"], ["'triton'"], ["'bf16'"]]}})
    machine_json(tree)
    results_json(tree, {"moe.Quick.track_time": [[1e-3], [["'mixtral8x7b-t16'"], ["'triton'"], ["'bf16'"]]]})
    return tree


def _record(read_bytes: float, status: str = "ok") -> CounterRecord:
    return CounterRecord("run1", *CASE, status=status, tool="ncu", tool_version="2025.3.1.0", arch="sm_90",
                         counters={"dram__bytes_read.sum": ["byte", "sum", False],
                                   "smsp__inst_executed.sum": ["inst", "sum", True]},
                         kernels=[{"name": "k", "duration_s": 1e-6, "values": {"dram__bytes_read.sum": read_bytes}}],
                         total={"dram__bytes_read.sum": read_bytes, "smsp__inst_executed.sum": 1000.0},
                         derived={"hbm_read_bytes": read_bytes, "l2_hit_rate": 0.5},
                         commit=COMMIT, env="existing-py", machine=MACHINE)


def _sidecar(tree: Path) -> Path:
    return tree / MACHINE / f"{COMMIT[:8]}-existing-py.counters.jsonl"


def _values(db: Path) -> dict[str, tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        rows = conn.execute("SELECT counter, kind, value, fixed, benchmark, params FROM counters").fetchall()
    return {name: (kind, value, fixed, benchmark, params) for name, kind, value, fixed, benchmark, params in rows}


def test_counters_land_keyed_like_the_results_they_describe(tmp_path):
    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    append(_sidecar(tree), _record(5e8))
    report = ingest(tree, db, "flybench")
    assert report.ok and report.counter_rows == 4
    values = _values(db)
    kind, value, fixed, benchmark, params = values["dram__bytes_read.sum"]
    assert (kind, value, fixed) == ("counter", 5e8, False)
    assert values["smsp__inst_executed.sum"][2] is True  # instruction counts are watched for any change
    assert values["hbm_read_bytes"][:3] == ("derived", 5e8, True)
    assert values["l2_hit_rate"][2] is False
    with duckdb.connect(str(db), read_only=True) as conn:
        joined = conn.execute("SELECT count(*) FROM counters c JOIN results r USING (subject, machine, commit_hash, "
                              "env_name, benchmark, params)").fetchone()[0]
        case = conn.execute("SELECT status, tool, tool_version, counter_names FROM counter_cases").fetchone()
    assert joined == 4
    assert case == ("ok", "ncu", "2025.3.1.0", ["dram__bytes_read.sum", "smsp__inst_executed.sum"])


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_replaces_its_rows(tmp_path):
    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    append(_sidecar(tree), _record(5e8))
    ingest(tree, db, "flybench")
    assert ingest(tree, db, "flybench").counter_rows == 0
    append(_sidecar(tree), _record(7e8))  # the case profiled again: its later record wins
    assert ingest(tree, db, "flybench").counter_rows == 4
    assert _values(db)["dram__bytes_read.sum"][1] == 7e8


def test_a_vanished_counter_file_keeps_its_rows_unless_pruned(tmp_path):
    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    append(_sidecar(tree), _record(5e8))
    ingest(tree, db, "flybench")
    _sidecar(tree).unlink()
    report = ingest(tree, db, "flybench")
    assert report.kept and _values(db)
    report = ingest(tree, db, "flybench", prune=True)
    assert report.removed == [f"{MACHINE}/{_sidecar(tree).name}"] and not _values(db)


def test_a_backup_copy_of_a_machine_folder_stores_neither_its_results_nor_its_counters(tmp_path):
    """The copy's results files are refused (their commit and environment are held by the original); its
    counter files go with them, instead of doubling the counter rows."""
    import shutil

    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    append(_sidecar(tree), _record(5e8))
    assert ingest(tree, db, "flybench").counter_rows == 4
    shutil.copytree(tree / MACHINE, tree / f"{MACHINE}-backup")
    report = ingest(tree, db, "flybench")
    assert report.counter_rows == 0 and len(_values(db)) == 4
    refused = {Path(e.path).name: e.message for e in report.errors}
    assert "is already stored from" in refused[f"{COMMIT[:8]}-existing-py.json"]
    assert refused[_sidecar(tree).name] == "not stored: the results file it belongs to was refused"


def test_a_torn_line_is_a_warning_and_the_good_lines_land(tmp_path):
    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    append(_sidecar(tree), _record(5e8))
    with _sidecar(tree).open("a") as handle:
        handle.write('{"version": 1, "torn')
    report = ingest(tree, db, "flybench")
    assert report.ok and report.counter_rows == 4
    assert any("line 2 skipped" in w for w in report.warnings)


@pytest.mark.skipif(not any(H200_RESULTS.glob("*/*.counters.jsonl")), reason="no committed counter pass")
def test_the_committed_h200_counter_pass_ingests(tmp_path):
    tree = tmp_path / "results"
    shutil.copytree(H200_RESULTS, tree)
    db = tmp_path / "db.duckdb"
    report = ingest(tree, db, "flybench")
    assert report.ok and report.counter_rows > 0
    with duckdb.connect(str(db), read_only=True) as conn:
        tools = conn.execute("SELECT DISTINCT tool, status FROM counter_cases").fetchall()
        orphans = conn.execute("SELECT count(*) FROM counter_cases c ANTI JOIN results r USING (subject, machine, "
                               "commit_hash, env_name, benchmark, params)").fetchone()[0]
    assert tools == [("ncu", "ok")] and orphans == 0


def test_compare_shows_what_the_counters_say_beside_the_timing_verdict(tmp_path):
    from flybench.regress.compare import compare
    from flybench.regress.report import context_text

    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    head = "b" * 40
    results_json(tree, {"moe.Quick.track_time": [[1.11e-3], [["'mixtral8x7b-t16'"], ["'triton'"], ["'bf16'"]]]},
                 commit=head)
    append(_sidecar(tree), _record(1.0e9))
    slower = _record(1.38e9)
    slower.commit, slower.derived = head, {**slower.derived, "l2_hit_rate": 0.501}  # moved 0.2%: not shown
    append(tree / MACHINE / f"{head[:8]}-existing-py.counters.jsonl", slower)
    ingest(tree, db, "flybench")
    [case] = compare(db, MACHINE, COMMIT[:8], head[:8], subject="flybench").cases
    assert case.counters["hbm_read_bytes"] == (1.0e9, 1.38e9)
    assert context_text(case) == "DRAM read 1.00 GB -> 1.38 GB"


def test_watched_counters_that_change_are_listed_and_dram_jitter_is_not(tmp_path):
    from flybench.regress.counters import counter_changes

    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    head, later = "b" * 40, "c" * 40
    for commit, date in ((head, 1767355200000), (later, 1767441600000)):
        path = results_json(tree, {"moe.Quick.track_time": [[1e-3], [["'mixtral8x7b-t16'"], ["'triton'"], ["'bf16'"]]]},
                            commit=commit)
        path.write_text(path.read_text().replace("1767268800000", str(date)))
    append(_sidecar(tree), _record(1.0e9))
    jitter = _record(1.005e9)  # DRAM bytes 0.5% apart: the same code
    jitter.commit = head
    append(tree / MACHINE / f"{head[:8]}-existing-py.counters.jsonl", jitter)
    changed = _record(1.3e9)
    changed.commit, changed.total = later, {**changed.total, "smsp__inst_executed.sum": 1200.0}
    append(tree / MACHINE / f"{later[:8]}-existing-py.counters.jsonl", changed)
    ingest(tree, db, "flybench")
    found = {(r.params["counter"], r.step.last_good[:1], r.step.first_bad[:1]): r for r in counter_changes(db)}
    assert set(found) == {("smsp__inst_executed.sum", "b", "c"), ("hbm_read_bytes", "b", "c")}
    instructions = found["smsp__inst_executed.sum", "b", "c"]
    assert (instructions.step.before, instructions.step.after, instructions.step.worse) == (1000.0, 1200.0, True)
    assert instructions.series == "moe.Quick.track_time(mixtral8x7b-t16, triton, bf16, smsp__inst_executed.sum)"
    assert counter_changes(db, benchmark="attention.*") == []


def store_with_a_counter_change(tmp_path: Path) -> Path:
    """A store of two commits of one case whose instruction count grew from 1,000 to 1,500 at the second."""
    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    head = "b" * 40
    path = results_json(tree, {"moe.Quick.track_time": [[1e-3], [["'mixtral8x7b-t16'"], ["'triton'"], ["'bf16'"]]]},
                        commit=head)
    path.write_text(path.read_text().replace("1767268800000", "1767355200000"))
    append(_sidecar(tree), _record(1.0e9))
    more = _record(1.0e9)
    more.commit, more.total = head, {**more.total, "smsp__inst_executed.sum": 1500.0}
    append(tree / MACHINE / f"{head[:8]}-existing-py.counters.jsonl", more)
    assert ingest(tree, db, "flybench").ok
    return db


def test_flybench_regressions_lists_a_watched_counter_change(tmp_path, capsys):
    from flybench.cli import main

    db = store_with_a_counter_change(tmp_path)
    code = main(["regressions", "--db", str(db), "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    assert code == 1
    [change] = [r for r in found if r["params"].get("counter") == "smsp__inst_executed.sum"]
    assert (change["step"]["before"], change["step"]["after"]) == (1000.0, 1500.0)


def test_a_counter_file_turned_binary_keeps_the_rows_stored_from_it(tmp_path):
    """The record reader skips a line that is not UTF-8 as torn; a whole file of such bytes must not replace the
    counter rows stored from it with none."""
    tree, db = _tree(tmp_path), tmp_path / "db.duckdb"
    append(_sidecar(tree), _record(5e8))
    assert ingest(tree, db, "flybench").counter_rows == 4
    _sidecar(tree).write_bytes(b"\x7fELF\x02\x01\xff\xfe" * 64)
    report = ingest(tree, db, "flybench")
    (error,) = report.errors
    assert error.path == str(_sidecar(tree)) and "not UTF-8 text (byte 6 is 0xff), so no record file" in error.message
    assert _values(db)["dram__bytes_read.sum"][1] == 5e8
