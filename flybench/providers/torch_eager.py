"""`torch`: the eager torch path a framework user writes; runs anywhere torch runs."""

from __future__ import annotations

from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import attention_scale, diffusion_sdpa, gemm_runner, moe_expert_loop, sdpa_bshd
from flybench.workloads.base import Case, Tensors


class TorchEager(Provider):
    name = "torch"
    workloads = frozenset({"diffusion_attention", "attention", "moe", "gemm"})
    description = "eager torch: SDPA for attention, a per-expert matmul loop for MoE, torch.matmul for GEMM"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        if dtype == "fp8" and device.kind == "cpu":
            return "fp8 matmul (torch._scaled_mm) needs a GPU; this machine has none - use bf16 here"
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        workload = case.workload
        if workload == "attention":
            scale, causal = attention_scale(case), bool(case.shape["causal"])
            return lambda: {"out": sdpa_bshd(inputs["q"], inputs["k"], inputs["v"], causal, scale)}
        if workload == "diffusion_attention":
            return lambda: diffusion_sdpa(case, inputs)
        if workload == "moe":
            return lambda: moe_expert_loop(case, inputs)
        return gemm_runner(case, inputs)


register(TorchEager())
