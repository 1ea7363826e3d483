"""What a kernel costs inside `jax.jit` through an XLA custom call, against calling it from torch and through DLPack.

The AMD JAX route runs FlyDSL kernels inside a jitted JAX program as XLA
custom calls. FlyDSL's JAX API is not in a release yet and no AMD GPU is
available here, so the same route is measured on the H200 with the
project's Triton diffusion-attention kernels, through `jax_triton.triton_call`
(an XLA custom call that launches a compiled Triton kernel). Each launch of
the torch plan (`flybench.kernels.triton.cases.build`) becomes one
`triton_call` with the same grid, arguments, compile-time constants and
options; a tensor the plan allocates is an output of the first launch that
writes it and an input of the launches after it.

Timed per case, interleaved rounds, host clock (as `studies/jax_bridge.py`
times the eager DLPack route):

- `torch`: the plan launched from torch (the floor: the bridge study's `launch`);
- `jit`: the jitted JAX function of the same launches on JAX's own arrays;
- `jit+ops`: the same with an elementwise op before (q * 2) and after (out * 2)
  the custom calls, which XLA cannot fuse into the call: the compiled HLO's
  fusions and custom calls are counted, and the extra time is set against
  the two ops jitted alone;
- `jit x10` and `torch x10`: the plan ten times in one jitted function (each
  output the next call's queries) and ten launches from torch, so the
  per-plan figure leaves out the one dispatch of a jitted call.

`latency` is one call and a wait for its outputs; `per_call_in_burst` is a
burst of calls with one wait at the end. Outputs are checked against the
float32 reference and against the torch plan's.

    python -m studies.jax_in_jit --out docs/data/h200-jax-in-jit.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

CASES = (("diffusion_attention", "llama3-8b-b8-ctx4k-d32-p64-bidir", "bf16"),
         ("diffusion_attention", "dream7b-b1-ctx32k-d32-p16-bidir", "bf16"),
         ("diffusion_attention", "llada8b-b8-ctx4k-d32-p16-bidir", "bf16"))
ROUNDS, BURST = 30, 50
CHAIN = 10


def jax_function(plan: Any, inputs: dict[str, Any], around: bool = False, chain: int = 1) -> Callable[..., Any]:
    """The provider's jitted function of the plan (`jax-triton`), optionally with ops around it or chained.

    `around` adds an elementwise op before and after; `chain` runs the plan
    that many times in the one function, each call's output the next one's
    queries (the same shape), so the calls cannot be merged and one dispatch
    covers them all.
    """
    import jax

    from flybench.providers.jax_custom_call import plan_function

    once = plan_function(plan, inputs)

    def run(arrays: dict[str, Any]) -> dict[str, Any]:
        q = arrays["q"] * 2 if around else arrays["q"]
        for _ in range(chain):
            result = once({**arrays, "q": q})
            q = result["out"]
        return {**result, "out": result["out"] * 2} if around else result

    return jax.jit(run)


def hlo_counts(fn: Callable[..., Any], arrays: dict[str, Any]) -> dict[str, int]:
    """Custom calls and fusions in the compiled module: what XLA launches around the kernels."""
    text = fn.lower(arrays).compile().as_text()
    return {"custom_calls": text.count("custom-call("), "fusions": text.count(" fusion("),
            "hlo_chars": len(text)}


def timed(calls: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]) -> dict[str, dict[str, float]]:
    """Median latency and burst time per call (microseconds), rounds interleaved; each call's own wait."""
    latency: dict[str, list[float]] = {name: [] for name in calls}
    burst: dict[str, list[float]] = {name: [] for name in calls}
    for call, wait in calls.values():
        for _ in range(5):
            wait(call())
    for _ in range(ROUNDS):
        for name, (call, wait) in calls.items():
            start = time.perf_counter()
            wait(call())
            latency[name].append((time.perf_counter() - start) * 1e6)
            start = time.perf_counter()
            for _ in range(BURST):
                last = call()
            wait(last)
            burst[name].append((time.perf_counter() - start) * 1e6 / BURST)
    return {name: {"latency_us": statistics.median(latency[name]),
                   "per_call_in_burst_us": statistics.median(burst[name])} for name in calls}


def measure(workload_name: str, case_name: str, dtype: str) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import torch

    from flybench import hardware
    from flybench.kernels.triton import cases
    from flybench.measure import correctness
    from flybench.workloads import get_workload

    device = hardware.detect()
    units = torch.cuda.get_device_properties(0).multi_processor_count
    workload = get_workload(workload_name)
    case = workload.case(case_name)
    inputs = {k: v.contiguous() for k, v in workload.make_inputs(case, dtype, device.torch_device, seed=0).items()}
    plan = cases.build(case, dtype, inputs, device.arch, units)
    arrays = {k: jnp.copy(jax.dlpack.from_dlpack(v)) for k, v in inputs.items()}  # JAX's own buffers
    jitted, around = jax_function(plan, inputs), jax_function(plan, inputs, around=True)
    chained = jax_function(plan, inputs, chain=CHAIN)
    ops_only = jax.jit(lambda a: {"q": a["q"] * 2, "out": a["q"] * 2})

    reference = workload.reference(case, inputs)
    direct = {k: v.clone() for k, v in plan().items()}
    bridged = {k: torch.from_dlpack(v) for k, v in jitted(arrays).items()}
    torch.cuda.synchronize()
    verdict = correctness.check(bridged, reference, dtype)
    difference = max(float((bridged[k].float() - v.float()).abs().max() / v.float().abs().max().clamp_min(1e-30))
                     for k, v in direct.items())

    def torch_wait(_: Any) -> None:
        torch.cuda.synchronize()

    times = timed({
        "torch": (plan, torch_wait),
        "jit": (lambda: jitted(arrays), jax.block_until_ready),
        "jit+ops": (lambda: around(arrays), jax.block_until_ready),
        "ops alone": (lambda: ops_only(arrays), jax.block_until_ready),
        f"jit x{CHAIN}": (lambda: chained(arrays), jax.block_until_ready),
        f"torch x{CHAIN}": (lambda: [plan() for _ in range(CHAIN)][-1], torch_wait),
    })
    return {"workload": workload_name, "case": case_name, "dtype": dtype, "launches": [l.name for l in plan.launches],
            "gate": {"passed": verdict.passed, "errors": verdict.errors, "reason": verdict.reason},
            "max_relative_difference_vs_torch": difference, "times": times,
            "hlo": {"jit": hlo_counts(jitted, arrays), "jit+ops": hlo_counts(around, arrays)},
            "in_jit_cost_latency_us": times["jit"]["latency_us"] - times["torch"]["latency_us"],
            "in_jit_cost_per_call_us": times["jit"]["per_call_in_burst_us"] - times["torch"]["per_call_in_burst_us"],
            "ops_extra_per_call_us": times["jit+ops"]["per_call_in_burst_us"] - times["jit"]["per_call_in_burst_us"],
            "per_plan_in_chain_us": {"jit": times[f"jit x{CHAIN}"]["per_call_in_burst_us"] / CHAIN,
                                     "torch": times[f"torch x{CHAIN}"]["per_call_in_burst_us"] / CHAIN}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.jax_in_jit", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as JSON here (rewritten after each case)")
    args = parser.parse_args(argv)
    import jax
    import torch

    if not torch.cuda.is_available() or jax.default_backend() == "cpu":
        print("needs a GPU that both torch and JAX see", file=sys.stderr)
        return 2
    import triton

    from flybench.providers.jax_custom_call import import_jax_triton

    jax_triton = import_jax_triton()

    meta = {"torch": torch.__version__, "jax": jax.__version__, "jax_triton": jax_triton.__version__,
            "triton": triton.__version__, "device": torch.cuda.get_device_name(), "rounds": ROUNDS, "burst": BURST}
    results = []
    for workload, case, dtype in CASES:
        try:
            row = measure(workload, case, dtype)
        except Exception as exc:  # noqa: BLE001 - a case that cannot run is recorded with why
            row = {"workload": workload, "case": case, "dtype": dtype, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        results.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "w") as handle:
                json.dump({"meta": meta, "results": results}, handle, indent=1)
    return 0 if all(r.get("gate", {}).get("passed") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
