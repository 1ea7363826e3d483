"""flydsl on a CPU: where a checkout's build is found, which paged kernel it takes, and the bf16 MoE host calls.

The a16wmix host functions are emulated with the keyword-only signatures of
FlyDSL's tests/kernels/moe_a16wmix_host.py at commit 11c4174, computing what its
docstrings say (stage 1 writes SiLU(gate) * up by sorted position, stage 2
scatters routing-weighted rows into the flat output), reading bf16 weights
(a16w16) or int4 ones (a16wi4: two's-complement nibbles, even K low, preshuffled
as bytes, bf16 group scales [E, N, K / 32]).
"""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F

from flybench import envvars
from flybench.providers import _moe_layout, _paged_append, flydsl
from flybench.workloads import WORKLOADS
from flybench.workloads.base import Case
from test_rocm_providers import ROCM, unshuffle

A16W16 = Case("moe", "a16w16", {"tokens": 5, "hidden": 256, "inter": 256, "experts": 4, "top_k": 2})
"""The smallest shape moe_2stage_a16wmix takes: hidden and inter multiples of 256 (its tile_k)."""


def test_the_build_directory_is_build_fly_unless_fly_build_dir_says_otherwise(monkeypatch, tmp_path):
    monkeypatch.delenv(flydsl.FLY_BUILD_DIR, raising=False)
    assert flydsl.build_dir(tmp_path) == tmp_path / "build-fly"
    monkeypatch.setenv(flydsl.FLY_BUILD_DIR, "out/fly")
    assert flydsl.build_dir(tmp_path) == tmp_path / "out" / "fly"
    monkeypatch.setenv(flydsl.FLY_BUILD_DIR, str(tmp_path / "elsewhere"))
    assert flydsl.build_dir(tmp_path / "checkout") == tmp_path / "elsewhere"


@pytest.mark.parametrize("build", [None, "custom-build"])
def test_the_builds_python_packages_go_on_the_path(monkeypatch, tmp_path, build):
    (tmp_path / "kernels" / "attention").mkdir(parents=True)
    (tmp_path / "kernels" / "attention" / "flash_attn_interface.py").write_text("")
    packages = tmp_path / (build or "build-fly") / "python_packages"
    packages.mkdir(parents=True)
    (tmp_path / "build" / "python_packages").mkdir(parents=True)  # the old guess, which FlyDSL no longer builds
    monkeypatch.setenv(envvars.FLYDSL_SRC, str(tmp_path))
    if build:
        monkeypatch.setenv(flydsl.FLY_BUILD_DIR, build)
    else:
        monkeypatch.delenv(flydsl.FLY_BUILD_DIR, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    flydsl.checkout_reason()
    assert str(packages) in sys.path and str(tmp_path / "build" / "python_packages") not in sys.path


def test_every_diffusion_case_takes_the_light_paged_kernel():
    """flash_attn_interface._flydsl_flash_attn_paged takes _build_paged_light without a bias and with at most
    _VARLEN_LIGHT_MAX_SEQ = 256 queries per sequence: every p64 case, on gfx942 and gfx950 alike."""
    cases = [c for c in WORKLOADS["diffusion_attention"].cases("full") if c.shape["page_size"] == flydsl.PAGE_SIZE]
    assert cases and max(c.shape["draft"] for c in cases) <= 256
    case = WORKLOADS["diffusion_attention"].case("tiny-gqa7-b3-ctx150-d16-p64-bidir")
    inputs = WORKLOADS["diffusion_attention"].make_inputs(case, "bf16", "cpu")
    kwargs = flydsl.paged_call(case, inputs, _paged_append.build(inputs), inputs["q"])
    assert "bias" not in kwargs and kwargs.get("num_kv_splits", 1) <= 1


calls: list[dict] = []


INT4_TILE_M = 64
"""What the emulated a16wi4_recommend_block_m answers; routing and both stages must use it."""


def logical(w, scale, w_dtype, experts, n, k):
    """The [E, N, K] float32 weight a host call reads: bf16 preshuffled, or int4 packed, preshuffled as bytes."""
    if w_dtype == "bf16":
        assert w.dtype == torch.bfloat16 and scale.numel() == 1
        return unshuffle(w, experts, n, k)
    assert w_dtype == "int4" and w.dtype == torch.uint8 and w.dim() == 1
    assert scale.dtype == torch.bfloat16 and scale.shape == (experts, n, k // 32)
    packed = unshuffle(w, experts, n, k // 2).to(torch.int16)
    nibbles = torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2)
    signed = torch.where(nibbles > 7, nibbles - 16, nibbles).float()
    return signed * scale.float().repeat_interleave(32, dim=-1)


def check_tiles(w_dtype, tile_m, tile_n, tile_k, stage):
    if w_dtype == "bf16":
        assert (tile_m, tile_n, tile_k) == (32, 256, 256)
    else:  # a16wi4: the recommended tile_m, the host's own tile_n/tile_k defaults
        assert (tile_m, tile_n, tile_k) == (INT4_TILE_M, None, 256), (stage, tile_m, tile_n, tile_k)


def flydsl_a16w4_gemm1(*, a_bf16, w1_u8, w1_scale_u8, sorted_expert_ids, cumsum_tensor, m_indices, inter_sorted_bf16,
                       n_tokens, NE, D_HIDDEN, D_INTER, topk, tile_m=32, tile_n=None, tile_k=256, waves_per_eu=None,
                       k_batch=1, k_wave=1, b_nt=None, xcd_swizzle=0, gate_mode="separated", act="silu",
                       situ_beta=1.0, situ_linear_beta=1.0, swiglu_limit=float("inf"), w_dtype="mxfp4",
                       w_layout="standard", use_csv_config=False, csv_path=None, stream=None):
    assert not use_csv_config and a_bf16.dtype == torch.bfloat16 and act == "silu"
    check_tiles(w_dtype, tile_m, tile_n, tile_k, 1)
    calls.append({"stage": 1})
    used = m_indices[: int(cumsum_tensor[0])]
    token, expert = used & 0xFFFFFF, sorted_expert_ids.repeat_interleave(tile_m)[: used.numel()]
    keep = token < n_tokens
    weight = logical(w1_u8, w1_scale_u8, w_dtype, NE, 2 * D_INTER, D_HIDDEN)
    y = torch.einsum("rh,rnh->rn", a_bf16[token[keep].long()].float(), weight[expert[keep].long()])
    inter_sorted_bf16[: used.numel()][keep] = (F.silu(y[:, :D_INTER]) * y[:, D_INTER:]).to(torch.bfloat16)
    return inter_sorted_bf16


def flydsl_a16w4_gemm2(*, inter_sorted_bf16, w2_u8, w2_scale_u8, sorted_expert_ids, cumsum_tensor, sorted_token_ids,
                       sorted_weights, flat_out, M_logical, max_sorted, NE, D_HIDDEN, D_INTER, topk, tile_m=32,
                       tile_n=256, tile_k=256, waves_per_eu=None, k_batch=1, b_nt=None, xcd_swizzle=1,
                       w_dtype="mxfp4", use_csv_config=False, csv_path=None, persist=None, stream=None):
    assert not use_csv_config and max_sorted == inter_sorted_bf16.shape[0]
    assert flat_out.dim() == 1 and (flat_out == 0).all()  # atomics need a zeroed output
    check_tiles(w_dtype, tile_m, tile_n, tile_k, 2)
    calls.append({"stage": 2})
    used = sorted_token_ids[: int(cumsum_tensor[0])]
    token, expert = used & 0xFFFFFF, sorted_expert_ids.repeat_interleave(tile_m)[: used.numel()]
    keep = token < M_logical
    weight = logical(w2_u8, w2_scale_u8, w_dtype, NE, D_HIDDEN, D_INTER)
    rows = torch.einsum("ri,rhi->rh", inter_sorted_bf16[: used.numel()][keep].float(), weight[expert[keep].long()])
    rows = rows * sorted_weights[: used.numel()][keep, None]
    flat_out.view(M_logical, D_HIDDEN).index_add_(0, token[keep].long(), rows.to(flat_out.dtype))
    return flat_out


@pytest.fixture
def fake_host(monkeypatch):
    import types

    calls.clear()
    host = types.SimpleNamespace(flydsl_a16w4_gemm1=flydsl_a16w4_gemm1, flydsl_a16w4_gemm2=flydsl_a16w4_gemm2,
                                 a16wi4_recommend_block_m=lambda tokens, experts, topk: INT4_TILE_M)
    monkeypatch.setattr(flydsl, "import_a16wmix_host", lambda: host)
    monkeypatch.setenv("FLYDSL_GPU_ARCH", "gfx950")
    return host


def test_bf16_moe_runs_the_a16w16_kernels_and_passes_the_gate(fake_host):
    from flybench.measure.correctness import check

    workload = WORKLOADS["moe"]
    inputs = workload.make_inputs(A16W16, "bf16", "cpu")
    runner = flydsl.FlyDSL("flydsl", time_append=False).build(A16W16, "bf16", inputs, ROCM["gfx950"])
    reference = workload.reference(A16W16, inputs)
    for _ in range(2):  # the atomic output is zeroed by every call, not once
        verdict = check(runner(), reference, "bf16")
        assert verdict.passed, verdict.reason
    assert [c["stage"] for c in calls] == [1, 2, 1, 2]


STAGES = [Case("moe_stage", f"a16wmix-s{stage}", {**A16W16.shape, "tokens": 9, "stage": stage})
          for stage in (1, 2)]


@pytest.mark.parametrize("dtype", ["bf16", "int4_bf16"])
@pytest.mark.parametrize("case", STAGES, ids=lambda c: c.name)
def test_one_a16wmix_stage_passes_the_gate_and_times_only_its_kernel(fake_host, case, dtype):
    from flybench.measure.correctness import check

    workload = WORKLOADS["moe_stage"]
    inputs = workload.make_inputs(case, dtype, "cpu")
    runner = flydsl.FlyDSL("flydsl", time_append=False).build(case, dtype, inputs, ROCM["gfx950"])
    reference = workload.reference(case, inputs)
    for _ in range(2):
        verdict = check(runner(), reference, dtype)
        assert verdict.passed, verdict.reason
    assert [c["stage"] for c in calls] == [case.shape["stage"]] * 2
    ran = flydsl.dispatched(case, dtype)
    assert ran["kernels"] == [f"tests/kernels/moe_a16wmix_host.py:flydsl_a16w4_gemm{case.shape['stage']}"]
    assert ran["config"]["w_dtype"] == ("int4" if dtype == "int4_bf16" else "bf16")


def test_int4_weights_pack_two_nibbles_to_a_byte_even_k_low():
    codes = torch.tensor([[-8, 7, -1, 0, 3, -4]], dtype=torch.int8)
    assert _moe_layout.pack_int4(codes).tolist() == [[0x8 | 0x7 << 4, 0xF | 0x0 << 4, 0x3 | 0xC << 4]]


def test_pair_positions_invert_the_sorted_ids():
    ids = torch.tensor([[2, 0], [0, 1], [2, 1]], dtype=torch.int32)
    routing = _moe_layout.sort_routing(ids, torch.rand(3, 2), 3, 4)
    positions = _moe_layout.pair_positions(routing, 3, 2)
    token, slot = routing.sorted_ids[positions] & 0xFFFFFF, routing.sorted_ids[positions] >> 24
    assert (token * 2 + slot).tolist() == list(range(6))


def test_flydsl_says_which_quantised_moe_it_runs_where(monkeypatch):
    monkeypatch.setattr(flydsl, "checkout_reason", lambda: None)
    provider = flydsl.FlyDSL("flydsl", time_append=False)
    assert provider.unavailable_reason("moe_stage", "int4_bf16", ROCM["gfx942"]) is None  # a16wi4 runs on CDNA3
    assert "gfx950" in provider.unavailable_reason("moe_stage", "bf16", ROCM["gfx942"])
    for arch in ("gfx942", "gfx950"):
        reason = provider.unavailable_reason("moe_stage", "a8w4", ROCM[arch])
        assert "_MXFP4_FUSED_XFAIL" in reason and "flybench import flydsl-ci" in reason


def test_bf16_moe_host_glue_is_loaded_from_the_checkout_by_path(monkeypatch, tmp_path):
    host = tmp_path / "tests" / "kernels"
    host.mkdir(parents=True)
    (host / "moe_a16wmix_host.py").write_text("MARKER = 'a16wmix host'\n")
    monkeypatch.setenv(envvars.FLYDSL_SRC, str(tmp_path))
    monkeypatch.setattr(flydsl, "import_kernel", lambda module: None)
    assert flydsl.import_a16wmix_host().MARKER == "a16wmix host"
    (host / "moe_a16wmix_host.py").unlink()
    with pytest.raises(RuntimeError, match="predates"):
        flydsl.import_a16wmix_host()
