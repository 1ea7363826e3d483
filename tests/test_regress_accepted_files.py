"""An accepted-levels file that is a folder, a FIFO or a device is said, exit 2, never passed over in silence.

Passed over, every alert someone had accepted was shown open again with
exit 0's sibling, 1, and nothing said why; reading a FIFO would block.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from fixtures.special_files import SAID, plant
from test_regress_alert import SERIES, db, project  # noqa: F401  (fixtures)

from flybench.cli import main
from flybench.errors import FlybenchError
from flybench.regress import accepted


def planted(path: Path, kind: str) -> str:
    """Put a `kind` at `path`; what the message then says it is."""
    plant(path, kind)
    return SAID[kind] + ("" if kind == "folder" else ", not a file `flybench accept` writes, so it was not read")


@pytest.mark.parametrize("kind", ["folder", "fifo", "link to /dev/zero"])
def test_the_stores_own_file_that_is_no_file_stops_the_report(db: Path, kind: str, capsys) -> None:  # noqa: F811
    said = planted(accepted.beside(db), kind)
    assert main(["regressions", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"accepted-levels file {accepted.beside(db)} {said}" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["folder", "fifo", "link to /dev/zero"])
def test_the_old_file_of_the_folder_that_is_no_file_is_said(tmp_path: Path, kind: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    said = planted(tmp_path / accepted.OLD_PATH, kind)
    with pytest.raises(FlybenchError, match=re.escape(f"accepted-levels file {accepted.OLD_PATH} {said}")):
        accepted.for_store(tmp_path / "store.duckdb")


def test_a_given_file_that_is_a_fifo_is_said_not_called_missing(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "accepted.json")
    with pytest.raises(FlybenchError, match="is a FIFO"):
        accepted.for_store(tmp_path / "store.duckdb", tmp_path / "accepted.json")


def test_a_link_to_no_file_yet_is_no_acceptance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`flybench accept` writes through a link (its target made), so a link to no file yet is no acceptance yet."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "store.duckdb"
    accepted.beside(db).symlink_to(tmp_path / "shared" / "levels.json")
    assert accepted.for_store(db) == ([], "")


def test_a_newer_format_is_not_called_malformed_and_bad_entries_are_named(tmp_path: Path) -> None:
    """Advised to 'fix or remove' a newer flybench's file, a user lost its levels; an entry of the wrong types
    matched no series and closed nothing, without a word."""
    path = tmp_path / "accepted.json"
    path.write_text('{"version": 2, "accepted": []}')
    with pytest.raises(FlybenchError, match="written by a newer flybench; this one reads format 1: upgrade flybench "
                                            r"\(keep the file"):
        accepted.load(path)
    entry = {"subject": "s", "machine": "m", "benchmark": "b", "params": {}, "commit": "c" * 40, "reason": "r",
             "accepted_at": "t"}
    for wrong in ({"params": []}, {"commit": 5}, {"machine": None}):
        path.write_text(json.dumps({"version": 1, "accepted": [{**entry, **wrong}]}))
        with pytest.raises(FlybenchError, match="an entry's params must be an object and its other fields text"):
            accepted.load(path)
    path.write_text(json.dumps({"version": 1, "accepted": [entry]}))
    assert accepted.load(path) == [accepted.Acceptance(**entry)]


@pytest.mark.parametrize("kind", ["folder", "fifo", "link to /dev/zero"])
def test_taking_back_from_a_file_that_is_no_file_is_said(tmp_path: Path, kind: str) -> None:
    """`flybench accept --undo` read a folder or a FIFO there as a file without the acceptance: 'nothing to undo'."""
    path = tmp_path / "accepted.json"
    plant(path, kind)
    entry = accepted.Acceptance("s", "m", "b", {}, "c" * 40, "r", "t")
    with pytest.raises(FlybenchError, match="is a directory" if kind == "folder" else "not a regular file"):
        accepted.remove(path, entry)
