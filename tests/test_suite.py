"""The asv glue: one benchmark per case, its record beside the run's results, a crash reported once."""

import os
import subprocess
import sys
import textwrap

import pytest

from flybench import envvars, run_identity, suite
from flybench.measure import record as records

RUN = {envvars.COMMIT: "c0ffee" * 6 + "abcd", envvars.ENV_NAME: "existing-py_test", envvars.MACHINE: "m",
       envvars.RUN_ID: "r1", envvars.DEVICE: "cpu"}


@pytest.fixture
def run_env(tmp_path, monkeypatch):
    for name, value in {**RUN, envvars.RESULTS_DIR: str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    return tmp_path


def case_file(results_dir) -> "Path":  # noqa: F821
    return records.path_for(results_dir, "m", RUN[envvars.COMMIT], RUN[envvars.ENV_NAME])


def test_a_case_is_measured_once_and_recorded_with_its_counts(run_env):
    record = suite.measured("gemm", "tiny", "64x48x32", "torch", "bf16")
    found, warnings = records.read(case_file(run_env))
    assert warnings == [] and [r["reason"] for r in found] == [suite.DIED, None]  # placeholder, then the record
    last = found[-1]
    assert last["status"] == "ok" and last["version"] == records.FORMAT_VERSION and last["run_id"] == "r1"
    assert last["commit"].startswith("c0ffee") and last["machine"] == "m" and last["env"] == "existing-py_test"
    assert last["flops"] == 2 * 64 * 48 * 32 and last["bytes"] > 0 and last["measure_s"] > 0
    assert last["tflops"] == pytest.approx(last["flops"] / record.median_s / 1e12)
    assert last["contract"]["graph"] is False  # the CPU has no device graph


def test_the_suite_has_one_tracked_value_per_case(run_env):
    import benchmarks.attention as bench

    methods = sorted(name for name in dir(bench.Quick) if name.startswith(("track_", "time_")))
    assert methods == ["track_time"] and bench.Quick.param_names == ["case", "provider", "dtype"]
    instance = bench.Tiny()
    instance.setup("B2S64H4Hkv2D128_causal", "torch", "bf16")
    result = instance.track_time()
    assert result["number"] == 1 and len(result["samples"]) >= 5 and min(result["samples"]) > 0


def test_a_failed_case_has_no_time_and_says_why(run_env, monkeypatch):
    failed = records.CaseRecord("r1", "gemm", "tiny", "c", "torch", "bf16", "failed", reason="wrong result: NaN")
    monkeypatch.setattr(suite, "measured", lambda *a: failed)
    import benchmarks.gemm as bench

    instance = bench.Tiny()
    instance.setup("64x48x32", "torch", "bf16")
    with pytest.raises(RuntimeError, match="wrong result: NaN"):
        instance.track_time()


def test_process_that_dies_while_measuring_is_reported(run_env):
    crash = textwrap.dedent("""
        import os
        from flybench import providers, suite
        from flybench.providers.base import Provider

        class Crash(Provider):
            name, workloads, description = "crash", frozenset({"gemm"}), "dies"
            def unavailable_reason(self, *a): return None
            def build(self, *a): return lambda: os._exit(3)

        providers.get_provider("torch")
        providers.register(Crash())
        suite.measured("gemm", "tiny", "64x48x32", "crash", "bf16")
    """)
    assert subprocess.run([sys.executable, "-c", crash], env=os.environ.copy()).returncode == 3
    found, _ = records.read(case_file(run_env))
    last = records.latest(found, "r1")[("gemm", "tiny", "64x48x32", "crash", "bf16")]
    assert last["status"] == "failed" and last["reason"] == suite.DIED


def test_unavailable_provider_is_skipped_with_its_reason(run_env):
    import benchmarks.gemm as bench

    with pytest.raises(NotImplementedError, match="cublas needs an NVIDIA GPU"):
        bench.Tiny().setup("64x48x32", "cublas", "bf16")
    assert {bench.Tiny.__name__, bench.Quick.__name__, bench.Full.__name__} == {"Tiny", "Quick", "Full"}
    assert set(bench.Quick.params[0]) <= set(bench.Full.params[0])


def test_outside_any_run_nothing_is_recorded(tmp_path, monkeypatch):
    for name in (*RUN, envvars.RESULTS_DIR, "ASV_ENV_NAME", "ASV_CONF_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(envvars.DEVICE, "cpu")
    assert run_identity.current() is None
    assert suite.measured("gemm", "tiny", "64x48x32", "torch", "bf16").status == "ok"
    assert not list(tmp_path.rglob("*.cases.jsonl"))
