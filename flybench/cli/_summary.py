"""The end-of-run table: every case of this run, its status and its numbers."""

from __future__ import annotations

import json
from pathlib import Path


def run_records(machine_dir: Path, run_id: str) -> list[dict]:
    """Records of one run from the machine's sidecar files, latest per case."""
    latest: dict[tuple, dict] = {}
    for path in sorted(machine_dir.glob("*.cases.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if data.get("run_id") == run_id:
                latest[(data["workload"], data["shape_set"], data["case"], data["provider"], data["dtype"])] = data
    return list(latest.values())


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
