"""Workload catalogs, inputs, counts and float32 references, checked against independent math."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from flybench.errors import FlybenchError
from flybench.workloads import SHAPE_SETS, WORKLOADS, Case, get_workload
from flybench.workloads.moe import route, sort_by_expert

TINY = [(w, c) for w in WORKLOADS.values() for c in w.cases("tiny")]
TINY_IDS = [f"{w.name}:{c.name}" for w, c in TINY]


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-5) -> None:
    """Relative Frobenius error below `tol` (float32 math done two ways)."""
    assert actual.shape == expected.shape
    err = (actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)
    assert err < tol, f"relative error {err:.3g}"


def test_catalog_lists_without_torch() -> None:
    code = (
        "import sys, flybench.workloads as w\n"
        "for wl in w.WORKLOADS.values():\n"
        "    for s in w.SHAPE_SETS:\n"
        "        for c in wl.cases(s):\n"
        "            [wl.flops(c), *(wl.min_bytes(c, d) for d in wl.dtypes)]\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("workload", list(WORKLOADS.values()), ids=list(WORKLOADS))
def test_catalog_names(workload) -> None:
    assert set(workload.catalog()) == set(SHAPE_SETS)
    by_name: dict[str, Case] = {}
    for shape_set in SHAPE_SETS:
        cases = workload.cases(shape_set)
        assert cases, shape_set
        names = [c.name for c in cases]
        assert len(names) == len(set(names)), f"duplicate names in {shape_set}"
        for case in cases:
            assert re.fullmatch(r"[A-Za-z0-9_.-]+", case.name), case.name
            assert case.workload == workload.name and case.model
            # a name means one problem, whichever set lists it
            assert by_name.setdefault(case.name, case) == case and by_name[case.name].shape == case.shape
            assert workload.flops(case) >= 0 and workload.min_bytes(case, workload.dtypes[0]) > 0
    full = {c.name for c in workload.cases("full")}
    assert {c.name for c in workload.cases("quick")} <= full
    assert 3 <= len(workload.cases("quick")) <= 8


@pytest.mark.parametrize(("workload", "case"), TINY, ids=TINY_IDS)
def test_tiny_inputs_and_reference(workload, case) -> None:
    for dtype in workload.dtypes:
        inputs = workload.make_inputs(case, dtype, "cpu", seed=1)
        for name, t in inputs.items():
            assert t.device.type == "cpu"
            if t.is_floating_point() and t.numel() > 1:
                assert t.float().abs().amax() > 0 and t.float().std() > 0, name
        again = workload.make_inputs(case, dtype, "cpu", seed=1)
        other = workload.make_inputs(case, dtype, "cpu", seed=2)
        assert all(torch.equal(inputs[k].float(), again[k].float()) for k in inputs)
        drawn = [k for k in inputs if inputs[k].is_floating_point()] or list(inputs)  # the model lane's are token ids
        assert any(not torch.equal(inputs[k].float(), other[k].float()) for k in drawn)
        result = workload.reference(case, inputs)
        assert "out" in result
        for t in result.values():
            assert t.dtype == torch.float32 and torch.isfinite(t).all()
        if workload.name in ("attention", "diffusion_attention"):
            assert "lse" in result


def test_tiny_dtypes() -> None:
    att, moe, gemm = get_workload("attention"), get_workload("moe"), get_workload("gemm")
    assert att.make_inputs(att.cases("tiny")[0], "fp16", "cpu")["q"].dtype == torch.float16
    fp8 = moe.make_inputs(moe.cases("tiny")[0], "fp8", "cpu")
    assert fp8["w13"].dtype == torch.float8_e4m3fn and fp8["x"].dtype == torch.bfloat16
    assert fp8["w13_scale"].shape == fp8["w13"].shape[:2] and fp8["w2_scale"].shape == fp8["w2"].shape[:2]
    g = gemm.make_inputs(gemm.case("64x48x32"), "fp8", "cpu")
    assert g["a"].dtype == torch.float8_e4m3fn and g["a_scale"].dim() == 0
    copy = gemm.case("copy-1MiB")
    assert gemm.make_inputs(copy, "bf16", "cpu")["src"].numel() * 2 == copy.shape["bytes"]


def _dense_diffusion(case: Case, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous K/V from the pages, a full mask, repeat_interleave GQA, explicit softmax."""
    p = case.shape
    outs, lses = [], []
    for i, length in enumerate(p["context_lens"]):
        pages = inputs["block_table"][i].long()
        k = torch.cat([inputs["k_cache"][pages].flatten(0, 1)[:length], inputs["k_draft"][i]]).float()
        v = torch.cat([inputs["v_cache"][pages].flatten(0, 1)[:length], inputs["v_draft"][i]]).float()
        group = p["q_heads"] // p["kv_heads"]
        k, v = k.repeat_interleave(group, dim=1).transpose(0, 1), v.repeat_interleave(group, dim=1).transpose(0, 1)
        q = inputs["q"][i].float().transpose(0, 1)  # [H, D, hd]
        d = p["draft"]
        mask = torch.ones(d, length + d, dtype=torch.bool)
        if p["mask"] == "causal":
            mask[:, length:] = torch.ones(d, d).tril().bool()
        scores = (q @ k.transpose(1, 2) * p["scale"]).masked_fill(~mask, float("-inf"))
        sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=p["scale"])
        close(sdpa, scores.softmax(-1) @ v)
        outs.append(sdpa.transpose(0, 1))
        lses.append(torch.logsumexp(scores, dim=-1))
    return torch.stack(outs), torch.stack(lses)


@pytest.mark.parametrize("case", get_workload("diffusion_attention").cases("tiny"), ids=lambda c: c.name)
def test_diffusion_reference_matches_dense(case) -> None:
    workload = get_workload("diffusion_attention")
    inputs = workload.make_inputs(case, "bf16", "cpu")
    result = workload.reference(case, inputs)
    out, lse = _dense_diffusion(case, inputs)
    close(result["out"], out)
    close(result["lse"], lse)


def test_diffusion_tiny_covers_structure() -> None:
    cases = get_workload("diffusion_attention").cases("tiny")
    assert {c.shape["mask"] for c in cases} == {"bidirectional", "causal"}
    assert any(c.shape["q_heads"] > c.shape["kv_heads"] > 0 for c in cases)
    assert {c.shape["page_size"] for c in cases} == {16, 64}
    assert any(len(set(c.shape["context_lens"])) > 1 for c in cases)
    case = cases[0]
    table = get_workload("diffusion_attention").make_inputs(case, "bf16", "cpu")["block_table"]
    pages = [table[i, : -(-n // 16)].tolist() for i, n in enumerate(case.shape["context_lens"])]
    flat = sum(pages, [])
    assert sorted(flat) == list(range(len(flat))) and flat != sorted(flat)  # every page once, shuffled


@pytest.mark.parametrize("case", get_workload("attention").cases("tiny"), ids=lambda c: c.name)
def test_attention_reference_matches_sdpa(case) -> None:
    workload = get_workload("attention")
    inputs = workload.make_inputs(case, "bf16", "cpu")
    result = workload.reference(case, inputs)
    p = case.shape
    q, k, v = (inputs[n].float().transpose(1, 2) for n in ("q", "k", "v"))  # BHSD
    group = p["heads"] // p["kv_heads"]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=p["causal"], scale=p["scale"])
    close(result["out"], expected.transpose(1, 2))
    scores = q @ k.transpose(-1, -2) * p["scale"]
    if p["causal"]:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    close(result["lse"], torch.logsumexp(scores, dim=-1))


def test_attention_reference_chunks(monkeypatch) -> None:
    """Query chunking (used for 8k-token cases) gives the unchunked answer."""
    import flybench.workloads.attention as attention

    workload = get_workload("attention")
    case = workload.case("B2S64H4Hkv2D128_causal")
    inputs = workload.make_inputs(case, "bf16", "cpu")
    whole = workload.reference(case, inputs)
    monkeypatch.setattr(attention, "_SCORE_BUDGET", 4 * 64 * 5)  # 5 query rows per chunk
    chunked = workload.reference(case, inputs)
    close(chunked["out"], whole["out"], 1e-6)
    close(chunked["lse"], whole["lse"], 1e-6)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("case", get_workload("moe").cases("tiny"), ids=lambda c: c.name)
def test_moe_reference_matches_token_loop(case, dtype) -> None:
    workload = get_workload("moe")
    inputs = workload.make_inputs(case, dtype, "cpu")
    p = case.shape
    w13, w2 = inputs["w13"].float(), inputs["w2"].float()
    if dtype == "fp8":
        w13, w2 = w13 * inputs["w13_scale"][..., None], w2 * inputs["w2_scale"][..., None]
    expected = torch.zeros(p["tokens"], p["hidden"])
    for t in range(p["tokens"]):
        probs = inputs["router_logits"][t].softmax(-1)
        top = probs.topk(p["top_k"])
        for weight, e in zip((top.values / top.values.sum()).tolist(), top.indices.tolist()):
            gate_up = w13[e] @ inputs["x"][t].float()
            act = F.silu(gate_up[: p["inter"]]) * gate_up[p["inter"] :]
            expected[t] += weight * (w2[e] @ act)
    close(workload.reference(case, inputs)["out"], expected)


def test_route() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, -1.0, 4.0, 0.0]])
    weights, ids = route(logits, 2)
    assert ids.dtype == torch.int32 and ids.tolist() == [[1, 3], [0, 2]]
    close(weights, torch.tensor([[3.0, 2.0], [5.0, 4.0]]).softmax(-1), 1e-6)
    assert torch.allclose(route(torch.randn(9, 16), 4)[0].sum(-1), torch.ones(9))


@pytest.mark.parametrize(
    ("tokens", "experts", "top_k", "block"), [(1, 8, 2, 16), (33, 16, 4, 4), (40, 4, 2, 1), (7, 256, 8, 64)]
)
def test_sort_by_expert(tokens, experts, top_k, block) -> None:
    ids = route(torch.randn(tokens, experts, generator=torch.Generator().manual_seed(tokens)), top_k)[1]
    sorted_ids, block_experts, post_padded = sort_by_expert(ids, experts, block)
    sentinel = tokens * top_k
    assert sorted_ids.dtype == block_experts.dtype == post_padded.dtype == torch.int32
    assert post_padded.tolist() == [sorted_ids.numel()] and sorted_ids.numel() % block == 0
    assert block_experts.numel() == sorted_ids.numel() // block
    real = sorted_ids[sorted_ids != sentinel]
    assert sorted(real.tolist()) == list(range(sentinel))  # every (token, k) pair exactly once
    flat = ids.flatten()
    for b, e in enumerate(block_experts.tolist()):
        chunk = sorted_ids[b * block : (b + 1) * block]
        pairs = chunk[chunk != sentinel].long()
        assert pairs.numel() > 0 and (flat[pairs] == e).all()  # one expert per block, no empty block
    counts = torch.bincount(flat.long(), minlength=experts)
    assert block_experts.tolist() == sorted(block_experts.tolist())
    assert sorted_ids.numel() == int(((counts + block - 1) // block * block).sum())  # minimal padding


def test_counts_hand_computed() -> None:
    att = get_workload("attention")
    shape = {"batch": 2, "seq": 4, "heads": 2, "kv_heads": 1, "head_dim": 8, "causal": True, "scale": 1.0}
    case = Case("attention", "x", shape)
    assert att.flops(case) == 4 * 2 * 2 * 10 * 8  # 10 of 16 scores visible
    assert att.flops(Case("attention", "x", {**case.shape, "causal": False})) == 4 * 2 * 2 * 16 * 8
    assert att.min_bytes(case, "bf16") == 2 * (2 * 4 * 2 * 8 * 2 + 2 * 4 * 1 * 8 * 2)

    dif = get_workload("diffusion_attention")
    shape = {"batch": 2, "q_heads": 4, "kv_heads": 2, "head_dim": 8, "draft": 3, "page_size": 4,
             "context_lens": (5, 8), "mask": "causal", "scale": 1.0}
    case = Case("diffusion_attention", "x", shape)
    assert dif.flops(case) == 4 * 4 * 8 * (3 * 13 + 2 * 6)  # prefix 3x(5+8), draft 6 visible each
    assert dif.flops(Case("diffusion_attention", "x", {**shape, "mask": "bidirectional"})) == 4 * 4 * 8 * (39 + 18)
    q_out = 2 * 2 * 3 * 4 * 8  # q read + out written, elements
    kv = 2 * (13 + 2 * 3) * 2 * 8
    assert dif.min_bytes(case, "fp16") == 2 * (q_out + kv) + 4 * (2 + 2 + 2)  # 4 pages + 2 lengths

    moe = get_workload("moe")
    case = Case("moe", "x", {"tokens": 2, "hidden": 8, "inter": 4, "experts": 8, "top_k": 2})
    assert moe.flops(case) == 4 * (2 * 8 * 8 + 2 * 8 * 4)  # 4 rows: gate+up 2*(2I*H), down 2*(H*I)
    touched = 8 * (1 - (6 / 8) ** 2)  # 3.5 of 8 experts expected for 2 tokens choosing 2 each
    assert moe.min_bytes(case, "bf16") == pytest.approx(2 * 2 * 8 * 2 + 2 * 8 * 4 + touched * 3 * 8 * 4 * 2)
    assert moe.min_bytes(case, "fp8") == pytest.approx(2 * 2 * 8 * 2 + 2 * 8 * 4 + touched * (3 * 8 * 4 + (8 + 8) * 4))
    big = Case("moe", "x", {**case.shape, "tokens": 100})
    assert moe.min_bytes(big, "bf16") == pytest.approx(100 * 8 * 2 * 2 + 100 * 8 * 4 + 8 * 3 * 8 * 4 * 2)  # all 8

    gemm = get_workload("gemm")
    assert gemm.flops(gemm.case("64x48x32")) == 2 * 64 * 48 * 32
    assert gemm.min_bytes(gemm.case("64x48x32"), "fp8") == (64 + 48) * 32 + 2 * 64 * 48 + 8
    assert gemm.flops(gemm.case("copy-1MiB")) == 0 and gemm.min_bytes(gemm.case("copy-1MiB"), "bf16") == 2 << 20


def test_gemm_reference() -> None:
    gemm = get_workload("gemm")
    case = gemm.case("96x80x128")
    for dtype in gemm.dtypes:
        inputs = gemm.make_inputs(case, dtype, "cpu")
        a, b = inputs["a"].double(), inputs["b"].double()
        if dtype == "fp8":
            a, b = a * inputs["a_scale"].item(), b * inputs["b_scale"].item()
            assert inputs["a"].float().abs().max() > 200  # scaled to use the fp8 range
        close(gemm.reference(case, inputs)["out"], (a @ b.T).float())
    inputs = gemm.make_inputs(gemm.case("copy-1MiB"), "fp8", "cpu")
    assert torch.equal(gemm.reference(gemm.case("copy-1MiB"), inputs)["out"], inputs["src"].float())


def test_errors_list_valid_names() -> None:
    moe = get_workload("moe")
    with pytest.raises(FlybenchError, match="dsv3-tp8-t1"):
        moe.case("no-such-case")
    with pytest.raises(FlybenchError, match="quick"):
        moe.cases("nightly")
    with pytest.raises(FlybenchError, match="bf16, fp8"):
        moe.make_inputs(moe.cases("tiny")[0], "fp16", "cpu")
    with pytest.raises(FlybenchError, match="bf16, fp16"):
        diffusion = get_workload("diffusion_attention")
        diffusion.make_inputs(diffusion.cases("tiny")[0], "fp8", "cpu")
    with pytest.raises(FlybenchError, match="diffusion_attention"):
        get_workload("attn")


def test_moe_bytes_count_the_experts_the_seeded_routing_really_touches():
    """The expected-distinct-experts formula in min_bytes against routing of the workload's own inputs."""
    moe = get_workload("moe")
    case = Case("moe", "x", {"tokens": 16, "hidden": 8, "inter": 4, "experts": 128, "top_k": 8})
    per_expert = 3 * 8 * 4 * 2
    fixed = 16 * 8 * 2 * 2 + 16 * 128 * 4
    expected = (moe.min_bytes(case, "bf16") - fixed) / per_expert
    seen = [len(torch.unique(route(moe.make_inputs(case, "bf16", "cpu", seed=s)["router_logits"], 8)[1]))
            for s in range(40)]
    assert abs(sum(seen) / len(seen) - expected) < 3  # about 82 of 128; min(E, T*k) would say 128
