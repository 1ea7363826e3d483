"""`aiter-asm`: AITER's hand-written assembly kernels, called directly (ROCm only, AITER from source).

These are the kernels AITER's own wrappers pick on MI300X/MI325X/MI355X for
many flybench shapes (AITER at commit e404860):

- attention: `aiter.fmha_v3_fwd` (aiter/ops/mha.py), which
  `aiter.flash_attn_func` dispatches for bf16, head dim 128 and more than 128
  queries on gfx942/gfx950. Called as FlyDSL's comparison calls it for "asm"
  (tests/kernels/test_flash_attn_fwd.py, run_aiter_bench: how_v3_bf16_cvt=2,
  round toward zero, which gfx942's kernels select by and gfx950's ignore).
  Caveat: when no assembly kernel matches, AITER's C++ `mha_fwd` falls back to
  CK without saying so (csrc/cpp_itfs/mha_fwd.cu: fmha_fwd_v3 returns -1, then
  fmha_fwd_ck runs).
- moe: the one-stage `aiter.fmoe_g1u1` on fp8 with per-token activation and
  per-channel weight scales, as `fused_moe_1stage` calls it (aiter/fused_moe.py),
  with `moe_sorting` at block 32 (BLOCK_SIZE_M, the one-stage default). AITER
  has no one-stage assembly kernel for bf16 gate+up (g1u1) weights.

Not yet run on AMD hardware.
"""

from __future__ import annotations

from typing import Any

from flybench.hardware import Device
from flybench.providers import _aiter_moe, register
from flybench.providers._rocm import aiter_reason
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import attention_scale
from flybench.workloads.base import Case, Tensors

HOW_V3_BF16_CVT = 2
"""Round toward zero on gfx942, as FlyDSL's comparison and AITER's op_tests/test_mha.py run it."""
ONE_STAGE_BLOCK_M = 32
"""aiter.fused_moe.BLOCK_SIZE_M, the sorting block of the one-stage kernels."""


class AiterAsm(Provider):
    """AITER's assembly attention and MoE kernels under their own name."""

    name = "aiter-asm"
    workloads = frozenset({"attention", "moe"})
    description = "AITER's hand-written assembly kernels: fmha_v3_fwd, fmoe_g1u1"
    module = "aiter"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        reason = aiter_reason(self.name, "AITER's assembly kernels", device)
        if reason:
            return reason
        if workload == "attention" and dtype != "bf16":
            return "aiter-asm attention is bf16 only (fmha_v3_fwd has no fp16 kernels); use ck for fp16"
        if workload == "moe" and dtype != "fp8":
            return ("aiter-asm MoE is fp8 only: AITER has no one-stage assembly kernel for bf16 gate+up weights; "
                    "use ck for bf16")
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        import aiter

        if case.workload == "attention":
            args, kwargs = fmha_v3_fwd_call(case, inputs)
            return lambda: dict(zip(("out", "lse"), aiter.fmha_v3_fwd(*args, **kwargs)[:2]))
        return _one_stage_runner(case, inputs)

    def implementation(self, case: Case, dtype: str) -> dict[str, Any]:
        """AITER's version, the entry point, and what AITER does not say about the kernel it picked."""
        if case.workload == "attention":
            ran = {"kernels": ["aiter.fmha_v3_fwd"], "config": {"how_v3_bf16_cvt": HOW_V3_BF16_CVT},
                   "unexposed": "whether fmha_v3_fwd's C++ found an assembly kernel for the shape or ran CK's "
                                "instead (csrc/cpp_itfs/mha_fwd.cu falls back without saying so)"}
        else:
            ran = {"kernels": ["aiter.fused_moe.moe_sorting", "aiter.fmoe_g1u1"],
                   "config": {"block_m": ONE_STAGE_BLOCK_M, "quant_type": "per_Token", "kernelName": ""},
                   "unexposed": "kernelName is empty: which assembly kernel fmoe_g1u1's C++ picks for the shape",
                   "aiter_fused_moe_would_run": _aiter_moe.fused_moe_choice(case, dtype)}
        return {**super().implementation(case, dtype), **ran}


def fmha_v3_fwd_call(case: Case, inputs: Tensors) -> tuple[tuple, dict]:
    """`aiter.fmha_v3_fwd(q, k, v, dropout_p, softmax_scale, is_causal, window_size_left, window_size_right,
    return_softmax_lse, return_dropout_randval, how_v3_bf16_cvt, ...)`; returns (out, lse [B, H, S], p, rng)."""
    args = (inputs["q"], inputs["k"], inputs["v"], 0.0, attention_scale(case), bool(case.shape["causal"]),
            -1, -1, True, False, HOW_V3_BF16_CVT)
    return args, {"out": None, "bias": None, "alibi_slopes": None, "gen": None}


def _one_stage_runner(case: Case, inputs: Tensors) -> Runner:
    """Routing, sorting, per-token quantisation, then the whole layer in one `fmoe_g1u1` launch."""
    import aiter
    from aiter import fused_moe
    from aiter.ops.shuffle import shuffle_weight

    top_k = case.shape["top_k"]
    weights = _aiter_moe.moe_weights(inputs, shuffle_weight)
    quantize, q_dtype = _aiter_moe.quantizer(aiter, fp8=True), weights["w1"].dtype

    def run() -> Tensors:
        s = _aiter_moe.route_and_sort(fused_moe, inputs, top_k, ONE_STAGE_BLOCK_M)
        a1, a1_scale = quantize(inputs["x"], quant_dtype=q_dtype, num_rows=None)
        aiter.fmoe_g1u1(s.out, a1, weights["w1"], weights["w2"], s.ids, s.weights, s.expert_ids, s.num_valid_ids,
                        top_k, a1_scale, weights["w1_scale"], weights["w2_scale"], "", fc2_smooth_scale=None,
                        activation=aiter.ActivationType.Silu)
        return {"out": s.out}

    return run


register(AiterAsm())
