"""AMD's rocprofv3 (ROCm's rocprofiler-sdk) as a counter backend. Not yet run on AMD hardware.

The case's call runs once per pass under

    rocprofv3 --marker-trace --output-format csv -d OUT/rocprofv3/pass_N -o counters --pmc A B ... -- TARGET --range roctx

One pass is one run of the target process: the hardware counts only so many
events per block at once (`passes`), and rocprofv3 fails a `--pmc` set
that does not fit one pass rather than replaying the kernel.

The range. rocprofv3 takes no range from hipProfilerStart/Stop, and its
counter collection runs in a context of its own that is started at launch
and that neither `--selected-regions` nor `roctxProfilerPause`/`Resume`
stop (rocprofiler-sdk's tool.cpp: those pause only the tracing context): it
counts every dispatch, warm-ups included. So flybench.counters.target marks
the call with `roctxProfilerResume(0)`/`roctxProfilerPause(0)` (`--range
roctx`), `--marker-trace` records both calls, and `read` keeps the
dispatches whose Correlation_Id lies between theirs: internal correlation
ids come from one process-wide counter, drawn by each marker call and each
dispatch as it is enqueued (context/correlation_id.cpp, marker.cpp,
hsa/queue.cpp).

Each pass writes, under its `-d`, `counters_counter_collection.csv` and
`counters_marker_api_trace.csv` (`<-o>_<domain>.csv`; generateCSV.cpp). The
first has one row per (dispatch, counter), with the columns Correlation_Id,
Dispatch_Id, Agent_Id, Queue_Id, Process_Id, Thread_Id, Grid_Size,
Kernel_Id, Kernel_Name, Workgroup_Size, LDS_Block_Size, Scratch_Size,
VGPR_Count, Accum_VGPR_Count, SGPR_Count, Counter_Name, Counter_Value,
Start_Timestamp, End_Timestamp (ns); a counter's value is summed over the
hardware instances it has (XCDs, shader engines, L2 channels). The second
has Domain, Function, Process_Id, Thread_Id, Correlation_Id,
Start_Timestamp, End_Timestamp, one row per ROCTx call. Passes run in
separate processes, so their ids differ; their dispatches are joined in
launch order, and must be the same kernels.

Counter names are those of rocprofiler-sdk's counter_defs.yaml for gfx942
and gfx950 (ROCm/rocm-systems, projects/rocprofiler-sdk, August 2025).
"""

from __future__ import annotations

import csv
import io
import math
import re
import shutil
import subprocess
from collections import Counter as Tally
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from flybench.counters._model import Counter, KernelCounters, figures

TOOL = "rocprofv3"
INSTALL_HINT = ("install ROCm's rocprofiler-sdk package (`apt install rocprofiler-sdk` or `dnf install "
                "rocprofiler-sdk`; this backend follows ROCm 7.0's rocprofv3) and put /opt/rocm/bin on PATH")
OUTPUT = "rocprofv3"  # under the pass's out_dir: pass_1, pass_2, ...
PREFIX = "counters"  # rocprofv3 -o: the files are counters_counter_collection.csv, counters_marker_api_trace.csv
RANGE = ["--range", "roctx"]  # flybench.counters.target marks the range with ROCTx

BLOCK_LIMITS = {"SQ": 8, "TCC": 4, "TCP": 4, "TA": 2, "TD": 2, "GRBM": 2, "SPI": 6, "CPC": 2, "CPF": 2}
"""Counters one pass may take from each hardware block, the same on gfx942 and gfx950: rocprof-compute's
perfmon_config (src/utils/mi_gpu_spec.yaml, copied from aqlprofile's gfx9_block_info.h), which its pass
planner (soc_base.py CounterFile) applies to a counter by the block its name starts with."""

DERIVED_BLOCKS = {"MfmaUtil": ("SQ", "GRBM"), "OccupancyPercent": ("SQ", "GRBM")}
"""rocprofiler-sdk's derived counters used here, by the blocks of the basic counters in their expressions."""

DURATION = Counter("Kernel_Duration", "ns")
"""End_Timestamp - Start_Timestamp of the dispatch, the shortest of the passes (each pass runs it again)."""

DISPATCH = [
    Counter("VGPR_Count", "register", "max", fixed=True),
    Counter("Accum_VGPR_Count", "register", "max", fixed=True),
    Counter("SGPR_Count", "register", "max", fixed=True),
    Counter("LDS_Block_Size", "byte/workgroup", "max", fixed=True),
    Counter("Scratch_Size", "byte/work-item", "max", fixed=True),
    Counter("Grid_Size", "work-item", "max", fixed=True),
    Counter("Workgroup_Size", "work-item", "max", fixed=True),
]
"""The kernel's launch properties, columns of every row (ROCm 6.4 added Accum_VGPR_Count: kept when present)."""


def _mfma_ops(*types: str) -> list[tuple[Counter, ...]]:
    return [(Counter(f"SQ_INSTS_VALU_MFMA_MOPS_{t}", "512 op", fixed=True),) for t in types]


GROUPS: list[tuple[Counter, ...]] = [
    # HBM read bytes: 128-byte requests are TCC_BUBBLE, 32-byte ones TCC_EA0_RDREQ_32B, the rest of TCC_EA0_RDREQ
    # are 64-byte (rocprofiler-sdk's FETCH_SIZE on gfx942 and gfx950; rocprof-compute's "L2-Fabric Read BW").
    # TCC_BUBBLE is not in issue 18's list: without it gfx942/gfx950's 128-byte reads would count as 64.
    # TCC_EA0_RDREQ_DRAM, the EA reads bound for DRAM (not another die or IO), shares their pass to be compared.
    (Counter("TCC_EA0_RDREQ_sum", "request"), Counter("TCC_EA0_RDREQ_32B_sum", "request"),
     Counter("TCC_BUBBLE_sum", "request"), Counter("TCC_EA0_RDREQ_DRAM_sum", "request")),
    # HBM write bytes: TCC_EA0_WRREQ_64B are 64-byte, the rest of TCC_EA0_WRREQ 32-byte (WRITE_SIZE, both archs).
    (Counter("TCC_EA0_WRREQ_sum", "request"), Counter("TCC_EA0_WRREQ_64B_sum", "request")),
    (Counter("TCC_HIT_sum", "request"), Counter("TCC_MISS_sum", "request")),
    (Counter("TCC_REQ_sum", "request"),),
    (Counter("MfmaUtil", "%", "weighted"), Counter("SQ_VALU_MFMA_BUSY_CYCLES", "cycle")),
    (Counter("SQ_INSTS_LDS", "inst", fixed=True), Counter("SQ_LDS_BANK_CONFLICT", "cycle")),
    (Counter("OccupancyPercent", "%", "weighted"),),
    (Counter("SQ_WAVES", "wave", fixed=True),),
    (Counter("SQ_INSTS_MFMA", "inst", fixed=True),),
    # The math the MFMAs do, per type (ops / 512); the per-type instruction counts (SQ_INSTS_VALU_MFMA_F16, ...)
    # are left out: they would take SQ slots for what SQ_INSTS_MFMA and these already say.
    *_mfma_ops("F16", "BF16", "F32", "F8"),
    (Counter("SQ_INSTS_VMEM_RD", "inst", fixed=True),),
    (Counter("SQ_INSTS_VMEM_WR", "inst", fixed=True),),
]
"""What one pass must collect together (a formula combines them), in the order passes are filled."""

ARCH_GROUPS: dict[str, list[tuple[Counter, ...]]] = {"gfx950": _mfma_ops("F6F4")}
"""Counters of one architecture only: FP6/FP4 MFMAs are gfx950's (counter_defs.yaml has no gfx942 definition)."""


class Rocprofv3:
    tool = TOOL
    install_hint = INSTALL_HINT

    def available(self) -> str | None:
        if shutil.which(TOOL) is None:
            return f"`{TOOL}` is not on PATH: {INSTALL_HINT}"
        return None

    def version(self) -> str:
        done = subprocess.run([TOOL, "--version"], capture_output=True, text=True)
        return parse_version(done.stdout)

    def counters(self, arch: str) -> list[Counter]:
        return [DURATION, *(c for group in groups(arch) for c in group), *DISPATCH]

    def commands(self, target: list[str], out_dir: Path, arch: str) -> list[list[str]]:
        return [[TOOL, "--marker-trace", "--output-format", "csv", "-d", str(pass_dir(out_dir, n)), "-o", PREFIX,
                 "--pmc", *(c.name for c in counters), "--", *target, *RANGE]
                for n, counters in enumerate(passes(arch), 1)]

    def read(self, out_dir: Path, arch: str) -> list[KernelCounters]:
        planned = passes(arch)
        files = [_pass_file(pass_dir(out_dir, n), "counter_collection") for n in range(1, len(planned) + 1)]
        if all(f is None for f in files):
            return []  # rocprofv3 writes no file when no dispatch was counted
        missing = [n for n, f in enumerate(files, 1) if f is None]
        if missing:
            raise ValueError(f"rocprofv3 wrote no counter_collection CSV for pass {missing[0]} under "
                             f"{pass_dir(out_dir, missing[0])}, but did for others")
        counted = []
        for n, (path, counters) in enumerate(zip(files, planned), 1):
            markers = _pass_file(pass_dir(out_dir, n), "marker_api_trace")
            if markers is None:
                raise ValueError(f"no marker_api_trace CSV for pass {n} under {pass_dir(out_dir, n)}: "
                                 "the range's ROCTx calls were not recorded (rocprofv3 --marker-trace)")
            within = parse_range(markers.read_text(), str(markers))
            counted.append(parse_counter_collection(path.read_text(), {c.name for c in counters}, within, str(path)))
        return join(counted)

    def derive(self, total: Mapping[str, float], min_bytes: float | None) -> dict[str, float]:
        return derive(total, min_bytes)


def groups(arch: str) -> list[tuple[Counter, ...]]:
    """The counter groups collected on `arch` (names checked for gfx942 and gfx950 only)."""
    return GROUPS + ARCH_GROUPS.get(arch, [])


def passes(arch: str) -> list[list[Counter]]:
    """The counters of each pass on `arch`."""
    return pack(groups(arch), BLOCK_LIMITS)


def blocks(name: str) -> tuple[str, ...]:
    """The hardware blocks a counter takes a slot of: the one its name starts with, or its expression's."""
    return DERIVED_BLOCKS.get(name, (name.split("_")[0],))


def pack(groups: Sequence[tuple[Counter, ...]], limits: Mapping[str, int]) -> list[list[Counter]]:
    """Groups into passes, first fit in order: a group goes whole into the first pass with room in every block."""
    packed: list[tuple[list[Counter], Tally[str]]] = []
    for group in groups:
        need = Tally(block for counter in group for block in blocks(counter.name))
        unknown = sorted(set(need) - set(limits))
        if unknown:
            raise ValueError(f"no per-pass limit for block {unknown[0]} (of {[c.name for c in group]})")
        if any(n > limits[block] for block, n in need.items()):
            raise ValueError(f"{[c.name for c in group]} need more {dict(need)} than one pass holds {dict(limits)}")
        for counters, used in packed:
            if all(used[block] + n <= limits[block] for block, n in need.items()):
                counters.extend(group)
                used.update(need)
                break
        else:
            packed.append((list(group), need))
    return [counters for counters, _ in packed]


def pass_dir(out_dir: Path, n: int) -> Path:
    return out_dir / OUTPUT / f"pass_{n}"


def _pass_file(where: Path, domain: str) -> Path | None:
    """The pass's CSV of one domain, wherever under its -d rocprofv3 put it (an input file's passes get pmc_N/)."""
    found = sorted(where.rglob(f"*{domain}.csv")) if where.is_dir() else []
    if len(found) > 1:
        raise ValueError(f"more than one {domain} CSV under {where}: {[str(f) for f in found]}")
    return found[0] if found else None


def parse_version(text: str) -> str:
    """`rocprofv3 --version` (ROCm 7.0+) prints `key: value` lines: `1.0.0 (ROCm 7.0.0)` from its version and
    rocm_version; `unknown` without them (rocprofv3 before ROCm 7.0 has no --version)."""
    fields = dict(re.findall(r"^\s*(\w+):\s*(\S.*?)\s*$", text, re.MULTILINE))
    if "version" not in fields:
        return "unknown"
    rocm = fields.get("rocm_version")
    return f"{fields['version']} (ROCm {rocm})" if rocm else fields["version"]


def _rows(text: str, columns: Sequence[str], source: str) -> csv.DictReader:
    reader = csv.DictReader(io.StringIO(text))
    absent = [c for c in columns if c not in (reader.fieldnames or [])]
    if absent:
        raise ValueError(f"{source}: no column {', '.join(absent)} (header: {reader.fieldnames})")
    return reader


def parse_range(text: str, source: str = "marker_api_trace.csv") -> tuple[int, int]:
    """The Correlation_Ids of the range's roctxProfilerResume and roctxProfilerPause, from a marker_api_trace CSV."""
    calls: dict[str, list[int]] = {"roctxProfilerResume": [], "roctxProfilerPause": []}
    for line, row in enumerate(_rows(text, ("Function", "Correlation_Id"), source), 2):
        if row["Function"] in calls:
            try:
                calls[row["Function"]].append(int(row["Correlation_Id"]))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{source} line {line}: {exc}") from None
    (resume, pause) = calls.values()
    if len(resume) != 1 or len(pause) != 1 or not resume[0] < pause[0]:
        raise ValueError(f"{source}: the range is one roctxProfilerResume, then one roctxProfilerPause; found "
                         f"Resume at {resume or 'none'} and Pause at {pause or 'none'}")
    return resume[0], pause[0]


REQUIRED = ("Correlation_Id", "Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value", "Start_Timestamp",
            "End_Timestamp")


def parse_counter_collection(text: str, requested: Collection[str], within: tuple[int, int],
                             source: str = "counter_collection.csv") -> list[KernelCounters]:
    """The dispatches of one pass's counter_collection CSV enqueued inside the range, in launch order.

    `within` is the range's (Resume, Pause) correlation ids. Every dispatch must carry every `requested`
    counter; rows of other counters are not kept. A value that is not finite (a derived counter dividing
    by zero) is left out, as ncu's `n/a` is.
    """
    dispatches: dict[int, KernelCounters] = {}
    seen: dict[int, set[str]] = {}
    for line, row in enumerate(_rows(text, REQUIRED, source), 2):
        try:
            if not within[0] < int(row["Correlation_Id"]) < within[1]:
                continue
            dispatch = int(row["Dispatch_Id"])
            value = float(row["Counter_Value"])
            start, end = int(row["Start_Timestamp"]), int(row["End_Timestamp"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{source} line {line}: {exc}") from None
        name = row["Counter_Name"]
        kernel = dispatches.get(dispatch)
        if kernel is None:
            if end < start:
                raise ValueError(f"{source} line {line}: dispatch {dispatch} ends before it starts")
            kernel = dispatches[dispatch] = KernelCounters(row["Kernel_Name"], _launch(row, source, line),
                                                           (end - start) * 1e-9)
            kernel.values[DURATION.name] = end - start
            seen[dispatch] = set()
        elif kernel.name != row["Kernel_Name"]:
            raise ValueError(f"{source} line {line}: dispatch {dispatch} is {kernel.name!r} and {row['Kernel_Name']!r}")
        if name in seen[dispatch]:
            raise ValueError(f"{source} line {line}: dispatch {dispatch} has {name} twice")
        seen[dispatch].add(name)
        if name in requested and math.isfinite(value):
            kernel.values[name] = value
    for dispatch, names in seen.items():
        lacking = sorted(set(requested) - names)
        if lacking:
            raise ValueError(f"{source}: dispatch {dispatch} ({dispatches[dispatch].name}) has no {', '.join(lacking)}")
    return [dispatches[d] for d in sorted(dispatches)]


def _launch(row: Mapping[str, str | None], source: str, line: int) -> dict[str, float]:
    values = {}
    for counter in DISPATCH:
        text = row.get(counter.name)
        if text is None or not text.strip():
            continue
        try:
            values[counter.name] = float(text)
        except ValueError:
            raise ValueError(f"{source} line {line}: {counter.name} {text!r} is not a number") from None
    return values


def join(passes: Sequence[list[KernelCounters]]) -> list[KernelCounters]:
    """One KernelCounters per dispatch from every pass's: the n-th dispatch of each pass is the same launch."""
    first = passes[0]
    for n, other in enumerate(passes[1:], 2):
        if [k.name for k in other] != [k.name for k in first]:
            raise ValueError(f"pass {n} counted other kernels than pass 1: {_names(other)} against {_names(first)}")
    joined = []
    for launches in zip(*passes):
        values = {name: value for launch in launches for name, value in launch.values.items()}
        shortest = min(launch.values[DURATION.name] for launch in launches)
        values[DURATION.name] = shortest
        joined.append(KernelCounters(launches[0].name, values, shortest * 1e-9))
    return joined


def _names(kernels: list[KernelCounters]) -> str:
    names = ", ".join(k.name[:40] for k in kernels[:4])
    return f"{len(kernels)} dispatches ({names}{', ...' if len(kernels) > 4 else ''})"


def read_bytes(total: Mapping[str, float]) -> float | None:
    """Bytes L2 read over its fabric (EA) interface: 128 * TCC_BUBBLE + 64 * (TCC_EA0_RDREQ - TCC_BUBBLE -
    TCC_EA0_RDREQ_32B) + 32 * TCC_EA0_RDREQ_32B, rocprofiler-sdk's FETCH_SIZE (in bytes, not KiB) on gfx942 and
    gfx950 and rocprof-compute's L2-Fabric Read (0200_system_speed_of_light.yaml, both archs)."""
    if any(name not in total for name in ("TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum", "TCC_BUBBLE_sum")):
        return None
    requests, small, large = total["TCC_EA0_RDREQ_sum"], total["TCC_EA0_RDREQ_32B_sum"], total["TCC_BUBBLE_sum"]
    return 128 * large + 64 * (requests - large - small) + 32 * small


def write_bytes(total: Mapping[str, float]) -> float | None:
    """Bytes L2 wrote over its fabric interface: 64 * TCC_EA0_WRREQ_64B + 32 * (TCC_EA0_WRREQ - TCC_EA0_WRREQ_64B),
    rocprofiler-sdk's WRITE_SIZE (in bytes) on gfx942 and gfx950 and rocprof-compute's L2-Fabric Write."""
    if "TCC_EA0_WRREQ_sum" not in total or "TCC_EA0_WRREQ_64B_sum" not in total:
        return None
    requests, large = total["TCC_EA0_WRREQ_sum"], total["TCC_EA0_WRREQ_64B_sum"]
    return 64 * large + 32 * (requests - large)


def derive(total: Mapping[str, float], min_bytes: float | None) -> dict[str, float]:
    """The DERIVED figures from one call's combined rocprofv3 counters.

    - hbm_*: the L2's fabric traffic (`read_bytes`, `write_bytes`); on a single GPU reading its own memory that
      is HBM traffic, though MI300's Infinity Cache (MALL) hits, past the fabric, are counted in it too.
    - l2_hit_rate: TCC_HIT / (TCC_HIT + TCC_MISS), rocprof-compute's L2 Cache Hit Rate.
    - matrix_busy: MfmaUtil / 100, rocprofiler-sdk's SQ_VALU_MFMA_BUSY_CYCLES / (GRBM_GUI_ACTIVE * SIMD_NUM), the
      same as rocprof-compute's MFMA Utilization (busy cycles over GUI-active cycles of 4 SIMDs per CU).
    - lds_conflicts_per_instruction: SQ_LDS_BANK_CONFLICT / SQ_INSTS_LDS; the counter is cycles the LDS stalled
      on bank conflicts, so this is conflict cycles per LDS instruction.
    - occupancy: OccupancyPercent / 100, rocprofiler-sdk's 400 * SQ_WAVE_CYCLES / GRBM_GUI_ACTIVE / CU_NUM / 32
      (wave quad-cycles over the cycles of 32 wave slots per CU).
    """
    percent = {name: total[name] / 100 for name in ("MfmaUtil", "OccupancyPercent") if name in total}
    return figures(duration_s=total[DURATION.name] * 1e-9 if DURATION.name in total else None,
                   read_bytes=read_bytes(total), write_bytes=write_bytes(total), min_bytes=min_bytes,
                   l2_hits=total.get("TCC_HIT_sum"), l2_misses=total.get("TCC_MISS_sum"),
                   matrix_busy=percent.get("MfmaUtil"), lds_conflicts=total.get("SQ_LDS_BANK_CONFLICT"),
                   lds_instructions=total.get("SQ_INSTS_LDS"), occupancy=percent.get("OccupancyPercent"))
