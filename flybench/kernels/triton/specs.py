"""Every Triton kernel of the project at every configuration one architecture runs, ready to compile.

A compile-only driver needs, per kernel: the JIT function, the types of its
runtime arguments, its compile-time constants, the attributes Triton would
specialise at launch, and the launch options. `kernel_specs(arch)` derives all
of that from the plans the provider runs, built on meta tensors for every case
of a shape set, so the compiled code is the code that runs; identical compiles
are listed once, with the cases that use them.

Launch-time specialisation is mirrored from Triton 3.9 (BaseBackend /
HIPBackend): a tensor or an integer that is a multiple of 16 gets
`tt.divisibility 16`, an integer equal to 1 and None become constants, and on
AMD a tensor under 2 GiB gets `tt.pointer_range 32` (buffer loads).

    python -m flybench.kernels.triton.specs --set quick gfx942    # compile, print a table of resources
    python -m flybench.kernels.triton.specs --set full --count    # how many distinct compiles, per kernel
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import torch

from flybench.kernels.triton import cases
from flybench.kernels.triton.launch import Launch
from flybench.workloads import get_workload

TARGETS = {"gfx942": ("hip", "gfx942", 64), "gfx950": ("hip", "gfx950", 64), "sm_90": ("cuda", 90, 32)}
_TYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.int32: "i32",
          torch.int64: "i64", torch.float8_e4m3fn: "fp8e4nv", torch.float8_e4m3fnuz: "fp8e4b8"}
_AMD_METADATA = ("vgpr_count", "agpr_count", "sgpr_count", "vgpr_spill_count", "sgpr_spill_count",
                 "group_segment_fixed_size", "private_segment_fixed_size")


@dataclass
class KernelSpec:
    """One compile: what `triton.compile(ASTSource(fn, signature, constexprs, attrs), target, options)` takes."""

    name: str
    fn: Any
    signature: dict[str, str]
    constexprs: dict[str, Any]
    attrs: dict[tuple[int, ...], list[list[Any]]]
    options: dict[str, int]
    cases: list[str] = field(default_factory=list)

    @property
    def entry(self) -> str:
        """'package.module:function' of the kernel, for drivers that import kernels by name."""
        return f"{self.fn.fn.__module__}:{self.fn.fn.__name__}"

    def divisible_by_16(self) -> list[str]:
        """Names of the arguments specialised as multiples of 16 (pointers included)."""
        return [self.fn.arg_names[i] for (i,), attrs in self.attrs.items() if ["tt.divisibility", 16] in attrs]

    def key(self) -> str:
        return repr((self.name, sorted(self.signature.items()), sorted(self.constexprs.items(), key=str),
                     sorted(self.attrs.items()), sorted(self.options.items())))

    def compile(self, arch: str) -> Any:
        """Compile for `arch` (gfx942, gfx950, sm_90) without a GPU; returns Triton's CompiledKernel."""
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        source = ASTSource(self.fn, self.signature, self.constexprs, self.attrs)
        return triton.compile(source, target=GPUTarget(*TARGETS[arch]), options=dict(self.options))


def specialize(launch: Launch, backend: str, mark_integers: bool = True
               ) -> tuple[dict[str, str], dict[str, Any], dict[tuple[int, ...], list]]:
    """The signature, constants and attributes a launch of `launch` would compile with on `backend`.

    Triton's JIT marks integers that are multiples of 16 as such; jax-triton 0.4 marks array pointers only
    (`mark_integers=False` compiles as it does).
    """
    values = {**launch.args, **launch.constexprs}
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list] = {}
    for index, name in enumerate(launch.kernel.arg_names):
        value = values[name]
        if name in launch.constexprs or value is None or (type(value) is int and value == 1):
            signature[name], constexprs[name] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[name] = "*" + _TYPES[value.dtype]
            attrs[(index,)] = [["tt.divisibility", 16]]
            if backend == "hip" and value.numel() * value.element_size() <= 2**31 - 1:
                attrs[(index,)].append(["tt.pointer_range", 32])
        elif isinstance(value, float):
            signature[name] = "fp32"
        elif isinstance(value, int):
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            if mark_integers and value % 16 == 0:
                attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            raise TypeError(f"{launch.name}: cannot specialise argument {name}={value!r}")
    return signature, constexprs, attrs


def kernel_specs(arch: str, shape_set: str = "full") -> list[KernelSpec]:
    """The distinct compiles that `shape_set`'s cases (both workloads, every dtype) launch on `arch`."""
    if arch not in TARGETS:
        raise ValueError(f"unknown target {arch!r}; compile-only targets: {', '.join(TARGETS)}")
    backend = TARGETS[arch][0]
    specs: dict[str, KernelSpec] = {}
    for workload_name in cases.WORKLOADS:
        workload = get_workload(workload_name)
        for case in workload.cases(shape_set):
            for dtype in workload.dtypes:
                plan = cases.build(case, dtype, cases.meta_inputs(case, dtype, arch), arch)
                for launch in plan.launches:
                    spec = KernelSpec(launch.name, launch.kernel, *specialize(launch, backend), dict(launch.options))
                    spec = specs.setdefault(spec.key(), spec)
                    spec.cases.append(f"{case.name}/{dtype}")
    return list(specs.values())


def launch_spec(arch: str, workload: str, case: str, dtype: str, launch: str, mark_integers: bool = True
                ) -> KernelSpec:
    """The compile of one named launch of one case's plan on `arch`, at that architecture's table entry
    (`mark_integers=False`: as jax-triton specialises it, see `specialize`)."""
    work = get_workload(workload)
    found = work.case(case)
    plan = cases.build(found, dtype, cases.meta_inputs(found, dtype, arch), arch)
    for step in plan.launches:
        if step.name == launch:
            return KernelSpec(step.name, step.kernel, *specialize(step, TARGETS[arch][0], mark_integers),
                              dict(step.options),
                              [f"{case}/{dtype}"])
    raise ValueError(f"{workload} {case} {dtype} launches {', '.join(s.name for s in plan.launches)}, not {launch}")


def resources(compiled: Any) -> dict[str, int]:
    """Registers, spills and shared memory of a compiled kernel, from its metadata and binary."""
    found = {"shared": int(compiled.metadata.shared), "num_warps": int(compiled.metadata.num_warps)}
    if "amdgcn" in compiled.asm:
        for key in _AMD_METADATA:
            match = re.search(rf"^\s*-?\s*\.{key}:\s+(\d+)", compiled.asm["amdgcn"], re.MULTILINE)
            found[key] = int(match.group(1)) if match else -1
        return found
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(compiled.asm["cubin"])
        handle.flush()
        usage = subprocess.run([tool, "--dump-resource-usage", handle.name], capture_output=True, text=True,
                               check=True).stdout
    for key, name in (("REG", "registers"), ("LOCAL", "local_bytes"), ("STACK", "stack_bytes")):
        match = re.search(rf"\b{key}:(\d+)", usage)
        found[name] = int(match.group(1)) if match else -1
    return found


def distinct(found: list[KernelSpec]) -> list[KernelSpec]:
    """One spec per (kernel, constants, options): specs that differ only in integer divisibility, merged."""
    first: dict[str, KernelSpec] = {}
    for spec in found:
        key = repr((spec.name, sorted(spec.constexprs.items(), key=str), sorted(spec.options.items())))
        if key in first:
            first[key].cases.extend(spec.cases)
        else:
            first[key] = KernelSpec(spec.name, spec.fn, spec.signature, spec.constexprs, spec.attrs, spec.options,
                                    list(spec.cases))
    return list(first.values())


def main(argv: list[str]) -> int:
    """Compile each distinct configuration for the targets named and print a markdown table of resources."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", default=list(TARGETS), help="gfx942, gfx950, sm_90 (default all)")
    parser.add_argument("--set", default="quick", help="shape set whose launches are compiled (default quick)")
    parser.add_argument("--count", action="store_true",
                        help="compile nothing: print how many distinct compiles each target's launches need, per "
                             "kernel (Triton's JIT specialisation, `kernel_specs`)")
    args = parser.parse_args(argv)
    if args.count:
        for arch in args.targets:
            found = kernel_specs(arch, args.set)
            per = {}
            for spec in found:
                per[spec.name] = per.get(spec.name, 0) + 1
            print(f"{arch} {args.set}: {len(found)} compiles: " + ", ".join(f"{k} {v}" for k, v in per.items()))
        return 0
    print("| target | kernel | constants | options | registers (AMD: +AGPRs) | spills (AMD: VGPR/SGPR; NVIDIA: "
          "local bytes) | shared B | cases |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    for arch in args.targets:
        for spec in distinct(kernel_specs(arch, args.set)):
            usage = resources(spec.compile(arch))
            amd = "vgpr_count" in usage
            registers = f"{usage['vgpr_count']}+{usage['agpr_count']}a" if amd else str(usage["registers"])
            spills = f"{usage['vgpr_spill_count']}v/{usage['sgpr_spill_count']}s" if amd else f"{usage['local_bytes']} B"
            consts = ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in spec.constexprs.items()
                              if k.isupper() and k != "HEAD_DIM")
            options = ",".join(f"{k}={v}" for k, v in spec.options.items())
            print(f"| {arch} | {spec.name} | {consts} | {options} | {registers} | {spills} | {usage['shared']} | "
                  f"{len(spec.cases)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
