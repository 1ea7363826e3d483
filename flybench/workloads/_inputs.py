"""Input helpers the workloads share: seeded random tensors and fp8 quantisation.

A case's CPU `torch.Generator` seeds one generator on the target device per
tensor, and the numbers are drawn there: a seed gives the same inputs every
run on the same kind of device, and multi-GiB inputs take milliseconds, not
the seconds a host-side draw and copy take. Tensors are drawn in slices along
their first dimension so the float32 staging stays small.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_CHUNK_ELEMENTS = 1 << 27
"""Elements drawn per slice (512 MiB of float32 staging)."""


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
    """Normal(0, std**2) values in `dtype` on `device` (shape of at least one dimension)."""
    import torch

    out = torch.empty(shape, dtype=dtype, device=device)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    local = torch.Generator(device=out.device).manual_seed(seed)
    rows, per_row = shape[0], math.prod(shape[1:])
    flat, step = out.view(rows, per_row), max(1, _CHUNK_ELEMENTS // max(per_row, 1))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        chunk = torch.randn((stop - start, per_row), generator=local, dtype=torch.float32, device=out.device)
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
