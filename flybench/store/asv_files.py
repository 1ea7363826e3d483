"""Reading asv's own files (benchmarks.json, machine.json, results) into plain rows.

asv's `util.load_json` does the parsing and the format-version check, so a
file flybench accepts is one `asv compare` accepts, with asv's error when it
is not (results files are parsed by orjson where that gives the same data:
see `load_json`). A results file in the plain shape `asv run` writes (format 2) is then
turned into columns directly, which is what lets ingest keep up with a
nightly-sized tree; any other shape goes through asv's own `Results.load`,
which gives the same rows, or asv's error. Nothing here touches the
database: a file either yields all its rows or raises, which is what makes
ingest transactional per file.
"""

from __future__ import annotations

import ast
import datetime as dt
import functools
import itertools
import json
import math
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from asv import util
from asv.benchmarks import Benchmarks
from asv.results import Results

from flybench import benchmark_names
from flybench.errors import FlybenchError
from flybench.store.files import BadInput

BAD_FILE = (util.UserError, ValueError, TypeError, KeyError, IndexError, AttributeError, OSError, ArithmeticError)
"""What a malformed or unreadable file raises while it is read; reported per file."""

_ARCH = re.compile(r"^(gfx\d+[a-z]?|sm_\d+[a-z]?|cpu)$")


@dataclass(frozen=True)
class BenchmarkDef:
    """One entry of benchmarks.json: what the results' positional params mean."""

    name: str
    param_names: list[str]
    params: list[list[str]]
    unit: str | None
    type: str | None
    version: str | None
    source: str | None = None  # the benchmarks.json it was read from: its results files are checked against it


def load_benchmarks(path: Path) -> dict[str, BenchmarkDef]:
    """benchmarks.json: the names of the results' positional params, and their units.

    The entries of format 1 (asv before 0.5) hold the same fields as format
    2's, so both are read as they are; `asv update` would only regenerate
    the file by running the suite.
    """
    try:
        data = util.load_json(str(path))
        version = data.pop("version", None) if type(data) is dict else None
        if version not in (1, Benchmarks.api_version):
            if type(version) is int and version > Benchmarks.api_version:
                raise util.UserError(f"format version {version} is newer than this asv understands: upgrade asv")
            raise util.UserError("not an asv benchmarks.json (an object of benchmarks with a format 'version')")
        return {name: _definition(name, entry, path) for name, entry in data.items()}
    except BAD_FILE as exc:
        raise FlybenchError(f"{path}: {exc}") from exc


def _definition(name: str, entry: Any, path: Path) -> BenchmarkDef:
    """One entry of benchmarks.json, refused where a field holds what asv never writes there."""
    if type(entry) is not dict:
        raise BadInput(f"benchmark {name!r}: its entry must be an object (asv writes one per benchmark), "
                       f"but it is {describe(entry)}; asv writes benchmarks.json with each run: restore that file")
    names, params = entry.get("param_names") or [], entry.get("params") or []
    wrong = (_not_a_list_of(names, str, "param_names", "a list of names (text)")
             or _not_a_list_of(params, list, "params", "a list of lists of values, one list per parameter")
             or next((f"{key!r} must be text, but it is {describe(entry[key])}" for key in ("unit", "type", "version")
                      if not _is_text(entry.get(key))), None))
    if wrong is None and len(names) != len(params):
        wrong = (f"'param_names' names {len(names)} parameters, but 'params' holds {len(params)} lists of values; "
                 "asv writes one list per name")
    if wrong is None:
        wrong = _wrong_unit(name, entry.get("unit"))
    if wrong is not None:
        raise BadInput(f"benchmark {name!r}: {wrong}; asv writes benchmarks.json with each run: restore that file")
    return BenchmarkDef(name, names, params, entry.get("unit"), entry.get("type"), entry.get("version"), str(path))


def _wrong_unit(name: str, unit: str | None) -> str | None:
    """Why a flybench time suite's unit is refused: the suite measures seconds (its case records hold the very
    samples asv stores, in seconds), so any other unit mislabels every row of it. A `bytes` there once relabelled
    all 144 attention rows and, bytes being exact, made 6 false "exact" regressions."""
    suite = benchmark_names.parse(name)
    if suite is None or suite.method != benchmark_names.TRACK or unit in (None, "seconds"):
        return None
    return (f"'unit' is {unit!r}, but flybench's time suites measure seconds (their case records hold the "
            "samples, in seconds); nothing was stored")


_MISSING = object()


def describe(value: Any) -> str:
    """A JSON value as the person who wrote the file sees it: its kind, and the value where it is short."""
    if value is _MISSING:
        return "missing"
    if value is None:
        return "null"
    if type(value) is bool:
        return f"the boolean {str(value).lower()}"
    if type(value) in (int, float):
        text = repr(value)
        return f"the number {text if len(text) <= 24 else f'{text[:12]}... ({len(text)} digits)'}"
    if type(value) is str:
        return f"the text {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if type(value) is list:
        return f"a list of {len(value)} value{'s' if len(value) > 1 else ''}" if value else "an empty list"
    return "an object" if type(value) is dict else type(value).__name__


def _not_a_list_of(value: Any, item: type, field: str, expected: str) -> str | None:
    """What is wrong with `field` if it is not a list of `item`s, else None."""
    if type(value) is not list:
        return f"{field!r} must be {expected}, but it is {describe(value)}"
    bad = next((i for i, v in enumerate(value) if type(v) is not item), None)
    return None if bad is None else f"{field!r} must be {expected}, but its item {bad} is {describe(value[bad])}"


def machine_row(path: Path) -> dict[str, Any]:
    """machine.json as a machines row: asv's fields, and the accelerator flybench's own entries name.

    asv's machine.json has no GPU field, so `flybench run` writes
    `...; accelerator: <name> <arch> <driver>; ...` into its `cpu` field
    (`accelerator: none` on a CPU). Nothing is read from the machine's
    name, which is whatever its owner chose (`ubuntu-22.04`, say).
    """
    data = util.load_json(str(path))
    if type(data) is not dict:
        raise BadInput(f"not an asv machine.json: it holds {describe(data)}, and asv writes an object of the "
                       "machine's facts (machine, os, arch, cpu, num_cpu, ram) with its format 'version' 1")
    version = data.pop("version", _MISSING)
    if version != 1:
        raise BadInput(f"its format 'version' must be 1 (asv's machine.json), but it is {describe(version)}")
    name = data.get("machine", _MISSING)
    if type(name) is not str or not name:
        raise BadInput(f"'machine' must be the machine's name (text), but it is {describe(name)}")
    wrong = next((key for key in ("os", "arch", "cpu", "num_cpu", "ram") if type(data.get(key)) in (list, dict)), None)
    if wrong is not None:
        raise BadInput(f"{wrong!r} must be text (asv writes what it found out about the machine), but it is "
                       f"{describe(data[wrong])}")
    cpu = _text(data.get("cpu"))
    accelerator = next((part.strip()[len("accelerator:"):].strip() for part in (cpu or "").split(";")
                        if part.strip().startswith("accelerator:")), None) or None
    arch = "cpu" if accelerator == "none" else next(
        (word for word in (accelerator or "").split() if _ARCH.match(word)), None)
    return {
        "name": name, "host": name, "accelerator": accelerator, "arch": arch,
        "os": _text(data.get("os")), "cpu_arch": _text(data.get("arch")), "cpu": cpu,
        "num_cpu": _text(data.get("num_cpu")), "ram": _text(data.get("ram")),
        "machine_json": json.dumps(data, sort_keys=True),
    }


@dataclass(frozen=True)
class ResultsFile:
    """One asv results file, flattened: the environment, the commit and one row per case.

    The rows come either as `table` (typed columns, from the direct reader)
    or as `rows` (one dict per row, from asv's loader); the other is None.
    """

    commit_hash: str
    commit_date: dt.datetime | None
    environment: dict[str, Any]
    rows: list[dict[str, Any]] | None
    table: pa.Table | None = None
    impossible: int = 0  # rows whose time no call can take, kept as failed (impossible_times)

    @property
    def row_count(self) -> int:
        return self.table.num_rows if self.table is not None else len(self.rows or ())

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled (from a worker process that read it) with the table as one Arrow IPC stream:
        several times cheaper to write and read than pickling its columns one by one."""
        table = None
        if self.table is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, self.table.schema) as writer:
                writer.write_table(self.table)
            table = sink.getvalue().to_pybytes()
        return _unpickle_results_file, (self.commit_hash, self.commit_date, self.environment, self.rows, table)


def _unpickle_results_file(commit_hash: str, commit_date: dt.datetime | None, environment: dict[str, Any],
                           rows: list[dict[str, Any]] | None, table: bytes | None) -> ResultsFile:
    return ResultsFile(commit_hash, commit_date, environment, rows,
                       None if table is None else pa.ipc.open_stream(table).read_all())


def read_results(path: Path, machine: str, benchmarks: dict[str, BenchmarkDef],
                 content: bytes | None = None) -> ResultsFile:
    """All rows of one results file, one per benchmark x parameter combination.

    `content`, when given, is the file's bytes as already read (for its
    fingerprint): they are parsed instead of reading the file again.
    """
    if content is None:
        content = path.read_bytes()
    data, by_orjson = _load_results_json(path, content)
    _check_machine(path, data, machine)
    # orjson reads an integer beyond 64 bits as a float; one search of the bytes (a few microseconds for
    # a small file) spares the float columns of nearly every file their checks (see `_read_direct`).
    big_floats_not_plain = by_orjson and _may_hold_a_big_integer(content)
    try:
        try:
            return _read_direct(data, machine, benchmarks, big_floats_not_plain=big_floats_not_plain)
        except _BigFloat:  # maybe an integer beyond 64 bits in the file: read it as `json` does, and again
            return _read_direct(_load_results_json(path, content, orjson_first=False)[0], machine, benchmarks)
    except Exception:  # noqa: BLE001 - not the plain shape: asv's loader reads it, or says what is wrong
        check_results(data)  # the shapes the direct reader refuses that asv's loader would misread
        return _read_with_asv(path, machine, benchmarks)


def _check_machine(path: Path, data: dict[str, Any], machine: str) -> None:
    """Refuse a results file that names another machine than the machine.json beside it (as asv's loader does),
    saying which two names differ, and where."""
    named = data["params"].get("machine", _MISSING) if type(data.get("params")) is dict else machine
    if named != machine:
        shown = repr(named) if type(named) is str else describe(named)
        raise BadInput(
            f"its params.machine is {shown}, but the machine.json of its folder {path.parent.name!r} names the "
            f"machine {machine!r}: asv keeps each machine's results in a folder of its own, named after it. "
            "Correct the name that is wrong (the folder and its machine.json's \"machine\" name the machine "
            "these results were measured on), then ingest again")


def _load_results_json(path: Path, content: bytes | None, orjson_first: bool = True) -> tuple[Any, bool]:
    """A results file's data in asv's current format (2), and whether orjson parsed it.

    A file in asv's older format (1) is brought up to date in memory by
    asv's own update step (`Results.update_to_2`, what `asv update` runs),
    so an old tree is read as it is, and never rewritten. Anything that is
    not a results file at all gets a message saying what it is instead.
    """
    data, by_orjson = _parse(path, content, orjson_first)
    if type(data) is dict and type(data.get("version")) is int and data["version"] <= Results.api_version:
        version = data.pop("version")
        if version < Results.api_version:
            _check_older_format(data, version)
        try:
            for step in range(version + 1, Results.api_version + 1):
                data = getattr(Results, f"update_to_{step}", lambda d: d)(data)
        except BAD_FILE as exc:  # asv's update step on a file it cannot read: a key missing, mostly
            raise BadInput(f"{_claims_older_format(version)}, but asv's update step cannot read it ({exc}). "
                           f"{_OLDER_FORMAT_ADVICE}") from None
        return data, by_orjson
    if data is None:
        _plain_json(path, content if content is not None else path.read_bytes())  # raises: why it is not JSON
    if type(data) is not dict or type(data.get("version")) is not int:
        what = describe(data) if type(data) is not dict else f"an object of keys {sorted(data)[:5]}"
        raise BadInput(f"not an asv results file: it holds {what}, and asv writes an object with its "
                       "format 'version' and 'results'")
    return util.load_json(str(path), Results.api_version), False  # newer than this asv: asv's own advice


_OLDER_FORMAT_ADVICE = ("If a newer asv (0.5 or later) wrote it, its \"version\" should be 2: correct that; "
                        "otherwise correct the entry, or move the file aside, and ingest again (the other files "
                        "are ingested as they are)")


def _claims_older_format(version: int) -> str:
    return f"its format 'version' is {version}, " + (
        "asv's older format (asv before 0.5)" if version == 1 else "older than any format asv writes (1 or 2)")


def _check_older_format(data: dict[str, Any], version: int) -> None:
    """Refuse, with what to do, a file that claims asv's older format (1) but does not hold it.

    asv's update step (`Results.update_to_2`) takes any entry that is not an
    object for a bare result, so a current-format file labelled 1 became
    results that were lists, and the reader failed with `TypeError: must be
    real number, not list`. What the update reads is checked here first.
    """
    claims = _claims_older_format(version)
    if "result_columns" in data:
        raise BadInput(f"{claims}, but it holds 'result_columns', which only the current format (2) has. "
                       f"{_OLDER_FORMAT_ADVICE}")
    results = data.get("results", _MISSING)
    if type(results) is not dict:
        raise BadInput(f"{claims}, so its 'results' must be an object (benchmark: its result), but it is "
                       f"{describe(results)}. {_OLDER_FORMAT_ADVICE}")
    for name, entry in results.items():
        problem = _older_entry_problem(entry)
        if problem is not None:
            raise BadInput(f"{claims}; benchmark {name!r}: {problem}. {_OLDER_FORMAT_ADVICE}")


def _is_number(value: Any) -> bool:
    return value is None or type(value) in (int, float)


def _older_entry_problem(entry: Any) -> str | None:
    """What is wrong with one benchmark's entry in asv's older format (1), or None: a number or null (the
    oldest shape), or an object with a 'result' (a number, null, or a list of them) and optional 'stats'."""
    if _is_number(entry):
        return None
    if type(entry) is not dict:
        return f"its entry must be a number, null or an object with a 'result', but it is {describe(entry)}"
    result = entry.get("result", _MISSING)
    if result is _MISSING:
        return "its entry has no 'result'"
    if not (_is_number(result) or type(result) is list and all(_is_number(v) for v in result)):
        shown = next((v for v in result if not _is_number(v)), None) if type(result) is list else result
        return f"its 'result' must be a number, null or a list of them, but it holds {describe(shown)}"
    stats = entry.get("stats")
    for stat in stats if type(stats) is list else [stats]:
        if stat is None:
            continue
        ci = stat.get("ci_99", _MISSING) if type(stat) is dict else _MISSING
        if type(ci) is not list or len(ci) != 2 or not all(_is_number(v) for v in ci):
            shown = (("an object with no 'ci_99'" if ci is _MISSING else f"a 'ci_99' that is {describe(ci)}")
                     if type(stat) is dict else describe(stat))
            return ("its 'stats' must be objects with 'ci_99' (a list of two numbers), one per result, or null, "
                    f"but it holds {shown}")
    return None


def _plain_json(path: Path, content: bytes) -> Any:
    """The file parsed as `json` parses it, or a message saying why it is not JSON text."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 JSON text (a binary file?): byte {exc.start} cannot be decoded") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadInput(f"not JSON: {exc}; asv writes results files as JSON") from None


_UNIQUE: dict[str, list[list[Any]]] = {}
"""Per benchmark, the parameter lists last found to give distinct combinations."""

_REQUIRED = ("commit_hash", "env_name", "date", "python", "params", "requirements", "result_columns", "results")
_FIELDS = (  # the fields of a results file (format 2), what asv writes in each, and how to say it
    ("commit_hash", (str,), "text (the commit's hash)"),
    ("env_name", (str,), "text (the environment's name)"),
    ("date", (int, float, type(None)), "a number (the commit's date, in ms since the epoch) or null"),
    ("python", (str,), "text (the Python version)"),
    ("params", (dict,), "an object (the environment's parameters: machine, python, ...)"),
    ("requirements", (dict,), "an object (package: version)"),
    ("env_vars", (dict,), "an object (variable: value)"),
    ("durations", (dict,), "an object (benchmark: seconds)"),
    ("result_columns", (list,), "a list of column names"),
    ("results", (dict,), "an object (benchmark: its values, one per result column)"),
)


MAX_COMBINATIONS = 100_000
"""Parameter combinations one benchmark of a results file may name: flybench's largest suite has a few hundred."""


def check_results(data: dict[str, Any]) -> None:
    """Refuse, with what is wrong, a results file whose entries do not fit its own columns.

    asv's loader zips values onto columns and so drops extra values, and
    both readers would take a result list shorter than the parameter grid
    as cases that failed: neither is what asv wrote, so such a file is bad.
    """
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise BadInput(f"not an asv results file: no {', '.join(map(repr, missing))}")
    wrong = next(((key, expected) for key, types, expected in _FIELDS if key in data and type(data[key]) not in types),
                 None)
    if wrong is not None:
        raise BadInput(f"{wrong[0]!r} must be {wrong[1]}, but it is {describe(data[wrong[0]])}")
    columns, results = data["result_columns"], data["results"]
    if not all(type(c) is str for c in columns):
        raise BadInput(_not_a_list_of(columns, str, "result_columns", "a list of column names"))
    unknown = [c for c in columns if c not in _KNOWN_COLUMNS]
    if unknown:
        raise BadInput(f"unknown result columns {unknown}: asv writes {sorted(_KNOWN_COLUMNS)}")
    at = {column: i for i, column in enumerate(columns)}
    for name, entry in results.items():
        if type(entry) is not list:
            raise BadInput(f"benchmark {name!r}: its entry must be a list of values, one per result column, but it "
                           f"is {describe(entry)}")
        if len(entry) > len(columns):
            raise BadInput(f"benchmark {name!r}: {len(entry)} values for {len(columns)} columns {columns}")
        column = {key: entry[i] for key, i in at.items() if i < len(entry)}
        params = column.get("params", [])
        wrong = _not_a_list_of(params, list, "params", "a list of lists of values, one list per parameter")
        if wrong is not None:
            raise BadInput(f"benchmark {name!r}: {wrong}")
        combinations = math.prod(len(values) for values in params)
        if combinations > MAX_COMBINATIONS:  # before anything expands it: a 250^3 grid took minutes and gigabytes
            raise BadInput(f"benchmark {name!r}: its parameter grid has {combinations:,} combinations, more than "
                           f"the {MAX_COMBINATIONS:,} one results file may hold for a benchmark")
        _check_entry_values(name, column, combinations)
        if _UNIQUE.get(name) == params:
            continue
        texts = [json.dumps([_literal(v) for v in combo], default=str) for combo in itertools.product(*params)]
        if len(set(texts)) == len(texts):
            _UNIQUE[name] = params  # every file of a tree repeats the same lists: checked once
        else:
            twice = next(t for t in texts if texts.count(t) > 1)
            raise BadInput(f"benchmark {name!r} holds the parameter combination {twice} twice (as different "
                           "reprs of one value): a combination must name one case")


def _check_entry_values(name: str, column: dict[str, Any], combinations: int) -> None:
    """Refuse a benchmark's entry whose per-case columns are not lists of one value per parameter combination
    (or null): asv's loader would take a shorter list as cases that failed. Their values are left to the readers,
    as asv's loader reads some that are not plain numbers (a sample written as text)."""
    for key in ("result", "samples", *(f"stats_{s}" for s in _STATS)):
        values = column.get(key)
        if values is None:
            continue
        what = "a list of sample lists" if key == "samples" else "a list of values"
        if type(values) is not list:
            raise BadInput(f"benchmark {name!r}: its {key!r} must be {what}, one per parameter combination, or "
                           f"null, but it is {describe(values)}")
        if len(values) != combinations:
            raise BadInput(f"benchmark {name!r}: {len(values)} {key.replace('result', 'results')} for "
                           f"{combinations} parameter combinations; asv writes one per combination")
        bad = next((v for v in values if v is not None and type(v) is not list), None) if key == "samples" else None
        if bad is not None:
            raise BadInput(f"benchmark {name!r}: its 'samples' must be {what} (or null), but it holds {describe(bad)}")


def _read_with_asv(path: Path, machine: str, benchmarks: dict[str, BenchmarkDef]) -> ResultsFile:
    """Any results file asv can load, through `Results.load`, one dict per row.

    A file in asv's older format is loaded from an updated copy in a
    temporary folder (asv's loader reads only the current format).
    """
    try:
        results = Results.load(str(path), machine_name=machine)
    except util.UserError:
        data, _ = _load_results_json(path, None)
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / path.parent.name / path.name
            copy.parent.mkdir()
            util.write_json(str(copy), data, Results.api_version, compact=True)
            try:
                results = Results.load(str(copy), machine_name=machine)
            except util.UserError as exc:  # asv names the file it read: the person's own, not the copy
                raise util.UserError(str(exc).replace(str(copy), str(path))) from None
    rows = []
    for name in sorted(results.get_all_result_keys()):
        raw_params = results.get_result_params(name)
        combos = list(itertools.product(*raw_params))
        definition = definition_of(benchmarks, name, len(raw_params))
        check_definition(name, definition, raw_params, results.benchmark_version.get(name))
        names = _param_names(definition, len(raw_params))
        values = results.get_result_value(name, raw_params)
        bad = next((v for v in values if not _is_number(v)), _MISSING)
        if bad is not _MISSING:  # math.isinf below would say only "must be real number, not list"
            raise BadInput(f"benchmark {name!r}: its results must be numbers, or null for a case that failed, but "
                           f"one is {describe(bad)}; correct the file, or move it aside, and ingest again")
        stats = results.get_result_stats(name, raw_params)
        samples = results.get_result_samples(name, raw_params)
        for combo, value, stat, sample in zip(combos, values, stats, samples):
            stat = stat or {}
            rows.append({
                "benchmark": name,
                "params": params_json(dict(zip(names, (_literal(p) for p in combo)))),
                "unit": (definition.unit if definition else None) or _unit_of(name),
                "value": _number(value) if value is None or not math.isinf(value) else None,
                "status": _asv_status(value),
                "reason": non_finite_reason(value) if value is not None and math.isinf(value) else None,
                "ci_99_a": _number(stat.get("ci_99_a")), "ci_99_b": _number(stat.get("ci_99_b")),
                "q_25": _number(stat.get("q_25")), "q_75": _number(stat.get("q_75")),
                "number": stat.get("number"), "repeat": stat.get("repeat"),
                "samples": [float(s) for s in sample] if sample else None,
                "started_at": _timestamp(results.started_at.get(name)),
                "duration": results.duration.get(name),
                "benchmark_version": results.benchmark_version.get(name),
            })
    keys = [(row["benchmark"], row["params"]) for row in rows]
    if len(set(keys)) < len(keys):
        raise BadInput(f"{path} holds a benchmark's parameter combination twice: asv writes each once")
    environment = _environment(machine, results.env_name, results.params, results._requirements,  # no getter
                               results.env_vars)
    return ResultsFile(results.commit_hash, _timestamp(results.date), environment, rows)


def load_json(path: Path, api_version: int, content: bytes | None = None) -> Any:
    """asv's `util.load_json(path, api_version)`, parsed by orjson when it can be: the same data, or asv's error.

    orjson reads a results file several times faster than the standard
    library, but it is stricter (no NaN, which asv writes for a skipped
    case; no lone surrogate) and reads an integer beyond 64 bits as a float.
    Such files, and any file orjson refuses, are parsed by `json` as asv
    parses them; a file that one cannot parse either, or whose format
    version is not `api_version`, goes to asv itself for its own error.
    `content`, when given, is the file's bytes, already read.
    """
    return _load_json(path, api_version, content, big_integers_as_floats=False)[0]


def _load_json(path: Path, api_version: int, content: bytes | None,
               big_integers_as_floats: bool) -> tuple[Any, bool]:
    """`load_json`, and whether orjson parsed it (so a float of 2**63 or more may be an integer of the file).

    With `big_integers_as_floats`, the file is not searched for such
    integers first: the caller checks the floats it uses instead.
    """
    data, by_orjson = _parse(path, content, big_integers_as_floats)
    if type(data) is dict and "version" in data and data["version"] == api_version:
        del data["version"]
        return data, by_orjson
    return util.load_json(str(path), api_version), False  # asv's parse error or version check, in asv's words


def _parse(path: Path, content: bytes | None, big_integers_as_floats: bool) -> tuple[Any, bool]:
    """The file's JSON (None if it is not JSON), and whether orjson parsed it (see `_load_json`)."""
    if content is None:
        content = path.read_bytes()
    if big_integers_as_floats or not _may_hold_a_big_integer(content):
        try:
            return orjson.loads(content), True
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(content.decode("utf-8")), False
    except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError)
        return None, False


_BIG = 2.0**63  # orjson reads an integer beyond 64 bits as a float at least this large


def _holds_big_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float of magnitude `_BIG` or more (an integer, maybe, in the file)."""
    if type(value) is float:
        return abs(value) >= _BIG
    if type(value) is dict:
        return any(map(_holds_big_float, value.values()))
    if type(value) is list:
        return any(map(_holds_big_float, value))
    return False


def _has_big(array: pa.Array | pa.ChunkedArray) -> bool:
    return bool(pc.any(pc.greater_equal(pc.abs(array), _BIG)).as_py())


# Each byte as "d" (a digit), "b" (what can stand just before a number: `:`, `,`, `[`, whitespace, `-`) or "x".
_DIGITS_AND_STARTS = bytes(
    ord("d") if c in b"0123456789" else ord("b") if c in b":,[ \t\n\r-" else ord("x")
    for c in range(256))
_BIG_INTEGER = b"b" + b"d" * 19


def _may_hold_a_big_integer(content: bytes) -> bool:
    """Whether `content` may hold a JSON integer beyond 64 bits: a number that starts with 19 digits.

    orjson reads such an integer as a float, `json` as an int. Digits in a
    string, or in a number with a fraction or an exponent, can make this
    true for a file without one: it is then only parsed by `json`, as asv does.
    """
    classes = content[:19].translate(_DIGITS_AND_STARTS)
    return classes == _BIG_INTEGER[1:] or _BIG_INTEGER in content.translate(_DIGITS_AND_STARTS)


class _NotPlain(Exception):
    """The file is not in the shape the direct reader handles; asv's loader reads it instead."""


class _BigFloat(_NotPlain):
    """orjson's data holds a float that may be an integer beyond 64 bits in the file (see `read_results`)."""


_STATS = ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")
_KNOWN_COLUMNS = frozenset(("result", "params", "version", "started_at", "duration", "samples", "profile",
                            *(f"stats_{s}" for s in _STATS)))


def _read_direct(data: Any, machine: str, benchmarks: dict[str, BenchmarkDef],
                 big_floats_not_plain: bool = False) -> ResultsFile:
    """A format-2 results file (as `asv run` writes it) straight into typed columns.

    Gives exactly the rows `_read_with_asv` gives, and raises `_NotPlain` (or
    anything else) for every file whose shape is not the plain one: each
    benchmark's params a list of lists, each per-case column a list with one
    entry per parameter combination (or null), combinations unique, numbers
    plain JSON numbers. Those files take asv's loader instead. With
    `big_floats_not_plain` (the data is orjson's), raises `_BigFloat` where a
    value stored here is a float of 2**63 or more, which may be an integer in
    the file that `json` would read as an int.
    """
    if type(data) is not dict:
        raise _NotPlain
    env_params, commit_hash, env_name = data["params"], data["commit_hash"], data["env_name"]
    requirements, date, python = data["requirements"], data["date"], data["python"]
    env_vars = data.get("env_vars", {})
    durations = data.get("durations", {})
    columns, results = data["result_columns"], data["results"]
    if (type(env_params) is not dict or env_params.get("machine") != machine or not _is_text(env_params.get("python"))
            or type(commit_hash) is not str or type(env_name) is not str or type(durations) is not dict
            or type(python) is not str or type(requirements) is not dict or type(env_vars) is not dict
            or type(results) is not dict or type(columns) is not list or not _KNOWN_COLUMNS.issuperset(columns)
            or len(set(columns)) != len(columns)):
        raise _NotPlain
    index = {column: i for i, column in enumerate(columns)}
    at = {key: index.get(key, len(columns)) for key in _KNOWN_COLUMNS}  # an absent column reads as null
    i_params, i_version, i_started, i_duration = at["params"], at["version"], at["started_at"], at["duration"]
    per_case = [at["result"], at["samples"], *(at[f"stats_{s}"] for s in _STATS)]
    # Per benchmark: its entry (the per-case columns are read from all entries at once, below), its
    # params texts and the values its rows share.
    entries: list[list[Any]] = []
    params_col: list[str] = []
    names, counts, units, started, durations_col, versions = [], [], [], [], [], []
    for name in sorted(results):
        entry = results[name]
        if type(entry) is not list or len(entry) > len(columns):
            raise _NotPlain
        width = len(entry)
        raw_params = entry[i_params] if i_params < width else None
        if type(raw_params) is list and all(type(v) is list for v in raw_params) and math.prod(
                len(v) for v in raw_params) > MAX_COMBINATIONS:
            raise _NotPlain  # `check_results` says what is wrong, before anything expands the grid
        definition = definition_of(benchmarks, name, len(raw_params) if type(raw_params) is list else 0)
        version = entry[i_version] if i_version < width else None
        known = _PARAMS.get(name)  # `_params_texts`, its usual answer without the call
        if known is not None and known[0] is definition and known[1] == raw_params and known[2] == version:
            texts = known[3]
        else:
            texts = _params_texts(name, definition, raw_params, version)
        unit = (definition.unit if definition else None) or _unit_of(name)
        duration = entry[i_duration] if i_duration < width else durations.get(name)
        if not (_is_text(unit) and _is_text(version) and (duration is None or type(duration) in (int, float))):
            raise _NotPlain
        entries.append(entry)
        params_col += texts
        names.append(name)
        counts.append(len(texts))
        units.append(unit)
        versions.append(version)
        durations_col.append(duration)
        started.append(entry[i_started] if i_started < width else None)
    in_all = list(zip(*entries))  # the columns every entry is wide enough to have
    value_col, samples_col, *stat_cols = (_per_case(entries, in_all, i, counts) for i in per_case)
    if value_col is None:
        value_col = [[None] * n for n in counts]
    shared = pa.table({  # one row per benchmark, then one per case
        "benchmark": pa.array(names, pa.string()), "unit": pa.array(units, pa.string()),
        "started_at": _timestamps(started), "duration": _doubles(durations_col),
        "benchmark_version": pa.array(versions, pa.string()),
    }).take(pa.array(np.repeat(np.arange(len(names), dtype=np.int32), counts)))
    table = {
        "benchmark": shared["benchmark"],
        "params": _json_texts(params_col),
        "unit": shared["unit"],
        **_values_and_status(_flat(value_col, pa.float64())),  # NaN kept: asv's mark of a skipped case
    }
    rows = len(params_col)
    for stat, column in zip(_STATS, stat_cols):
        if column is None:  # absent or null in every entry, as in most files of a small suite: no conversion
            table[stat] = pa.nulls(rows, pa.int32() if stat in ("number", "repeat") else pa.float64())
        else:
            table[stat] = _integers(column) if stat in ("number", "repeat") else _null_nan(_flat(column, pa.float64()))
    table["samples"] = pa.nulls(rows, pa.list_(pa.float64())) if samples_col is None else _sample_lists(samples_col)
    for name in ("started_at", "duration", "benchmark_version"):
        table[name] = shared[name]
    if big_floats_not_plain and (
            _holds_big_float([env_params, requirements, env_vars])
            or any(_has_big(table[name]) for name in ("value", "ci_99_a", "ci_99_b", "q_25", "q_75", "duration"))
            or _has_big(table["samples"].flatten())):
        raise _BigFloat  # the rest (dates, params, versions, counts) is not stored from a float of that size
    environment = _environment(machine, env_name, env_params, requirements, env_vars)
    return ResultsFile(commit_hash, _timestamp(date), environment, None, pa.table(table))


def _per_case(entries: list[list[Any]], in_all: list[tuple[Any, ...]], i: int,
              counts: list[int]) -> list[list[Any]] | None:
    """Column `i` of each benchmark's entry: a list with one value per combination; null or absent, nulls.

    None when the column is absent or null in every entry. `in_all` is the
    entries' columns up to the narrowest entry's width. Raises `_NotPlain`
    for anything else.
    """
    column = list(in_all[i]) if i < len(in_all) else [entry[i] if i < len(entry) else None for entry in entries]
    if column.count(None) == len(column):
        return None
    if None in column:  # `[...] == None` is never true: this finds only null entries
        column = [[None] * n if values is None else values for values, n in zip(column, counts)]
    if not _LIST.issuperset(map(type, column)) or list(map(len, column)) != counts:
        raise _NotPlain
    return column


_LIST = frozenset((list,))


def _flat(column: list[list[Any]], value_type: pa.DataType | None, from_pandas: bool = False) -> pa.Array:
    """The lists of a `_per_case` column, one after another, as one array (of `value_type`, or inferred).

    Converts each value as `pa.array(values, value_type)` of all of them would.
    """
    nested = pa.array(column, None if value_type is None else pa.list_(value_type), from_pandas=from_pandas)
    if not pa.types.is_list(nested.type):
        raise _NotPlain  # only an inferred type can be another, for no benchmarks at all (see `_integers`)
    return nested.flatten()


_PARAMS: dict[str, tuple[BenchmarkDef | None, list[list[str]], Any, list[str]]] = {}


def _params_texts(name: str, definition: BenchmarkDef | None, raw_params: Any, version: Any) -> list[str]:
    """The params text of each of a benchmark's combinations, in asv's order.

    Every results file of a tree repeats the same parameter lists, so the
    texts are kept per benchmark and reused (with the check against the
    definition passed) while its params, version and definition are the
    same. Only lists of asv's repr strings are plain (and only they are
    kept: 1 == 1.0 == True, but a string equals only a string).
    """
    known = _PARAMS.get(name)
    if known is not None and known[0] is definition and known[1] == raw_params and known[2] == version:
        return known[3]
    if type(raw_params) is not list or not all(
            type(values) is list and all(type(v) is str for v in values) for values in raw_params):
        raise _NotPlain
    check_definition(name, definition, raw_params, version)
    param_names = _param_names(definition, len(raw_params))
    if not all(type(n) is str for n in param_names):
        raise _NotPlain
    combos = list(itertools.product(*raw_params))
    texts = [params_json(dict(zip(param_names, (_literal(p) for p in combo)))) for combo in combos]
    if len(set(texts)) != len(texts):
        raise _NotPlain  # a combination twice, maybe as two reprs of one value: `check_results` says which
    _PARAMS[name] = (definition, raw_params, version, texts)
    return texts


def check_definition(name: str, definition: BenchmarkDef | None, raw_params: list[list[Any]], version: Any) -> None:
    """Refuse a benchmark's results that the benchmarks.json naming their parameters contradicts.

    A results file does not carry its parameters' names: benchmarks.json
    gives them, by position, so a definition in another order relabels
    every row (`dtype: rocblas, provider: bf16`). What the data lets one check:

    - the count, where the results were measured by the benchmark version
      the definition describes (asv's version hashes the benchmark's code,
      whose signature takes the parameters); another version may have had
      other parameters, and is named p0, p1, ... as before;
    - the order: values at a position that the definition lists under
      another parameter, and none of them under this one. A value it does
      not list at all contradicts nothing: a case may have left the suite.

    Only definitions read from the tree's benchmarks.json are checked (not
    stored ones, nor those borrowed from a sibling method).
    """
    if definition is None or definition.source is None:
        return
    names = definition.param_names
    if len(raw_params) != len(names):
        if version is not None and version == definition.version:
            raise BadInput(
                f"benchmark {name!r} has {len(raw_params)} parameter lists here, but {definition.source} names "
                f"{len(names)} parameters ({', '.join(names) or 'none'}) for the same benchmark version "
                f"{str(version)[:12]}: the two files describe different benchmarks. {WHAT_TO_DO}")
        return
    here = [{_value_key(v) for v in values} for values in raw_params]
    found = misplaced(here, [{_value_key(v) for v in values} for values in definition.params])
    if found is not None:
        i, j = found
        raise BadInput(
            f"benchmark {name!r}: its parameter {i + 1} here takes {shown(here[i])}, which {definition.source} "
            f"lists under {names[j]!r}, not under {names[i]!r}: the param_names there ({', '.join(names)}) are not "
            f"in the order of this file's params, and its rows would be named wrongly. {WHAT_TO_DO}")


def misplaced(here: list[set[str]], listed: list[set[str]]) -> tuple[int, int] | None:
    """(i, j) where the values at position i are all listed at position j, and none of them at i: the sign of two
    names in another order. Values listed nowhere prove nothing (a case that left the suite since)."""
    for i, values in enumerate(here):
        if not values or values & listed[i]:
            continue
        j = next((j for j, other in enumerate(listed) if j != i and values <= other), None)
        if j is not None:
            return i, j
    return None


def shown(values: set[str]) -> str:
    """A few of `values`, for a message."""
    return ", ".join(sorted(values)[:3]) + (", ..." if len(values) > 3 else "")


WHAT_TO_DO = ("Ingest this file with the benchmarks.json written with it (asv run writes one), or correct the "
               "benchmark's param_names and params there")


def _value_key(value: Any) -> str:
    """A parameter value (asv's repr text) as a set member; anything else by its JSON text."""
    return value if type(value) is str else json.dumps(value, sort_keys=True, default=str)


def _values_and_status(value: pa.Array) -> dict[str, pa.Array]:
    """asv's value as `value` (NaN and infinities as NULL) and `status`: null failed, NaN unavailable, a
    number ok; an infinity (which asv never writes for a case it ran) failed, with `reason` saying so."""
    finite = pc.is_finite(value)
    if not value.null_count and pc.all(finite).as_py():
        return {"value": value, "status": pa.repeat(pa.scalar("ok"), len(value))}
    nan, infinite = pc.is_nan(value), pc.is_inf(value)
    status = pc.if_else(pc.or_kleene(value.is_null(), infinite), "failed", pc.if_else(nan, "unavailable", "ok"))
    columns = {"value": pc.if_else(finite, value, pa.scalar(None, pa.float64())), "status": status}
    if pc.any(infinite).as_py():
        columns["reason"] = pa.array([non_finite_reason(v) if math.isinf(v or 0) else None
                                      for v in value.to_pylist()], pa.string())
    return columns


def non_finite_reason(value: float) -> str:
    """Why a row holding `value` (an infinity) is stored as failed, without it."""
    return f"asv stored the non-finite value {value}: recorded as failed, as no measurement gives it"


def _environment(machine: str, env_name: str, params: dict[str, Any], requirements: Any,
                 env_vars: Any) -> dict[str, Any]:
    return {
        "machine": machine, "env_name": env_name, "python": params.get("python"),
        "params": json.dumps(params, sort_keys=True),
        "requirements": json.dumps(requirements, sort_keys=True),
        "env_vars": json.dumps(env_vars, sort_keys=True),
    }


_JSON = pa.json_() if hasattr(pa, "json_") else None  # Arrow's JSON extension type: pyarrow 19 and later


def _json_texts(texts: list[str]) -> pa.Array:
    """Texts that are JSON already (`json.dumps` wrote them) as a column DuckDB takes for JSON as it is.

    Cast from VARCHAR instead, DuckDB would parse each text again to check it.
    """
    array = pa.array(texts, pa.string())
    return array if _JSON is None else pa.ExtensionArray.from_storage(_JSON, array)


def _null_nan(array: pa.Array) -> pa.Array:
    """A DOUBLE column with NaN as NULL, as `_number` makes it (and `from_pandas` would, more slowly)."""
    nan = pc.is_nan(array)
    if pc.any(nan).as_py():
        return pc.if_else(nan, pa.scalar(None, pa.float64()), array)
    return array


def _doubles(values: list[Any]) -> pa.Array:
    """A DOUBLE column: None and NaN become NULL, as `_number` makes them."""
    return pa.array(values, pa.float64(), from_pandas=True)


def _integers(column: list[list[Any]]) -> pa.Array:
    """An INTEGER column of plain JSON integers (anything else: not plain)."""
    if not column:
        return pa.array([], pa.int32())
    array = _flat(column, None)  # the type all the values have, as `pa.array(values)` infers it
    if array.type != pa.int64() and array.type != pa.null():
        raise _NotPlain
    return array.cast(pa.int32())  # safe: out of range raises, and asv's loader says what DuckDB says


def _sample_lists(column: list[list[Any]]) -> pa.Array:
    """A DOUBLE[] column: an empty or absent list is NULL, a NaN sample NULL (as before), a null sample not plain."""
    array = _flat(column, pa.list_(pa.float64()))
    flat = array.flatten()
    if (flat.null_count or pc.any(pc.equal(pc.list_value_length(array), 0)).as_py()
            or (len(flat) and pc.any(pc.is_nan(flat)).as_py())):
        return _sample_lists_of(list(itertools.chain.from_iterable(column)))  # the few files that need it
    return array


def _sample_lists_of(samples: list[Any]) -> pa.Array:
    """`_sample_lists` of each row's samples, one list (or None) per row."""
    array = pa.array(samples, pa.list_(pa.float64()))
    if pc.any(pc.equal(pc.list_value_length(array), 0)).as_py():
        samples = [s if s else None for s in samples]
        array = pa.array(samples, pa.list_(pa.float64()))
    flat = array.flatten()
    if flat.null_count:
        raise _NotPlain  # asv's loader raises on it (float(None))
    if len(flat) and pc.any(pc.is_nan(flat)).as_py():
        array = pa.array(samples, pa.list_(pa.float64()), from_pandas=True)
    return array


def _is_text(value: Any) -> bool:
    return value is None or type(value) is str


def params_json(params: dict[str, Any]) -> str:
    """The canonical text of a parameter combination: keys in benchmark order, stable across runs."""
    return json.dumps(params, default=str)


def definition_of(benchmarks: dict[str, BenchmarkDef], name: str, count: int) -> BenchmarkDef | None:
    """The definition that names a benchmark's `count` parameters and its unit.

    benchmarks.json holds only the benchmarks of the suite's last run. A
    benchmark that has left it (retired, renamed) is named after a method
    of its class that is still defined with as many parameters, as asv
    gives every method of a class the class's `params` and `param_names`;
    its unit then follows from its name's prefix (`_unit_of`). A flybench
    case suite with no definition at all is named by flybench's own scheme
    (case, provider, dtype; seconds), so a tree copied without its
    benchmarks.json still matches the same cases stored from other trees.
    None when nothing says more: the parameters are then `p0`, `p1`, ...
    """
    definition = benchmarks.get(name)
    if definition is not None:
        return definition
    suite = benchmark_names.parse(name)
    if suite is not None and suite.method == benchmark_names.TRACK and count == len(benchmark_names.PARAM_NAMES):
        return BenchmarkDef(name, list(benchmark_names.PARAM_NAMES), [], "seconds", "track", None)
    cached = _DERIVED.get((name, count))
    if cached is not None and benchmarks.get(cached[0].name) is cached[0]:
        return cached[1]
    owner = name.rpartition(".")[0]
    sibling = next((b for b in benchmarks.values() if b.name.rpartition(".")[0] == owner and b.param_names
                    and len(b.param_names) == count), None) if owner and count else None
    if sibling is None:
        return None
    derived = BenchmarkDef(name, sibling.param_names, sibling.params, _unit_of(name), None, None)
    _DERIVED[name, count] = (sibling, derived)
    return derived


_DERIVED: dict[tuple[str, int], tuple[BenchmarkDef, BenchmarkDef]] = {}
"""Per retired benchmark and parameter count: the sibling it was named after, and the definition made."""

_UNITS = (("time_", "seconds"), ("timeraw_", "seconds"), ("mem_", "bytes"), ("peakmem_", "bytes"))


def _unit_of(name: str) -> str:
    """The unit asv gives a benchmark of this name without a definition: by its prefix, else "unknown"."""
    method = name.rpartition(".")[2]
    return next((unit for prefix, unit in _UNITS if method.startswith(prefix)), "unknown")


def _param_names(definition: BenchmarkDef | None, count: int) -> list[str]:
    if definition and len(definition.param_names) == count:
        return definition.param_names
    return [f"p{i}" for i in range(count)]


def _literal(text: str) -> Any:
    """asv stores each parameter value as its repr; non-literal reprs stay text."""
    if type(text) is str:
        return _literal_text(text)
    return _literal_eval(text)


@functools.lru_cache(maxsize=65536)
def _literal_text(text: str) -> Any:
    return _literal_eval(text)  # the values are only read (dumped to JSON), so sharing them is safe


def _literal_eval(text: Any) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _asv_status(value: Any) -> str:
    """asv stores a failed case as null and a skipped one (NotImplementedError in setup) as NaN."""
    if value is None or math.isinf(value):
        return "failed"
    return "unavailable" if util.is_nan(value) else "ok"


def _number(value: Any) -> float | None:
    return None if util.is_na(value) else float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


_MAX_MS = 10**15  # milliseconds (the year 33658) whose microseconds fit in 64 bits; beyond, datetime says why


def _timestamps(js_ms: list[Any]) -> pa.Array:
    """`_timestamp` of each value, as a column: whole milliseconds (what asv writes) converted at once."""
    if all(type(v) is int and -_MAX_MS < v < _MAX_MS for v in js_ms if v is not None):
        return pa.array(js_ms, pa.timestamp("ms")).cast(pa.timestamp("us"))
    return pa.array([_timestamp_cached(v) for v in js_ms], pa.timestamp("us"))


@functools.lru_cache(maxsize=4096)
def _timestamp_cached(js_ms: int | None) -> dt.datetime | None:
    return _timestamp(js_ms)


def _timestamp(js_ms: int | None) -> dt.datetime | None:
    """asv's JavaScript timestamps (ms since the epoch, UTC) as naive UTC datetimes."""
    if js_ms is None:
        return None
    if not isinstance(js_ms, (int, float)) or not EARLIEST_MS <= js_ms < LATEST_MS:
        raise BadInput(f"date {js_ms!r} is not a time between 2000 and 2100 in ms since the epoch")
    return dt.datetime.fromtimestamp(js_ms / 1000, tz=dt.timezone.utc).replace(tzinfo=None)


EARLIEST_MS, LATEST_MS = 946_684_800_000, 4_102_444_800_000
"""2000-01-01 and 2100-01-01 UTC in asv's ms since the epoch: the times a results file may carry."""


MAX_SECONDS = 3600.0
"""No timed call of a case takes an hour: asv itself gives up on a benchmark long before."""


def impossible_times(parsed: ResultsFile) -> ResultsFile:
    """Rows in seconds whose value is not a time a call can take (0, negative, an hour or more) are kept, but as
    failed, with the value in the reason: a negative time once read as a -200% improvement."""
    def reason(value: float) -> str:
        return f"impossible time {value!r} s (a call takes more than 0 s and less than {MAX_SECONDS:g} s)"

    if parsed.rows is not None:
        found = 0
        for row in parsed.rows:
            value = row.get("value")
            if row.get("unit") == "seconds" and row.get("status") == "ok" and value is not None and not (
                    0 < value < MAX_SECONDS):
                row.update(status="failed", reason=reason(value))
                found += 1
        return replace(parsed, impossible=found)
    table = parsed.table
    value = table["value"]
    bad = pc.and_kleene(pc.and_kleene(pc.equal(table["unit"], "seconds"), pc.equal(table["status"], "ok")),
                        pc.or_kleene(pc.less_equal(value, 0), pc.greater_equal(value, MAX_SECONDS)))
    bad = pc.fill_null(bad, False)
    if not pc.any(bad).as_py():
        return parsed
    status = pc.if_else(bad, "failed", table["status"])
    reasons = table["reason"].to_pylist() if "reason" in table.column_names else [None] * len(table)
    reasons = [reason(v) if b else r for v, b, r in zip(value.to_pylist(), bad.to_pylist(), reasons)]
    table = table.set_column(table.schema.get_field_index("status"), "status", status)
    column = pa.array(reasons, pa.string())
    table = (table.set_column(table.schema.get_field_index("reason"), "reason", column)
             if "reason" in table.column_names else table.append_column("reason", column))
    return replace(parsed, table=table, impossible=pc.sum(bad.cast(pa.int64())).as_py())
