"""What AITER's MoE paths share (`ck` two-stage, `aiter-asm` one-stage): weights, routing, sorting, quantisation.

Both read the same preshuffled weights and the same `moe_sorting` buffers and
quantise activations per token the same way; only the GEMM kernels differ.
Written against AITER at commit e404860 (aiter/fused_moe.py, aiter/ops/quant.py);
not yet run on AMD hardware.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from flybench.workloads.base import Case, Tensors

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


def fused_moe_choice(case: Case, dtype: str) -> dict[str, Any]:
    """What `aiter.fused_moe` itself would run for this case: its tuned lookup `get_2stage_cfgs`, called with the
    arguments fused_moe passes it for these weights (padded token count, SiLU gate+up, per-token fp8 or none,
    both weights shuffled, no padding, no expert mask or stage-2 bias). ck and aiter-asm call their kernels directly; this says beside what they ran which
    kernel AITER's own entry point would have taken (its one-stage assembly kernel, or which two stages)."""
    import torch

    import aiter
    from aiter import fused_moe
    from aiter.utility import dtypes

    p = case.shape
    q_dtype = dtypes.fp8 if dtype == "fp8" else torch.bfloat16
    quant = aiter.QuantType.per_Token if dtype == "fp8" else aiter.QuantType.No
    chosen = fused_moe.get_2stage_cfgs(fused_moe.get_padded_M(p["tokens"]), p["hidden"], p["inter"], p["experts"],
                                       p["top_k"], torch.bfloat16, q_dtype, q_dtype, quant, True,
                                       aiter.ActivationType.Silu, False, 0, 0, True, opus_weights_shuffled=True)
    return {"run_1stage": bool(chosen.run_1stage), "block_m": int(chosen.block_m),
            "stage1": _callable_name(chosen.stage1), "stage2": _callable_name(chosen.stage2)}


def _callable_name(stage: Callable | None) -> str | None:
    """A stage's function name, with the kernelName it was bound to where it was (functools.partial)."""
    if stage is None:
        return None
    name = getattr(getattr(stage, "func", stage), "__name__", repr(stage))
    kernel = getattr(stage, "keywords", {}).get("kernelName")
    return f"{name}(kernelName={kernel!r})" if kernel is not None else name
