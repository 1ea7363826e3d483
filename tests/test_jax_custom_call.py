"""The jax-triton provider: the Triton plan's launches become triton_calls wired output to input, in order."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from flybench import hardware  # noqa: E402
from flybench.kernels.triton import cases  # noqa: E402
from flybench.providers import get_provider  # noqa: E402
from flybench.providers.jax_custom_call import plan_function  # noqa: E402
from flybench.workloads import get_workload  # noqa: E402


class FakeJaxTriton(types.ModuleType):
    """jax_triton.triton_call at its real keyword interface; each output a distinct array that records its call."""

    def __init__(self) -> None:
        super().__init__("jax_triton")
        self.calls: list[dict] = []

    def triton_call(self, *, kernel, grid, name, out_type, input_output_aliases=None, **kwargs):
        made = [jnp.full(t.shape, len(self.calls) + 1 + i / 10, t.dtype) for i, t in enumerate(out_type)]
        self.calls.append({"kernel": kernel, "grid": grid, "name": name, "out_type": out_type, "kwargs": kwargs,
                           "made": made})
        return made


@pytest.mark.parametrize("case_name, splits", [("tiny-gqa7-b3-ctx150-d16-p64-bidir", 1),
                                              ("llama3-8b-b8-ctx4k-d32-p64-bidir", 4)])
def test_every_launch_becomes_one_call_with_its_outputs_left_unnamed(monkeypatch, case_name: str, splits: int) -> None:
    fake = FakeJaxTriton()
    monkeypatch.setitem(sys.modules, "jax_triton", fake)
    workload = get_workload("diffusion_attention")
    case = workload.case(case_name)
    inputs = {k: v.contiguous() for k, v in workload.make_inputs(case, "bf16", "cpu").items()}
    plan = cases.build(case, "bf16", inputs, "sm_90", compute_units=132, num_splits=splits)
    arrays = {k: jnp.asarray(v.float().numpy()).astype(jnp.bfloat16 if v.is_floating_point() else v.numpy().dtype)
              for k, v in inputs.items()}
    result = plan_function(plan, inputs)(arrays)

    assert [c["name"] for c in fake.calls] == [launch.name for launch in plan.launches]
    for call, launch in zip(fake.calls, plan.launches):
        assert call["grid"] == launch.grid and call["kernel"] is launch.kernel
        params = [p for p, spec in inspect.signature(launch.kernel.fn).parameters.items()
                  if "constexpr" not in str(spec.annotation)]
        named = [p for p in params if p in call["kwargs"]]
        unnamed = [p for p in params if p not in call["kwargs"]]
        assert len(unnamed) == len(call["out_type"]), "each output binds one parameter the call leaves unnamed"
        assert [tuple(t.shape) for t in call["out_type"]] == [tuple(launch.args[p].shape) for p in unnamed]
        assert all(call["kwargs"][k] == v for k, v in {**launch.constexprs, **launch.options}.items())
        assert set(named) | set(unnamed) == set(params)
    assert len(plan.launches) == (2 if splits > 1 else 1)
    if splits > 1:  # the combine reads what the first kernel wrote
        first, combine = fake.calls
        assert combine["kwargs"]["o_part"] is first["made"][0] and combine["kwargs"]["lse_part"] is first["made"][1]
    last = fake.calls[-1]["made"]
    assert result["out"].shape == tuple(plan.out.shape) and result["lse"].shape == tuple(plan.lse.shape)
    assert float(result["out"].reshape(-1)[0]) == float(last[0].reshape(-1)[0])


def test_it_says_why_it_cannot_run_on_a_cpu() -> None:
    reason = get_provider("jax-triton").unavailable_reason("diffusion_attention", "bf16", hardware.detect())
    assert reason and "GPU" in reason


@pytest.mark.parametrize("workload, case_name", [("moe", "tiny-h128-i64-e8k2-t7"),
                                                 ("diffusion_attention", "tiny-gqa7-b3-ctx150-d16-p64-bidir")])
def test_the_jax_function_gives_the_reference_when_each_call_runs_its_kernel(workload: str, case_name: str) -> None:
    """The wiring checked by its numbers: each triton_call runs its kernel in Triton's interpreter, under
    jax-triton's contract (outputs bound to the unnamed parameters, aliased operands updated in place). The MoE
    needs its fills and its aliased accumulator right, or the output is garbage."""
    pytest.importorskip("triton")
    script = Path(__file__).parent / "helpers" / "interpreted_jax_triton.py"
    done = subprocess.run([sys.executable, str(script), workload, case_name], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["passed"], result["reason"]
    assert result["dtypes"]["out"] == "bfloat16"
    if workload == "moe":
        assert [c["name"] for c in result["calls"]] == ["topk_softmax", "count_chunks", "expert_offsets",
                                                          "scatter_pairs", "moe_gate_up", "moe_down"]
        assert result["calls"][-1]["aliased"] == ["out", "sorted_ids"]  # the accumulator is updated in place


def test_it_runs_the_moe_in_bf16_only_and_says_why_not_fp8() -> None:
    provider = get_provider("jax-triton")
    gpu = hardware.Device(kind="cuda", arch="sm_90", name="test GPU", accelerator="h200", driver="",
                          torch_device="cuda")
    reason = provider.unavailable_reason("moe", "fp8", gpu)
    assert reason and "bf16 only" in reason and "`triton` provider" in reason
