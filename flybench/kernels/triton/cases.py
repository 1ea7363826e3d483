"""From a workload case to a kernel plan: the one place that maps cases onto the Triton kernels.

The provider, the correctness check and the compile-only specs all go through
`build`, so they run (or compile) the same kernels at the same configurations.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from flybench.hardware import fp8_dtype_name
from flybench.kernels.triton import configs
from flybench.workloads.base import Case, Tensors

WORKLOADS = ("diffusion_attention", "moe")


def fp8_dtype(arch: str) -> torch.dtype:
    """The e4m3 flavour the architecture's matrix units take (fnuz on gfx942, OCP elsewhere)."""
    return getattr(torch, fp8_dtype_name(arch))


def build(case: Case, dtype: str, inputs: Tensors, arch: str, compute_units: int | None = None,
          num_splits: int | None = None, config: configs.Config | None = None) -> Callable[[], Tensors]:
    """The plan (a callable returning the outputs) for one case on `arch`.

    compute_units defaults to the table's reference part for `arch`; num_splits
    overrides the attention split plan (tests force the combine kernel with it);
    config replaces the table's entry (the tuning study tries candidates with it).
    """
    units = compute_units or configs.compute_units(arch)
    p = case.shape
    if case.workload == "diffusion_attention":
        from flybench.kernels.triton import diffusion_attention

        config = config or configs.attention_config(arch, p["q_heads"] // p["kv_heads"] * p["draft"])
        return diffusion_attention.plan(inputs, p["context_lens"], p["mask"] == "causal", p["scale"], config, units,
                                        num_splits)
    if case.workload == "moe":
        from flybench.kernels.triton import moe

        return moe.plan(inputs, p["top_k"], config or configs.moe_config(arch, dtype, p["tokens"]))
    raise ValueError(f"the Triton kernels implement {', '.join(WORKLOADS)}, not {case.workload}")


def bucket_cases(arch: str, workload: str, dtype: str, cases: list[Case]) -> dict[int, list[Case]]:
    """`cases` (of `workload`) grouped by the index of the table entry that configures them.

    The caller hands the cases in: this module is what the providers and the
    compile specs build kernels through, so it must not import the workload
    catalog (which holds the model lane, which runs the providers' layers).
    """
    entries = configs.entries(arch, workload, dtype)
    grouped: dict[int, list[Case]] = {}
    for case in cases:
        p = case.shape
        size = p["tokens"] if workload == "moe" else p["q_heads"] // p["kv_heads"] * p["draft"]
        grouped.setdefault(configs.bucket_index(entries, size), []).append(case)
    return grouped


def meta_inputs(case: Case, dtype: str, arch: str) -> Tensors:
    """Inputs of the workload's shapes and element types on the meta device (nothing allocated).

    Mirrors the workloads' make_inputs (tests compare the two), so compile-only
    specs can describe the full catalog's launches without memory or a GPU.
    """
    p = case.shape

    def empty(shape: tuple[int, ...], dt: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dt, device="meta")

    if case.workload == "diffusion_attention":
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        b, d, hkv, hd = p["batch"], p["draft"], p["kv_heads"], p["head_dim"]
        pages = [-(-n // p["page_size"]) for n in p["context_lens"]]
        cache = (sum(pages), p["page_size"], hkv, hd)
        return {"q": empty((b, d, p["q_heads"], hd), dt), "k_cache": empty(cache, dt), "v_cache": empty(cache, dt),
                "k_draft": empty((b, d, hkv, hd), dt), "v_draft": empty((b, d, hkv, hd), dt),
                "block_table": empty((b, max(pages)), torch.int32), "context_lens": empty((b,), torch.int32)}
    t, h, i, e = p["tokens"], p["hidden"], p["inter"], p["experts"]
    weight = fp8_dtype(arch) if dtype == "fp8" else torch.bfloat16
    inputs = {"x": empty((t, h), torch.bfloat16), "router_logits": empty((t, e), torch.float32),
              "w13": empty((e, 2 * i, h), weight), "w2": empty((e, h, i), weight)}
    if dtype == "fp8":
        inputs.update(w13_scale=empty((e, 2 * i), torch.float32), w2_scale=empty((e, h), torch.float32))
    return inputs
