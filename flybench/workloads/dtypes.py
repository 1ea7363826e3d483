"""Names of element types as flybench spells them, mapped to torch dtypes lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def torch_dtype(name: str) -> "torch.dtype":
    """bf16 -> torch.bfloat16 and so on; fp8 is e4m3 (OCP) unless a provider picks fnuz."""
    import torch

    return {
        "fp32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "fp8": torch.float8_e4m3fn,
    }[name]
