"""`flybench run --gpus/--shard` from the command line: real tiny CPU cases dealt to stand-in GPUs
(FLYBENCH_FAKE_GPUS), the progress a person reads in a CI log, the deal of a shard, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from asv.results import Results

from flybench.measure import record as records
from flybench.measure.process import DIED
from tests.test_asv_run import _config

ROOT = Path(__file__).resolve().parents[1]
SELECTION = ["--set", "tiny", "-w", "gemm", "-p", "torch", "-d", "bf16"]


def flybench(*argv: str, fake_gpus: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLYBENCH_DEVICE": "cpu"}
    env.pop("FLYBENCH_FAKE_GPUS", None)
    if fake_gpus:
        env["FLYBENCH_FAKE_GPUS"] = fake_gpus
    return subprocess.run([sys.executable, "-m", "flybench", "run", *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env)


def _relative_config(tmp_path: Path) -> Path:
    """A config at the top of its own repository with "repo": ".", as flybench's own asv.conf.json is (asv reads a
    relative path from the config's folder, so a worker's copy of the config elsewhere must not keep it)."""
    config = _config(tmp_path)
    conf = json.loads(config.read_text())
    conf.update(repo=".", results_dir="results", env_dir="env")
    config.write_text(json.dumps(conf))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "subject"], check=True)
    return config


@pytest.fixture(scope="module")
def two_gpus(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("gpus")
    config = _relative_config(tmp_path)
    done = flybench(*SELECTION, "--config", str(config), "--machine", "ci-gpus", "--gpus", "all", fake_gpus="2")
    return tmp_path, done


def test_gpus_all_measures_every_case_once_into_one_results_file(two_gpus):
    tmp_path, done = two_gpus
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    machine_dir = tmp_path / "results" / "ci-gpus"
    [results_file] = [p for p in machine_dir.glob("*.json") if p.name != "machine.json"]
    results = Results.load(str(results_file))
    params = results.get_result_params("gemm.Tiny.track_time")
    measured = [v for v in results.get_result_value("gemm.Tiny.track_time", params) if v == v]
    assert len(measured) == 4 and all(v > 0 for v in measured)  # the four tiny gemm cases, torch bf16
    found = [r for r in records.read(records.beside(results_file))[0] if r["reason"] != DIED]
    assert len(found) == 4 and {r["gpu"]["index"] for r in found} == {0, 1}  # two on each stand-in
    assert {r["gpu"]["uuid"] for r in found} == {"FAKE-0", "FAKE-1"}


def test_the_progress_reads_as_one_display_for_both_workers(two_gpus):
    _, done = two_gpus
    lines = done.stdout.splitlines()
    assert any(line.startswith("GPU 0 (") and "FAKE-0): 2 cases" in line for line in lines)
    shown = [line for line in lines if line.startswith("[") and "/4] GPU " in line]
    assert len(shown) == 4 and shown[-1].startswith("[4/4] GPU ")
    assert any(": gemm tiny 64x48x32 torch bf16: ok (" in line for line in shown)
    assert "4 cases measured" in done.stdout  # the run's summary table, as without --gpus
    assert "per-GPU check: no case of this run has an earlier run on this machine yet" in done.stdout


def test_a_shards_deal_is_printed_and_nothing_runs_on_a_dry_run():
    first = flybench(*SELECTION, "--shard", "1/2", "--dry-run")
    second = flybench(*SELECTION, "--shard", "2/2", "--dry-run")
    assert first.returncode == second.returncode == 0, first.stderr
    deal = [line for line in first.stdout.splitlines() if line.startswith("deal: 4 cases")]
    assert deal and deal == [line for line in second.stdout.splitlines() if line.startswith("deal: 4 cases")]
    assert "shard 1/2: 2 cases" in first.stdout and "shard 2/2: 2 cases" in second.stdout
    assert "plan: worker 0: 2 cases" in first.stdout and "nothing was run (--dry-run)" in first.stdout


@pytest.mark.parametrize("argv,fake,message", [
    (["--gpus", "2"], None, "--gpus 2: this machine has no GPU that torch sees"),
    (["--gpus", "3"], "2", "--gpus 3: give all, or a number from 1 to 2"),
    (["--gpus", "two"], "2", "--gpus two: give all, or a number from 1 to 2"),
    (["--shard", "3/2"], None, "--shard '3/2': write I/N with 1 <= I <= N"),
    (["--gpus", "all"], "x", "FLYBENCH_FAKE_GPUS='x': give a whole number"),
])
def test_bad_input_exits_2_with_what_to_do(argv, fake, message):
    done = flybench(*SELECTION, *argv, "--dry-run", fake_gpus=fake)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
