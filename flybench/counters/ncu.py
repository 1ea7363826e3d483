"""NVIDIA's Nsight Compute (`ncu`) as a counter backend.

The case's call runs once under `ncu --clock-control none
--profile-from-start off`: clocks are left as the timing pass had them, and
only the kernels between `cudaProfilerStart` and `cudaProfilerStop` (the
profiled range of flybench.counters.target) are profiled. ncu replays each
kernel for as many passes as its counters need, restoring memory between
passes and flushing the caches before each (its default `--cache-control
all`), so DRAM bytes are those of a cold L2. It writes a report, which
`ncu --import REPORT --csv --page raw --print-units base` turns into one CSV
row per kernel: a header row, a units row, then the kernels, values written
with thousands separators, `n/a` where a counter does not apply.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from flybench.counters._model import Counter, KernelCounters, figures

TOOL = "ncu"
INSTALL_HINT = ("install NVIDIA Nsight Compute (it ships with the CUDA toolkit, or as the nsight-compute package "
                "from NVIDIA's repositories) and put `ncu` on PATH")
REPORT = "counters.ncu-rep"
KERNEL_LIMIT = 256
"""ncu profiles at most this many kernels of one call (plus one, to see that there were more): a host loop over
experts launches thousands, and replaying each would take many minutes."""
DURATION = "gpu__time_duration.sum"

COUNTERS = [
    Counter(DURATION, "ns"),
    Counter("dram__bytes_read.sum", "byte"),
    Counter("dram__bytes_write.sum", "byte"),
    Counter("lts__t_sectors_lookup_hit.sum", "sector"),
    Counter("lts__t_sectors_lookup_miss.sum", "sector"),
    Counter("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "%", "weighted"),
    Counter("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "weighted"),
    Counter("launch__registers_per_thread", "register/thread", "max", fixed=True),
    Counter("launch__shared_mem_per_block_static", "byte/block", "max", fixed=True),
    Counter("launch__shared_mem_per_block_dynamic", "byte/block", "max", fixed=True),
    Counter("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", ""),
    Counter("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", ""),
    Counter("smsp__inst_executed_op_shared_ld.sum", "inst", fixed=True),
    Counter("smsp__inst_executed_op_shared_st.sum", "inst", fixed=True),
    Counter("smsp__inst_executed.sum", "inst", fixed=True),
    Counter("launch__grid_size", "", "max", fixed=True),
    Counter("launch__block_size", "", "max", fixed=True),
]
"""Per kernel: DRAM bytes read and written, L2 hits and misses, tensor-pipe utilisation, achieved occupancy,
registers per thread, shared memory per block, shared-memory bank conflicts and instructions; names as
`ncu --query-metrics` lists them for sm_90 (read on an H200 with Nsight Compute 2025.3)."""


class Ncu:
    tool = TOOL
    install_hint = INSTALL_HINT

    def available(self) -> str | None:
        if shutil.which(TOOL) is None:
            return f"`{TOOL}` (Nsight Compute) is not on PATH: {INSTALL_HINT}"
        return None

    def version(self) -> str:
        done = subprocess.run([TOOL, "--version"], capture_output=True, text=True)
        return parse_version(done.stdout)

    def counters(self, arch: str) -> list[Counter]:
        return COUNTERS

    def commands(self, target: list[str], out_dir: Path, arch: str) -> list[list[str]]:
        return [[TOOL, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
                 "--metrics", ",".join(c.name for c in COUNTERS), "--launch-count", str(KERNEL_LIMIT + 1),
                 "--force-overwrite",
                 "--export", str(out_dir / REPORT), *target]]

    def read(self, out_dir: Path, arch: str) -> list[KernelCounters]:
        done = subprocess.run([TOOL, "--import", str(out_dir / REPORT), "--csv", "--page", "raw",
                               "--print-units", "base"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"ncu --import failed: {(done.stderr or done.stdout).strip()[:300]}")
        (out_dir / "raw.csv").write_text(done.stdout)
        kernels = parse_raw_csv(done.stdout)
        if len(kernels) > KERNEL_LIMIT:
            raise ValueError(f"the call launches more than {KERNEL_LIMIT} kernels (a host loop?): its counters would "
                             "be a partial sum, so none are recorded")
        return kernels

    def derive(self, total: Mapping[str, float], min_bytes: float | None) -> dict[str, float]:
        return derive(total, min_bytes)


def parse_version(text: str) -> str:
    """`Version 2025.3.1.0 (build ...)` -> 2025.3.1.0; the whole first line when it has no version."""
    match = re.search(r"Version\s+(\S+)", text)
    return match.group(1) if match else (text.strip().splitlines() or ["unknown"])[0]


def parse_raw_csv(text: str) -> list[KernelCounters]:
    """The kernels of `ncu --csv --page raw --print-units base` output, in launch order.

    Only the counters in COUNTERS are kept; a value `n/a` (a counter that does
    not apply to the kernel) is left out. Lines before the header (ncu's own
    `==PROF==` messages, should they be mixed in) are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise ValueError("no ncu raw CSV header (a line starting with \"ID\",) in the output")
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    wanted = {c.name for c in COUNTERS}
    kernels = []
    for row in rows:
        if not row.get("ID", "").strip():  # the units row
            continue
        values = {name: number for name in wanted if (number := _number(row.get(name))) is not None}
        duration = values.get(DURATION)
        kernels.append(KernelCounters(row["Kernel Name"], values, duration * 1e-9 if duration is not None else None))
    return kernels


def _number(text: str | None) -> float | None:
    if text is None or not text.strip() or text.strip() == "n/a":
        return None
    return float(text.replace(",", ""))



def derive(total: Mapping[str, float], min_bytes: float | None) -> dict[str, float]:
    """The DERIVED figures from one call's combined ncu counters (bytes, L2 sectors; percentages as fractions)."""
    duration = total.get(DURATION)
    tensor = total.get("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
    occupancy = total.get("sm__warps_active.avg.pct_of_peak_sustained_active")
    return figures(
        duration_s=duration * 1e-9 if duration is not None else None,
        read_bytes=total.get("dram__bytes_read.sum"), write_bytes=total.get("dram__bytes_write.sum"),
        min_bytes=min_bytes,
        l2_hits=total.get("lts__t_sectors_lookup_hit.sum"), l2_misses=total.get("lts__t_sectors_lookup_miss.sum"),
        matrix_busy=tensor / 100 if tensor is not None else None,
        lds_conflicts=_sum(total, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        lds_instructions=_sum(total, "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum"),
        occupancy=occupancy / 100 if occupancy is not None else None)


def _sum(total: Mapping[str, float], *names: str) -> float | None:
    present = [total[n] for n in names if n in total]
    return sum(present) if present else None
