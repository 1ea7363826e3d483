"""Where a model-lane step's device time goes, and the Amdahl check of two variants: the CLI of
`flybench.model.attribution` on a Mixtral-shaped step at real dimensions.

A JAX profiler trace of the step, each kernel's time attributed to a role
(norms, attention, routing, MoE, head) through the named scopes of
`flybench.model.mixtral`; the roles' sum set against the measured step time.
Run with `XLA_FLAGS=--xla_gpu_enable_command_buffer=` on a GPU (the report
records the flags and the step time under them). `--compare BASE HEAD` reads
two reports and prints the head's speed over the base, measured and as
replacing only the MoE's kernel time predicts.

    XLA_FLAGS=--xla_gpu_enable_command_buffer= \
        python -m studies.model_attribution --layers 4 --moe ragged_dot --phase prefill --tokens 2048 --out DIR

    python -m studies.model_attribution --compare DIR/attribution-ragged_dot-prefill-2048.json \
        DIR/attribution-triton-prefill-2048.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from flybench.model import attribution, mixtral


def compare(base_path: Path, head_path: Path) -> str:
    """The sentence a kernel engineer wants, from two reports of this script."""
    base, head = (json.loads(p.read_text()) for p in (base_path, head_path))
    check = attribution.amdahl(*(attribution.Attribution(r["step_ms"], r["roles_ms"]) for r in (base, head)))
    return (f"{head['moe']} is {check['measured']:.2f}x {base['moe']} in {head['phase']} {head['tokens']}, of "
            f"which the MoE kernels explain {check['predicted']:.2f}x (XLA_FLAGS: {head['xla_flags'] or 'none'})")


def main(argv: list[str] | None = None) -> int:
    import jax

    parser = argparse.ArgumentParser(prog="python -m studies.model_attribution", description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--moe", choices=list(mixtral.MOE_LAYERS), default="ragged_dot")
    parser.add_argument("--phase", choices=["prefill", "decode"], default="prefill")
    parser.add_argument("--tokens", type=int, default=2048, help="prefill: prompt length; decode: batch")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BASE", "HEAD"))
    args = parser.parse_args(argv)
    if args.compare:
        print(compare(*args.compare))
        return 0
    if args.out is None:
        parser.error("--out is required to attribute a step")
    config = mixtral.with_layers(mixtral.MIXTRAL, args.layers)
    params = mixtral.for_moe(mixtral.init(config, "bfloat16"), args.moe)
    batch, length = (1, args.tokens) if args.phase == "prefill" else (args.tokens, 1)
    cache_len = max(length, 1024)
    tokens = jax.random.randint(jax.random.PRNGKey(0), (batch, length), 0, config.vocab)
    step = jax.jit(lambda p, t, c, pos: mixtral.step(p, t, c, pos, config=config, moe=args.moe))
    cache = mixtral.empty_cache(config, batch, cache_len, "bfloat16")
    position = 0 if args.phase == "prefill" else cache_len // 2
    call = (params, tokens, cache, position)
    found = attribution.attribute(step.lower(*call).compile(), call, args.out / "trace", args.steps)
    report = {"moe": args.moe, "phase": args.phase, "tokens": args.tokens, "layers": args.layers,
              "xla_flags": os.environ.get("XLA_FLAGS", ""), "step_ms": found.step_ms,
              "kernels_ms": found.kernels_ms, "kernel_share_of_step": found.kernel_share,
              "roles_ms": found.roles_ms, "rest_top": found.rest_top, "events_per_step": found.events_per_step}
    (args.out / f"attribution-{args.moe}-{args.phase}-{args.tokens}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1, default=str)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
