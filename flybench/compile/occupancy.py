"""Estimated occupancy of a CDNA kernel: waves per SIMD, from its registers, LDS and workgroup size.

A register or LDS regression matters because it lowers occupancy; the
count alone does not say whether it crossed a boundary (250 -> 256 VGPRs
keeps 2 waves, 256 -> 264 halves it). The estimate follows the hardware
allocation rules LLVM's AMDGPU backend uses for gfx90a-class chips:

- VGPRs: the unified VGPR+AGPR file has 512 registers per lane, allocated in
  granules of 8, so a SIMD fits floor(512 / roundup(vgpr+agpr, 8)) waves,
  at most 8 (gfx942 and gfx950 run 8 waves per SIMD).
- SGPRs: LLVM's GFX9 rule (<= 80: 10 waves, <= 88: 9, <= 100: 8, else 7).
- LDS: a workgroup's static plus dynamic LDS must fit in the CU's LDS
  (64 KiB on gfx942, 160 KiB on gfx950); a CU has 4 SIMDs, and a workgroup
  of W threads brings ceil(W / 64) waves, spread over them.

Workgroups per CU = min(register limit over the CU's 4 SIMDs, LDS limit);
waves per SIMD = min(register limit, workgroups per CU x waves per workgroup / 4).
The result is an estimate of residency, not a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flybench.errors import FlybenchError

SIMDS_PER_CU = 4
VGPR_FILE = 512
VGPR_GRANULE = 8


@dataclass(frozen=True)
class CdnaLimits:
    """What one CDNA architecture offers a CU."""

    max_waves_per_simd: int
    lds_per_cu: int
    wave_size: int = 64


ARCHES = {
    "gfx942": CdnaLimits(max_waves_per_simd=8, lds_per_cu=64 * 1024),
    "gfx950": CdnaLimits(max_waves_per_simd=8, lds_per_cu=160 * 1024),
}


@dataclass(frozen=True)
class Occupancy:
    """Waves per SIMD and what limits them ("vgpr", "sgpr", "lds", "waves"; several when tied)."""

    waves: float
    limiters: tuple[str, ...]
    workgroups_per_cu: int


def unified_vgprs(arch_vgprs: int, agprs: int) -> int:
    """The unified VGPR+AGPR allocation: AGPRs start at the next multiple of 4 after the VGPRs."""
    return arch_vgprs if agprs == 0 else -(-arch_vgprs // 4) * 4 + agprs


def sgpr_waves(sgprs: int) -> int:
    """Waves per SIMD the scalar register file allows on GFX9 (LLVM's getOccupancyWithNumSGPRs)."""
    return 10 if sgprs <= 80 else 9 if sgprs <= 88 else 8 if sgprs <= 100 else 7


def estimate(arch: str, vgprs: int, sgprs: int, lds_bytes: int, workgroup_size: int) -> Occupancy:
    """Waves per SIMD of a kernel using `vgprs` unified VGPRs+AGPRs, `sgprs`, `lds_bytes` per workgroup."""
    if arch not in ARCHES:
        raise FlybenchError(f"no occupancy rules for {arch!r}; known: {', '.join(sorted(ARCHES))}")
    limits = ARCHES[arch]
    if vgprs > VGPR_FILE or lds_bytes > limits.lds_per_cu or workgroup_size < 1:
        return Occupancy(0.0, ("vgpr" if vgprs > VGPR_FILE else "lds" if lds_bytes > limits.lds_per_cu
                               else "waves",), 0)
    per_simd = {
        "waves": limits.max_waves_per_simd,
        "vgpr": VGPR_FILE // (math.ceil(max(vgprs, 1) / VGPR_GRANULE) * VGPR_GRANULE),
        "sgpr": sgpr_waves(sgprs),
    }
    registers = min(per_simd.values())
    waves_per_group = math.ceil(workgroup_size / limits.wave_size)
    groups = {name: SIMDS_PER_CU * waves // waves_per_group for name, waves in per_simd.items()}
    groups["lds"] = limits.lds_per_cu // lds_bytes if lds_bytes else math.inf
    per_cu = min(groups.values())
    waves = min(registers, per_cu * waves_per_group / SIMDS_PER_CU)
    limiters = tuple(name for name in ("vgpr", "sgpr", "lds", "waves") if groups[name] == per_cu)
    return Occupancy(round(float(waves), 2), limiters, int(per_cu))
