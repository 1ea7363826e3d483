"""`ck` and `ck+append`: Composable Kernel through AITER, on CK's own entry points (ROCm only, AITER from source).

AITER's convenience wrappers pick other kernels for the shapes flybench
measures, so `ck` calls the CK paths directly (AITER at commit e404860):

- attention: `aiter.mha_fwd` (aiter/ops/mha.py; its C++ side passes
  use_asm_v3=false, csrc/py_itfs_ck/mha_fwd_kernels.cu), called as FlyDSL's own
  comparison calls it for "ck" (tests/kernels/test_flash_attn_fwd.py,
  run_aiter_bench). `aiter.flash_attn_func` would dispatch the assembly
  `fmha_v3_fwd` for bf16, head dim 128 and more than 128 queries on
  gfx942/gfx950: that kernel is `aiter-asm`.
- diffusion attention: `aiter.mha_batch_prefill_func`, CK's paged prefill,
  with `return_lse=True` (LSE [Hq, total_q]), the sglang page table and packed
  queries. It reads K/V only through pages, so the draft block is appended to
  the cache (`_paged_append`): `ck` times the kernel with the draft already in
  the cache, `ck+append` times append plus kernel.
- moe: the CK two-stage path `fused_moe` takes when it has no tuned row and
  does not choose the one-stage assembly kernel: `moe_sorting`, per-token fp8
  quantisation (`get_hip_quant`), `ck_moe_stage1` (aiter/fused_moe.py, which
  calls `aiter.ck_moe_stage1_fwd`), quantisation of its output, and
  `aiter.ck_moe_stage2_fwd`. `fused_moe` itself would take `fmoe_g1u1` for fp8
  per-token SiLU above 16 tokens, since tuned_fmoe.csv has rows for 80-CU parts
  only (get_2stage_cfgs): that kernel is `aiter-asm`. block_m and the
  non-temporal-load flag come from AITER's own default heuristics
  (`get_block_size_M`, `use_nt` on `get_padded_M(tokens)`).
- moe_stage (bf16, fp8): one of those two CK stages over routing sorted in
  `build` (the case's input), its activation quantised there too; stage 1
  writes rows in pair order, stage 2 sums into the sorted buffer's output,
  zeroed each call. int4 weights: AITER's a16wi4 MoE runs FlyDSL's a16w-mix
  port (`aiter.ops.flydsl.moe_kernels`), not a CK kernel; a8w4: AITER's are
  the opus kernels, not CK's. ck says so for both.
- gemm: fp8 `gemm_a8w8` with the per-tensor scales broadcast to [M, 1] and
  [N, 1]. bf16 GEMM ceilings come from rocblas/hipblaslt, copies from torch.

Not yet run on AMD hardware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flybench.hardware import Device
from flybench.providers import _aiter_moe, _paged_append, register
from flybench.providers._rocm import aiter_reason, paged_diffusion_runner
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import attention_scale
from flybench.workloads.base import Case, Tensors

if TYPE_CHECKING:
    import torch


class CK(Provider):
    """CK kernels through AITER; with `time_append`, only the diffusion workload, append step included."""

    module = "aiter"

    def __init__(self, name: str, time_append: bool) -> None:
        self.name, self.time_append = name, time_append
        self.workloads = frozenset({"diffusion_attention"} if time_append
                                   else {"attention", "diffusion_attention", "moe", "moe_stage", "gemm"})
        self.description = ("CK batch prefill (AITER), draft block appended to the cache inside the timed call"
                            if time_append else "Composable Kernel through AITER: mha_fwd, batch prefill, "
                                                "two-stage CK MoE, gemm_a8w8")

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        reason = aiter_reason(self.name, "Composable Kernel through AITER", device)
        if reason:
            return reason
        if workload == "gemm" and dtype != "fp8":
            return "ck measures the GEMM ceiling in fp8 (gemm_a8w8); bf16 ceilings come from rocblas/hipblaslt"
        if dtype == "int4_bf16":
            return ("AITER has no CK MoE for int4 weights: its a16wi4 path (QuantType.per_1x32, i4x2 weights) runs "
                    "FlyDSL's a16w-mix kernel (aiter.ops.flydsl.moe_kernels), which is the flydsl provider")
        if dtype == "a8w4":
            return "AITER's a8w4 MoE kernels are its opus ones (aiter/ops/opus), not CK's; they are not wired yet"
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        import aiter

        if case.workload == "attention":
            args, kwargs = mha_fwd_call(case, inputs)
            return lambda: dict(zip(("out", "lse"), aiter.mha_fwd(*args, **kwargs)[:2]))
        if case.workload == "diffusion_attention":
            def attend(cache: _paged_append.AppendedCache) -> Tensors:
                args, kwargs = batch_prefill_call(case, inputs, cache)
                return dict(zip(("out", "lse"), aiter.mha_batch_prefill_func(*args, **kwargs)))

            return paged_diffusion_runner(inputs, attend, self.time_append)
        if case.workload == "moe":
            return _two_stage_runner(case, inputs)
        if case.workload == "moe_stage":
            return _stage_runner(case, inputs)
        if case.shape["kind"] == "copy":
            raise NotImplementedError("ck measures the GEMM only; the copy ceiling comes from the torch provider")
        args = gemm_a8w8_args(inputs)
        return lambda: {"out": aiter.gemm_a8w8(*args)}

    def implementation(self, case: Case, dtype: str) -> dict[str, Any]:
        """AITER's version, the entry points, and what AITER's own lookups chose for this shape."""
        return {**super().implementation(case, dtype), **_dispatched(case, dtype)}


_CK_MOE_HEURISTIC = ("kernelName is empty, so CK's moe_stage1/2_heuristic_dispatch "
                     "(csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages.cu) picks each stage's instance from "
                     "block_m, inter_dim and the dtypes; AITER's Python API does not name it")


def _dispatched(case: Case, dtype: str) -> dict[str, Any]:
    """The kernels `build` calls for `case`, and AITER's choices where its Python API makes them."""
    if case.workload == "attention":
        return {"kernels": ["aiter.mha_fwd"],
                "unexposed": "the CK tile instance mha_fwd's C++ picks for the shape (use_asm_v3=false)"}
    if case.workload == "diffusion_attention":
        return {"kernels": ["aiter.mha_batch_prefill_func"]}
    if case.workload in ("moe", "moe_stage"):
        quant = "per_Token" if dtype == "fp8" else "No"
        stages = ["aiter.fused_moe.ck_moe_stage1", "aiter.ck_moe_stage2_fwd"]
        if case.workload == "moe_stage":
            stages = [stages[case.shape["stage"] - 1]]
        return {"kernels": ["aiter.fused_moe.moe_sorting", *stages],
                "config": {**moe_stage_config(case), "quant_type": quant, "kernelName": ""},
                "unexposed": _CK_MOE_HEURISTIC, "aiter_fused_moe_would_run": _aiter_moe.fused_moe_choice(case, dtype)}
    from aiter.jit.core import AITER_CONFIGS
    from aiter.ops.gemm_op_a8w8 import get_GEMM_config_with_quant_type
    from aiter.utility import dtypes

    p = case.shape  # the lookup gemm_a8w8_CK makes (aiter/ops/gemm_op_a8w8.py), on the fp8 the workload drew
    tuned = get_GEMM_config_with_quant_type(p["m"], p["n"], p["k"], dtypes.fp8,
                                            AITER_CONFIGS.AITER_CONFIG_GEMM_A8W8_FILE)
    return {"kernels": ["aiter.gemm_a8w8"],
            "config": dict(tuned) if tuned else "no tuned row for this shape: CK's default instance, splitK 0"}


def mha_fwd_call(case: Case, inputs: Tensors) -> tuple[tuple, dict]:
    """`aiter.mha_fwd(q, k, v, dropout_p, softmax_scale, is_causal, window_size_left, window_size_right,
    sink_size, return_softmax_lse, return_dropout_randval, ...)`; returns (out, lse [B, H, S], p, rng)."""
    args = (inputs["q"], inputs["k"], inputs["v"], 0.0, attention_scale(case), bool(case.shape["causal"]),
            -1, -1, 0, True, False)
    kwargs = {"cu_seqlens_q": None, "cu_seqlens_kv": None, "out": None, "bias": None, "alibi_slopes": None,
              "q_descale": None, "k_descale": None, "v_descale": None, "sink_ptr": None, "gen": None}
    return args, kwargs


def batch_prefill_call(case: Case, inputs: Tensors, cache: _paged_append.AppendedCache) -> tuple[tuple, dict]:
    """`aiter.mha_batch_prefill_func` over the appended cache (sglang page table, linear 4-D K/V);
    with return_lse=True it returns (out [total_q, Hq, hd], lse [Hq, total_q]): mha_batch_prefill_fake_tensors
    in aiter/ops/mha.py, and op_tests/test_batch_prefill.py compares it with per-sequence [Hq, seqlen_q]
    references concatenated along dim 1."""
    args = (_paged_append.packed_queries(inputs), cache.k_cache, cache.v_cache, cache.cu_seqlens_q,
            cache.kv_indptr, cache.page_indices, cache.max_seqlen_q, cache.max_seqlen_k)
    kwargs = {"softmax_scale": attention_scale(case), "causal": case.shape["mask"] == "causal",
              "return_lse": True, "kv_last_page_lens": cache.last_page_lens}
    return args, kwargs


class CkStages:
    """What both CK stages need for one case: preshuffled weights (each stage takes both), the quantiser, AITER's
    block_m and non-temporal-load flag, and the calls as fused_moe_2stages makes them for its CK default."""

    def __init__(self, case: Case, inputs: Tensors) -> None:
        import aiter
        from aiter.ops.shuffle import shuffle_weight

        self.case, self.top_k, self.inter = case, case.shape["top_k"], case.shape["inter"]
        self.weights = _aiter_moe.moe_weights(inputs, shuffle_weight)
        fp8 = self.weights["w1_scale"] is not None
        self.quant_type = aiter.QuantType.per_Token if fp8 else aiter.QuantType.No
        self.quantizer, self.q_dtype = _aiter_moe.quantizer(aiter, fp8), self.weights["w1"].dtype
        self.stage = moe_stage_config(case)

    def quantize(self, rows: "torch.Tensor", per_slot: bool) -> tuple:
        """x [T, H] per token, or stage 1's rows [T, k, I] per (token, slot), as fused_moe_2stages quantises them."""
        if per_slot:
            return self.quantizer(rows, quant_dtype=self.q_dtype, num_rows=None, num_rows_factor=self.top_k)
        return self.quantizer(rows, quant_dtype=self.q_dtype)

    def first(self, s: _aiter_moe.Sorted, a1: "torch.Tensor", a1_scale, mid: "torch.Tensor") -> None:
        import torch

        import aiter
        from aiter import fused_moe

        w = self.weights
        fused_moe.ck_moe_stage1(a1, w["w1"], w["w2"], s.ids, s.expert_ids, s.num_valid_ids, mid, self.top_k,
                                a1_scale=a1_scale, w1_scale=w["w1_scale"], kernelName="", sorted_weights=None,
                                quant_type=self.quant_type, activation=aiter.ActivationType.Silu, splitk=0,
                                dtype=torch.bfloat16, **self.stage)

    def second(self, s: _aiter_moe.Sorted, a2: "torch.Tensor", a2_scale) -> None:
        import aiter

        w, t = self.weights, self.case.shape["tokens"]
        aiter.ck_moe_stage2_fwd(a2.view(t, self.top_k, self.inter), w["w1"], w["w2"], s.ids, s.expert_ids,
                                s.num_valid_ids, s.out, self.top_k, kernelName="", w2_scale=w["w2_scale"],
                                a2_scale=a2_scale, sorted_weights=s.weights, quant_type=self.quant_type,
                                activation=aiter.ActivationType.Silu, **self.stage)


def _two_stage_runner(case: Case, inputs: Tensors) -> Runner:
    """Routing, sorting, quantisation and the two CK stages, as fused_moe_2stages runs its CK default."""
    import torch

    from aiter import fused_moe

    p = case.shape
    ck = CkStages(case, inputs)
    mid = torch.empty((p["tokens"], p["top_k"], p["inter"]), dtype=torch.bfloat16, device=inputs["x"].device)

    def run() -> Tensors:
        s = _aiter_moe.route_and_sort(fused_moe, inputs, p["top_k"], ck.stage["block_m"])
        ck.first(s, *ck.quantize(inputs["x"], per_slot=False), mid)
        ck.second(s, *ck.quantize(mid, per_slot=True))
        return {"out": s.out}

    return run


def _stage_runner(case: Case, inputs: Tensors) -> Runner:
    """One CK stage over routing sorted and activations quantised here, outside the timed call."""
    import torch

    from aiter import fused_moe

    p = case.shape
    t, top_k, inter = p["tokens"], p["top_k"], p["inter"]
    ck = CkStages(case, inputs)
    s = _aiter_moe.route_and_sort(fused_moe, inputs, top_k, ck.stage["block_m"])
    if p["stage"] == 1:
        a1, a1_scale = ck.quantize(inputs["x"], per_slot=False)
        mid = torch.empty((t, top_k, inter), dtype=torch.bfloat16, device=inputs["x"].device)

        def first() -> Tensors:
            ck.first(s, a1, a1_scale, mid)
            return {"out": mid.view(t * top_k, inter)}

        return first
    a2, a2_scale = ck.quantize(inputs["act"].view(t, top_k, inter), per_slot=True)

    def second() -> Tensors:
        s.out.zero_()
        ck.second(s, a2, a2_scale)
        return {"out": s.out}

    return second


def moe_stage_config(case: Case) -> dict[str, Any]:
    """block_m and the non-temporal-load flag from AITER's default heuristics on `get_padded_M(tokens)`,
    as fused_moe_2stages takes them without a tuned row."""
    from aiter import fused_moe

    p = case.shape
    padded = fused_moe.get_padded_M(p["tokens"])
    return {"block_m": int(fused_moe.get_block_size_M(padded, p["top_k"], p["experts"], p["inter"])),
            "use_non_temporal_load": bool(fused_moe.use_nt(padded, p["top_k"], p["experts"]))}


def gemm_a8w8_args(inputs: Tensors) -> tuple:
    """(XQ [M, K], WQ [N, K], x_scale [M, 1], w_scale [N, 1], bias, out dtype) for `aiter.gemm_a8w8`."""
    import torch

    a, b = inputs["a"], inputs["b"]
    x_scale = inputs["a_scale"].float().reshape(1, 1).expand(a.shape[0], 1).contiguous()
    w_scale = inputs["b_scale"].float().reshape(1, 1).expand(b.shape[0], 1).contiguous()
    return a, b, x_scale, w_scale, None, torch.bfloat16


register(CK("ck", time_append=False))
register(CK("ck+append", time_append=True))
