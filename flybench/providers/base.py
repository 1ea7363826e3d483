"""What every provider says about itself, and how it builds a callable for one case.

A provider is one implementation family (torch eager, FlexAttention, a BLAS
loop, Triton, FlyDSL, CK, XLA). It never hides why it cannot run: every
`unavailable_reason` is a sentence the user can act on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

from flybench.hardware import Device
from flybench.workloads.base import Case, Tensors

Runner = Callable[[], Tensors]
"""A zero-argument call that runs the implementation once and returns its outputs."""


class Provider(ABC):
    """One implementation family for one or more workloads."""

    name: str
    workloads: frozenset[str]
    description: str

    @abstractmethod
    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        """None when this provider can run `workload` in `dtype` here, else why not."""

    @abstractmethod
    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        """A callable computing the workload's "out" (and "lse" where it can) from `inputs`.

        Anything that is not the kernel under test (weight layout shuffles,
        descriptor set-up) happens here, outside the timed call.
        """
