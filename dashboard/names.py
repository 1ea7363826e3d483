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
    "xla": "XLA",
    "xla-dense": "XLA dense",
    "jax-triton": "Triton in jax.jit",
    "flydsl-jax": "FlyDSL in jax.jit",
    "ck": "CK (AITER)",
    "ck+append": "CK (AITER) + KV append",
    "aiter-asm": "AITER asm",
}


WORKLOAD_LABELS = {
    ("xla", "attention"): "XLA (dot_product_attention)",
    ("xla", "moe"): "XLA (ragged_dot)",
    ("xla", "mixtral_step"): "XLA (ragged_dot)",
    ("xla", "gemm"): "XLA (matmul)",
}
"""Where what a provider runs depends on the workload: XLA's attention is no ragged_dot."""


def provider_label(provider: Any, workload: Any = None) -> str:
    """The provider's display label (on `workload`, where that changes what runs); an id with no label (a
    provider of another suite) stays as it is."""
    if not isinstance(provider, str):
        return ""
    return WORKLOAD_LABELS.get((provider, workload)) or PROVIDER_LABELS.get(provider, provider)


def provider_labels(rows: Any, column: str = "provider") -> list[str]:
    """`provider_label` of each row's `column`, on the row's workload where the rows have one."""
    workloads = rows["workload"] if "workload" in rows else [None] * len(rows)
    return [provider_label(p, w) for p, w in zip(rows[column], workloads)]
