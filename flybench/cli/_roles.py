"""The role pass of `flybench run --roles`: each model-lane case the run measured, traced once more by role.

The cases are the run's `mixtral_step` cases that passed their gate and were
timed (flybench.cli._passes). Each runs in a process of its own
(`python -m flybench.model.roles`) under JAX's profiler: its step's kernels
are attributed to the step's roles (flybench.model.attribution), and the split
is appended beside the run's results (flybench.model.roles), as the counter
pass appends its counters. The traced process runs under the run's own
XLA_FLAGS; whether its kernels run inside command buffers is the split's
`roles.COMMAND_BUFFERS`, which the record's conditions carry. A
provider whose step cannot be traced is recorded as unavailable with the
reason; a trace that gives no role, as failed. The timing results stand.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from flybench.cli._passes import measured_ok, progress
from flybench.measure.record import CaseKey
from flybench.model import roles
from flybench.model.attribution import TIMED_CALLS
from flybench.model.roles import RoleRecord

TIMEOUT_S = 900.0
"""One case: compile, the prefilled cache, and twice `roles.STEPS` steps."""


def role_pass(results_dir: Path, machine: str, commit: str, env: str, run_id: str) -> list[RoleRecord]:
    """Trace the run's measured model-lane cases by role; returns the records written."""
    keys = measured_ok(results_dir, machine, run_id, roles.WORKLOAD)
    if not keys:
        print(f"roles: no {roles.WORKLOAD} case of this run passed its gate, so none is traced "
              f"(select them with -w {roles.WORKLOAD})", flush=True)
        return []
    flags = os.environ.get("XLA_FLAGS", "")
    out = roles.path_for(results_dir, machine, commit, env)
    print(f"roles: {len(keys)} cases traced under jax.profiler ({TIMED_CALLS} steps timed, {roles.STEPS} traced; "
          f"XLA_FLAGS: {flags or 'none'}; command buffers {'on' if roles.COMMAND_BUFFERS else 'off'}; "
          f"no timing samples) -> {out}", flush=True)
    report = progress(len(keys), lambda r: r.status if r.status != "ok" else f"step {r.step_ms:.3g} ms")
    done = []
    for key in keys:
        record = RoleRecord(run_id, *key, status="ok", commit=commit, env=env, machine=machine,
                            started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                            contract={"pass": "roles", "timing_samples": 0, "after": "timing pass",
                                      "tracer": "jax.profiler", "steps_timed": TIMED_CALLS,
                                      "steps_traced": roles.STEPS})
        _trace(record, key)
        roles.append(out, record)
        report(key, record)
        done.append(record)
    _print_table(done)
    return done


def _trace(record: RoleRecord, key: CaseKey) -> None:
    with tempfile.TemporaryDirectory(prefix="flybench-roles-") as tmp:
        found = Path(tmp) / "split.json"
        command = [sys.executable, "-m", "flybench.model.roles", "--out", str(found), *key]
        try:
            ran = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            record.status, record.reason = "failed", f"the traced step did not finish in {TIMEOUT_S:.0f} s"
            return
        if ran.returncode != 0 or not found.is_file():
            tail = " | ".join((ran.stderr or ran.stdout).strip().splitlines()[-3:])
            record.status, record.reason = "failed", f"the traced process exited {ran.returncode}: {tail}"[:600]
            return
        for name, value in json.loads(found.read_text()).items():
            setattr(record, name, value)


def _print_table(records: list[RoleRecord]) -> None:
    from rich.table import Table

    from flybench.console import print_rich

    table = Table(title="where a model step's time goes (ms a step; share of the step)", title_justify="left")
    for column in ("case", "provider", "step", "MoE", "attention", "other", "no role", "untraced"):
        table.add_column(column, overflow="fold")
    for r in records:
        if r.status != "ok":
            table.add_row(r.case, r.provider, r.status, r.reason or "", "", "", "", "")
            continue
        split = roles.shares(r.roles_ms, r.step_ms)
        cells = [f"{split[f'{n}_ms']:.3g} ({split[f'{n}_share']:.0%})"
                 for n in ("moe", "attention", "other", "rest", "untraced")]
        table.add_row(r.case, r.provider, f"{r.step_ms:.3g} ms", *cells)
    print_rich(table)
