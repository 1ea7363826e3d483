"""One measured case as recorded beside asv's results (`<commit8>-<env>.cases.jsonl`).

asv's results keep one number (or sample list) per benchmark; this record
keeps what asv has no field for: correctness status and errors, failure
reason, the measurement contract and the derived rates. The store joins it
onto asv's rows. It also lets the suite's several tracked values of one case
come from a single measurement in one run.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class CaseRecord:
    """Everything flybench learned about one (workload, shape set, case, provider, dtype)."""

    run_id: str
    workload: str
    shape_set: str
    case: str
    provider: str
    dtype: str
    status: str  # "ok" | "failed" | "unavailable"
    reason: str | None = None
    errors: dict[str, float] = field(default_factory=dict)
    tolerance: float | None = None
    samples_s: list[float] = field(default_factory=list)
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    contract: dict = field(default_factory=dict)
    device: dict = field(default_factory=dict)
    commit: str = ""
    env: str = ""
    machine: str = ""
    started_at: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.workload, self.shape_set, self.case, self.provider, self.dtype)

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.samples_s) if self.samples_s else None

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "median_s": self.median_s}, allow_nan=True)


def sidecar_path(results_dir: Path, machine: str, commit: str, env: str) -> Path:
    """Beside asv's `<commit8>-<env>.json`, with an extension asv's loader ignores."""
    from asv.results import get_filename

    return (results_dir / get_filename(machine, commit, env)).with_suffix(".cases.jsonl")


def append(path: Path, record: CaseRecord) -> None:
    """Append one record; asv runs benchmarks one at a time, so appends never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(record.to_json() + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def find(path: Path, run_id: str, key: tuple[str, str, str, str, str]) -> CaseRecord | None:
    """The latest record of `key` written in run `run_id`, if any; unreadable lines are skipped."""
    if not path.exists():
        return None
    found = None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        data.pop("median_s", None)
        if data.get("run_id") == run_id:
            record = CaseRecord(**data)
            if record.key == key:
                found = record
    return found
