"""What every provider says about itself, and how it builds a callable for one case.

A provider is one implementation family (torch eager, FlexAttention, a BLAS
loop, Triton, FlyDSL, CK, XLA). It never hides why it cannot run: every
`unavailable_reason` is a sentence the user can act on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import lru_cache
from typing import Any, Callable

from flybench.hardware import Device
from flybench.workloads.base import Case, Tensors

Runner = Callable[[], Tensors]
"""A zero-argument call that runs the implementation once and returns its outputs."""


class Provider(ABC):
    """One implementation family for one or more workloads."""

    name: str
    workloads: frozenset[str]
    description: str
    module: str = ""
    """The top-level module whose code runs (torch, triton, jaxlib, flydsl, aiter): `implementation` names its
    distribution and version."""

    @abstractmethod
    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        """None when this provider can run `workload` in `dtype` here, else why not."""

    @abstractmethod
    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        """A callable computing the workload's "out" (and "lse" where it can) from `inputs`.

        Anything that is not the kernel under test (weight layout shuffles,
        descriptor set-up) happens here, outside the timed call.
        """

    def memory_reason(self, case: Case, dtype: str, device_bytes: int) -> str | None:
        """Why this case cannot run on a device of `device_bytes` (its memory estimate exceeds what the provider
        gets of it), else None; known before it runs, so that a gate never spends a round on it. None where no
        estimate is known."""
        return None

    def entry_points(self, case: Case, dtype: str) -> list[str]:
        """The entry points `build` would call for the case ("kernels.x.y.fn", or "path.py:fn"), known before
        anything is built or imported: what the gate selects a FlyDSL case by. [] where the provider does not say."""
        return []

    def implementation(self, case: Case, dtype: str) -> dict[str, Any]:
        """What ran for this case, for its record (`CaseRecord.implementation`); called after `build`.

        "package" and "version": the installed distribution of `module`
        (amd-aiter, flydsl, triton or pytorch-triton-rocm, ...). Providers
        that know more add "kernels" (the entry points called) and "config"
        (what a library's own lookup chose for this shape), and say in
        "unexposed" what the library does not tell.
        """
        return dict(package_of(self.module)) if self.module else {}


@lru_cache(maxsize=None)
def package_of(module: str) -> dict[str, str | None]:
    """{"package": distribution, "version": its version} for top-level `module`; None for each when no
    installed distribution provides it."""
    from importlib import metadata

    names = sorted(set(metadata.packages_distributions().get(module, [])))
    if not names:
        return {"package": None, "version": None}
    return {"package": names[0], "version": metadata.version(names[0])}
