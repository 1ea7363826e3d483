"""A real asv run of tiny cases through `flybench run`, and the results files it leaves."""

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from asv.results import Results

from flybench.measure import record as records
from flybench.suite import DIED

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path) -> Path:
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"), results_dir=str(tmp_path / "results"),
                env_dir=str(tmp_path / "env"))
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(conf))
    return path


@pytest.fixture(scope="module")
def asv_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("asv")
    config = _config(tmp_path)
    command = [sys.executable, "-m", "flybench", "run", "--set", "tiny", "--config", str(config), "--machine", "ci-cpu",
               "-w", "gemm", "-w", "attention", "-p", "torch", "-d", "bf16"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={**os.environ,
                                                                                   "FLYBENCH_DEVICE": "cpu"})
    return tmp_path, config, done


def _index(results: Results, name: str, combo: tuple[str, ...]) -> int:
    product = itertools.product(*results.get_result_params(name))
    return next(i for i, params in enumerate(product) if params == tuple(repr(p) for p in combo))


def test_run_succeeds_and_writes_asv_results(asv_run):
    tmp_path, _, done = asv_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    machine_dir = tmp_path / "results" / "ci-cpu"
    machine = json.loads((machine_dir / "machine.json").read_text())
    assert machine["machine"] == "ci-cpu" and "accelerator: none" in machine["cpu"]
    [results_file] = [p for p in machine_dir.glob("*.json") if p.name != "machine.json"]
    results = Results.load(str(results_file))
    assert sorted(results.get_all_result_keys()) == ["attention.Tiny.track_time", "gemm.Tiny.track_time"]
    name, combo = "gemm.Tiny.track_time", ("64x48x32", "torch", "bf16")
    params = results.get_result_params(name)
    i = _index(results, name, combo)
    value, stats = results.get_result_value(name, params)[i], results.get_result_stats(name, params)[i]
    assert value > 0 and len(results.get_result_samples(name, params)[i]) >= 5  # samples reached asv as samples
    assert stats["ci_99_a"] <= value <= stats["ci_99_b"] and stats["q_25"] <= value <= stats["q_75"]


def measured_records(path: Path) -> list[dict]:
    """The records of measurements in a case-record file (each is preceded by its placeholder)."""
    found, warnings = records.read(path)
    assert warnings == []
    return [r for r in found if r["reason"] != DIED]


def test_each_case_is_measured_once_and_recorded_with_its_counts(asv_run):
    tmp_path, _, _ = asv_run
    [sidecar] = (tmp_path / "results" / "ci-cpu").glob("*.cases.jsonl")
    measured = measured_records(sidecar)
    keys = [(r["workload"], r["case"], r["provider"], r["dtype"]) for r in measured]
    assert len(keys) == len(set(keys)) > 0
    assert all(r["status"] == "ok" and r["contract"]["timer"] == "perf_counter" and r["bytes"] > 0
               for r in measured)
    assert {r["workload"] for r in measured} == {"gemm", "attention"}


def test_run_prints_summary_with_cases(asv_run):
    _, _, done = asv_run
    assert "cases measured" in done.stdout and "64x48x32" in done.stdout


def test_run_says_each_case_as_it_ends_and_the_next_step(asv_run):
    """The plain run was silent for minutes a workload; now a line per case as its record lands, then what next."""
    _, _, done = asv_run
    said = re.findall(r"\[(\d+)/(\d+)\] [^\n:]+: ((?:gemm|attention) tiny [^:\n]+): (ok|failed)", done.stdout)
    assert said, done.stdout[-3000:]
    assert [int(n) for n, *_ in said] == list(range(1, len(said) + 1)) and {t for _, t, *_ in said} == {str(len(said))}
    assert "gemm tiny 64x48x32 torch bf16" in {case for _, _, case, _ in said}
    assert done.stdout.rstrip().splitlines()[-1].startswith("next: flybench ingest")


def test_run_leaves_out_asvs_parameter_tables_and_keeps_its_progress(asv_run):
    """asv's end-of-benchmark tables were about 80% `n/a` rows of providers that cannot run here; flybench's own
    summary lists every measured case, so the run shows asv's progress lines only."""
    _, _, done = asv_run
    assert "··· attention.Tiny.track_time" in done.stdout and "Benchmarking" in done.stdout
    assert not re.search(r"··· =+ =+", done.stdout) and not re.search(r"^\s+\S+\s+aiter-asm\s+bf16\s+n/a",
                                                                       done.stdout, re.MULTILINE)


def test_the_table_filter_keeps_asvs_own_lines_around_a_table() -> None:
    from flybench.cli.run import without_tables

    lines = ["[ 0.00%] ·· Benchmarking existing-py\n", "[50.00%] ··· gemm.Tiny.track_time      ok\n",
             "[50.00%] ··· ========== ======= =======\n", "               case      provider\n",
             "              ---------- ------- -------\n", "               64x48x32    ck      n/a\n",
             "[100.00%] ··· attention.Tiny.track_time     ok\n", "   stderr of a failing case, after asv's line\n"]
    assert list(without_tables(lines)) == [lines[0], lines[1], lines[6], lines[7]]


def test_plain_asv_run_measures_each_case_once_and_writes_its_records(asv_run):
    tmp_path, config, _ = asv_run
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYBENCH_")}
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", "ci-plain", "--config", str(config)],
                   check=True, capture_output=True, cwd=tmp_path)
    done = subprocess.run([sys.executable, "-m", "asv", "run", "--config", str(config), "--python=same",
                           "--set-commit-hash", head, "--machine", "ci-plain", "--record-samples",
                           "-b", r"gemm\.Tiny\.track_time\('64x48x32'"],
                          capture_output=True, text=True, cwd=tmp_path, env={**env, "FLYBENCH_DEVICE": "cpu"})
    assert done.returncode in (0, 2), done.stdout[-3000:] + done.stderr[-3000:]  # 2: some providers failed
    machine_dir = tmp_path / "results" / "ci-plain"
    [results_file] = machine_dir.glob(f"{head[:8]}-*.json")
    [sidecar] = machine_dir.glob(f"{head[:8]}-*.cases.jsonl")
    assert sidecar == records.beside(results_file)
    measured = measured_records(sidecar)
    combos = [(r["provider"], r["dtype"]) for r in measured]
    assert len(combos) == len(set(combos)) and {("torch", "bf16"), ("cublas", "bf16")} <= set(combos)
    assert all(r["commit"] == head and r["machine"] == "ci-plain" for r in measured)
    assert next(r for r in measured if r["provider"] == "cublas")["status"] == "unavailable"
    torch = next(r for r in measured if (r["provider"], r["dtype"]) == ("torch", "bf16"))
    results = Results.load(str(results_file))
    params = results.get_result_params("gemm.Tiny.track_time")
    i = _index(results, "gemm.Tiny.track_time", ("64x48x32", "torch", "bf16"))
    assert results.get_result_samples("gemm.Tiny.track_time", params)[i] == pytest.approx(torch["samples_s"])


def test_unavailable_provider_is_skipped_with_reason_by_plain_asv(asv_run):
    tmp_path, config, _ = asv_run
    done = subprocess.run([sys.executable, "-m", "asv", "run", "--config", str(config), "--python=same", "--quick",
                           "--machine", "ci-cpu", "--show-stderr", "-b", r"gemm\.Tiny\.track_time\('64x48x32', 'cublas', 'bf16'\)"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ,
                                                                              "FLYBENCH_DEVICE": "cpu"})
    assert "n/a" in done.stdout and "cublas needs an NVIDIA GPU" in done.stdout + done.stderr


def test_unknown_names_exit_2_with_valid_names(tmp_path):
    done = subprocess.run([sys.executable, "-m", "flybench", "run", "-w", "nope", "--dry-run"], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 2 and "valid workloads: attention, diffusion_attention, gemm, mixtral_step, mla_decode, moe, moe_stage" in done.stderr
