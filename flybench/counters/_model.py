"""What every profiler backend gives: counters per kernel, their sum over one call, and the figures derived.

A backend (flybench.counters.ncu, flybench.counters.rocprof) turns its tool's
output into `KernelCounters`, one per kernel launched by one call of the
case, under the tool's own counter names. `combine` sums them over the call
by each counter's aggregation rule, and the backend's `derive` reads the
figures a kernel author looks at first, under the names in `DERIVED`, the
same for every tool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

Aggregate = Literal["sum", "max", "weighted"]
"""How a counter of several kernels becomes one per call: added (counts, bytes, cycles), the largest (a launch's
registers or shared memory), or the mean weighted by each kernel's duration (rates, percentages)."""


@dataclass(frozen=True)
class Counter:
    """One counter a backend asks its tool for."""

    name: str  # the tool's own name, e.g. dram__bytes_read.sum or TCC_HIT_sum
    unit: str
    aggregate: Aggregate = "sum"
    fixed: bool = False  # depends only on the code and the shape (instruction counts): watched for any change


@dataclass
class KernelCounters:
    """The counters of one kernel launch; `duration_s` weighs it in the call's weighted means."""

    name: str
    values: dict[str, float] = field(default_factory=dict)
    duration_s: float | None = None


class Figure(NamedTuple):
    label: str  # as a report or chart names it
    unit: str
    description: str


DERIVED: dict[str, Figure] = {
    "duration_s": Figure("kernel time", "seconds", "summed kernel time under the profiler (not a timing sample)"),
    "hbm_read_bytes": Figure("DRAM read", "bytes", "bytes read from device memory (HBM)"),
    "hbm_write_bytes": Figure("DRAM write", "bytes", "bytes written to device memory (HBM)"),
    "hbm_bytes": Figure("DRAM moved", "bytes", "bytes read and written in device memory"),
    "hbm_over_min": Figure("DRAM / minimum", "ratio",
                           "device-memory bytes moved over the workload's minimum-byte model"),
    "hbm_gbps": Figure("DRAM bandwidth", "GB/s", "device-memory bytes over the profiled kernel time"),
    "l2_hit_rate": Figure("L2 hit rate", "fraction", "L2 hits over L2 lookups"),
    "matrix_busy": Figure("matrix busy", "fraction",
                          "matrix-unit (tensor core / MFMA) busy cycles over elapsed cycles"),
    "lds_conflicts_per_instruction": Figure("LDS conflicts / instr", "ratio",
                                            "shared-memory (LDS) bank conflicts per shared-memory instruction"),
    "occupancy": Figure("occupancy", "fraction",
                        "achieved occupancy: active warps (waves) over the most the hardware holds"),
}
"""The figures derived from every tool's counters, by name."""

WATCHED_DERIVED = ("hbm_read_bytes", "hbm_write_bytes")
"""Derived figures that depend on the code and the shape alone (the profiler flushes the caches before each
kernel), which `flybench regressions` watches as it watches the `fixed` counters."""


def format_figure(name: str, value: float | None) -> str:
    """A DERIVED figure as a person reads it: bytes in MB, fractions in %, ratios with an x."""
    if value is None:
        return "-"
    unit = DERIVED[name].unit
    if unit == "bytes":
        return f"{value / 1e9:.2f} GB" if value >= 1e9 else f"{value / 1e6:,.1f} MB"
    if unit == "fraction":
        return f"{value:.1%}"
    if unit == "ratio":
        return f"{value:.3g}x"
    if unit == "seconds":
        return f"{value * 1e6:,.1f} us"
    return f"{value:,.0f} {unit}"


def combine(kernels: Iterable[KernelCounters], counters: Iterable[Counter]) -> dict[str, float]:
    """One value per counter for the whole call; a counter no kernel reported is left out."""
    kernels = list(kernels)
    total: dict[str, float] = {}
    for counter in counters:
        present = [k for k in kernels if counter.name in k.values]
        if not present:
            continue
        values = [k.values[counter.name] for k in present]
        if counter.aggregate == "sum":
            total[counter.name] = sum(values)
        elif counter.aggregate == "max":
            total[counter.name] = max(values)
        else:
            weights = [k.duration_s or 0.0 for k in present]
            total[counter.name] = (sum(v * w for v, w in zip(values, weights)) / sum(weights)
                                   if sum(weights) > 0 else sum(values) / len(values))
    return total


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, None when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def figures(*, duration_s: float | None, read_bytes: float | None, write_bytes: float | None,
            min_bytes: float | None, l2_hits: float | None, l2_misses: float | None, matrix_busy: float | None,
            lds_conflicts: float | None, lds_instructions: float | None,
            occupancy: float | None) -> dict[str, float]:
    """DERIVED from what a backend read off its tool's counters, the same arithmetic for every tool.

    Fractions come in as fractions (0..1); a figure whose inputs are missing is left out.
    """
    moved = read_bytes + write_bytes if read_bytes is not None and write_bytes is not None else None
    lookups = l2_hits + l2_misses if l2_hits is not None and l2_misses is not None else None
    found = {
        "duration_s": duration_s,
        "hbm_read_bytes": read_bytes,
        "hbm_write_bytes": write_bytes,
        "hbm_bytes": moved,
        "hbm_over_min": ratio(moved, min_bytes),
        "hbm_gbps": ratio(moved, duration_s * 1e9 if duration_s else None),
        "l2_hit_rate": ratio(l2_hits, lookups),
        "matrix_busy": matrix_busy,
        "lds_conflicts_per_instruction": ratio(lds_conflicts, lds_instructions),
        "occupancy": occupancy,
    }
    return {name: value for name, value in found.items() if value is not None}


class Backend(Protocol):
    """A profiler: how to find it, run the case under it, and read what it wrote."""

    tool: str  # the executable: ncu, rocprofv3
    install_hint: str  # what to do when it is missing

    def available(self) -> str | None:
        """None when the tool runs here, else why not (with `install_hint`)."""

    def version(self) -> str: ...

    def counters(self, arch: str) -> list[Counter]:
        """The counters collected on this architecture."""

    def commands(self, target: list[str], out_dir: Path, arch: str) -> list[list[str]]:
        """The command lines that profile `target` (one per pass the hardware needs), writing under out_dir."""

    def read(self, out_dir: Path, arch: str) -> list[KernelCounters]:
        """Every kernel of the profiled call, from the files the commands wrote."""

    def derive(self, total: Mapping[str, float], min_bytes: float | None) -> dict[str, float]:
        """DERIVED figures from the call's combined counters (only those the counters allow)."""
