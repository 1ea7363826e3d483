"""flydsl on a CPU, and what the ROCm providers share: availability, layouts, the draft append, arguments.

No AMD GPU is reachable, so each kernel is replaced by a torch emulator of what
its upstream documentation and tests say it computes, reading exactly the
arguments the provider passes. The real runners (routing, sorting, preshuffle,
page tables, argument tuples) then run end to end and go through the
correctness gate against the workload's float32 reference.
"""

from __future__ import annotations

import inspect
import os
import sys
import types

import pytest
import torch
import torch.nn.functional as F

from flybench import envvars
from flybench import hardware
from flybench.hardware import Device
from flybench.measure.correctness import check
from flybench.providers import _moe_layout, _paged_append, _rocm, flydsl, get_provider
from flybench.workloads import WORKLOADS
from flybench.workloads.attention import attend
from flybench.workloads.base import Case
from flybench.workloads.moe import route, sort_by_expert

CPU = Device("cpu", "cpu", "test cpu", "cpu", "", "cpu")
ROCM = {a: Device("rocm", a, n, a, "hip 6.4", "cuda") for a, n in (("gfx942", "AMD Instinct MI300X"),
                                                                  ("gfx950", "AMD Instinct MI355X"))}
DIFFUSION = WORKLOADS["diffusion_attention"]
P64 = DIFFUSION.case("tiny-gqa7-b3-ctx150-d16-p64-bidir")
P64_CAUSAL = Case("diffusion_attention", "p64-causal", {**P64.shape, "mask": "causal", "context_lens": (64, 1, 130)})


def tiny(workload: str) -> list[Case]:
    return WORKLOADS[workload].cases("tiny")


# ---------------------------------------------------------------- availability


@pytest.mark.parametrize("name", ["flydsl", "flydsl+append", "ck", "ck+append", "aiter-asm", "aiter-triton"])
def test_rocm_providers_say_they_need_a_rocm_gpu(name):
    for workload in get_provider(name).workloads:
        reason = get_provider(name).unavailable_reason(workload, "bf16", CPU)
        assert "ROCm GPU" in reason and "this machine has cpu" in reason


def test_flydsl_asks_for_a_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv(envvars.FLYDSL_SRC, raising=False)
    assert envvars.FLYDSL_SRC in get_provider("flydsl").unavailable_reason("attention", "bf16", ROCM["gfx942"])
    monkeypatch.setenv(envvars.FLYDSL_SRC, str(tmp_path))
    assert "is not a FlyDSL checkout" in get_provider("flydsl").unavailable_reason("attention", "bf16", ROCM["gfx950"])


@pytest.mark.parametrize("importable", [True, False])
def test_flydsl_with_a_checkout_depends_on_the_flydsl_package(monkeypatch, tmp_path, importable):
    (tmp_path / "kernels" / "attention").mkdir(parents=True)
    (tmp_path / "kernels" / "attention" / "flash_attn_interface.py").write_text("")
    monkeypatch.setenv(envvars.FLYDSL_SRC, str(tmp_path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    find_spec = __import__("importlib.util").util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda n, *a: (find_spec("os") if importable else None)
                        if n == "flydsl" else find_spec(n, *a))
    provider = get_provider("flydsl")
    reason = provider.unavailable_reason("attention", "bf16", ROCM["gfx942"])
    assert reason is None if importable else "flydsl is not installed" in reason
    if importable:
        assert "gfx950" in provider.unavailable_reason("moe", "bf16", ROCM["gfx942"])
        assert provider.unavailable_reason("moe", "bf16", ROCM["gfx950"]) is None
        assert provider.unavailable_reason("moe", "fp8", ROCM["gfx942"]) is None
        assert str(tmp_path) in sys.path  # the checkout's kernels/ become importable


@pytest.mark.parametrize("arch,name,fp8", [("gfx942", "AMD Instinct MI300X", torch.float8_e4m3fnuz),
                                           ("gfx950", "AMD Instinct MI355X", torch.float8_e4m3fn)])
def test_detect_rocm_from_faked_device_properties(monkeypatch, arch, name, fp8):
    from flybench.workloads.dtypes import device_dtype

    props = types.SimpleNamespace(gcnArchName=f"{arch}:sramecc+:xnack-", name=name)
    monkeypatch.delenv(envvars.DEVICE, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    hardware.detect.cache_clear()
    try:
        device = hardware.detect()
        assert (device.kind, device.arch, device.torch_device) == ("rocm", arch, "cuda")
        assert device.peak.llc_bytes == 256 << 20 and device_dtype("fp8", "cuda") == fp8
        assert get_provider("ck").unavailable_reason("attention", "bf16", device) in (None, _rocm.module_reason(
            "aiter", _rocm.AITER_INSTALL))
    finally:
        hardware.detect.cache_clear()


# ---------------------------------------------------------------- paged attention emulator and the draft append


def paged_attention(q, k_cache, v_cache, cu_q, pages, kv_lens, causal, scale):
    """Varlen attention reading K/V through per-sequence page lists; causal is bottom-right aligned."""
    outs, lses = [], []
    for b, (seq_pages, n) in enumerate(zip(pages, kv_lens)):
        qb = q[int(cu_q[b]):int(cu_q[b + 1])]
        k = k_cache[seq_pages].reshape(-1, *k_cache.shape[2:])[:n]
        v = v_cache[seq_pages].reshape(-1, *v_cache.shape[2:])[:n]
        sq = qb.shape[0]
        mask = torch.arange(n)[None, :] <= torch.arange(sq)[:, None] + n - sq if causal else None
        out, lse = attend(qb, k, v, scale, mask)
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs), torch.stack(lses)


def dense_attention(q, k, v, causal, scale):
    """BSHD attention (sequences as single pages of the paged emulator): out in q's type, lse [B, H, S]."""
    b, s = q.shape[:2]
    out, lse = paged_attention(q.reshape(b * s, *q.shape[2:]), k, v, torch.arange(b + 1) * s,
                               [[i] for i in range(b)], [s] * b, causal, scale)
    return out.view(q.shape).to(q.dtype), lse


def vllm_pages(block_table, seqlen_k, page):
    return [block_table[b, : -(-int(n) // page)].long() for b, n in enumerate(seqlen_k)]


def sglang_pages(kv_indptr, page_indices, last_page_lens, page):
    pages = [page_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long() for b in range(len(kv_indptr) - 1)]
    return pages, [(len(p) - 1) * page + int(n) for p, n in zip(pages, last_page_lens)]


def err(out, ref):
    return float((out.double() - ref.double()).norm() / ref.double().norm())


@pytest.mark.parametrize("case", tiny("diffusion_attention") + [P64_CAUSAL], ids=lambda c: c.name)
def test_attention_over_the_appended_pages_is_the_workload_reference(case):
    inputs = DIFFUSION.make_inputs(case, "bf16", "cpu")
    before = {n: inputs[n].clone() for n in ("k_cache", "v_cache")}
    ref = DIFFUSION.reference(case, inputs)
    cache = _paged_append.build(inputs)
    cache.append(inputs["k_draft"], inputs["v_draft"])
    kept = torch.ones(cache.k_cache.shape[0] * cache.page_size, dtype=torch.bool)
    kept[cache.slots] = False  # the draft only fills free page tails and new pages; the inputs stay untouched
    old = before["k_cache"].numel() // before["k_cache"][0, 0].numel()
    assert torch.equal(cache.k_cache.flatten(0, 1)[:old][kept[:old]], before["k_cache"].flatten(0, 1)[kept[:old]])
    assert torch.equal(inputs["k_cache"], before["k_cache"]) and torch.equal(inputs["v_cache"], before["v_cache"])
    assert cache.slots.unique().numel() == cache.slots.numel() == case.shape["batch"] * case.shape["draft"]
    vllm = vllm_pages(cache.block_table, cache.seqlen_k, cache.page_size)
    sglang, lengths = sglang_pages(cache.kv_indptr, cache.page_indices, cache.last_page_lens, cache.page_size)
    assert all(torch.equal(a, b) for a, b in zip(vllm, sglang)) and lengths == cache.seqlen_k.tolist()
    assert torch.cat(vllm).unique().numel() == sum(len(p) for p in vllm)  # no page shared by two sequences
    assert cache.cu_seqlens_kv.diff().tolist() == cache.seqlen_k.tolist() and cache.max_seqlen_q == case.shape["draft"]
    assert all(t.dtype == torch.int32 for t in (cache.block_table, cache.seqlen_k, cache.kv_indptr,
                                                 cache.page_indices, cache.last_page_lens, cache.cu_seqlens_q))
    out, lse = paged_attention(_paged_append.packed_queries(inputs), cache.k_cache, cache.v_cache, cache.cu_seqlens_q,
                               vllm, lengths, case.shape["mask"] == "causal", case.shape["scale"])
    unpacked = _paged_append.unpack({"out": out, "lse": lse.permute(1, 0, 2).reshape(lse.shape[1], -1)}, inputs)
    assert err(unpacked["out"], ref["out"]) < 1e-5 and err(unpacked["lse"], ref["lse"]) < 1e-5


# ---------------------------------------------------------------- flydsl, kernels emulated


def fake_flydsl_attention(q, k, v, *, causal=True, num_kv_heads=None, cu_seqlens_q=None, cu_seqlens_kv=None,
                          max_seqlen_q=None, max_seqlen_kv=None, cross_seqlen=None, block_table=None, seqlen_k=None,
                          kv_cache_layout="linear", out=None, return_lse=False):
    scale = q.shape[-1] ** -0.5
    assert num_kv_heads == k.shape[-2] and out.shape == q.shape and out.dtype == q.dtype
    if block_table is None:
        result, lse = dense_attention(q, k, v, causal, scale)
        out.copy_(result)
        return (out, lse) if return_lse else out
    assert (cross_seqlen, kv_cache_layout, k.shape[1], return_lse) == (True, "linear", flydsl.PAGE_SIZE, False)
    assert max_seqlen_kv == int(seqlen_k.max()) and max_seqlen_q == int(cu_seqlens_q.diff().max())
    pages = vllm_pages(block_table, seqlen_k, k.shape[1])
    out.copy_(paged_attention(q, k, v, cu_seqlens_q, pages, cu_seqlens_kv.diff().tolist(), causal, scale)[0])
    return out


def unshuffle(w, experts, n, k):
    """The logical [E, N, K] weight, read through the kernels' preshuffled address formula."""
    vec = 16 // w.element_size()
    nn, kk = torch.meshgrid(torch.arange(n), torch.arange(k), indexing="ij")
    offset = _moe_layout.preshuffled_offset(nn, kk, k, vec)
    return w.reshape(experts, n * k).float()[:, offset.reshape(-1)].view(experts, n, k)


def fake_stage(stage, experts, topk, tile_m, **_):
    """moe_gemm1/moe_gemm2 as their upstream torch references compute them, from the launch tuple."""
    def launch(out, x, w, x_scale, w_scale, ids, expert_ids, sorted_w, valid, tokens, n, k, blocks, stream):
        assert x.dim() == w.dim() == 1 and x.dtype == w.dtype and x.element_size() == 1 and stream == "stream"
        assert ids.dtype == expert_ids.dtype == valid.dtype == torch.int32 and blocks == expert_ids.numel()
        rows_n = 2 * n if stage == 1 else n
        weight = unshuffle(w, experts, rows_n, k) * w_scale.view(experts, rows_n, 1)
        used = ids[: int(valid)]
        token, slot = used & 0xFFFFFF, used >> 24
        keep = token < tokens
        expert = expert_ids.repeat_interleave(tile_m)[: used.numel()][keep].long()
        token, slot = token[keep].long(), slot[keep].long()
        row = token if stage == 1 else token * topk + slot
        act = x.view(-1, k)[row].float() * x_scale[row, None]
        y = torch.einsum("rk,rnk->rn", act, weight[expert])
        if stage == 1:
            out[token, slot] = (F.silu(y[:, :n]) * y[:, n:]).to(out.dtype)
        else:
            out.index_add_(0, token, (y * sorted_w[: used.numel()][keep, None]).to(out.dtype))
    return launch


@pytest.fixture
def fake_flydsl(monkeypatch):
    kernels = types.SimpleNamespace(
        flydsl_flash_attn_func=fake_flydsl_attention,
        compile_moe_gemm1=lambda **kw: fake_stage(1, **kw), compile_moe_gemm2=lambda **kw: fake_stage(2, **kw))
    monkeypatch.setattr(flydsl, "import_kernel", lambda module: kernels)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: "stream")
    monkeypatch.setenv("FLYDSL_GPU_ARCH", "gfx950")
    return kernels


def run_gate(provider, case, dtype, device=ROCM["gfx950"]):
    workload = WORKLOADS[case.workload]
    inputs = workload.make_inputs(case, dtype, "cpu")
    runner = get_provider(provider).build(case, dtype, inputs, device)
    verdict = check(runner(), workload.reference(case, inputs), dtype)
    assert verdict.passed, verdict.reason
    return verdict


@pytest.mark.parametrize("provider", ["flydsl", "flydsl+append"])
@pytest.mark.parametrize("case", [P64, P64_CAUSAL], ids=lambda c: c.name)
def test_flydsl_paged_diffusion_passes_the_gate(fake_flydsl, monkeypatch, provider, case):
    appends = []
    real_append = _paged_append.AppendedCache.append
    monkeypatch.setattr(_paged_append.AppendedCache, "append",
                        lambda s, k, v: appends.append(1) or real_append(s, k, v))
    inputs = DIFFUSION.make_inputs(case, "bf16", "cpu")
    runner = get_provider(provider).build(case, "bf16", inputs, ROCM["gfx950"])
    for _ in range(3):
        assert check(runner(), DIFFUSION.reference(case, inputs), "bf16").passed
    assert len(appends) == (3 if provider == "flydsl+append" else 1)


def test_flydsl_refuses_page_size_16(fake_flydsl):
    with pytest.raises(NotImplementedError, match="page size 64"):
        run_gate("flydsl", tiny("diffusion_attention")[0], "bf16")


@pytest.mark.parametrize("case", tiny("attention"), ids=lambda c: c.name)
def test_flydsl_attention_passes_the_gate_with_lse(fake_flydsl, case):
    assert set(run_gate("flydsl", case, "fp16").errors) == {"out", "lse"}


@pytest.mark.parametrize("case", [c for c in tiny("moe") if c.shape["inter"] % 32 == 0], ids=lambda c: c.name)
def test_flydsl_moe_stages_pass_the_gate(fake_flydsl, case):
    run_gate("flydsl", case, "fp8")


def test_moe_sorting_matches_the_workload_grouping():
    weights, ids = route(torch.randn(33, 16), 4)
    for block in (16, 64):
        got = _moe_layout.sort_routing(ids, weights, 16, block)
        want, experts, total = sort_by_expert(ids, 16, block)
        assert int(got.num_valid_ids) == int(total)
        assert got.sorted_ids.numel() == _moe_layout.capacity(33, 4, 16, block)[0]
        packed = got.sorted_ids[: int(total)]
        flat = torch.where((packed & 0xFFFFFF) < 33, (packed & 0xFFFFFF) * 4 + (packed >> 24), 33 * 4)
        assert torch.equal(flat, want) and torch.equal(got.expert_ids[: experts.numel()], experts)
        assert (got.expert_ids[experts.numel():] == -1).all() and (got.sorted_ids[int(total):] == (4 << 24 | 33)).all()
        real = want < 33 * 4
        assert torch.equal(got.sorted_weights[: int(total)][real], weights.reshape(-1)[want[real].long()])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fnuz])
def test_preshuffle_puts_each_element_where_the_kernel_reads_it(dtype):
    w = torch.randn(3, 32, 64).to(dtype)
    assert torch.equal(unshuffle(_moe_layout.preshuffle(w), 3, 32, 64), w.float())
    with pytest.raises(ValueError, match="N % 16"):
        _moe_layout.preshuffle(w[:, :8])


def test_flat_operand_splits_what_overflows_int32():
    assert flydsl.flat_operand(torch.empty(2, 3)).shape == (6,)
    assert flydsl.flat_operand(torch.empty(2**31 + 8192, dtype=torch.int8, device="meta")).shape == (262145, 8192)


@pytest.mark.skipif(not os.environ.get(envvars.FLYDSL_SRC), reason="set FLYBENCH_FLYDSL_SRC to bind against upstream")
def test_arguments_bind_to_the_checkouts_signatures():
    upstream = flydsl.import_kernel("kernels.attention.flash_attn_interface").flydsl_flash_attn_func
    moe = flydsl.import_kernel("kernels.moe.moe_gemm_2stage")
    inputs = DIFFUSION.make_inputs(P64, "bf16", "cpu")
    cache = _paged_append.build(inputs)
    inspect.signature(upstream).bind(inputs["q"], cache.k_cache, cache.v_cache,
                                     **flydsl.paged_call(P64, inputs, cache, inputs["q"]))
    case = tiny("attention")[0]
    args, kwargs = flydsl.attention_call(case, WORKLOADS["attention"].make_inputs(case, "bf16", "cpu"))
    inspect.signature(upstream).bind(*args, **kwargs)
    host = flydsl.import_a16wmix_host()
    moe_case = Case("moe", "a16w16", {"tokens": 5, "hidden": 256, "inter": 256, "experts": 4, "top_k": 2})
    routing = _moe_layout.sort_routing(torch.zeros(5, 2, dtype=torch.int32), torch.ones(5, 2), 4, 32)
    empty = torch.empty(0)
    for dtype in ("bf16", "int4_bf16"):
        for stage, call in ((1, host.flydsl_a16w4_gemm1), (2, host.flydsl_a16w4_gemm2)):
            kwargs = flydsl.a16wmix_call(stage, moe_case, dtype, routing, empty, empty, torch.empty(8, 256), empty)
            inspect.signature(call).bind(**kwargs)
    for stage, extra in ((moe.compile_moe_gemm1, {"doweight_stage1": False}),
                         (moe.compile_moe_gemm2, {"doweight_stage2": True, "accumulate": True})):
        inspect.signature(stage).bind(model_dim=1, inter_dim=1, experts=1, topk=1, tile_m=16, tile_n=128, tile_k=128,
                                      out_dtype="bf16", in_dtype="fp8", **extra)


def test_flydsl_records_its_checkout_and_the_tiles_it_launched(fake_flydsl, monkeypatch, tmp_path):
    """The record says which checkout the kernels came from and the tile_m the stages were compiled with."""
    compiled = []
    monkeypatch.setattr(fake_flydsl, "compile_moe_gemm1", lambda **kw: compiled.append(kw) or fake_stage(1, **kw))
    monkeypatch.setenv("FLYBENCH_FLYDSL_SRC", str(tmp_path))
    case = next(c for c in tiny("moe") if c.shape["inter"] % 32 == 0)
    run_gate("flydsl", case, "fp8")
    ran = get_provider("flydsl").implementation(case, "fp8")
    assert ran["checkout"] == str(tmp_path.resolve()) and ran["config"]["tile_m"] == compiled[0]["tile_m"]
    assert ran["kernels"][0].endswith("compile_moe_gemm1")
    bf16 = get_provider("flydsl").implementation(case, "bf16")
    assert bf16["config"]["w_dtype"] == "bf16" and bf16["kernels"][0].endswith(":flydsl_a16w4_gemm1")


@pytest.mark.parametrize("case", [c for c in tiny("moe_stage") if c.shape["inter"] % 32 == 0], ids=lambda c: c.name)
def test_flydsl_fp8_stage_runs_one_moe_gemm_2stage_kernel(fake_flydsl, monkeypatch, case):
    """One stage compiled and launched, over routing sorted and activations quantised outside the timed call."""
    compiled, sorts = [], []
    for stage in (1, 2):
        monkeypatch.setattr(fake_flydsl, f"compile_moe_gemm{stage}",
                            lambda s=stage, **kw: compiled.append(s) or fake_stage(s, **kw))
    real_sort = _moe_layout.sort_routing
    monkeypatch.setattr(_moe_layout, "sort_routing", lambda *a: sorts.append(1) or real_sort(*a))
    workload = WORKLOADS["moe_stage"]
    inputs = workload.make_inputs(case, "fp8", "cpu")
    runner = get_provider("flydsl").build(case, "fp8", inputs, ROCM["gfx950"])
    for _ in range(2):
        assert check(runner(), workload.reference(case, inputs), "fp8").passed
    assert compiled == [case.shape["stage"]] and sorts == [1]
