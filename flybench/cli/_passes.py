"""What the passes after a run's timing share (`--counters`, `--roles`): the cases they take, and a line per case.

A pass takes the cases the run's timing pass measured as ok (their case
records), so a wrong result is never profiled or traced, and runs each once
more in a process of its own; the timing results stand whatever it finds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flybench.cli._summary import run_records
from flybench.measure import record as case_records
from flybench.measure.record import CaseKey


def measured_ok(results_dir: Path, machine: str, run_id: str, workload: str | None = None) -> list[CaseKey]:
    """The keys of this run's cases that passed their gate and were timed (of `workload`, if given), sorted."""
    return sorted(case_records.key_of(r) for r in run_records(results_dir / machine, run_id)
                  if r["status"] == "ok" and workload in (None, r["workload"]))


def progress(total: int, outcome: Callable[[Any], str]) -> Callable[[CaseKey, Any], None]:
    """A reporter printing `[n/total] <case key>: <outcome>` as each case ends, with the record's reason."""
    count = iter(range(1, total + 1))

    def report(key: CaseKey, record: Any) -> None:
        print(f"  [{next(count)}/{total}] {' '.join(key)}: {outcome(record)}"
              + (f" ({record.reason})" if record.reason else ""), flush=True)
    return report
