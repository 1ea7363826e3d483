"""`torch`: the eager torch path a framework user writes; runs anywhere torch runs.

MoE in bf16 uses torch's grouped GEMM (the strongest plain-torch path, no
host synchronisation); fp8 MoE uses the per-expert loop with
torch._scaled_mm. The bf16 per-expert loop is what the BLAS providers
(cublas, rocblas, hipblaslt) measure.
"""

from __future__ import annotations

from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import (attention_scale, diffusion_sdpa, gemm_runner, mla_decode_path,
                                         mla_decode_runner, moe_expert_loop, moe_grouped_gemm, moe_stage_path,
                                         moe_stage_runner, sdpa_bshd)
from flybench.workloads.base import Case, Tensors


class TorchEager(Provider):
    name = "torch"
    module = "torch"
    workloads = frozenset({"diffusion_attention", "attention", "mla_decode", "moe", "moe_stage", "gemm"})
    description = "eager torch: SDPA for attention, grouped GEMM for bf16 MoE, torch.matmul for GEMM"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        import torch

        if workload == "mla_decode" and dtype == "fp8":
            return ("torch has no fp8 attention (SDPA takes bf16 or fp16); casting the cache up would time the "
                    "cast, not attention: the bf16 case is torch's MLA baseline")
        if dtype in ("int4_bf16", "a8w4"):
            return (f"torch has no GEMM on {dtype}'s quantised weights: dequantising in the call would time the "
                    "dequantisation, and dequantising beforehand is the bf16 case of the same shape")
        if dtype == "fp8" and device.kind == "cpu":
            return "fp8 matmul (torch._scaled_mm) needs a GPU; this machine has none - use bf16 here"
        if workload in ("moe", "moe_stage") and dtype == "bf16" and not hasattr(torch, "_grouped_mm"):
            return "this torch has no torch._grouped_mm (torch >= 2.8 needed); upgrade torch"
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        workload = case.workload
        if workload == "attention":
            scale, causal = attention_scale(case), bool(case.shape["causal"])
            return lambda: {"out": sdpa_bshd(inputs["q"], inputs["k"], inputs["v"], causal, scale)}
        if workload == "diffusion_attention":
            return diffusion_sdpa(case, inputs)
        if workload == "mla_decode":
            return mla_decode_runner(case, inputs)
        if workload == "moe_stage":
            return moe_stage_runner(case, inputs)
        if workload == "moe":
            compute = moe_grouped_gemm if dtype == "bf16" else moe_expert_loop
            return lambda: compute(case, inputs)
        return gemm_runner(case, inputs)

    def implementation(self, case: Case, dtype: str) -> dict:
        info = super().implementation(case, dtype)
        if case.workload == "mla_decode":
            info["kernels"] = ["F.scaled_dot_product_attention" if mla_decode_path(case) == "sdpa" else
                               "torch.bmm, softmax, torch.bmm"]
        if case.workload == "moe_stage":
            info["kernels"] = ["torch._scaled_mm per expert" if moe_stage_path(case, dtype) == "per-expert" else
                               "torch._scaled_grouped_mm" if dtype == "fp8" else "torch._grouped_mm"]
        return info


register(TorchEager())
