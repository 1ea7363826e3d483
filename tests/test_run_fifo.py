"""A FIFO named like a case-record file blocks no `flybench run`: `--shard --durations DIR` and `--resume` hung
on one until they were killed (ingest and merge already refused it). Now: exit 2, the FIFO named, nothing run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_shard_run import ROOT, SELECTION, _relative_config

MACHINE = "fifo-box"
FIFO_NAME = "0123abcd-existing-py.cases.jsonl"


def _run(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLYBENCH_DEVICE": "cpu"}
    env.pop("FLYBENCH_FAKE_GPUS", None)
    try:
        return subprocess.run([sys.executable, "-m", "flybench", "run", *SELECTION, "--machine", MACHINE, *argv,
                               "--dry-run"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    except subprocess.TimeoutExpired:  # generous for a loaded machine; a hang never ends
        pytest.fail(f"flybench run {' '.join(argv)} still blocked after 120 s")


@pytest.mark.parametrize("where", ["durations", "results"])
def test_a_fifo_among_the_record_files_is_named_not_read(where: str, tmp_path: Path) -> None:
    config = _relative_config(tmp_path)
    durations = tmp_path / "runner" / MACHINE
    durations.mkdir(parents=True)
    folder = durations if where == "durations" else tmp_path / "results" / MACHINE
    folder.mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / FIFO_NAME)
    for argv in (["--shard", "1/2", "--durations", str(durations)], ["--resume"]):
        if where == "durations" and argv == ["--resume"]:
            continue  # --resume reads the run's own folder only
        done = _run("--config", str(config), *argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert f"{folder / FIFO_NAME} is a FIFO (named pipe), not a record file flybench writes" in done.stderr
        assert "Traceback" not in done.stderr and "nothing was run" not in done.stdout
