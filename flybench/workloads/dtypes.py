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


def device_dtype(name: str, device: str) -> "torch.dtype":
    """Like `torch_dtype`, but fp8 is the e4m3 flavour `device` computes in.

    A ROCm gfx942 uses fnuz; gfx950, NVIDIA and the CPU use OCP e4m3fn. Only a
    non-CPU device is probed (through `flybench.hardware.detect`).
    """
    import torch

    if name != "fp8":
        return torch_dtype(name)
    from flybench.hardware import detect, fp8_dtype_name

    arch = "cpu" if torch.device(device).type in ("cpu", "meta") else detect().arch
    return getattr(torch, fp8_dtype_name(arch))
