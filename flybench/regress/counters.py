"""Changes in the hardware counters that depend only on the code and the shape, found like compile-metric changes.

The counter pass (flybench.counters) marks as watched the counters a kernel's
code and shape fix: instruction counts and launch resources (registers,
shared memory, grid), which change only when the code does and are reported
at any change; and the DRAM bytes one call moves, which the profiler takes
from a flushed cache, so they repeat to a fraction of a percent and are
reported when they move by `BYTES_CHANGE` or more. More is worse for all
of them. Timing steps stay flybench.regress.history's job.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path

from flybench.regress.history import Regression, Step
from flybench.store import queries
from flybench.store.db import DEFAULT_DB

BYTES_CHANGE = 0.02
"""The smallest relative move of a call's DRAM bytes reported (two runs of the same code differ far less)."""


def counter_changes(db_path: str | Path = DEFAULT_DB, machine: str | None = None, subject: str | None = None,
                    benchmark: str | None = None) -> list[Regression]:
    """Every change of a watched counter between consecutive measured commits, largest first.

    `Regression.params` is the case's parameters with the counter's name under `counter`.
    """
    series: dict[tuple, list[dict]] = {}
    for row in queries.records(queries.counter_history(db_path, machine=machine, subject=subject)):
        if benchmark and not fnmatchcase(row["benchmark"], benchmark):
            continue
        key = (row["subject"], row["machine"], row["env_name"], row["benchmark"], row["params"], row["counter"])
        series.setdefault(key, []).append(row)
    found = []
    for (subj, mach, env, name, params, counter), rows in series.items():
        tolerance = BYTES_CHANGE if rows[0]["kind"] == "derived" else 0.0
        for a, b in zip(rows, rows[1:]):
            before, after = a["value"], b["value"]
            if before == after or (before and abs(after - before) / abs(before) < tolerance):
                continue
            step = Step(a["commit_hash"], b["commit_hash"], before, after, 0.0, 1.0, worse=after > before)
            found.append(Regression(subj, mach, env, name, {**json.loads(params), "counter": counter}, rows[0]["unit"],
                                    step, "change"))  # reported as compile-metric changes are
    return sorted(found, key=lambda r: (not r.step.worse, -abs(r.step.relative)))
