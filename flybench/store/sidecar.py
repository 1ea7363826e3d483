"""The `<commit8>-<env>.cases.jsonl` sidecar: what asv's results file cannot hold.

Each benchmark process appends one JSON object per measured case: its
correctness status, the reason it failed, its measurement contract and the
derived rates. Ingest joins these onto the asv rows of the same case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    key = case_key(row["benchmark"], json.loads(row["params"]))
    record = cases.get(key) if key else None
    if record is None:
        return
    status, reason = record["status"], record.get("reason")
    if status == "ok" and row["value"] is None:
        status, reason = "unavailable", "the case was measured, but this metric has no value here"
    row.update(
        status=status, reason=reason, contract=_json(record.get("contract")),
        errors=_json(record.get("errors")), tolerance=record.get("tolerance"),
        tflops=record.get("tflops"), gbps=record.get("gbps"),
        roofline_fraction=record.get("roofline_fraction"), device=_json(record.get("device")),
        run_id=None if record.get("run_id") is None else str(record["run_id"]),
    )


def device_arch(cases: dict[CaseKey, dict[str, Any]]) -> str | None:
    """The accelerator architecture the sidecar recorded (gfx942, sm_90...), if any."""
    for record in cases.values():
        device = record.get("device")
        if isinstance(device, dict) and device.get("arch"):
            return str(device["arch"])
    return None


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)
