"""Place the draft block's K/V inside the paged cache, for kernels that read only pages.

The diffusion workload keeps the draft block's K/V in a scratch region beside
the paged prefix. FlyDSL's paged flash attention and CK's batch prefill read
K/V only through a page table, so an adapter must put the draft tokens where
such a kernel can see them: right after each sequence's prefix, as a serving
engine appends new tokens (vLLM's reshape_and_cache). The draft fills the free
tail of the sequence's last prefix page, then fresh pages appended to its
block table. With the draft after the prefix, bottom-right-aligned causal
masking (query i sees keys j <= i + seqlen_k - seqlen_q) is exactly the
workload's causal draft mask, and non-causal attention over seqlen_k keys is
its bidirectional mask.

`build` does the bookkeeping and copies the prefix pages into a cache with
room for the new pages, once, outside any timed call. `append` is the step a
kernel-only number leaves out: one scatter of B x D tokens into their slots.
Providers time it separately (`flydsl+append`, `ck+append`), never hidden.

Kernels that read a prefix table of single tokens and the new tokens' K/V
from their own tensors (sglang's extend attention) need no append:
`prefix_token_slots` builds that table from the workload's pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flybench.workloads.base import Tensors

if TYPE_CHECKING:
    import torch

INDEX_PAD = 128
"""Zero entries after the flat page-index list; upstream tests pad it the same way for over-reading kernels."""


@dataclass
class AppendedCache:
    """A paged cache that holds prefix and draft, and both forms of its page table.

    vLLM form: `block_table` [B, max_pages] and `seqlen_k` [B]. sglang/FlashInfer
    form (CK's batch prefill): `kv_indptr` [B+1], `page_indices` (flat, padded)
    and `last_page_lens` [B]. Varlen form of the queries: `cu_seqlens_q` [B+1],
    `cu_seqlens_kv` [B+1], `max_seqlen_q`, `max_seqlen_k`. All index tensors are
    int32 on the cache's device; `slots` (int64 [B*D]) is where draft token
    (b, j) lands in the cache viewed as [pages * page_size, Hkv, hd].
    """

    k_cache: "torch.Tensor"
    v_cache: "torch.Tensor"
    block_table: "torch.Tensor"
    seqlen_k: "torch.Tensor"
    kv_indptr: "torch.Tensor"
    page_indices: "torch.Tensor"
    last_page_lens: "torch.Tensor"
    cu_seqlens_q: "torch.Tensor"
    cu_seqlens_kv: "torch.Tensor"
    max_seqlen_q: int
    max_seqlen_k: int
    slots: "torch.Tensor"

    @property
    def page_size(self) -> int:
        return int(self.k_cache.shape[1])

    def append(self, k_draft: "torch.Tensor", v_draft: "torch.Tensor") -> None:
        """Scatter the draft block's K/V ([B, D, Hkv, hd]) into their slots, in place."""
        for cache, draft in ((self.k_cache, k_draft), (self.v_cache, v_draft)):
            flat = cache.view(-1, *cache.shape[2:])
            flat.index_copy_(0, self.slots, draft.reshape(-1, *draft.shape[2:]))


def build(inputs: Tensors) -> AppendedCache:
    """Lay out room for the draft after each prefix; the draft is not written yet (see `append`).

    Reads the context lengths and block table on the host: this is set-up, not
    part of any timed call.
    """
    import torch

    k_cache, v_cache = inputs["k_cache"], inputs["v_cache"]
    device = k_cache.device
    num_pages, page_size = int(k_cache.shape[0]), int(k_cache.shape[1])
    batch, draft = int(inputs["q"].shape[0]), int(inputs["q"].shape[1])
    context = [int(n) for n in inputs["context_lens"].tolist()]
    old_table = inputs["block_table"].cpu()
    rows, slots, next_page = [], [], num_pages
    for b, length in enumerate(context):
        pages = old_table[b, : -(-length // page_size)].tolist()
        extra = -(-(length + draft) // page_size) - len(pages)
        pages += list(range(next_page, next_page + extra))
        next_page += extra
        for position in range(length, length + draft):
            slots.append(pages[position // page_size] * page_size + position % page_size)
        rows.append(pages)
    table = torch.zeros((batch, max(len(r) for r in rows)), dtype=torch.int32)
    for b, pages in enumerate(rows):
        table[b, : len(pages)] = torch.tensor(pages, dtype=torch.int32)
    seqlen_k = torch.tensor([n + draft for n in context], dtype=torch.int32)
    counts = torch.tensor([len(r) for r in rows], dtype=torch.int32)
    flat_pages = torch.tensor([p for r in rows for p in r] + [0] * INDEX_PAD, dtype=torch.int32)
    caches = []
    for cache in (k_cache, v_cache):
        grown = torch.empty((next_page, *cache.shape[1:]), dtype=cache.dtype, device=device)
        grown[:num_pages].copy_(cache)
        grown[num_pages:].zero_()
        caches.append(grown)

    def on_device(t: "torch.Tensor") -> "torch.Tensor":
        return t.to(device)

    return AppendedCache(
        k_cache=caches[0], v_cache=caches[1], block_table=on_device(table), seqlen_k=on_device(seqlen_k),
        kv_indptr=on_device(_cumsum0(counts)), page_indices=on_device(flat_pages),
        last_page_lens=on_device((seqlen_k - 1) % page_size + 1),
        cu_seqlens_q=on_device(torch.arange(batch + 1, dtype=torch.int32) * draft),
        cu_seqlens_kv=on_device(_cumsum0(seqlen_k)), max_seqlen_q=draft, max_seqlen_k=int(seqlen_k.max()),
        slots=torch.tensor(slots, dtype=torch.int64, device=device),
    )


def _cumsum0(values: "torch.Tensor") -> "torch.Tensor":
    """[0, v0, v0+v1, ...] as int32: the indptr form of per-sequence counts."""
    import torch

    return torch.cat([torch.zeros(1, dtype=torch.int32), torch.cumsum(values, 0).to(torch.int32)])


def packed_queries(inputs: Tensors) -> "torch.Tensor":
    """q [B, D, Hq, hd] as the varlen kernels take it: [B*D, Hq, hd] (a view, no copy)."""
    q = inputs["q"]
    return q.reshape(-1, *q.shape[2:])


def unpack(outputs: Tensors, inputs: Tensors) -> Tensors:
    """Varlen outputs back to the workload's layout: "out" [B*D, Hq, hd] -> [B, D, Hq, hd] and,
    when present, "lse" [Hq, B*D] -> [B, Hq, D] (views, no copies)."""
    b, d, hq = inputs["q"].shape[:3]
    unpacked = {"out": outputs["out"].view(inputs["q"].shape)}
    if "lse" in outputs:
        unpacked["lse"] = outputs["lse"].view(hq, b, d).permute(1, 0, 2)
    return unpacked


def prefix_token_slots(inputs: Tensors) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Each sequence's prefix as token slots of the cache viewed as [pages * P, Hkv, hd]: (kv_indptr
    int32 [B+1], kv_indices int32 [sum of context lengths]), the page-size-1 table of sglang's
    extend attention. Reads the block table on the host: set-up, not part of any timed call."""
    import torch

    page = int(inputs["k_cache"].shape[1])
    lengths = inputs["context_lens"].cpu().long()
    table = inputs["block_table"].cpu().long()
    slots = [table[b, torch.arange(n) // page] * page + torch.arange(n) % page for b, n in enumerate(lengths.tolist())]
    device = inputs["k_cache"].device
    return _cumsum0(lengths).to(device), torch.cat(slots).to(torch.int32).to(device)
