"""The tracked metrics of AMD kernels, from the ISA, the code object and (FlyDSL) the launch IR.

Shared by the FlyDSL and Triton drivers, so the same kernel reads the same
way whichever compiler produced it.
"""

from __future__ import annotations

import re
from typing import Any

from flybench.compile import occupancy
from flybench.compile.elf import function_sizes
from flybench.compile.isa import AmdKernel, parse_amdgpu_isa, suspicions

_LAUNCH = re.compile(r"gpu\.launch_func\b[^\n]*?@[\w.$]+::@(?P<sym>[\w.$]+)[^\n]*?"
                     r"dynamic_shared_memory_size\s+(?P<val>%[\w.$#]+)")
_CONSTANT = r"{name}\s*=\s*(?:arith\.constant|llvm\.mlir\.constant)\s*\(?\s*(\d+)\b"


def dynamic_lds_from_mlir(text: str) -> dict[str, int]:
    """{kernel symbol: dynamic LDS bytes} for launches whose size is a constant in the IR."""
    found = {}
    for match in _LAUNCH.finditer(text):
        constant = re.search(_CONSTANT.format(name=re.escape(match["val"])), text)
        if constant:
            found[match["sym"]] = int(constant[1])
    return found


def kernel_metrics(kernel: AmdKernel, arch: str, code_size: int | None, dynamic_lds: int) -> dict[str, Any]:
    """The AMD metric set of one kernel (see record.AMD_METRICS), plus its instruction mix and occupancy limiter."""
    vgprs, agprs = kernel.vgprs, kernel.agpr_count or 0
    unified = kernel.vgpr_count if kernel.vgpr_count is not None else (
        occupancy.unified_vgprs(vgprs, agprs) if vgprs is not None else None)
    lds = (kernel.lds_static_bytes or 0) + dynamic_lds
    estimate = None
    if unified is not None and kernel.sgpr_count is not None and kernel.workgroup_size and arch in occupancy.ARCHES:
        estimate = occupancy.estimate(arch, unified, kernel.sgpr_count, lds, kernel.workgroup_size)
    return {
        "vgprs": vgprs, "agprs": agprs, "sgprs": kernel.sgpr_count, "lds_static": kernel.lds_static_bytes,
        "lds_dynamic": dynamic_lds, "scratch": kernel.scratch_bytes, "vgpr_spills": kernel.vgpr_spills,
        "sgpr_spills": kernel.sgpr_spills, "occupancy": estimate.waves if estimate else None,
        "mfma": sum(kernel.mfma.values()), "ds_read_b64_tr": kernel.ds_read_b64_tr, "code_size": code_size,
        **{f"{name}_instructions": n for name, n in kernel.mix.items() if name != "mfma"},
        # context, not tracked: what limits occupancy, the unified register count, the instruction mix
        "occupancy_limiters": list(estimate.limiters) if estimate else None, "vgprs_unified": unified,
        "workgroup_size": kernel.workgroup_size, "instructions": kernel.instructions, "mfma_by_kind": kernel.mfma,
        "ds_read_tr_by_kind": {m: n for m, n in sorted(kernel.mnemonics.items()) if m.startswith("ds_read_b64_tr")},
    }


def describe_module(isa: str, arch: str, objects: list[bytes], launch_ir: str = "",
                    dynamic_lds: dict[str, int] | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Metrics of every kernel in one compiled module, and the reasons to suspect any of them."""
    sizes: dict[str, int] = {}
    for blob in objects:
        sizes.update(function_sizes(blob))
    dynamic = dict(dynamic_lds or {})
    dynamic.update(dynamic_lds_from_mlir(launch_ir) if launch_ir else {})
    kernels, suspect = {}, []
    for symbol, kernel in parse_amdgpu_isa(isa).items():
        kernels[symbol] = kernel_metrics(kernel, arch, sizes.get(symbol), dynamic.get(symbol, 0))
        suspect += suspicions(kernel, sizes.get(symbol))
    return kernels, suspect
