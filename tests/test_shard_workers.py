"""Workers over stand-in GPUs, through real asv invocations of the fault suite (tests/fixtures/fault_suite):
a worker killed mid-run loses only its case in flight, a hanging case is recorded as timed out, the workers'
trees end up merged into the run's, which asv reads, and the progress lines say what happened."""

from __future__ import annotations

import io
import itertools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from asv.results import Results

from flybench import envvars, run_identity, shard, workers
from flybench.hardware import Gpu
from flybench.measure import record as records
from flybench.measure.process import DIED

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "fixtures" / "fault_suite"
CASES = ["a", "b", "c", "d", "e", "f", "hang", "kill-worker"]
BENCHMARK = "fault.Tiny.track_time"


def fault_config(tmp_path: Path, machine: str) -> tuple[Path, str, str]:
    """An asv config over the fault suite with its results in tmp_path; the commit and asv's environment name."""
    from flybench.cli.run import _asv_env_name

    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(repo=str(ROOT), benchmark_dir=str(SUITE), results_dir=str(tmp_path / "results"),
                env_dir=str(tmp_path / "env"))
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps(conf))
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", machine, "--config", str(config)],
                   check=True, capture_output=True)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return config, head, _asv_env_name(str(config))


def run_fault_suite(tmp_path: Path, cases: list[str], n: int, machine: str = "fx") -> tuple[workers.Outcome, str, Path]:
    config, head, env_name = fault_config(tmp_path, machine)
    run = run_identity.exports(head, env_name, machine, tmp_path / "results")
    env = {**os.environ, **run, "ASV_PYTHONPATH": str(ROOT)}
    asv_args = ["--python=same", "--set-commit-hash", head, "--machine", machine, "--record-samples", "--show-stderr"]
    dealt = shard.estimate([("fault", "tiny", c, "stub", "fp32") for c in cases], {})
    crew = [workers.Worker(i, Gpu(i, "stand-in", f"FAKE-{i}")) for i in range(n)]
    lists = shard.deal(dealt, n)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    plan = workers.Plan(config, asv_args, env, tmp_path / "results", machine, head, env_name, run[envvars.RUN_ID],
                        "cpu", scratch)
    shown = io.StringIO()
    outcome = workers.run(plan, crew, lists, workers.Progress(crew, [len(x) for x in lists], stream=shown))
    (tmp_path / "progress.txt").write_text(shown.getvalue())
    return outcome, run[envvars.RUN_ID], tmp_path / "results" / machine


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("faults")
    outcome, run_id, machine_dir = run_fault_suite(tmp_path, CASES, 2)
    return outcome, run_id, machine_dir, tmp_path


def value_of(results: Results, case: str):
    params = results.get_result_params(BENCHMARK)
    values = results.get_result_value(BENCHMARK, params)
    index = next(i for i, combo in enumerate(itertools.product(*params)) if combo[0] == repr(case))
    return values[index]


def test_a_killed_worker_loses_only_its_case_in_flight(faults):
    outcome, run_id, machine_dir, _ = faults
    assert outcome.errors == [] and outcome.lost == [("fault", "tiny", "kill-worker", "stub", "fp32")]
    [results_file] = [p for p in machine_dir.glob("*.json") if p.name != "machine.json"]
    results = Results.load(str(results_file))
    for case in "abcdef":  # including the cases the killed worker had finished before it died: measured again
        assert value_of(results, case) == pytest.approx(1e-3 * 1.02 * (1 + CASES.index(case)))
    assert value_of(results, "hang") is None  # failed, in asv's own results
    assert math.isnan(value_of(results, "kill-worker"))  # its asv died with it: only its record says why
    last = records.latest(records.read(records.beside(results_file))[0], run_id)
    lost = last[("fault", "tiny", "kill-worker", "stub", "fp32")]
    assert lost["status"] == "failed" and "died (killed by signal SIGKILL" in lost["reason"]
    assert "in flight" in lost["reason"] and lost["gpu"]["uuid"].startswith("FAKE-")


def test_a_hanging_case_is_recorded_as_timed_out(faults):
    _, run_id, machine_dir, _ = faults
    [path] = machine_dir.glob(f"*{records.SUFFIX}")
    hang = records.latest(records.read(path)[0], run_id)[("fault", "tiny", "hang", "stub", "fp32")]
    assert hang["status"] == "failed" and hang["reason"].startswith("timed out: still measuring after 3 s")


def test_each_case_has_one_final_record_naming_its_gpu(faults):
    outcome, run_id, machine_dir, _ = faults
    [path] = machine_dir.glob(f"*{records.SUFFIX}")
    found = [r for r in records.read(path)[0] if r["run_id"] == run_id and r["reason"] != DIED]
    ok = [r for r in found if r["status"] == "ok"]
    assert sorted(r["case"] for r in ok) == list("abcdef")
    assert {r["gpu"]["index"] for r in found} == {0, 1}
    assert set(outcome.done) == {("fault", "tiny", c, "stub", "fp32") for c in CASES}
    assert not list((faults[3] / "scratch").glob("worker*/fx/*.json"))  # every worker tree merged and emptied


def test_progress_lines_name_worker_case_and_reason(faults):
    text = (faults[3] / "progress.txt").read_text().splitlines()
    assert len(text) == len(CASES) and text[-1].startswith(f"[{len(CASES)}/{len(CASES)}] GPU ")
    assert any(line.endswith("fault tiny hang stub fp32: failed: timed out: still measuring after 3 s (asv stops a "
                             "tiny case at 4 s); its process was ended") for line in text)
    # the case's time is shown, whatever it is: it sleeps 0.05 s, which a loaded machine stretches
    assert any(re.search(r": fault tiny a stub fp32: ok \((\d+\.\d) s\)$", line) for line in text), text


def test_the_terminal_table_shows_each_worker():
    from rich.console import Console

    crew = [workers.Worker(0, Gpu(0, "x", "u0")), workers.Worker(1, Gpu(5, "x", "u5"))]
    clock = iter([100.0, 107.0])
    progress = workers.Progress(crew, [3, 2], stream=io.StringIO(), clock=lambda: next(clock))
    progress.started(crew[1], ("gemm", "tiny", "64x48x32", "torch", "bf16"))
    progress.ended(crew[0], {**dict(zip(records.KEY_FIELDS, ("gemm", "tiny", "1x16x64", "torch", "bf16"))),
                             "status": "ok"})
    console = Console(file=io.StringIO(), width=120, record=True)
    console.print(progress.table())
    text = console.export_text()
    assert "1 of 5 cases" in text
    assert "GPU 0" in text and "1/3" in text and "GPU 5" in text and "0/2" in text
    assert "gemm tiny 64x48x32 torch bf16 (7 s)" in text
