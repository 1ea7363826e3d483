"""ck and aiter-asm on a CPU: each AITER entry point replaced by a torch emulator with its upstream signature.

The emulators take exactly the parameters of AITER at commit e404860
(aiter/ops/mha.py, aiter/fused_moe.py, aiter/ops/moe_op.py, aiter/ops/quant.py)
and check the values that select the kernel (return_lse, how_v3_bf16_cvt,
block_m, is_shuffled), so an argument in the wrong position or under the wrong
name fails here. The runners then go through the correctness gate.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F

from flybench.measure.correctness import check
from flybench.providers import _moe_layout, _rocm, get_provider
from flybench.workloads import WORKLOADS
from flybench.workloads._inputs import quantize_fp8
from flybench.workloads.moe import route
from test_rocm_providers import ROCM, dense_attention, paged_attention, run_gate, sglang_pages, tiny, unshuffle

GFX942 = ROCM["gfx942"]
BLOCK_M = 64
"""What the emulated get_block_size_M answers; the CK stages must be called with it."""
calls: list[str] = []


def fake_mha_fwd(q, k, v, dropout_p, softmax_scale, is_causal, window_size_left, window_size_right, sink_size,
                 return_softmax_lse, return_dropout_randval, cu_seqlens_q=None, cu_seqlens_kv=None, out=None,
                 bias=None, alibi_slopes=None, q_descale=None, k_descale=None, v_descale=None, sink_ptr=None,
                 gen=None):
    assert (dropout_p, window_size_left, window_size_right, sink_size) == (0.0, -1, -1, 0)
    assert return_softmax_lse is True and return_dropout_randval is False and cu_seqlens_q is None
    calls.append("mha_fwd")
    o, lse = dense_attention(q, k, v, is_causal, softmax_scale)
    return o, lse, torch.empty(0), torch.empty(2, dtype=torch.int64)


def fake_fmha_v3_fwd(q, k, v, dropout_p, softmax_scale, is_causal, window_size_left, window_size_right,
                     return_softmax_lse, return_dropout_randval, how_v3_bf16_cvt, out=None, bias=None,
                     alibi_slopes=None, q_descale=None, k_descale=None, v_descale=None, gen=None):
    assert (dropout_p, window_size_left, window_size_right) == (0.0, -1, -1) and q.dtype == torch.bfloat16
    assert return_softmax_lse is True and return_dropout_randval is False and how_v3_bf16_cvt == 2
    calls.append("fmha_v3_fwd")
    o, lse = dense_attention(q, k, v, is_causal, softmax_scale)
    return o, lse, torch.empty(0), torch.empty(2, dtype=torch.int64)


def varlen_lse(lse):
    """The emulator's per-sequence LSE [B, H, D] in CK's varlen layout [H, total_q]."""
    return lse.permute(1, 0, 2).reshape(lse.shape[1], -1)


def fake_batch_prefill_func(q, k, v, cu_seqlens_q, kv_indptr, kv_page_indices, max_seqlen_q, max_seqlen_k,
                            dropout_p=0.0, softmax_scale=None, logits_soft_cap=0.0, causal=False,
                            window_size=(-1, -1), alibi_slopes=None, deterministic=False, return_lse=False,
                            return_attn_probs=False, out=None, kv_last_page_lens=None, block_table=None,
                            seqlen_k=None, q_descale=None, k_descale=None, v_descale=None, kv_block_descale=None,
                            sink_ptr=None, sink_size=0, lse_layout=varlen_lse):
    pages, lengths = sglang_pages(kv_indptr, kv_page_indices, kv_last_page_lens, k.shape[1])
    assert max_seqlen_k == max(lengths) and max_seqlen_q == int(cu_seqlens_q.diff().max()) and return_lse is True
    calls.append("mha_batch_prefill_func")
    o, lse = paged_attention(q, k, v, cu_seqlens_q, pages, lengths, causal, softmax_scale)
    return o.to(q.dtype), lse_layout(lse)


def fake_shuffle_weight(x, layout=(16, 16), use_int4=False, is_guinterleave=False, gate_up=False, pad_k_to=0):
    assert layout == (16, 16) and not use_int4
    shuffled = _moe_layout.preshuffle(x)
    shuffled.is_shuffled = True
    return shuffled


def fake_moe_sorting(topk_ids, topk_weights, num_experts, model_dim, moebuf_dtype, block_size=32,
                     expert_mask=None, num_local_tokens=None, dispatch_policy=0, return_local_topk_ids=False,
                     accumulate=True, flat=False, output_aux=False):
    """AITER's buffers in its format (slot << 24 | token, padded per expert), moe_buf zeroed."""
    calls.append(f"moe_sorting/{block_size}")
    s = _moe_layout.sort_routing(topk_ids, topk_weights, num_experts, block_size)
    out = torch.zeros((topk_ids.shape[0], model_dim), dtype=moebuf_dtype)
    return s.sorted_ids, s.sorted_weights, s.expert_ids, s.num_valid_ids, out


def fake_per_token_quant(x, scale=None, quant_dtype=torch.int8, num_rows=None, num_rows_factor=1):
    q, s = quantize_fp8(x, quant_dtype, per_row=True)
    return q, s.unsqueeze(-1)


def fake_get_hip_quant(q_type):
    return fake_per_token_quant if q_type == "per_Token" else (lambda *a, **k: (a[0], None))


def rows(sorted_token_ids, sorted_expert_ids, num_valid_ids, block, tokens):
    """(token, slot, expert) of every valid sorted row."""
    used = sorted_token_ids[: int(num_valid_ids[0])]
    token, slot = used & 0xFFFFFF, used >> 24
    expert = sorted_expert_ids.repeat_interleave(block)[: used.numel()]
    keep = token < tokens
    return token[keep].long(), slot[keep].long(), expert[keep].long()


def logical(w, scale):
    experts, n, k = w.shape
    weight = unshuffle(w, experts, n, k)
    return weight if scale is None else weight * scale


def dequant(a, scale):
    return a.float() if scale is None else a.float() * scale


def check_stage(w1, w2, block_m, quant_type, activation, scale):
    assert w1.is_shuffled and w2.is_shuffled and block_m == BLOCK_M and activation == "silu"
    assert (quant_type == "per_Token") == (scale is not None)


def fake_ck_moe_stage1(hidden_states, w1, w2, sorted_token_ids, sorted_expert_ids, num_valid_ids, out, topk,
                       block_m, a1_scale, w1_scale, kernelName="", sorted_weights=None, quant_type="No",
                       activation="gelu", splitk=1, use_non_temporal_load=False, dtype=None):
    check_stage(w1, w2, block_m, quant_type, activation, w1_scale)
    assert sorted_weights is None and splitk == 0 and dtype == out.dtype == torch.bfloat16 and kernelName == ""
    calls.append("ck_moe_stage1")
    token, slot, expert = rows(sorted_token_ids, sorted_expert_ids, num_valid_ids, block_m, hidden_states.shape[0])
    inter = out.shape[-1]
    y = torch.einsum("rh,rnh->rn", dequant(hidden_states, a1_scale)[token], logical(w1, w1_scale)[expert])
    out[token, slot] = (F.silu(y[:, :inter]) * y[:, inter:]).to(out.dtype)
    return out


def fake_ck_moe_stage2_fwd(inter_states, w1, w2, sorted_token_ids, sorted_expert_ids, num_valid_ids, out, topk,
                           kernelName="", w2_scale=None, a2_scale=None, block_m=32, sorted_weights=None,
                           quant_type="No", activation="silu", use_non_temporal_load=False):
    check_stage(w1, w2, block_m, quant_type, activation, w2_scale)
    assert inter_states.dim() == 3 and sorted_weights is not None
    calls.append("ck_moe_stage2_fwd")
    token, slot, expert = rows(sorted_token_ids, sorted_expert_ids, num_valid_ids, block_m, out.shape[0])
    act = dequant(inter_states, a2_scale)[token, slot]
    weight = sorted_weights[: int(num_valid_ids[0])][(sorted_token_ids[: int(num_valid_ids[0])] & 0xFFFFFF)
                                                     < out.shape[0]]
    y = torch.einsum("ri,rhi->rh", act, logical(w2, w2_scale)[expert]) * weight[:, None]
    out.index_add_(0, token, y.to(out.dtype))
    return out


def fake_fmoe_g1u1(out, input, gate, down, sorted_token_ids, sorted_weights, sorted_expert_ids, num_valid_ids,
                   topk, input_scale, fc1_scale, fc2_scale, kernelName="", fc2_smooth_scale=None,
                   activation="silu"):
    assert input.dtype == gate.dtype and input.element_size() == 1 and input_scale.shape == (input.shape[0], 1)
    assert fc1_scale.shape == (*gate.shape[:2], 1) and fc2_scale.shape == (*down.shape[:2], 1)
    assert kernelName == "" and fc2_smooth_scale is None and activation == "silu"
    calls.append("fmoe_g1u1")
    token, slot, expert = rows(sorted_token_ids, sorted_expert_ids, num_valid_ids, 32, out.shape[0])
    inter = down.shape[-1]
    y = torch.einsum("rh,rnh->rn", dequant(input, input_scale)[token], logical(gate, fc1_scale)[expert])
    act = F.silu(y[:, :inter]) * y[:, inter:]
    valid = (sorted_token_ids[: int(num_valid_ids[0])] & 0xFFFFFF) < out.shape[0]
    weight = sorted_weights[: int(num_valid_ids[0])][valid]
    out.index_add_(0, token, (torch.einsum("ri,rhi->rh", act, logical(down, fc2_scale)[expert])
                              * weight[:, None]).to(out.dtype))


def fake_gemm_a8w8(xq, wq, x_scale, w_scale, bias, dtype):
    assert x_scale.shape == (xq.shape[0], 1) and w_scale.shape == (wq.shape[0], 1) and bias is None
    return ((xq.float() * x_scale) @ (wq.float() * w_scale).T).to(dtype)


def fake_2stage_cfgs(token, model_dim, inter_dim, expert, topk, dtype, q_dtype_a, q_dtype_w, q_type, use_g1u1,
                     activation, doweight_stage1, hidden_pad, intermediate_pad, is_shuffled=True, gate_mode=0,
                     is_ep=False, has_stage2_bias=False, opus_weights_shuffled=None, config_file=None):
    """AITER's untuned default as docs/rocm.md reads it: fp8 per-token SiLU gate+up above 16 tokens is one stage."""
    import functools

    assert use_g1u1 is True and activation == "silu" and (hidden_pad, intermediate_pad) == (0, 0) and is_shuffled
    if q_type == "per_Token" and token > 16:
        return types.SimpleNamespace(stage1=fake_fmoe_g1u1, stage2=None, block_m=32, run_1stage=True)
    stage = functools.partial(fake_ck_moe_stage1, kernelName="")
    return types.SimpleNamespace(stage1=stage, stage2=stage, block_m=BLOCK_M, run_1stage=False)


TUNED = {}
"""The emulated tuned-GEMM table: (M, N, K, weight dtype, file) -> row."""


def fake_gemm_config(M, N, K, q_dtype_w, tuned_file=None):
    return TUNED.get((M, N, K, q_dtype_w, tuned_file))


def forbidden(*args, **kwargs):
    raise AssertionError("a dispatching wrapper was called; ck and aiter-asm call the kernels' own entry points")


@pytest.fixture
def fake_aiter(monkeypatch):
    calls.clear()
    fused_moe = types.SimpleNamespace(
        fused_topk=lambda x, logits, k, renormalize: route(logits, k), moe_sorting=fake_moe_sorting,
        get_padded_M=lambda m: m, get_block_size_M=lambda token, topk, expert, inter: BLOCK_M,
        use_nt=lambda token, topk, e: False, ck_moe_stage1=fake_ck_moe_stage1, fused_moe=forbidden,
        get_2stage_cfgs=fake_2stage_cfgs)
    aiter = types.SimpleNamespace(
        mha_fwd=fake_mha_fwd, fmha_v3_fwd=fake_fmha_v3_fwd, flash_attn_func=forbidden,
        mha_batch_prefill_func=fake_batch_prefill_func, gemm_a8w8=fake_gemm_a8w8,
        ck_moe_stage2_fwd=fake_ck_moe_stage2_fwd, fmoe_g1u1=fake_fmoe_g1u1, get_hip_quant=fake_get_hip_quant,
        QuantType=types.SimpleNamespace(No="No", per_Token="per_Token"),
        ActivationType=types.SimpleNamespace(Silu="silu"), fused_moe=fused_moe)
    gemm_op = types.SimpleNamespace(get_GEMM_config_with_quant_type=fake_gemm_config)
    for name, module in {"aiter": aiter, "aiter.fused_moe": fused_moe, "aiter.ops": types.SimpleNamespace(),
                         "aiter.ops.shuffle": types.SimpleNamespace(shuffle_weight=fake_shuffle_weight),
                         "aiter.ops.gemm_op_a8w8": gemm_op, "aiter.jit.core": types.SimpleNamespace(
                             AITER_CONFIGS=types.SimpleNamespace(AITER_CONFIG_GEMM_A8W8_FILE="a8w8_tuned_gemm.csv")),
                         "aiter.utility": types.SimpleNamespace(dtypes=types.SimpleNamespace(fp8="fp8"))}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return aiter


def test_aiter_providers_say_how_to_install_aiter(monkeypatch):
    find_spec = __import__("importlib.util").util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda n, *a: None if n == "aiter" else find_spec(n, *a))
    for name in ("ck", "aiter-asm", "aiter-triton"):
        assert _rocm.AITER_INSTALL in get_provider(name).unavailable_reason("moe", "fp8", GFX942)


def test_what_each_provider_runs_is_said_before_it_runs(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda n, *a: object())
    assert "rocblas" in get_provider("ck").unavailable_reason("gemm", "bf16", GFX942)
    asm = get_provider("aiter-asm")
    assert "bf16 only" in asm.unavailable_reason("attention", "fp16", GFX942)
    assert "fp8 only" in asm.unavailable_reason("moe", "bf16", GFX942)
    assert asm.unavailable_reason("attention", "bf16", GFX942) is None and asm.workloads == {"attention", "moe"}


CK_CASES = ([("ck", c, "bf16") for c in tiny("attention")] + [("ck", c, "bf16") for c in tiny("moe")]
            + [("ck", c, "fp8") for c in tiny("moe") if c.shape["inter"] % 32 == 0]
            + [("ck", c, "fp8") for c in tiny("gemm") if c.shape["kind"] == "gemm"]
            + [(p, c, "fp16") for p in ("ck", "ck+append") for c in tiny("diffusion_attention")]
            + [("aiter-asm", c, "bf16") for c in tiny("attention")]
            + [("aiter-asm", c, "fp8") for c in tiny("moe") if c.shape["inter"] % 32 == 0]
            + [("ck", c, dtype) for c in tiny("moe_stage") for dtype in ("bf16", "fp8")])


@pytest.mark.parametrize("provider,case,dtype", CK_CASES, ids=lambda v: getattr(v, "name", v))
def test_aiter_providers_pass_the_gate(fake_aiter, provider, case, dtype):
    verdict = run_gate(provider, case, dtype, GFX942)
    if case.workload in ("attention", "diffusion_attention"):
        assert set(verdict.errors) == {"out", "lse"}  # the LSE is checked, not dropped


@pytest.mark.parametrize("provider,kernel", [("ck", "mha_fwd"), ("aiter-asm", "fmha_v3_fwd")])
def test_dense_attention_calls_the_kernel_its_name_says(fake_aiter, provider, kernel):
    run_gate(provider, tiny("attention")[0], "bf16", GFX942)
    assert set(calls) == {kernel}


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_ck_moe_is_the_two_stage_ck_path(fake_aiter, dtype):
    case = tiny("moe")[1]
    run_gate("ck", case, dtype, GFX942)
    assert calls == [f"moe_sorting/{BLOCK_M}", "ck_moe_stage1", "ck_moe_stage2_fwd"]


def test_aiter_asm_moe_is_one_fmoe_g1u1_launch(fake_aiter):
    run_gate("aiter-asm", tiny("moe")[1], "fp8", GFX942)
    assert calls == ["moe_sorting/32", "fmoe_g1u1"]


def test_batch_prefill_lse_in_the_wrong_layout_fails_the_gate(fake_aiter, monkeypatch):
    """[total_q, H] has the right size but not CK's [H, total_q]: the gate must see it."""
    def transposed(lse):
        return lse.permute(0, 2, 1).reshape(-1, lse.shape[1])

    monkeypatch.setattr(fake_aiter, "mha_batch_prefill_func",
                        lambda *a, **k: fake_batch_prefill_func(*a, **k, lse_layout=transposed))
    case = tiny("diffusion_attention")[2]
    workload = WORKLOADS[case.workload]
    inputs = workload.make_inputs(case, "fp16", "cpu")
    verdict = check(get_provider("ck").build(case, "fp16", inputs, GFX942)(), workload.reference(case, inputs), "fp16")
    assert not verdict.passed and verdict.reason.startswith("lse") and verdict.errors["out"] < 5e-3


def test_ck_leaves_the_copy_to_torch(fake_aiter):
    with pytest.raises(NotImplementedError, match="copy"):
        run_gate("ck", WORKLOADS["gemm"].case("copy-1MiB"), "fp8", GFX942)


@pytest.fixture
def aiter_version(monkeypatch):
    from flybench.providers import base

    monkeypatch.setattr(base, "package_of", lambda module: {"package": f"dist-of-{module}", "version": "9.9"})


@pytest.mark.parametrize("provider,case,dtype,kernels", [
    ("ck", tiny("attention")[0], "bf16", ["aiter.mha_fwd"]),
    ("ck", tiny("diffusion_attention")[0], "fp16", ["aiter.mha_batch_prefill_func"]),
    ("aiter-asm", tiny("attention")[0], "bf16", ["aiter.fmha_v3_fwd"]),
    ("aiter-asm", tiny("moe")[1], "fp8", ["aiter.fused_moe.moe_sorting", "aiter.fmoe_g1u1"]),
], ids=lambda v: getattr(v, "name", v) if not isinstance(v, list) else "")
def test_each_record_names_aiters_version_and_the_entry_points_called(fake_aiter, aiter_version, provider, case,
                                                                      dtype, kernels):
    ran = get_provider(provider).implementation(case, dtype)
    assert ran["package"] == "dist-of-aiter" and ran["version"] == "9.9" and ran["kernels"] == kernels
    run_gate(provider, case, dtype, GFX942)
    assert {c.split("/")[0] for c in calls} == {k.rsplit(".", 1)[1] for k in kernels}
    if provider == "aiter-asm":
        assert "unexposed" in ran  # AITER does not say which assembly kernel (or CK fallback) ran


@pytest.mark.parametrize("dtype,quant", [("bf16", "No"), ("fp8", "per_Token")])
def test_ck_moe_records_the_block_m_the_stages_ran_with(fake_aiter, aiter_version, dtype, quant):
    case = tiny("moe")[1]
    ran = get_provider("ck").implementation(case, dtype)
    run_gate("ck", case, dtype, GFX942)
    assert calls[0] == f"moe_sorting/{ran['config']['block_m']}" and ran["config"]["block_m"] == BLOCK_M
    assert ran["config"]["quant_type"] == quant and ran["config"]["kernelName"] == ""
    assert "heuristic_dispatch" in ran["unexposed"]


def test_ck_gemm_records_aiters_tuned_row_or_its_absence(fake_aiter, aiter_version):
    case = next(c for c in tiny("gemm") if c.shape["kind"] == "gemm")
    p = case.shape
    assert "no tuned row" in get_provider("ck").implementation(case, "fp8")["config"]
    TUNED[(p["m"], p["n"], p["k"], "fp8", "a8w8_tuned_gemm.csv")] = {"kernelId": 3, "splitK": 1, "kernelName": "k3"}
    try:
        assert get_provider("ck").implementation(case, "fp8")["config"] == {"kernelId": 3, "splitK": 1,
                                                                            "kernelName": "k3"}
    finally:
        TUNED.clear()


UPSTREAM = {
    "mha_fwd": "aiter/ops/mha.py", "fmha_v3_fwd": "aiter/ops/mha.py", "mha_batch_prefill_func": "aiter/ops/mha.py",
    "gemm_a8w8": "aiter/ops/gemm_op_a8w8.py", "get_GEMM_config_with_quant_type": "aiter/ops/gemm_op_a8w8.py",
    "ck_moe_stage1": "aiter/fused_moe.py", "moe_sorting": "aiter/fused_moe.py", "fused_topk": "aiter/fused_moe.py",
    "get_block_size_M": "aiter/fused_moe.py", "use_nt": "aiter/fused_moe.py", "get_padded_M": "aiter/fused_moe.py",
    "get_2stage_cfgs": "aiter/fused_moe.py",
    "ck_moe_stage2_fwd": "aiter/ops/moe_op.py", "fmoe_g1u1": "aiter/ops/moe_op.py",
    "shuffle_weight": "aiter/ops/shuffle.py", "get_hip_quant": "aiter/ops/quant.py",
}
"""Where AITER defines each entry point the AITER providers call (as plain top-level functions)."""


def upstream_signature(root, path, name):
    """The signature of top-level function `name` in an AITER checkout's `path`, read from its source (AITER
    cannot be imported without a ROCm build)."""
    import ast
    import inspect
    from pathlib import Path

    tree = ast.parse((Path(root) / path).read_text())
    args = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name).args
    kind = inspect.Parameter
    positional = [(a, kind.POSITIONAL_ONLY) for a in args.posonlyargs] + [(a, kind.POSITIONAL_OR_KEYWORD)
                                                                          for a in args.args]
    first_default = len(positional) - len(args.defaults)
    params = [kind(a.arg, k, **({"default": None} if i >= first_default else {})) for i, (a, k) in enumerate(positional)]
    if args.vararg:
        params.append(kind(args.vararg.arg, kind.VAR_POSITIONAL))
    params += [kind(a.arg, kind.KEYWORD_ONLY, **({} if d is None else {"default": None}))
               for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        params.append(kind(args.kwarg.arg, kind.VAR_KEYWORD))
    return inspect.Signature(params)


@pytest.mark.skipif(not __import__("os").environ.get("FLYBENCH_AITER_SRC"),
                    reason="set FLYBENCH_AITER_SRC to an AITER checkout to bind against its source")
def test_every_aiter_call_binds_to_the_checkouts_signature(fake_aiter, monkeypatch):
    """Each call the ck and aiter-asm runners make, with the arguments they pass, against AITER's own source."""
    import os

    made = []
    modules = [fake_aiter, fake_aiter.fused_moe, sys.modules["aiter.ops.shuffle"], sys.modules["aiter.ops.gemm_op_a8w8"]]
    for module in modules:
        for name in UPSTREAM:
            if hasattr(module, name):
                real = getattr(module, name)
                monkeypatch.setattr(module, name, lambda *a, _n=name, _f=real, **k: made.append((_n, a, k)) or _f(*a, **k))
    for provider, case, dtype in CK_CASES:
        run_gate(provider, case, dtype, GFX942)
        get_provider(provider).implementation(case, dtype)
    assert {name for name, *_ in made} == set(UPSTREAM)
    for name, args, kwargs in made:
        upstream_signature(os.environ["FLYBENCH_AITER_SRC"], UPSTREAM[name], name).bind(*args, **kwargs)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("case", tiny("moe_stage"), ids=lambda c: c.name)
def test_ck_moe_stage_is_one_ck_stage_over_routing_sorted_outside_the_call(fake_aiter, case, dtype):
    from flybench.measure.correctness import check

    workload = WORKLOADS["moe_stage"]
    inputs = workload.make_inputs(case, dtype, "cpu")
    runner = get_provider("ck").build(case, dtype, inputs, GFX942)
    for _ in range(2):  # stage 2 accumulates: its output must be zeroed by every call
        verdict = check(runner(), workload.reference(case, inputs), dtype)
        assert verdict.passed, verdict.reason
    kernel = "ck_moe_stage1" if case.shape["stage"] == 1 else "ck_moe_stage2_fwd"
    assert calls == [f"moe_sorting/{BLOCK_M}", kernel, kernel]
    assert get_provider("ck").implementation(case, dtype)["kernels"][-1].endswith(kernel)


def test_ck_says_why_it_has_no_quantised_weight_moe(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda n, *a: object())
    ck = get_provider("ck")
    assert "aiter.ops.flydsl.moe_kernels" in ck.unavailable_reason("moe_stage", "int4_bf16", GFX942)
    assert "opus" in ck.unavailable_reason("moe_stage", "a8w4", GFX942)
    assert ck.unavailable_reason("moe_stage", "fp8", GFX942) is None


def test_moe_records_say_what_aiters_own_fused_moe_would_have_run(fake_aiter, aiter_version):
    """ck runs the CK stages where AITER's fused_moe would take its assembly kernel: the record shows both."""
    moe = tiny("moe")
    big = next(c for c in moe if c.shape["tokens"] > 16 and c.shape["inter"] % 32 == 0)
    small = next(c for c in moe if c.shape["tokens"] <= 16)
    ran = get_provider("ck").implementation(big, "fp8")
    assert ran["kernels"][1:] == ["aiter.fused_moe.ck_moe_stage1", "aiter.ck_moe_stage2_fwd"]
    assert ran["aiter_fused_moe_would_run"] == {"run_1stage": True, "block_m": 32, "stage1": "fake_fmoe_g1u1",
                                                "stage2": None}
    assert get_provider("ck").implementation(small, "fp8")["aiter_fused_moe_would_run"]["stage1"] == (
        "fake_ck_moe_stage1(kernelName='')")
    assert get_provider("aiter-asm").implementation(big, "fp8")["aiter_fused_moe_would_run"]["run_1stage"] is True
