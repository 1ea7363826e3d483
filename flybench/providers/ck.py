"""`ck` and `ck+append`: Composable Kernel through AITER (ROCm only, AITER built from source).

Calls follow AITER's own op_tests (test_mha.py, test_batch_prefill.py,
test_moe_2stage.py, test_gemm_a8w8.py):

- attention: `aiter.flash_attn_func` (BSHD, GQA, bottom-right causal, LSE).
- diffusion attention: `aiter.mha_batch_prefill_func`, CK's paged prefill, with
  the sglang page table (kv_indptr, page indices, last-page lengths) and
  packed queries. It reads K/V only through pages, so the draft block is
  appended to the cache (`_paged_append`): `ck` times the kernel with the
  draft already in the cache, `ck+append` times append plus kernel.
  `paged_attention_rocm` does not fit: it is a decode kernel (one query, or a
  few MTP queries, per sequence, causal), while a draft block has 16-64
  queries with a bidirectional mask.
- moe: `fused_topk` (softmax, top-k, renormalised: the workload's routing)
  and `fused_moe` on weights preshuffled once with `shuffle_weight(w, (16, 16))`;
  fp8 with per-channel weight scales [E, N, 1] and `QuantType.per_Token`
  (fused_moe quantises activations per token itself).
- gemm: fp8 `gemm_a8w8` with the per-tensor scales broadcast to [M, 1] and
  [N, 1]. bf16 GEMM ceilings come from rocblas/hipblaslt, copies from torch.

Written against AITER at commit e404860 (2026-08-22); not yet run on AMD hardware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flybench.hardware import Device
from flybench.providers import _paged_append, register
from flybench.providers._rocm import device_reason, module_reason, paged_diffusion_runner
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import attention_scale
from flybench.workloads.base import Case, Tensors

if TYPE_CHECKING:
    import torch

AITER_INSTALL = ("build AITER from source on this ROCm machine: git clone --recursive https://github.com/ROCm/aiter "
                 "&& cd aiter && python3 setup.py develop (docs/rocm.md)")
SHUFFLE_LAYOUT = (16, 16)


class CK(Provider):
    """CK kernels through AITER; with `time_append`, only the diffusion workload, append step included."""

    def __init__(self, name: str, time_append: bool) -> None:
        self.name, self.time_append = name, time_append
        self.workloads = frozenset({"diffusion_attention"} if time_append
                                   else {"attention", "diffusion_attention", "moe", "gemm"})
        self.description = ("CK batch prefill (AITER), draft block appended to the cache inside the timed call"
                            if time_append else "Composable Kernel through AITER: flash attention, batch prefill, "
                                                "fused_moe, gemm_a8w8")

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        reason = device_reason(self.name, "Composable Kernel through AITER", device)
        if reason:
            return reason
        if workload == "gemm" and dtype != "fp8":
            return "ck measures the GEMM ceiling in fp8 (gemm_a8w8); bf16 ceilings come from rocblas/hipblaslt"
        return module_reason("aiter", AITER_INSTALL)

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        import aiter

        if case.workload == "attention":
            args, kwargs = attention_call(case, inputs)
            return lambda: dict(zip(("out", "lse"), aiter.flash_attn_func(*args, **kwargs)))
        if case.workload == "diffusion_attention":
            def attend(cache: _paged_append.AppendedCache) -> "torch.Tensor":
                args, kwargs = batch_prefill_call(case, inputs, cache)
                return aiter.mha_batch_prefill_func(*args, **kwargs)

            return paged_diffusion_runner(inputs, attend, self.time_append)
        if case.workload == "moe":
            return _moe_runner(case, inputs)
        if case.shape["kind"] == "copy":
            raise NotImplementedError("ck measures the GEMM only; the copy ceiling comes from the torch provider")
        args = gemm_a8w8_args(inputs)
        return lambda: {"out": aiter.gemm_a8w8(*args)}


def attention_call(case: Case, inputs: Tensors) -> tuple[tuple, dict]:
    """Arguments of `aiter.flash_attn_func`: q, k, v BSHD; returns (out, lse [B, H, S])."""
    kwargs = {"softmax_scale": attention_scale(case), "causal": bool(case.shape["causal"]), "return_lse": True}
    return (inputs["q"], inputs["k"], inputs["v"]), kwargs


def batch_prefill_call(case: Case, inputs: Tensors, cache: _paged_append.AppendedCache) -> tuple[tuple, dict]:
    """Arguments of `aiter.mha_batch_prefill_func` over the appended cache (sglang page table, linear 4-D K/V)."""
    args = (_paged_append.packed_queries(inputs), cache.k_cache, cache.v_cache, cache.cu_seqlens_q,
            cache.kv_indptr, cache.page_indices, cache.max_seqlen_q, cache.max_seqlen_k)
    kwargs = {"softmax_scale": attention_scale(case), "causal": case.shape["mask"] == "causal",
              "kv_last_page_lens": cache.last_page_lens}
    return args, kwargs


def moe_weights(inputs: Tensors, shuffle) -> dict[str, "torch.Tensor | None"]:
    """fused_moe's weight operands: preshuffled w1/w2, and fp8 scales as [E, N, 1] float32 (None for bf16).

    `shuffle` is `aiter.ops.shuffle.shuffle_weight`, passed in so the layout can
    be checked without AITER installed.
    """
    fp8 = "w13_scale" in inputs
    return {
        "w1": shuffle(inputs["w13"], layout=SHUFFLE_LAYOUT), "w2": shuffle(inputs["w2"], layout=SHUFFLE_LAYOUT),
        "w1_scale": inputs["w13_scale"].float().unsqueeze(-1).contiguous() if fp8 else None,
        "w2_scale": inputs["w2_scale"].float().unsqueeze(-1).contiguous() if fp8 else None,
    }


def _moe_runner(case: Case, inputs: Tensors) -> Runner:
    import aiter
    from aiter.fused_moe import fused_moe, fused_topk
    from aiter.ops.shuffle import shuffle_weight

    weights = moe_weights(inputs, shuffle_weight)
    quant = aiter.QuantType.per_Token if weights["w1_scale"] is not None else aiter.QuantType.No
    x, logits, top_k = inputs["x"], inputs["router_logits"], case.shape["top_k"]

    def run() -> Tensors:
        topk_weights, topk_ids = fused_topk(x, logits, top_k, True)
        return {"out": fused_moe(x, weights["w1"], weights["w2"], topk_weights, topk_ids,
                                 activation=aiter.ActivationType.Silu, quant_type=quant,
                                 w1_scale=weights["w1_scale"], w2_scale=weights["w2_scale"])}

    return run


def gemm_a8w8_args(inputs: Tensors) -> tuple:
    """(XQ [M, K], WQ [N, K], x_scale [M, 1], w_scale [N, 1], bias, out dtype) for `aiter.gemm_a8w8`."""
    import torch

    a, b = inputs["a"], inputs["b"]
    x_scale = inputs["a_scale"].float().reshape(1, 1).expand(a.shape[0], 1).contiguous()
    w_scale = inputs["b_scale"].float().reshape(1, 1).expand(b.shape[0], 1).contiguous()
    return a, b, x_scale, w_scale, None, torch.bfloat16


register(CK("ck", time_append=False))
register(CK("ck+append", time_append=True))
