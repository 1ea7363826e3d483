"""Weight layout and routing metadata of the fused MoE kernels of FlyDSL and AITER/CK.

Both families read expert weights "preshuffled" in 16x16 tiles (the (16, 16)
layout of AITER's `shuffle_weight`, which FlyDSL's `moe_gemm_2stage` reads
through `make_weight_view`): per expert [N, K] with 16-byte vectors of
`VEC = 16 // element_size` elements, element (n, k) sits at

    (n // 16) * 16 * K + (k // VEC) * 16 * VEC + (n % 16) * VEC + k % VEC

and both take routing as "sorted token ids": the (token, slot) pairs grouped by
expert, each group padded to a multiple of the kernel's row tile, every id
packed as `slot << 24 | token`, with `topk << 24 | tokens` as padding (AITER's
moe_sorting; FlyDSL's tests use the same format). The buffers have a fixed
size that depends only on the shapes, so building them needs no host sync and
the kernel grid is fixed: blocks past `num_valid_ids` exit at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

TILE_N = 16
"""Rows of one preshuffle tile (the MFMA's N)."""


def preshuffle(weight: "torch.Tensor") -> "torch.Tensor":
    """[..., N, K] -> the same shape, reordered into 16 x (2 * VEC) tiles (see the module docstring)."""
    vec = 16 // weight.element_size()
    n, k = weight.shape[-2], weight.shape[-1]
    if n % TILE_N or k % (2 * vec):
        raise ValueError(f"preshuffle needs N % {TILE_N} == 0 and K % {2 * vec} == 0; got N={n}, K={k}")
    tiles = weight.reshape(-1, n // TILE_N, TILE_N, k // (2 * vec), 2, vec)
    return tiles.permute(0, 1, 3, 4, 2, 5).contiguous().view(weight.shape)


def pack_int4(codes: "torch.Tensor") -> "torch.Tensor":
    """int8 codes in [-8, 7] [..., K] -> uint8 [..., K / 2], two's-complement nibbles, even K in the low one
    (FlyDSL's tests/kernels/utils/gemm_common_utils.pack_uint4 over `codes & 0xF`)."""
    import torch

    nibbles = (codes.to(torch.int16) & 0xF).to(torch.uint8)
    return nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)


def preshuffled_offset(n: "torch.Tensor", k: "torch.Tensor", big_k: int, vec: int) -> "torch.Tensor":
    """Where element (n, k) of one expert's [N, K] weight lands in the preshuffled buffer.

    Written from the kernel's reading layout, independently of `preshuffle`, so the
    tests can check one against the other.
    """
    return (n // TILE_N) * TILE_N * big_k + (k // vec) * TILE_N * vec + (n % TILE_N) * vec + k % vec


@dataclass
class SortedRouting:
    """Routing metadata in the kernels' format (all on the routing's device).

    sorted_ids int32 [capacity], sorted_weights float32 [capacity],
    expert_ids int32 [blocks] (-1 past the used blocks), num_valid_ids int32 [1].
    """

    sorted_ids: "torch.Tensor"
    sorted_weights: "torch.Tensor"
    expert_ids: "torch.Tensor"
    num_valid_ids: "torch.Tensor"

    @property
    def blocks(self) -> int:
        return int(self.expert_ids.numel())


def capacity(tokens: int, top_k: int, experts: int, block: int) -> tuple[int, int]:
    """(sorted-id slots, row blocks) enough for any routing: at most block - 1 padding per expert."""
    slots = tokens * top_k + experts * block - top_k
    return slots, -(-slots // block)


def sort_routing(topk_ids: "torch.Tensor", topk_weights: "torch.Tensor", experts: int, block: int) -> SortedRouting:
    """Group the (token, slot) pairs by expert (ascending; stable within an expert), padded per expert.

    The same grouping as `flybench.workloads.moe.sort_by_expert`, in the kernels'
    packing and in fixed-size buffers, using device ops only.
    """
    import torch

    tokens, top_k = topk_ids.shape
    device = topk_ids.device
    flat = topk_ids.reshape(-1).long()
    slots, blocks = capacity(tokens, top_k, experts, block)
    counts = torch.bincount(flat, minlength=experts)
    padded = (counts + block - 1) // block * block
    group_start = torch.cumsum(padded, 0) - padded
    order = torch.argsort(flat, stable=True)
    rank = torch.arange(flat.numel(), device=device) - (torch.cumsum(counts, 0) - counts)[flat[order]]
    position = group_start[flat[order]] + rank
    sorted_ids = torch.full((slots,), (top_k << 24) | tokens, dtype=torch.int32, device=device)
    sorted_ids[position] = (((order % top_k) << 24) | (order // top_k)).to(torch.int32)
    sorted_weights = torch.zeros(slots, dtype=torch.float32, device=device)
    sorted_weights[position] = topk_weights.reshape(-1).float()[order]
    block_end = torch.cumsum(padded, 0) // block
    expert_of_block = torch.searchsorted(block_end, torch.arange(blocks, device=device), right=True)
    expert_ids = torch.where(expert_of_block < experts, expert_of_block, -1).to(torch.int32)
    return SortedRouting(sorted_ids, sorted_weights, expert_ids, padded.sum().reshape(1).to(torch.int32))


def row_tile(tokens: int, top_k: int, experts: int) -> int:
    """FlyDSL's two tile_m choices (its tests use 16 for decode, 64 for prefill): 16 while an
    expert gets fewer than 64 rows on average, so padding does not dominate."""
    return 16 if tokens * top_k < 64 * experts else 64


def pair_positions(routing: SortedRouting, tokens: int, top_k: int) -> "torch.Tensor":
    """int64 [tokens * top_k]: where each (token, slot) pair p = token * top_k + slot sits in the sorted ids."""
    import torch

    ids = routing.sorted_ids.long()
    token, slot = ids & 0xFFFFFF, ids >> 24
    valid = token < tokens
    positions = torch.empty(tokens * top_k, dtype=torch.long, device=ids.device)
    positions[token[valid] * top_k + slot[valid]] = torch.nonzero(valid).squeeze(1)
    return positions
