"""`jax-triton`: the project's Triton kernels inside `jax.jit`, each launch an XLA custom call.

This is the route the AMD JAX talk describes for FlyDSL (kernels inside a
jitted program through an XLA custom call), run with the kernels that exist
on every GPU here: the Triton diffusion-attention and fused MoE plans
(`flybench.kernels.triton.cases.build`) become one `jax_triton.triton_call`
per launch, with the same grid, arguments, compile-time constants and
launch options (`plan_function` says how each buffer is wired). The MoE's
float32 accumulator, which its down GEMM adds into with atomics, is an
input aliased to an output, as the AMD route passes FlyDSL's.

FlyDSL's own JAX API (`flydsl.jax`, a custom-call primitive) is not in a
FlyDSL release; `flydsl-jax` says so until one ships it.

Timed like `xla`: the jitted call blocks until its outputs are ready and is
host-timed (XLA's streams are not torch's); the time includes the jitted
call's dispatch, which is what a JAX caller pays.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from typing import Any

from flybench import hardware
from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.providers.xla import JAX_INSTALL, MODEL_LANE_BUILDS, compiled_runner, to_jax
from flybench.workloads.base import Case, Tensors

JAX_TRITON_INSTALL = "pip install jax-triton (0.4.1 needs jax >= 0.11)"


class JaxTriton(Provider):
    name = "jax-triton"
    module = "jax_triton"
    workloads = frozenset({"diffusion_attention", "moe", "mixtral_step"})
    description = "the project's Triton kernels inside jax.jit as XLA custom calls (jax-triton)"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        if device.kind == "cpu":
            return "jax-triton launches compiled Triton kernels, which need an NVIDIA or AMD GPU; this machine has none"
        if dtype != "bf16" and workload == "moe":
            return (f"jax-triton runs the Triton MoE in bf16 only: its {dtype} scales and quantised activations "
                    "are not wired as JAX buffers; the torch-launched `triton` provider measures fp8")
        if dtype == "fp8":
            return "the diffusion-attention kernels have no fp8 variant; use bf16 or fp16"
        for module, install in (("jax", JAX_INSTALL), ("triton", "pip install -e '.[triton]'"),
                                ("jax_triton", JAX_TRITON_INSTALL)):
            if importlib.util.find_spec(module) is None:
                return f"{self.name} needs {module}: {install}"
        import jax

        if jax.default_backend() == "cpu":
            return f"this JAX has no GPU backend, so it cannot run kernels on {device.arch}: {JAX_INSTALL}"
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        """The plan built on the torch inputs (its configuration and split count), then compiled as one jit."""
        import torch

        from flybench.kernels.triton import cases

        if case.workload == "mixtral_step":
            raise ValueError(MODEL_LANE_BUILDS)
        units = torch.cuda.get_device_properties(0).multi_processor_count
        contiguous = {k: v.contiguous() for k, v in inputs.items()}
        plan = cases.build(case, dtype, contiguous, device.arch,
                           compute_units=units if case.workload == "diffusion_attention" else None)
        names = sorted(contiguous)
        function = plan_function(plan, contiguous)
        return compiled_runner(lambda *arrays: function(dict(zip(names, arrays))),
                               [to_jax(contiguous[n]) for n in names])


def plan_function(plan: Any, inputs: Tensors) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A JAX function of the inputs (by name) that runs the plan's launches as `triton_call`s.

    `plan.launches` are `flybench.kernels.triton.launch.Launch`es over
    `inputs` and the buffers the plan allocated. A buffer is wired by what
    the launches do with it:

    - written before it is read: an output of the first launch that takes it
      (bound to the kernel parameter the call leaves unnamed), an input after;
    - set before the launches (`plan.fills`: the MoE's sentinel-filled row
      ids and the float32 output its down GEMM adds into with atomics): made
      with its value in the function, then passed to every launch that takes
      it as an input aliased to an output, so a kernel updates it in place
      and the next launch reads the update;
    - an optional pointer the plan leaves None (fp8 scales in a bf16 call,
      which the kernel never reads): a one-element placeholder array.

    `plan.results()` names the outputs and the dtype each is returned in.
    jax-triton hands a kernel its operand buffers first and its output
    buffers after them, so every pointer a launch writes without reading
    must come after the pointers it reads (`_check_outputs_last`).
    """
    import jax
    import jax.numpy as jnp

    jax_triton = import_jax_triton()
    filled = {id(buffer) for buffer, _ in plan.fills}

    def run(arrays: dict[str, Any]) -> dict[str, Any]:
        values: dict[int, Any] = {id(inputs[n]): a for n, a in arrays.items()}
        for buffer, value in plan.fills:
            values[id(buffer)] = jnp.full(tuple(buffer.shape), value, _jax_dtype(buffer.dtype))
        for launch in plan.launches:
            operands, written, updated = {}, [], []
            parameters = _runtime_parameters(launch.kernel)
            for name in parameters:
                arg = launch.args[name]
                if arg is None:
                    operands[name] = jnp.zeros((1,), jnp.float32)
                elif not hasattr(arg, "data_ptr"):
                    operands[name] = arg  # a scalar: jax-triton bakes it into the compiled kernel
                elif id(arg) in values:
                    operands[name] = values[id(arg)]
                    if id(arg) in filled:
                        updated.append((name, arg))
                elif arg._base is not None and id(arg._base) in values:
                    operands[name] = values[id(arg._base)].reshape(arg.shape)
                else:
                    written.append(arg)
            _check_outputs_last(launch, [n for n in parameters
                                         if launch.args[n] is None or hasattr(launch.args[n], "data_ptr")],
                                set(map(id, written)))
            supplied = list(operands)
            aliases = {supplied.index(name): len(written) + i for i, (name, _) in enumerate(updated)}
            results = written + [arg for _, arg in updated]
            out_type = [jax.ShapeDtypeStruct(tuple(t.shape), _jax_dtype(t.dtype)) for t in results]
            made = jax_triton.triton_call(kernel=launch.kernel, grid=launch.grid, name=launch.name,
                                          out_type=out_type, **({"input_output_aliases": aliases} if aliases else {}),
                                          **operands, **launch.constexprs, **launch.options)
            for tensor, value in zip(results, made):
                values[id(tensor)] = value
                if tensor._base is not None:  # a view of a result: split 0 of the final tensor
                    values[id(tensor._base)] = value.reshape(tensor._base.shape)
        return {name: values[id(buffer)].astype(_jax_dtype(dtype)) for name, (buffer, dtype) in plan.results().items()}

    return run


def moe(x, logits, w13, w2, *, top_k: int, arch: str | None = None) -> dict:
    """The project's Triton MoE as a function of JAX arrays: the model lane's `triton` MoE layer.

    x [T, H] and the experts' weights w13 [E, 2I, H], w2 [E, H, I] in bf16,
    logits [T, E] (routed in float32, as the kernel lane's inputs are). The
    plan is built on meta tensors of these shapes, so tracing allocates
    nothing on the device, with the configuration table's entry for `arch`
    (default: this machine's) and the tokens.
    """
    import torch

    from flybench.kernels.triton import configs
    from flybench.kernels.triton import moe as triton_moe

    if str(x.dtype) != "bfloat16":
        raise ValueError(f"the Triton MoE layer runs in bf16 only (its configurations are bf16's), not {x.dtype}")
    arch = arch or hardware.detect().arch
    arrays = {"x": x, "router_logits": logits.astype("float32"), "w13": w13, "w2": w2}
    meta = {name: torch.empty(a.shape, dtype=getattr(torch, str(a.dtype)), device="meta")
            for name, a in arrays.items()}
    plan = triton_moe.plan(meta, top_k, configs.moe_config(arch, "bf16", x.shape[0]))
    return plan_function(plan, meta)(arrays)


def _check_outputs_last(launch: Any, pointers: list[str], written: set[int]) -> None:
    """Refuse a launch whose written-only pointer comes before a pointer it reads: jax-triton would bind the
    buffers in the wrong order and the kernel would write into its inputs."""
    kinds = ["out" if id(launch.args[name]) in written else "in" for name in pointers]
    if "out" in kinds and "in" in kinds[kinds.index("out"):]:
        raise ValueError(f"{launch.name}: its output parameters must follow its input pointers for jax-triton "
                         f"(pointer order: {', '.join(f'{n} ({k})' for n, k in zip(pointers, kinds))})")


def _runtime_parameters(kernel: Any) -> list[str]:
    """The kernel's parameters that are not compile-time constants, in declaration order: the order in which
    jax-triton numbers operands (for `input_output_aliases`) and binds outputs to unnamed parameters. Read from
    the signature, which a compiled and an interpreted kernel both carry."""
    return [name for name, parameter in inspect.signature(kernel.fn).parameters.items()
            if "constexpr" not in str(parameter.annotation)]


def _jax_dtype(dtype: Any) -> Any:
    """The JAX dtype of a torch dtype the plans use."""
    import jax.numpy as jnp

    return {"torch.bfloat16": jnp.bfloat16, "torch.float16": jnp.float16, "torch.float32": jnp.float32,
            "torch.int32": jnp.int32}[str(dtype)]


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
