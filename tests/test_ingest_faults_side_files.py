"""The files ingest and the regression report read beside the results: the asv config, the commit notes
(`commits.jsonl`) and `flybench.toml`. Anything there but a regular file of the expected content is said, exit 2,
before anything is stored; nothing is passed over in silence, nothing blocks, no traceback.

A FIFO named asv.conf.json blocked `flybench ingest` for ever and a link to
/dev/zero was read until memory ran out; a commits.jsonl that was a FIFO or
a folder was passed over without a word, and one of bytes that are not
UTF-8 raised a traceback; a ./flybench.toml that was a FIFO was passed over,
so the report ran on the default thresholds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from fixtures.special_files import SAID, plant
from test_machine_code_history import tree

from flybench.cli import main
from flybench.errors import FlybenchError
from flybench.regress.config import load_config
from flybench.store import commit_notes, ingest

NOT_REGULAR = {kind: SAID[kind] for kind in ("fifo", "link to /dev/zero", "folder")}


def results_tree(tmp_path: Path) -> Path:
    """A FlyDSL results tree with its asv config and no machine code file."""
    results = tree(tmp_path, [])
    (results / "machine-code.jsonl").unlink()
    return results


def stored_rows(db: Path) -> int:
    if not db.exists():
        return 0
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute("SELECT count(*) FROM results").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("kind", list(NOT_REGULAR))
def test_an_asv_config_that_is_no_file_is_said_and_nothing_stored(tmp_path: Path, kind: str, capsys,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    results, db = results_tree(tmp_path), tmp_path / "store.duckdb"
    plant(results / "asv.conf.json", kind)  # the tree's own config, found by walking up from the tree
    assert main(["ingest", str(results), "--db", str(db), "--no-rescan"]) == 2
    err = capsys.readouterr().err
    assert f"{results / 'asv.conf.json'} {NOT_REGULAR[kind]}, not an asv config, so it was not read" in err
    given = tmp_path / "given.json"  # --config, with and without a tree: the tree is then the config's results_dir
    plant(given, kind)
    assert main(["ingest", str(results), "--db", str(db), "--config", str(given), "--no-rescan"]) == 2
    assert f"{given} {NOT_REGULAR[kind]}, not an asv config" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "--db", str(db), "--config", str(given), "--no-rescan"]) == 2
    assert f"{given} {NOT_REGULAR[kind]}, not an asv config" in capsys.readouterr().err
    assert stored_rows(db) == 0


def test_a_config_that_is_not_there_is_named(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    results, db = results_tree(tmp_path), tmp_path / "store.duckdb"
    assert main(["ingest", str(results), "--db", str(db), "--config", str(tmp_path / "nope.json")]) == 2
    assert f"--config {tmp_path / 'nope.json'}: no such file" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "--db", str(db)]) == 2  # no tree and no ./asv.conf.json
    err = capsys.readouterr().err
    assert "no asv config at asv.conf.json, so 'results_dir' is unknown" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", list(NOT_REGULAR))
def test_commit_notes_that_are_no_file_are_said_and_nothing_stored(tmp_path: Path, kind: str) -> None:
    results, db = results_tree(tmp_path), tmp_path / "store.duckdb"
    plant(results / commit_notes.FILE, kind)
    with pytest.raises(FlybenchError, match=re.escape(f"{commit_notes.FILE} {NOT_REGULAR[kind]}, not the commit")):
        ingest(results, db)
    assert stored_rows(db) == 0


@pytest.mark.parametrize(("line", "said"), [
    (b"\xff\xfe{}\n", "not UTF-8 text (byte 0), so no commit notes file; nothing was stored"),
    (json.dumps({"hash": "ab", "title": [1, 2]}).encode(), ':1: "title" is text or null, not [1, 2]'),
    (json.dumps({"hash": "ab", "pr": True}).encode(), ':1: "pr" is a pull request number or null, not true'),
    (json.dumps({"hash": "ab", "failed_compiles": "3"}).encode(), ':1: "failed_compiles" is a count or null'),
])
def test_commit_notes_of_the_wrong_content_are_refused_with_their_line(tmp_path: Path, line: bytes,
                                                                       said: str) -> None:
    (tmp_path / commit_notes.FILE).write_bytes(line)
    with pytest.raises(FlybenchError) as refused:
        commit_notes.read(tmp_path)
    assert said in str(refused.value)


@pytest.mark.parametrize("kind", list(NOT_REGULAR))
def test_a_regress_config_in_the_folder_that_is_no_file_is_said(tmp_path: Path, kind: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plant(tmp_path / "flybench.toml", kind)
    with pytest.raises(FlybenchError, match=re.escape(f"config file flybench.toml {NOT_REGULAR[kind]}")):
        load_config()
    plant(tmp_path / "given.toml", kind)
    with pytest.raises(FlybenchError, match="config file given.toml is a"):
        load_config("given.toml")
