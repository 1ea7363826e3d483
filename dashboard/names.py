"""What a provider is called on every page: the kernel that runs, not flybench's internal id.

One mapping, keyed by the provider's registered name (`flybench.providers.provider_names()`);
the id itself stays in the hovers and tables beside the label.
"""

from __future__ import annotations

from typing import Any

PROVIDER_LABELS = {
    "flydsl": "FlyDSL",
    "flydsl+append": "FlyDSL + KV append",
    "torch": "torch (SDPA / grouped GEMM)",
    "flex": "FlexAttention",
    "cublas": "cuBLAS loop",
    "rocblas": "rocBLAS loop",
    "hipblaslt": "hipBLASLt loop",
    "triton": "Triton (flybench)",
    "aiter-triton": "AITER Triton",
    "xla": "XLA (ragged_dot)",
    "xla-dense": "XLA dense",
    "jax-triton": "Triton in jax.jit",
    "flydsl-jax": "FlyDSL in jax.jit",
    "ck": "CK (AITER)",
    "ck+append": "CK (AITER) + KV append",
    "aiter-asm": "AITER asm",
}


def provider_label(provider: Any) -> str:
    """The provider's display label; an id with no label (a provider of another suite) stays as it is."""
    return PROVIDER_LABELS.get(provider, provider) if isinstance(provider, str) else ""
