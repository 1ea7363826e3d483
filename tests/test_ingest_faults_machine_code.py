"""A machine code file that ingest cannot read, in whole or in part, never takes the stored machine code with it.

The file is the truth only when it is read whole. A file of another format
(as a newer writer writes it), torn lines, an empty file, a FIFO, a link to
/dev/zero or a folder in its place: each is said, the ingest exits 2, and
every row stored before stays; the good lines of a file read in part are
stored over the rows of their own (commit, kernel, target).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.special_files import SAID, plant

from flybench.compile import machine_code
from flybench.store import ingest, queries

from test_machine_code_history import record, tree

ROOT = Path(__file__).resolve().parents[1]
COMMITS = [c * 40 for c in "abcdef"]


def stored(db: Path) -> dict[tuple[str, str, str], str]:
    frame = queries.machine_code(db, "flydsl")
    return {(h, k, a): c for h, k, a, c in zip(frame["hash"], frame["kernel"], frame["arch"], frame["code_hash"])}


@pytest.fixture
def store_of_six(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A results tree whose machine code file (six commits on two targets) is stored: (tree, store, its rows)."""
    lines = [json.dumps(record(commit, arch=arch)) for commit in COMMITS for arch in ("gfx942", "gfx950")]
    results, db = tree(tmp_path, lines), tmp_path / "store.duckdb"
    report = ingest(results, db)
    assert report.ok and report.machine_code_rows == 12
    return results, db, stored(db)


def flybench_ingest(results: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flybench", "ingest", str(results), "--db", str(db)],
                          capture_output=True, text=True, cwd=ROOT, check=False, timeout=600)


def test_a_file_of_a_newer_format_is_refused_and_the_stored_machine_code_kept(store_of_six) -> None:
    results, db, before = store_of_six
    newer = [json.dumps(record(commit, arch=arch, format=2)) for commit in COMMITS for arch in ("gfx942", "gfx950")]
    (results / machine_code.FILE).write_text("".join(line + "\n" for line in newer))
    done = flybench_ingest(results, db)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "format 2" in done.stderr
    assert "12 stored before kept" in done.stderr
    assert stored(db) == before


def test_a_file_read_in_part_replaces_only_the_rows_of_its_good_lines(store_of_six) -> None:
    results, db, before = store_of_six
    lines = [json.dumps(record(COMMITS[0], arch="gfx942", code_hash="d" * 64)), "{torn",
             json.dumps(record(COMMITS[1], arch="gfx942", format=2)),
             json.dumps(record("9" * 40, arch="gfx950", code_hash="e" * 64))]
    (results / machine_code.FILE).write_text("".join(line + "\n" for line in lines))
    report = ingest(results, db)
    assert not report.ok and report.machine_code_rows == 2 and report.machine_code_kept == 11
    assert {e.message.split(":")[0] for e in report.errors} == {"line 2 skipped", "line 3 skipped"}
    after = stored(db)
    assert after == {**before, (COMMITS[0], "flash_attn_generic:causal_m128", "gfx942"): "d" * 64,
                     ("9" * 40, "flash_attn_generic:causal_m128", "gfx950"): "e" * 64}
    # Read whole again, the file is the truth: what it no longer holds is gone.
    (results / machine_code.FILE).write_text(lines[0] + "\n")
    report = ingest(results, db)
    assert report.ok and report.machine_code_rows == 1 and report.machine_code_kept == 0
    assert stored(db) == {(COMMITS[0], "flash_attn_generic:causal_m128", "gfx942"): "d" * 64}


@pytest.mark.parametrize("kind", ["empty", "blank lines", "fifo", "link to /dev/zero", "folder", "dead link"])
def test_a_file_that_cannot_be_read_is_said_and_keeps_the_stored_machine_code(store_of_six, kind: str) -> None:
    results, db, before = store_of_six
    path = results / machine_code.FILE
    if kind in SAID:
        plant(path, kind)
    else:
        path.write_text("" if kind == "empty" else "\n \n")
    report = ingest(results, db)
    assert not report.ok and report.machine_code_rows == 0 and report.machine_code_kept == 12
    (error,) = report.errors
    assert error.path == str(path)
    assert SAID.get(kind, "holds no record") in error.message and "kept" in error.message
    assert stored(db) == before


def test_no_file_leaves_the_stored_machine_code_as_it_is(store_of_six) -> None:
    results, db, before = store_of_six
    (results / machine_code.FILE).unlink()
    report = ingest(results, db)
    assert report.ok and report.machine_code_rows is None
    assert stored(db) == before
