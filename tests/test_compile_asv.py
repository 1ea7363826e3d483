"""A real asv run of the compile suite (own kernels), its tracked values, and their way into DuckDB.

Shares the compile cache of tests/test_compile.py when both run in one
session, so asv's `setup_cache` finds the compiles done; alone it compiles
them itself (about 40 s more).
"""

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from asv.results import Results

from flybench import envvars
from flybench.compile import registry, runner

ROOT = Path(__file__).resolve().parents[1]
KERNELS = "flydsl_vector_add|triton_matmul_bf16"
BENCH = [rf"^compile_metrics\.Amd\.track_\w+\('({KERNELS})', 'gfx9(42|50)'\)$",
         r"^compile_metrics\.Nvidia\.track_\w+\('triton_matmul_bf16', 'sm_90'\)$",
         r"^compile_metrics\.Amd\.track_vgprs\('(flash_attn_gfx950:causal|moe_gemm_2stage:stage1_decode)', 'gfx942'\)$"]


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def asv_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("asv-compile")
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"), results_dir=str(tmp / "results"),
                env_dir=str(tmp / "env"))
    config = tmp / "asv.conf.json"
    config.write_text(json.dumps(conf))
    env = {k: v for k, v in os.environ.items() if k != envvars.FLYDSL_SRC}  # checkout kernels: n/a, not compiled
    env[envvars.COMPILE_CACHE] = str(tmp_path_factory.getbasetemp() / "compile-cache")
    env["ASV_PYTHONPATH"] = str(ROOT)
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--config", str(config), "--machine",
                    "cpu-compile"], cwd=tmp, env=env, capture_output=True, check=True)
    command = [sys.executable, "-m", "asv", "run", "--config", str(config), "--python=same", "--set-commit-hash",
               _head(), "--machine", "cpu-compile", "--show-stderr"]
    for pattern in BENCH:
        command += ["--bench", pattern]
    done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    return tmp, done, env


def _values(tmp: Path) -> dict[tuple[str, str, str], float | None]:
    [path] = [p for p in (tmp / "results" / "cpu-compile").glob("*.json") if p.name != "machine.json"]
    results = Results.load(str(path))
    found = {}
    for name in results.get_all_result_keys():
        params = results.get_result_params(name)
        for combo, value in zip(itertools.product(*params), results.get_result_value(name, params)):
            found[(name.rsplit(".", 1)[-1], *(eval(p) for p in combo))] = value
    return found


def test_asv_run_tracks_each_metric_with_its_unit(asv_run):
    tmp, done, _ = asv_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    benchmarks = json.loads((tmp / "results" / "benchmarks.json").read_text())
    units = {name.rsplit(".", 1)[-1]: b["unit"] for name, b in benchmarks.items() if name.startswith("compile_metrics")}
    assert units["track_vgprs"] == "registers" and units["track_lds_static"] == "bytes"
    assert units["track_occupancy"] == "waves" and units["track_mfma"] == "instructions"
    assert units["track_compile_time"] == "seconds" and units["track_spill_bytes"] == "bytes"
    assert benchmarks["compile_metrics.Amd.track_vgprs"]["param_names"] == ["kernel", "arch"]


def test_tracked_values_equal_the_compile_records(asv_run):
    tmp, _, env = asv_run
    values = _values(tmp)
    os.environ[envvars.COMPILE_CACHE], previous = env[envvars.COMPILE_CACHE], os.environ.get(envvars.COMPILE_CACHE)
    try:
        records = {(r.kernel, r.arch): r for r in runner.measure(
            [(registry.get_case(k), a) for k in ("flydsl_vector_add", "triton_matmul_bf16")
             for a in ("gfx942", "gfx950")]
            + [(registry.get_case("triton_matmul_bf16"), "sm_90")])}
    finally:
        os.environ.pop(envvars.COMPILE_CACHE) if previous is None else os.environ.__setitem__(envvars.COMPILE_CACHE, previous)
    for (kernel, arch), record in records.items():
        for metric in ("vgprs", "sgprs", "lds_dynamic", "occupancy", "mfma", "ds_read_b64_tr", "code_size") \
                if not arch.startswith("sm_") else ("registers", "smem_dynamic", "code_size"):
            assert values[(f"track_{metric}", kernel, arch)] == record.metrics[metric], (kernel, arch, metric)
    assert values[("track_ds_read_b64_tr", "triton_matmul_bf16", "gfx950")] > 0
    assert values[("track_ds_read_b64_tr", "triton_matmul_bf16", "gfx942")] == 0
    assert values[("track_vgprs", "flydsl_vector_add", "gfx950")] > 0


def test_not_applicable_and_unavailable_are_skipped_with_their_reason(asv_run):
    tmp, done, _ = asv_run
    values = _values(tmp)
    assert math.isnan(values[("track_vgprs", "flash_attn_gfx950:causal", "gfx942")])
    assert math.isnan(values[("track_vgprs", "moe_gemm_2stage:stage1_decode", "gfx942")])
    output = done.stdout + done.stderr
    assert "not applicable: its own guard rejects other targets" in output
    assert "unavailable: the FlyDSL checkout kernels need a FlyDSL source checkout" in output


def test_tracked_values_flow_into_the_results_table(asv_run, tmp_path):
    from flybench.store import ingest
    from flybench.store.db import connect

    tmp, _, _ = asv_run
    report = ingest(tmp / "results", tmp_path / "db.duckdb", subject="flybench")
    assert report.ok, report.summary()
    with connect(tmp_path / "db.duckdb", read_only=True) as conn:
        rows = conn.execute("SELECT benchmark, params, unit, value, status FROM results WHERE benchmark LIKE "
                            "'compile_metrics.%'").fetchall()
    by_key = {(b, json.loads(p)["kernel"], json.loads(p)["arch"]): (u, v, s) for b, p, u, v, s in rows}
    unit, value, status = by_key[("compile_metrics.Amd.track_vgprs", "flydsl_vector_add", "gfx942")]
    assert (unit, status) == ("registers", "ok") and value > 0
    assert by_key[("compile_metrics.Amd.track_vgprs", "flash_attn_gfx950:causal", "gfx942")][2] == "unavailable"
