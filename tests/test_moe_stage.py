"""The MoE stage workload: FlyDSL's stage shapes and counts, and two stages that compose into the layer."""

from __future__ import annotations

import pytest
import torch

from flybench.importers.flydsl_ci.mapping import map_case
from flybench.measure.correctness import TOLERANCES
from flybench.workloads import get_workload
from flybench.workloads._inputs import GROUP, dequantize, quantize_int4, quantize_mxfp4

STAGE, LAYER = get_workload("moe_stage"), get_workload("moe")


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("shape", ["t7-d128x64-e8k2", "t33-d64x32-e16k4"])
def test_stage_two_after_stage_one_is_the_whole_layer(shape: str, dtype: str) -> None:
    first, second = STAGE.case(f"{shape}-s1"), STAGE.case(f"{shape}-s2")
    inputs = STAGE.make_inputs(first, dtype, "cpu")
    act = STAGE.reference(first, inputs)["out"]
    assert tuple(act.shape) == (first.shape["tokens"] * first.shape["top_k"], first.shape["inter"])
    out = STAGE.reference(second, {**inputs, "act": act})["out"]
    layer = LAYER.reference(first, inputs)["out"]  # the moe reference reads the same keys
    torch.testing.assert_close(out, layer, rtol=1e-4, atol=1e-4)


def test_the_activation_is_in_pair_order() -> None:
    case = STAGE.case("t7-d128x64-e8k2-s1")
    inputs = STAGE.make_inputs(case, "bf16", "cpu")
    act = STAGE.reference(case, inputs)["out"]
    ids = torch.topk(inputs["router_logits"], 2, dim=-1).indices
    token, slot = 3, 1
    gate_up = inputs["x"][token].float() @ inputs["w13"][ids[token, slot]].float().T
    expected = torch.nn.functional.silu(gate_up[:64]) * gate_up[64:]
    torch.testing.assert_close(act[token * 2 + slot], expected, rtol=1e-4, atol=1e-5)


def test_the_cases_and_flop_counts_are_flydsl_ci_s() -> None:
    assert [c.name for c in STAGE.cases("quick")] == [
        "t32768-d8192x8192-e16k4-s1", "t32768-d8192x8192-e16k4-s2", "t64-d6144x1024-e128k8-s1",
        "t64-d6144x1024-e128k8-s2", "t128-d7168x256-e384k8-s1", "t128-d7168x256-e384k8-s2",
        "t512-d3072x3072-e128k4-s1", "t512-d3072x3072-e128k4-s2"]
    t, h, i, k = 32768, 8192, 8192, 4
    assert STAGE.flops(STAGE.case("t32768-d8192x8192-e16k4-s1")) == 2 * t * k * (2 * i) * h  # test_moe_gemm.py
    assert STAGE.flops(STAGE.case("t32768-d8192x8192-e16k4-s2")) == 2 * t * k * h * i
    assert STAGE.flops(STAGE.case("t64-d6144x1024-e128k8-s1")) + STAGE.flops(
        STAGE.case("t64-d6144x1024-e128k8-s2")) == 6 * 64 * 8 * 6144 * 1024  # the layer's count


QUANTISED = ("int4_bf16", "a8w4")


@pytest.mark.parametrize("dtype", QUANTISED)
def test_quantised_weights_are_the_bf16_cases_weights_within_their_format(dtype: str) -> None:
    """Same seed, same x and routing as the bf16 case; the weights are its weights quantised per group of 32."""
    case = STAGE.case("t7-d128x64-e8k2-s1")
    plain, quantised = STAGE.make_inputs(case, "bf16", "cpu"), STAGE.make_inputs(case, dtype, "cpu")
    assert torch.equal(plain["x"], quantised["x"]) and torch.equal(plain["router_logits"], quantised["router_logits"])
    w = dequantize(quantised["w13"], quantised["w13_scale"])
    assert quantised["w13_scale"].shape == (8, 128, 128 // GROUP)
    error = ((w - plain["w13"].float()).norm() / plain["w13"].float().norm()).item()
    assert 0.01 < error < (0.12 if dtype == "int4_bf16" else 0.2)  # quantised, but close


@pytest.mark.parametrize("dtype", QUANTISED)
def test_the_reference_uses_the_dequantised_weights_and_composes_into_the_layer(dtype: str) -> None:
    first, second = STAGE.case("t7-d128x64-e8k2-s1"), STAGE.case("t7-d128x64-e8k2-s2")
    inputs = STAGE.make_inputs(first, dtype, "cpu")
    dense = {**inputs, "w13": dequantize(inputs["w13"], inputs["w13_scale"]),
             "w2": dequantize(inputs["w2"], inputs["w2_scale"])}
    dense = {k: v for k, v in dense.items() if not k.endswith("_scale")}
    act = STAGE.reference(first, inputs)["out"]
    torch.testing.assert_close(act, STAGE.reference(first, dense)["out"], rtol=0, atol=0)
    layer = LAYER.reference(first, dense)["out"]
    torch.testing.assert_close(STAGE.reference(second, {**inputs, "act": act})["out"], layer, rtol=1e-4, atol=1e-4)


def test_int4_codes_and_scales_are_what_int4_kernels_read() -> None:
    q, scale = quantize_int4(torch.randn(4, 64) * 3)
    assert q.dtype == torch.int8 and int(q.min()) >= -8 and int(q.max()) <= 7
    assert torch.equal(scale, scale.to(torch.bfloat16).float())  # a bf16 scale loses nothing
    assert (q.view(4, 2, 32).abs().amax(-1) == 7).all()  # each group's largest element lands on 7


def test_mxfp4_follows_the_ocp_rule() -> None:
    """Shared exponent floor(log2(amax)) - 2, nearest e2m1, saturation at 6, sign in bit 3."""
    block = torch.tensor([[60.0, 13.0, -1.92, -24.0] + [0.0] * 28])
    codes, e8m0 = quantize_mxfp4(block)
    assert int(e8m0) == 127 + 3  # floor(log2(60)) = 5, minus e2m1's emax 2: scale 8
    assert codes[0, :4].tolist() == [7, 3, 8, 8 | 5]  # 7.5 -> 6 (saturated), 1.625 -> 1.5, -0.24 -> -0, -3
    assert dequantize(codes, e8m0)[0, :4].tolist() == [48.0, 12.0, -0.0, -24.0]


def test_a8w4_stage_two_activation_is_on_the_mxfp4_grid() -> None:
    """Stage 2 of an a8w4 pipeline reads the MX-FP4 activation stage 1 wrote: quantising it again loses nothing."""
    act = STAGE.make_inputs(STAGE.case("t7-d128x64-e8k2-s2"), "a8w4", "cpu")["act"]
    assert torch.equal(dequantize(*quantize_mxfp4(act)), act.float())


def test_quantised_bytes_count_half_a_byte_per_weight_and_the_group_scales() -> None:
    case = STAGE.case("t128-d7168x256-e384k8-s1")
    base = STAGE.min_bytes(case, "bf16") - STAGE.min_bytes(case, "int4_bf16")
    touched = 384 * (1 - (1 - 8 / 384) ** 128)
    assert base == pytest.approx(touched * 2 * 256 * 7168 * (2 - 0.5 - 2 / 32))
    assert STAGE.min_bytes(case, "a8w4") - STAGE.min_bytes(case, "int4_bf16") == pytest.approx(
        touched * 2 * 256 * 7168 * (1 / 32 - 2 / 32))
    assert STAGE.flops(case) == 2 * 128 * 8 * 2 * 256 * 7168  # the same logical count for every dtype
    assert TOLERANCES["int4_bf16"] == TOLERANCES["bf16"] and TOLERANCES["a8w4"] == TOLERANCES["fp8"]


@pytest.mark.parametrize("dtype", QUANTISED)
def test_quantised_cases_need_group_sized_dimensions(dtype: str) -> None:
    from flybench.workloads.base import Case

    ragged = Case("moe_stage", "t5-d64x48-e4k2-s2", {"tokens": 5, "hidden": 64, "inter": 48, "experts": 4,
                                                     "top_k": 2, "stage": 2})
    with pytest.raises(ValueError, match="multiple of 32"):
        STAGE.make_inputs(ragged, dtype, "cpu")


@pytest.mark.parametrize("op,shape,dtype", [("moe_w4a16_s1", "t128-d7168x256-e384k8", "int4_bf16"),
                                            ("moe_w4a16_s2_reduce", "t512-d7168x256-e384k8", "int4_bf16"),
                                            ("moe_a8w4_s1", "t8192-d3072x3072-e128k4", "a8w4"),
                                            ("moe_a8w4_s2_atomic", "t512-d3072x3072-e128k4", "a8w4")])
def test_flydsl_cis_quantised_series_land_on_these_cases(op: str, shape: str, dtype: str) -> None:
    mapped = map_case(op, shape, dtype, "TFLOPS")
    case = STAGE.case(mapped.params["case"])
    assert mapped.workload == "moe_stage" and mapped.params["dtype"] in STAGE.dtypes
    assert case.shape.items() <= mapped.shape.items() and case in STAGE.cases("full")
