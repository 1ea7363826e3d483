"""Reading and checking a FlyDSL CI history file before anything touches the database.

The whole file is read and every record checked first: a file that is not
gzip or JSON, or of another schema, is refused whole with a message naming
the file; a record with a missing or malformed field is set aside with its
index, and the good records go on. Nothing is written while reading.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import re
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from flybench.errors import FlybenchError
from flybench.file_kinds import describe
from flybench.hardware import PEAKS
from flybench.importers.flydsl_ci.mapping import map_case

SCHEMA = 1
METRICS = ("TFLOPS", "TB/s", "speedup")
"""FlyDSL's metrics; all are bigger-is-better."""
CEILINGS = {"TFLOPS": 100 * max(p.fp8_tflops for p in PEAKS.values()),
            "TB/s": 100 * max(p.hbm_tbs for p in PEAKS.values()), "speedup": 1e4}
"""The least value of each metric no run can reach: a hundred times the fastest GPU's vendor figure (fp8 TFLOP/s,
HBM TB/s; flybench.hardware.PEAKS), and a speedup of ten thousand. Such a value, or one below 0 (-5, 1e308
TFLOPS), is a broken record, not a measurement: rejected and named, never stored. (0 is a rate FlyDSL printed
below its precision: stored as missing, counted in the summary; derive.below_printed.)"""
STATUSES = ("ok", "skip", "missing")
KEY_FIELDS = ("run_id", "runner", "op", "shape", "dtype", "metric")
"""FlyDSL's own de-duplication key (ingest.py's `_rec_key`): one CI job's value of one case."""

_TEXT_FIELDS = ("ts", "commit", "source", "runner", "arch", "op", "shape", "dtype", "metric", "status")
_OPTIONAL_OBJECTS = ("vs_main", "vs_tag", "extra")

Key = tuple[str, str, str, str, str, str]


@dataclass(frozen=True)
class RecordError:
    """A record that was not imported, and why (index counts from 0 in the file's `records`)."""

    index: int
    message: str

    def __str__(self) -> str:
        return f"record {self.index}: {self.message}"


@dataclass(frozen=True)
class Record:
    """One checked record: its key, the fields the store indexes, and the record as the file had it."""

    index: int
    key: Key
    commit: str
    ts: datetime
    pr: int | None
    status: str
    value: float | None
    raw: dict[str, Any]

    @property
    def run_id(self) -> str:
        return self.key[0]

    @property
    def runner(self) -> str:
        return self.key[1]

    @cached_property
    def canonical(self) -> str:
        """The record as stored (sorted keys), so the same record always compares equal."""
        return json.dumps(self.raw, sort_keys=True)


@dataclass
class HistoryFile:
    """A parsed file: its fingerprint, the good records, and the rejected ones."""

    path: Path
    sha256: str
    size: int
    repo: str | None
    records: list[Record] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)


MAX_BYTES = 512 << 20
"""The most JSON one history file may hold (decompressed): a month of FlyDSL's CI is about 9 MiB."""
EARLIEST, LATEST = datetime(2000, 1, 1), datetime(2100, 1, 1)
"""The times a CI record may carry."""


def read_history(path: str | Path) -> HistoryFile:
    """Parse `path` (plain JSON or gzip, whatever its name); FlybenchError if the file as a whole is unusable."""
    path = Path(path)
    what = describe(path)  # a FIFO blocked the import for ever, a link to /dev/zero was read until memory ran out
    if what != "a regular file":
        said = f"no file at {path}" if what == "nothing" else (
            f"{path} is {what}, not a FlyDSL CI history file, so it was not read (only regular files are)")
        raise FlybenchError(f"{said}: name the history.json or history.json.gz that FlyDSL's CI dashboard writes")
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)  # past that, neither JSON nor gzip'd JSON is taken (_check_size)
    except OSError as exc:
        raise FlybenchError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    data = _decode(path, raw)
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise FlybenchError(f"{path}: not a FlyDSL CI history (expected an object with a 'records' list)")
    if data.get("schema") != SCHEMA:
        raise FlybenchError(f"{path}: schema {data.get('schema')!r}; this importer reads FlyDSL CI history "
                            f"schema {SCHEMA} (upgrade flybench, or export the file with schema {SCHEMA})")
    parsed = HistoryFile(path, hashlib.sha256(raw).hexdigest(), len(raw), data.get("repo"))
    seen: dict[Key, Record] = {}
    for index, item in enumerate(data["records"]):
        try:
            record = check_record(index, item)
        except ValueError as exc:
            parsed.errors.append(RecordError(index, str(exc)))
            continue
        earlier = seen.get(record.key)
        if earlier is None:
            seen[record.key] = record
            parsed.records.append(record)
        elif earlier.canonical != record.canonical:
            parsed.errors.append(RecordError(index, f"same run, runner and case as record {earlier.index} "
                                                    "but different content"))
    return parsed


def check_record(index: int, item: Any) -> Record:
    """A Record, or ValueError saying which field is missing or wrong."""
    if not isinstance(item, dict):
        raise ValueError(f"expected an object, got {type(item).__name__}")
    for name in (*_TEXT_FIELDS, "run_id", "regression"):
        if name not in item:
            raise ValueError(f"missing field {name!r}")
    for name in _TEXT_FIELDS:
        if not isinstance(item[name], str) or not item[name]:
            raise ValueError(f"field {name!r} must be a non-empty string, got {item[name]!r}")
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", item["commit"]):
        raise ValueError(f"field 'commit' is not a git hash: {item['commit']!r}")
    if item["metric"] not in METRICS:
        raise ValueError(f"unknown metric {item['metric']!r}; known: {', '.join(METRICS)}")
    if item["status"] not in STATUSES:
        raise ValueError(f"unknown status {item['status']!r}; known: {', '.join(STATUSES)}")
    if not isinstance(item["run_id"], (int, str)) or isinstance(item["run_id"], bool):
        raise ValueError(f"field 'run_id' must be a number or string, got {item['run_id']!r}")
    if not isinstance(item["regression"], bool):
        raise ValueError(f"field 'regression' must be true or false, got {item['regression']!r}")
    pr = item.get("pr")
    if pr is not None and (not isinstance(pr, int) or isinstance(pr, bool) or not 0 < pr < 2**31):
        raise ValueError(f"field 'pr' must be a pull-request number (1 to 2**31 - 1) or null, got {pr!r}")
    for name in _OPTIONAL_OBJECTS:
        if item.get(name) is not None and not isinstance(item[name], dict):
            raise ValueError(f"field {name!r} must be an object or null, got {item[name]!r}")
    value = _value(item)
    try:  # the shape's numbers feed the case's FLOP and byte counts
        map_case(item["op"], item["shape"], item["dtype"], item["metric"])
    except (ArithmeticError, ValueError) as exc:
        raise ValueError(f"shape {item['shape']!r} of op {item['op']!r} cannot be read ({exc})") from exc
    key = (str(item["run_id"]), *(item[k] for k in KEY_FIELDS[1:]))
    return Record(index, key, item["commit"].lower(), _timestamp(item["ts"]), pr, item["status"], value, item)


def from_stored(text: str, commit: str) -> Record:
    """A record read back from the store, where it was written in its canonical form under `commit`
    (the full hash where the record gives a short one)."""
    record = replace(check_record(-1, json.loads(text)), commit=commit)
    record.__dict__["canonical"] = text  # the cached_property's slot: no need to serialise it again
    return record


def _value(item: dict[str, Any]) -> float | None:
    """An ok record's value: at least 0 and below its metric's CEILINGS."""
    value = item.get("value")
    if item["status"] != "ok":
        return None  # skip and missing carry no value (null or absent)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"status 'ok' needs a finite number in 'value', got {value!r}")
    ceiling = CEILINGS[item["metric"]]
    if not 0 <= value < ceiling:  # 0 is FlyDSL's print of a rate below its precision (derive.below_printed)
        raise ValueError(f"value {value!r} {item['metric']} is no measurement a kernel can have (0 to "
                         f"{ceiling:,.0f} {item['metric']})")
    return float(value)


def _timestamp(text: str) -> datetime:
    """ISO 8601 in UTC, stored naive as the rest of the store's timestamps."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"field 'ts' is not an ISO 8601 time: {text!r}") from exc
    if not EARLIEST <= parsed < LATEST:
        raise ValueError(f"field 'ts' {text!r} is outside {EARLIEST:%Y} to {LATEST:%Y}: not a CI run's time")
    return parsed


def _decode(path: Path, raw: bytes) -> Any:
    _check_size(path, raw)  # a gzip'd history is smaller than its JSON
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unpacked:
                raw = unpacked.read(MAX_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise FlybenchError(f"{path}: corrupt or truncated gzip ({exc})") from exc
    _check_size(path, raw)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FlybenchError(f"{path}: not UTF-8 text (byte {exc.start}); expected JSON or gzip'd JSON") from exc
    except json.JSONDecodeError as exc:
        raise FlybenchError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                            "the file may be truncated") from exc


def _check_size(path: Path, raw: bytes) -> None:
    if len(raw) > MAX_BYTES:
        raise FlybenchError(f"{path}: over {MAX_BYTES >> 20} MiB of JSON; a month of FlyDSL's CI is about 9 MiB: "
                            "split the history into smaller files and import each")
