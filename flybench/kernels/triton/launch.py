"""A kernel launch as data: kernel, grid, arguments, compile-time constants and launch options.

The kernels' host code builds a list of these instead of launching directly,
so one description serves both uses: calling it runs the kernel, and
`flybench.kernels.triton.specs` turns the same launches, built on meta tensors,
into `triton.compile` sources for compile-only metrics. What is measured for
resources is then exactly what runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Launch:
    """One kernel launch; `kernel` is a triton JITFunction (InterpretedFunction under TRITON_INTERPRET=1)."""

    kernel: Any
    grid: tuple[int, ...]
    args: dict[str, Any]
    constexprs: dict[str, Any]
    options: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.kernel.fn.__name__

    def __call__(self) -> None:
        self.kernel[self.grid](**self.args, **self.constexprs, **self.options)


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (>= 1): Triton block shapes must be powers of two."""
    return 1 << max(0, int(n) - 1).bit_length()


def in_units(values: dict[str, int]) -> tuple[dict[str, int], int]:
    """Sizes and tile strides as a kernel that multiplies them by its ALIGN constant takes them: in units of 16
    elements with ALIGN 16 when every one is a multiple of 16, else as they are with ALIGN 1.

    The product is a value Triton knows to be a multiple of ALIGN, however the kernel is launched (jax-triton
    marks no integer argument; `tl.multiple_of` on an argument is lost), so it can prove 16-byte loads and
    pipeline them; and ALIGN takes two values, so shapes do not multiply the compiles as constants would.
    """
    align = 16 if all(int(v) % 16 == 0 for v in values.values()) else 1
    return {name: int(v) // align for name, v in values.items()}, align


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
