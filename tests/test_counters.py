"""The counter pass: ncu's output parsed, counters combined over a call, derived figures, records, the pass."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flybench import hardware
from flybench.counters import DERIVED, Counter, KernelCounters, collect, combine, format_figure, unavailable_reason
from flybench.counters import ncu
from flybench.counters import record as counter_records

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
CUDA = hardware.Device("cuda", "sm_90", "NVIDIA H200", "h200", "cuda 13.0", "cuda")
CPU = hardware.Device("cpu", "cpu", "x86_64", "cpu", "", "cpu")


def test_parses_the_kernels_of_recorded_ncu_output():
    kernels = ncu.parse_raw_csv((FIXTURES / "h200-torch-matmul-sdpa.raw.csv").read_text())
    assert [k.name[:20] for k in kernels] == ["nvjet_sm90_tst_256x1", "cudnn_generated_fort"]
    gemm = kernels[0]
    assert gemm.values["dram__bytes_read.sum"] == 148_591_872  # "148,591,872" in the file
    assert gemm.values["launch__registers_per_thread"] == 168
    assert gemm.duration_s == pytest.approx(176.8e-6)
    assert set(gemm.values) <= {c.name for c in ncu.COUNTERS}  # device attributes and the rest are not kept


def test_ncu_output_without_its_header_is_refused():
    with pytest.raises(ValueError, match="header"):
        ncu.parse_raw_csv("==PROF== Disconnected from process 1\n")


def test_combine_sums_counts_takes_the_largest_launch_and_weighs_rates_by_time():
    counters = [Counter("bytes", "byte"), Counter("regs", "register", "max"), Counter("busy", "%", "weighted")]
    kernels = [KernelCounters("a", {"bytes": 100, "regs": 32, "busy": 90}, 3e-6),
               KernelCounters("b", {"bytes": 50, "regs": 128, "busy": 10}, 1e-6)]
    assert combine(kernels, counters) == {"bytes": 150, "regs": 128, "busy": pytest.approx(70)}
    assert combine(kernels, [Counter("absent", "")]) == {}


def test_derived_figures_from_the_recorded_call():
    kernels = ncu.parse_raw_csv((FIXTURES / "h200-torch-matmul-sdpa.raw.csv").read_text())
    total = combine(kernels, ncu.COUNTERS)
    moved = 148_591_872 + 28_003_072 + 67_151_104 + 49_656_576
    figures = ncu.derive(total, min_bytes=moved / 2)
    assert figures["hbm_bytes"] == moved
    assert figures["hbm_over_min"] == pytest.approx(2.0)
    assert figures["duration_s"] == pytest.approx((176_800 + 226_176) * 1e-9)
    assert figures["hbm_gbps"] == pytest.approx(moved / ((176_800 + 226_176) * 1e-9) / 1e9)
    hits, misses = 23_127_230 + 27_238_599, 8_824_512 + 3_945_967
    assert figures["l2_hit_rate"] == pytest.approx(hits / (hits + misses))
    conflicts, shared = 929 + 124_081 + 0 + 376_735, 262_524 + 32_958 + 17_440 + 2_180
    assert figures["lds_conflicts_per_instruction"] == pytest.approx(conflicts / shared)
    weighted = (94.88 * 176_800 + 69.03 * 226_176) / (176_800 + 226_176) / 100
    assert figures["matrix_busy"] == pytest.approx(weighted)
    assert set(figures) <= set(DERIVED)
    assert "hbm_over_min" not in ncu.derive(total, min_bytes=None)


def test_ncu_never_changes_clocks_and_profiles_only_the_marked_range(tmp_path):
    [command] = ncu.Ncu().commands(["python", "-m", "target"], tmp_path, "sm_90")
    assert command[:5] == ["ncu", "--clock-control", "none", "--profile-from-start", "off"]
    assert command[-3:] == ["python", "-m", "target"]
    metrics = command[command.index("--metrics") + 1].split(",")
    assert "dram__bytes_read.sum" in metrics and "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum" in metrics


def test_version_line():
    assert ncu.parse_version("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (build 1)\n") \
        == "2025.3.1.0"


def test_figures_read_as_a_person_reads_them():
    assert format_figure("hbm_bytes", 1.38e9) == "1.38 GB"
    assert format_figure("hbm_bytes", 2.5e8) == "250.0 MB"
    assert format_figure("l2_hit_rate", 0.8123) == "81.2%"
    assert format_figure("hbm_over_min", 1.5) == "1.5x"
    assert format_figure("matrix_busy", None) == "-"


def test_missing_profiler_names_the_tool_and_how_to_install_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    reason = unavailable_reason(CUDA)
    assert "ncu" in reason and "install" in reason and "Nsight Compute" in reason
    assert "cpu" in unavailable_reason(CPU)


class _Replay:
    """A backend that runs the target without a profiler and 'reads' fixed kernels: the pass's plumbing."""

    tool, install_hint = "replay", ""

    def __init__(self, fail: bool = False):
        self.fail = fail

    def available(self):
        return None

    def version(self):
        return "0"

    def counters(self, arch):
        return [Counter("bytes", "byte"), Counter("insts", "inst", fixed=True)]

    def commands(self, target, out_dir, arch):
        return [[sys.executable, "-c", "import sys; sys.exit(3)"]] if self.fail else [target]

    def read(self, out_dir, arch):
        return [KernelCounters("k", {"bytes": 2e6, "insts": 10}, 1e-6)]

    def derive(self, total, min_bytes):
        return {"hbm_bytes": total["bytes"], "hbm_over_min": total["bytes"] / min_bytes}


def test_the_pass_records_each_case_and_never_a_timing_sample(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYBENCH_DEVICE", "cpu")
    out = tmp_path / "abc12345-env.counters.jsonl"
    keys = [("moe", "tiny", "tiny-h64-i32-e16k4-t1", "torch", "bf16"), ("moe", "tiny", "tiny-h64-i32-e16k4-t1", "triton", "bf16")]
    seen = []
    records = collect(keys, _Replay(), CPU, out, run_id="r1", commit="abc12345" * 5, env="env", machine="m",
                      min_bytes=lambda key: 1e6, progress=lambda key, record: seen.append(key))
    assert seen == keys
    torch_case, triton_case = records
    assert torch_case.status == "ok" and torch_case.derived == {"hbm_bytes": 2e6, "hbm_over_min": 2.0}
    assert torch_case.contract["timing_samples"] == 0 and torch_case.contract["clock_control"] == "none"
    assert triton_case.status == "unavailable" and "GPU" in triton_case.reason  # the gate said so, in the target
    stored, warnings = counter_records.read(out)
    assert not warnings and [r["provider"] for r in stored] == ["torch", "triton"]
    assert stored[0]["counters"]["insts"] == ["inst", "sum", True]


def test_a_profiler_failure_is_recorded_and_the_pass_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYBENCH_DEVICE", "cpu")
    out = tmp_path / "x.counters.jsonl"
    [record] = collect([("moe", "tiny", "tiny-h64-i32-e16k4-t1", "torch", "bf16")], _Replay(fail=True), CPU, out, run_id="r",
                       commit="c", env="e", machine="m", min_bytes=lambda key: None)
    assert record.status == "failed" and "replay exited 3" in record.reason


def test_a_torn_or_foreign_line_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "x.counters.jsonl"
    counter_records.append(path, counter_records.CounterRecord("r", "moe", "tiny", "c", "torch", "bf16", "ok"))
    good = json.loads(path.read_text())
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "version": 9}) + "\n{\"torn")
    found, warnings = counter_records.read(path)
    assert len(found) == 1 and len(warnings) == 2 and "upgrade flybench" in warnings[0]


def test_a_run_and_its_counter_pass_need_no_store():
    """`flybench run --counters` runs on measuring machines that have no DuckDB (the store is for ingest)."""
    import subprocess

    code = ("import sys, flybench.cli.run, flybench.cli._summary, flybench.cli._counters, flybench.counters.target; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('duckdb', 'orjson') "
            "or m.startswith('flybench.store')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_flybench_case_profiled_on_the_h200_gives_its_two_kernels():
    kernels = ncu.parse_raw_csv((FIXTURES / "h200-triton-diffusion-p64.raw.csv").read_text())
    assert [k.name for k in kernels] == ["diffusion_attention_fwd", "combine_splits"]
    total = combine(kernels, ncu.COUNTERS)
    assert total["dram__bytes_read.sum"] == 97_621_504 + 21_141_760
    assert total["gpu__time_duration.sum"] == 53_824 + 8_320
