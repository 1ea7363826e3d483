"""Where a model-lane step's device time goes: a JAX profiler trace of the step, each GPU kernel's time
attributed to a role (norms, attention, routing, MoE, head) through the named scopes of `flybench.model.mixtral`.

Each kernel event of the trace names the HLO instruction it ran (`hlo_op`); the
compiled module's text gives that instruction's `op_name` metadata, the
scope path it was traced under. A kernel whose instruction carries no scope
is "the rest". The roles' sum is set against the measured step time. XLA
runs a step's kernels inside CUDA-graph command buffers by default, and a
kernel in one names the buffer, not its instruction: run with
`XLA_FLAGS=--xla_gpu_enable_command_buffer=` to attribute (the report
records the flags and the step time under them).

    XLA_FLAGS=--xla_gpu_enable_command_buffer= \
        python -m studies.model_attribution --layers 4 --moe ragged_dot --phase prefill --tokens 2048 --out DIR
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

from flybench.model import mixtral

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*?metadata=\{[^}]*op_name=\"([^\"]+)\"", re.M)


def scopes(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> its op_name (the traced scope path)."""
    return {name: op for name, op in _INSTRUCTION.findall(hlo_text)}


def role_of(op_name: str) -> str:
    return next((role for role, scope in mixtral.ROLES.items() if f"/{scope}/" in f"/{op_name}/"), "rest")


def kernel_events(trace_dir: Path) -> list[dict]:
    """The GPU kernel events (complete events on a device's stream) of the newest perfetto trace."""
    path = max(trace_dir.rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    events = json.loads(gzip.open(path, "rt").read())
    events = events["traceEvents"] if isinstance(events, dict) else events
    return [e for e in events if e.get("ph") == "X" and isinstance(e.get("args"), dict)
            and ("hlo_op" in e["args"] or "kernel_details" in e["args"])]


def main(argv: list[str] | None = None) -> int:
    import jax

    parser = argparse.ArgumentParser(prog="python -m studies.model_attribution", description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--moe", choices=list(mixtral.MOE_LAYERS), default="ragged_dot")
    parser.add_argument("--phase", choices=["prefill", "decode"], default="prefill")
    parser.add_argument("--tokens", type=int, default=2048, help="prefill: prompt length; decode: batch")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    config = mixtral.with_layers(mixtral.MIXTRAL, args.layers)
    params = mixtral.for_moe(mixtral.init(config, "bfloat16"), args.moe)
    batch, length = (1, args.tokens) if args.phase == "prefill" else (args.tokens, 1)
    cache_len = max(length, 1024)
    tokens = jax.random.randint(jax.random.PRNGKey(0), (batch, length), 0, config.vocab)
    step = jax.jit(lambda p, t, c, pos: mixtral.step(p, t, c, pos, config=config, moe=args.moe))
    cache = mixtral.empty_cache(config, batch, cache_len, "bfloat16")
    position = 0 if args.phase == "prefill" else cache_len // 2
    compiled = step.lower(params, tokens, cache, position).compile()
    names = scopes(compiled.as_text())
    jax.block_until_ready(compiled(params, tokens, cache, position))
    began = time.perf_counter()
    for _ in range(args.steps):
        jax.block_until_ready(compiled(params, tokens, cache, position))
    step_ms = 1e3 * (time.perf_counter() - began) / args.steps
    trace_dir = args.out / "trace"
    with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
        for _ in range(args.steps):
            jax.block_until_ready(compiled(params, tokens, cache, position))
    events = kernel_events(trace_dir)
    by_role: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for e in events:
        op = e["args"].get("hlo_op", "")
        role = role_of(names.get(op, names.get(e.get("name", ""), "")))
        by_role[role] += e["dur"] / 1e3 / args.steps
        if role == "rest":
            unknown[op or e.get("name", "?")] += e["dur"] / 1e3 / args.steps
    kernels_ms = sum(by_role.values())
    report = {"moe": args.moe, "phase": args.phase, "tokens": args.tokens, "layers": args.layers,
              "xla_flags": os.environ.get("XLA_FLAGS", ""),
              "step_ms": step_ms, "kernels_ms": kernels_ms, "kernel_share_of_step": kernels_ms / step_ms,
              "roles_ms": dict(by_role), "rest_top": unknown.most_common(8), "events_per_step": len(events) / args.steps,
              "instructions_with_scope": len(names)}
    (args.out / f"attribution-{args.moe}-{args.phase}-{args.tokens}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1, default=str)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
