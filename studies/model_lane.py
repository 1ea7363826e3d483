"""The model lane's first figures: prefill and decode tokens/s of a Mixtral-shaped decoder in JAX, per MoE layer.

Random weights of Mixtral-8x7B's dimensions at `--layers` layers (so they fit
one GPU), bf16, the MoE swapped between XLA's `ragged_dot` (the stock path
the AMD talk measured against) and the dense masked path. Before timing, each
variant's bf16 logits are checked against a float32 run of the same weights.
A step is timed as a JAX user pays for it: the jitted call from Python until
its result is ready, median of `--repeats` after a warm-up. Every row carries
its conditions: precision, batch, sequence, the MoE FLOPs the formulation
performs (ragged_dot does the routed work; dense does every expert), and
XLA_FLAGS.

    python -m studies.model_lane --layers 4 --out docs/data/model-lane.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from flybench.model import lane, mixtral


def timed(function, repeats: int) -> float:
    """Median seconds of `function()` (which blocks until its result is ready), after one warm-up call."""
    function()
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        function()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def checked(config: mixtral.Config, moe: str, prompt: int) -> float:
    """The bf16 step's largest logit error against the float32 step of the same weights, relative to the largest
    logit. The float32 step runs the MoE as `ragged_dot`, which XLA runs in any precision (the Triton MoE is
    bf16 only)."""
    import jax
    import jax.numpy as jnp

    tokens = jax.random.randint(jax.random.PRNGKey(7), (1, prompt), 0, config.vocab)
    out = {}
    for dtype, layer in (("float32", "ragged_dot"), ("bfloat16", moe)):
        params = mixtral.for_moe(mixtral.init(config, dtype), layer)
        logits, _ = mixtral.compiled(config, layer)(params, tokens, mixtral.empty_cache(config, 1, prompt, dtype), 0)
        out[dtype] = jax.block_until_ready(logits)
        del params
    return float(jnp.max(jnp.abs(out["bfloat16"] - out["float32"])) / jnp.max(jnp.abs(out["float32"])))


def measure(config: mixtral.Config, moe: str, prompts: list[int], batches: list[int], cache: int,
            repeats: int) -> list[dict]:
    import jax

    params = mixtral.for_moe(mixtral.init(config, "bfloat16"), moe)
    step = mixtral.compiled(config, moe)
    rows = []
    for prompt in prompts:
        tokens = jax.random.randint(jax.random.PRNGKey(prompt), (1, prompt), 0, config.vocab)
        seconds = timed(lambda: jax.block_until_ready(
            step(params, tokens, mixtral.empty_cache(config, 1, prompt, "bfloat16"), 0)[0]), repeats)
        rows.append({"phase": "prefill", "moe": moe, "batch": 1, "tokens": prompt, "ms": 1e3 * seconds,
                     "tokens_per_s": prompt / seconds, "moe_tflop": lane.moe_flops(config, prompt, moe) / 1e12})
        print(json.dumps(rows[-1]), flush=True)
    for batch in batches:
        tokens = jax.random.randint(jax.random.PRNGKey(batch), (batch, cache // 2), 0, config.vocab)
        _, kv = step(params, tokens, mixtral.empty_cache(config, batch, cache, "bfloat16"), 0)
        state = {"kv": kv, "at": cache // 2}
        one = tokens[:, :1]

        def decode() -> None:
            logits, state["kv"] = step(params, one, state["kv"], state["at"])
            jax.block_until_ready(logits)
            state["at"] = min(state["at"] + 1, cache - 1)

        seconds = timed(decode, repeats)
        rows.append({"phase": "decode", "moe": moe, "batch": batch, "tokens": batch, "context": cache // 2,
                     "ms": 1e3 * seconds, "tokens_per_s": batch / seconds,
                     "moe_tflop": lane.moe_flops(config, batch, moe) / 1e12})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    import jax

    parser = argparse.ArgumentParser(prog="python -m studies.model_lane", description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompts", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--cache", type=int, default=1024, help="decode: KV cache length (half filled first)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--moe", nargs="+", default=list(mixtral.MOE_LAYERS), choices=list(mixtral.MOE_LAYERS))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    config = mixtral.with_layers(mixtral.MIXTRAL, args.layers)
    document = {"model": "Mixtral-8x7B dimensions, random weights", "layers": args.layers, "precision": "bf16",
                "weights_gb": config.weights_bytes_bf16 / 1e9, "device": str(jax.devices()[0].device_kind),
                "jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""), "rows": [], "checks": {}}
    for moe in args.moe:
        document["checks"][moe] = {"prompt": 128, "max_error_vs_float32": checked(config, moe, 128)}
        print(moe, document["checks"][moe], flush=True)
        document["rows"] += measure(config, moe, args.prompts, args.batches, args.cache, args.repeats)
        args.out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
