"""Ingest's parse workers end with the ingest that started them, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the workers are forked on Linux only")

# An ingest's readers, started as ingest starts them, then the process waits as if writing a batch.
CHILD = """
import importlib, sys, time
readers = importlib.import_module("flybench.store.ingest")._Readers({}, files=1000)
if not readers.parallel:
    print("serial", flush=True)
    sys.exit(0)
print(" ".join(str(p) for p in readers._pool._processes), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (an orphan may wait for a reaper that never comes)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_workers_exit_when_ingest_is_killed(how: signal.Signals) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().strip()
        if line == "serial":
            pytest.skip("one core: ingest reads in its own process")
        workers = [int(pid) for pid in line.split()]
        assert workers and all(alive(pid) for pid in workers)
        os.kill(child.pid, how)
        child.wait(timeout=300)  # waits for the state; the bounds only keep a broken ingest from hanging the suite,
        deadline = time.monotonic() + 300  # generous for a loaded machine (they were 10 s)
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if alive(pid)], "workers outlived the ingest"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
