"""Every verb that writes a file or a folder writes only onto a regular file, a folder, or a new path.

`accept --accepted PATH` renamed its temporary file onto PATH whatever it
was: a device node or a FIFO became a regular file, with exit status 0 (as
root, `--accepted /dev/null` would have replaced the system's /dev/null).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fixtures.asv_project import AsvProject, build

from flybench.cli import main
from flybench.store import ingest

SERIES = "attention.Quick.track_time(c1, flydsl, bf16)"

PARSED = {  # each verb's argument that names a file or folder to write, with what the verb needs besides
    "compare --output": ["compare", "a", "b", "--output"],
    "regressions --output": ["regressions", "--output"],
    "bisect --output": ["bisect", SERIES, "HEAD~1", "HEAD", "--output"],
    "render --output": ["render", "c.json", "--output"],
    "export --output": ["export", "--query", "SELECT 1", "--output"],
    "export --dir": ["export", "--dir"],
    "gate --json": ["gate", "a", "b", "--json"],
    "gate --markdown": ["gate", "a", "b", "--markdown"],
    "gate --isa-diff": ["gate", "a", "b", "--isa-diff"],
    "merge --into": ["merge", "src", "--into"],
}


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("verb", PARSED)
def test_a_fifo_or_a_device_is_refused_before_any_work(verb: str, fifo: Path, tmp_path: Path, capsys) -> None:
    for target, said in ((fifo, "is a FIFO (named pipe)"), (tmp_path / "null", "is a character device")):
        if target.name == "null":
            target.symlink_to("/dev/null")
        with pytest.raises(SystemExit) as exit_:
            main([*PARSED[verb], str(target)])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"{target} {said}" in err and "Traceback" not in err
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and os.readlink(tmp_path / "null") == "/dev/null"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


def test_accept_writes_onto_no_device_node_or_fifo(project: AsvProject, fifo: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    assert ingest(project.results_dir, db, branch="main").ok
    commit = project.commits[-1][:8]
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    for target, said in ((fifo, "is a FIFO (named pipe), not a regular file"),
                         (link, "is a character device, not a regular file")):
        code = main(["accept", SERIES, commit, "--reason", "r", "--db", str(db), "--accepted", str(target)])
        err = capsys.readouterr().err
        assert code == 2 and f"{target} {said}" in err and "Traceback" not in err
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink() and Path("/dev/null").is_char_device()
    assert not list(tmp_path.glob("*.lock")) and not list(tmp_path.glob("*.tmp"))
    file = tmp_path / "accepted.json"  # a regular file, or a new one, is still written
    assert main(["accept", SERIES, commit, "--reason", "r", "--db", str(db), "--accepted", str(file)]) == 0
    assert file.is_file()
