"""MoE routing on the device: top-k softmax, then (token, k) pairs sorted into expert-aligned blocks.

The result is the layout of `flybench.workloads.moe.sort_by_expert` (vLLM's
moe_align_block_size), element for element: pairs grouped by expert in
ascending order, stable within an expert, each group padded with the sentinel
T*k to a multiple of BLOCK_M, one expert id per block. Nothing is read back to
the host: buffers are sized for the worst case (T*k + min(E, T*k)*(BLOCK_M-1)
rows) and the GEMMs skip blocks past the padded total, which lives on the device.

Three passes make the sort parallel and stable: count each chunk's pairs per
expert; prefix-sum the counts over chunks (per expert) and the padded totals
over experts; scatter each pair to group start + chunk offset + its rank among
the same expert's pairs earlier in its chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from flybench.kernels.triton.launch import Launch, cdiv, next_power_of_2

CHUNK = 128
"""Pairs per program in the count and scatter passes (the rank compare is CHUNK x CHUNK)."""


@triton.jit
def topk_softmax(logits, weights, ids, tokens, experts, stride_t,
                 TOP_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr):
    """Per token: the TOP_K largest logits (highest first) and their softmax, like `route`."""
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    row_ok = rows < tokens
    x = tl.load(logits + rows[:, None] * stride_t + cols[None, :],
                mask=row_ok[:, None] & (cols[None, :] < experts), other=float("-inf")).to(tl.float32)
    top = tl.max(x, axis=1)
    remaining = x
    total = tl.zeros([BLOCK_T], tl.float32)
    for _ in tl.static_range(TOP_K):  # first pass: the softmax denominator over the chosen logits
        best = tl.argmax(remaining, axis=1)
        total += tl.exp(tl.max(remaining, axis=1) - top)
        remaining = tl.where(cols[None, :] == best[:, None], float("-inf"), remaining)
    remaining = x
    for k in tl.static_range(TOP_K):
        best = tl.argmax(remaining, axis=1)
        weight = tl.exp(tl.max(remaining, axis=1) - top) / total
        tl.store(ids + rows * TOP_K + k, best.to(tl.int32), mask=row_ok)
        tl.store(weights + rows * TOP_K + k, weight, mask=row_ok)
        remaining = tl.where(cols[None, :] == best[:, None], float("-inf"), remaining)


@triton.jit
def count_chunks(ids, counts, pairs, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    """counts[chunk, e] = pairs of this chunk routed to expert e."""
    chunk = tl.program_id(0)
    i = chunk * CHUNK + tl.arange(0, CHUNK)
    ok = i < pairs
    expert = tl.load(ids + i, mask=ok, other=0)
    tl.store(counts + chunk * BLOCK_E + tl.arange(0, BLOCK_E), tl.histogram(expert, BLOCK_E, mask=ok))


@triton.jit
def expert_offsets(counts, chunk_offsets, group_start, group_end, total, chunks,
                   BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, TILE_C: tl.constexpr):
    """One program: each chunk's offset inside its expert's group, each group's padded start and end."""
    e = tl.arange(0, BLOCK_E)
    running = tl.zeros([BLOCK_E], tl.int32)
    for c0 in range(0, chunks, TILE_C):
        c = c0 + tl.arange(0, TILE_C)
        at = c[:, None] * BLOCK_E + e[None, :]
        n = tl.load(counts + at, mask=c[:, None] < chunks, other=0)
        tl.store(chunk_offsets + at, running[None, :] + tl.cumsum(n, axis=0) - n, mask=c[:, None] < chunks)
        running += tl.sum(n, axis=0)
    padded = (running + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    end = tl.cumsum(padded, axis=0)
    tl.store(group_start + e, end - padded)
    tl.store(group_end + e, end)
    tl.store(total, tl.sum(padded, axis=0))


@triton.jit
def scatter_pairs(ids, chunk_offsets, group_start, group_end, sorted_ids, block_expert, pairs, max_blocks,
                  CHUNK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr):
    """Place each pair of a chunk at its sorted position; label CHUNK blocks with their expert."""
    pid = tl.program_id(0)
    lane = tl.arange(0, CHUNK)
    i = pid * CHUNK + lane
    ok = i < pairs
    expert = tl.load(ids + i, mask=ok, other=-1)
    earlier = (expert[:, None] == expert[None, :]) & (lane[None, :] < lane[:, None])
    rank = tl.sum(earlier.to(tl.int32), axis=1)
    base = tl.load(chunk_offsets + pid * BLOCK_E + expert, mask=ok, other=0)
    base += tl.load(group_start + expert, mask=ok, other=0)
    tl.store(sorted_ids + base + rank, i, mask=ok)

    blocks = pid * CHUNK + lane  # block labels: the expert whose padded group holds the block's first row
    e = tl.arange(0, BLOCK_E)
    ends = tl.load(group_end + e)
    owner = tl.sum((ends[None, :] <= blocks[:, None] * BLOCK_M).to(tl.int32), axis=1)
    last = tl.max(ends, axis=0)
    tl.store(block_expert + blocks, tl.where(blocks * BLOCK_M < last, owner, -1), mask=blocks < max_blocks)


@dataclass
class Routing:
    """Device buffers the routing fills and the GEMMs read."""

    weights: torch.Tensor  # float32 [T, k]
    ids: torch.Tensor  # int32 [T, k]
    sorted_ids: torch.Tensor  # int32 [max_rows], sentinel T*k in padding
    block_expert: torch.Tensor  # int32 [max_rows // BLOCK_M], -1 past the padded total
    total: torch.Tensor  # int32 [1], rows after padding


def max_sorted_rows(pairs: int, experts: int, block_m: int) -> int:
    """Worst-case padded rows: every non-empty group may need block_m - 1 padding rows."""
    return cdiv(pairs + min(experts, pairs) * (block_m - 1), block_m) * block_m


def plan_routing(router_logits: torch.Tensor, top_k: int, block_m: int) -> tuple[Routing, list[Launch]]:
    """Buffers and launches that route `router_logits` [T, E] into blocks of `block_m` rows.

    sorted_ids must hold the sentinel before the scatter runs: the caller fills it
    (Routing.sorted_ids.fill_(T * k)) before the launches, every call.
    """
    tokens, experts = router_logits.shape
    pairs, device = tokens * top_k, router_logits.device
    block_e = max(16, next_power_of_2(experts))
    chunks = cdiv(pairs, CHUNK)
    rows = max_sorted_rows(pairs, experts, block_m)
    i32 = {"dtype": torch.int32, "device": device}
    routing = Routing(
        weights=torch.empty((tokens, top_k), dtype=torch.float32, device=device),
        ids=torch.empty((tokens, top_k), **i32),
        sorted_ids=torch.empty((rows,), **i32),
        block_expert=torch.empty((rows // block_m,), **i32),
        total=torch.empty((1,), **i32),
    )
    counts = torch.empty((chunks, block_e), **i32)
    chunk_offsets = torch.empty((chunks, block_e), **i32)
    group_start, group_end = torch.empty((block_e,), **i32), torch.empty((block_e,), **i32)
    block_t = min(max(1, 4096 // block_e), next_power_of_2(tokens))  # about 4k logits per program
    launches = [
        Launch(topk_softmax, (cdiv(tokens, block_t),), {
            "logits": router_logits, "weights": routing.weights, "ids": routing.ids, "tokens": tokens,
            "experts": experts, "stride_t": router_logits.stride(0)},
            {"TOP_K": top_k, "BLOCK_T": block_t, "BLOCK_E": block_e}, {"num_warps": 4}),
        Launch(count_chunks, (chunks,), {"ids": routing.ids, "counts": counts, "pairs": pairs},
               {"CHUNK": CHUNK, "BLOCK_E": block_e}, {"num_warps": 4}),
        Launch(expert_offsets, (1,), {
            "counts": counts, "chunk_offsets": chunk_offsets, "group_start": group_start,
            "group_end": group_end, "total": routing.total, "chunks": chunks},
            {"BLOCK_M": block_m, "BLOCK_E": block_e, "TILE_C": 16}, {"num_warps": 4}),
        Launch(scatter_pairs, (max(chunks, cdiv(rows // block_m, CHUNK)),), {
            "ids": routing.ids, "chunk_offsets": chunk_offsets, "group_start": group_start,
            "group_end": group_end, "sorted_ids": routing.sorted_ids, "block_expert": routing.block_expert,
            "pairs": pairs, "max_blocks": rows // block_m},
            {"CHUNK": CHUNK, "BLOCK_M": block_m, "BLOCK_E": block_e}, {"num_warps": 4}),
    ]
    return routing, launches
