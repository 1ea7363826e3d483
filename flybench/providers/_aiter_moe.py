"""What AITER's MoE paths share (`ck` two-stage, `aiter-asm` one-stage): weights, routing, sorting, quantisation.

Both read the same preshuffled weights and the same `moe_sorting` buffers and
quantise activations per token the same way; only the GEMM kernels differ.
Written against AITER at commit e404860 (aiter/fused_moe.py, aiter/ops/quant.py);
not yet run on AMD hardware.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Callable

from flybench.workloads.base import Tensors

if TYPE_CHECKING:
    import torch

SHUFFLE_LAYOUT = (16, 16)


def moe_weights(inputs: Tensors, shuffle: Callable) -> dict[str, "torch.Tensor | None"]:
    """Preshuffled w1/w2, and fp8 scales as [E, N, 1] float32 (None for bf16).

    `shuffle` is `aiter.ops.shuffle.shuffle_weight`, passed in so the layout can
    be checked without AITER; it also marks its result `is_shuffled`, which the
    CK stage wrappers read.
    """
    fp8 = "w13_scale" in inputs
    return {
        "w1": shuffle(inputs["w13"], layout=SHUFFLE_LAYOUT), "w2": shuffle(inputs["w2"], layout=SHUFFLE_LAYOUT),
        "w1_scale": inputs["w13_scale"].float().unsqueeze(-1).contiguous() if fp8 else None,
        "w2_scale": inputs["w2_scale"].float().unsqueeze(-1).contiguous() if fp8 else None,
    }


@dataclass
class Sorted:
    """`moe_sorting`'s five results; `out` is the zeroed [T, H] bf16 buffer the kernels accumulate into."""

    ids: "torch.Tensor"
    weights: "torch.Tensor"
    expert_ids: "torch.Tensor"
    num_valid_ids: "torch.Tensor"
    out: "torch.Tensor"


def route_and_sort(fused_moe: ModuleType, inputs: Tensors, top_k: int, block_m: int) -> Sorted:
    """`fused_topk(..., renormalize=True)` (the workload's routing) and `moe_sorting` at `block_m`,
    as `_fused_moe_impl` does."""
    import torch

    x = inputs["x"]
    topk_weights, topk_ids = fused_moe.fused_topk(x, inputs["router_logits"], top_k, True)
    sorted_ = fused_moe.moe_sorting(topk_ids, topk_weights, int(inputs["router_logits"].shape[1]), int(x.shape[1]),
                                    torch.bfloat16, block_m)
    return Sorted(*sorted_)


def quantizer(aiter: ModuleType, fp8: bool) -> Callable:
    """`get_hip_quant(QuantType.per_Token)` for fp8 ((q, scale [..., 1]) per row), the pass-through for bf16."""
    return aiter.get_hip_quant(aiter.QuantType.per_Token if fp8 else aiter.QuantType.No)
