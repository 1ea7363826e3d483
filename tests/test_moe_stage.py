"""The MoE stage workload: FlyDSL's stage shapes and counts, and two stages that compose into the layer."""

from __future__ import annotations

import pytest
import torch

from flybench.workloads import get_workload

STAGE, LAYER = get_workload("moe_stage"), get_workload("moe")


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("shape", ["t7-d128x64-e8k2", "t33-d64x48-e16k4"])
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
        "t64-d6144x1024-e128k8-s2"]
    t, h, i, k = 32768, 8192, 8192, 4
    assert STAGE.flops(STAGE.case("t32768-d8192x8192-e16k4-s1")) == 2 * t * k * (2 * i) * h  # test_moe_gemm.py
    assert STAGE.flops(STAGE.case("t32768-d8192x8192-e16k4-s2")) == 2 * t * k * h * i
    assert STAGE.flops(STAGE.case("t64-d6144x1024-e128k8-s1")) + STAGE.flops(
        STAGE.case("t64-d6144x1024-e128k8-s2")) == 6 * 64 * 8 * 6144 * 1024  # the layer's count
