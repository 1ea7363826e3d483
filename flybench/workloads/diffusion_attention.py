"""Block-diffusion / TiDAR decode step: a draft block of queries over a paged prefix plus itself.

Inputs (B = batch, D = draft tokens, P = page size):
  q            [B, D, Hq, hd]            the draft tokens' queries
  k_cache      [num_pages, P, Hkv, hd]   paged prefix keys (v_cache likewise)
  block_table  int32 [B, max_pages]      page ids of each sequence, in order; pages are
                                         shuffled across sequences; unused entries are 0
  context_lens int32 [B]                 prefix length per sequence (ragged)
  k_draft      [B, D, Hkv, hd]           the draft block's keys, outside the cache (v_draft likewise)
Every query sees the whole prefix; inside the draft block the mask is "bidirectional"
(diffusion: all D) or "causal" (verification: draft j <= i). Query head h reads kv head
h // (Hq // Hkv). Outputs: "out" [B, D, Hq, hd] and "lse" [B, Hq, D] (natural log).
Context "ctxNk" in a case name is the longest prefix: lengths are drawn in [N/2, N] k
tokens; "ctxmix" draws them in [1k, 32k].
"""

from __future__ import annotations

from functools import lru_cache

from flybench.workloads._inputs import generator, ragged_lengths, randn, size_label
from flybench.workloads.attention import attend
from flybench.workloads.base import Case, Tensors, Workload
from flybench.workloads.dtypes import BYTES_PER_ELEMENT, device_dtype

HEAD_DIM = 128
MASKS = {"bidirectional": "bidir", "causal": "causal"}
# short name -> (model, q heads, kv heads)
MODELS = {"llada8b": ("LLaDA-8B", 32, 32), "llama3-8b": ("Llama-3-8B", 32, 8), "dream7b": ("Dream-7B", 28, 4)}
_BASE = {"batch": 8, "ctx": 4096, "draft": 32, "page_size": 16, "mask": "bidirectional"}
# One factor at a time around the base: batch x context, draft size, page size, mask.
_VARIANTS = [
    {"batch": 1, "ctx": 1024}, {"batch": 1, "ctx": 32768}, {}, {"ctx": 16384}, {"batch": 64},
    {"batch": 16, "ctx": "mix"}, {"draft": 16}, {"draft": 64}, {"page_size": 64},
    {"mask": "causal"}, {"batch": 64, "mask": "causal"},
]
_QUICK = [
    "llada8b-b8-ctx4k-d32-p16-bidir", "llada8b-b8-ctx4k-d32-p16-causal", "llada8b-b8-ctx4k-d64-p16-bidir",
    "llama3-8b-b64-ctx4k-d32-p16-bidir", "llama3-8b-b8-ctx4k-d32-p64-bidir",
    "dream7b-b16-ctxmix-d32-p16-bidir", "dream7b-b1-ctx32k-d32-p16-bidir",
]
_TINY = [  # (heads label, q heads, kv heads, batch, longest prefix, draft, page size, mask)
    ("mha", 4, 4, 2, 100, 16, 16, "bidirectional"), ("mha", 4, 4, 2, 100, 16, 16, "causal"),
    ("gqa", 4, 2, 3, 80, 16, 16, "causal"), ("gqa7", 7, 1, 3, 150, 16, 64, "bidirectional"),
    ("gqa", 4, 2, 1, 20, 32, 16, "bidirectional"),
]


def _case(
    prefix: str, model: str, hq: int, hkv: int, batch: int, ctx: int | str, draft: int, page: int, mask: str
) -> Case:
    low, high = (1024, 32768) if ctx == "mix" else (max(1, int(ctx) // 2), int(ctx))
    label = "mix" if ctx == "mix" else size_label(int(ctx))
    name = f"{prefix}-b{batch}-ctx{label}-d{draft}-p{page}-{MASKS[mask]}"
    shape = {
        "batch": batch, "q_heads": hq, "kv_heads": hkv, "head_dim": HEAD_DIM, "draft": draft,
        "page_size": page, "context_lens": ragged_lengths(batch, low, high, "diffusion_attention"), "mask": mask,
        "scale": HEAD_DIM**-0.5,
    }
    return Case("diffusion_attention", name, shape, model)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    full = []
    for prefix, (model, hq, hkv) in MODELS.items():
        for variant in _VARIANTS:
            p = {**_BASE, **variant}
            full.append(_case(prefix, model, hq, hkv, p["batch"], p["ctx"], p["draft"], p["page_size"], p["mask"]))
    by_name = {c.name: c for c in full}
    tiny = [_case(f"tiny-{label}", "tiny", hq, hkv, b, ctx, d, pg, m) for label, hq, hkv, b, ctx, d, pg, m in _TINY]
    return {"tiny": tiny, "quick": [by_name[n] for n in _QUICK], "full": full}


def _pages(case: Case) -> list[int]:
    """Pages each sequence's prefix occupies (the last one may be partly filled)."""
    return [-(-n // case.shape["page_size"]) for n in case.shape["context_lens"]]


class DiffusionAttentionWorkload(Workload):
    """The attention of one diffusion-LM decode step: paged prefix plus a draft block."""

    name = "diffusion_attention"
    dtypes = ("bf16", "fp16")
    description = "Draft-block attention over a paged KV prefix (block diffusion / TiDAR), bidirectional or causal."

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        """Random pages are assigned to sequences in a shuffled order, so contiguous reads fail."""
        import torch

        self.check_dtype(dtype)
        p = case.shape
        gen, dt = generator(seed), device_dtype(dtype, device)
        b, d, hkv, hd = p["batch"], p["draft"], p["kv_heads"], p["head_dim"]
        pages = _pages(case)
        cache_shape = (sum(pages), p["page_size"], hkv, hd)
        inputs = {
            "q": randn(gen, (b, d, p["q_heads"], hd), dt, device),
            "k_cache": randn(gen, cache_shape, dt, device),
            "v_cache": randn(gen, cache_shape, dt, device),
            "k_draft": randn(gen, (b, d, hkv, hd), dt, device),
            "v_draft": randn(gen, (b, d, hkv, hd), dt, device),
        }
        order = torch.randperm(sum(pages), generator=gen).to(torch.int32)
        table = torch.zeros((b, max(pages)), dtype=torch.int32)
        start = 0
        for i, n in enumerate(pages):
            table[i, :n] = order[start : start + n]
            start += n
        inputs["block_table"] = table.to(device)
        inputs["context_lens"] = torch.tensor(p["context_lens"], dtype=torch.int32, device=device)
        return inputs

    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        """Per sequence: gather its pages, append the draft K/V, attend with the draft-block mask."""
        import torch

        q = inputs["q"]
        b, d, hq, hd = q.shape
        page_size, hkv = inputs["k_cache"].shape[1], inputs["k_cache"].shape[2]
        out = torch.empty((b, d, hq, hd), dtype=torch.float32, device=q.device)
        lse = torch.empty((b, hq, d), dtype=torch.float32, device=q.device)
        draft_mask = torch.ones((d, d), dtype=torch.bool, device=q.device)
        if case.shape["mask"] == "causal":
            draft_mask = draft_mask.tril()
        for i, length in enumerate(inputs["context_lens"].tolist()):
            pages = inputs["block_table"][i, : -(-length // page_size)].long()
            k = torch.cat([inputs["k_cache"][pages].reshape(-1, hkv, hd)[:length], inputs["k_draft"][i]])
            v = torch.cat([inputs["v_cache"][pages].reshape(-1, hkv, hd)[:length], inputs["v_draft"][i]])
            prefix_mask = torch.ones((d, length), dtype=torch.bool, device=q.device)
            out[i], lse[i] = attend(q[i], k, v, case.shape["scale"], torch.cat([prefix_mask, draft_mask], dim=1))
        return {"out": out, "lse": lse}

    def flops(self, case: Case) -> float:
        """4 * hd per visible score (QK^T and PV): D x prefix, plus D^2 (bidirectional) or D(D+1)/2 (causal)."""
        p = case.shape
        d = p["draft"]
        draft = d * d if p["mask"] == "bidirectional" else d * (d + 1) // 2
        visible = sum(d * n + draft for n in p["context_lens"])
        return 4.0 * p["q_heads"] * p["head_dim"] * visible

    def min_bytes(self, case: Case, dtype: str) -> float:
        """q and out once; K/V of the valid prefix tokens (not page tails) and of the draft; the
        block-table entries in use and context_lens (int32). lse (optional, small) not counted."""
        p = case.shape
        b, d, hd = p["batch"], p["draft"], p["head_dim"]
        elements = 2 * b * d * p["q_heads"] * hd + 2 * (sum(p["context_lens"]) + b * d) * p["kv_heads"] * hd
        return float(BYTES_PER_ELEMENT[dtype] * elements + 4 * (sum(_pages(case)) + b))
