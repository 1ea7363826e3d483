"""Run `plan_function` with a stand-in jax_triton that executes each call's kernel in Triton's interpreter.

Run as a script with TRITON_INTERPRET=1 (set before triton is imported):
`python tests/helpers/interpreted_jax_triton.py WORKLOAD CASE` prints one
JSON line: the correctness gate's verdict of the JAX function's outputs
against the workload's float32 reference, and the calls it made.
`python tests/helpers/interpreted_jax_triton.py model` runs the model lane's
tiny decoder with the Triton MoE layer (step by step, not jitted: the
interpreter needs concrete arrays) and prints its bf16 logits' error against
the float32 step with the dense MoE.

The stand-in keeps jax_triton.triton_call's contract: operands named by
keyword; `input_output_aliases` mapping an operand's index (among the
supplied runtime parameters, in declaration order) to an output ordinal
whose buffer starts as that operand; and the buffers handed to the kernel's
pointer parameters in order, the operands' first and the unaliased outputs'
after them, as jaxlib's Triton custom call passes them. A wiring mistake in `plan_function` (an output bound to the
wrong parameter, a fill or an alias lost) gives wrong numbers here.
"""

from __future__ import annotations

import inspect
import json
import sys
import types

import jax.numpy as jnp
import numpy as np
import torch

from flybench.kernels.triton import cases, check
from flybench.measure import correctness
from flybench.providers.jax_custom_call import plan_function
from flybench.workloads import get_workload


def to_torch(array) -> torch.Tensor:
    if array.dtype == jnp.bfloat16:
        return torch.from_numpy(np.array(array.astype(jnp.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.array(array))


def to_jax(tensor: torch.Tensor):
    if tensor.dtype == torch.bfloat16:
        return jnp.asarray(tensor.float().numpy()).astype(jnp.bfloat16)
    return jnp.asarray(tensor.numpy())


class InterpretedJaxTriton(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("jax_triton")
        self.calls: list[dict] = []

    def triton_call(self, *, kernel, grid, name, out_type, input_output_aliases=None, **kwargs):
        runtime = [n for n, p in inspect.signature(kernel.fn).parameters.items()
                   if "constexpr" not in str(p.annotation)]
        supplied = [n for n in runtime if n in kwargs]
        aliases = input_output_aliases or {}
        args = {n: (to_torch(v) if hasattr(v, "dtype") and hasattr(v, "shape") else v) for n, v in kwargs.items()}
        outputs: list[torch.Tensor | None] = [None] * len(out_type)
        for index, ordinal in aliases.items():
            outputs[ordinal] = args[supplied[index]]
        for ordinal, t in enumerate(out_type):
            if outputs[ordinal] is None:
                outputs[ordinal] = torch.empty(t.shape, dtype=to_torch(jnp.zeros((), t.dtype)).dtype)
        # The buffers go to the pointer parameters in order: the operands' first, then the unaliased outputs'.
        pointers = [n for n in runtime if n not in kwargs or isinstance(args[n], torch.Tensor)]
        buffers = [args[n] for n in pointers if n in kwargs]
        buffers += [outputs[o] for o in range(len(out_type)) if o not in aliases.values()]
        kernel[grid](**{**args, **dict(zip(pointers, buffers))})
        self.calls.append({"name": name, "aliased": sorted(supplied[i] for i in aliases)})
        return [to_jax(t) for t in outputs]


def main(workload_name: str, case_name: str) -> None:
    check.patch_interpreter()  # the interpreter's bf16 dot, as every interpreted check runs it
    fake = InterpretedJaxTriton()
    sys.modules["jax_triton"] = fake
    workload = get_workload(workload_name)
    case = workload.case(case_name)
    inputs = {k: v.contiguous() for k, v in workload.make_inputs(case, "bf16", "cpu").items()}
    plan = cases.build(case, "bf16", inputs, "sm_90", compute_units=132 if workload_name != "moe" else None)
    result = plan_function(plan, inputs)({n: to_jax(t) for n, t in inputs.items()})
    outputs = {n: to_torch(v) for n, v in result.items()}
    verdict = correctness.check(outputs, workload.reference(case, inputs), "bf16")
    print(json.dumps({"passed": verdict.passed, "errors": verdict.errors, "reason": verdict.reason,
                      "dtypes": {n: str(v.dtype) for n, v in result.items()}, "calls": fake.calls}))


def model() -> None:
    from functools import partial

    from flybench.model import mixtral
    from flybench.providers import jax_custom_call

    check.patch_interpreter()
    fake = InterpretedJaxTriton()
    sys.modules["jax_triton"] = fake
    mixtral.MOE_LAYERS["triton"] = partial(jax_custom_call.moe, arch="sm_90")
    config = mixtral.TINY
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, config.vocab, (2, 6)), jnp.int32)
    logits = {}
    for moe, dtype in (("triton", "bfloat16"), ("dense", "float32")):
        params = mixtral.init(config, dtype)
        logits[moe], _ = mixtral.step(params, tokens, mixtral.empty_cache(config, 2, 8, dtype), 0, config=config,
                                      moe=moe)
    error = float(jnp.max(jnp.abs(logits["triton"] - logits["dense"])) / jnp.max(jnp.abs(logits["dense"])))
    print(json.dumps({"error": error, "shape": list(logits["triton"].shape),
                      "moe_calls": sum(c["name"] == "moe_down" for c in fake.calls)}))


if __name__ == "__main__":
    model() if sys.argv[1] == "model" else main(*sys.argv[1:3])
