"""Input helpers the workloads share: seeded random tensors and fp8 quantisation.

Random numbers come from a CPU `torch.Generator`, so a seed gives the same
inputs on every device. Large tensors are generated in slices along their
first dimension and copied into a tensor already on the device, so host memory
stays small even for multi-GiB inputs.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_CHUNK_ELEMENTS = 1 << 25
"""Elements generated on the host per slice (128 MiB of float32)."""


def generator(seed: int) -> "torch.Generator":
    """A CPU generator seeded with `seed`; draw all of one case's tensors from it, in a fixed order."""
    import torch

    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    return gen


def randn(
    gen: "torch.Generator",
    shape: tuple[int, ...],
    dtype: "torch.dtype",
    device: str,
    std: float = 1.0,
) -> "torch.Tensor":
    """Normal(0, std**2) values in `dtype` on `device`, generated slice by slice on the host."""
    import torch

    out = torch.empty(shape, dtype=dtype, device=device)
    rows = shape[0] if shape else 1
    per_row = math.prod(shape[1:]) if shape else 1
    step = max(1, _CHUNK_ELEMENTS // max(per_row, 1))
    flat = out.view(rows, per_row) if shape else out.view(1, 1)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        chunk = torch.randn((stop - start, per_row), generator=gen, dtype=torch.float32)
        flat[start:stop].copy_(chunk.mul_(std))
    return out


def quantize_fp8(values: "torch.Tensor", fp8: "torch.dtype", per_row: bool) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Scale `values` into the fp8 range and cast; scales are float32, per last-dim row or per tensor.

    `values ≈ q.float() * scale` (scale broadcast over the last dimension when per row).
    """
    import torch

    fmax = torch.finfo(fp8).max
    amax = values.abs().amax(dim=-1, keepdim=True) if per_row else values.abs().amax()
    scale = (amax.float() / fmax).clamp_min(1e-12)
    q = (values.float() / scale).clamp(-fmax, fmax).to(fp8)
    return q, (scale.squeeze(-1) if per_row else scale)


def ragged_lengths(count: int, low: int, high: int, salt: str) -> tuple[int, ...]:
    """`count` lengths drawn uniformly from [low, high], the same on every run for the same salt."""
    rng = random.Random(f"{salt}:{count}:{low}:{high}")
    return tuple(rng.randint(low, high) for _ in range(count))


def size_label(n: int) -> str:
    """4096 -> '4k', 1000 -> '1000': short, readable numbers for case names."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)
