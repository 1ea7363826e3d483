"""The model lane's cases run: a Mixtral-shaped decoder step (`flybench.model.mixtral`) as a benchmark case.

A `mixtral_step` case (`flybench.workloads.mixtral_step`) names a prefill or a
decode step; the providers `xla`, `xla-dense` and `jax-triton` each run it
with their MoE layer (`MOE_OF_PROVIDER`) through `Step` and `runner`, and the
workload's float32 reference is `reference`. So model rows go through `flybench run`,
asv, the store, the dashboard and the alerts like every kernel case.

The weights are seeded random (`mixtral.init`, seed `WEIGHTS_SEED`): the bf16
weights are the float32 reference's, rounded. The inputs are token ids: the
prompt, and for a decode step the one new token per sequence, which is
decoded at position `context` after the prompt was prefilled into the KV
cache outside the timed call. A decode runner feeds each call's cache to the
next (the cache is donated, as a serving loop decodes); the step rewrites
the same position each call, so every call does the same work.

Each record carries the conditions a model figure needs beside it
(`conditions`): precision, batch, sequence, the MoE FLOPs the layer performs
(ragged_dot and Triton do the routed work, the dense layer every expert's)
and the XLA flags in force.
"""

from __future__ import annotations

import os
from typing import Any

from flybench.model import mixtral
from flybench.workloads.base import Case, Tensors

WEIGHTS_SEED = 0
CONFIGS = {"mixtral": mixtral.MIXTRAL, "tiny": mixtral.TINY}
MOE_OF_PROVIDER = {"xla": "ragged_dot", "xla-dense": "dense", "jax-triton": "triton"}
"""The MoE layer each provider runs in the step; the rest of the step is the same code for all."""
REFERENCE_MOE = "ragged_dot"
"""The float32 reference's MoE layer: XLA runs it in any precision (the Triton layer is bf16 only)."""


class Step:
    """What builds a `mixtral_step` case for one provider (`MixtralStepWorkload.built_by`): the step with the MoE
    layer that provider times (`MOE_OF_PROVIDER`), and the provider's account of what ran with the conditions of
    the figure beside it. The provider only says whether it can run here; it never imports the model."""

    def __init__(self, provider: Any) -> None:
        self.provider, self.name, self.moe = provider, provider.name, MOE_OF_PROVIDER[provider.name]

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Any):
        return runner(case, self.moe, inputs)

    def implementation(self, case: Case, dtype: str) -> dict[str, Any]:
        return {**self.provider.implementation(case, dtype), "conditions": conditions(case, self.moe)}


def config_of(case: Case) -> mixtral.Config:
    return mixtral.with_layers(CONFIGS[case.shape["config"]], case.shape["layers"])


def moe_flops(config: mixtral.Config, tokens: int, moe: str) -> float:
    """The MoE GEMMs' FLOPs of one step over `tokens` tokens, as the layer performs them (gate+up and down, every
    layer): the routed top-k experts' for ragged_dot and Triton, every expert's for the dense layer."""
    experts = config.experts if moe == "dense" else config.top_k
    return 2.0 * tokens * experts * 3 * config.hidden * config.intermediate * config.layers


def conditions(case: Case, moe: str) -> dict[str, Any]:
    """What a model figure holds only under: stored with every record, printed beside every speedup."""
    p = case.shape
    return {"precision": "bf16", "phase": p["phase"], "batch": p["batch"], "tokens": p["tokens"],
            "context": p["context"], "layers": p["layers"], "moe": moe,
            "moe_flops": moe_flops(config_of(case), p["batch"] * p["tokens"], moe),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def runner(case: Case, moe: str, inputs: Tensors):
    """The timed call of `case` with `moe` as the MoE layer, in bf16: it returns the last token's logits as "out"
    and blocks until they are ready (host-timed, as every JAX provider)."""
    import jax

    from flybench.measure.timing import host_timed
    from flybench.providers.xla import to_jax, to_torch

    config = config_of(case)
    params = mixtral.for_moe(mixtral.init(config, "bfloat16", seed=WEIGHTS_SEED), moe)
    prompt = to_jax(inputs["prompt"])
    if case.shape["phase"] == "prefill":
        step = jax.jit(lambda p, t, c: mixtral.step(p, t, c, 0, config=config, moe=moe))
        cache = mixtral.empty_cache(config, case.shape["batch"], case.shape["tokens"], "bfloat16")

        def prefill() -> Tensors:
            return {"out": to_torch(jax.block_until_ready(step(params, prompt, cache)[0]))}

        return host_timed(prefill)
    state = {"cache": _prefilled(config, moe, params, prompt, case, "bfloat16")}
    token, position = to_jax(inputs["next"]), case.shape["context"]
    step = mixtral.compiled(config, moe)

    def decode() -> Tensors:
        logits, state["cache"] = step(params, token, state["cache"], position)
        return {"out": to_torch(jax.block_until_ready(logits))}

    return host_timed(decode)


def reference(case: Case, inputs: Tensors) -> Tensors:
    """The same step in float32 with the reference MoE layer, on the inputs' device."""
    import jax

    from flybench.providers.xla import to_jax, to_torch

    config = config_of(case)
    params = mixtral.for_moe(mixtral.init(config, "float32", seed=WEIGHTS_SEED), REFERENCE_MOE)
    prompt = to_jax(inputs["prompt"])
    step = mixtral.compiled(config, REFERENCE_MOE)
    if case.shape["phase"] == "prefill":
        cache = mixtral.empty_cache(config, case.shape["batch"], case.shape["tokens"], "float32")
        logits, _ = step(params, prompt, cache, 0)
    else:
        cache = _prefilled(config, REFERENCE_MOE, params, prompt, case, "float32")
        logits, _ = step(params, to_jax(inputs["next"]), cache, case.shape["context"])
    return {"out": to_torch(jax.block_until_ready(logits)).clone()}


def _prefilled(config: mixtral.Config, moe: str, params: dict, prompt, case: Case, dtype: str) -> dict:
    """The KV cache after prefilling the prompt, with room for the decoded token."""
    cache = mixtral.empty_cache(config, case.shape["batch"], case.shape["context"] + 1, dtype)
    return mixtral.compiled(config, moe)(params, prompt, cache, 0)[1]
