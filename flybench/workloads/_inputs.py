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


GROUP = 32
"""Elements along K that share one scale: the int4 weights' group (FlyDSL CI's W4A16 series use 32) and the
OCP MX block of MX-FP4 and MX-FP8."""
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""The magnitudes of MX-FP4's e2m1 codes 0-7; codes 8-15 are the same with the sign bit set (OCP MX v1.0)."""


def _by_group(values: "torch.Tensor") -> "torch.Tensor":
    if values.shape[-1] % GROUP:
        raise ValueError(f"grouped quantisation needs the last dimension to be a multiple of {GROUP}; "
                         f"got {values.shape[-1]}")
    return values.float().unflatten(-1, (-1, GROUP))


def quantize_int4(values: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
    """Symmetric signed int4 per group of GROUP along the last dimension: int8 codes in [-8, 7] and float32
    scales [..., K / GROUP] that bf16 holds exactly (kernels read bf16 scales), values ≈ q * scale."""
    import torch

    groups = _by_group(values)
    scale = (groups.abs().amax(-1) / 7).clamp_min(2.0**-100).to(torch.bfloat16).float()
    q = (groups / scale[..., None]).round().clamp(-8, 7).to(torch.int8)
    return q.flatten(-2), scale


def quantize_mxfp4(values: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
    """MX-FP4 per block of GROUP along the last dimension, by the OCP MX rule (shared exponent
    floor(log2(amax)) - 2, elements rounded to the nearest e2m1 and saturated at 6): uint8 codes in [0, 15]
    (bit 3 the sign) and uint8 e8m0 scales [..., K / GROUP] (2**(e - 127))."""
    import torch

    groups = _by_group(values)
    amax = groups.abs().amax(-1)
    exponent = torch.where(amax > 0, torch.floor(torch.log2(amax)) - 2, torch.full_like(amax, -127)).clamp(-127, 127)
    magnitude = groups.abs() / torch.exp2(exponent)[..., None]
    midpoints = torch.tensor([(a + b) / 2 for a, b in zip(E2M1, E2M1[1:])], device=values.device)
    code = torch.bucketize(magnitude, midpoints).to(torch.uint8) | (groups < 0).to(torch.uint8) << 3
    return code.flatten(-2), (exponent + 127).to(torch.uint8)


def dequantize(q: "torch.Tensor", scale: "torch.Tensor") -> "torch.Tensor":
    """float32 values of grouped codes: int8 int4 codes times float32 scales, or uint8 MX-FP4 codes times
    e8m0 scales (the two formats `quantize_int4` and `quantize_mxfp4` write)."""
    import torch

    if q.dtype == torch.int8:
        values, factor = q.float(), scale.float()
    else:
        table = torch.tensor(E2M1 + tuple(-v for v in E2M1), device=q.device)
        values, factor = table[q.long()], torch.exp2(scale.float() - 127)
    return (values.unflatten(-1, (-1, GROUP)) * factor[..., None]).flatten(-2)
