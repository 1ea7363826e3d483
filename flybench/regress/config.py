"""Regression thresholds: defaults, the `[regress]` section of flybench.toml, per-benchmark overrides.

FlyDSL's CI gate fails a kernel only past 20% and 10 us; flybench starts from
the same numbers. Units decide the direction (TFLOP/s: bigger is better) and
whether a metric is deterministic (register counts change only when the code
does, so every change is reported exactly, without any statistics).

    [regress]
    relative = 0.2              # fraction of the base value
    noise_k = 3.0               # a step must exceed noise_k x the series' own noise
    p_threshold = 0.002         # Mann-Whitney level for base-vs-head
    absolute = { seconds = 1e-5 }            # per unit, in that unit
    bigger_is_better_units = ["TFLOP/s", "GB/s"]
    deterministic_units = ["registers", "bytes", "waves"]
    contract_ignore = ["samples", "clocks", "packages"]   # fields that may differ

    [regress.overrides."moe.*"]               # glob on the benchmark name or "name(params)"
    relative = 0.3
    absolute = 2e-5
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from flybench.errors import FlybenchError

if sys.version_info >= (3, 11):
    import tomllib
else:  # asv brings tomli on Python 3.10
    import tomli as tomllib

DEFAULT_PATH = Path("flybench.toml")


@dataclass(frozen=True)
class Thresholds:
    """What one benchmark series must exceed to count as a change."""

    relative: float
    absolute: float
    noise_k: float
    bigger_is_better: bool
    deterministic: bool


@dataclass(frozen=True)
class RegressConfig:
    """Defaults plus overrides; `thresholds()` resolves them for one benchmark."""

    relative: float = 0.20
    noise_k: float = 3.0
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
    overrides: tuple[tuple[str, dict[str, float]], ...] = ()

    def thresholds(self, benchmark: str, params: str, unit: str | None) -> Thresholds:
        """Defaults for the unit, then every override whose glob matches, later ones winning."""
        unit_key = (unit or "").lower()
        result = Thresholds(
            relative=self.relative, absolute=self.absolute.get(unit or "", 0.0), noise_k=self.noise_k,
            bigger_is_better=unit_key in self.bigger_is_better_units,
            deterministic=unit_key in self.deterministic_units,
        )
        label = f"{benchmark}({params})"
        for pattern, values in self.overrides:
            if fnmatchcase(benchmark, pattern) or fnmatchcase(label, pattern):
                result = replace(result, **values)
        return result


_OVERRIDE_KEYS = {"relative", "absolute", "noise_k"}
_TOP_KEYS = {"relative", "noise_k", "p_threshold", "absolute", "bigger_is_better_units",
             "deterministic_units", "contract_ignore", "overrides"}


def load_config(path: str | Path | None = None) -> RegressConfig:
    """The `[regress]` section of `path` (default ./flybench.toml if it exists); unknown keys are errors."""
    file = Path(path) if path else DEFAULT_PATH
    if not file.is_file():
        if path:
            raise FlybenchError(f"config file {file} not found")
        return RegressConfig()
    try:
        section: dict[str, Any] = tomllib.loads(file.read_text(encoding="utf-8")).get("regress", {})
    except tomllib.TOMLDecodeError as exc:
        raise FlybenchError(f"{file}: {exc}") from exc
    _check_keys(file, "[regress]", section, _TOP_KEYS)
    overrides = section.pop("overrides", {})
    for pattern, values in overrides.items():
        _check_keys(file, f"[regress.overrides.{pattern!r}]", values, _OVERRIDE_KEYS)
    base = RegressConfig()
    if "absolute" in section:
        if not isinstance(section["absolute"], dict):
            raise FlybenchError(f"{file} [regress]: absolute is a table per unit, "
                                "e.g. absolute = { seconds = 1e-5 }")
        section["absolute"] = {**base.absolute, **section["absolute"]}
    sets = {k: frozenset(v.lower() if k.endswith("_units") else v for v in section.pop(k))
            for k in ("bigger_is_better_units", "deterministic_units", "contract_ignore") if k in section}
    return replace(base, **section, **sets, overrides=tuple(overrides.items()))


def _check_keys(file: Path, where: str, table: Any, allowed: set[str]) -> None:
    if not isinstance(table, dict):
        raise FlybenchError(f"{file} {where}: expected a table of {', '.join(sorted(allowed))}")
    unknown = set(table) - allowed
    if unknown:
        raise FlybenchError(f"{file} {where}: unknown keys {', '.join(sorted(unknown))}; "
                            f"allowed: {', '.join(sorted(allowed))}")
