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

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from flybench import jsonl
from flybench.measure.record import check_case

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

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=True)


def path_for(results_dir: Path, machine: str, commit: str, env: str) -> Path:
    """Beside asv's `<machine>/<commit8>-<env>.json`, with a suffix asv ignores (as case records are)."""
    return jsonl.beside_results(results_dir, machine, commit, env, SUFFIX)


def append(path: Path, record: CounterRecord) -> None:
    jsonl.append(path, record.to_json())


def read(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every usable record in file order, and a warning per line skipped."""
    return jsonl.read(path, _check)


def _check(record: dict[str, Any]) -> None:
    check_case(record)
    if record.get("version") != FORMAT_VERSION:
        raise ValueError(f"format version {record.get('version')!r}: this flybench reads {FORMAT_VERSION}; "
                         "upgrade flybench")
    for name in ("total", "derived", "counters"):
        if type(record.get(name, {})) is not dict:
            raise ValueError(f"{name} must be an object")
