"""The asv benchmark-name scheme of flybench's case suites, built and parsed here only.

A case suite is the class `<Set>` (Tiny, Quick, Full) of the module
`benchmarks/<workload>.py`; asv names its one tracked value
`<workload>.<Set>.track_time` and its parameters (case, provider, dtype).
Results written before one benchmark per case also hold four sibling values
of each case (`track_tflops`, `track_gbps`, `track_roofline`, `track_error`);
`LEGACY_METRICS` names them so the store can fold them into the case's row.
Anything else (compile metrics, imported or foreign benchmarks) is not a
case suite, and `parse` says so with None.

flybench also writes two other suites in the same `<workload>.<Class>.track_*`
shape: the compile-only metrics (`compile_metrics.Amd.track_vgprs`, `.Nvidia.`) and
imported results (`attention.FlydslCI.track_tflops`). `is_own` knows all
three; any other name is a foreign benchmark (an asv corpus nobody here
wrote), which is its own workload and is shown exactly as asv named it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PARAM_NAMES = ("case", "provider", "dtype")
TRACK = "track_time"
LEGACY_METRICS = {"track_tflops": "tflops", "track_gbps": "gbps", "track_roofline": "roofline_fraction",
                  "track_error": "error"}
"""Five-metric results: each sibling method and the case-record field it duplicated."""

IMPORTED_CLASS = "FlydslCI"
OWN_CLASSES = ("Tiny", "Quick", "Full", "Amd", "Nvidia", IMPORTED_CLASS)
"""The classes of flybench's own names: the case suites, the compile-only metrics, imported FlyDSL CI results."""
_OWN_PATTERN = rf"^[a-z][a-z0-9_]*\.({'|'.join(OWN_CLASSES)})\.track_[a-z0-9_]+$"
_OWN = re.compile(_OWN_PATTERN)
_NAME = re.compile(r"^(?P<workload>[a-z][a-z0-9_]*)\.(?P<set>Tiny|Quick|Full)\.(?P<method>track_[a-z]+)$")


@dataclass(frozen=True)
class SuiteName:
    """A case-suite benchmark name taken apart."""

    workload: str
    shape_set: str  # "tiny", "quick" or "full"
    method: str  # "track_time", or a legacy sibling


def suite_class(shape_set: str) -> str:
    """The asv class of a shape set: "quick" -> "Quick"."""
    return shape_set.capitalize()


def benchmark_name(workload: str, shape_set: str) -> str:
    """`attention.Quick.track_time`: the one benchmark of every case of this workload and shape set."""
    return f"{workload}.{suite_class(shape_set)}.{TRACK}"


def parse(benchmark: str) -> SuiteName | None:
    """The parts of a case-suite name (current or legacy method), None for any other benchmark."""
    match = _NAME.match(benchmark)
    if match is None or (match["method"] != TRACK and match["method"] not in LEGACY_METRICS):
        return None
    return SuiteName(match["workload"], match["set"].lower(), match["method"])


def asv_pattern(workload: str, shape_set: str, provider: str, dtype: str, cases: list[str] | None = None) -> str:
    """An asv `--bench` regex selecting the cases (default: every case) of one (workload, shape set, provider, dtype).

    asv matches parameterized benchmarks as `name('case', 'provider', 'dtype')`.
    """
    case = "[^']*" if not cases else "(?:" + "|".join(map(re.escape, cases)) + ")"
    return (rf"^{re.escape(benchmark_name(workload, shape_set))}\('{case}', '{re.escape(provider)}', "
            rf"'{re.escape(dtype)}'\)$")


def series_name(benchmark: str, values: list[object]) -> str:
    """`benchmark(value, ...)`: one series, as reports print it and `flybench accept` and `bisect` take it."""
    return f"{benchmark}({', '.join(map(str, values))})"


def parse_series(text: str) -> tuple[str, list[str]]:
    """(benchmark, parameter values) of a `series_name`; ValueError when the text is not one."""
    match = re.fullmatch(r"\s*([^()\s]+)\s*(?:\((.*)\))?\s*", text)
    if match is None:
        raise ValueError(f"{text!r} is not a series: write benchmark(value, ...), "
                         "e.g. 'attention.Quick.track_time(B1S1H4Hkv4D128_causal, flex, bf16)'")
    values = [v.strip().strip("'\"") for v in match[2].split(",")] if match[2] and match[2].strip() else []
    return match[1], values


def is_own(benchmark: str) -> bool:
    """Whether flybench wrote this name (a case suite, a compile metric, an import), not a foreign corpus."""
    return _OWN.match(benchmark) is not None


def is_measurable(benchmark: str) -> bool:
    """Whether flybench can measure this series again at another commit (`flybench bisect`): its case suites
    and compile metrics, not imported results or a foreign corpus."""
    return is_own(benchmark) and benchmark.split(".")[1] != IMPORTED_CLASS


COMPILE_DURATION = "track_compile_time"
"""The compile-only suites' one timed method: how long a compile took, noisy, never a kernel's speed."""


def is_compile_duration(benchmark: str) -> bool:
    """`compile_metrics.Amd.track_compile_time`: the duration of a compile, kept apart from the exact resources."""
    return benchmark.startswith("compile_metrics.") and is_own(benchmark) and benchmark.endswith(f".{COMPILE_DURATION}")


def workload_of(benchmark: str) -> str:
    """The workload a benchmark belongs to: the first dotted part of flybench's own names, else the name itself.

    A foreign corpus's `benchmarks.TimeSuite.time_keys` is not a workload
    called `benchmarks`: each foreign benchmark stands for itself.
    """
    return benchmark.split(".", 1)[0] if is_own(benchmark) else benchmark


def sql_case_columns(alias: str) -> str:
    """DuckDB select-list items: a results row's workload and suite class (as `workload_of` and the name's
    second part say; NULL for a foreign name), whether flybench wrote the name (`own_name`), and its case,
    provider and dtype parameters."""
    own = f"regexp_matches({alias}.benchmark, '{_OWN_PATTERN}')"
    return (f"CASE WHEN {own} THEN split_part({alias}.benchmark, '.', 1) ELSE {alias}.benchmark END AS workload, "
            f"CASE WHEN {own} THEN split_part({alias}.benchmark, '.', 2) END AS shape_set, {own} AS own_name, "
            f"{alias}.params->>'case' AS \"case\", {alias}.params->>'provider' AS provider, "
            f"{alias}.params->>'dtype' AS dtype")
