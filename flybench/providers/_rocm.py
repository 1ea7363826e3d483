"""What the ROCm-only providers (flydsl, ck, aiter-asm, aiter-triton) share: availability and the paged runner.

None has run on AMD hardware in this project yet (docs/rocm.md).
"""

from __future__ import annotations

from typing import Callable

from flybench.hardware import Device
from flybench.providers import _paged_append
from flybench.providers.base import Runner
from flybench.workloads.base import Tensors

ARCHS = ("gfx942", "gfx950")
"""CDNA3 (MI300X/MI325X) and CDNA4 (MI350X/MI355X): the architectures flybench measures on ROCm."""
AITER_INSTALL = ("build AITER from source on this ROCm machine: git clone --recursive https://github.com/ROCm/aiter "
                 "&& cd aiter && python3 setup.py develop (docs/rocm.md)")
"""PyPI's amd-aiter is the same project, but its newest wheel predates the AITER these providers are written against."""


def device_reason(provider: str, what: str, device: Device) -> str | None:
    """None on a ROCm gfx942/gfx950, else a sentence saying what is needed."""
    if device.kind == "rocm" and device.arch in ARCHS:
        return None
    return (f"{provider} runs {what} on a ROCm GPU ({'/'.join(ARCHS)}, MI300X/MI325X/MI35xX); "
            f"this machine has {device.arch} - see docs/rocm.md")


def module_reason(module: str, install: str) -> str | None:
    """None when `module` can be imported, else how to install it (no import is attempted)."""
    import importlib.util

    return None if importlib.util.find_spec(module) is not None else f"{module} is not installed: {install}"


def aiter_reason(provider: str, what: str, device: Device) -> str | None:
    """None on a ROCm gfx942/gfx950 with AITER importable, else what is missing."""
    return device_reason(provider, what, device) or module_reason("aiter", AITER_INSTALL)


def paged_diffusion_runner(inputs: Tensors, attend: Callable[[_paged_append.AppendedCache], Tensors],
                           time_append: bool) -> Runner:
    """Run a paged-only kernel on the diffusion workload, with the draft appended to the cache.

    `attend` returns the varlen outputs: "out" [B*D, Hq, hd] and, where the
    kernel gives one, "lse" [Hq, B*D] (the varlen layout of CK and FlashAttention).
    time_append=False: the draft is written into the cache once here, and the
    timed call is the kernel alone (a serving engine writes K/V in an earlier
    step). time_append=True: each timed call first scatters the draft into its
    slots, so the difference of the two providers is the append's cost.
    """
    cache = _paged_append.build(inputs)
    if not time_append:
        cache.append(inputs["k_draft"], inputs["v_draft"])

    def run() -> Tensors:
        if time_append:
            cache.append(inputs["k_draft"], inputs["v_draft"])
        return _paged_append.unpack(attend(cache), inputs)

    return run
