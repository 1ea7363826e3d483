"""asv suite of compile-only kernel resource metrics: one tracked value per metric, unit stated.

Nothing here needs a GPU. `setup_cache` compiles every (kernel, target) of
both classes once per run, in parallel worker processes, into the compile
cache (flybench.compile.cache); each tracked value then runs in its own asv
process and reads its number from that cache. The values land in asv's
results files like the timings do, so `flybench ingest` stores them in the
`results` table, and the regress engine reports every change exactly
(their units, registers, bytes, waves and instructions, are deterministic).

Parameters: kernel (flybench.compile.registry) x target. A kernel that
does not exist for a target (flash_attn_gfx950 on gfx942) or cannot be
compiled here (the FlyDSL checkout kernels without FLYBENCH_FLYDSL_SRC)
is skipped with the reason (asv shows n/a); a kernel that fails to compile
fails each of its values with the compiler's reason.

    FLYBENCH_FLYDSL_SRC=/path/to/FlyDSL asv run --python=same --set-commit-hash HEAD \\
        --machine cpu-compile --bench compile_metrics
"""

from __future__ import annotations

import math

from flybench.compile.record import AMD_METRICS, NVIDIA_METRICS, Metric
from flybench.compile.registry import AMD_ARCHES, CASES, NVIDIA_ARCHES

AMD_KERNELS = sorted(name for name, case in CASES.items() if set(case.arches) & set(AMD_ARCHES))
NVIDIA_KERNELS = sorted(name for name, case in CASES.items() if set(case.arches) & set(NVIDIA_ARCHES))


def _all_requests() -> list[tuple]:
    from flybench.compile.registry import get_case

    return [(get_case(k), a) for k in AMD_KERNELS for a in AMD_ARCHES] + \
        [(get_case(k), a) for k in NVIDIA_KERNELS for a in NVIDIA_ARCHES]


class _CompileSuite:
    """The tracked values of one compile; subclasses set params and get one track_ method per metric."""

    param_names = ["kernel", "arch"]
    timeout = 1800.0

    def setup_cache(self):
        """Compile everything this suite tracks, in parallel, before the first value is read."""
        from flybench.compile.runner import measure

        measure(_all_requests())

    setup_cache.timeout = 3600.0

    def setup(self, kernel: str, arch: str) -> None:
        from flybench.compile.runner import measure_one

        self.record = measure_one(kernel, arch)
        if self.record.status in ("unavailable", "not_applicable"):
            raise NotImplementedError(f"{self.record.status.replace('_', ' ')}: {self.record.reason}")


def _tracker(metric: Metric):
    def track(self, kernel: str, arch: str) -> float:
        value = self.record.value(metric.name)
        return math.nan if value is None else float(value)

    track.__name__ = f"track_{metric.name}"
    track.__doc__ = f"{metric.description} ({metric.unit})"
    track.unit = metric.unit
    return track


def _suite(name: str, kernels: list[str], arches: tuple[str, ...], metrics: tuple[Metric, ...], doc: str) -> type:
    methods = {f"track_{m.name}": _tracker(m) for m in metrics}
    return type(name, (_CompileSuite,), {"params": [kernels, list(arches)], "__doc__": doc, **methods})


Amd = _suite("Amd", AMD_KERNELS, AMD_ARCHES, AMD_METRICS,
             "FlyDSL and Triton kernels compiled for gfx942 and gfx950: registers, LDS, spills, occupancy, MFMA.")
Nvidia = _suite("Nvidia", NVIDIA_KERNELS, NVIDIA_ARCHES, NVIDIA_METRICS,
                "flybench's Triton kernels compiled for sm_90: registers, spills, shared memory.")
