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
