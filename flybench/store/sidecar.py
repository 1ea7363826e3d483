"""Joining case records (flybench.measure.record) onto asv's rows, and one row per case.

Each case-suite row of a results file gets its case record's status,
reason, contract, errors, counts and device; its TFLOP/s, GB/s and roofline
fraction are derived here from asv's stored time and the record's counts,
with the measurement's own formula (measure.roofline.rates). Records of
the five-metric format carry the rates only, and those are kept.

Results of the five-metric suites also hold four sibling rows per case
(`track_tflops`, `track_gbps`, `track_roofline`, `track_error`): `fold`
turns them into the context columns of the case's `track_time` row, which
is the only row of a case the store keeps (schema v5 does the same to rows
stored before it).
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flybench import benchmark_names
from flybench.measure import record as records
from flybench.measure.record import CaseKey
from flybench.measure.roofline import rates
from flybench.store.asv_files import WHAT_TO_DO, BenchmarkDef, misplaced, shown
from flybench.store.files import BadInput, refuse_binary

sidecar_path = records.beside


def results_file_of(path: Path) -> Path:
    """The results file a case-record file belongs to; any other path is its own."""
    return path.with_name(path.name[:-len(records.SUFFIX)] + ".json") if path.name.endswith(records.SUFFIX) else path


def load_cases(path: Path) -> tuple[dict[CaseKey, dict[str, Any]], list[str]]:
    """The latest record per case in one case-record file (with `rounds`, the median of each run that
    measured the case), and a warning per line that could not be used.

    A torn line (a process killed mid-write) is skipped: its case falls back
    to asv's own value, which is what asv recorded for a killed process anyway.
    A record holding a number no column can store refuses the file (`BadInput`),
    and so does a byte that is not UTF-8 (`files.refuse_binary`), and a file
    with no record at all (emptied, every line torn).
    """
    refuse_binary(path)
    found, warnings = records.read(path)
    if not found:  # emptied (a full disk, a damaged copy): storing the results without it dropped their records
        raise BadInput(f"it holds no case record{f' ({len(warnings)} lines skipped)' if warnings else ''}, so the "
                       "results beside it would lose their contracts, statuses and reasons: what was stored is kept; "
                       "restore it from its runner and ingest again, or move it aside to store asv's values alone")
    for record in found:
        _refuse_huge_integers(record)
    rounds = records.rounds(found)
    return {key: {**record, "rounds": [r.median for r in rounds.get(key, ())] or None,
                  "round_spreads": [r.spread for r in rounds.get(key, ())] or None}
            for key, record in records.latest(found).items()}, warnings


def _refuse_huge_integers(record: dict[str, Any]) -> None:
    """Refuse a record holding an integer beyond any float (JSON has no limit): every number of a record is
    stored or computed with as a float, and such an integer once stopped the whole ingest."""
    where = _huge_integer(record)
    if where is not None:
        field, digits = where
        raise BadInput(
            f"the record of case {' / '.join(records.key_of(record))} (run {record.get('run_id')!r}) holds in "
            f"{field!r} an integer of {digits} digits, beyond any number flybench stores (about 1.8e308 at "
            "most): correct or delete that record, then ingest again")


def _huge_integer(value: Any, where: str = "") -> tuple[str, int] | None:
    """The field (`flops`, `samples_s[3]`, `errors.out`) of the first integer too large for a float, and its digits."""
    if type(value) is int:
        try:
            float(value)
        except OverflowError:
            return where, len(str(abs(value)))
        return None
    items = value.items() if type(value) is dict else enumerate(value) if type(value) is list else ()
    for key, item in items:
        found = _huge_integer(item, f"{where}[{key}]" if type(key) is int else f"{where}.{key}" if where else key)
        if found is not None:
            return found
    return None


def case_key(benchmark: str, params: dict[str, Any]) -> CaseKey | None:
    """The case-record key of a case-suite row such as `attention.Quick.track_time(case, provider, dtype)`."""
    name = benchmark_names.parse(benchmark)
    if name is None or not set(benchmark_names.PARAM_NAMES) <= params.keys():
        return None
    return (name.workload, name.shape_set, str(params["case"]), str(params["provider"]), str(params["dtype"]))


def check_names(rows: Iterable[tuple[str, str]], cases: dict[CaseKey, dict[str, Any]],
                benchmarks: dict[str, BenchmarkDef]) -> None:
    """Refuse case-suite rows (benchmark, params text) whose parameter names contradict the case records beside them.

    asv's results hold a case's values by position, and benchmarks.json
    names them; the records name each value themselves (case, provider,
    dtype). Rows whose `provider` values are the records' `dtype` values
    would take no record, and be filed under the wrong names.
    """
    if not cases:
        return
    records = _values_by_suite(cases)
    for suite, here in _values_by_suite(filter(None, itertools.starmap(_row_case_key, set(rows)))).items():
        found = misplaced(here, records[suite]) if suite in records else None
        if found is not None:
            i, j = found
            name = benchmark_names.benchmark_name(*suite)
            source = getattr(benchmarks.get(name), "source", None) or "the definition stored before"
            raise BadInput(
                f"its rows of {name} take {shown(here[i])} as {benchmark_names.PARAM_NAMES[i]!r}, which the case "
                f"records beside it give as {benchmark_names.PARAM_NAMES[j]!r}: {source} names this file's "
                f"parameters in another order than it holds them, and its rows would be named wrongly. {WHAT_TO_DO}")


def _values_by_suite(keys: Iterable[CaseKey]) -> dict[tuple[str, str], list[set[str]]]:
    """Per (workload, shape set): the values of case, provider and dtype that `keys` hold."""
    found: dict[tuple[str, str], list[set[str]]] = {}
    for workload, shape_set, *values in keys:
        for seen, value in zip(found.setdefault((workload, shape_set), [set(), set(), set()]), values):
            seen.add(value)
    return found


def annotate(row: dict[str, Any], cases: dict[CaseKey, dict[str, Any]]) -> None:
    """Fill status, reason, contract, counts and rates from the case's record into one asv row.

    Without a record, the status asv's own value implies stays. A record
    that says "ok" while asv stored no value means the case was measured but
    this row has no value (a five-metric roofline fraction on a CPU, say):
    that row is unavailable, the case did not fail.
    """
    key = _row_case_key(row["benchmark"], row["params"])
    record = cases.get(key) if key else None
    if record is None:
        return
    fields = _fields(record, row["value"])
    if fields["status"] == "ok" and row["value"] is None:
        fields.update(status="unavailable", reason=NO_VALUE)
    row.update(fields)


ROUND_COLUMNS = ("rounds", "round_spreads")
"""Per round that measured the case into the file: its median, and its samples' spread (IQR over median)."""
NO_VALUE = "the case was measured, but this metric has no value here"
_NUMBERS = ("tolerance", "flops", "bytes", "floor_s", "tflops", "gbps", "roofline_fraction")
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
    found = [cases.get(key) if key else None for key in keys]
    if all(record is None for record in found):
        return table
    size = len(found)
    status = table["status"].to_pylist()
    values = table["value"].to_pylist()
    extras: dict[str, list[Any]] = {name: [None] * size for name in (*_TEXTS, *_NUMBERS)}
    if "reason" in table.column_names:  # the reader's own (a non-finite value), for rows without a record
        extras["reason"] = table["reason"].to_pylist()
        table = table.drop_columns(["reason"])
    round_lists: dict[str, list[list[float] | None]] = {name: [None] * size for name in ROUND_COLUMNS}
    for i, record in enumerate(found):
        if record is None:
            continue
        fields = _fields(record, values[i])
        if not (all(_is_number(fields[name]) for name in _NUMBERS)
                and all(fields[name] is None or type(fields[name]) is str for name in _TEXTS)):
            return None
        for name, value in fields.items():
            if name != "status" and name not in ROUND_COLUMNS:
                extras[name][i] = value
        for name in ROUND_COLUMNS:
            round_lists[name][i] = fields[name]
        status[i] = fields["status"]
        if status[i] == "ok" and values[i] is None:
            status[i], extras["reason"][i] = "unavailable", NO_VALUE
    try:
        columns = {name: pa.array(values, pa.string()) for name, values in extras.items() if name in _TEXTS}
        columns.update({name: pa.array(values, pa.float64(), from_pandas=True)  # NaN is NULL, as before
                        for name, values in extras.items() if name in _NUMBERS})
        columns.update({name: pa.array(lists, pa.list_(pa.float64())) for name, lists in round_lists.items()})
    except (pa.ArrowException, OverflowError):
        return None
    table = table.set_column(table.schema.get_field_index("status"), "status", pa.array(status, pa.string()))
    for name, column in columns.items():
        table = table.append_column(name, column)
    return table


def _fields(record: dict[str, Any], seconds: Any) -> dict[str, Any]:
    """The columns a record fills into a row whose asv value is `seconds`, before the "ok but no value" rule.

    A record with counts (format 2) has its rates derived from asv's time;
    an older one keeps the rates it was written with.
    """
    fields = {
        "status": record["status"], "reason": record.get("reason"), "contract": _json(record.get("contract")),
        "errors": _json(record.get("errors")), "tolerance": record.get("tolerance"),
        "flops": record.get("flops"), "bytes": record.get("bytes"), "floor_s": record.get("floor_s"),
        "tflops": record.get("tflops"), "gbps": record.get("gbps"),
        "roofline_fraction": record.get("roofline_fraction"), "device": _json(record.get("device")),
        "run_id": None if record.get("run_id") is None else str(record["run_id"]),
        "rounds": record.get("rounds") or None,
        "round_spreads": record.get("round_spreads") or None,
    }
    if record.get("version", 1) >= 2:
        counts = (fields["flops"], fields["bytes"], fields["floor_s"])
        if all(_is_number(c) for c in counts) and type(seconds) in (int, float):
            fields["tflops"], fields["gbps"], fields["roofline_fraction"] = rates(*counts, seconds)
        else:
            fields["tflops"] = fields["gbps"] = fields["roofline_fraction"] = None
    return fields


@functools.lru_cache(maxsize=65536)
def _row_case_key(benchmark: str, params: str) -> CaseKey | None:
    """`case_key` of a row's benchmark and params text; the same few texts recur in every file."""
    return case_key(benchmark, json.loads(params))


def _is_number(value: Any) -> bool:
    return value is None or type(value) in (int, float)


def device_arch(cases: dict[CaseKey, dict[str, Any]]) -> str | None:
    """The accelerator architecture the records give (gfx942, sm_90...), if any."""
    for record in cases.values():
        device = record.get("device")
        if isinstance(device, dict) and device.get("arch"):
            return str(device["arch"])
    return None


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


# --- One row per case: the five-metric siblings folded into the case's time row.

_FOLDED = {"tflops": "tflops", "gbps": "gbps", "roofline_fraction": "roofline_fraction"}


def has_legacy_rows(table: pa.Table) -> bool:
    """Whether a file's rows include five-metric siblings (only results written before v5's suites do)."""
    if not table.num_rows:
        return False
    return any(name.rpartition(".")[1] and name.rpartition(".")[2] in benchmark_names.LEGACY_METRICS  # per name
               for name in pc.unique(table["benchmark"]).to_pylist())


def fold(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with each case's siblings folded into its `track_time` row's context columns.

    A sibling's value fills a context column the case record left empty
    (TFLOP/s, GB/s and roofline fraction when the sibling's status is ok;
    the error whenever it has a value, as `track_error` was reported for a
    failed gate too). Siblings are matched by class and parameter values, so
    a sibling whose definition is gone from benchmarks.json (params `p0`,
    `p1`, ...) still finds its case; a sibling without a time row stays.
    """
    time_rows: dict[tuple[str, str, tuple], dict[str, Any]] = {}
    for row in rows:
        name = benchmark_names.parse(row["benchmark"])
        if name is not None and name.method == benchmark_names.TRACK:
            time_rows[_case_of(row, name)] = row
    kept = []
    for row in rows:
        name = benchmark_names.parse(row["benchmark"])
        target = time_rows.get(_case_of(row, name)) if name and name.method != benchmark_names.TRACK else None
        if target is None:
            kept.append(row)
            continue
        field = benchmark_names.LEGACY_METRICS[name.method]
        if field == "error":
            if target.get("errors") is None and row["value"] is not None:
                target["errors"] = json.dumps({"out": row["value"]}, sort_keys=True)
        elif target.get(field) is None and row["status"] == "ok" and row["value"] is not None:
            target[field] = row["value"]
    return kept


def _case_of(row: dict[str, Any], name: benchmark_names.SuiteName) -> tuple[str, str, tuple]:
    return name.workload, name.shape_set, tuple(map(str, json.loads(row["params"]).values()))
