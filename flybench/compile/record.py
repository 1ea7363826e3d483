"""One compile's outcome and its metrics, as cached on disk and read by the asv suite and reports.

Status is one of:
- "ok": compiled; `metrics` holds the primary kernel's numbers, `kernels`
  every GPU kernel of the compile (a launcher may build several).
- "failed": the compiler raised, printed an error, died or timed out;
  `reason` says which, in one line.
- "unavailable": something needed is missing here (no FlyDSL checkout, no
  flydsl package, no linker); `reason` says what to install or set.
- "not_applicable": the kernel does not exist for this target (gfx950-only
  code on gfx942); not a failure.
`suspect` lists reasons to distrust an "ok" compile (a bare `s_endpgm`, a
kernel that never stores, an error line the compiler printed but did not
fail on).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("ok", "failed", "unavailable", "not_applicable")


@dataclass(frozen=True)
class Metric:
    """A tracked number: name, unit (the regress engine reads the unit) and what it means."""

    name: str
    unit: str
    description: str


AMD_METRICS = (
    Metric("vgprs", "registers", "architectural VGPRs per lane"),
    Metric("agprs", "registers", "accumulation VGPRs (AGPRs) per lane"),
    Metric("sgprs", "registers", "SGPRs per wave, including VCC/flat-scratch reservations (.sgpr_count)"),
    Metric("lds_static", "bytes", "static LDS per workgroup (.group_segment_fixed_size)"),
    Metric("lds_dynamic", "bytes", "dynamic LDS per workgroup given at launch"),
    Metric("scratch", "bytes", "private (scratch) memory per lane (.private_segment_fixed_size)"),
    Metric("vgpr_spills", "registers", "VGPRs spilled to scratch (.vgpr_spill_count)"),
    Metric("sgpr_spills", "registers", "SGPRs spilled (.sgpr_spill_count)"),
    Metric("occupancy", "waves", "estimated waves per SIMD (flybench.compile.occupancy)"),
    Metric("mfma", "instructions", "MFMA/SMFMAC instructions in the code (static count, all kinds)"),
    Metric("ds_read_b64_tr", "instructions", "gfx950 transpose-on-read LDS loads (static count)"),
    Metric("code_size", "bytes", "size of the kernel's machine code"),
    *(Metric(f"{name}_instructions", "instructions", f"{what} instructions in the code (static count)")
      for name, what in (("valu", "vector ALU (not MFMA)"), ("salu", "scalar ALU"), ("vmem", "vector memory"),
                         ("smem", "scalar memory"), ("lds", "LDS (ds_*)"), ("waitcnt", "s_waitcnt"),
                         ("branch", "branch"), ("other", "other"))),
    Metric("compile_time", "seconds", "wall time of the compile call, tracing to code object"),
)
NVIDIA_METRICS = (
    Metric("registers", "registers", "registers per thread (ptxas)"),
    Metric("spill_bytes", "bytes", "bytes of spill stores per thread (ptxas)"),
    Metric("smem_static", "bytes", "static shared memory per block (ptxas)"),
    Metric("smem_dynamic", "bytes", "dynamic shared memory per block (Triton's metadata.shared)"),
    Metric("code_size", "bytes", "size of the kernel's SASS in the cubin"),
    Metric("compile_time", "seconds", "wall time of triton.compile, source to cubin"),
)


@dataclass
class CompileRecord:
    """Everything known about compiling one registered kernel configuration for one target."""

    kernel: str
    arch: str
    status: str
    reason: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    primary: str | None = None
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)
    suspect: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    compile_time_s: float | None = None
    key: str = ""
    isa_file: str | None = None
    toolchain: dict[str, str] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CompileRecord:
        data = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def value(self, metric: str) -> float | None:
        """The metric (None when this target does not report it); raises NotImplementedError when the
        kernel is unavailable or not applicable here (asv: n/a) and RuntimeError when it failed to compile."""
        if self.status in ("unavailable", "not_applicable"):
            raise NotImplementedError(f"{self.kernel} on {self.arch}: {self.status.replace('_', ' ')}: {self.reason}")
        if self.status != "ok":
            raise RuntimeError(f"{self.kernel} on {self.arch} failed to compile: {self.reason}")
        return self.metrics.get(metric)
