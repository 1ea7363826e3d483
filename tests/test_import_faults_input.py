"""`flybench import flydsl-ci FILE` with a FILE that is no history file: said, exit 2, nothing read or stored.

A FIFO blocked the import for ever and a link to /dev/zero was read until
memory ran out; only a regular file is opened, and no more of it is read
than a history may hold. The short-hash warning's advice fits what was
given: with a clone, the clone lacked the commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.special_files import plant
from test_import_faults import history, record, rows
from test_import_flydsl_ci import _repo

from flybench.cli import main as cli
from flybench.errors import FlybenchError
from flybench.importers.flydsl_ci import read


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "folder", "dead link", "nothing"])
def test_a_file_that_is_no_regular_file_is_refused_unread(tmp_path: Path, kind: str, capsys) -> None:
    path, db = tmp_path / "history.json", tmp_path / "store.duckdb"
    if kind != "nothing":
        plant(path, kind)
    assert cli(["import", "flydsl-ci", str(path), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    expected = {"fifo": f"{path} is a FIFO (named pipe), not a FlyDSL CI history file, so it was not read",
                "link to /dev/zero": f"{path} is a character device, not a FlyDSL CI history file",
                "folder": f"{path} is a directory, not a FlyDSL CI history file",
                "dead link": f"{path} is a link to {path}.gone, which cannot be followed",
                "nothing": f"no file at {path}: name the history.json"}
    assert expected[kind] in err
    assert "Traceback" not in err
    assert not db.exists()  # refused before the store was opened


def test_no_more_is_read_than_a_history_may_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read, "MAX_BYTES", 1 << 10)
    path = tmp_path / "history.json"
    path.write_bytes(b" " * (4 << 10) + b"{}")
    sizes: list[int] = []
    real_open = Path.open

    def counted(self: Path, *args, **kwargs):
        handle = real_open(self, *args, **kwargs)
        real_read = handle.read
        handle.read = lambda size=-1: sizes.append(size) or real_read(size)
        return handle

    monkeypatch.setattr(Path, "open", counted)
    with pytest.raises(FlybenchError, match="over 0 MiB of JSON"):
        read.read_history(path)
    assert sizes == [(1 << 10) + 1]  # never the whole file: a link to a huge file costs no more than this


def test_the_short_hash_warning_advises_what_was_not_done(tmp_path: Path, capsys) -> None:
    repo = tmp_path / "FlyDSL"
    hashes = _repo(repo)
    path = history(tmp_path / "h.json", record(hashes["m1"], 1), record("1234567", 2, ts="2026-07-09T01:00:00Z"))
    db = tmp_path / "store.duckdb"
    assert cli(["import", "flydsl-ci", str(path), "--db", str(db), "--flydsl-repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "pass --flydsl-repo" not in out
    assert (f"warning: 1 commit given as a short hash matches no full hash known for subject 'flydsl' (unknown or "
            f"ambiguous) and is kept as given: the clone {repo} has no single commit of that prefix either: fetch "
            f"what FlyDSL's CI ran into it (`git -C {repo} fetch origin") in out
    assert rows(db, "SELECT count(*) FROM imported_records") == [(2,)]
    assert cli(["import", "flydsl-ci", str(path), "--db", str(tmp_path / "other.duckdb")]) == 0
    assert "pass --flydsl-repo CLONE to resolve it" in capsys.readouterr().out
