"""The model lane: one decoder step of a Mixtral-8x7B-shaped model in JAX, prefill or decode, as a case.

The AMD talk behind flybench claims FlyDSL's fused MoE GEMM made Mixtral in
MaxText 2.5x faster in prefill and 3.5x in decode. A kernel case cannot
track a claim of that kind; this workload can: its case is a whole step of
the model (`flybench.model.mixtral`, random weights, Mixtral's dimensions at
`layers` layers so the weights fit one GPU), and each provider swaps only the
MoE layer (`flybench.model.lane.MOE_OF_PROVIDER`). This workload builds the
step around the provider's layer (`built_by`): the model lane takes its MoE
layers from the providers, and no provider imports the model lane. A kernel
change then shows up in the model lane it belongs to, with the same history
and alerts.

Inputs: `prompt` int32 [B, T] token ids (prefill: the step's tokens; decode:
the `context` tokens prefilled into the cache outside the timed call) and,
for decode, `next` int32 [B, 1]. Output: the last token's logits
[B, vocab] in float32. The reference is the same step in float32 with XLA's
ragged_dot MoE, run in JAX (the one workload whose reference is not plain
torch: the model is JAX code).

FLOPs are the step's useful work: projections, the routed experts (top-k,
not the dense layer's every expert), attention over the visible keys, and
the head for the last token. The minimum bytes are the weights the step must
read (the experts some token routes to, at most all of them), the KV cache
read and written, and the embedding rows.
"""

from __future__ import annotations

from functools import lru_cache

from flybench.workloads._inputs import generator
from flybench.workloads.base import Case, Tensors, Workload

_QUICK = (("prefill", 1, 2048, 0), ("decode", 1, 1, 512), ("decode", 8, 1, 512))
_FULL = (("prefill", 1, 128, 0), ("prefill", 1, 512, 0)) + _QUICK
_TINY = (("prefill", 2, 6, 0), ("decode", 2, 1, 6))
LANE_LAYERS = 4
"""Layers of the quick and full cases: 4 of Mixtral's 32, 12 GB of bf16 weights."""


def _case(config: str, layers: int, phase: str, batch: int, tokens: int, context: int) -> Case:
    suffix = f"t{tokens}" if phase == "prefill" else f"ctx{context}"
    shape = {"config": config, "layers": layers, "phase": phase, "batch": batch, "tokens": tokens,
             "context": context}
    return Case("mixtral_step", f"{config}-l{layers}-{phase}-b{batch}-{suffix}", shape,
                "Mixtral-8x7B" if config == "mixtral" else "tiny")


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    return {"tiny": [_case("tiny", 2, *c) for c in _TINY],
            "quick": [_case("mixtral", LANE_LAYERS, *c) for c in _QUICK],
            "full": [_case("mixtral", LANE_LAYERS, *c) for c in _FULL]}


class MixtralStepWorkload(Workload):
    name = "mixtral_step"
    dtypes = ("bf16",)
    description = "one decoder step of a Mixtral-8x7B-shaped model in JAX (model lane), the MoE layer swapped"
    tolerances = {"bf16": 5e-2}
    """bf16 rounding compounds through the layers: the logits of 4 layers at Mixtral's dimensions were 2.9-3.2% off
    the float32 step's on the H200 (largest error against the largest logit), over the 2% a single kernel gets.
    A wiring error is off by 100% or more."""

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        import torch

        from flybench.model.lane import config_of

        gen = generator(seed)
        p, vocab = case.shape, config_of(case).vocab
        length = p["tokens"] if p["phase"] == "prefill" else p["context"]
        inputs = {"prompt": torch.randint(1, vocab, (p["batch"], length), generator=gen, dtype=torch.int32)}
        if p["phase"] == "decode":
            inputs["next"] = torch.randint(1, vocab, (p["batch"], 1), generator=gen, dtype=torch.int32)
        return {name: tensor.to(device) for name, tensor in inputs.items()}

    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        from flybench.model.lane import reference

        return reference(case, inputs)

    def built_by(self, provider):
        """The model lane's step around the provider's MoE layer (`lane.Step`): the lane takes the layer from the
        provider, and the provider never sees the model."""
        from flybench.model import lane

        return lane.Step(provider)

    def flops(self, case: Case) -> float:
        from flybench.model.lane import config_of, moe_flops

        c, p = config_of(case), case.shape
        tokens = p["batch"] * p["tokens"]
        projections = 2.0 * c.hidden * c.head_dim * (2 * c.heads + 2 * c.kv_heads) + 2.0 * c.hidden * c.experts
        if p["phase"] == "prefill":  # causal: query i sees i + 1 keys
            keys_seen = p["batch"] * p["tokens"] * (p["tokens"] + 1) / 2
        else:
            keys_seen = p["batch"] * (p["context"] + 1)
        attention = 4.0 * c.heads * c.head_dim * keys_seen
        per_layers = c.layers * (tokens * projections + attention)
        return per_layers + moe_flops(c, tokens, "ragged_dot") + 2.0 * p["batch"] * c.hidden * c.vocab

    def min_bytes(self, case: Case, dtype: str) -> float:
        from flybench.model.lane import config_of

        c, p = config_of(case), case.shape
        tokens = p["batch"] * p["tokens"]
        experts_touched = min(c.experts, tokens * c.top_k)
        per_layer = (c.hidden * c.head_dim * (2 * c.heads + 2 * c.kv_heads) + c.hidden * c.experts
                     + experts_touched * 3 * c.hidden * c.intermediate)
        cache_rows = p["batch"] * (p["context"] + p["tokens"])  # read every visible key and value once
        cache = 2 * c.kv_heads * c.head_dim * (cache_rows + tokens)  # and write the step's own
        return 2.0 * (c.layers * (per_layer + cache) + c.vocab * c.hidden + tokens * c.hidden)
