"""`jax-triton`: the project's Triton kernels inside `jax.jit`, each launch an XLA custom call.

This is the route the AMD JAX talk describes for FlyDSL (kernels inside a
jitted program through an XLA custom call), run with the kernels that exist
on every GPU here: the Triton diffusion-attention plan
(`flybench.kernels.triton.cases.build`) becomes one `jax_triton.triton_call`
per launch, with the same grid, arguments, compile-time constants and
launch options. A tensor the plan allocates is an output of the first
launch that writes it and an input of the launches after it; jax-triton
binds each output to the kernel parameter the call leaves unnamed.

FlyDSL's own JAX API (`flydsl.jax`, a custom-call primitive) is not in a
FlyDSL release; a FlyDSL variant of this provider follows when one ships it.
MoE is not wired: its plan zero-fills an accumulator that its kernels add
into with atomics, which jax-triton needs as a mutable `Ref`.

Timed like `xla`: the jitted call blocks until its outputs are ready and is
host-timed (XLA's streams are not torch's); the time includes the jitted
call's dispatch, which is what a JAX caller pays.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.providers.xla import JAX_INSTALL, compiled_runner, to_jax
from flybench.workloads.base import Case, Tensors

JAX_TRITON_INSTALL = "pip install jax-triton (0.4.1 needs jax >= 0.11)"
OUTPUTS = ("out", "lse")
"""The plan's attributes that are the case's outputs."""


class JaxTriton(Provider):
    name = "jax-triton"
    module = "jax_triton"
    workloads = frozenset({"diffusion_attention"})
    description = "the project's Triton kernels inside jax.jit as XLA custom calls (jax-triton)"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        if device.kind == "cpu":
            return "jax-triton launches compiled Triton kernels, which need an NVIDIA or AMD GPU; this machine has none"
        for module, install in (("jax", JAX_INSTALL), ("triton", "pip install -e '.[triton]'"),
                                ("jax_triton", JAX_TRITON_INSTALL)):
            if importlib.util.find_spec(module) is None:
                return f"{self.name} needs {module}: {install}"
        if dtype == "fp8":
            return "the diffusion-attention kernels have no fp8 variant; use bf16 or fp16"
        import jax

        if jax.default_backend() == "cpu":
            return f"this JAX has no GPU backend, so it cannot run kernels on {device.arch}: {JAX_INSTALL}"
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        """The plan built on the torch inputs (its configuration and split count), then compiled as one jit."""
        import torch

        from flybench.kernels.triton import cases

        units = torch.cuda.get_device_properties(0).multi_processor_count
        contiguous = {k: v.contiguous() for k, v in inputs.items()}
        plan = cases.build(case, dtype, contiguous, device.arch, compute_units=units)
        names = sorted(contiguous)
        function = plan_function(plan, contiguous)
        return compiled_runner(lambda *arrays: function(dict(zip(names, arrays))),
                               [to_jax(contiguous[n]) for n in names])


def plan_function(plan: Any, inputs: Tensors) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A JAX function of the inputs (by name) that runs the plan's launches as `triton_call`s.

    `plan.launches` are `flybench.kernels.triton.launch.Launch`es over
    `inputs` and the buffers the plan allocated; `plan.out` and `plan.lse`
    are the results.
    """
    import jax

    jax_triton = import_jax_triton()
    results = {id(getattr(plan, name)): name for name in OUTPUTS}

    def run(arrays: dict[str, Any]) -> dict[str, Any]:
        values: dict[int, Any] = {id(inputs[n]): a for n, a in arrays.items()}
        for launch in plan.launches:
            operands, written = {}, []
            for name, arg in launch.args.items():
                if not hasattr(arg, "data_ptr"):
                    operands[name] = arg  # a scalar: jax-triton bakes it into the compiled kernel
                elif id(arg) in values:
                    operands[name] = values[id(arg)]
                elif arg._base is not None and id(arg._base) in values:
                    operands[name] = values[id(arg._base)].reshape(arg.shape)
                else:
                    written.append(arg)
            out_type = [jax.ShapeDtypeStruct(tuple(t.shape), _jax_dtype(t)) for t in written]
            made = jax_triton.triton_call(kernel=launch.kernel, grid=launch.grid, name=launch.name,
                                          out_type=out_type, **operands, **launch.constexprs, **launch.options)
            for tensor, value in zip(written, made):
                values[id(tensor)] = value
                if tensor._base is not None:  # a view of a result: split 0 of the final tensor
                    values[id(tensor._base)] = value.reshape(tensor._base.shape)
        return {name: values[key] for key, name in results.items()}

    return run


def _jax_dtype(tensor: Any) -> Any:
    import jax.numpy as jnp

    return {"torch.bfloat16": jnp.bfloat16, "torch.float16": jnp.float16, "torch.float32": jnp.float32,
            "torch.int32": jnp.int32}[str(tensor.dtype)]


def import_jax_triton() -> Any:
    """jax_triton, imported so that its NVIDIA backend loads with triton 3.6 too.

    jax-triton 0.4.1 asks for triton >= 3.7 and imports two TMA constants of
    triton's NVIDIA driver; where they are missing (triton 3.6) it silently
    stubs out the whole NVIDIA backend. These kernels use no TMA descriptors,
    so the constants, set to triton 3.7's values only where absent, change
    nothing they run.
    """
    try:
        import triton.backends.nvidia.driver as driver
    except ImportError:  # an AMD build of triton: nothing to set
        driver = None
    if driver is not None and not hasattr(driver, "TMA_TF32"):
        driver.TMA_TF32 = 11
    if driver is not None and not hasattr(driver, "TMA_DTYPE_DEVICE_TO_HOST"):
        driver.TMA_DTYPE_DEVICE_TO_HOST = {**{i: i for i in range(16)}, 8: 10, 9: 8, 10: 9}
    import jax_triton

    return jax_triton


register(JaxTriton())
