"""`triton`: the project's own portable Triton kernels (flybench/kernels/triton).

Diffusion attention reads the paged prefix through the block table and the
draft block from its scratch region in one kernel (split-K with a combine
kernel for long prefixes); the MoE layer is routed on the device and runs two
grouped GEMMs with SwiGLU and the weighted scatter-add fused (bf16, and fp8
e4m3 in the flavour of the GPU). Configurations come from the per-architecture
table (`flybench.kernels.triton.config_table`); the first call compiles.

A GPU is needed to time them. On a CPU Triton can only interpret them, which
the tests use for correctness but which says nothing about speed.
"""

from __future__ import annotations

import importlib.util
import os

from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.workloads.base import Case, Tensors


def fp8_matrix_units(arch: str) -> bool:
    """Whether `arch` has fp8 matrix instructions Triton targets: sm_89 and newer, gfx942, gfx950."""
    if arch.startswith("sm_") and arch[3:].isdigit():
        return int(arch[3:]) >= 89
    return arch in ("gfx942", "gfx950")


class TritonKernels(Provider):
    name = "triton"
    module = "triton"
    workloads = frozenset({"diffusion_attention", "moe"})
    description = "flybench's Triton kernels: paged diffusion attention with split-K, fused routed MoE (bf16, fp8)"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        if importlib.util.find_spec("triton") is None:
            return ("triton is not installed; CUDA and ROCm builds of torch bring it, "
                    "otherwise pip install -e '.[triton]'")
        if device.kind == "cpu":
            return ("the triton provider needs an NVIDIA or AMD GPU; this machine has none (on a CPU the kernels "
                    "only run in Triton's interpreter, for tests: TRITON_INTERPRET=1 python -m "
                    "flybench.kernels.triton.check)")
        if os.environ.get("TRITON_INTERPRET") == "1":
            return "TRITON_INTERPRET=1 is set, so Triton would interpret the kernels on the CPU; unset it to time them"
        if dtype == "fp8" and not fp8_matrix_units(device.arch):
            return f"fp8 kernels need sm_89 or newer, gfx942 or gfx950; this GPU is {device.arch} - use bf16 here"
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        """Allocate outputs and partial buffers and pick the configuration here, outside the timed call."""
        import torch

        from flybench.kernels.triton import cases

        units = torch.cuda.get_device_properties(0).multi_processor_count
        return cases.build(case, dtype, inputs, device.arch, compute_units=units)


register(TritonKernels())
