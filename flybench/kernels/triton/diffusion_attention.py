"""Diffusion attention in Triton: a draft block of queries over a paged KV prefix plus itself.

Layouts are the workload's (flybench.workloads.diffusion_attention). One program
owns one KV head of one sequence, a tile of BLOCK_M query rows and one split of
the prefix. The rows are (draft token, query head of the GQA group) pairs,
token-major, so a group of 7 query heads (Dream-7B) and 32 draft tokens is 224
rows that share every K/V tile they load: K/V is read once per KV head, not
once per query head. The prefix is read straight from the paged cache through
the block table (page size is a compile-time constant, any power of two), the
draft block from its scratch region, in the same pass.

Split-K: a decode step has few (sequence, KV head) pairs, so a long prefix is
cut into splits that run as separate programs; each writes its normalised
partial output and log-sum-exp, and a second kernel combines them. The last
split also takes the draft block. With one split the first kernel writes the
final output directly.

Strides are run-time values, passed in units of the ALIGN constant and
multiplied by it inside the kernels (`launch.in_units`: 16 where every tile
stride is a multiple of 16): Triton then knows every tile's alignment
however it is launched. jax-triton marks only array pointers divisible by 16, so with
unmarked strides its compile loaded K and V without vectors or asynchronous
copies (docs/model-lane.md); as compile-time constants they gave the same
pipeline, but one compile per batch, draft length and block-table width
(130 kernels for a context growing from 4,096 to 8,192 tokens, where 2-3
do). Only the block-table and log-sum-exp strides stay unmarked: their
loads and stores are scalar.

Softmax runs in base 2 (exp2, scale folded with log2 e); the returned lse is the
natural log, like the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from flybench.kernels.triton.configs import Config
from flybench.kernels.triton.launch import Launch, cdiv, in_units, next_power_of_2

_MAX_SPLITS = 64
_NEG_BIG = tl.constexpr(-1.0e30)  # finite "minus infinity" for running maxima: masked tiles never give inf - inf


@triton.jit
def _softmax_tile(scores, v, m_i, l_i, acc):
    """Fold one tile of base-2 scores and its V rows into the running max, sum and output."""
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(scores - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_i, acc


@triton.jit
def _prefix_tile(q_tile, k_cache, v_cache, table_row, n0, end, kvh, scale_log2, stride_cp, stride_cs, stride_ch,
                 m_i, l_i, acc, HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
                 MASKED: tl.constexpr, WIDE_OFFSETS: tl.constexpr):
    """Fold prefix tokens n0 .. n0+BLOCK_N-1 in; only the last tile of a split is MASKED (tokens past `end`).

    Where a page holds whole tiles, a tile's rows are one page's consecutive slots: one page number,
    a strided tile. Otherwise each token looks up its own page.
    """
    cols = tl.arange(0, BLOCK_N)
    dim = tl.arange(0, HEAD_DIM)
    t = n0 + cols
    t_ok = t < end
    if PAGE_SIZE >= BLOCK_N:
        page = tl.load(table_row + n0 // PAGE_SIZE)
        slot = n0 % PAGE_SIZE + cols
    elif MASKED:
        page = tl.load(table_row + t // PAGE_SIZE, mask=t_ok, other=0)
        slot = t % PAGE_SIZE
    else:
        page = tl.load(table_row + t // PAGE_SIZE)
        slot = t % PAGE_SIZE
    if WIDE_OFFSETS:  # 64-bit element offsets only for caches of 2^31 elements or more
        page = page.to(tl.int64)
    kv = (page * stride_cp + slot * stride_cs + kvh * stride_ch)[:, None] + dim[None, :]
    if MASKED:
        k = tl.load(k_cache + kv, mask=t_ok[:, None], other=0.0)  # K and V tiles share one offset tensor
        v = tl.load(v_cache + kv, mask=t_ok[:, None], other=0.0)
        scores = tl.where(t_ok[None, :], tl.dot(q_tile, tl.trans(k)) * scale_log2, float("-inf"))
    else:
        k = tl.load(k_cache + kv)
        v = tl.load(v_cache + kv)
        scores = tl.dot(q_tile, tl.trans(k)) * scale_log2
    return _softmax_tile(scores, v, m_i, l_i, acc)


@triton.jit
def diffusion_attention_fwd(
    q, k_cache, v_cache, block_table, context_lens, k_draft, v_draft, out, lse,
    scale_log2, tokens_per_split, kv_heads,
    stride_qb, stride_qt, stride_qh,
    stride_cp, stride_cs, stride_ch,
    stride_tb,
    stride_db, stride_dt, stride_dh,
    stride_os, stride_ob, stride_ot, stride_oh,
    stride_ls, stride_lb, stride_lh,
    DRAFT: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DRAFT: tl.constexpr,
    WIDE_OFFSETS: tl.constexpr, ALIGN: tl.constexpr,
):
    """Grid (row tiles, batch x KV heads, splits). Writes out [split, b, token, head, :] and lse."""
    stride_qb, stride_qt, stride_qh = (stride_qb * ALIGN, stride_qt * ALIGN,
                                       stride_qh * ALIGN)
    stride_cp, stride_cs, stride_ch = (stride_cp * ALIGN, stride_cs * ALIGN,
                                       stride_ch * ALIGN)
    stride_db, stride_dt, stride_dh = (stride_db * ALIGN, stride_dt * ALIGN,
                                       stride_dh * ALIGN)
    stride_os, stride_ob = stride_os * ALIGN, stride_ob * ALIGN
    stride_ot, stride_oh = stride_ot * ALIGN, stride_oh * ALIGN
    pid_m, pid_bh, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    b = pid_bh // kv_heads
    kvh = pid_bh % kv_heads
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < GROUP * DRAFT
    token = rows // GROUP
    head = kvh * GROUP + rows % GROUP
    dim = tl.arange(0, HEAD_DIM)
    q_ptrs = q + b * stride_qb + token[:, None] * stride_qt + head[:, None] * stride_qh + dim[None, :]
    q_tile = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], _NEG_BIG, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    context = tl.load(context_lens + b)
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, context)
    table_row = block_table + b * stride_tb
    full_end = start + tl.maximum(end - start, 0) // BLOCK_N * BLOCK_N  # whole tiles run without masks
    for n0 in range(start, full_end, BLOCK_N):
        m_i, l_i, acc = _prefix_tile(q_tile, k_cache, v_cache, table_row, n0, end, kvh, scale_log2, stride_cp,
                                     stride_cs, stride_ch, m_i, l_i, acc, HEAD_DIM, PAGE_SIZE, BLOCK_N, False,
                                     WIDE_OFFSETS)
    if full_end < end:
        m_i, l_i, acc = _prefix_tile(q_tile, k_cache, v_cache, table_row, full_end, end, kvh, scale_log2,
                                     stride_cp, stride_cs, stride_ch, m_i, l_i, acc, HEAD_DIM, PAGE_SIZE, BLOCK_N,
                                     True, WIDE_OFFSETS)

    if split == tl.num_programs(2) - 1:  # the last split also attends to the draft block
        j = tl.arange(0, BLOCK_DRAFT)
        j_ok = j < DRAFT
        d_off = (b * stride_db + j * stride_dt + kvh * stride_dh)[:, None] + dim[None, :]
        k = tl.load(k_draft + d_off, mask=j_ok[:, None], other=0.0)
        v = tl.load(v_draft + d_off, mask=j_ok[:, None], other=0.0)
        visible = j_ok[None, :]
        if CAUSAL:
            visible = visible & (j[None, :] <= token[:, None])
        scores = tl.where(visible, tl.dot(q_tile, tl.trans(k)) * scale_log2, float("-inf"))
        m_i, l_i, acc = _softmax_tile(scores, v, m_i, l_i, acc)

    has_mass = l_i > 0.0
    o = acc / tl.where(has_mass, l_i, 1.0)[:, None]
    lse_row = tl.where(has_mass, (m_i + tl.math.log2(tl.where(has_mass, l_i, 1.0))) * 0.6931471805599453,
                       float("-inf"))
    out_base = out + split.to(tl.int64) * stride_os + b * stride_ob
    o_ptrs = out_base + token[:, None] * stride_ot + head[:, None] * stride_oh + dim[None, :]
    tl.store(o_ptrs, o.to(out.dtype.element_ty), mask=row_ok[:, None])
    tl.store(lse + split * stride_ls + b * stride_lb + head * stride_lh + token, lse_row, mask=row_ok)


@triton.jit
def combine_splits(
    o_part, lse_part, out, lse, num_splits, q_heads,
    stride_ps, stride_pb, stride_pt, stride_ph,
    stride_ls, stride_lb, stride_lh,
    stride_ob, stride_ot, stride_oh,
    DRAFT: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, ALIGN: tl.constexpr,
):
    """One program per (sequence, query head, BLOCK_T draft tokens, BLOCK_D dims): out = sum_s exp(lse_s - lse) o_s.

    Streams over the splits with a running max, so any split count fits in registers. A decode step
    has few (sequence, head) pairs, so the dims are cut into BLOCK_D slices to give the GPU enough
    programs (each slice recomputes the lse; the first stores it). The partial and final lse are both
    contiguous [.., batch, head, token], so they share stride_lb and stride_lh.
    """
    stride_ps, stride_pb = stride_ps * ALIGN, stride_pb * ALIGN
    stride_pt, stride_ph = stride_pt * ALIGN, stride_ph * ALIGN
    stride_ob, stride_ot, stride_oh = (stride_ob * ALIGN, stride_ot * ALIGN,
                                       stride_oh * ALIGN)
    pid_bh, pid_t, pid_d = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    b = pid_bh // q_heads
    head = pid_bh % q_heads
    token = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = token < DRAFT
    dim = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    part_o = o_part + b * stride_pb + token[:, None] * stride_pt + head * stride_ph + dim[None, :]
    part_lse = lse_part + b * stride_lb + head * stride_lh + token
    top = tl.full([BLOCK_T], _NEG_BIG, tl.float32)
    total = tl.zeros([BLOCK_T], tl.float32)
    acc = tl.zeros([BLOCK_T, BLOCK_D], tl.float32)
    for _ in range(num_splits):
        lse_s = tl.load(part_lse, mask=t_ok, other=float("-inf"))
        top_new = tl.maximum(top, lse_s)
        alpha = tl.exp(top - top_new)
        weight = tl.exp(lse_s - top_new)
        acc = acc * alpha[:, None] + tl.load(part_o, mask=t_ok[:, None], other=0.0) * weight[:, None]
        total = total * alpha + weight
        top = top_new
        part_lse += stride_ls
        part_o += stride_ps
    o_ptrs = out + b * stride_ob + token[:, None] * stride_ot + head * stride_oh + dim[None, :]
    tl.store(o_ptrs, (acc / total[:, None]).to(out.dtype.element_ty), mask=t_ok[:, None])
    if pid_d == 0:
        tl.store(lse + b * stride_lb + head * stride_lh + token, top + tl.log(total), mask=t_ok)


@dataclass
class AttentionPlan:
    """The launches of one call and the tensors they write; build once, call many times."""

    launches: list[Launch]
    out: torch.Tensor
    lse: torch.Tensor
    num_splits: int
    fills = ()
    """Buffers that must hold a value before the launches: none, every buffer is written before it is read."""

    def results(self) -> dict[str, tuple[torch.Tensor, torch.dtype]]:
        """Each output's buffer and the dtype it is returned in (its own)."""
        return {"out": (self.out, self.out.dtype), "lse": (self.lse, self.lse.dtype)}

    def __call__(self) -> dict[str, torch.Tensor]:
        for launch in self.launches:
            launch()
        return {"out": self.out, "lse": self.lse}


def plan_splits(max_context: int, programs: int, compute_units: int, block_n: int, min_split_tokens: int) -> int:
    """Splits that give about two programs per compute unit without splits shorter than min_split_tokens."""
    wanted = cdiv(2 * compute_units, max(programs, 1))
    by_length = max(1, max_context // max(min_split_tokens, block_n))
    return max(1, min(wanted, by_length, _MAX_SPLITS))


def plan(
    inputs: dict[str, torch.Tensor], context_lens: Sequence[int], causal: bool, scale: float, config: Config,
    compute_units: int, num_splits: int | None = None,
) -> AttentionPlan:
    """Allocate outputs and describe the launches for one case's inputs (real or meta tensors).

    `context_lens` are the host copies of inputs["context_lens"] (the split plan depends on
    the longest prefix, and reading it from the device inside a timed call would synchronise).
    """
    q, k_cache, k_draft = inputs["q"], inputs["k_cache"], inputs["k_draft"]
    batch, draft, q_heads, head_dim = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    if q_heads % kv_heads or head_dim != next_power_of_2(head_dim) or page_size != next_power_of_2(page_size):
        raise ValueError(f"need q heads divisible by kv heads and power-of-two head_dim and page size; got "
                         f"{q_heads}/{kv_heads}, {head_dim}, {page_size}")
    for name in ("q", "k_cache", "v_cache", "k_draft", "v_draft"):
        if inputs[name].stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in head_dim")
    rows = group * draft
    block_m = min(config.constexprs["BLOCK_M"], max(16, next_power_of_2(rows)))
    block_n = config.constexprs["BLOCK_N"]
    row_tiles = cdiv(rows, block_m)
    max_context = max(context_lens, default=0)
    if num_splits is None:
        num_splits = plan_splits(max_context, row_tiles * batch * kv_heads, compute_units, block_n,
                                 config.host["min_split_tokens"])
    tokens_per_split = max(block_n, cdiv(cdiv(max(max_context, 1), num_splits), block_n) * block_n)
    num_splits = max(1, cdiv(max_context, tokens_per_split))

    device = q.device
    out = torch.empty((batch, draft, q_heads, head_dim), dtype=q.dtype, device=device)
    lse = torch.empty((batch, q_heads, draft), dtype=torch.float32, device=device)
    if num_splits == 1:  # the first kernel writes the final tensors (split index 0 of a leading axis)
        o_first, lse_first = out.unsqueeze(0), lse.unsqueeze(0)
    else:
        o_first = torch.empty((num_splits, *out.shape), dtype=torch.float32, device=device)
        lse_first = torch.empty((num_splits, *lse.shape), dtype=torch.float32, device=device)
    args = {
        "q": q, "k_cache": k_cache, "v_cache": inputs["v_cache"], "block_table": inputs["block_table"],
        "context_lens": inputs["context_lens"], "k_draft": k_draft, "v_draft": inputs["v_draft"],
        "out": o_first, "lse": lse_first,
        "scale_log2": scale * math.log2(math.e), "tokens_per_split": tokens_per_split, "kv_heads": kv_heads,
    }
    tiles = {
        "stride_qb": q.stride(0), "stride_qt": q.stride(1), "stride_qh": q.stride(2),
        "stride_cp": k_cache.stride(0), "stride_cs": k_cache.stride(1), "stride_ch": k_cache.stride(2),
        "stride_db": k_draft.stride(0), "stride_dt": k_draft.stride(1), "stride_dh": k_draft.stride(2),
        "stride_os": o_first.stride(0), "stride_ob": o_first.stride(1), "stride_ot": o_first.stride(2),
        "stride_oh": o_first.stride(3),
    }
    tiles, align = in_units(tiles)
    args.update(tiles, stride_tb=inputs["block_table"].stride(0), stride_ls=lse_first.stride(0),
                stride_lb=lse_first.stride(1), stride_lh=lse_first.stride(2))
    constexprs = {"DRAFT": draft, "GROUP": group, "HEAD_DIM": head_dim, "PAGE_SIZE": page_size, "CAUSAL": causal,
                  "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_DRAFT": max(16, next_power_of_2(draft)),
                  "WIDE_OFFSETS": k_cache.numel() >= 2**31, "ALIGN": align}
    launches = [Launch(diffusion_attention_fwd, (row_tiles, batch * kv_heads, num_splits), args, constexprs,
                       dict(config.options))]
    if num_splits > 1:
        block_t, block_d = 16, min(32, head_dim)
        tiles = {"stride_ps": o_first.stride(0), "stride_pb": o_first.stride(1), "stride_pt": o_first.stride(2),
                 "stride_ph": o_first.stride(3),
                 "stride_ob": out.stride(0), "stride_ot": out.stride(1), "stride_oh": out.stride(2)}
        tiles, align = in_units(tiles)
        launches.append(Launch(combine_splits, (batch * q_heads, cdiv(draft, block_t), head_dim // block_d), {
            "o_part": o_first, "lse_part": lse_first, "out": out, "lse": lse, "num_splits": num_splits,
            "q_heads": q_heads, **tiles,
            "stride_ls": lse_first.stride(0), "stride_lb": lse.stride(0), "stride_lh": lse.stride(1),
        }, {"DRAFT": draft, "BLOCK_T": block_t, "BLOCK_D": block_d, "ALIGN": align},
            {"num_warps": 4}))
    return AttentionPlan(launches, out, lse, num_splits)
