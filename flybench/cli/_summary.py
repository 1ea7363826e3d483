"""The end-of-run table: every case of this run, its status and its numbers."""

from __future__ import annotations

from pathlib import Path

from flybench.measure import record as records


def run_records(machine_dir: Path, run_id: str) -> list[dict]:
    """Records of one run from the machine's case-record files, latest per case."""
    found: dict[tuple, dict] = {}
    for path in sorted(machine_dir.glob(f"*{records.SUFFIX}")):
        found.update(records.latest(records.read(path)[0], run_id))
    return list(found.values())


def print_run_summary(machine_dir: Path, run_id: str) -> None:
    from rich.console import Console
    from rich.table import Table

    records = run_records(machine_dir, run_id)
    table = Table(title=f"{len(records)} cases measured")
    for column in ("workload", "case", "provider", "dtype", "status", "median", "TFLOP/s", "GB/s", "error"):
        table.add_column(column)
    for r in sorted(records, key=lambda r: (r["workload"], r["case"], r["provider"], r["dtype"])):
        median = f"{r['median_s'] * 1e6:.1f} us" if r.get("median_s") else "-"
        rate = f"{r['tflops']:.2f}" if r.get("tflops") else "-"
        gbps = f"{r['gbps']:.1f}" if r.get("gbps") else "-"
        error = f"{r['errors']['out']:.2e}" if "out" in r.get("errors", {}) else "-"
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
        table.add_row(r["workload"], r["case"], r["provider"], r["dtype"], status, median, rate, gbps, error)
    Console().print(table)
