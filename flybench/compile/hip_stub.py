"""A stand-in `libamdhip64.so.7` so that older FlyDSL wheels can be loaded, and compile, without ROCm.

FlyDSL wheels before 0.3.2 load their JIT runtime library (`libfly_jit_runtime.so`)
while compiling, even under COMPILE_ONLY, and that library links the HIP
runtime. On a machine without ROCm the load fails and the compiler aborts
before any code is generated. Compiling never calls HIP: the runtime is only
needed to launch. So the PyPI toolkit carries this stub, which defines the
HIP entry points those wheels link against (the same 22 in every wheel from
0.2.3 to 0.3.1, versioned `hip_4.2`) and nothing else, and is put on the
compile worker's LD_LIBRARY_PATH. Every stub returns hipErrorNoDevice, so a
HIP call that did happen would fail loudly rather than pretend to work;
the code objects the compiler emits do not depend on it. It is never used
where a real ROCm is installed, and never for launching anything.

Built with the `ziglang` package's C compiler, which the toolkit needs anyway.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

NAME = "libamdhip64.so.7"
VERSION_NODE = "hip_4.2"
HIP_ERROR_NO_DEVICE = 100
FUNCTIONS = (
    "hipEventCreateWithFlags", "hipEventDestroy", "hipEventRecord", "hipEventSynchronize", "hipFree",
    "hipHostGetDevicePointer", "hipHostRegister", "hipHostUnregister", "hipMalloc", "hipMemcpyAsync",
    "hipMemsetD16Async", "hipMemsetD32Async", "hipModuleGetFunction", "hipModuleLaunchKernel", "hipModuleLoadData",
    "hipModuleUnload", "hipSetDevice", "hipStreamCreate", "hipStreamDestroy", "hipStreamSynchronize",
    "hipStreamWaitEvent",
)


def source() -> str:
    """C for the stub: each entry point returns hipErrorNoDevice; hipGetErrorName says what this is."""
    lines = [f"int {name}(void) {{ return {HIP_ERROR_NO_DEVICE}; }}" for name in FUNCTIONS]
    lines.append('const char *hipGetErrorName(int e) { (void)e; '
                 'return "hipErrorNoDevice (flybench compile-only HIP stub: no HIP runtime here)"; }')
    return "\n".join(lines) + "\n"


def build(directory: Path) -> Path:
    """`directory/libamdhip64.so.7`, compiled once (written aside, then renamed)."""
    target = directory / NAME
    if target.is_file():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    c_file, script = directory / "hip_stub.c", directory / "hip_stub.map"
    c_file.write_text(source())
    script.write_text(f"{VERSION_NODE} {{ global: *; }};\n")
    aside = directory / f".{NAME}.{os.getpid()}"
    command = [sys.executable, "-m", "ziglang", "cc", "-shared", "-fPIC", "-O1", "-o", str(aside), str(c_file),
               f"-Wl,--version-script={script}", f"-Wl,-soname,{NAME}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"could not build the HIP loader stub: {done.stderr.strip()[-500:]}")
    os.replace(aside, target)
    return target
