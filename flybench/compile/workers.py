"""Running compile workers: a few at a time, each watched for a hang or a death.

A batch is the list of jobs for one (backend, target). Its worker reports
{"start": i} and {"done": i} as it goes. When the worker exits before
finishing, or a job runs past the timeout (the worker's process group is
killed), the job it was on is recorded as failed with that reason, and a
fresh worker is started on the jobs after it. No job is ever retried, so a
kernel that crashes the compiler costs one crash, not an endless loop.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from collections.abc import Callable

from flybench.compile import cache
from flybench.compile.record import CompileRecord

POLL_S = 0.2


@dataclass
class Batch:
    backend: str
    arch: str
    jobs: list[dict]
    env: dict[str, str]
    timeout_s: float
    next: int = 0  # first job not yet finished
    proc: subprocess.Popen | None = None
    out: Path | None = None
    log: IO | None = None
    running: int | None = None
    since: float = 0.0
    seen: int = 0  # lines of `out` already read
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="flybench-compile-")))

    @property
    def finished(self) -> bool:
        return self.next >= len(self.jobs) and self.proc is None


def run_batches(batches: list[Batch], parallel: int, root: Path,
                progress: Callable[[str], None] | None = None) -> None:
    """Run every batch to completion with at most `parallel` workers alive at once."""
    say = progress or (lambda _: None)
    queue, active = list(batches), []
    total = sum(len(b.jobs) for b in batches)
    count = {"done": 0}

    def finished(batch: Batch, before: int) -> None:
        """A line per kernel ended: which, and how many are done and left of this run's compiles."""
        for index in range(before, batch.next):
            count["done"] += 1
            say(f"compiled {_name(batch, index)} for {batch.arch}: {count['done']} of {total} done, "
                f"{total - count['done']} left")
    while queue or active:
        while queue and len(active) < max(parallel, 1):
            batch = queue.pop(0)
            _start(batch)
            active.append(batch)
        time.sleep(POLL_S)
        for batch in list(active):
            before = batch.next
            _poll(batch, root, say)
            finished(batch, before)
            if batch.finished:
                active.remove(batch)
                shutil.rmtree(batch.workdir, ignore_errors=True)
            elif batch.proc is None:
                _start(batch)


def _start(batch: Batch) -> None:
    jobs = batch.workdir / f"jobs{batch.next}.json"
    jobs.write_text(json.dumps(batch.jobs[batch.next:]))
    batch.out = batch.workdir / f"events{batch.next}.jsonl"
    batch.out.touch()
    batch.log = (batch.workdir / f"worker{batch.next}.log").open("ab")
    batch.proc = subprocess.Popen([sys.executable, "-m", "flybench.compile.worker", str(jobs), str(batch.out)],
                                  env=batch.env, stdout=batch.log, stderr=subprocess.STDOUT, start_new_session=True)
    batch.seen, batch.running = 0, None


def _poll(batch: Batch, root: Path, say: Callable[[str], None]) -> None:
    offset = _base(batch)
    lines = batch.out.read_text().splitlines()
    for line in lines[batch.seen:]:
        event = json.loads(line)
        if "start" in event:
            batch.running, batch.since = offset + event["start"], time.monotonic()
            say(f"compiling {_name(batch, batch.running)} for {batch.arch}")
        elif "done" in event:
            batch.next, batch.running = offset + event["done"] + 1, None
    batch.seen = len(lines)
    code = batch.proc.poll()
    if code is None and batch.running is not None and time.monotonic() - batch.since > batch.timeout_s:
        os.killpg(batch.proc.pid, signal.SIGKILL)
        batch.proc.wait()
        _give_up(batch, root, f"the compile did not finish within {batch.timeout_s:.0f} s and was stopped")
    elif code is not None:
        if batch.next < len(batch.jobs):
            stopped = f"signal {-code}" if code < 0 else f"exit status {code}"
            _give_up(batch, root, f"the compiler process died ({stopped}) while compiling this kernel; "
                                  f"last output: {_tail(batch)}")
        _close(batch)


def _base(batch: Batch) -> int:
    """Index of the first job of the current worker (its events count from 0)."""
    return int(batch.out.stem.removeprefix("events"))


def _give_up(batch: Batch, root: Path, reason: str) -> None:
    """Record the job in progress (or the next one, if the worker died between jobs) as failed, then move on."""
    index = batch.running if batch.running is not None else batch.next
    job = batch.jobs[index]
    record = CompileRecord(job["case"]["name"], batch.arch, "failed", reason, key=job["key"],
                           toolchain=job["toolchain"], source=job["source"], config=job["case"]["config"],
                           created_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    cache.store(root, record, {})
    batch.next = index + 1
    _close(batch)


def _close(batch: Batch) -> None:
    if batch.proc is not None and batch.proc.poll() is None:
        batch.proc.wait()
    if batch.log is not None:
        batch.log.close()
    batch.proc, batch.log, batch.running = None, None, None


def _tail(batch: Batch) -> str:
    """The last non-empty line the worker printed, for the failure reason."""
    logs = sorted(batch.workdir.glob("*.log"), key=lambda p: p.stat().st_mtime)
    for path in reversed(logs):
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
        if lines:
            return lines[-1][:300]
    return "(nothing)"


def _name(batch: Batch, index: int) -> str:
    return batch.jobs[index]["case"]["name"] if index < len(batch.jobs) else "?"
