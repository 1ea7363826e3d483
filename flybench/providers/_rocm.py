"""What the ROCm-only providers (flydsl, ck) share: the device check and the paged diffusion runner.

Neither has run on AMD hardware in this project yet (docs/rocm.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from flybench.hardware import Device
from flybench.providers import _paged_append
from flybench.providers.base import Runner
from flybench.workloads.base import Tensors

if TYPE_CHECKING:
    import torch

ARCHS = ("gfx942", "gfx950")
"""CDNA3 (MI300X/MI325X) and CDNA4 (MI350X/MI355X): the architectures flybench measures on ROCm."""


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


def paged_diffusion_runner(
    inputs: Tensors, attend: Callable[[_paged_append.AppendedCache], "torch.Tensor"], time_append: bool
) -> Runner:
    """Run a paged-only kernel on the diffusion workload, with the draft appended to the cache.

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
        return {"out": _paged_append.unpack_out(attend(cache), inputs)}

    return run
