"""What a JAX program pays to call a non-XLA kernel through DLPack, measured against calling it from torch.

FlyDSL kernels run inside JAX by handing JAX arrays to the kernel through
DLPack (`flydsl.from_dlpack` takes JAX arrays). No AMD GPU is available to
this project, so the same bridge is measured on the H200 with the project's
Triton kernels standing in for FlyDSL's: per call, the JAX caller's arrays
become torch tensors (`torch.from_dlpack`, zero-copy; JAX's stream is
synchronised with torch's by the protocol), the kernel plan is built and
launched, and the outputs go back (`jax.dlpack.from_dlpack`). Three ways of
calling are timed in interleaved rounds, each with the host clock:

- `launch`: the plan built once, only launched (the floor);
- `torch`: plan built and launched from torch tensors per call (what a torch caller pays);
- `jax`: the same from JAX arrays through DLPack, outputs returned as JAX arrays.

`latency` is one call followed by a full synchronisation (median over
rounds); `throughput` is the time per call of a burst of calls with one
synchronisation at the end. The bridge cost is jax - torch. The bridged
outputs are checked against the torch path's first (equal up to the order of
the MoE's atomic adds).

    python -m studies.jax_bridge --out bridge.json
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
         ("moe", "mixtral8x7b-t16", "bf16"),
         ("moe", "mixtral8x7b-t1024", "bf16"))
ROUNDS, BURST = 30, 50


def callers(workload: str, case_name: str, dtype: str) -> dict[str, Callable[[], Any]]:
    """The three ways of calling one case's kernels, on the same input memory."""
    import jax
    import jax.numpy as jnp
    import torch

    from flybench import hardware
    from flybench.kernels.triton import cases
    from flybench.workloads import get_workload

    device = hardware.detect()
    units = torch.cuda.get_device_properties(0).multi_processor_count
    work = get_workload(workload)
    case = work.case(case_name)
    inputs = work.make_inputs(case, dtype, device.torch_device, seed=0)
    owned = {k: jnp.copy(jax.dlpack.from_dlpack(v.contiguous())) for k, v in inputs.items()}  # JAX's own buffers
    jax.block_until_ready(owned)
    plan = cases.build(case, dtype, inputs, device.arch, units)

    def from_torch() -> dict:
        return cases.build(case, dtype, inputs, device.arch, units)()

    def from_jax() -> dict:
        tensors = {k: torch.from_dlpack(v) for k, v in owned.items()}
        out = cases.build(case, dtype, tensors, device.arch, units)()
        return {k: jax.dlpack.from_dlpack(v) for k, v in out.items()}

    return {"launch": plan, "torch": from_torch, "jax": from_jax}


def synchronise() -> None:
    import jax
    import torch

    torch.cuda.synchronize()
    jax.effects_barrier()


def largest_difference(calls: dict[str, Callable[[], Any]]) -> float:
    """Max |jax - torch| over the outputs, relative to the output's largest value (atomics reorder sums)."""
    import torch

    direct = calls["torch"]()
    bridged = {k: torch.from_dlpack(v) for k, v in calls["jax"]().items()}
    synchronise()
    return max(float((bridged[k].float() - v.float()).abs().max() / v.float().abs().max().clamp_min(1e-30))
               for k, v in direct.items())


def timed(calls: dict[str, Callable[[], Any]]) -> dict[str, dict[str, float]]:
    """Median latency and burst time per call (microseconds) of each caller, rounds interleaved."""
    latency: dict[str, list[float]] = {name: [] for name in calls}
    burst: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():  # warm-up: compiles, allocator, JAX's first transfers
        for _ in range(3):
            call()
    synchronise()
    for _ in range(ROUNDS):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            synchronise()
            latency[name].append((time.perf_counter() - start) * 1e6)
            start = time.perf_counter()
            for _ in range(BURST):
                call()
            synchronise()
            burst[name].append((time.perf_counter() - start) * 1e6 / BURST)
    return {name: {"latency_us": statistics.median(latency[name]), "per_call_in_burst_us": statistics.median(burst[name])}
            for name in calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    import jax
    import torch

    if not torch.cuda.is_available() or jax.default_backend() == "cpu":
        print("needs a GPU that both torch and JAX see", file=sys.stderr)
        return 2
    results = []
    for workload, case, dtype in CASES:
        calls = callers(workload, case, dtype)
        row: dict[str, Any] = {"workload": workload, "case": case, "dtype": dtype, "max_relative_difference": largest_difference(calls)}
        row.update(timed(calls))
        row["bridge_latency_us"] = row["jax"]["latency_us"] - row["torch"]["latency_us"]
        row["bridge_per_call_us"] = row["jax"]["per_call_in_burst_us"] - row["torch"]["per_call_in_burst_us"]
        results.append(row)
        print(json.dumps(row), flush=True)
    meta = {"torch": torch.__version__, "jax": jax.__version__, "device": torch.cuda.get_device_name(),
            "rounds": ROUNDS, "burst": BURST}
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"meta": meta, "results": results}, handle, indent=1)
    return 0 if all(r["max_relative_difference"] < 1e-3 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
