"""`python -m flybench.asv_main`: asv's command line, its machine file replaced whole, never written in place
(workers of `flybench run --gpus` start asv at once, and one read the file while another rewrote it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from asv import machine

import flybench.asv_main  # noqa: F401  (patches asv's machine file writer)


def test_a_write_that_fails_leaves_the_machine_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "asv-machine.json"
    machine.MachineCollection.save("gpu0", {"machine": "gpu0"}, _path=str(path))
    with pytest.raises(TypeError):  # a value JSON cannot write: asv's own writer left the file truncated
        machine.MachineCollection.save("gpu1", {"machine": object()}, _path=str(path))
    assert json.loads(path.read_text())["gpu0"] == {"machine": "gpu0"}
    assert [p.name for p in tmp_path.iterdir()] == ["asv-machine.json"]  # no temporary file left behind
    machine.MachineCollection.save("gpu1", {"machine": "gpu1"}, _path=str(path))
    assert set(json.loads(path.read_text())) == {"gpu0", "gpu1", "version"}


def test_it_is_asvs_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "flybench.asv_main", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "usage: asv" in done.stdout and "machine" in done.stdout
