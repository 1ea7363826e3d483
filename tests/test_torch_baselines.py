"""The torch baselines do their set-up in build(), outside the timed call, and stay correct."""

from __future__ import annotations

import pytest

from flybench import hardware
from flybench.measure import correctness
from flybench.providers import get_provider, torch_ops
from flybench.workloads import get_workload


@pytest.mark.parametrize("case_name", ["tiny-mha-b2-ctx100-d16-p16-causal", "tiny-gqa7-b3-ctx150-d16-p64-bidir"])
def test_the_diffusion_mask_is_built_once_and_the_result_matches(monkeypatch, case_name: str) -> None:
    built = []
    real = torch_ops.diffusion_visible
    monkeypatch.setattr(torch_ops, "diffusion_visible", lambda *a, **k: built.append(1) or real(*a, **k))
    workload = get_workload("diffusion_attention")
    case = workload.case(case_name)
    inputs = workload.make_inputs(case, "bf16", "cpu")
    runner = get_provider("torch").build(case, "bf16", inputs, hardware.detect())
    outputs = [runner() for _ in range(3)]
    assert len(built) == 1, "the mask is rebuilt inside the timed call"
    verdict = correctness.check(outputs[-1], workload.reference(case, inputs), "bf16")
    assert verdict.passed, verdict.reason


def test_fp8_moe_stages_take_the_path_measured_faster_for_their_group_size(monkeypatch):
    from flybench.providers import torch_ops
    from flybench.providers import get_provider
    from flybench.workloads import get_workload

    stages = {c.name: c for c in get_workload("moe_stage").cases("quick")}
    monkeypatch.setattr(torch_ops, "fp8_grouped_gemm_available", lambda: True)
    assert torch_ops.moe_stage_path(stages["t32768-d8192x8192-e16k4-s1"], "fp8") == "per-expert"  # 8,192 pairs each
    assert torch_ops.moe_stage_path(stages["t64-d6144x1024-e128k8-s1"], "fp8") == "grouped"  # 4 pairs each
    assert torch_ops.moe_stage_path(stages["t32768-d8192x8192-e16k4-s1"], "bf16") == "grouped"
    record = get_provider("torch").implementation(stages["t64-d6144x1024-e128k8-s2"], "fp8")
    assert record["kernels"] == ["torch._scaled_grouped_mm"]
    monkeypatch.setattr(torch_ops, "fp8_grouped_gemm_available", lambda: False)  # ROCm, or an older torch
    assert torch_ops.moe_stage_path(stages["t64-d6144x1024-e128k8-s1"], "fp8") == "per-expert"
