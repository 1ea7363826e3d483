"""A Mixtral-8x7B-shaped decoder in JAX, random weights, for the model lane: prefill and decode steps whose MoE
layer is swappable, timed as a JAX user runs them.

The AMD talk behind flybench claims FlyDSL's fused MoE GEMM made Mixtral in
MaxText 2.5x faster in prefill and 3.5x in decode, against `jax.lax.ragged_dot`.
A kernel benchmark cannot track a claim of that kind; a model step can. This
module is the step: real dimensions (MIXTRAL), fewer layers so the weights fit
one GPU, RMSNorm, rotary embeddings, grouped-query attention with a KV cache,
and a top-2 MoE of SwiGLU experts. The MoE is one of `MOE_LAYERS`, each the
same function a kernel-lane provider times (`xla`, `xla-dense`, and
`jax-triton`'s Triton MoE inside the jit), so the model and the kernel lane
share one formulation. Everything else is the
same code for every variant.

No weights are downloaded: they are seeded random, scaled so activations stay
in range through the layers, which is all a step's speed depends on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from flybench.providers import jax_custom_call, xla


@dataclass(frozen=True)
class Config:
    """A decoder's dimensions."""

    layers: int
    hidden: int
    intermediate: int
    experts: int
    top_k: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    @property
    def weights_bytes_bf16(self) -> int:
        per_layer = (self.hidden * self.head_dim * (self.heads + 2 * self.kv_heads) + self.heads * self.head_dim
                     * self.hidden + self.experts * 3 * self.hidden * self.intermediate + self.hidden * self.experts)
        return 2 * (self.layers * per_layer + 2 * self.vocab * self.hidden)


MIXTRAL = Config(layers=32, hidden=4096, intermediate=14336, experts=8, top_k=2, heads=32, kv_heads=8, head_dim=128,
                 vocab=32000)
"""Mixtral-8x7B's dimensions; the lane runs fewer layers (`with_layers`)."""
TINY = Config(layers=2, hidden=64, intermediate=96, experts=4, top_k=2, heads=4, kv_heads=2, head_dim=16, vocab=128)
"""Seconds on a CPU: the tests' model."""
ROLES = {"norm": "role_norms", "attention": "role_attention", "routing": "role_routing", "moe": "role_moe",
         "head": "role_head"}
"""The step's parts as named scopes: a profiler trace's kernels are attributed to a role through them."""
MOE_LAYERS: dict[str, Callable[..., dict]] = {"ragged_dot": xla.moe_ragged, "dense": xla.moe_dense,
                                              "triton": jax_custom_call.moe}
"""MoE formulations, by name: XLA's grouped `ragged_dot` (the stock path), the dense masked path, and the
project's fused Triton MoE as XLA custom calls (jax-triton; a GPU only)."""


def with_layers(config: Config, layers: int) -> Config:
    return replace(config, layers=layers)


def init(config: Config, dtype: str, seed: int = 0) -> dict[str, Any]:
    """Seeded random weights in `dtype`, each matrix scaled by 1/sqrt(fan-in)."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(seed)

    def matrix(*shape: int) -> jax.Array:
        nonlocal key
        key, sub = jax.random.split(key)
        return (jax.random.normal(sub, shape, jnp.float32) / math.sqrt(shape[-1])).astype(dtype)

    c = config
    layers = [{"attn_norm": jnp.ones((c.hidden,), dtype), "moe_norm": jnp.ones((c.hidden,), dtype),
               "wq": matrix(c.heads * c.head_dim, c.hidden), "wk": matrix(c.kv_heads * c.head_dim, c.hidden),
               "wv": matrix(c.kv_heads * c.head_dim, c.hidden), "wo": matrix(c.hidden, c.heads * c.head_dim),
               "router": matrix(c.experts, c.hidden), "w13": matrix(c.experts, 2 * c.intermediate, c.hidden),
               "w2": matrix(c.experts, c.hidden, c.intermediate)} for _ in range(c.layers)]
    return {"embed": matrix(c.vocab, c.hidden), "final_norm": jnp.ones((c.hidden,), dtype),
            "lm_head": matrix(c.vocab, c.hidden), "layers": layers}


def for_moe(params: dict[str, Any], moe: str) -> dict[str, Any]:
    """The weights laid out as the MoE formulation takes them (ragged_dot wants [E, K, N]: transposed once)."""
    if moe != "ragged_dot":
        return params
    return {**params, "layers": [{**layer, **dict(zip(("w13", "w2"), xla.ragged_weights(layer["w13"], layer["w2"])))}
                                 for layer in params["layers"]]}


def empty_cache(config: Config, batch: int, length: int, dtype: str) -> dict[str, Any]:
    import jax.numpy as jnp

    shape = (config.layers, batch, length, config.kv_heads, config.head_dim)
    return {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}


def step(params: dict[str, Any], tokens, cache: dict[str, Any], position, *, config: Config, moe: str) -> tuple:
    """One forward step over `tokens` [B, T] written into the KV cache from `position` on: prefill (T > 1) or
    decode (T = 1). Returns the last token's logits [B, vocab] in float32 and the updated cache."""
    import jax
    import jax.numpy as jnp

    c = config
    batch, length = tokens.shape
    x = params["embed"][tokens]
    positions = position + jnp.arange(length)
    cos, sin = _rotary(positions, c.head_dim)
    keys_len = cache["k"].shape[2]
    visible = jnp.arange(keys_len)[None, :] <= positions[:, None]  # causal over the cache, [T, keys]
    new_k, new_v = [], []
    for i, layer in enumerate(params["layers"]):
        with jax.named_scope(ROLES["norm"]):
            h = _rms_norm(x, layer["attn_norm"])
        with jax.named_scope(ROLES["attention"]):
            q = (h @ layer["wq"].T).reshape(batch, length, c.heads, c.head_dim)
            k = (h @ layer["wk"].T).reshape(batch, length, c.kv_heads, c.head_dim)
            v = (h @ layer["wv"].T).reshape(batch, length, c.kv_heads, c.head_dim)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            k_all = jax.lax.dynamic_update_slice(cache["k"][i], k, (0, position, 0, 0))
            v_all = jax.lax.dynamic_update_slice(cache["v"][i], v, (0, position, 0, 0))
            new_k.append(k_all)
            new_v.append(v_all)
            attended = jax.nn.dot_product_attention(q, k_all, v_all, mask=visible[None, None],
                                                    scale=1 / math.sqrt(c.head_dim))
            x = x + attended.reshape(batch, length, c.heads * c.head_dim) @ layer["wo"].T
        with jax.named_scope(ROLES["norm"]):
            h = _rms_norm(x, layer["moe_norm"]).reshape(batch * length, c.hidden)
        with jax.named_scope(ROLES["routing"]):
            logits = h @ layer["router"].T
        with jax.named_scope(ROLES["moe"]):
            x = x + MOE_LAYERS[moe](h, logits, layer["w13"], layer["w2"], top_k=c.top_k)["out"].reshape(x.shape)
    with jax.named_scope(ROLES["head"]):
        last = _rms_norm(x[:, -1], params["final_norm"])
        return (last @ params["lm_head"].T).astype(jnp.float32), {"k": jnp.stack(new_k), "v": jnp.stack(new_v)}


def _rms_norm(x, weight, eps: float = 1e-5):
    import jax
    import jax.numpy as jnp

    f = x.astype(jnp.float32)
    return (f * jax.lax.rsqrt(jnp.mean(f * f, axis=-1, keepdims=True) + eps)).astype(x.dtype) * weight


def _rotary(positions, dim: int, base: float = 1e6):
    import jax.numpy as jnp

    inv = 1.0 / base ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    angles = positions.astype(jnp.float32)[:, None] * inv[None, :]
    return jnp.cos(angles), jnp.sin(angles)


def _rope(x, cos, sin):
    import jax.numpy as jnp

    f = x.astype(jnp.float32)
    even, odd = f[..., 0::2], f[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return jnp.stack([even * c - odd * s, even * s + odd * c], axis=-1).reshape(x.shape).astype(x.dtype)


def compiled(config: Config, moe: str) -> Callable:
    """`step` jit-compiled for one configuration and MoE (the cache donated: decode updates it in place)."""
    import jax

    return jax.jit(partial(step, config=config, moe=moe), donate_argnums=(2,))
