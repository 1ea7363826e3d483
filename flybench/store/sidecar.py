"""The `<commit8>-<env>.cases.jsonl` sidecar: what asv's results file cannot hold.

Each benchmark process appends one JSON object per measured case: its
correctness status, the reason it failed, its measurement contract and the
derived rates. Ingest joins these onto the asv rows of the same case.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

CaseKey = tuple[str, str, str, str, str]
"""(workload, shape_set, case, provider, dtype)."""

STATUSES = ("ok", "failed", "unavailable")


def sidecar_path(results_path: Path) -> Path:
    """`abc12345-env.json` -> `abc12345-env.cases.jsonl` beside it."""
    return results_path.with_name(results_path.stem + ".cases.jsonl")


def case_key(benchmark: str, params: dict[str, Any]) -> CaseKey | None:
    """The sidecar key of an asv row such as `attention.Quick.track_time(case, provider, dtype)`.

    The workload is the module, the shape set the lower-cased class; rows of
    other shapes (no class, other parameters) have no sidecar record.
    """
    parts = benchmark.split(".")
    if len(parts) < 3 or not {"case", "provider", "dtype"} <= params.keys():
        return None
    return (parts[0], parts[1].lower(), str(params["case"]), str(params["provider"]), str(params["dtype"]))


def load_cases(path: Path) -> tuple[dict[CaseKey, dict[str, Any]], list[str]]:
    """The latest record per case, and a warning per line that could not be used.

    Benchmark processes append to this file; one killed mid-write (asv's
    timeout) leaves a torn line, and the next append continues it. Such
    lines are skipped, not fatal: their cases fall back to asv's own value,
    which is what asv recorded for a killed process anyway.
    """
    records: dict[CaseKey, dict[str, Any]] = {}
    warnings = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key = tuple(str(record[k]) for k in ("workload", "shape_set", "case", "provider", "dtype"))
                if record["status"] not in STATUSES:
                    raise ValueError(f"status {record['status']!r} is not one of {', '.join(STATUSES)}")
            except (ValueError, KeyError, TypeError) as exc:
                warnings.append(f"{path}, line {number} skipped: {type(exc).__name__}: {exc}")
                continue
            records[key] = record  # appended later = measured later: the last one wins
    return records, warnings


def annotate(row: dict[str, Any], cases: dict[CaseKey, dict[str, Any]]) -> None:
    """Fill status, reason, contract and the sidecar's extras into one asv row.

    Without a record, the status asv's own value implies stays. A record
    that says "ok" while asv stored no value means the case was measured but
    this one metric has no value (a roofline fraction on a CPU, say): that
    metric is unavailable, the case did not fail.
    """
    key = _row_case_key(row["benchmark"], row["params"])
    record = cases.get(key) if key else None
    if record is None:
        return
    fields = _fields(record)
    if fields["status"] == "ok" and row["value"] is None:
        fields.update(status="unavailable", reason=NO_VALUE)
    row.update(fields)


NO_VALUE = "the case was measured, but this metric has no value here"
_NUMBERS = ("tolerance", "tflops", "gbps", "roofline_fraction")
_TEXTS = ("reason", "contract", "errors", "device", "run_id")


def annotate_table(table: pa.Table, cases: dict[CaseKey, dict[str, Any]]) -> pa.Table | None:
    """`annotate` for all rows of one file at once, as columns.

    Returns None when a record holds a value that is not a plain JSON
    number or text where the table wants one; the caller then annotates
    the file's rows one by one, which stores such values as it always did.
    """
    if not cases or not table.num_rows:
        return table
    keys = map(_row_case_key, table["benchmark"].to_pylist(), table["params"].to_pylist())
    records = [cases.get(key) if key else None for key in keys]
    if all(record is None for record in records):
        return table
    size = len(records)
    status = table["status"].to_pylist()
    no_value = table["value"].is_null().to_pylist()
    extras: dict[str, list[Any]] = {name: [None] * size for name in (*_TEXTS, *_NUMBERS)}
    fields_of: dict[int, dict[str, Any]] = {}  # a record joins several rows (time, tflops, ... of one case)
    for i, record in enumerate(records):
        if record is None:
            continue
        fields = fields_of.get(id(record))
        if fields is None:
            fields = fields_of[id(record)] = _fields(record)
            if not (all(_is_number(fields[name]) for name in _NUMBERS)
                    and all(fields[name] is None or type(fields[name]) is str for name in _TEXTS)):
                return None
        for name, value in fields.items():
            if name != "status":
                extras[name][i] = value
        status[i] = fields["status"]
        if status[i] == "ok" and no_value[i]:
            status[i], extras["reason"][i] = "unavailable", NO_VALUE
    try:
        columns = {name: pa.array(values, pa.string()) for name, values in extras.items() if name in _TEXTS}
        columns.update({name: pa.array(values, pa.float64(), from_pandas=True)  # NaN is NULL, as before
                        for name, values in extras.items() if name in _NUMBERS})
    except (pa.ArrowException, OverflowError):
        return None
    table = table.set_column(table.schema.get_field_index("status"), "status", pa.array(status, pa.string()))
    for name, column in columns.items():
        table = table.append_column(name, column)
    return table


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    """The columns a sidecar record fills, before the "ok but no value" rule."""
    return {
        "status": record["status"], "reason": record.get("reason"), "contract": _json(record.get("contract")),
        "errors": _json(record.get("errors")), "tolerance": record.get("tolerance"),
        "tflops": record.get("tflops"), "gbps": record.get("gbps"),
        "roofline_fraction": record.get("roofline_fraction"), "device": _json(record.get("device")),
        "run_id": None if record.get("run_id") is None else str(record["run_id"]),
    }


@functools.lru_cache(maxsize=65536)
def _row_case_key(benchmark: str, params: str) -> CaseKey | None:
    """`case_key` of a row's benchmark and params text; the same few texts recur in every file."""
    return case_key(benchmark, json.loads(params))


def _is_number(value: Any) -> bool:
    return value is None or type(value) in (int, float)


def device_arch(cases: dict[CaseKey, dict[str, Any]]) -> str | None:
    """The accelerator architecture the sidecar recorded (gfx942, sm_90...), if any."""
    for record in cases.values():
        device = record.get("device")
        if isinstance(device, dict) and device.get("arch"):
            return str(device["arch"])
    return None


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)
