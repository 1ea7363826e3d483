"""Ctrl-C in `flybench ingest`: a line saying so, exit 130, no traceback, and nothing half-written.

In its first seconds (while pandas and scipy load) a Ctrl-C was a traceback of their insides; later, DuckDB
turned one that landed inside a query into "RuntimeError: Query interrupted", or into an error naming a good
results file as one it could not store. The tree here is the committed dev-h200 results.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from flybench import cli
from flybench.store.ingest import ingest

ingest_module = sys.modules["flybench.store.ingest"]  # the package's `ingest` is the function

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "flybench"
TABLES = ("results", "commits", "machines", "counter_cases", "counters", "role_splits")


def _rows_by_file(db: Path) -> dict[str, int]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return dict(conn.execute("SELECT source_file, count(*) FROM results GROUP BY ALL").fetchall())
    finally:
        conn.close()


def _counts(db: Path) -> dict[str, int]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (COMMITTED / "dev-h200").is_dir():
        pytest.skip("the committed dev-h200 results are not in this checkout")
    root = tmp_path_factory.mktemp("interrupt") / "results"
    shutil.copytree(COMMITTED, root)
    return root


@pytest.fixture(scope="module")
def whole_db(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree ingested without interruption."""
    db = tmp_path_factory.mktemp("whole") / "store.duckdb"
    assert ingest(tree, db, "flybench").ok
    return db


@pytest.fixture(scope="module")
def whole(whole_db: Path) -> dict[str, int]:
    return _counts(whole_db)


def test_ctrl_c_while_the_verbs_load_is_one_line_and_exit_130(monkeypatch, capsys) -> None:
    def interrupted(load=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["ingest", "results"]) == 130
    err = capsys.readouterr().err
    assert err == "flybench: interrupted while starting; nothing was done\n"


def test_ctrl_c_inside_a_write_stops_after_it_with_whole_files_only(tree: Path, whole_db: Path, whole: dict[str, int],
                                                                     tmp_path: Path, monkeypatch, capsys) -> None:
    """The signal lands while results rows are written: what that write began is finished or rolled back whole,
    no file is begun after it, and an ingest after it stores what a whole one stores."""
    real = ingest_module._store_files
    calls = []

    def signalled(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # as a Ctrl-C at the terminal would, in the middle of the write
        return real(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "_store_files", signalled)
    db = tmp_path / "store.duckdb"
    with pytest.raises(KeyboardInterrupt):
        ingest(tree, db, "flybench")
    assert "Ctrl-C: stopping once the file being stored is stored" in capsys.readouterr().err
    assert len(calls) == 1  # no write begun after the Ctrl-C
    complete = _rows_by_file(whole_db)
    assert {f: n for f, n in _rows_by_file(db).items() if complete.get(f) != n} == {}  # no file stored in part
    monkeypatch.setattr(ingest_module, "_store_files", real)
    assert ingest(tree, db, "flybench").ok and _counts(db) == whole


def _holds_open_under(pid: int, folder: Path) -> bool:
    """Whether the process has a file under `folder` open (it is reading the tree): a state of the command's own
    work. (Python itself cannot answer a Ctrl-C while it starts: one during its `site` import is a fatal error
    of the interpreter, before any program runs.)"""
    try:
        links = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for link in links:
        try:
            if Path(os.readlink(link)).is_relative_to(folder):
                return True
        except OSError:
            continue
    return False


def _interrupt_when(process: subprocess.Popen, ready) -> None:
    """Send Ctrl-C once `ready()` holds (the state the test checks), unless the command ended first."""
    while process.poll() is None and not ready():
        time.sleep(0.01)
    if process.poll() is None:
        process.send_signal(signal.SIGINT)


@pytest.mark.parametrize("moment", ["reading", "storing", "stored"])
def test_ctrl_c_at_any_moment_of_the_command_is_clean(moment: str, tree: Path, whole: dict[str, int],
                                                      tmp_path: Path) -> None:
    """Whenever it lands, while it reads the tree, while it stores (the store exists), or once it said what it
    stored (it rescans then): exit 130, or 0 when the ingest had ended; no traceback, no file named as bad; an ingest
    after it stores the whole tree. Each moment is a state the test waits for, never a time, so a busy machine
    moves nothing."""
    db = tmp_path / "store.duckdb"
    command = [sys.executable, "-m", "flybench", "ingest", str(tree), "--db", str(db), "--subject", "flybench"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []

    def read() -> None:
        for line in process.stdout:
            said.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready = {"reading": lambda: db.exists() or _holds_open_under(process.pid, tree), "storing": db.exists,
             "stored": lambda: bool(said)}
    _interrupt_when(process, ready[moment])
    err = process.stderr.read()
    process.wait(timeout=300)
    reader.join(timeout=300)
    assert process.returncode in (0, 130), err
    assert "Traceback" not in err and "error:" not in err
    if process.returncode == 130:
        assert err.rstrip().endswith("interrupted") or err.rstrip().endswith("nothing was done"), err
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _counts(db) == whole
