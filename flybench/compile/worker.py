"""`python -m flybench.compile.worker JOBS OUT`: compile a batch of cases for one backend and one target.

Why a separate process: FlyDSL's kernels read the target from the
environment when they are built, a crashing compiler must not take the
caller (an asv benchmark, the CLI) down with it, and importing torch and
flydsl costs seconds, so one process compiles a whole batch. The parent
(`flybench.compile.runner`) sets the environment, watches for timeouts and
deaths, and restarts a worker for the jobs that were left.

JOBS is a JSON list of {"case", "arch", "key", "cache_root", "checkout",
"source", "toolchain"}; OUT gets one JSON line per event ({"start": i},
{"done": i}), written and flushed as it happens, so the parent always knows
which job was running. Each record and its ISA land in the compile cache
before "done" is written.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

from flybench.compile import cache
from flybench.compile.record import CompileRecord
from flybench.compile.registry import KernelCase


def run_job(job: dict[str, Any], log: Path) -> CompileRecord:
    """Compile one job with its backend's driver and store the outcome in the cache."""
    case = KernelCase(**{**job["case"], "arches": tuple(job["case"]["arches"])})
    if case.backend == "flydsl":
        from flybench.compile import flydsl_driver

        record, files = flydsl_driver.compile_case(case, job["arch"], job.get("checkout"), log)
    else:
        from flybench.compile import triton_driver

        record, files = triton_driver.compile_case(case, job["arch"], log)
    record.key, record.toolchain, record.source = job["key"], job["toolchain"], job["source"]
    record.created_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record.isa_file = next(iter(files), None)
    cache.store(Path(job["cache_root"]), record, files)
    return record


def warm_up(job: dict[str, Any], log: Path) -> None:
    """Compile a throwaway kernel first, so one-time start-up (loading the compiler's libraries, building
    its contexts) is not charged to the compile time of whichever kernel happens to come first."""
    if job["case"]["backend"] == "flydsl":
        from flybench.compile import flydsl_driver

        flydsl_driver.warm_up(log)
    else:
        from flybench.compile import triton_driver

        triton_driver.warm_up(job["arch"], log)


def main(argv: list[str]) -> int:
    jobs_path, out_path = Path(argv[0]), Path(argv[1])
    jobs = json.loads(jobs_path.read_text())
    if jobs:
        try:
            warm_up(jobs[0], out_path.with_name(f"{out_path.stem}.warmup.log"))
        except Exception as exc:
            print(f"warm-up compile failed, first compile time includes start-up: {exc!r}", file=sys.stderr)
    with out_path.open("a") as out:
        for index, job in enumerate(jobs):
            out.write(json.dumps({"start": index}) + "\n")
            out.flush()
            run_job(job, out_path.with_name(f"{out_path.stem}.job{index}.log"))
            out.write(json.dumps({"done": index}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
