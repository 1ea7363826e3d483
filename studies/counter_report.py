"""The counter pass's figures as the markdown tables of docs/counters.md.

    python -m studies.counter_report results/flybench/dev-h200/<commit8>-<env>.counters.jsonl \
        [--kernels CASE/PROVIDER ...]

One row per case with the derived figures (flybench.counters.DERIVED), and,
for each `--kernels` case, one row per kernel of its profiled call: time
under the profiler, DRAM bytes, L2 hit rate, tensor-pipe busy, achieved
occupancy, registers, shared memory and grid.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flybench.counters import DERIVED, format_figure
from flybench.counters import record as counter_records
from flybench.measure import record as case_records

SHOWN = ("hbm_bytes", "hbm_over_min", "hbm_gbps", "l2_hit_rate", "matrix_busy", "occupancy",
         "lds_conflicts_per_instruction")


def case_table(records: list[dict]) -> str:
    head = ["workload", "case", "provider", "kernels", *(DERIVED[n].label for n in SHOWN)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in sorted(records, key=lambda r: (r["workload"], r["case"], r["provider"])):
        figures = [format_figure(n, r["derived"].get(n)) if n != "hbm_gbps" else f"{r['derived'].get(n, 0):,.0f}"
                   for n in SHOWN]
        lines.append("| " + " | ".join([r["workload"], r["case"], r["provider"], str(len(r["kernels"])), *figures])
                     + " |")
    return "\n".join(lines)


def kernel_table(record: dict) -> str:
    head = ["kernel", "us", "DRAM read MB", "DRAM write MB", "L2 hit", "tensor busy", "occupancy", "regs",
            "smem KB", "grid"]
    lines = [f"{record['case']}, {record['provider']}:", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for kernel in record["kernels"]:
        v = kernel["values"]
        hits, misses = v.get("lts__t_sectors_lookup_hit.sum", 0), v.get("lts__t_sectors_lookup_miss.sum", 0)
        smem = v.get("launch__shared_mem_per_block_dynamic", 0) + v.get("launch__shared_mem_per_block_static", 0)
        lines.append("| " + " | ".join([
            f"`{kernel['name'][:48]}`", f"{v.get('gpu__time_duration.sum', 0) / 1e3:.1f}",
            f"{v.get('dram__bytes_read.sum', 0) / 1e6:.1f}", f"{v.get('dram__bytes_write.sum', 0) / 1e6:.1f}",
            f"{hits / (hits + misses):.0%}" if hits + misses else "-",
            f"{v.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active', 0):.0f}%",
            f"{v.get('sm__warps_active.avg.pct_of_peak_sustained_active', 0):.0f}%",
            f"{v.get('launch__registers_per_thread', 0):.0f}", f"{smem / 1024:.0f}",
            f"{v.get('launch__grid_size', 0):.0f}"]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--kernels", action="append", default=[], help="CASE/PROVIDER: its per-kernel table")
    args = parser.parse_args()
    found, warnings = counter_records.read(args.path)
    latest = list(case_records.latest(found).values())
    ok = [r for r in latest if r["status"] == "ok"]
    print(case_table(ok))
    for wanted in args.kernels:
        case, provider = wanted.rsplit("/", 1)
        for r in ok:
            if (r["case"], r["provider"]) == (case, provider):
                print("\n" + kernel_table(r))
    for line in warnings + [f"{r['case']} {r['provider']}: {r['status']}: {r['reason']}" for r in latest
                            if r["status"] != "ok"]:
        print(line)


if __name__ == "__main__":
    main()
