"""The counter-record file, `<commit8>-<env>.counters.jsonl` beside asv's results: format, path, writer, reader.

One JSON object a line, one line per case that the counter pass tried:

- `version` (1), `run_id`, the case key (`workload`, `shape_set`, `case`,
  `provider`, `dtype`), `commit`, `env`, `machine`, `started_at`;
- `status`: ok, failed (the profiler or the call failed: `reason`) or
  unavailable (the case does not run here: `reason`);
- `tool`, `tool_version`, `arch`, and `counters`: {name: [unit, aggregate,
  fixed]} for every counter asked for;
- `kernels`: [{name, duration_s, values: {counter: value}}], launch order;
- `total`: the counters combined over the call; `derived`: the DERIVED
  figures; `min_bytes`: the workload's minimum-byte model they use;
- `contract`: how the pass ran, and that its runs gave no timing samples.

The timing pass never reads this file, and a counter run adds nothing to
asv's results. A torn last line is skipped with a warning, as for case records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flybench.measure.record import SideRecords

FORMAT_VERSION = 1
SUFFIX = ".counters.jsonl"


@dataclass
class CounterRecord:
    run_id: str
    workload: str
    shape_set: str
    case: str
    provider: str
    dtype: str
    status: str
    reason: str | None = None
    tool: str = ""
    tool_version: str = ""
    arch: str = ""
    counters: dict[str, list] = field(default_factory=dict)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    total: dict[str, float] = field(default_factory=dict)
    derived: dict[str, float] = field(default_factory=dict)
    min_bytes: float | None = None
    contract: dict[str, Any] = field(default_factory=dict)
    commit: str = ""
    env: str = ""
    machine: str = ""
    started_at: str = ""
    version: int = FORMAT_VERSION


FILE = SideRecords(SUFFIX, FORMAT_VERSION, ("total", "derived", "counters"))
"""The file's format: where it lies, how a CounterRecord is appended, which lines are read back."""
path_for, append, read = FILE.path_for, FILE.append, FILE.read
