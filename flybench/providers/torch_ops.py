"""Plain torch formulations shared by the torch, flex and BLAS providers.

Each function computes a workload's result the way a framework user would
write it in eager torch, in the inputs' element type.
"""

from __future__ import annotations

import math
from typing import Callable

from flybench.workloads.base import Case, Tensors


def sdpa_bshd(q, k, v, causal: bool, scale: float) -> "torch.Tensor":  # noqa: F821
    """scaled_dot_product_attention on BSHD tensors (GQA when k/v have fewer heads)."""
    import torch.nn.functional as F

    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=causal, scale=scale, enable_gqa=k.shape[2] != q.shape[2])
    return out.transpose(1, 2)


def attention_scale(case: Case) -> float:
    return float(case.shape.get("scale") or 1.0 / math.sqrt(case.shape["head_dim"]))


def paged_kv_gather(inputs: Tensors) -> Callable[[], tuple["torch.Tensor", "torch.Tensor"]]:  # noqa: F821
    """A call gathering the prefix pages through the block table, then appending the draft block.

    The call returns K and V as [batch, max_pages * page_size + draft, kv_heads, head_dim];
    positions past a sequence's context length are padding that the mask hides. The block
    table's int64 form (unused entries clamped to page 0) is made here, once: the gather is
    the paths' own work, the table's layout is not.
    """
    import torch

    batch, pages = inputs["block_table"].shape
    page_size = inputs["k_cache"].shape[1]
    table = inputs["block_table"].clamp_min(0).long()

    def gather() -> tuple["torch.Tensor", "torch.Tensor"]:  # noqa: F821
        kv = []
        for cache, draft in ((inputs["k_cache"], inputs["k_draft"]), (inputs["v_cache"], inputs["v_draft"])):
            prefix = cache[table].reshape(batch, pages * page_size, *cache.shape[2:])
            kv.append(torch.cat([prefix, draft], dim=1))
        return kv[0], kv[1]

    return gather


def diffusion_visible(inputs: Tensors, causal: bool) -> "torch.Tensor":  # noqa: F821
    """Boolean [batch, 1, draft, kv_len]: the whole prefix, and the draft block (causal or not)."""
    import torch

    batch, pages = inputs["block_table"].shape
    prefix_len = pages * inputs["k_cache"].shape[1]
    draft = inputs["q"].shape[1]
    device = inputs["q"].device
    position = torch.arange(prefix_len, device=device)
    prefix = position[None, :] < inputs["context_lens"].to(device).long()[:, None]  # [batch, prefix_len]
    block = torch.ones(draft, draft, dtype=torch.bool, device=device)
    if causal:
        block = block.tril()
    visible = torch.cat([prefix[:, None, :].expand(batch, draft, prefix_len),
                         block[None].expand(batch, draft, draft)], dim=2)
    return visible[:, None]


def diffusion_sdpa(case: Case, inputs: Tensors) -> Callable[[], Tensors]:
    """A call that gathers the pages, appends the draft block and runs masked SDPA.

    The mask depends only on the context lengths and the case, and the block
    table's index form only on the inputs, so both are built here, once, outside
    the timed call; the gather is the path's own work.
    """
    import torch.nn.functional as F

    visible = diffusion_visible(inputs, case.shape["mask"] == "causal")
    q = inputs["q"].transpose(1, 2)
    scale = attention_scale(case)
    gather = paged_kv_gather(inputs)

    def call() -> Tensors:
        k, v = gather()
        out = F.scaled_dot_product_attention(q, k.transpose(1, 2), v.transpose(1, 2), attn_mask=visible,
                                             scale=scale, enable_gqa=k.shape[2] != q.shape[1])
        return {"out": out.transpose(1, 2)}

    return call


MLA_BMM_CONTEXT = 1024
"""MLA decode over this many cached tokens a sequence or more runs as two batched GEMMs, below it as SDPA: on the
H200 (`python -m studies.mla_torch_paths`) SDPA took 43.9 us at B1 C128 against 90.9 us, but 212.0 against
90.5 us at B4 C2048 and 962.8 against 727.7 us at B32 C8192."""


def mla_decode_path(case: Case) -> str:
    """How torch runs this MLA decode case: "sdpa" (short contexts) or "bmm"."""
    return "sdpa" if case.shape["context"] < MLA_BMM_CONTEXT else "bmm"


def mla_decode_runner(case: Case, inputs: Tensors) -> Callable[[], Tensors]:
    """The faster of torch's two MLA decode paths for this case's context (`mla_decode_path`)."""
    return (mla_decode_sdpa if mla_decode_path(case) == "sdpa" else mla_decode_bmm)(case, inputs)


def mla_decode_sdpa(case: Case, inputs: Tensors) -> Callable[[], Tensors]:
    """A call that gathers each sequence's cached tokens and runs SDPA over them, its 128 heads as the queries
    of one head.

    Every head attends to the same single KV head with no mask, so the heads
    fold into the query axis: one [128, C] score matrix per sequence, as
    MLA decode kernels compute it. Asking SDPA for 128 query heads on one KV
    head instead (enable_gqa) has its fallback repeat the cache per head: 128
    times the bytes (72 GiB at B32 C8192). The keys are the whole 576-wide
    latent and rotary token, the values its first 512 (a view, not a copy).
    """
    import torch.nn.functional as F

    p = case.shape
    b, c = p["batch"], p["context"]
    indices = inputs["kv_indices"].long()
    q = inputs["q"].unsqueeze(1)  # [B, 1, H, 576]: one head, H query positions

    def call() -> Tensors:
        keys = inputs["kv_cache"][indices].view(b, 1, c, -1)  # [B, 1, C, 576]
        out = F.scaled_dot_product_attention(q, keys, keys[..., :p["kv_lora"]], scale=p["scale"])
        return {"out": out.squeeze(1)}

    return call


def mla_decode_bmm(case: Case, inputs: Tensors) -> Callable[[], Tensors]:
    """The same attention as two batched GEMMs over the gathered tokens, softmax in float32 between them: SDPA's
    kernel for these head widths (576 and 512) runs one block per 32 queries, too few for long contexts."""
    import torch

    p = case.shape
    b, c = p["batch"], p["context"]
    indices = inputs["kv_indices"].long()
    q = inputs["q"]  # [B, H, 576]

    def call() -> Tensors:
        keys = inputs["kv_cache"][indices].view(b, c, -1)  # [B, C, 576]
        scores = torch.bmm(q, keys.transpose(1, 2)).float() * p["scale"]  # [B, H, C]
        return {"out": torch.bmm(torch.softmax(scores, dim=-1).to(q.dtype), keys[..., :p["kv_lora"]])}

    return call


def quantize_per_token(x) -> tuple["torch.Tensor", "torch.Tensor"]:  # noqa: F821
    """fp8 e4m3 rows with one float32 scale per row (dynamic per-token activation scaling)."""
    import torch

    from flybench.workloads.dtypes import device_dtype

    fp8 = device_dtype("fp8", str(x.device))  # fnuz on gfx942, like the weights
    amax = x.abs().amax(dim=-1, keepdim=True).float().clamp_min(1e-12)
    scale = amax / torch.finfo(fp8).max
    return (x.float() / scale).to(fp8), scale


def linear(x, weight, weight_scale=None) -> "torch.Tensor":  # noqa: F821
    """x @ weight.T; with fp8 weights, per-token activation and per-channel weight scales."""
    if weight_scale is None:
        return x @ weight.T
    import torch

    xq, x_scale = quantize_per_token(x)
    return torch._scaled_mm(xq, weight.T, scale_a=x_scale, scale_b=weight_scale.float()[None, :],
                            out_dtype=torch.bfloat16)


def fp8_grouped_gemm_available() -> bool:
    """Whether torch has a grouped fp8 GEMM here: torch._scaled_grouped_mm, which runs on NVIDIA sm_90 and newer."""
    import torch

    return (hasattr(torch, "_scaled_grouped_mm") and torch.cuda.is_available() and not torch.version.hip
            and torch.cuda.get_device_capability() >= (9, 0))


LOOP_ROWS = 1024
"""fp8 MoE stages whose experts get this many pairs each on average run one torch._scaled_mm per expert rather
than one grouped GEMM: on the H200, FlyDSL CI's 16-expert stage (8,192 pairs an expert) ran 12% faster as a
loop (54.5 against 61.6 ms), its 128- and 384-expert stages (3 to 16 pairs) 6 to 32 times faster grouped."""


def moe_stage_path(case: Case, dtype: str) -> str:
    """How torch runs this MoE stage: "grouped" (one grouped GEMM) or "per-expert" (a _scaled_mm per expert)."""
    p = case.shape
    if dtype != "fp8":
        return "grouped"
    rows = p["tokens"] * p["top_k"] / p["experts"]
    return "grouped" if fp8_grouped_gemm_available() and rows < LOOP_ROWS else "per-expert"


def grouped_linear(x, weight, offsets, weight_scale=None) -> "torch.Tensor":  # noqa: F821
    """Expert-sorted rows of x times each expert's weight.T, one grouped GEMM: bf16 through torch._grouped_mm;
    fp8 through torch._scaled_grouped_mm with per-token activation and per-channel weight scales (as `linear`)."""
    import torch

    if weight_scale is None:
        return torch._grouped_mm(x, weight.transpose(1, 2), offs=offsets)
    xq, x_scale = quantize_per_token(x)
    return torch._scaled_grouped_mm(xq, weight.transpose(1, 2), x_scale.reshape(-1), weight_scale.float(),
                                    offs=offsets, out_dtype=torch.bfloat16)


def swiglu(gate_up: "torch.Tensor", dtype: "torch.dtype") -> "torch.Tensor":  # noqa: F821
    """silu(gate) * up of a gate+up GEMM's output (gate first), in float32, cast to `dtype`."""
    import torch.nn.functional as F

    gate, up = gate_up.chunk(2, dim=-1)
    return (F.silu(gate.float()) * up.float()).to(dtype)


def moe_expert_loop(case: Case, inputs: Tensors) -> Tensors:
    """Route, then one gate+up GEMM, SwiGLU and down GEMM per expert that got tokens.

    The per-expert token counts are read on the host, as a framework without
    a grouped GEMM does; that synchronisation is part of this path's cost.
    """
    import torch

    from flybench.workloads.moe import route

    x = inputs["x"]
    top_k = case.shape["top_k"]
    weights, ids = route(inputs["router_logits"], top_k)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=inputs["w13"].shape[0]).tolist()
    token_of, weight_of = order // top_k, weights.reshape(-1)[order]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    start = 0
    for expert, count in enumerate(counts):
        if count:
            rows = token_of[start:start + count]
            hidden = swiglu(linear(x[rows], inputs["w13"][expert], _scale(inputs, "w13_scale", expert)), x.dtype)
            y = linear(hidden, inputs["w2"][expert], _scale(inputs, "w2_scale", expert))
            out.index_add_(0, rows, y.float() * weight_of[start:start + count, None])
            start += count
    return {"out": out.to(x.dtype)}


def moe_grouped_gemm(case: Case, inputs: Tensors) -> Tensors:
    """Route, gather, and both expert GEMMs as one grouped GEMM each (torch._grouped_mm).

    No host synchronisation: the expert offsets stay on the device, so the
    whole layer is a fixed sequence of launches (graph-capturable). bf16 only.
    """
    import torch

    from flybench.workloads.moe import route

    x, w13, w2 = inputs["x"], inputs["w13"], inputs["w2"]
    top_k = case.shape["top_k"]
    weights, ids = route(inputs["router_logits"], top_k)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    offsets = torch.bincount(flat, minlength=w13.shape[0]).cumsum(0).to(torch.int32)
    rows = order // top_k
    hidden = swiglu(torch._grouped_mm(x[rows], w13.transpose(1, 2), offs=offsets), x.dtype)
    y = torch._grouped_mm(hidden, w2.transpose(1, 2), offs=offsets)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    out.index_add_(0, rows, y.float() * weights.reshape(-1)[order, None])
    return {"out": out.to(x.dtype)}


def moe_stage_runner(case: Case, inputs: Tensors) -> Callable[[], Tensors]:
    """A call of one MoE stage over routing sorted here, outside the timed call (as FlyDSL's stage tests do).

    One grouped GEMM over the expert-sorted pairs (`grouped_linear`): bf16
    always, fp8 where torch has a grouped fp8 GEMM (NVIDIA sm_90+) and the
    experts' groups are small (`moe_stage_path`); else one torch._scaled_mm
    per expert that got pairs (the per-expert counts are known here, so the
    call never waits on the host). fp8 activations are quantised per token in
    the call. Stage 1 writes the activation, in pair order, as "out".
    """
    import torch

    from flybench.workloads.moe import route

    p = case.shape
    k, inter, stage = p["top_k"], p["inter"], p["stage"]
    weights, ids = route(inputs["router_logits"], k)
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)  # pair indices, grouped by expert
    counts = torch.bincount(flat, minlength=inputs["w13"].shape[0])
    offsets = counts.cumsum(0).to(torch.int32)
    token_of, weight_of = order // k, weights.reshape(-1)[order, None]
    x = inputs["x"]
    grouped = moe_stage_path(case, "fp8" if "w13_scale" in inputs else "bf16") == "grouped"
    spans = [(e, start, start + n) for e, (start, n) in enumerate(zip((offsets - counts).tolist(), counts.tolist()))
             if n]

    if stage == 1:
        act = torch.empty((p["tokens"] * k, inter), dtype=x.dtype, device=x.device)

        def first() -> Tensors:
            if grouped:
                gate_up = grouped_linear(x[token_of], inputs["w13"], offsets, inputs.get("w13_scale"))
                act.index_copy_(0, order, swiglu(gate_up, x.dtype))
            else:
                for e, a, b in spans:
                    act.index_copy_(0, order[a:b], swiglu(linear(x[token_of[a:b]], inputs["w13"][e],
                                                                 inputs["w13_scale"][e]), x.dtype))
            return {"out": act}

        return first

    act_in = inputs["act"]
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)

    def second() -> Tensors:
        out.zero_()
        if grouped:
            down = grouped_linear(act_in[order], inputs["w2"], offsets, inputs.get("w2_scale"))
            out.index_add_(0, token_of, down.float() * weight_of)
        else:
            for e, a, b in spans:
                down = linear(act_in[order[a:b]], inputs["w2"][e], inputs["w2_scale"][e])
                out.index_add_(0, token_of[a:b], down.float() * weight_of[a:b])
        return {"out": out.to(x.dtype)}

    return second


def _scale(inputs: Tensors, name: str, expert: int):
    return inputs[name][expert] if name in inputs else None


def gemm_runner(case: Case, inputs: Tensors):
    """C = A @ B^T (fp8 with per-tensor scales), or a device-to-device copy into a buffer made here."""
    import torch

    if case.shape["kind"] == "copy":
        src = inputs["src"]
        dst = torch.empty_like(src)
        return lambda: {"out": dst.copy_(src)}
    a, b = inputs["a"], inputs["b"]
    if "a_scale" not in inputs:
        return lambda: {"out": a @ b.T}
    a_scale, b_scale = inputs["a_scale"], inputs["b_scale"]
    return lambda: {"out": torch._scaled_mm(a, b.T, scale_a=a_scale, scale_b=b_scale, out_dtype=torch.bfloat16)}
