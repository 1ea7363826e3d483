"""Regression thresholds: defaults, the `[regress]` section of flybench.toml, per-benchmark overrides.

Two kinds of judgement read them. A base-vs-head comparison (a pull
request's gate, `flybench compare`) holds a change against `relative`, its
tolerance (20% and 10 us by default, as FlyDSL's CI gate; the PR config sets
3%). A history scan (`flybench regressions`, the nightly's alerts) holds a
step against the series' own noise (`noise_k`), above `step_floor`, fits the
newest `window` runs, and reads the steps of a machine together
(`flybench.regress.episodes`). Units decide the direction (TFLOP/s: bigger is
better) and whether a metric is deterministic (register counts change only
when the code does, so every change is reported exactly, without any
statistics).

    [regress]
    relative = 0.2              # base-vs-head: the tolerance, a fraction of the base value
    p_threshold = 0.002         # base-vs-head: the rounds' interval is at 1 - p_threshold
    noise_k = 2.0               # history: a step must exceed noise_k x the series' own noise
    step_floor = 0.03           # history: and be at least this fraction of the level before it
    window = 6                  # history: the newest runs a series' fit reads (0: all of them)
    corroborate = 2             # history: series of a kernel (other cases, dtypes) stepping together
    environment_workloads = 3   # history: workloads stepping together at one commit make it the environment's
    absolute = { seconds = 1e-5 }            # per unit, in that unit
    bigger_is_better_units = ["TFLOP/s", "GB/s"]
    deterministic_units = ["registers", "bytes", "waves"]
    contract_ignore = ["samples", "clocks", "packages"]   # fields that may differ
    subject_providers = ["flydsl*"]  # globs: the providers a pull request can change (default: all);
                                     # the others measured in the same rounds are drift controls
    control_providers = ["xla"]      # globs: on a pull request whose cases are chosen by diff, these providers
                                     # of each chosen workload, when the change reaches none of their files,
                                     # are measured in the same rounds as its drift controls; in history,
                                     # their stepping with the subject makes a step the environment's

    [regress.overrides."moe.*"]               # glob on the benchmark name or "name(params)"
    relative = 0.3
    absolute = 2e-5
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from flybench.errors import FlybenchError
from flybench.file_kinds import describe

if sys.version_info >= (3, 11):
    import tomllib
else:  # asv brings tomli on Python 3.10
    import tomli as tomllib

DEFAULT_PATH = Path("flybench.toml")


@dataclass(frozen=True)
class Thresholds:
    """What one benchmark series must exceed to count as a change."""

    relative: float  # a base-vs-head comparison's tolerance
    absolute: float
    noise_k: float
    bigger_is_better: bool
    deterministic: bool
    step_floor: float = 0.03  # the smallest step a history scan reports, whatever the series' noise allows


@dataclass(frozen=True)
class RegressConfig:
    """Defaults plus overrides; `thresholds()` resolves them for one benchmark."""

    relative: float = 0.20
    noise_k: float = 2.0
    step_floor: float = 0.03
    p_threshold: float = 0.002
    absolute: dict[str, float] = field(default_factory=lambda: {"seconds": 1e-5})
    bigger_is_better_units: frozenset[str] = frozenset(
        {"tflop/s", "tflops", "gflop/s", "gb/s", "tb/s", "speedup", "fraction of roofline", "waves", "occupancy"})
    deterministic_units: frozenset[str] = frozenset(
        {"registers", "bytes", "waves", "occupancy", "instructions", "count"})
    # Contract fields that vary between runs without changing what is measured: the adaptive
    # sample count, the clocks read at the time, the package versions (the subject's own
    # version changes with every commit), and a note on how it was taken (why a graph was not used).
    contract_ignore: frozenset[str] = frozenset({"samples", "clocks", "packages", "note"})
    subject_providers: frozenset[str] = frozenset({"*"})
    control_providers: frozenset[str] = frozenset()
    overrides: tuple[tuple[str, dict[str, float]], ...] = ()
    # History scans (flybench.regress.history, .episodes): the newest runs a series' fit reads, the series of a
    # benchmark that must step together for a code regression, and the workloads whose stepping together at one
    # commit makes it the environment's.
    window: int = 6
    corroborate: int = 2
    environment_workloads: int = 3

    def is_subject(self, provider: str | None) -> bool:
        """Whether a case of this provider is judged (subject) or only watched for drift (control)."""
        return provider is None or any(fnmatchcase(provider, pattern) for pattern in self.subject_providers)

    def is_control(self, provider: str) -> bool:
        """Whether this provider may be measured as a drift control of a workload a change reaches."""
        return any(fnmatchcase(provider, pattern) for pattern in self.control_providers)

    def thresholds(self, benchmark: str, params: str, unit: str | None) -> Thresholds:
        """Defaults for the unit, then every override whose glob matches, later ones winning."""
        unit_key = (unit or "").lower()
        result = Thresholds(
            relative=self.relative, absolute=self.absolute.get(unit or "", 0.0), noise_k=self.noise_k,
            step_floor=self.step_floor,
            bigger_is_better=unit_key in self.bigger_is_better_units,
            deterministic=unit_key in self.deterministic_units,
        )
        label = f"{benchmark}({params})"
        for pattern, values in self.overrides:
            if fnmatchcase(benchmark, pattern) or fnmatchcase(label, pattern):
                result = replace(result, **values)
        return result


_NUMBERS: dict[str, tuple[Callable[[float], bool], str, str]] = {
    # key: (its range, what it means, an example to write)
    "relative": (lambda x: 0 <= x < 1, "a fraction of the base value, at least 0 and below 1", "0.05"),
    "noise_k": (lambda x: x > 0, "a multiple of the series' noise, above 0", "2.0"),
    "step_floor": (lambda x: 0 <= x < 1, "the smallest relative step a history scan reports, at least 0 and below 1",
                   "0.03"),
    "p_threshold": (lambda x: 0 < x < 1, "a significance level, above 0 and below 1", "0.002"),
    "absolute": (lambda x: x >= 0, "a size in the benchmark's own unit, at least 0", "1e-5"),
    "window": (lambda x: x == int(x) and (x == 0 or x >= 3),
               "the newest runs a series' fit reads: a whole number, 3 or more, or 0 for the whole history", "10"),
    "corroborate": (lambda x: x == int(x) and x >= 1,
                    "how many series of a benchmark must step together: a whole number, at least 1", "2"),
    "environment_workloads": (lambda x: x == int(x) and x >= 2,
                              "how many workloads stepping at one commit make it the environment: "
                              "a whole number, at least 2", "3"),
}
_WHOLE_NUMBERS = ("window", "corroborate", "environment_workloads")
_STRING_LISTS = {
    "bigger_is_better_units": '["TFLOP/s", "GB/s"]',
    "deterministic_units": '["registers", "bytes"]',
    "contract_ignore": '["samples", "clocks", "packages"]',
    "subject_providers": '["flydsl", "flydsl+append"]',
    "control_providers": '["xla"]',
}
_OVERRIDE_KEYS = {"relative", "absolute", "noise_k", "step_floor"}
_TOP_KEYS = {*_NUMBERS, *_STRING_LISTS, "overrides"}


def load_config(path: str | Path | None = None) -> RegressConfig:
    """The `[regress]` section of `path` (default ./flybench.toml if anything is there: a FIFO or a folder of that
    name is an error, not the defaults).

    Every name, type and range is checked, and a mistake is an error that says
    what to write instead: a misspelt section or key would otherwise fall back
    to the defaults and hide a gate that no longer gates.
    """
    file = Path(path) if path else DEFAULT_PATH
    what = describe(file)  # ./flybench.toml as a FIFO or a folder was passed over: the gate ran on the defaults
    if what == "nothing" and not path:
        return RegressConfig()
    if what == "nothing":
        raise FlybenchError(f"config file {file} not found")
    if what == "a directory":
        raise FlybenchError(f"config file {file} is a directory: pass the file, e.g. {file / 'flybench.toml'}")
    if what != "a regular file":
        raise FlybenchError(f"config file {file} is {what}, not a TOML file, so it was not read: "
                            + ("pass the file" if path else "move it aside to use the defaults, or make it the file"))
    try:
        document: dict[str, Any] = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise FlybenchError(f"cannot read {file}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise FlybenchError(f"{file}: {exc}") from exc
    for name, value in document.items():
        if name != "regress":
            what = f"unknown section [{name}]" if isinstance(value, dict) else f"{name} is outside any section"
            raise FlybenchError(f"{file}: {what}; flybench's settings go in the one section [regress] "
                                "(and its [regress.overrides.\"<glob>\"] tables)")
    section = document.get("regress", {})
    where = f"{file} [regress]"
    _check_keys(file, "[regress]", section, _TOP_KEYS)
    base = RegressConfig()
    values: dict[str, Any] = {k: _number(where, k, section[k]) for k in ("relative", "noise_k", "step_floor", "p_threshold")
                              if k in section}
    values.update({k: int(_number(where, k, section[k])) for k in _WHOLE_NUMBERS if k in section})
    if "absolute" in section:
        values["absolute"] = {**base.absolute, **_per_unit(where, section["absolute"])}
    values.update({k: _strings(where, k, section[k]) for k in _STRING_LISTS if k in section})
    return replace(base, **values, overrides=_overrides(file, section.get("overrides", {})))


def _per_unit(where: str, table: Any) -> dict[str, float]:
    """`[regress] absolute`: a size per unit, in that unit."""
    if not isinstance(table, dict):
        raise FlybenchError(f"{where}: absolute = {_toml(table)} is not a table; in [regress], absolute is a size "
                            "per unit, in that unit: write e.g. absolute = { seconds = 1e-5 } "
                            "(a single number belongs in an override)")
    return {unit: _number(where, "absolute", value, f"absolute.{_toml(unit)}") for unit, value in table.items()}


def _overrides(file: Path, tables: Any) -> tuple[tuple[str, dict[str, float]], ...]:
    """`[regress.overrides."<glob>"]` tables, in file order, each value checked like its [regress] namesake."""
    example = 'write [regress.overrides."moe.*"] on a line of its own and e.g. relative = 0.3 under it'
    if not isinstance(tables, dict):
        raise FlybenchError(f"{file} [regress]: overrides = {_toml(tables)} is not a table of globs; {example}")
    overrides = []
    for pattern, values in tables.items():
        header = f"[regress.overrides.{_toml(pattern)}]"
        where = f"{file} {header}"
        if not isinstance(values, dict):
            raise FlybenchError(f"{where}: {_toml(values)} is not a table of thresholds; {example}")
        _check_keys(file, header, values, _OVERRIDE_KEYS)
        overrides.append((pattern, {k: _number(where, k, v) for k, v in values.items()}))
    return tuple(overrides)


def _number(where: str, key: str, value: Any, label: str | None = None) -> float:
    """A finite number in `key`'s range; a bool is refused although Python counts it as an int."""
    in_range, meaning, example = _NUMBERS[key]
    label = label or key
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problem = "is not a number"
    elif not (math.isfinite(value) and in_range(value)):
        problem = "is out of range"
    else:
        return float(value)
    raise FlybenchError(f"{where}: {label} = {_toml(value)} {problem}; {key} is {meaning}: "
                        f"write e.g. {label} = {example}")


def _strings(where: str, key: str, value: Any) -> frozenset[str]:
    """A list of names; units are matched case-insensitively, so they are kept in lower case."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FlybenchError(f"{where}: {key} = {_toml(value)} is not a list of strings: "
                            f"write e.g. {key} = {_STRING_LISTS[key]}")
    return frozenset(v.lower() if key.endswith("_units") else v for v in value)


def _check_keys(file: Path, header: str, table: Any, allowed: set[str]) -> None:
    if not isinstance(table, dict):
        raise FlybenchError(f"{file} {header}: {_toml(table)} is not a table; write {header} on a line of its own "
                            f"and its keys ({', '.join(sorted(allowed))}) under it")
    unknown = set(table) - allowed
    if unknown:
        raise FlybenchError(f"{file} {header}: unknown keys {', '.join(sorted(unknown))}; "
                            f"allowed: {', '.join(sorted(allowed))}")


def _toml(value: Any) -> str:
    """A value written as in TOML, to quote the file back in a message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return str(value)
