"""`flydsl-jax`: FlyDSL's kernels inside `jax.jit`, each launch an XLA custom call, through FlyDSL's own JAX API.

This is the route the AMD JAX talk describes. FlyDSL's JAX integration was
proposed upstream in pull request #257 (closed without merging; read at its
head, 3625a6d): a `flydsl.jax` package with `from_jax` (a `jax.Array` as a
FlyDSL JitArgument through DLPack, for eager calls) and
`jax_kernel(flyc_func, out_shapes=..., constexpr_kwargs=..., runtime_scalars=...)`,
which binds a `flydsl_call` primitive that lowers to a StableHLO custom call
running the compiled kernel on XLA's stream. It wraps `@flyc.jit` launchers
whose trailing tensor parameters are the outputs, not the torch-level host
functions the `flydsl` provider calls (`flydsl_flash_attn_func`, the
a16wmix host glue).

No FlyDSL release ships `flydsl.jax` (0.5.0 has none), so this provider is
unavailable, with that reason, until one does; its wiring is written against
the API that release fixes, not against an unmerged proposal. `jax-triton`
measures the same in-jit route today with the project's Triton kernels
(docs/triton-kernels.md).
"""

from __future__ import annotations

import importlib.util

from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.workloads.base import Case, Tensors

API = "flydsl.jax"
NO_RELEASE = ("FlyDSL's JAX API (flydsl.jax: from_jax and the flydsl_call custom-call primitive, proposed in "
              "FlyDSL pull request #257) is in no FlyDSL release yet; flydsl-jax runs once a release ships it")


def api_reason() -> str | None:
    """None when the installed FlyDSL has `flydsl.jax`, else why flydsl-jax cannot run (found without importing it)."""
    if importlib.util.find_spec("flydsl") is None:
        return f"flydsl is not installed (pip install flydsl); besides, {NO_RELEASE}"
    if importlib.util.find_spec(API) is None:
        from importlib import metadata

        return f"this FlyDSL ({metadata.version('flydsl')}) has no {API}: {NO_RELEASE}"
    return None


class FlyDSLJax(Provider):
    """FlyDSL kernels called from `jax.jit` through FlyDSL's own custom-call primitive."""

    name = "flydsl-jax"
    workloads = frozenset({"attention", "diffusion_attention", "moe", "mixtral_step"})
    description = "FlyDSL kernels inside jax.jit as XLA custom calls (flydsl.jax; in no FlyDSL release yet)"
    module = "flydsl"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        return api_reason() or (f"{API} is installed, but flybench's flydsl-jax wiring is not written yet: it "
                                "waits for the FlyDSL release that fixes the API (docs/rocm.md)")

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        raise NotImplementedError(self.unavailable_reason(case.workload, dtype, device))


register(FlyDSLJax())
