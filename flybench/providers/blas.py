"""`rocblas`, `hipblaslt`, `cublas`: the MoE as a per-expert GEMM loop on a chosen BLAS.

This is the path a framework without a grouped GEMM falls back to. The
library is picked with torch.backends.cuda.preferred_blas_library on every
call (on ROCm, "cublas" selects rocBLAS and "cublaslt" hipBLASLt); fp8 goes
through torch._scaled_mm, which on ROCm may use hipBLASLt whatever library is
preferred, so rocblas fp8 is not known to be rocBLAS until checked on hardware.
"""

from __future__ import annotations

from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import gemm_runner, moe_expert_loop
from flybench.workloads.base import Case, Tensors


class BlasLoop(Provider):
    """One BLAS library behind the per-expert loop; `platform` is "rocm" or "cuda"."""

    workloads = frozenset({"moe", "gemm"})
    module = "torch"

    def __init__(self, name: str, platform: str, torch_library: str) -> None:
        self.name, self.platform, self.torch_library = name, platform, torch_library
        self.description = f"per-expert torch.matmul loop on {name}"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        if device.kind == self.platform:
            return None
        wanted = "a ROCm GPU (gfx942/gfx950)" if self.platform == "rocm" else "an NVIDIA GPU with CUDA torch"
        return f"{self.name} needs {wanted}; this machine has {device.arch}"

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        import torch

        compute = (lambda: moe_expert_loop(case, inputs)) if case.workload == "moe" else gemm_runner(case, inputs)

        def run() -> Tensors:
            torch.backends.cuda.preferred_blas_library(self.torch_library)
            return compute()

        return run

    def implementation(self, case: Case, dtype: str) -> dict:
        """torch's version and the library asked for (fp8 goes through torch._scaled_mm, which may not honour it)."""
        return {**super().implementation(case, dtype), "config": {"preferred_blas_library": self.torch_library}}


register(BlasLoop("rocblas", "rocm", "cublas"))
register(BlasLoop("hipblaslt", "rocm", "cublaslt"))
register(BlasLoop("cublas", "cuda", "cublas"))
