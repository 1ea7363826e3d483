"""The model lane's Mixtral-shaped decoder on a tiny model, on the CPU: both MoE formulations compute the same
step, bf16 stays near the float32 step, and decoding through the KV cache gives what a full prefill gives."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from flybench.model import mixtral  # noqa: E402

CONFIG = mixtral.TINY


def run(moe: str, dtype: str, tokens, cache_len: int = 16):
    params = mixtral.for_moe(mixtral.init(CONFIG, dtype), moe)
    cache = mixtral.empty_cache(CONFIG, tokens.shape[0], cache_len, dtype)
    return mixtral.compiled(CONFIG, moe)(params, tokens, cache, 0)


TOKENS = jax.random.randint(jax.random.PRNGKey(1), (2, 6), 0, CONFIG.vocab)


@pytest.mark.parametrize("moe", list(mixtral.MOE_LAYERS))
def test_a_bf16_step_stays_near_the_float32_step(moe: str) -> None:
    exact, _ = run(moe, "float32", TOKENS)
    fast, _ = run(moe, "bfloat16", TOKENS)
    error = float(jnp.max(jnp.abs(fast - exact)) / jnp.max(jnp.abs(exact)))
    assert fast.shape == (2, CONFIG.vocab) and 0 < error < 0.05


def test_the_moe_formulations_compute_the_same_step() -> None:
    ragged, _ = run("ragged_dot", "float32", TOKENS)
    dense, _ = run("dense", "float32", TOKENS)
    assert float(jnp.max(jnp.abs(ragged - dense))) < 1e-4 * float(jnp.max(jnp.abs(dense)))


@pytest.mark.parametrize("moe", list(mixtral.MOE_LAYERS))
def test_decoding_through_the_cache_gives_what_a_full_prefill_gives(moe: str) -> None:
    params = mixtral.for_moe(mixtral.init(CONFIG, "float32"), moe)
    step = mixtral.compiled(CONFIG, moe)
    full, _ = step(params, TOKENS, mixtral.empty_cache(CONFIG, 2, 16, "float32"), 0)
    logits, cache = step(params, TOKENS[:, :4], mixtral.empty_cache(CONFIG, 2, 16, "float32"), 0)
    for position in (4, 5):
        logits, cache = step(params, TOKENS[:, position:position + 1], cache, position)
    assert float(jnp.max(jnp.abs(logits - full))) < 1e-4 * float(jnp.max(jnp.abs(full)))


def test_the_weights_of_mixtral_at_four_layers_fit_one_gpu() -> None:
    size = mixtral.with_layers(mixtral.MIXTRAL, 4).weights_bytes_bf16
    assert 11e9 < size < 13e9  # 4 of Mixtral's 32 layers: 2.9 GB a layer, plus embeddings
