"""The model lane's Mixtral-shaped decoder on a tiny model, on the CPU: the MoE formulations compute the same
step, bf16 stays near the float32 step, and decoding through the KV cache gives what a full prefill gives. The
Triton MoE layer runs its kernels in Triton's interpreter (a subprocess), the rest in XLA on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from flybench.model import mixtral  # noqa: E402

CONFIG = mixtral.TINY
XLA_MOE = ("ragged_dot", "dense")
"""The MoE layers XLA runs on a CPU; `triton` launches GPU kernels (its test runs them interpreted)."""


def run(moe: str, dtype: str, tokens, cache_len: int = 16):
    params = mixtral.for_moe(mixtral.init(CONFIG, dtype), moe)
    cache = mixtral.empty_cache(CONFIG, tokens.shape[0], cache_len, dtype)
    return mixtral.compiled(CONFIG, moe)(params, tokens, cache, 0)


TOKENS = jax.random.randint(jax.random.PRNGKey(1), (2, 6), 0, CONFIG.vocab)


@pytest.mark.parametrize("moe", XLA_MOE)
def test_a_bf16_step_stays_near_the_float32_step(moe: str) -> None:
    exact, _ = run(moe, "float32", TOKENS)
    fast, _ = run(moe, "bfloat16", TOKENS)
    error = float(jnp.max(jnp.abs(fast - exact)) / jnp.max(jnp.abs(exact)))
    assert fast.shape == (2, CONFIG.vocab) and 0 < error < 0.05


def test_the_moe_formulations_compute_the_same_step() -> None:
    ragged, _ = run("ragged_dot", "float32", TOKENS)
    dense, _ = run("dense", "float32", TOKENS)
    assert float(jnp.max(jnp.abs(ragged - dense))) < 1e-4 * float(jnp.max(jnp.abs(dense)))


@pytest.mark.parametrize("moe", XLA_MOE)
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


def test_the_triton_moe_layer_computes_the_step_inside_the_model() -> None:
    pytest.importorskip("triton")
    script = Path(__file__).parent / "helpers" / "interpreted_jax_triton.py"
    done = subprocess.run([sys.executable, str(script), "model"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shape"] == [2, CONFIG.vocab] and result["moe_calls"] == CONFIG.layers
    assert 0 < result["error"] < 0.05  # bf16 Triton MoE against the float32 step with the dense MoE

