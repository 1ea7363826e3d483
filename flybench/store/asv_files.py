"""Reading asv's own files (benchmarks.json, machine.json, results) into plain rows.

asv's loader (`Results.load`, `util.load_json`) does the parsing and the
format-version check, so flybench reads exactly what `asv compare` reads.
Nothing here touches the database: a file either yields all its rows or
raises, which is what makes ingest transactional per file.
"""

from __future__ import annotations

import ast
import datetime as dt
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asv import util
from asv.results import Results

from flybench.errors import FlybenchError

BAD_FILE = (util.UserError, ValueError, TypeError, KeyError, IndexError, AttributeError, OSError)
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


def load_benchmarks(path: Path) -> dict[str, BenchmarkDef]:
    """benchmarks.json; without it the results' params and units cannot be named."""
    if not path.is_file():
        raise FlybenchError(f"{path} is missing: run `asv run` (it writes benchmarks.json) before ingesting")
    try:
        data = util.load_json(str(path), api_version=2)
        return {
            name: BenchmarkDef(
                name, list(entry.get("param_names") or []), list(entry.get("params") or []),
                entry.get("unit"), entry.get("type"), entry.get("version"),
            )
            for name, entry in data.items()
            if name != "version"
        }
    except BAD_FILE as exc:
        raise FlybenchError(f"{path}: {exc}") from exc


def machine_row(path: Path) -> dict[str, Any]:
    """machine.json as a machines row; the accelerator is the name's last dash-separated part.

    asv's machine.json has no GPU field, so flybench names machines
    `<host>-<accelerator>` (see flybench.hardware.machine_name).
    """
    data = util.load_json(str(path), api_version=1)
    name = data["machine"]
    if not isinstance(name, str) or not name:
        raise ValueError("'machine' must be a non-empty string")
    host, _, accelerator = name.rpartition("-")
    if not host:
        host, accelerator = name, ""
    return {
        "name": name, "host": host, "accelerator": accelerator or None,
        "arch": accelerator if _ARCH.match(accelerator) else None,
        "os": data.get("os"), "cpu_arch": data.get("arch"), "cpu": data.get("cpu"),
        "num_cpu": _text(data.get("num_cpu")), "ram": _text(data.get("ram")),
        "machine_json": json.dumps(data, sort_keys=True),
    }


@dataclass(frozen=True)
class ResultsFile:
    """One asv results file, flattened: the environment, the commit and one row per case."""

    commit_hash: str
    commit_date: dt.datetime | None
    environment: dict[str, Any]
    rows: list[dict[str, Any]]


def read_results(path: Path, machine: str, benchmarks: dict[str, BenchmarkDef]) -> ResultsFile:
    """All rows of one results file, one per benchmark x parameter combination."""
    results = Results.load(str(path), machine_name=machine)
    rows = []
    for name in sorted(results.get_all_result_keys()):
        raw_params = results.get_result_params(name)
        combos = list(itertools.product(*raw_params))
        names = _param_names(benchmarks.get(name), len(raw_params))
        values = results.get_result_value(name, raw_params)
        stats = results.get_result_stats(name, raw_params)
        samples = results.get_result_samples(name, raw_params)
        definition = benchmarks.get(name)
        for combo, value, stat, sample in zip(combos, values, stats, samples):
            stat = stat or {}
            rows.append({
                "benchmark": name,
                "params": params_json(dict(zip(names, (_literal(p) for p in combo)))),
                "unit": definition.unit if definition else None,
                "value": _number(value),
                "status": _asv_status(value),
                "ci_99_a": _number(stat.get("ci_99_a")), "ci_99_b": _number(stat.get("ci_99_b")),
                "q_25": _number(stat.get("q_25")), "q_75": _number(stat.get("q_75")),
                "number": stat.get("number"), "repeat": stat.get("repeat"),
                "samples": [float(s) for s in sample] if sample else None,
                "started_at": _timestamp(results.started_at.get(name)),
                "duration": results.duration.get(name),
                "benchmark_version": results.benchmark_version.get(name),
            })
    environment = {
        "machine": machine, "env_name": results.env_name, "python": results.params.get("python"),
        "params": json.dumps(results.params, sort_keys=True),
        "requirements": json.dumps(results._requirements, sort_keys=True),  # asv has no public getter
        "env_vars": json.dumps(results.env_vars, sort_keys=True),
    }
    return ResultsFile(results.commit_hash, _timestamp(results.date), environment, rows)


def params_json(params: dict[str, Any]) -> str:
    """The canonical text of a parameter combination: keys in benchmark order, stable across runs."""
    return json.dumps(params, default=str)


def _param_names(definition: BenchmarkDef | None, count: int) -> list[str]:
    if definition and len(definition.param_names) == count:
        return definition.param_names
    return [f"p{i}" for i in range(count)]


def _literal(text: str) -> Any:
    """asv stores each parameter value as its repr; non-literal reprs stay text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _asv_status(value: Any) -> str:
    """asv stores a failed case as null and a skipped one (NotImplementedError in setup) as NaN."""
    if value is None:
        return "failed"
    return "unavailable" if util.is_nan(value) else "ok"


def _number(value: Any) -> float | None:
    return None if util.is_na(value) else float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _timestamp(js_ms: int | None) -> dt.datetime | None:
    """asv's JavaScript timestamps (ms since the epoch, UTC) as naive UTC datetimes."""
    if js_ms is None:
        return None
    return dt.datetime.fromtimestamp(js_ms / 1000, tz=dt.timezone.utc).replace(tzinfo=None)
