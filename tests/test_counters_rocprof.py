"""The rocprofv3 backend on a CPU: its passes, its command lines, its CSVs joined per dispatch, its figures.

The CSVs under tests/fixtures/rocprofv3 are written from rocprofv3's documented output format, not
recorded on AMD hardware (none has been reachable); their numbers are made up to be checked by hand.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections import Counter as Tally
from pathlib import Path

import pytest

from flybench import hardware
from flybench.counters import DERIVED, Counter, collect, combine, unavailable_reason
from flybench.counters import rocprof
from flybench.counters.rocprof import Rocprofv3
from flybench.counters.target import profiled_range

FIXTURE = Path(__file__).parent / "fixtures" / "rocprofv3" / "gfx942-two-kernels"
GEMM, ADD = "gemm_kernel(float*, float const*, float const*, int)", "void addition_kernel<float>(float*, float const*, float const*, int, int)"
ROCM = hardware.Device("rocm", "gfx942", "AMD Instinct MI300X", "gfx942", "hip 7.0", "cuda")
ROCPROFV3_FLAGS = {"--marker-trace", "--output-format", "-d", "-o", "--pmc"}
"""The options rocprofv3.py's parser defines that the backend uses (--output-directory, --output-file as -d, -o)."""


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "out")
    return tmp_path / "out"


def _pass_csv(out: Path, n: int) -> Path:
    return out / "rocprofv3" / f"pass_{n}" / "counters_counter_collection.csv"


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_each_pass_fits_the_per_block_limits_and_keeps_each_formula_together(arch):
    passes = rocprof.passes(arch)
    for counters in passes:
        used = Tally(block for c in counters for block in rocprof.blocks(c.name))
        assert all(n <= rocprof.BLOCK_LIMITS[block] for block, n in used.items()), used
        assert used["TCC"] <= 4  # L2 (TCC): four a pass
    names = [c.name for counters in passes for c in counters]
    assert sorted(names) == sorted(c.name for group in rocprof.groups(arch) for c in group)  # each once
    where = {c.name: n for n, counters in enumerate(passes) for c in counters}
    for together in (["TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum", "TCC_BUBBLE_sum"],
                     ["TCC_EA0_WRREQ_sum", "TCC_EA0_WRREQ_64B_sum"], ["TCC_HIT_sum", "TCC_MISS_sum"],
                     ["SQ_INSTS_LDS", "SQ_LDS_BANK_CONFLICT"]):
        assert len({where[name] for name in together}) == 1, together
    assert len(passes) == 3
    assert ("SQ_INSTS_VALU_MFMA_MOPS_F6F4" in names) == (arch == "gfx950")


def test_packing_is_first_fit_and_refuses_what_no_pass_holds():
    a, b, c = Counter("TCC_A", ""), Counter("TCC_B", ""), Counter("SQ_C", "")
    assert rocprof.pack([(a, b), (c,), (Counter("TCC_D", ""),)], {"TCC": 2, "SQ": 1}) == [[a, b, c], [Counter("TCC_D", "")]]
    with pytest.raises(ValueError, match="more"):
        rocprof.pack([(a, b)], {"TCC": 1})
    with pytest.raises(ValueError, match="no per-pass limit for block XYZ"):
        rocprof.pack([(Counter("XYZ_E", ""),)], {"TCC": 4})
    mfma = rocprof.pack([(Counter("MfmaUtil", "%"),), (Counter("OccupancyPercent", "%"),)], {"SQ": 8, "GRBM": 1})
    assert len(mfma) == 2  # each takes GRBM_GUI_ACTIVE from the GRBM block


def test_command_lines_use_rocprofv3s_own_flags_and_mark_the_roctx_range(tmp_path):
    target = [sys.executable, "-m", "flybench.counters.target", "--status", "S.json", "moe", "quick", "c", "flydsl", "fp8"]
    commands = Rocprofv3().commands(target, tmp_path, "gfx942")
    assert len(commands) == len(rocprof.passes("gfx942"))
    for n, (command, counters) in enumerate(zip(commands, rocprof.passes("gfx942")), 1):
        split = command.index("--")
        options, program = command[:split], command[split + 1:]
        assert options[0] == "rocprofv3"
        assert {word for word in options if word.startswith("-")} == ROCPROFV3_FLAGS
        assert options[options.index("--output-format") + 1] == "csv"
        assert options[options.index("-d") + 1] == str(tmp_path / "rocprofv3" / f"pass_{n}")
        assert options[options.index("-o") + 1] == "counters"
        assert options[options.index("--pmc") + 1:] == [c.name for c in counters]  # --pmc takes words up to --
        assert program == [*target, "--range", "roctx"]


def test_the_target_marks_the_range_with_roctx_and_says_when_it_cannot():
    if any(Path(p, "librocprofiler-sdk-roctx.so.1").exists() for p in ("/opt/rocm/lib", "/usr/lib")):
        pytest.skip("ROCTx is installed here")
    with pytest.raises(OSError, match="librocprofiler-sdk-roctx"):
        profiled_range("roctx")


def test_only_the_dispatches_between_the_roctx_calls_are_kept():
    text = _pass_csv(FIXTURE, 1).read_text()
    assert text.count('"SQ_WAVES"') == 8  # three warm-up calls and the profiled one, two kernels each
    within = rocprof.parse_range((FIXTURE / "rocprofv3" / "pass_1" / "counters_marker_api_trace.csv").read_text())
    assert within == (41, 44)
    kernels = rocprof.parse_counter_collection(text, {"SQ_WAVES"}, within)
    assert [k.values["SQ_WAVES"] for k in kernels] == [1024, 16384]  # not the warm-ups' 2055, 32775


def test_a_range_that_is_not_one_resume_then_one_pause_is_refused():
    header = '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
    resume = '"MARKER_CONTROL_API","roctxProfilerResume",1,1,4,10,20\n'
    with pytest.raises(ValueError, match="Resume at \\[4\\] and Pause at none"):
        rocprof.parse_range(header + resume)
    with pytest.raises(ValueError, match="no column Correlation_Id"):
        rocprof.parse_range(header.replace("Correlation_Id", "Id") + resume)


def test_the_passes_are_joined_dispatch_by_dispatch():
    kernels = Rocprofv3().read(FIXTURE, "gfx942")
    assert [k.name for k in kernels] == [GEMM, ADD]
    gemm = kernels[0]
    assert gemm.values["TCC_EA0_RDREQ_sum"] == 1000  # pass 1, Dispatch_Id 41
    assert gemm.values["TCC_HIT_sum"] == 3000  # pass 2, Dispatch_Id 57
    assert gemm.values["TCC_REQ_sum"] == 5000  # pass 3, Dispatch_Id 41
    assert gemm.values["SQ_INSTS_VALU_MFMA_MOPS_BF16"] == 0  # written 0.00000000e+00
    assert (gemm.values["VGPR_Count"], gemm.values["Accum_VGPR_Count"], gemm.values["LDS_Block_Size"]) == (128, 128, 65536)
    assert gemm.values["Kernel_Duration"] == 9000 and gemm.duration_s == pytest.approx(9e-6)  # the shortest pass
    assert kernels[1].duration_s == pytest.approx(3e-6)
    wanted = {c.name for c in Rocprofv3().counters("gfx942")}
    assert set(gemm.values) <= wanted and wanted - set(gemm.values) == set()


def test_derived_figures_on_hand_checked_numbers():
    backend = Rocprofv3()
    total = combine(backend.read(FIXTURE, "gfx942"), backend.counters("gfx942"))
    assert total["VGPR_Count"] == 128 and total["SGPR_Count"] == 96 and total["Grid_Size"] == 1048576  # max
    assert total["SQ_WAVES"] == 1024 + 16384  # sum
    read = (128 * 400 + 64 * (1000 - 400 - 100) + 32 * 100) + (128 * 200 + 64 * (600 - 200 - 0) + 32 * 0)
    write = (64 * 200 + 32 * (300 - 200)) + (64 * 400 + 32 * (400 - 400))
    assert (read, write) == (137_600, 41_600)
    figures = backend.derive(total, min_bytes=(read + write) / 4)
    assert figures["hbm_read_bytes"] == read and figures["hbm_write_bytes"] == write
    assert figures["hbm_bytes"] == read + write and figures["hbm_over_min"] == pytest.approx(4.0)
    assert figures["duration_s"] == pytest.approx(12_000e-9)
    assert figures["hbm_gbps"] == pytest.approx(179_200 / 12_000e-9 / 1e9)
    assert figures["l2_hit_rate"] == pytest.approx(3100 / 4800)
    assert figures["matrix_busy"] == pytest.approx((50 * 9000 + 0 * 3000) / 12_000 / 100)
    assert figures["occupancy"] == pytest.approx((25 * 9000 + 50 * 3000) / 12_000 / 100)
    assert figures["lds_conflicts_per_instruction"] == pytest.approx(500 / 2000)
    assert set(figures) == set(DERIVED)
    assert "hbm_over_min" not in backend.derive(total, min_bytes=None)
    assert "hbm_read_bytes" not in backend.derive({k: v for k, v in total.items() if k != "TCC_BUBBLE_sum"}, None)


def test_a_dispatch_without_a_requested_counter_is_refused(tmp_path):
    out = _copy(tmp_path)
    path = _pass_csv(out, 2)
    path.write_text("".join(line for line in path.read_text().splitlines(True)
                            if '"TCC_MISS_sum"' not in line or ',58,"Agent 1"' not in line))
    with pytest.raises(ValueError, match=r"dispatch 58 \(void addition_kernel.*has no TCC_MISS_sum"):
        Rocprofv3().read(out, "gfx942")
    with pytest.raises(ValueError, match="has no SQ_INSTS_VALU_MFMA_MOPS_F6F4"):  # gfx950's pass 2 asks for more
        Rocprofv3().read(FIXTURE, "gfx950")


@pytest.mark.parametrize("edit, message", [
    (lambda text: text.replace('"Counter_Value",', '"Value",'), "no column Counter_Value"),
    (lambda text: text.replace("3000.000000", "lots", 1), "line 58: could not convert string to float: 'lots'"),
    (lambda text: text.replace(",5202000175000,5202000184000", ",5202000184000,5202000175000"),
     "line 56: dispatch 57 ends before it starts"),
    (lambda text: "\n".join(text.splitlines()[:-1]) + "\n" + text.splitlines()[-2] + "\n", "has SQ_INSTS_VMEM_RD twice"),
])
def test_a_malformed_file_says_what_is_wrong(tmp_path, edit, message):
    out = _copy(tmp_path)
    path = _pass_csv(out, 2)
    path.write_text(edit(path.read_text()))
    with pytest.raises(ValueError, match=message):
        Rocprofv3().read(out, "gfx942")


def test_passes_that_counted_other_kernels_are_refused(tmp_path):
    out = _copy(tmp_path)
    path = _pass_csv(out, 3)
    path.write_text("".join(line for line in path.read_text().splitlines(True) if "addition_kernel" not in line))
    with pytest.raises(ValueError, match="pass 3 counted other kernels than pass 1: 1 dispatches"):
        Rocprofv3().read(out, "gfx942")


def test_no_file_is_no_kernel_but_a_pass_without_one_is_an_error(tmp_path):
    assert Rocprofv3().read(tmp_path, "gfx942") == []  # rocprofv3 writes nothing when nothing was dispatched
    out = _copy(tmp_path)
    _pass_csv(out, 2).unlink()
    with pytest.raises(ValueError, match="no counter_collection CSV for pass 2"):
        Rocprofv3().read(out, "gfx942")
    out = _copy(tmp_path / "again")
    (out / "rocprofv3" / "pass_3" / "counters_marker_api_trace.csv").unlink()
    with pytest.raises(ValueError, match="no marker_api_trace CSV for pass 3.*--marker-trace"):
        Rocprofv3().read(out, "gfx942")


def _fake_tool(where: Path, script: str) -> None:
    where.mkdir(exist_ok=True)
    tool = where / "rocprofv3"
    tool.write_text(f"#!{sys.executable}\n{script}")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


def test_a_missing_tool_is_named_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    reason = unavailable_reason(ROCM)
    assert "rocprofv3" in reason and "rocprofiler-sdk" in reason and "install" in reason
    _fake_tool(tmp_path / "bin", "")
    assert Rocprofv3().available() is None


def test_version_from_rocprofv3s_version_lines():
    # rocprofv3.py main() prints f"    {key:>16}: {value}" for each of its CONST_VERSION_INFO keys
    text = "".join(f"    {key:>16}: {value}\n" for key, value in [("version", "1.0.0"), ("git_revision", "abc"),
                                                                 ("rocm_version", "7.0.0")])
    assert rocprof.parse_version(text) == "1.0.0 (ROCm 7.0.0)"
    assert rocprof.parse_version("") == "unknown"  # before ROCm 7.0: no --version (an error on stderr)


FAKE_ROCPROFV3 = f"""
import shutil, subprocess, sys
from pathlib import Path
args = sys.argv[1:]
if args == ["--version"]:
    print("             version: 1.0.0")
    sys.exit(0)
split = args.index("--")
out = Path(args[args.index("-d") + 1])
out.mkdir(parents=True, exist_ok=True)
for written in (Path({str(FIXTURE)!r}) / "rocprofv3" / out.name).iterdir():
    shutil.copy(written, out / written.name.replace("counters", args[args.index("-o") + 1], 1))
sys.exit(subprocess.run(args[split + 1:]).returncode)
"""
"""A stand-in for rocprofv3 that writes the fixture's pass files where -d and -o say, then runs the target."""


def test_the_pass_runs_the_target_under_each_command_and_reads_the_figures(tmp_path, monkeypatch):
    _fake_tool(tmp_path / "bin", FAKE_ROCPROFV3)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FLYBENCH_DEVICE", "cpu")  # the target runs the gated call, without a range on a CPU
    [record] = collect([("moe", "tiny", "tiny-h64-i32-e16k4-t1", "torch", "bf16")], Rocprofv3(), ROCM,
                       tmp_path / "x.counters.jsonl", run_id="r", commit="c", env="e", machine="m",
                       min_bytes=lambda key: 179_200.0)
    assert record.status == "ok", record.reason
    assert record.tool == "rocprofv3" and record.tool_version == "1.0.0" and [k["name"] for k in record.kernels] == [GEMM, ADD]
    assert record.derived["hbm_bytes"] == 179_200 and record.derived["hbm_over_min"] == pytest.approx(1.0)
    assert record.counters["SQ_INSTS_LDS"] == ["inst", "sum", True]
