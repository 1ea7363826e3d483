"""The correctness gate: a provider's outputs against the float32 reference.

Relative Frobenius error ||out - ref|| / ||ref|| per output, with a tolerance
per element type. NaN or Inf never passes, and a missing "out" never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from flybench.workloads.base import Tensors

# bf16 operands land between 1e-3 and 1e-2; fp8 with per-token/per-channel scales near 3e-2. Quantised weights
# are exact in the reference (it dequantises them), so int4_bf16 is bf16's case and a8w4, whose activations
# providers quantise to fp8, fp8's.
TOLERANCES = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 2e-2, "fp8": 8e-2, "int4_bf16": 2e-2, "a8w4": 8e-2}


@dataclass(frozen=True)
class Verdict:
    """Whether the outputs match, the error of each compared output, and why not."""

    passed: bool
    tolerance: float
    errors: dict[str, float] = field(default_factory=dict)
    reason: str | None = None


def relative_error(out: "torch.Tensor", ref: "torch.Tensor") -> float:  # noqa: F821
    """||out - ref||_F / ||ref||_F, norms accumulated in float64; NaN when `out` is not all finite."""
    import torch

    out, ref = out.detach().float(), ref.detach().float()  # fp8 has no isfinite of its own
    if not torch.isfinite(out).all():
        return math.nan
    difference = torch.linalg.vector_norm(out - ref, dtype=torch.float64)
    return float(difference / torch.linalg.vector_norm(ref, dtype=torch.float64).clamp_min(1e-30))


def check(outputs: Tensors, reference: Tensors, dtype: str, tolerance: float | None = None) -> Verdict:
    """Compare every output the provider returned that the reference also has, within `tolerance` (default: the
    dtype's)."""
    tolerance = TOLERANCES[dtype] if tolerance is None else tolerance
    if "out" not in outputs:
        return Verdict(False, tolerance, reason="provider returned no 'out' tensor")
    errors: dict[str, float] = {}
    for name in sorted(set(outputs) & set(reference)):
        got, want = outputs[name], reference[name].to(outputs[name].device)
        if tuple(got.shape) != tuple(want.shape):
            return Verdict(False, tolerance, errors, f"{name}: shape {tuple(got.shape)} != reference {tuple(want.shape)}")
        errors[name] = relative_error(got, want)
    bad = [f"{n}: {'non-finite values' if math.isnan(e) else f'error {e:.3g} > {tolerance:g}'}"
           for n, e in errors.items() if not e <= tolerance]
    return Verdict(not bad, tolerance, errors, "; ".join(bad) or None)


def poison(outputs: Tensors, keep: Tensors) -> None:
    """Fill floating-point outputs with NaN so an unwritten element cannot pass the gate.

    Outputs that share memory with an input in `keep` are left alone.
    """
    input_pointers = {t.data_ptr() for t in keep.values()}
    for tensor in outputs.values():
        if tensor.is_floating_point() and tensor.element_size() >= 2 and tensor.data_ptr() not in input_pointers:
            tensor.fill_(math.nan)
