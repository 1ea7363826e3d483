"""`python -m studies.model_lane` given bad arguments: exit 2 with what to write, before any step is built.

`--set nosuch` ended in a traceback, `--repeats 0` or `-5` measured until the median of no sample failed, and
`--out FOLDER` was found only when the first result was written, after 74 s of work.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def study(*argv: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "studies.model_lane", *argv], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "FLYBENCH_DEVICE": "cpu"}, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail(f"studies.model_lane {' '.join(argv)} was still working after 120 s: it took bad arguments")


@pytest.mark.parametrize("argv, said", [
    (["--set", "nosuch"], "argument --set: invalid choice: 'nosuch' (choose from 'tiny', 'quick', 'full')"),
    (["--repeats", "0"], "argument --repeats: '0' is not a whole number of calls above 0"),
    (["--repeats", "-5"], "argument --repeats: '-5' is not a whole number of calls above 0"),
    (["--repeats", "many"], "argument --repeats: 'many' is not a whole number of calls above 0"),
    (["--case", "mixtral-nosuch"], "no case of the quick set is named mixtral-nosuch: mixtral-l4-prefill-b1-t2048"),
])
def test_bad_arguments_exit_2_before_any_work(argv: list[str], said: str, tmp_path: Path) -> None:
    out = tmp_path / "lane.json"
    done = study(*argv, "--out", str(out))
    assert done.returncode == 2 and said in done.stderr
    assert "Traceback" not in done.stderr and not done.stdout and not out.exists()


def test_an_out_that_is_a_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    done = study("--set", "tiny", "--out", str(tmp_path))
    assert done.returncode == 2 and f"argument --out: {tmp_path} is a directory: name a file" in done.stderr
    assert "Traceback" not in done.stderr and not done.stdout and list(tmp_path.iterdir()) == []
