"""Fused routed MoE in Triton: routing, gate+up grouped GEMM with SwiGLU, down GEMM with scatter-add.

Layouts are the workload's (flybench.workloads.moe). After routing
(`moe_routing`), every BLOCK_M rows of the sorted (token, k) pairs belong to one
expert, so each program of a grouped GEMM multiplies one block of rows by one
expert's weight tile:

1. gate+up: act[row] = silu(x[token] @ w_gate[e].T) * (x[token] @ w_up[e].T), both halves
   from one pass over x (two accumulators), SwiGLU in the epilogue; act rows stay in
   sorted order so the down GEMM reads them contiguously.
2. down: out[token] += weight[pair] * act[row] @ w2[e].T, the routing weight and the
   scatter-add (float32 atomics) in the epilogue; no per-pair output is written back.

fp8 (e4m3; fnuz when the weights are fnuz, as on gfx942): activations are
quantised per row (token, then intermediate row) by `quantize_rows`, weights
carry per-output-channel scales; both scales are applied to the float32
accumulator in the epilogue. The kernels never read the routing back to the
host, so a call is launches only.

The GEMMs take the sizes, the strides and the token count (`pairs`) at run
time, the sizes and tile strides in units of the ALIGN constant, multiplied
by it inside the kernel (`launch.in_units`: 16 where every one is a
multiple of 16), so Triton knows them to be multiples of 16. Unmarked, jax-triton (which marks only array pointers divisible
by 16) left Triton unable to prove 16-byte loads: no asynchronous copies,
one stage of shared memory, and the MoE 30 times slower inside `jax.jit`
than launched from torch (docs/model-lane.md). As compile-time constants
they gave the same pipeline, at one compile per model shape and dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from flybench.kernels.triton.configs import Config
from flybench.kernels.triton.launch import Launch, cdiv, in_units
from flybench.kernels.triton.moe_routing import Routing, plan_routing

_QUANT_ROWS = 16
"""Rows per quantisation program: short rows (2k-14k columns) share a program."""


@triton.jit
def quantize_rows(src, dst, scale, rows, cols, stride_src, stride_dst, row_ids, pairs,
                  FP8_MAX: tl.constexpr, SKIP_PADDING: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """dst[r] = src[r] / scale[r] in fp8 with scale[r] = amax(|src[r]|) / FP8_MAX, for ROWS rows.

    With SKIP_PADDING, rows whose row_ids entry is the padding sentinel (>= pairs) are not touched.
    """
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = r < rows
    if SKIP_PADDING:
        row_ok = row_ok & (tl.load(row_ids + r, mask=row_ok, other=pairs) < pairs)
    c = tl.arange(0, BLOCK)
    amax = tl.zeros([ROWS], tl.float32)
    for c0 in range(0, cols, BLOCK):
        ok = row_ok[:, None] & (c0 + c[None, :] < cols)
        v = tl.load(src + r[:, None] * stride_src + c0 + c[None, :], mask=ok, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(v), axis=1))
    s = tl.maximum(amax, 1e-12) / FP8_MAX
    for c0 in range(0, cols, BLOCK):
        ok = row_ok[:, None] & (c0 + c[None, :] < cols)
        v = tl.load(src + r[:, None] * stride_src + c0 + c[None, :], mask=ok, other=0.0).to(tl.float32)
        q = tl.minimum(tl.maximum(v / s[:, None], -FP8_MAX), FP8_MAX)
        tl.store(dst + r[:, None] * stride_dst + c0 + c[None, :], q.to(dst.dtype.element_ty), mask=ok)
    tl.store(scale + r, s, mask=row_ok)


@triton.jit
def _block_rows(sorted_ids, block_expert, pairs, n_size, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's row block, expert, pairs, tokens and columns, in grouped order.

    GROUP_M row blocks sweep the columns together, so consecutive programs share a weight tile.
    """
    pid = tl.program_id(0)
    num_n = tl.cdiv(n_size, BLOCK_N)
    num_m = tl.num_programs(0) // num_n
    width = GROUP_M * num_n
    first_m = (pid // width) * GROUP_M
    size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size
    pid_n = (pid % width) // size
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_ids + rows)
    expert = tl.load(block_expert + pid_m).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return pid_m, rows, pair, pair < pairs, pair // TOP_K, expert, cols


@triton.jit
def moe_gate_up(
    a, a_scale, w, w_scale, sorted_ids, block_expert, total, act, pairs,
    hidden, inter, stride_am, stride_we, stride_wn, stride_se, stride_cm,
    TOP_K: tl.constexpr, FP8: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, ALIGN: tl.constexpr,
):
    """act[row, n] = silu(gate) * up for one block of sorted rows and BLOCK_N intermediate columns.

    `act`, the one pointer the kernel writes, comes after every pointer it reads: jax-triton passes a custom
    call's operand buffers first and its output buffers after them, in parameter order."""
    hidden, inter = hidden * ALIGN, inter * ALIGN
    stride_am, stride_we = stride_am * ALIGN, stride_we * ALIGN
    stride_wn, stride_cm = stride_wn * ALIGN, stride_cm * ALIGN
    pid_m, rows, _, row_ok, token, expert, n = _block_rows(sorted_ids, block_expert, pairs, inter, TOP_K,
                                                           BLOCK_M, BLOCK_N, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(total):
        return
    n_ok = n < inter
    k = tl.arange(0, BLOCK_K)
    a_ptrs = a + token[:, None] * stride_am + k[None, :]
    g_ptrs = w + expert * stride_we + n[None, :] * stride_wn + k[:, None]
    u_ptrs = g_ptrs + inter * stride_wn
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    acc_u = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, hidden, BLOCK_K):
        k_ok = (k < hidden - k0) | EVEN_K  # EVEN_K: BLOCK_K divides K, a mask constant along K (vector loads)
        x = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        acc_g = tl.dot(x, tl.load(g_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0), acc_g)
        acc_u = tl.dot(x, tl.load(u_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0), acc_u)
        a_ptrs += BLOCK_K
        g_ptrs += BLOCK_K
        u_ptrs += BLOCK_K
    if FP8:
        row_scale = tl.load(a_scale + token, mask=row_ok, other=0.0)[:, None]
        scales = w_scale + expert * stride_se + n
        acc_g *= row_scale * tl.load(scales, mask=n_ok, other=0.0)[None, :]
        acc_u *= row_scale * tl.load(scales + inter, mask=n_ok, other=0.0)[None, :]
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    tl.store(act + rows[:, None] * stride_cm + n[None, :], h.to(act.dtype.element_ty),
             mask=row_ok[:, None] & n_ok[None, :])


@triton.jit
def moe_down(
    act, act_scale, w, w_scale, routing_weights, out, sorted_ids, block_expert, total, pairs,
    hidden, inter, stride_am, stride_we, stride_wn, stride_se, stride_om,
    TOP_K: tl.constexpr, FP8: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, ALIGN: tl.constexpr,
):
    """out[token, n] += weight[pair] * (act[row] @ w2[e, n].T) for one block of rows and BLOCK_N columns."""
    hidden, inter = hidden * ALIGN, inter * ALIGN
    stride_am, stride_we = stride_am * ALIGN, stride_we * ALIGN
    stride_wn, stride_om = stride_wn * ALIGN, stride_om * ALIGN
    pid_m, rows, pair, row_ok, token, expert, n = _block_rows(sorted_ids, block_expert, pairs, hidden, TOP_K,
                                                              BLOCK_M, BLOCK_N, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(total):
        return
    n_ok = n < hidden
    k = tl.arange(0, BLOCK_K)
    a_ptrs = act + rows[:, None] * stride_am + k[None, :]
    w_ptrs = w + expert * stride_we + n[None, :] * stride_wn + k[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, inter, BLOCK_K):
        k_ok = (k < inter - k0) | EVEN_K
        h = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        acc = tl.dot(h, tl.load(w_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0), acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if FP8:
        acc *= tl.load(act_scale + rows, mask=row_ok, other=0.0)[:, None]
        acc *= tl.load(w_scale + expert * stride_se + n, mask=n_ok, other=0.0)[None, :]
    acc *= tl.load(routing_weights + pair, mask=row_ok, other=0.0)[:, None]
    tl.atomic_add(out + token[:, None] * stride_om + n[None, :], acc, mask=row_ok[:, None] & n_ok[None, :],
                  sem="relaxed")


@dataclass
class MoePlan:
    """The launches of one MoE call and the buffers they share; build once, call many times."""

    launches: list[Launch]
    routing: Routing
    pairs: int
    out32: torch.Tensor
    out_dtype: torch.dtype

    @property
    def fills(self) -> tuple[tuple[torch.Tensor, int], ...]:
        """Buffers set before the launches, every call: padding rows must read as the sentinel, and the down
        GEMM adds into the float32 output."""
        return (self.routing.sorted_ids, self.pairs), (self.out32, 0)

    def results(self) -> dict[str, tuple[torch.Tensor, torch.dtype]]:
        """The output's buffer (float32, accumulated into) and the dtype it is returned in (the input's)."""
        return {"out": (self.out32, self.out_dtype)}

    def __call__(self) -> dict[str, torch.Tensor]:
        for buffer, value in self.fills:
            buffer.fill_(value)
        for launch in self.launches:
            launch()
        return {name: buffer.to(dtype) for name, (buffer, dtype) in self.results().items()}


def _quantize(src: torch.Tensor, fp8: torch.dtype, row_ids: torch.Tensor | None, pairs: int
              ) -> tuple[torch.Tensor, torch.Tensor, Launch]:
    rows, cols = src.shape
    dst = torch.empty((rows, cols), dtype=fp8, device=src.device)
    scale = torch.empty((rows,), dtype=torch.float32, device=src.device)
    launch = Launch(quantize_rows, (cdiv(rows, _QUANT_ROWS),), {
        "src": src, "dst": dst, "scale": scale, "rows": rows, "cols": cols, "stride_src": src.stride(0),
        "stride_dst": dst.stride(0), "row_ids": row_ids, "pairs": pairs},
        {"FP8_MAX": float(torch.finfo(fp8).max), "SKIP_PADDING": row_ids is not None, "ROWS": _QUANT_ROWS,
         "BLOCK": 256}, {"num_warps": 4})
    return dst, scale, launch


def plan(inputs: dict[str, torch.Tensor], top_k: int, config: Config) -> MoePlan:
    """Buffers and launches for one case's inputs (real or meta tensors); fp8 when w13 is fp8."""
    x, w13, w2 = inputs["x"], inputs["w13"], inputs["w2"]
    tokens, hidden = x.shape
    inter = w2.shape[2]
    fp8 = w13.dtype if w13.element_size() == 1 else None
    meta = dict(config.constexprs)
    block_m = meta["BLOCK_M"]
    routing, launches = plan_routing(inputs["router_logits"], top_k, block_m)
    pairs, rows = tokens * top_k, routing.sorted_ids.numel()
    a, a_scale = x, None
    if fp8 is not None:
        a, a_scale, quantize_x = _quantize(x, fp8, None, pairs)
        launches.insert(0, quantize_x)
    act = torch.empty((rows, inter), dtype=x.dtype, device=x.device)
    shared = {"sorted_ids": routing.sorted_ids, "block_expert": routing.block_expert, "total": routing.total,
              "pairs": pairs}
    constexprs = {"TOP_K": top_k, "FP8": fp8 is not None, **meta}
    num_m = rows // block_m
    tiles, align = in_units({"hidden": hidden, "inter": inter, "stride_am": a.stride(0), "stride_we": w13.stride(0),
                             "stride_wn": w13.stride(1), "stride_cm": act.stride(0)})
    launches.append(Launch(moe_gate_up, (num_m * cdiv(inter, meta["BLOCK_N"]),), {
        "a": a, "a_scale": a_scale, "w": w13, "w_scale": inputs.get("w13_scale"), "act": act, **shared, **tiles,
        "stride_se": 2 * inter},
        {**constexprs, "EVEN_K": hidden % meta["BLOCK_K"] == 0, "ALIGN": align},
        dict(config.options)))
    h, h_scale = act, None
    if fp8 is not None:
        h, h_scale, quantize_h = _quantize(act, fp8, routing.sorted_ids, pairs)
        launches.append(quantize_h)
    out32 = torch.empty((tokens, hidden), dtype=torch.float32, device=x.device)
    tiles, align = in_units({"hidden": hidden, "inter": inter, "stride_am": h.stride(0), "stride_we": w2.stride(0),
                             "stride_wn": w2.stride(1), "stride_om": out32.stride(0)})
    launches.append(Launch(moe_down, (num_m * cdiv(hidden, meta["BLOCK_N"]),), {
        "act": h, "act_scale": h_scale, "w": w2, "w_scale": inputs.get("w2_scale"),
        "routing_weights": routing.weights, "out": out32, **shared, **tiles, "stride_se": hidden},
        {**constexprs, "EVEN_K": inter % meta["BLOCK_K"] == 0, "ALIGN": align},
        dict(config.options)))
    return MoePlan(launches, routing, pairs, out32, x.dtype)
