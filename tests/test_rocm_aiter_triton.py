"""aiter-triton on a CPU: AITER's Triton entry points replaced by torch emulators with their upstream signatures.

Signatures as in AITER at commit e404860: aiter/ops/triton/attention/mha.py
(flash_attn_func), attention/extend_attention.py (extend_attention_fwd),
moe/moe_align_block_size.py, moe/moe_op_silu_fused.py, moe/moe_op.py,
utils/moe_config_utils.py. The provider's argument building then runs end to
end through the correctness gate.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F

from flybench.providers import get_provider
from flybench.workloads.attention import attend
from flybench.workloads.moe import sort_by_expert
from test_rocm_providers import ROCM, dense_attention, run_gate, tiny

BLOCK_M = 16
calls: list[str] = []


def fake_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), bias=None,
                         alibi_slopes=None, deterministic=True, return_lse=False, return_attn_probs=False, sink=None,
                         config=None):
    assert dropout_p == 0.0 and return_lse is True and not return_attn_probs and window_size == (-1, -1)
    calls.append("flash_attn_func")
    out, lse = dense_attention(q, k, v, causal, softmax_scale)
    return out, lse


def fake_extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr,
                              kv_indices, custom_mask, is_causal, mask_indptr, max_len_extend, sm_scale=None,
                              logit_cap=0.0, skip_prefix_custom_mask=True, config=None):
    """Prefix through single-token slots of k_buffer, then the extend tokens' own K/V (causal inside them)."""
    assert custom_mask is None and mask_indptr is None and logit_cap == 0.0 and k_buffer.dim() == 3
    assert max_len_extend == int(qo_indptr.diff().max()) and kv_indices.dtype == qo_indptr.dtype == torch.int32
    calls.append("extend_attention_fwd")
    for b in range(qo_indptr.numel() - 1):
        q0, q1, p0, p1 = int(qo_indptr[b]), int(qo_indptr[b + 1]), int(kv_indptr[b]), int(kv_indptr[b + 1])
        slots = kv_indices[p0:p1].long()
        k = torch.cat([k_buffer[slots], k_extend[q0:q1]])
        v = torch.cat([v_buffer[slots], v_extend[q0:q1]])
        n, d = p1 - p0, q1 - q0
        mask = torch.ones((d, n + d), dtype=torch.bool)
        if is_causal:
            mask[:, n:] = torch.ones((d, d), dtype=torch.bool).tril()
        o_extend[q0:q1] = attend(q_extend[q0:q1], k, v, sm_scale, mask)[0].to(o_extend.dtype)


def fake_align(topk_ids, num_experts, block_size, sorted_token_ids, expert_ids, num_tokens_post_pad):
    assert block_size == BLOCK_M and (sorted_token_ids == topk_ids.numel()).all()  # the caller fills the sentinel
    ids, experts, total = sort_by_expert(topk_ids, num_experts, block_size)
    sorted_token_ids[: ids.numel()] = ids
    expert_ids[: experts.numel()] = experts
    num_tokens_post_pad.copy_(total)


def int4_weight(B, B_scale, block_shape):
    """What the GPTQ/AWQ path reads: [E, N, K / 2] bytes, even K low, value (nibble - 8) * scale[.., k // group]."""
    assert B.dtype == torch.uint8 and block_shape == [0, 32] and B_scale.shape == (*B.shape[:2], B.shape[2] * 2 // 32)
    nibbles = torch.stack([B & 0xF, B >> 4], dim=-1).flatten(-2).float()
    return (nibbles - 8) * B_scale.float().repeat_interleave(32, dim=-1)


def moe_gemm(name, silu):
    def gemm(A, B, C, A_scale, B_scale, B_zp, topk_weights, topk_ids, sorted_token_ids, expert_ids,
             num_tokens_post_padded, mul_routed_weight, top_k, compute_type, use_fp8_w8a8, use_int8_w8a16,
             use_int4_w4a16, block_shape=None, config=None):
        assert (A_scale, B_zp, use_fp8_w8a8, use_int8_w8a16) == (None, None, False, False)
        assert (B_scale is None and block_shape is None) != use_int4_w4a16
        assert config["int4"] == use_int4_w4a16  # the int4 tile config goes with the int4 kernel
        B = int4_weight(B, B_scale, block_shape) if use_int4_w4a16 else B
        assert compute_type == "bf16" and config["BLOCK_SIZE_M"] == BLOCK_M and topk_weights.stride(1) == 1
        assert mul_routed_weight == (not silu)
        calls.append(name)
        used = sorted_token_ids[: int(num_tokens_post_padded)].long()
        expert = expert_ids.repeat_interleave(BLOCK_M)[: used.numel()].long()
        keep = used < topk_ids.numel()
        pair, expert = used[keep], expert[keep]
        y = torch.einsum("rk,rnk->rn", A[pair // top_k].float(), B[expert].float())
        if silu:
            half = y.shape[-1] // 2
            y = F.silu(y[:, :half]) * y[:, half:]
        if mul_routed_weight:
            y = y * topk_weights.reshape(-1)[pair, None]
        C.view(-1, C.shape[-1])[pair] = y.to(C.dtype)
    return gemm


def fake_config_func(dtype, use_int8_w8a16=False, use_int8_w8a8=False, use_fp8_w8a8=False, use_int4_w4a16=False,
                     use_mxfp4=False):
    assert dtype == torch.bfloat16 and not (use_int8_w8a16 or use_int8_w8a8 or use_fp8_w8a8 or use_mxfp4)
    return lambda m: {"BLOCK_SIZE_M": BLOCK_M, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
                      "int4": use_int4_w4a16}


@pytest.fixture
def fake_aiter_triton(monkeypatch):
    calls.clear()
    modules = {
        "aiter": {}, "aiter.ops": {}, "aiter.ops.triton": {}, "aiter.ops.triton.attention": {},
        "aiter.ops.triton.attention.mha": {"flash_attn_func": fake_flash_attn_func},
        "aiter.ops.triton.attention.extend_attention": {"extend_attention_fwd": fake_extend_attention_fwd},
        "aiter.ops.triton.moe": {},
        "aiter.ops.triton.moe.moe_align_block_size": {"moe_align_block_size_triton": fake_align},
        "aiter.ops.triton.moe.moe_op": {"fused_moe": moe_gemm("fused_moe", silu=False)},
        "aiter.ops.triton.moe.moe_op_silu_fused": {"fused_moe_silu": moe_gemm("fused_moe_silu", silu=True)},
        "aiter.ops.triton.utils": {},
        "aiter.ops.triton.utils.moe_config_utils": {"get_optimal_moe_config_func": fake_config_func},
        "aiter.ops.triton.utils.types": {"torch_to_triton_dtype": {torch.bfloat16: "bf16"}},
    }
    for name, attributes in modules.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attributes))


def test_aiter_triton_says_what_it_covers(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda n, *a: object())
    provider = get_provider("aiter-triton")
    assert provider.workloads == {"attention", "diffusion_attention", "moe", "moe_stage"}
    assert "per-channel" in provider.unavailable_reason("moe", "fp8", ROCM["gfx950"])
    assert "per-channel" in provider.unavailable_reason("moe_stage", "fp8", ROCM["gfx950"])
    assert "moe_gemm_a8w4" in provider.unavailable_reason("moe_stage", "a8w4", ROCM["gfx950"])
    assert provider.unavailable_reason("moe_stage", "int4_bf16", ROCM["gfx942"]) is None
    assert provider.unavailable_reason("diffusion_attention", "fp16", ROCM["gfx942"]) is None
    monkeypatch.setattr("importlib.util.find_spec", lambda n, *a: None if n == "triton" else object())
    assert "triton is not installed" in provider.unavailable_reason("attention", "bf16", ROCM["gfx942"])


@pytest.mark.parametrize("case", tiny("attention"), ids=lambda c: c.name)
def test_attention_passes_the_gate_with_lse(fake_aiter_triton, case):
    assert set(run_gate("aiter-triton", case, "bf16").errors) == {"out", "lse"} and calls == ["flash_attn_func"]


@pytest.mark.parametrize("case", tiny("diffusion_attention"), ids=lambda c: c.name)
def test_extend_attention_reads_the_workload_pages_without_an_append(fake_aiter_triton, case, monkeypatch):
    from flybench.providers import _paged_append

    monkeypatch.setattr(_paged_append, "build", lambda inputs: pytest.fail("extend attention needs no append"))
    assert set(run_gate("aiter-triton", case, "fp16").errors) == {"out"} and calls == ["extend_attention_fwd"]


def test_extend_attention_reads_the_cache_in_place(fake_aiter_triton):
    from flybench.providers import aiter_triton
    from flybench.workloads import WORKLOADS

    case = tiny("diffusion_attention")[2]
    inputs = WORKLOADS[case.workload].make_inputs(case, "bf16", "cpu")
    args, kwargs = aiter_triton.extend_attention_call(case, inputs)
    assert args[4].data_ptr() == inputs["k_cache"].data_ptr() and args[5].data_ptr() == inputs["v_cache"].data_ptr()
    assert args[10] is True and kwargs == {"sm_scale": case.shape["scale"]}


@pytest.mark.parametrize("case", tiny("moe"), ids=lambda c: c.name)
def test_moe_passes_the_gate(fake_aiter_triton, case):
    run_gate("aiter-triton", case, "bf16")
    assert calls == ["fused_moe_silu", "fused_moe"]


def test_moe_records_the_tile_config_aiters_lookup_chose(fake_aiter_triton, monkeypatch):
    from flybench.providers import base

    monkeypatch.setattr(base, "package_of", lambda module: {"package": "amd-aiter", "version": "9.9"})
    ran = get_provider("aiter-triton").implementation(tiny("moe")[1], "bf16")
    assert ran["package"] == "amd-aiter" and ran["config"]["BLOCK_SIZE_M"] == BLOCK_M
    assert [k.rsplit(".", 1)[1] for k in ran["kernels"]] == ["moe_align_block_size_triton", "fused_moe_silu",
                                                             "fused_moe"]


@pytest.mark.parametrize("dtype", ["bf16", "int4_bf16"])
@pytest.mark.parametrize("case", [c for c in tiny("moe_stage") if c.name.startswith("t7-")], ids=lambda c: c.name)
def test_one_moe_stage_is_one_kernel_over_routing_aligned_outside_the_call(fake_aiter_triton, monkeypatch, case, dtype):
    aligned = []
    module = sys.modules["aiter.ops.triton.moe.moe_align_block_size"]
    monkeypatch.setattr(module, "moe_align_block_size_triton", lambda *a: aligned.append(1) or fake_align(*a))
    from flybench.measure.correctness import check
    from flybench.workloads import WORKLOADS

    workload = WORKLOADS["moe_stage"]
    inputs = workload.make_inputs(case, dtype, "cpu")
    runner = get_provider("aiter-triton").build(case, dtype, inputs, ROCM["gfx942"])
    for _ in range(2):
        verdict = check(runner(), workload.reference(case, inputs), dtype)
        assert verdict.passed, verdict.reason
    stage_kernel = "fused_moe_silu" if case.shape["stage"] == 1 else "fused_moe"
    assert calls == [stage_kernel] * 2 and aligned == [1]
    ran = get_provider("aiter-triton").implementation(case, dtype)
    assert ran["kernels"][-1].endswith(stage_kernel) and ran["config"]["int4"] == (dtype == "int4_bf16")


TRITON_UPSTREAM = {
    "flash_attn_func": "aiter/ops/triton/attention/mha.py",
    "extend_attention_fwd": "aiter/ops/triton/attention/extend_attention.py",
    "moe_align_block_size_triton": "aiter/ops/triton/moe/moe_align_block_size.py",
    "fused_moe": "aiter/ops/triton/moe/moe_op.py", "fused_moe_silu": "aiter/ops/triton/moe/moe_op_silu_fused.py",
    "get_optimal_moe_config_func": "aiter/ops/triton/utils/moe_config_utils.py",
}


@pytest.mark.skipif(not __import__("os").environ.get("FLYBENCH_AITER_SRC"),
                    reason="set FLYBENCH_AITER_SRC to an AITER checkout to bind against its source")
def test_every_aiter_triton_call_binds_to_the_checkouts_signature(fake_aiter_triton, monkeypatch):
    import os

    from test_rocm_aiter import upstream_signature

    made = []
    for path in TRITON_UPSTREAM.values():
        module = sys.modules[path.removesuffix(".py").replace("/", ".")]
        for name in TRITON_UPSTREAM:
            if hasattr(module, name):
                real = getattr(module, name)
                monkeypatch.setattr(module, name, lambda *a, _n=name, _f=real, **k: made.append((_n, a, k)) or _f(*a, **k))
    for workload, dtypes in (("attention", ["bf16"]), ("diffusion_attention", ["fp16"]), ("moe", ["bf16"]),
                             ("moe_stage", ["bf16", "int4_bf16"])):
        for case in tiny(workload)[:2]:
            for dtype in dtypes:
                run_gate("aiter-triton", case, dtype)
    assert {name for name, *_ in made} == set(TRITON_UPSTREAM)
    for name, args, kwargs in made:
        upstream_signature(os.environ["FLYBENCH_AITER_SRC"], TRITON_UPSTREAM[name], name).bind(*args, **kwargs)
