"""How much of a model-lane decode step its kernels account for, with and without command buffers, three ways.

For the `mixtral_step` decode case (batch 1, context 512, 4 of Mixtral's layers, bf16) with ragged_dot (`xla`)
and the Triton MoE (`jax-triton`), the step is compiled as `flybench.model.attribution.compile_for_trace` compiles
it (kernels inside command buffers, or one launch a kernel) and measured:

- `blocked_ms`: a call timed until its logits are ready, 20 times (how the timing pass and the role split time a
  step: it includes the host's dispatch and the wait for the result);
- `pipelined_ms`: 20 calls dispatched back to back, then one wait (the host's dispatch hidden behind the device);
- from one profiler trace of 5 blocked calls: the kernels' device time a step, each step's device span (first
  kernel's start to last kernel's end) and the gaps between a step's kernels.

    python -m studies.decode_device_span        # on a GPU, with jax-triton
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

CASE = "mixtral-l4-decode-b1-ctx512"
STEP_GAP_US = 100
"""A gap between kernels longer than this separates two steps of the trace (within a step they are microseconds)."""


def main() -> None:
    import jax

    from flybench.model import attribution, roles

    for provider in ("xla", "jax-triton"):
        lowered, args, _ = roles.traced_step(CASE, provider, "bf16")
        for command_buffers in (True, False):
            compiled = attribution.compile_for_trace(lowered, command_buffers)
            jax.block_until_ready(compiled(*args))
            began = time.perf_counter()
            for _ in range(20):
                jax.block_until_ready(compiled(*args))
            blocked = (time.perf_counter() - began) / 20 * 1e3
            began = time.perf_counter()
            jax.block_until_ready([compiled(*args) for _ in range(20)])
            pipelined = (time.perf_counter() - began) / 20 * 1e3
            with tempfile.TemporaryDirectory() as folder:
                with jax.profiler.trace(folder, create_perfetto_trace=True):
                    for _ in range(5):
                        jax.block_until_ready(compiled(*args))
                kernels = sorted(attribution.kernel_events(Path(folder)), key=lambda e: e["ts"])
            gaps = [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(kernels, kernels[1:])]
            steps, current = [], [kernels[0]]
            for kernel, gap in zip(kernels[1:], gaps):
                if gap > STEP_GAP_US:
                    steps.append(current)
                    current = []
                current.append(kernel)
            steps.append(current)
            print(json.dumps({
                "provider": provider, "command_buffers": command_buffers, "blocked_ms": round(blocked, 3),
                "pipelined_ms": round(pipelined, 3),
                "kernels_ms_a_step": round(sum(e["dur"] for e in kernels) / 5 / 1e3, 3), "groups": len(steps),
                "span_ms": [round((s[-1]["ts"] + s[-1]["dur"] - s[0]["ts"]) / 1e3, 3) for s in steps],
                "in_step_gaps_ms_a_step": round(sum(g for g in gaps if 0 < g <= STEP_GAP_US) / 5 / 1e3, 3),
                "kernels_a_step": len(kernels) / 5}), flush=True)
        del lowered, args


if __name__ == "__main__":
    main()
