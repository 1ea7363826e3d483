"""Portable Triton kernels for the diffusion-attention and routed-MoE workloads.

- `diffusion_attention`: draft-block attention over a paged KV prefix, split-K over long prefixes.
- `moe_routing`, `moe`: top-k routing into expert-aligned blocks, then two grouped GEMMs with
  SwiGLU and the weighted scatter-add fused into their epilogues (bf16 and fp8 e4m3).
- `configs` / `config_table`: the configuration of every kernel per architecture.
- `launch`: a kernel launch as data, so the same description runs a kernel or compiles it.
- `cases`: from a workload case to a kernel plan (provider, check and specs all go through it).
- `specs`: every kernel at every configuration of an architecture, for compile-only metrics.
- `check`: the kernels against the workloads' float32 references (GPU, or Triton's interpreter).
- `tune`: measures candidate configurations on a GPU and rewrites `config_table` with the winners.

Importing this package does not import triton; the kernel modules do.
"""
