"""`flybench merge` given a source it cannot read, or a destination that cannot hold files: exit 2, said, nothing
merged. Each of these was a traceback with exit status 1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures.asv_files import benchmarks_json, machine_json, results_json

from flybench.cli import main
from flybench.measure import record as records


def _tree(root: Path) -> Path:
    root.mkdir(parents=True)
    benchmarks_json(root, {"b.T.time_plain": {}})
    machine_json(root)
    results_json(root, {"b.T.time_plain": [[1.5], [], "1", 1767268800000, 0.1]})
    return root


def _merge(capsys, *argv: str) -> str:
    assert main(["merge", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("fault, said", [
    ("dangling link", "which cannot be followed (No such file or directory)"),
    ("symlink loop", "which cannot be followed (Too many levels of symbolic links)"),
    ("fifo", "is a FIFO (named pipe), not a file asv or flybench wrote"),
])
def test_a_source_with_a_results_file_that_is_no_file(fault: str, said: str, tmp_path: Path, capsys) -> None:
    source = _tree(tmp_path / "source")
    odd = source / "box" / "bbbbbbbb-existing-py.json"
    if fault == "dangling link":
        odd.symlink_to(tmp_path / "gone.json")
    elif fault == "symlink loop":
        odd.symlink_to(odd)
    else:
        os.mkfifo(odd)
    err = _merge(capsys, str(source), "--into", str(tmp_path / "merged"))
    assert f"{odd} " in err and said in err and "nothing was merged" in err
    assert not (tmp_path / "merged").exists()


def test_an_unreadable_case_record_file(tmp_path: Path, capsys, monkeypatch) -> None:
    """(The tests run as root, whom permissions do not stop, so opening the file is made to fail as it does for
    its owner after chmod 000.)"""
    source = _tree(tmp_path / "source")
    locked = source / "box" / f"aaaaaaaa-existing-py{records.SUFFIX}"
    locked.write_text("")
    real_open = Path.open

    def denied(self, *args, **kwargs):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    err = _merge(capsys, str(source), "--into", str(tmp_path / "merged"))
    assert f"cannot read {locked} (Permission denied): nothing was merged; make it readable" in err
    assert not (tmp_path / "merged").exists()


def test_a_destination_that_cannot_hold_files(tmp_path: Path, capsys) -> None:
    source = _tree(tmp_path / "source")
    err = _merge(capsys, str(source), "--into", "/proc/flybench-merge")
    assert "cannot write /proc/flybench-merge (No such file or directory)" in err and "--into" in err
    assert not Path("/proc/flybench-merge").exists()
    assert main(["merge", str(source), "--into", str(tmp_path / "merged")]) == 0  # the same source, elsewhere
