"""The case-record file, `<commit8>-<env>.cases.jsonl` beside asv's results: format, path, writer, reader.

asv's results keep one sample list per benchmark; a case record keeps what
asv has no field for: correctness status and errors, the failure reason,
the measurement contract, the FLOP and minimum-byte counts with the roofline
floor, and the rates derived from them. The store joins it onto the asv row
of its case. One JSON object a line, each with the format `version`:

- 1 (no `version` field): the five-metric suites; rates, no counts.
- 2: one benchmark per case; adds `flops`, `bytes`, `floor_s` (the
  roofline's time floor at the ceilings in the contract) and `measure_s`
  (wall seconds the measurement took in its process).

Since then, fields that readers of format 2 pass over unharmed, so records
keep `version` 2 and every flybench that reads 2 reads them:

- `implementation` (absent before): what ran, as the provider says it
  (`Provider.implementation`: the distribution and its version, and where
  known the kernels called and the configuration a library's lookup chose).
  It is not in `contract`, because the comparison of two results refuses
  any contract difference outside `packages`, `samples`, `clocks` and
  `note`: a new key there would refuse every comparison against results
  recorded before it, and a FlyDSL build's version (0.5.0.dev<commits>)
  changes with every commit, so a base-vs-head comparison of a FlyDSL
  change would refuse all its cases.
- `gpu` (absent or null before, and outside `flybench run --gpus`): the
  GPU the case ran on, `{"index": k, "uuid": "GPU-..."}`, as the node
  numbers it. The store does not keep it: a node's GPUs of one model are
  one asv machine, so the rows of a run dealt to eight GPUs are the rows
  of the same run on one; the per-GPU check (flybench.gpu_check)
  reads it from the records.
- `loaded` (absent or null before, and for a case that never got as far
  as its provider's build): the project's files the case's process loaded
  to build and run it, repository-relative (`flybench/...`, and FlyDSL's
  `kernels/...`), as `flybench.measure.loaded` finds them. `flybench gate`
  selects a case by them (docs/gate.md).

The file is written and read through flybench.jsonl: a torn line (a process
killed mid-write) is skipped with a warning instead of failing.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from flybench import jsonl

FORMAT_VERSION = 2
SUFFIX = ".cases.jsonl"
STATUSES = ("ok", "failed", "unavailable")
KEY_FIELDS = ("workload", "shape_set", "case", "provider", "dtype")
CaseKey = tuple[str, str, str, str, str]


@dataclass
class CaseRecord:
    """Everything flybench learned about one (workload, shape set, case, provider, dtype)."""

    run_id: str
    workload: str
    shape_set: str
    case: str
    provider: str
    dtype: str
    status: str  # one of STATUSES
    reason: str | None = None
    errors: dict[str, float] = field(default_factory=dict)
    tolerance: float | None = None
    samples_s: list[float] = field(default_factory=list)
    flops: float | None = None
    bytes: float | None = None
    floor_s: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    contract: dict = field(default_factory=dict)
    implementation: dict = field(default_factory=dict)
    device: dict = field(default_factory=dict)
    commit: str = ""
    env: str = ""
    machine: str = ""
    started_at: str = ""
    measure_s: float | None = None
    gpu: dict | None = None
    loaded: list[str] | None = None
    version: int = FORMAT_VERSION

    @property
    def key(self) -> CaseKey:
        return (self.workload, self.shape_set, self.case, self.provider, self.dtype)

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.samples_s) if self.samples_s else None

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "median_s": self.median_s}, allow_nan=True)


def path_for(results_dir: Path, machine: str, commit: str, env: str) -> Path:
    """Where a run's records go: beside asv's `<machine>/<commit8>-<env>.json`, with a suffix asv ignores."""
    return jsonl.beside_results(results_dir, machine, commit, env, SUFFIX)


def beside(results_file: Path) -> Path:
    """`abc12345-env.json` -> `abc12345-env.cases.jsonl` next to it."""
    return results_file.with_name(results_file.stem + SUFFIX)


def append(path: Path, record: CaseRecord) -> None:
    """Append one record; asv runs benchmarks one at a time, so appends never interleave."""
    jsonl.append(path, record.to_json())


def files_in(folder: Path) -> list[Path]:
    """The case-record files of a machine's folder, sorted; an error naming the first that is no regular file
    (`jsonl.check_regular`), before any is read or a case is measured."""
    paths = sorted(folder.glob(f"*{SUFFIX}"))
    for path in paths:
        jsonl.check_regular(path)
    return paths


def read(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every usable record in file order (later lines are later measurements), and a warning per skipped line."""
    return jsonl.read(path, _check)


def check_case(record: dict[str, Any]) -> None:
    """A record's case key (as text) and status, which every record file beside the results shares."""
    for name in KEY_FIELDS:
        record[name] = str(record[name])
    if record["status"] not in STATUSES:
        raise ValueError(f"status {record['status']!r} is not one of {', '.join(STATUSES)}")


@dataclass(frozen=True)
class SideRecords:
    """A file of per-case records written beside asv's results by a pass after the timing (the hardware
    counters, a model step's role split): its suffix, its format version, and the fields that must be objects.
    Its records carry the case key and status the case records do (`check_case`)."""

    suffix: str
    version: int
    objects: tuple[str, ...]
    values: Callable[[dict[str, Any]], None] | None = None
    """Raises ValueError for a record holding values its kind cannot have (a negative time, say): the line is
    skipped with a warning, as one that cannot be read is, and never stored."""

    def path_for(self, results_dir: Path, machine: str, commit: str, env: str) -> Path:
        """Beside asv's `<machine>/<commit8>-<env>.json`, with the suffix asv ignores (as case records are)."""
        return jsonl.beside_results(results_dir, machine, commit, env, self.suffix)

    def files_in(self, folders: list[Path]) -> list[Path]:
        """The files of this kind in these machine folders."""
        return sorted(path for folder in folders for path in folder.glob(f"*{self.suffix}"))

    def beside(self, results_file: Path) -> Path:
        """The file of this kind that belongs to a results file (`<stem><suffix>`)."""
        return results_file.with_name(results_file.stem + self.suffix)

    def results_file(self, path: Path) -> Path:
        """The results file a file of this kind belongs to (`beside` read backwards)."""
        return path.with_name(path.name[:-len(self.suffix)] + ".json")

    def append(self, path: Path, record: Any) -> None:
        jsonl.append(path, json.dumps(asdict(record), allow_nan=True))

    def read(self, path: Path) -> tuple[list[dict[str, Any]], list[str]]:
        """Every usable record in file order, and a warning per line skipped."""
        return jsonl.read(path, self.check)

    def check(self, record: dict[str, Any]) -> None:
        check_case(record)
        if record.get("version") != self.version:
            raise ValueError(f"format version {record.get('version')!r}: this flybench reads {self.version}; "
                             "upgrade flybench")
        for name in self.objects:
            if type(record.get(name, {})) is not dict:
                raise ValueError(f"{name} must be an object")
        if self.values is not None:
            self.values(record)


def _check(record: dict[str, Any]) -> None:
    check_case(record)
    version = record.get("version", 1)
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        raise ValueError(f"format version {version!r}: this flybench reads 1 to {FORMAT_VERSION}; upgrade flybench")


def key_of(record: dict[str, Any]) -> CaseKey:
    return tuple(record[name] for name in KEY_FIELDS)  # type: ignore[return-value]


def latest(records: list[dict[str, Any]], run_id: str | None = None) -> dict[CaseKey, dict[str, Any]]:
    """The last record of each case (of run `run_id`, if given): a case measured again supersedes itself."""
    found: dict[CaseKey, dict[str, Any]] = {}
    for record in records:
        if run_id is None or record.get("run_id") == run_id:
            found[key_of(record)] = record
    return found


class Round(NamedTuple):
    """One measuring process's view of a case: the median of its samples and their spread."""

    median: float
    spread: float | None  # interquartile range over the median (None: fewer than 4 samples)


def rounds(records: list[dict[str, Any]]) -> dict[CaseKey, list[Round]]:
    """Per case, each run that measured it (its last ok record per run id), in file order.

    A pull request's job measures each side in several rounds into one
    results file (`flybench run --append-samples`). Each round is one
    measuring process and gives the case one median, the unit a verdict is
    judged on (flybench.regress.verdict); the samples' spread inside the
    round is reported beside it.
    """
    per_run: dict[CaseKey, dict[str, Round]] = {}
    for record in records:
        if record["status"] == "ok" and type(record.get("median_s")) in (int, float):
            runs = per_run.setdefault(key_of(record), {})
            runs.pop(str(record.get("run_id")), None)  # a run's last record counts, at its place in the file
            runs[str(record.get("run_id"))] = Round(float(record["median_s"]), _spread(record.get("samples_s")))
    return {key: list(runs.values()) for key, runs in per_run.items()}


def _spread(samples: Any) -> float | None:
    finite = [s for s in samples or () if type(s) in (int, float) and math.isfinite(s)]
    if len(finite) < 4:
        return None
    q1, median, q3 = statistics.quantiles(finite, n=4)
    return (q3 - q1) / median if median > 0 else None
