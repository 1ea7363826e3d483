"""The counter pass of `flybench run --counters`: which cases, progress, and the table at the end.

The cases are those the run's timing pass measured as ok (their case
records), so a wrong result is never profiled. Without the profiler the
pass says which tool is missing and how to install it, and the run's
timing results stand.
"""

from __future__ import annotations

from pathlib import Path

from flybench import hardware
from flybench.cli._passes import measured_ok, progress
from flybench.counters import backend_for, collect, format_figure, unavailable_reason
from flybench.counters import record as counter_records
from flybench.measure.record import CaseKey

SHOWN = ("hbm_bytes", "hbm_over_min", "l2_hit_rate", "matrix_busy", "lds_conflicts_per_instruction")


def counter_pass(results_dir: Path, machine: str, commit: str, env: str, run_id: str) -> int:
    """Profile the run's ok cases; returns how many counter records were written."""
    device = hardware.detect()
    reason = unavailable_reason(device)
    if reason:
        print(f"counters: not collected: {reason}. The timing results above stand.", flush=True)
        return 0
    keys = measured_ok(results_dir, machine, run_id)
    if not keys:
        print("counters: no case of this run passed its gate, so none is profiled", flush=True)
        return 0
    out = counter_records.path_for(results_dir, machine, commit, env)
    backend = backend_for(device)
    print(f"counters: {len(keys)} cases under {backend.tool} (one profiled call each, "
          f"after warm-up; no timing samples) -> {out}", flush=True)
    records = collect(keys, backend, device, out, run_id=run_id, commit=commit, env=env, machine=machine,
                      min_bytes=_min_bytes, progress=progress(len(keys), _outcome))
    _print_table(records)
    return len(records)


def _min_bytes(key: CaseKey) -> float | None:
    from flybench.workloads import get_workload

    workload_name, _, case, _, dtype = key
    workload = get_workload(workload_name)
    return workload.min_bytes(workload.case(case), dtype) or None


def _outcome(record) -> str:
    return record.status if record.status != "ok" else f"{len(record.kernels)} kernels"


def _print_table(records) -> None:
    from rich.table import Table

    from flybench.console import print_rich

    tools = sorted({f"{r.tool} {r.tool_version}" for r in records})
    table = Table(title=f"hardware counters (one call each, {', '.join(tools)})", title_justify="left")
    for column in ("case", "provider", "dtype", "kernels", *SHOWN):
        table.add_column(column, overflow="fold")
    for r in records:
        if r.status != "ok":
            table.add_row(r.case, r.provider, r.dtype, r.status, *[""] * len(SHOWN))
            continue
        figures = [format_figure(n, r.derived.get(n)) for n in SHOWN]
        table.add_row(r.case, r.provider, r.dtype, str(len(r.kernels)), *figures)
    print_rich(table)
