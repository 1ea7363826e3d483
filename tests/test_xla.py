"""The xla providers beyond the shared gate: formulations in float32, compile-once, host timing, reasons.

tests/test_providers.py already runs xla and xla-dense through the correctness
gate on every tiny case that can run on the CPU.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import pytest
import torch

from flybench.hardware import Device
from flybench.measure import timing
from flybench.measure.contract import Contract
from flybench.providers import get_provider, xla
from flybench.workloads import WORKLOADS

CPU = Device("cpu", "cpu", "test cpu", "cpu", "", "cpu")
H200 = Device("cuda", "sm_90", "NVIDIA H200", "h200", "cuda 12.8", "cuda")


def err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def as_float32(inputs: dict) -> dict:
    """Inputs as JAX arrays, floating ones in float32, so formulation errors are not hidden by rounding."""
    return {n: xla.to_jax(t.float() if t.is_floating_point() else t) for n, t in inputs.items()}


@pytest.mark.parametrize("case", WORKLOADS["moe"].cases("tiny")[:2], ids=lambda c: c.name)  # idle experts; 1 token
def test_ragged_and_dense_moe_are_the_reference_in_float32(case):
    inputs = WORKLOADS["moe"].make_inputs(case, "bf16", "cpu")
    ref = WORKLOADS["moe"].reference(case, inputs)["out"]
    a = as_float32(inputs)
    k = case.shape["top_k"]
    ragged = jax.jit(partial(xla.moe_ragged, top_k=k))(a["x"], a["router_logits"], jnp.swapaxes(a["w13"], 1, 2),
                                                       jnp.swapaxes(a["w2"], 1, 2))
    dense = jax.jit(partial(xla.moe_dense, top_k=k))(a["x"], a["router_logits"], a["w13"], a["w2"])
    assert err(xla.to_torch(ragged["out"]), ref) < 1e-5 and err(xla.to_torch(dense["out"]), ref) < 1e-5


@pytest.mark.parametrize("case", WORKLOADS["diffusion_attention"].cases("tiny"), ids=lambda c: c.name)
def test_paged_gather_and_draft_mask_are_the_reference_in_float32(case):
    workload = WORKLOADS["diffusion_attention"]
    inputs = workload.make_inputs(case, "bf16", "cpu")
    ref = workload.reference(case, inputs)
    a = as_float32(inputs)
    attend = jax.jit(partial(xla.diffusion_attention, scale=case.shape["scale"], causal=case.shape["mask"] == "causal"))
    got = attend(*(a[n] for n in ("q", "k_cache", "v_cache", "block_table", "context_lens", "k_draft", "v_draft")))
    assert err(xla.to_torch(got["out"]), ref["out"]) < 1e-5 and err(xla.to_torch(got["lse"]), ref["lse"]) < 1e-5


def test_dlpack_round_trip_keeps_type_and_values():
    t = torch.randn(4, 8, dtype=torch.bfloat16)
    back = xla.to_torch(xla.to_jax(t))
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)


def test_compiled_once_in_build_and_host_timed():
    traces = []

    def add_one(x):
        traces.append(1)
        return {"out": x + 1}

    runner = xla.compiled_runner(add_one, [xla.to_jax(torch.ones(3))])
    assert len(traces) == 1  # traced and compiled in build
    for _ in range(3):
        assert torch.equal(runner()["out"], torch.full((3,), 2.0))
    assert len(traces) == 1 and getattr(runner, timing.HOST_TIMED)


def test_build_converts_and_compiles_before_the_timed_call():
    case = WORKLOADS["gemm"].case("64x48x32")
    inputs = WORKLOADS["gemm"].make_inputs(case, "bf16", "cpu")
    runner = get_provider("xla").build(case, "bf16", inputs, CPU)
    out = runner()["out"]
    assert out.dtype == torch.bfloat16 and err(out, inputs["a"].float() @ inputs["b"].float().T) < 2e-2


def test_host_timed_runner_on_a_gpu_uses_the_host_clock_after_a_sync(monkeypatch):
    """No device events for XLA: each sample is preceded by a device synchronisation, untimed."""
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: events.append("sync"))
    monkeypatch.setattr(torch.cuda, "Event", lambda **kw: pytest.fail("device events used for a host-timed runner"))
    runner = timing.host_timed(lambda: events.append("call") or {})
    contract = Contract(warmup_s=0.0, target_s=0.001, min_samples=5, max_samples=5, flush="none")
    samples = timing.time_runner(runner, H200, contract)
    assert len(samples) == 5 and all(s >= 0 for s in samples)
    measured = events[-10:]
    assert measured == ["sync", "call"] * 5


def test_reasons_are_actionable(monkeypatch):
    provider = get_provider("xla")
    assert "fp8" in provider.unavailable_reason("moe", "fp8", CPU)
    assert "fp16" in provider.unavailable_reason("attention", "fp16", CPU)
    assert provider.unavailable_reason("attention", "bf16", CPU) is None
    assert provider.unavailable_reason("moe", "bf16", CPU) is None
    assert "no GPU backend" in provider.unavailable_reason("attention", "bf16", H200)  # this JAX is CPU-only
    find_spec = __import__("importlib.util").util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda n, *a: None if n == "jax" else find_spec(n, *a))
    reason = get_provider("xla-dense").unavailable_reason("moe", "bf16", CPU)
    assert "pip install -e '.[jax]'" in reason and "flybench[jax]" not in reason  # installed from its clone


def test_dense_path_is_its_own_provider_for_moe_and_the_model_lane_only():
    assert get_provider("xla-dense").workloads == frozenset({"moe", "mixtral_step"})
    assert get_provider("xla").workloads == frozenset({"attention", "diffusion_attention", "moe", "gemm",
                                                       "mixtral_step"})
    assert jax.default_backend() == "cpu"
