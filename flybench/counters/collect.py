"""The counter pass of `flybench run --counters`: every case that passed its gate, once under the profiler.

It runs after the timing pass, one profiler process per case
(flybench.counters.target), and appends one counter record per case
(flybench.counters.record) beside the run's results. It never writes
timing samples. A case the profiler fails on is recorded as failed with
the profiler's last lines, and the pass goes on.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path

from flybench import hardware
from flybench.counters import record as counter_records
from flybench.counters._model import Backend, Counter, combine
from flybench.counters.record import CounterRecord
from flybench.measure.record import CaseKey

TIMEOUT_S = 900.0
"""One case under the profiler: kernel replay multiplies a call's time by the passes its counters need."""


def backend_for(device: hardware.Device) -> Backend | None:
    """The profiler of this device's vendor; None on a CPU."""
    if device.kind == "cuda":
        from flybench.counters.ncu import Ncu

        return Ncu()
    if device.kind == "rocm":
        from flybench.counters.rocprof import Rocprofv3

        return Rocprofv3()
    return None


def unavailable_reason(device: hardware.Device) -> str | None:
    """Why no counter pass can run here (no profiler for a CPU, the tool missing), else None."""
    backend = backend_for(device)
    if backend is None:
        return f"no hardware-counter profiler for a {device.kind} device"
    return backend.available()


def collect(keys: Iterable[CaseKey], backend: Backend, device: hardware.Device, out: Path, *, run_id: str,
            commit: str, env: str, machine: str, min_bytes: Callable[[CaseKey], float | None],
            progress: Callable[[CaseKey, CounterRecord], None] = lambda key, record: None) -> list[CounterRecord]:
    """Profile each case and append its record to `out`; returns the records in order."""
    version = backend.version()
    counters = backend.counters(device.arch)
    done = []
    for key in keys:
        record = CounterRecord(run_id, *key, status="ok", tool=backend.tool, tool_version=version, arch=device.arch,
                               counters={c.name: [c.unit, c.aggregate, c.fixed] for c in counters},
                               commit=commit, env=env, machine=machine,
                               started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                               contract={"pass": "counters", "timing_samples": 0, "after": "timing pass",
                                         "clock_control": "none", "calls_profiled": 1})
        _profile(record, key, backend, counters, device, min_bytes(key))
        counter_records.append(out, record)
        progress(key, record)
        done.append(record)
    return done


def _profile(record: CounterRecord, key: CaseKey, backend: Backend, counters: list[Counter],
             device: hardware.Device, min_bytes: float | None) -> None:
    with tempfile.TemporaryDirectory(prefix="flybench-counters-") as tmp:
        where = Path(tmp)
        status = where / "status.json"
        target = [sys.executable, "-m", "flybench.counters.target", "--status", str(status), *key]
        for command in backend.commands(target, where, device.arch):
            try:
                ran = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                record.status, record.reason = "failed", f"{backend.tool} did not finish in {TIMEOUT_S:.0f} s"
                return
            if ran.returncode != 0 or not status.is_file():
                tail = " | ".join((ran.stderr or ran.stdout).strip().splitlines()[-3:])
                record.status, record.reason = "failed", f"{backend.tool} exited {ran.returncode}: {tail}"[:600]
                return
            gate = json.loads(status.read_text())
            if gate["status"] != "ok":
                record.status, record.reason = gate["status"], gate["reason"]
                return
        try:
            kernels = backend.read(where, device.arch)
        except (OSError, ValueError, RuntimeError) as exc:
            record.status, record.reason = "failed", f"reading {backend.tool}'s output: {exc}"[:600]
            return
    if not kernels:
        record.status, record.reason = "failed", f"{backend.tool} saw no kernel in the profiled call"
        return
    record.kernels = [asdict(k) for k in kernels]
    record.total = combine(kernels, counters)
    record.min_bytes = min_bytes
    record.derived = backend.derive(record.total, min_bytes)
