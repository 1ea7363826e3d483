"""Dealing (longest first, deterministic, estimates), pinning, GPU listing, and `flybench merge` of shard trees
copied from different folders: asv reads the merged file, nothing is lost or duplicated, and ingest stores the
same rows as for one unsharded run."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from asv.results import Results

from flybench import gpu_check, hardware, shard, workers
from flybench.errors import FlybenchError
from flybench.hardware import Gpu
from flybench.measure import record as records
from flybench.measure.process import DIED
from tests.test_shard_workers import BENCHMARK, run_fault_suite

ROOT = Path(__file__).resolve().parents[1]


def key(case: str, workload: str = "gemm", provider: str = "torch") -> tuple[str, ...]:
    return (workload, "quick", case, provider, "bf16")


def test_longest_first_onto_the_least_loaded_list():
    cases = [shard.Case(key(str(s)), float(s), True) for s in (7, 5, 4, 3, 3, 2)]
    lists = shard.deal(cases, 2)
    assert [[c.seconds for c in x] for x in lists] == [[7, 3, 2], [5, 4, 3]]
    assert [shard.load(x) for x in lists] == [12, 12]


def test_the_deal_does_not_depend_on_the_order_of_the_selection():
    cases = [shard.Case(key(f"c{i}"), float(i % 4), True) for i in range(20)]
    first = shard.deal(cases, 3)
    assert shard.deal(list(reversed(cases)), 3) == first
    assert shard.fingerprint(cases) == shard.fingerprint(list(reversed(cases)))
    assert sorted(c.key for x in first for c in x) == sorted(c.key for c in cases)  # each case exactly once


def test_unknown_durations_are_estimated_from_the_same_workload_and_provider():
    stored = {key("a"): 10.0, key("b"): 20.0, key("x", provider="flex"): 100.0, key("q", "moe"): 4.0}
    found = {c.key: c for c in shard.estimate([key("a"), key("new"), key("n", "moe", "triton"),
                                               key("n", "attention")], stored)}
    assert found[key("a")] == shard.Case(key("a"), 10.0 + shard.CASE_OVERHEAD_S, True)
    assert found[key("new")].seconds == 15.0 + shard.CASE_OVERHEAD_S and not found[key("new")].measured
    assert found[key("n", "moe", "triton")].seconds == 4.0 + shard.CASE_OVERHEAD_S  # the workload's median
    assert found[key("n", "attention")].seconds == shard.UNKNOWN_S["quick"] + shard.CASE_OVERHEAD_S


def test_stored_durations_are_each_cases_latest_measure_s(tmp_path):
    path = tmp_path / f"abc-env{records.SUFFIX}"
    first = records.CaseRecord("r1", *key("a"), status="ok", measure_s=3.0)
    placeholder = records.CaseRecord("r2", *key("a"), status="failed", reason=DIED)
    again = records.CaseRecord("r2", *key("a"), status="ok", measure_s=5.0)
    for record in (first, placeholder, again):
        records.append(path, record)
    assert shard.stored_durations(tmp_path) == {key("a"): 5.0} == shard.stored_durations(path)
    assert shard.stored_durations(tmp_path / "none") == {}


@pytest.mark.parametrize("text", ["0/4", "5/4", "2", "a/b", "2/", "-1/3"])
def test_a_bad_shard_is_bad_input(text):
    with pytest.raises(FlybenchError, match="write I/N with 1 <= I <= N"):
        shard.parse_shard(text)
    assert shard.parse_shard("2/4") == (2, 4)


def test_pinning_by_the_vendors_variable():
    gpu = Gpu(1, "x", "GPU-1")
    assert workers.pin("cuda", gpu, {}) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert workers.pin("cuda", gpu, {"CUDA_VISIBLE_DEVICES": "4, 6"}) == {"CUDA_VISIBLE_DEVICES": "6"}
    # ROCm: ROCR picks the GPU, HIP indexes what ROCR left (one device), CUDA_VISIBLE_DEVICES goes
    assert workers.pin("rocm", gpu, {"CUDA_VISIBLE_DEVICES": "0,1"}) == {
        "ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": None}
    assert workers.pin("rocm", gpu, {"ROCR_VISIBLE_DEVICES": "2,3,5", "HIP_VISIBLE_DEVICES": "0,2"})[
        "ROCR_VISIBLE_DEVICES"] == "5"
    assert workers.pin("cpu", gpu, {}) == {}


def test_gpus_are_listed_with_their_uuids_from_torchs_properties(monkeypatch):
    monkeypatch.delenv("FLYBENCH_FAKE_GPUS", raising=False)
    props = [SimpleNamespace(name="NVIDIA H200", uuid="4b2c1a9f-8d3e-6f7a-b5c9-2e4d8a1f6c3b"),
             SimpleNamespace(name="NVIDIA H200", uuid=bytes(range(16))), SimpleNamespace(name="NVIDIA H200")]
    cuda = SimpleNamespace(device_count=lambda: 3, get_device_properties=lambda i: props[i])
    device = hardware.Device("cuda", "sm_90", "NVIDIA H200", "h200", "cuda 12", "cuda")
    found = hardware.gpus(device, cuda)
    assert found == [Gpu(0, "NVIDIA H200", "GPU-4b2c1a9f-8d3e-6f7a-b5c9-2e4d8a1f6c3b"),
                     Gpu(1, "NVIDIA H200", "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"), Gpu(2, "NVIDIA H200", "")]
    monkeypatch.setenv("FLYBENCH_FAKE_GPUS", "2")
    assert [g.uuid for g in hardware.gpus(device, cuda)] == ["FAKE-0", "FAKE-1"]


def test_the_per_gpu_check_names_a_gpu_slower_than_the_others():
    def rec(case, gpu, median, run="now"):
        return {**dict(zip(records.KEY_FIELDS, key(case))), "status": "ok", "median_s": median, "run_id": run,
                "gpu": {"index": gpu, "uuid": f"GPU-{gpu}"}}

    history = [rec(f"c{i}", 0, 1.0, run=r) for i in range(18) for r in ("r1", "r2")]
    run = [rec(f"c{i}", i % 3, 1.10 if i % 3 == 2 else 1.0) for i in range(18)]
    found = gpu_check.figures(run, history)
    assert [(f.index, f.cases, f.ratio) for f in found] == [(0, 6, 1.0), (1, 6, 1.0), (2, 6, pytest.approx(1.1))]
    assert [f.index for f in gpu_check.slow(found)] == [2]
    assert "GPU 2 is 1.100x, slower than the others" in gpu_check.lines(found)[-1]
    assert "nothing to compare" in gpu_check.lines(gpu_check.figures(run, []))[0]


# --- merge: shards measured into trees of their own, copied to other folders, merged, read by asv and ingest


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two shards of the fault suite's measurable cases, and the same cases measured unsharded."""
    made = {}
    for name, cases in (("one", ["a", "b", "c"]), ("two", ["d", "e", "f"]), ("whole", list("abcdef"))):
        tmp = tmp_path_factory.mktemp(name)
        run_fault_suite(tmp, cases, 1)
        made[name] = tmp / "results"
    copies = tmp_path_factory.mktemp("copied")
    for name in ("one", "two"):  # as CI artifacts land: each runner's tree in a folder of its own
        shutil.copytree(made[name], copies / f"runner-{name}" / "results")
    return made, copies


def flybench(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flybench", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "FLYBENCH_DEVICE": "cpu"})


def values(tree: Path) -> dict[str, float | None]:
    [path] = [p for p in (tree / "fx").glob("*.json") if p.name != "machine.json"]
    results = Results.load(str(path))
    params = results.get_result_params(BENCHMARK)
    return {eval(combo[0]): value for combo, value in zip(itertools.product(*params),
                                                          results.get_result_value(BENCHMARK, params))}


def test_merged_shards_are_one_results_file_asv_reads_with_nothing_lost_or_duplicated(shards, tmp_path):
    made, copies = shards
    done = flybench("merge", str(copies / "runner-one" / "results"), str(copies / "runner-two" / "results"),
                    "--into", str(tmp_path / "merged"))
    assert done.returncode == 0, done.stderr
    assert "merged 6 measured cases" in done.stdout and "measured twice" not in done.stdout
    merged = values(tmp_path / "merged")
    assert {k: v for k, v in merged.items() if v == v} == {k: v for k, v in values(made["whole"]).items() if v == v}
    assert len([v for v in merged.values() if v == v]) == 6
    [sidecar] = (tmp_path / "merged" / "fx").glob(f"*{records.SUFFIX}")
    found = [r for r in records.read(sidecar)[0] if r["reason"] != DIED]
    assert sorted(r["case"] for r in found) == list("abcdef")
    before = sidecar.read_text()
    again = flybench("merge", str(copies / "runner-one" / "results"), str(copies / "runner-two" / "results"),
                     "--into", str(tmp_path / "merged"))
    assert again.returncode == 0 and sidecar.read_text() == before  # merging again changes nothing
    compare = subprocess.run([sys.executable, "-m", "asv", "show", "--config", str(_config_over(tmp_path)),
                              "--machine", "fx"], capture_output=True, text=True, cwd=tmp_path)
    assert compare.returncode == 0, compare.stderr


def _config_over(tmp_path: Path) -> Path:
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "tests/fixtures/fault_suite"),
                results_dir=str(tmp_path / "merged"), env_dir=str(tmp_path / "env"))
    path = tmp_path / "show.asv.conf.json"
    path.write_text(json.dumps(conf))
    return path


def test_a_case_measured_by_two_shards_keeps_the_later_one_and_says_so(shards, tmp_path):
    made, _ = shards
    rerun = tmp_path / "rerun"  # shard one measured again, slower this time
    shutil.copytree(made["one"], rerun)
    [path] = [p for p in (rerun / "fx").glob("*.json") if p.name != "machine.json"]
    data = json.loads(path.read_text())
    row, columns = data["results"][BENCHMARK], data["result_columns"]
    for column in ("result", "samples"):
        i = columns.index(column)
        row[i] = [None if v is None else [x * 2 for x in v] if isinstance(v, list) else v * 2 for v in row[i]]
    path.write_text(json.dumps(data))
    done = flybench("merge", str(made["whole"]), str(rerun), "--into", str(tmp_path / "merged"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("measured twice: fault.Tiny.track_time(") == 3
    assert f"kept {rerun}" in done.stdout and "fault.Tiny.track_time(a, stub, fp32)" in done.stdout
    assert values(tmp_path / "merged")["a"] == pytest.approx(2 * values(made["whole"])["a"])
    [sidecar] = (tmp_path / "merged" / "fx").glob(f"*{records.SUFFIX}")
    found = [r for r in records.read(sidecar)[0] if r["reason"] != DIED]
    assert sorted(r["case"] for r in found) == list("abcdef")  # the earlier shard's records of a, b, c left out


def test_ingest_of_the_merged_shards_stores_the_rows_of_one_unsharded_run(shards, tmp_path):
    from flybench.store import ingest

    made, copies = shards
    assert flybench("merge", str(copies / "runner-one" / "results"), str(copies / "runner-two" / "results"),
                    "--into", str(tmp_path / "merged")).returncode == 0
    rows = {}
    for name, tree in (("merged", tmp_path / "merged"), ("whole", made["whole"])):
        db = tmp_path / f"{name}.duckdb"
        assert ingest(tree, db, "flybench").ok
        with duckdb.connect(str(db), read_only=True) as con:
            rows[name] = con.execute("SELECT benchmark, params, value, status, reason, samples FROM results "
                                     "ORDER BY benchmark, params").fetchall()
    assert rows["merged"] == rows["whole"] and len(rows["whole"]) >= 6


@pytest.mark.parametrize("argv,message", [
    (["merge", "nowhere", "--into", "out"], "nowhere is not a folder"),
    (["merge", ".", "--into", "out"], "holds no asv results files"),
    (["merge", "out", "--into", "out"], "is both a source and the destination"),
])
def test_bad_input_to_merge_exits_2_with_what_to_do(tmp_path, argv, message):
    (tmp_path / "out").mkdir()
    done = flybench(*argv, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_an_unreadable_results_file_is_bad_input(shards, tmp_path):
    made, _ = shards
    broken = tmp_path / "broken"
    shutil.copytree(made["one"], broken)
    [path] = [p for p in (broken / "fx").glob("*.json") if p.name != "machine.json"]
    path.write_text("{not json")
    done = flybench("merge", str(broken), "--into", str(tmp_path / "out"))
    assert done.returncode == 2 and "is not an asv results file asv can read" in done.stderr
    assert "Traceback" not in done.stderr
