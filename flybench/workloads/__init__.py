"""The workload catalog: diffusion_attention, attention, mla_decode, moe, moe_stage, gemm, mixtral_step."""

from __future__ import annotations

from flybench.errors import unknown_name
from flybench.workloads.attention import AttentionWorkload
from flybench.workloads.base import SHAPE_SETS, Case, Tensors, Workload
from flybench.workloads.diffusion_attention import DiffusionAttentionWorkload
from flybench.workloads.gemm import GemmWorkload
from flybench.workloads.mixtral_step import MixtralStepWorkload
from flybench.workloads.mla_decode import MlaDecodeWorkload
from flybench.workloads.moe import MoeWorkload
from flybench.workloads.moe_stage import MoeStageWorkload

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (DiffusionAttentionWorkload(), AttentionWorkload(), MlaDecodeWorkload(), MoeWorkload(), MoeStageWorkload(), GemmWorkload(),
              MixtralStepWorkload())
}


def get_workload(name: str) -> Workload:
    """The workload called `name`, or an error listing the valid names."""
    if name not in WORKLOADS:
        raise unknown_name("workload", name, list(WORKLOADS))
    return WORKLOADS[name]


__all__ = ["SHAPE_SETS", "WORKLOADS", "Case", "Tensors", "Workload", "get_workload"]
