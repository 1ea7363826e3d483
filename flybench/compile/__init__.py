"""Compile-only kernel resource metrics for gfx942, gfx950 (FlyDSL, Triton) and sm_90 (Triton), no GPU needed.

A register, LDS or spill regression shows before any timing does and can be
measured on a CPU-only runner: both compilers cross-compile. The pieces:

- `registry`: the kernels, their compile-time configurations and targets.
- `toolchain`: the AMDGPU link toolkit FlyDSL needs, from ROCm or PyPI (ziglang's LLD, triton's bitcode).
- `runner` / `workers` / `worker`: availability, the cache, compile workers per (backend, target).
- `flydsl_driver`, `flydsl_upstream`, `triton_driver`, `triton_kernels`: compiling one case.
- `isa`, `elf`, `amd`, `occupancy`: reading the ISA, the code object and estimating occupancy.
- `record`, `cache`, `report`: what is kept, where, and how it is shown.

`python -m flybench.compile` prints the table; `benchmarks/compile_metrics.py`
tracks every metric in asv; `flybench doctor` says what is missing here.
"""

from flybench.compile.record import AMD_METRICS, NVIDIA_METRICS, CompileRecord
from flybench.compile.runner import measure, measure_one

__all__ = ["AMD_METRICS", "NVIDIA_METRICS", "CompileRecord", "measure", "measure_one"]
