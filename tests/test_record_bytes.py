"""A case-record file with bytes that are not UTF-8 costs the lines they are on, never the command.

`run --resume`, every `--shard` deal and `--durations` read the records with
one reader; a stray byte made each fail with UnicodeDecodeError.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from flybench import shard
from flybench.measure import record as records

ROOT = Path(__file__).resolve().parents[1]
SELECTION = ["--set", "tiny", "-w", "gemm", "-p", "torch", "-d", "bf16"]
CASE = {"run_id": "r", "workload": "gemm", "shape_set": "tiny", "case": "c", "provider": "torch", "dtype": "bf16",
        "status": "ok", "measure_s": 2.5, "version": 2}


def _records(path: Path, middle: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(json.dumps(CASE).encode() + b"\n" + middle + b"\n" + json.dumps({**CASE, "case": "d"}).encode()
                     + b"\n")
    return path


def test_a_line_that_is_not_utf8_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = _records(tmp_path / "box" / f"aaaaaaaa-py{records.SUFFIX}", b'{"case": "\xff\xfe"}')
    found, skipped = records.read(path)
    assert [r["case"] for r in found] == ["c", "d"]
    assert len(skipped) == 1 and "line 2 skipped: UnicodeDecodeError" in skipped[0]
    assert set(shard.stored_durations(tmp_path / "box")) == {("gemm", "tiny", "c", "torch", "bf16"),
                                                               ("gemm", "tiny", "d", "torch", "bf16")}


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flybench", "run", *SELECTION, *argv], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "FLYBENCH_DEVICE": "cpu"})


def test_a_deal_reads_durations_past_bad_bytes_and_refuses_a_binary_file(tmp_path: Path) -> None:
    folder = tmp_path / "box"
    _records(folder / f"aaaaaaaa-py{records.SUFFIX}", b"\x80\x81 not text")
    done = _run("--shard", "1/2", "--dry-run", "--durations", str(folder))
    assert done.returncode == 0 and "shard 1/2: 2 cases" in done.stdout, done.stderr[-2000:]
    binary = tmp_path / "a.out"
    binary.write_bytes(b"\x7fELF\x02\x01\xff" + bytes(range(256)) * 8)  # like an executable
    done = _run("--shard", "1/2", "--dry-run", "--durations", str(binary))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--durations {binary} holds no case record" in done.stderr and "UnicodeDecodeError" in done.stderr
    assert "name a .cases.jsonl file that `flybench run` wrote" in done.stderr
