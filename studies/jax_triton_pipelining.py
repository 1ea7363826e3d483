"""Why the Triton MoE is slow inside `jax.jit`: the same layer jitted (jax-triton) and launched from torch, timed,
and the kernels each route compiled compared.

Mixtral's MoE layer at 1,024 tokens (hidden 4096, inter 14336, 8 experts, top-2, bf16) is run as the model
lane runs it (`flybench.providers.jax_custom_call.moe`, one jitted function of six `triton_call`s) and as the
kernel lane launches it (`flybench.kernels.triton.moe.plan`), each five times after a warm-up. For the jitted
route the host CPU time of each call is printed beside its wall time (a host-bound call spends them alike).
Then each route runs 3 calls under its own profiler (JAX's, torch's) and every kernel's device time a call is
printed beside the launch's grid and options, with the kernels that ran between them.
jax-triton writes what it compiled to `JAX_TRITON_DUMP_DIR`; torch's compiled kernels are read from their
JIT caches. For each GEMM kernel: the PTX target, wgmma and cp.async counts (cp.async is what Triton's
software pipeliner emits), the shared memory a block takes (one stage of A and B tiles against `num_stages`
of them) and the pointer arguments marked divisible by 16.

    python studies/jax_triton_pipelining.py      # on a GPU, with jax, jax-triton and triton

`--cross` needs no GPU: it cross-compiles the two GEMMs of that layer for sm_90 with Triton's own compiler,
specialised as each route specialises the plan's launches (`flybench.kernels.triton.specs`). Triton's JIT marks
integer arguments divisible by 16 when they are; jax-triton marks the array pointers only. While the sizes and
strides were run-time integers, jax-triton's compile could not prove the tiles' loads were 16-byte vectors and
Triton's pipeliner issued no asynchronous copies (0 cp.async against 94). The kernels now take them as
compile-time constants, and both routes compile the same pipeline.

    python studies/jax_triton_pipelining.py --cross
"""

from __future__ import annotations

import glob
import os
import pathlib
import re
import tempfile
import time

DUMP = os.environ.setdefault("JAX_TRITON_DUMP_DIR", tempfile.mkdtemp(prefix="jax-triton-dump-"))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

TOKENS, HIDDEN, INTER, EXPERTS, TOP_K = 1024, 4096, 14336, 8, 2
GEMMS = ("moe_gate_up", "moe_down")


def main() -> None:
    import jax
    import jax.numpy as jnp
    import torch

    from flybench.kernels.triton import configs
    from flybench.kernels.triton import moe as triton_moe
    from flybench.providers.jax_custom_call import moe

    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (TOKENS, HIDDEN), jnp.float32).astype(jnp.bfloat16)
    logits = jax.random.normal(key, (TOKENS, EXPERTS), jnp.float32)
    w13 = (jax.random.normal(key, (EXPERTS, 2 * INTER, HIDDEN), jnp.float32) * 0.02).astype(jnp.bfloat16)
    w2 = (jax.random.normal(key, (EXPERTS, HIDDEN, INTER), jnp.float32) * 0.02).astype(jnp.bfloat16)
    layer = jax.jit(lambda a, b, c, d: moe(a, b, c, d, top_k=TOP_K))
    jax.block_until_ready(layer(x, logits, w13, w2))
    calls = []
    for _ in range(5):
        wall, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(layer(x, logits, w13, w2))
        calls.append((round(1e3 * (time.perf_counter() - wall), 2), round(1e3 * (time.process_time() - cpu), 2)))
    print(f"jitted layer, (wall ms, host CPU ms) a call: {calls}", flush=True)

    tensors = {n: torch.from_dlpack(a) for n, a in {"x": x, "router_logits": logits, "w13": w13, "w2": w2}.items()}
    plan = triton_moe.plan(tensors, TOP_K, configs.moe_config("sm_90", "bf16", TOKENS))
    plan()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        wall = time.perf_counter()
        plan()
        torch.cuda.synchronize()
        times.append(round(1e3 * (time.perf_counter() - wall), 2))
    print(f"torch-launched layer, wall ms a call: {times}", flush=True)

    print("kernel by kernel, one profiler trace a route (us a call, mean of 3 calls; grid; launch options):")
    jitted, launched = jit_kernels(layer, (x, logits, w13, w2)), torch_kernels(plan)
    for launch in plan.launches:
        print(f"  {launch.name}: jitted {jitted.get(launch.name, float('nan')):.1f}, torch "
              f"{launched.get(launch.name, float('nan')):.1f}; grid {launch.grid}, options {launch.options}")
    for route, kernels in (("jitted", jitted), ("torch", launched)):
        others = {k: round(v, 1) for k, v in kernels.items() if k not in {l.name for l in plan.launches}}
        print(f"  {route}: other kernels {others}", flush=True)
    for launch in (launch for launch in plan.launches if launch.name in GEMMS):
        print(f"{launch.name}: grid {launch.grid}, options {launch.options}", flush=True)
        for caches in launch.kernel.device_caches.values():
            for compiled in list(caches[0].values())[:1]:
                print("  torch:", describe(compiled.asm["ptx"], compiled.asm["ttgir"], compiled.metadata.shared))
        dumped = glob.glob(f"{DUMP}/*/{launch.name}.ttgir")
        if dumped:
            folder = os.path.dirname(dumped[0])
            ptx = open(os.path.join(folder, f"{launch.name}.ptx")).read()
            ttgir = open(dumped[0]).read()
            shared = int(re.search(r"ttg\.shared = (\d+)", ttgir).group(1))
            print("  jax-triton:", describe(ptx, ttgir, shared))


def jit_kernels(layer, args, calls: int = 3) -> dict[str, float]:
    """Device us a call of each kernel the jitted layer ran, from a JAX profiler trace."""
    import jax

    from flybench.model.attribution import kernel_events

    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            for _ in range(calls):
                jax.block_until_ready(layer(*args))
        found: dict[str, float] = {}
        for event in kernel_events(pathlib.Path(folder)):
            found[event["name"]] = found.get(event["name"], 0.0) + event["dur"] / calls
    return found


def torch_kernels(plan, calls: int = 3) -> dict[str, float]:
    """Device us a call of each kernel the torch-launched plan ran, from a torch profiler trace."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(calls):
            plan()
        torch.cuda.synchronize()
    return {e.key: e.device_time_total / calls for e in profile.key_averages() if e.device_time_total > 0}


def cross() -> None:
    """The GEMMs of Mixtral's 1,024-token MoE compiled for sm_90 as each route specialises the plan's launches."""
    from flybench.kernels.triton import specs

    for launch in GEMMS:
        for label, marked in (("as Triton's JIT specialises it (pointers and integers)", True),
                              ("as jax-triton specialises it (pointers only)", False)):
            kernel = specs.launch_spec("sm_90", "moe", "mixtral8x7b-t1024", "bf16", launch,
                                       mark_integers=marked).compile("sm_90")
            ptx = kernel.asm["ptx"]
            print(f"{launch}, {label}: cp.async {ptx.count('cp.async')}, wgmma {ptx.count('wgmma')}, shared "
                  f"{kernel.metadata.shared:,} B", flush=True)


def describe(ptx: str, ttgir: str, shared: int) -> str:
    return (f"target {' '.join(re.findall(r'^[.]target (.*)$', ptx, re.M))}, wgmma {ptx.count('wgmma')}, "
            f"cp.async {ptx.count('cp.async')}, shared {shared:,} B, "
            f"pointers divisible by 16 {ttgir.count('tt.divisibility = 16')}")


if __name__ == "__main__":
    import sys

    cross() if "--cross" in sys.argv[1:] else main()
