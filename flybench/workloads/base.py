"""What every workload provides: named cases, inputs, counts and a float32 reference.

A workload never imports torch at module import time, so the asv suites can
list their parameters (case names) without paying for torch in every process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flybench.errors import unknown_name

if TYPE_CHECKING:
    import torch

    from flybench.providers.base import Provider

Tensors = dict[str, "torch.Tensor"]

SHAPE_SETS = ("tiny", "quick", "full")
"""tiny: seconds on a CPU (tests, CPU machines); quick: pull requests; full: nightly."""


@dataclass(frozen=True)
class Case:
    """One problem instance of a workload: a stable name and its shape parameters."""

    workload: str
    name: str
    shape: dict[str, Any] = field(hash=False)
    model: str = ""


class Workload(ABC):
    """A family of problems with a shape catalog and a float32 reference."""

    name: str
    dtypes: tuple[str, ...]
    description: str
    tolerances: dict[str, float] = {}
    """Correctness tolerances that replace the gate's per-dtype ones for this workload (none by default)."""

    @abstractmethod
    def catalog(self) -> dict[str, list[Case]]:
        """Cases per shape set ('tiny', 'quick', 'full')."""

    @abstractmethod
    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        """Seeded random inputs (never zeros) in `dtype` on `device`."""

    @abstractmethod
    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        """The float32 result, computed with plain torch on the inputs' device.

        Returns at least "out"; attention workloads also return "lse".
        """

    @abstractmethod
    def flops(self, case: Case) -> float:
        """Useful floating-point operations of one call (masked work not counted)."""

    @abstractmethod
    def min_bytes(self, case: Case, dtype: str) -> float:
        """Fewest bytes one call must move through device memory."""

    def built_by(self, provider: "Provider") -> "Provider":
        """What builds this workload's cases for `provider`, and says what ran: the provider itself, for a kernel.

        A workload whose case is a whole program around one of the provider's
        layers (the model lane's decoder step) returns the program's builder
        instead, which takes the layer from the provider, so that no provider
        imports that program.
        """
        return provider

    def cases(self, shape_set: str) -> list[Case]:
        """The cases of one shape set, with a clear error for an unknown set."""
        catalog = self.catalog()
        if shape_set not in catalog:
            raise unknown_name("shape set", shape_set, list(catalog))
        return catalog[shape_set]

    def case(self, name: str) -> Case:
        """Find a case by name in any shape set."""
        for cases in self.catalog().values():
            for case in cases:
                if case.name == name:
                    return case
        raise unknown_name(f"{self.name} case", name, sorted({c.name for cs in self.catalog().values() for c in cs}))

    def check_dtype(self, dtype: str) -> None:
        if dtype not in self.dtypes:
            raise unknown_name(f"{self.name} dtype", dtype, self.dtypes)
