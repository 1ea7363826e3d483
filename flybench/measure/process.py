"""What a case's measuring process writes around its measurement: a placeholder first, a deadline, the record.

Used by every benchmark process that measures a case (flybench.suite), and
free of torch, so that a suite of stand-in cases (the tests' fault suite)
imports in a blink.
"""

from __future__ import annotations

import datetime
import os
import threading
from collections.abc import Callable

from flybench import envvars, run_identity
from flybench.measure import record as records
from flybench.measure.record import CaseRecord

DIED = "the measuring process died before it finished (crash, hang past the asv timeout, or killed)"
TIMED_OUT_EXIT = 124
"""The exit status of a case's process that ran out of time (as timeout(1) exits)."""


def recorded(key: records.CaseKey, timeout_s: float, measure: Callable[[str], CaseRecord]) -> CaseRecord:
    """`measure(run_id)`'s record, appended beside the run's results, with a placeholder first and a deadline.

    The placeholder says the process died; a crash leaves it as the case's
    last record, so the store can say why the case has no time. A case
    still measuring shortly before asv's timeout (`deadline_s`) records that
    it timed out, and its process exits: asv's own kill would leave only the
    placeholder, which cannot tell a hang from a crash.
    """
    run = run_identity.current()
    path = records.path_for(run.results_dir, run.machine, run.commit, run.env_name) if run else None

    def write(record: CaseRecord) -> None:
        if path is not None:
            records.append(path, _stamped(record, run))

    limit = deadline_s(timeout_s)
    write(CaseRecord(run.run_id if run else "", *key, status="failed", reason=DIED, started_at=_now()))

    def stop() -> None:
        write(CaseRecord(run.run_id if run else "", *key, status="failed", started_at=_now(),
                         reason=f"timed out: still measuring after {limit:.0f} s (asv stops a {key[1]} case at "
                                f"{timeout_s:.0f} s); its process was ended"))
        os._exit(TIMED_OUT_EXIT)

    timer = threading.Timer(limit, stop)
    timer.daemon = True
    timer.start()
    try:
        record = measure(run.run_id if run else "")
    finally:
        timer.cancel()
    write(record)
    return record


def deadline_s(timeout_s: float) -> float:
    """When a case gives up: 5% (at least a second) before asv's timeout, which counts from the process's start."""
    return timeout_s - max(1.0, 0.05 * timeout_s)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _stamped(record: CaseRecord, run: run_identity.RunIdentity) -> CaseRecord:
    record.commit, record.env, record.machine = run.commit, run.env_name, run.machine
    if os.environ.get(envvars.GPU_INDEX, "").isdigit():
        record.gpu = {"index": int(os.environ[envvars.GPU_INDEX]), "uuid": os.environ.get(envvars.GPU_UUID, "")}
    return record
