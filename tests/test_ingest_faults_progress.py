"""A long ingest says how far it got, and `--no-rescan` leaves the regression rescan to a later command."""

from __future__ import annotations

import io
from pathlib import Path

import duckdb

from flybench.cli import build_parser, main
from flybench.cli.ingest import DEFERRED, Progress
from flybench.store import ingest
from tests.fixtures.asv_files import benchmarks_json, machine_json, results_json


class Clock:
    """A clock the test moves by hand: what is printed depends on it, never on how fast the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_prints_files_read_at_most_about_once_a_second_and_the_last_count() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress(out, clock)
    for done in range(1, 241):
        clock.now = done / 8  # 8 files a second, 30 seconds in all
        progress(done, 240)
    assert out.getvalue().splitlines() == [f"ingest: {done} / 240 files read" for done in [*range(1, 240, 8), 240]]
    assert progress.shown


def test_a_small_ingest_stays_quiet() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress(out, clock)
    for done in range(1, Progress.MIN_FILES + 1):
        clock.now += 5
        progress(done, Progress.MIN_FILES)
    assert out.getvalue() == "" and not progress.shown


def tree_of(root: Path, files: int) -> Path:
    root.mkdir()
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root)
    for i in range(files):
        results_json(root, {"b.T.time_plain": [[1e-3 * (1 + i % 2)], [], "1", 1767268800000, 0.1]},
                     commit=f"{i:08x}" + "0" * 32)
    return root


def test_ingest_tells_progress_each_file_read(tmp_path: Path) -> None:
    root = tree_of(tmp_path / "results", 3)
    calls: list[tuple[int, int]] = []
    assert ingest(root, tmp_path / "db.duckdb", "toy", progress=lambda done, total: calls.append((done, total))).ok
    assert calls == [(1, 3), (2, 3), (3, 3)]
    calls.clear()
    assert ingest(root, tmp_path / "db.duckdb", "toy", progress=lambda *counts: calls.append(counts)).ok
    assert calls == []  # nothing to read


def scans(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute("SELECT count(*) FROM regression_scans").fetchone()[0]


def test_no_rescan_defers_the_rescan_and_says_who_does_it(tmp_path: Path, capsys) -> None:
    root, db = tree_of(tmp_path / "results", 3), tmp_path / "db.duckdb"
    assert main(["ingest", str(root), "--db", str(db), "--subject", "toy", "--no-rescan"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == DEFERRED == (
        "regressions: rescan deferred (--no-rescan): the next `flybench ingest` computes and stores it; until then "
        "`flybench regressions` computes it each time it runs")
    assert scans(db) == 0
    assert main(["ingest", str(root), "--db", str(db), "--subject", "toy"]) == 0  # nothing new to read
    assert "step detection rerun and stored for 1 machine(s): box (toy)" in capsys.readouterr().out
    assert scans(db) == 1


def test_ingest_help_names_progress_and_no_rescan() -> None:
    text = " ".join(build_parser(load=["ingest"])._subparsers._group_actions[0].choices["ingest"].format_help().split())
    assert "--no-rescan skip the end-of-ingest regression rescan" in text
    assert "Reading more than 200 files prints the files read so far on stderr, about once a second" in text
