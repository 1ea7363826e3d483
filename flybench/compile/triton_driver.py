"""Cross-compile one Triton case for a target (gfx942, gfx950, sm_90) inside a worker, and read its metrics.

`triton.compile(ASTSource(...), target=GPUTarget(...))` needs no GPU: the AMD
backend links with its built-in LLD, the NVIDIA one runs the `ptxas` shipped
in the wheel. AMD kernels are read like FlyDSL's (ISA metadata, code object);
Triton passes its LDS at launch, so `metadata.shared` is the dynamic LDS.
For sm_90, `ptxas -v` on the kernel's PTX gives registers, spills and static
shared memory, and the cubin's symbol table the code size.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from flybench.compile import capture
from flybench.compile.amd import describe_module
from flybench.compile.elf import function_sizes
from flybench.compile.flydsl_driver import finish
from flybench.compile.record import CompileRecord
from flybench.compile.registry import KernelCase


def _for_vendor(value: dict[str, Any], vendor: str) -> dict[str, Any]:
    """Config values may be split per vendor ({"hip": ..., "cuda": ...}) or shared."""
    return dict(value.get(vendor, {})) if set(value) <= {"hip", "cuda"} and value else dict(value)


def warm_up(arch: str, log: Path) -> None:
    """Compile flybench's vector add for the worker's target, untimed: Triton's first compile loads its backend."""
    from flybench.compile.registry import get_case

    with capture.captured_output(log):
        _compile(get_case("triton_vector_add"), arch, CompileRecord("warm-up", arch, "ok"))


def compile_case(case: KernelCase, arch: str, log: Path) -> tuple[CompileRecord, dict[str, str]]:
    """Compile and parse; any failure becomes a "failed" record with the reason."""
    record = CompileRecord(case.name, arch, "failed", config=case.config)
    try:
        with capture.captured_output(log):
            compiled = _compile(case, arch, record)
    except Exception as exc:
        record.diagnostics = capture.diagnostics(log.read_text(errors="replace") if log.exists() else "")
        record.reason = capture.failure_reason(exc)
        return record, {}
    record.diagnostics = capture.diagnostics(log.read_text(errors="replace") if log.exists() else "")
    if arch.startswith("sm_"):
        return _nvidia(record, compiled, arch)
    kernels, suspect = describe_module(compiled.asm["amdgcn"], arch, [compiled.asm["hsaco"]],
                                       dynamic_lds={compiled.metadata.name: int(compiled.metadata.shared)})
    record.kernels, record.suspect = kernels, suspect
    finish(record, case.primary)
    return record, {"kernel.s": compiled.asm["amdgcn"]}


def _compile(case: KernelCase, arch: str, record: CompileRecord) -> Any:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if "plan" in case.config:  # a launch of the triton provider's plans, at the arch's configuration table entry
        from flybench.kernels.triton.specs import launch_spec

        spec = launch_spec(arch, **case.config["plan"])
        start = time.perf_counter()
        try:
            return spec.compile(arch)
        finally:
            record.compile_time_s = round(time.perf_counter() - start, 3)
    vendor = "cuda" if arch.startswith("sm_") else "hip"
    target = GPUTarget("cuda", int(arch[3:]), 32) if vendor == "cuda" else GPUTarget("hip", arch, 64)
    fn = capture.load_entry(case.entry)
    constexprs = _for_vendor(case.config.get("constexprs", {}), vendor)
    signature = {**case.config["signature"], **{name: "constexpr" for name in constexprs}}
    signature = {name: signature[name] for name in fn.arg_names if name in signature}
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in case.config.get("divisible_by_16", [])}
    source = ASTSource(fn, signature, constexprs, attrs)
    start = time.perf_counter()
    try:
        return triton.compile(source, target=target, options=_for_vendor(case.config.get("options", {}), vendor))
    finally:
        record.compile_time_s = round(time.perf_counter() - start, 3)


_PTXAS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_bytes": re.compile(r"(\d+) bytes spill stores"),
    "smem_static": re.compile(r"(\d+) bytes smem"),
}


def ptxas_resources(ptx: str, arch: str) -> dict[str, int]:
    """Registers, spill-store bytes and static shared memory per `ptxas -v` (the wheel's ptxas, Triton's flags)."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    capability = int(arch[3:])
    with tempfile.TemporaryDirectory(prefix="flybench-ptxas-") as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run([get_ptxas(capability).path, "-v", "--regAllocOptLevel=2",
                               f"--gpu-name={sm_arch_from_capability(capability)}", str(source), "-o",
                               str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"ptxas -v failed: {(done.stderr or done.stdout).strip()[-400:]}")
    text = done.stdout + done.stderr
    return {name: int(m[1]) if (m := pattern.search(text)) else 0 for name, pattern in _PTXAS.items()}


def _nvidia(record: CompileRecord, compiled: Any, arch: str) -> tuple[CompileRecord, dict[str, str]]:
    name = compiled.metadata.name
    try:
        resources = ptxas_resources(compiled.asm["ptx"], arch)
    except (OSError, RuntimeError, subprocess.SubprocessError, ImportError) as exc:
        record.reason = f"compiled, but reading its resources failed: {capture.failure_reason(exc)}"
        return record, {"kernel.ptx": compiled.asm["ptx"]}
    size = function_sizes(compiled.asm["cubin"]).get(name)
    metrics = {**resources, "smem_dynamic": int(compiled.metadata.shared), "code_size": size,
               "num_warps": int(compiled.metadata.num_warps)}
    record.kernels = {name: metrics}
    record.primary, record.status = name, "ok"
    record.metrics = {**metrics, "compile_time": record.compile_time_s}
    if size is not None and size <= 16:
        record.suspect.append(f"{name} has {size} bytes of SASS: suspected miscompile")
    return record, {"kernel.ptx": compiled.asm["ptx"]}
