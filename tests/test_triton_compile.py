"""Every Triton kernel cross-compiles for gfx942, gfx950 and sm_90 on this CPU-only machine.

The specs come from the very plans the provider runs (built on meta tensors
over the quick cases), so this compiles what would run. Per target, each
kernel is compiled at its heaviest configuration (largest tiles; fp8 and bf16
for the GEMMs), plus the 64-bit-offset variant of the attention kernel, and
the resources are checked: no register spills, shared memory within the
target's limit, matrix instructions where the kernel multiplies matrices.
"""

from __future__ import annotations

import copy
import math

import pytest

pytest.importorskip("triton", reason="the Triton kernels need triton (pip install -e '.[test]' brings it)")

from flybench.kernels.triton import specs

SHARED_LIMIT = {"gfx942": 64 << 10, "gfx950": 160 << 10, "sm_90": 227 << 10}
MATRIX = {"diffusion_attention_fwd", "moe_gate_up", "moe_down"}
ALL_KERNELS = {"diffusion_attention_fwd", "combine_splits", "topk_softmax", "count_chunks", "expert_offsets",
               "scatter_pairs", "quantize_rows", "moe_gate_up", "moe_down"}


def _tile(spec: specs.KernelSpec) -> int:
    return math.prod(v for k, v in spec.constexprs.items() if k.startswith("BLOCK_") and isinstance(v, int))


def representative(arch: str) -> list[specs.KernelSpec]:
    """Each kernel (GEMMs once per fp8/bf16) at its largest tile, and the wide-offset attention variant."""
    chosen: dict[tuple[str, bool], specs.KernelSpec] = {}
    for spec in specs.kernel_specs(arch, "quick"):
        key = (spec.name, bool(spec.constexprs.get("FP8")))
        if key not in chosen or _tile(spec) > _tile(chosen[key]):
            chosen[key] = spec
    wide = copy.copy(chosen[("diffusion_attention_fwd", False)])
    wide.constexprs = {**wide.constexprs, "WIDE_OFFSETS": True}
    return [*chosen.values(), wide]


TARGET_SPECS = [(arch, spec) for arch in specs.TARGETS for spec in representative(arch)]


def test_specs_cover_every_kernel_and_argument():
    for arch in specs.TARGETS:
        listed = specs.kernel_specs(arch, "quick")
        assert {s.name for s in listed} == ALL_KERNELS
        for spec in listed:
            assert list(spec.signature) == list(spec.fn.arg_names) and spec.cases
            pointers = [i for i, n in enumerate(spec.fn.arg_names) if spec.signature[n].startswith("*")]
            amd = any(["tt.pointer_range", 32] in spec.attrs.get((i,), []) for i in pointers)
            assert amd == (specs.TARGETS[arch][0] == "hip")  # buffer-op ranges only where HIP specialises them


@pytest.mark.parametrize("arch,spec", TARGET_SPECS,
                         ids=[f"{a}-{s.name}-{'wide' if s.constexprs.get('WIDE_OFFSETS') else _tile(s)}"
                              f"{'-fp8' if s.constexprs.get('FP8') else ''}" for a, s in TARGET_SPECS])
def test_kernel_compiles_within_target_limits(arch, spec):
    compiled = spec.compile(arch)
    usage = specs.resources(compiled)
    assert usage["shared"] <= SHARED_LIMIT[arch], usage
    if arch.startswith("gfx"):
        code = compiled.asm["amdgcn"]
        assert usage["vgpr_count"] > 0 and usage["vgpr_spill_count"] == 0, usage
        assert usage["private_segment_fixed_size"] == 0, usage  # no scratch: nothing spilled to memory
        assert ("v_mfma" in code) == (spec.name in MATRIX), spec.name
        assert "buffer_" in code or "global_" in code  # not a bare s_endpgm
    else:
        assert usage["registers"] > 0 and usage["local_bytes"] == 0, usage
        ptx = compiled.asm["ptx"]
        assert (("mma" in ptx) == (spec.name in MATRIX)), spec.name


@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "sm_90"])
def test_compile_suite_tracks_the_provider_kernels_at_each_targets_table_entry(arch):
    """The compile registry's triton_* provider cases are the launches the provider runs, configured per target."""
    from flybench.compile import registry
    from flybench.compile.capture import load_entry
    from flybench.kernels.triton import configs, specs

    plans = [case for case in registry.CASES.values() if "plan" in case.config]
    assert {c.config["plan"]["workload"] for c in plans} == {"diffusion_attention", "moe"}
    for case in plans:
        spec = specs.launch_spec(arch, **case.config["plan"])
        assert spec.fn is load_entry(case.entry), case.name
    moe = specs.launch_spec(arch, "moe", "mixtral8x7b-t16", "bf16", "moe_gate_up")
    entry = configs.moe_config(arch, "bf16", 16)
    assert entry.constexprs and all(moe.constexprs[k] == v for k, v in entry.constexprs.items())
    assert all(moe.options[k] == v for k, v in entry.options.items())


JAX_TRITON_LAUNCHES = [("moe", "mixtral8x7b-t1024", "moe_gate_up"), ("moe", "mixtral8x7b-t1024", "moe_down"),
                       ("diffusion_attention", "llada8b-b8-ctx4k-d64-p16-bidir", "diffusion_attention_fwd")]


@pytest.mark.parametrize("workload,case,launch", JAX_TRITON_LAUNCHES, ids=[c[2] for c in JAX_TRITON_LAUNCHES])
def test_jax_triton_compiles_the_pipeline_tritons_jit_compiles(workload, case, launch):
    """jax-triton marks only array pointers divisible by 16. The kernels take their sizes and strides as
    constants, so its compile must keep the asynchronous copies and the stages of shared memory that Triton's
    JIT compiles from a torch launch (with the strides at run time it had none: 0 cp.async, one stage)."""
    jit, jax_triton = (specs.launch_spec("sm_90", workload, case, "bf16", launch, mark_integers=marked).compile("sm_90")
                       for marked in (True, False))
    copies = [kernel.asm["ptx"].count("cp.async") for kernel in (jit, jax_triton)]
    assert copies[0] > 0 and copies[1] == copies[0], copies
    assert jax_triton.metadata.shared == jit.metadata.shared > 0
