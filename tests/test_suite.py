"""The asv glue: one measurement per case per run, and a crashed case is reported, not retried."""

import os
import subprocess
import sys
import textwrap

import pytest

from flybench import suite
from flybench.measure.record import find


@pytest.fixture
def run_env(tmp_path, monkeypatch):
    for name, value in {"FLYBENCH_COMMIT": "c0ffee" * 6 + "abcd", "FLYBENCH_ENV_NAME": "existing-py_test",
                        "FLYBENCH_RESULTS_DIR": str(tmp_path), "FLYBENCH_MACHINE": "m", "FLYBENCH_RUN_ID": "r1",
                        "FLYBENCH_DEVICE": "cpu"}.items():
        monkeypatch.setenv(name, value)
    return tmp_path


def test_second_tracked_value_reads_the_first_measurement(run_env, monkeypatch):
    first = suite.measured("gemm", "tiny", "64x48x32", "torch", "bf16")
    monkeypatch.setattr("flybench.measure.case.measure_case", lambda *a, **k: pytest.fail("measured twice"))
    again = suite.measured("gemm", "tiny", "64x48x32", "torch", "bf16")
    assert again.status == "ok" and again.samples_s == first.samples_s
    assert again.commit.startswith("c0ffee") and again.machine == "m"


def test_process_that_dies_while_measuring_is_reported_once(run_env):
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
    sidecar = suite._sidecar()
    record = find(sidecar, "r1", ("gemm", "tiny", "64x48x32", "crash", "bf16"))
    assert record.status == "failed" and record.reason == suite.DIED
    later = suite.measured("gemm", "tiny", "64x48x32", "crash", "bf16")  # no re-run: the placeholder answers
    assert later.reason == suite.DIED


def test_suite_classes_separate_shape_sets_and_skip_unavailable(run_env):
    import benchmarks.gemm as bench

    assert bench.Tiny.workload == bench.Quick.workload == "gemm"
    assert {bench.Tiny.__name__, bench.Quick.__name__, bench.Full.__name__} == {"Tiny", "Quick", "Full"}
    assert set(bench.Quick.params[0]) <= set(bench.Full.params[0])
    instance = bench.Tiny()
    with pytest.raises(NotImplementedError, match="cublas needs an NVIDIA GPU"):
        instance.setup("64x48x32", "cublas", "bf16")
