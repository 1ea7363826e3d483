"""The end-of-run table: every case this run measured, its status and its numbers.

Cases a provider cannot run here (unavailable) are counted per provider and
reason under the table instead of a row each. Where stdout is no terminal
(a CI log, a pipe) the table is printed at its full width, so no case name
is cut.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import IO

from flybench.measure import record as records


def run_records(machine_dir: Path, run_id: str) -> list[dict]:
    """Records of one run from the machine's case-record files, latest per case."""
    found: dict[tuple, dict] = {}
    for path in records.files_in(machine_dir):
        found.update(records.latest(records.read(path)[0], run_id))
    return list(found.values())


def print_run_summary(machine_dir: Path, run_id: str, file: IO[str] | None = None) -> None:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from flybench.console import print_rich

    found = run_records(machine_dir, run_id)
    listed = [r for r in found if r["status"] != "unavailable"]
    unavailable = Counter((r["provider"], r.get("reason") or "-") for r in found if r["status"] == "unavailable")
    title = (f"{len(listed)} case{'s' if len(listed) != 1 else ''} measured"
             + (f", {unavailable.total()} unavailable here" if unavailable else ""))
    table = Table(title=title, title_justify="left")
    for column in ("workload", "case", "provider", "dtype", "status", "median", "TFLOP/s", "GB/s", "error"):
        table.add_column(column, overflow="fold")
    for r in sorted(listed, key=lambda r: (r["workload"], r["case"], r["provider"], r["dtype"])):
        median = f"{r['median_s'] * 1e6:.1f} us" if r.get("median_s") else "-"
        rate = f"{r['tflops']:.3g}" if r.get("tflops") else "-"  # a tiny case's 0.0012 read 0.00 with two decimals
        gbps = f"{r['gbps']:.1f}" if r.get("gbps") else "-"
        error = f"{r['errors']['out']:.2e}" if "out" in (r.get("errors") or {}) else "-"
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('reason')}"
        table.add_row(r["workload"], r["case"], r["provider"], r["dtype"], Text(status), median, rate, gbps, error)
    parts = [table]
    if unavailable:
        skipped = Table(title="unavailable here, not measured", title_justify="left")
        for column in ("provider", "cases", "reason"):
            skipped.add_column(column, overflow="fold", justify="right" if column == "cases" else "left")
        for (provider, reason), n in sorted(unavailable.items(), key=lambda item: (-item[1], item[0])):
            skipped.add_row(provider, str(n), Text(reason))
        parts.append(skipped)
    elif not found:
        parts.append(Text(f"no case records of run {run_id} in {machine_dir}"))
    print_rich(Group(*parts), file)
