"""`aiter-triton`: AITER's own Triton kernels, the Triton baseline ROCm users run (ROCm only, AITER from source).

The project's kernels under flybench/kernels/triton (provider `triton`) stay
the portable baseline; these are AITER's (aiter/ops/triton/, AITER at commit
e404860), called as AITER's op_tests/triton_tests call them:

- attention: `aiter.ops.triton.attention.mha.flash_attn_func`, BSHD, GQA,
  `return_lse=True` (LSE [B, H, S], natural log).
- diffusion attention: `aiter.ops.triton.attention.extend_attention
  .extend_attention_fwd`, sglang's extend (prefill-with-prefix) kernel. It
  reads the prefix through a table of single tokens (kv_indptr, kv_indices
  into the cache viewed as [pages * P, Hkv, hd]) and the new tokens' K/V from
  their own tensors, which is the workload's layout as it is: no draft append.
  `is_causal` masks only inside the draft; every query sees its whole prefix.
  It returns no LSE.
- moe (bf16): AITER's vLLM-derived kernels: `moe_align_block_size_triton`,
  `fused_moe_silu` (gate+up GEMM with SiLU(gate) * up fused, one row per
  routed pair), `fused_moe` with `mul_routed_weight=True, top_k=1` (down
  projection times routing weight), and a sum over the top-k slots, as vLLM's
  fused_experts composes them. Tile configs from
  `get_optimal_moe_config_func`. Routing is the workload's torch softmax top-k.

- moe_stage (bf16, int4_bf16): one of those two kernels over routing aligned
  in `build` (the case's input): `fused_moe_silu` writes stage 1's rows in
  pair order, `fused_moe` (routing weight, top_k=1) and the sum over the k
  slots are stage 2. int4 weights go in as its GPTQ/AWQ path reads them
  (`use_int4_w4a16`, `block_shape=[0, 32]`): [E, N, K / 2] bytes, even K in
  the low nibble, offset-binary (code + 8: with no zero point the kernel
  subtracts 8), scales [E, N, K / 32]; the tile config is the int4 one of
  `get_optimal_moe_config_func`. AITER's Triton a8w4 MoE
  (`moe_op_gemm_a8w4.moe_gemm_a8w4`, matmul_ogs with its own routing data
  and swizzled MX scales) is not wired.

Decode attention (aiter.ops.triton.attention.pa_decode) takes one query per
sequence; no flybench workload has that shape, so it is not wired. Not yet run
on AMD hardware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flybench.hardware import Device
from flybench.providers import _paged_append, register
from flybench.providers._rocm import aiter_reason, module_reason
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import attention_scale
from flybench.workloads.base import Case, Tensors

if TYPE_CHECKING:
    import torch


class AiterTriton(Provider):
    """AITER's Triton attention, extend attention and fused MoE."""

    name = "aiter-triton"
    workloads = frozenset({"attention", "diffusion_attention", "moe", "moe_stage"})
    description = "AITER's own Triton kernels: flash_attn_func, extend_attention_fwd, fused_moe"
    module = "aiter"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        reason = aiter_reason(self.name, "AITER's Triton kernels", device) or module_reason(
            "triton", "pip install triton (the ROCm torch wheels bring pytorch-triton-rocm)")
        if reason:
            return reason
        if workload in ("moe", "moe_stage") and dtype == "fp8":
            return ("aiter-triton has no fp8 MoE here: AITER's Triton fused_moe takes fp8 weights with one scale per "
                    "expert or per block, while the workload's fp8 weights carry per-channel scales")
        if workload == "moe_stage" and dtype == "a8w4":
            return ("aiter-triton's a8w4 MoE (moe_op_gemm_a8w4.moe_gemm_a8w4, matmul_ogs with its own routing data "
                    "and swizzled MX scales) is not wired in flybench yet")
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        if case.workload == "attention":
            from aiter.ops.triton.attention.mha import flash_attn_func

            args, kwargs = flash_attn_call(case, inputs)
            return lambda: dict(zip(("out", "lse"), flash_attn_func(*args, **kwargs)))
        if case.workload == "diffusion_attention":
            from aiter.ops.triton.attention.extend_attention import extend_attention_fwd

            args, kwargs = extend_attention_call(case, inputs)
            out = args[3]

            def run() -> Tensors:
                extend_attention_fwd(*args, **kwargs)
                return _paged_append.unpack({"out": out}, inputs)

            return run
        if case.workload == "moe_stage":
            return _moe_stage_runner(case, dtype, inputs)
        return _moe_runner(case, inputs)

    def implementation(self, case: Case, dtype: str) -> dict[str, Any]:
        """AITER's version, the kernels, and for MoE the tile config AITER's lookup chose for the token count."""
        if case.workload in KERNELS:
            ran: dict[str, Any] = {"kernels": [KERNELS[case.workload]]}
        else:
            kernels = MOE_KERNELS if case.workload == "moe" else (MOE_KERNELS[0], MOE_KERNELS[case.shape["stage"]])
            ran = {"kernels": list(kernels), "config": moe_config(case, dtype)}
        return {**super().implementation(case, dtype), **ran}


KERNELS = {"attention": "aiter.ops.triton.attention.mha.flash_attn_func",
           "diffusion_attention": "aiter.ops.triton.attention.extend_attention.extend_attention_fwd"}
MOE_KERNELS = ("aiter.ops.triton.moe.moe_align_block_size.moe_align_block_size_triton",
               "aiter.ops.triton.moe.moe_op_silu_fused.fused_moe_silu", "aiter.ops.triton.moe.moe_op.fused_moe")


def moe_config(case: Case, dtype: str) -> dict[str, Any]:
    """`get_optimal_moe_config_func(bf16, use_int4_w4a16=...)(tokens)`: AITER's tuned Triton tile config for this
    token count (bf16 activations for every dtype it runs)."""
    import torch

    from aiter.ops.triton.utils.moe_config_utils import get_optimal_moe_config_func

    lookup = get_optimal_moe_config_func(torch.bfloat16, use_int4_w4a16=dtype == "int4_bf16")
    return dict(lookup(case.shape["tokens"]))


def triton_weight(inputs: Tensors, name: str, dtype: str) -> tuple["torch.Tensor", "torch.Tensor | None", dict]:
    """One weight as AITER's Triton MoE reads it, its scale, and the quantisation keywords of the call: bf16 as
    it is; int4 packed offset-binary two to a byte, even K low ([E, N, K / 2] uint8), with float32 group scales
    [E, N, K / 32] and block_shape [0, 32] (its GPTQ/AWQ path)."""
    from flybench.providers import _moe_layout
    from flybench.workloads._inputs import GROUP

    flags = {"use_fp8_w8a8": False, "use_int8_w8a16": False, "use_int4_w4a16": dtype == "int4_bf16"}
    if dtype != "int4_bf16":
        return inputs[name], None, {**flags, "block_shape": None}
    import torch

    packed = _moe_layout.pack_int4(inputs[name].to(torch.int16) + 8)
    return packed, inputs[f"{name}_scale"].float().contiguous(), {**flags, "block_shape": [0, GROUP]}


def flash_attn_call(case: Case, inputs: Tensors) -> tuple[tuple, dict]:
    """`flash_attn_func(q, k, v, ...)` keyword arguments; returns (out, lse [B, H, S])."""
    kwargs = {"dropout_p": 0.0, "softmax_scale": attention_scale(case), "causal": bool(case.shape["causal"]),
              "return_lse": True}
    return (inputs["q"], inputs["k"], inputs["v"]), kwargs


def extend_attention_call(case: Case, inputs: Tensors) -> tuple[tuple, dict]:
    """`extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr,
    kv_indices, custom_mask, is_causal, mask_indptr, max_len_extend, sm_scale=...)`, all built here."""
    import torch

    q = _paged_append.packed_queries(inputs)
    batch, draft = int(inputs["q"].shape[0]), int(inputs["q"].shape[1])
    kv_indptr, kv_indices = _paged_append.prefix_token_slots(inputs)
    qo_indptr = (torch.arange(batch + 1, dtype=torch.int32) * draft).to(q.device)

    def tokens(t: "torch.Tensor") -> "torch.Tensor":
        return t.reshape(-1, *t.shape[-2:])

    args = (q, tokens(inputs["k_draft"]), tokens(inputs["v_draft"]), torch.empty_like(q), tokens(inputs["k_cache"]),
            tokens(inputs["v_cache"]), qo_indptr, kv_indptr, kv_indices, None, case.shape["mask"] == "causal", None,
            draft)
    return args, {"sm_scale": attention_scale(case)}


def _moe_runner(case: Case, inputs: Tensors) -> Runner:
    """Route, align, stage 1 (gate+up, SiLU * up), stage 2 (down, routing weight), sum over the k slots."""
    import torch

    from aiter.ops.triton.moe.moe_align_block_size import moe_align_block_size_triton
    from aiter.ops.triton.moe.moe_op import fused_moe
    from aiter.ops.triton.moe.moe_op_silu_fused import fused_moe_silu
    from aiter.ops.triton.utils.types import torch_to_triton_dtype

    from flybench.workloads.moe import route

    p = case.shape
    t, h, inter, experts, top_k = p["tokens"], p["hidden"], p["inter"], p["experts"], p["top_k"]
    x, w13, w2 = inputs["x"], inputs["w13"], inputs["w2"]
    config = moe_config(case, "bf16")
    buffers = align_buffers(t * top_k, experts, int(config["BLOCK_SIZE_M"]), x.device)
    mid = torch.empty((t * top_k, inter), dtype=x.dtype, device=x.device)
    down = torch.empty((t, top_k, h), dtype=x.dtype, device=x.device)
    compute = torch_to_triton_dtype[x.dtype]
    no_quant = (False, False, False)  # use_fp8_w8a8, use_int8_w8a16, use_int4_w4a16

    def run() -> Tensors:
        weights, ids = route(inputs["router_logits"], top_k)
        sorted_ids, expert_ids, padded = buffers
        sorted_ids.fill_(t * top_k)
        moe_align_block_size_triton(ids, experts, int(config["BLOCK_SIZE_M"]), sorted_ids, expert_ids, padded)
        fused_moe_silu(x, w13, mid, None, None, None, weights, ids, sorted_ids, expert_ids, padded, False, top_k,
                       compute, *no_quant, config=config)
        fused_moe(mid, w2, down, None, None, None, weights, ids, sorted_ids, expert_ids, padded, True, 1,
                  compute, *no_quant, config=config)
        return {"out": down.sum(dim=1)}

    return run


def _moe_stage_runner(case: Case, dtype: str, inputs: Tensors) -> Runner:
    """One stage over routing aligned here, outside the timed call: stage 1 `fused_moe_silu` (rows in pair order),
    stage 2 `fused_moe` with the routing weight and the sum over the k slots."""
    import torch

    from aiter.ops.triton.moe.moe_align_block_size import moe_align_block_size_triton
    from aiter.ops.triton.moe.moe_op import fused_moe
    from aiter.ops.triton.moe.moe_op_silu_fused import fused_moe_silu
    from aiter.ops.triton.utils.types import torch_to_triton_dtype

    from flybench.workloads.moe import route

    p = case.shape
    t, h, inter, experts, top_k, stage = p["tokens"], p["hidden"], p["inter"], p["experts"], p["top_k"], p["stage"]
    x = inputs["x"]
    config = moe_config(case, dtype)
    weights, ids = route(inputs["router_logits"], top_k)
    sorted_ids, expert_ids, padded = align_buffers(t * top_k, experts, int(config["BLOCK_SIZE_M"]), x.device)
    sorted_ids.fill_(t * top_k)
    moe_align_block_size_triton(ids, experts, int(config["BLOCK_SIZE_M"]), sorted_ids, expert_ids, padded)
    weight, scale, quant = triton_weight(inputs, "w13" if stage == 1 else "w2", dtype)
    compute = torch_to_triton_dtype[x.dtype]
    if stage == 1:
        mid = torch.empty((t * top_k, inter), dtype=x.dtype, device=x.device)

        def first() -> Tensors:
            fused_moe_silu(x, weight, mid, None, scale, None, weights, ids, sorted_ids, expert_ids, padded, False,
                           top_k, compute, **quant, config=config)
            return {"out": mid}

        return first
    down = torch.empty((t, top_k, h), dtype=x.dtype, device=x.device)

    def second() -> Tensors:
        fused_moe(inputs["act"], weight, down, None, scale, None, weights, ids, sorted_ids, expert_ids, padded, True,
                  1, compute, **quant, config=config)
        return {"out": down.sum(dim=1)}

    return second


def align_buffers(pairs: int, experts: int, block: int, device: "torch.device") -> tuple["torch.Tensor", ...]:
    """sorted_token_ids, expert_ids, num_tokens_post_pad sized as AITER's test sizes them:
    pairs + E * (block - 1) slots, one expert id per block."""
    import torch

    slots = pairs + experts * (block - 1)
    return (torch.empty(slots, dtype=torch.int32, device=device),
            torch.empty(-(-slots // block), dtype=torch.int32, device=device),
            torch.empty(1, dtype=torch.int32, device=device))


register(AiterTriton())
