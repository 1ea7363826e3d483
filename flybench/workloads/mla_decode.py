"""MLA decode: DeepSeek-V3/R1 multi-head latent attention in its absorbed form, one query token per sequence.

The cases are the ones FlyDSL's CI times (`mla` `B32C8192` fp8, from its
tests/kernels/test_mla_decode.py), named the same way: B sequences of C
cached tokens. 128 query heads share one latent KV head; each cached token
holds 576 values (512 latent, `kv_lora`, and 64 rotary); the keys are all
576, the values the first 512. The cache is paged with one token per page,
the pages of all sequences in one shuffled order, as FlyDSL's test builds it.

Inputs: `q` [B, H, 576]; `kv_cache` [B * C, 576]; `kv_indices` [B * C]
int32 (sequence b's tokens are pages kv_indices[b*C:(b+1)*C]). Outputs:
"out" [B, H, 512] and "lse" [B, H] (natural log of the scaled scores'
sum of exponentials). fp8: q and the cache in e4m3 without scales, as
FlyDSL's test casts its N(0, 1) values; the output is bf16 in both dtypes.
"""

from __future__ import annotations

import math
from functools import lru_cache

from flybench.workloads._inputs import generator, randn
from flybench.workloads.base import Case, Tensors, Workload
from flybench.workloads.dtypes import BYTES_PER_ELEMENT, device_dtype

HEADS, KV_LORA, ROPE = 128, 512, 64
QK_DIM = KV_LORA + ROPE
INDEX_BYTES = 4

_FLYDSL_CI = [(1, 63), (1, 64), (1, 128), (4, 2048), (33, 2333), (32, 8192)]
"""(batch, context) of FlyDSL's MLA_DECODE_BENCH_CONFIGS."""
_QUICK = ["B1C128", "B4C2048", "B32C8192"]
_TINY = [(1, 63), (2, 100), (3, 17)]


def _case(batch: int, context: int, model: str) -> Case:
    return Case("mla_decode", f"B{batch}C{context}", {
        "batch": batch, "context": context, "heads": HEADS, "kv_lora": KV_LORA, "rope": ROPE,
        "scale": 1 / math.sqrt(QK_DIM)}, model)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    full = [_case(b, c, "DeepSeek-V3") for b, c in _FLYDSL_CI]
    by_name = {c.name: c for c in full}
    return {"tiny": [by_name.get(f"B{b}C{c}") or _case(b, c, "tiny") for b, c in _TINY],
            "quick": [by_name[n] for n in _QUICK], "full": full}


class MlaDecodeWorkload(Workload):
    """The decode step of DeepSeek's latent attention over a one-token-per-page cache."""

    name = "mla_decode"
    dtypes = ("bf16", "fp8")
    description = "MLA decode (DeepSeek-V3): 128 heads over one 576-wide latent KV head, page size 1."

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        import torch

        self.check_dtype(dtype)
        p = case.shape
        gen, dt = generator(seed), device_dtype(dtype, device)
        tokens = p["batch"] * p["context"]
        staged = device_dtype("bf16", device)
        q = randn(gen, (p["batch"], p["heads"], QK_DIM), staged, device)
        cache = randn(gen, (tokens, QK_DIM), staged, device)
        order = torch.randperm(tokens, generator=gen).to(device=device, dtype=torch.int32)
        return {"q": q.to(dt), "kv_cache": cache.to(dt), "kv_indices": order}

    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        """Float32 attention of each sequence's one query over its gathered tokens."""
        import torch

        p = case.shape
        q, cache, indices = inputs["q"], inputs["kv_cache"], inputs["kv_indices"].long()
        b, h, _ = q.shape
        c = p["context"]
        out = torch.empty((b, h, p["kv_lora"]), dtype=torch.float32, device=q.device)
        lse = torch.empty((b, h), dtype=torch.float32, device=q.device)
        for i in range(b):
            keys = cache[indices[i * c:(i + 1) * c]].float()  # [C, 576]
            scores = (q[i].float() @ keys.T) * p["scale"]  # [H, C]
            lse[i] = scores.logsumexp(dim=-1)
            out[i] = (scores - lse[i, :, None]).exp() @ keys[:, :p["kv_lora"]]
        return {"out": out, "lse": lse}

    def flops(self, case: Case) -> float:
        """2 FLOPs per multiply-add of QK^T (576 wide) and PV (512 wide), FlyDSL's count."""
        p = case.shape
        return 2.0 * p["batch"] * p["context"] * p["heads"] * (QK_DIM + p["kv_lora"])

    def min_bytes(self, case: Case, dtype: str) -> float:
        """The cache's tokens and the queries read once in `dtype`, their page indices, the bf16 output written.

        FlyDSL's TB/s counts the same except the indices (4 bytes per cached token, under 1% of it).
        """
        p = case.shape
        tokens = p["batch"] * p["context"]
        element = BYTES_PER_ELEMENT[dtype]
        return float(tokens * (QK_DIM * element + INDEX_BYTES) + p["batch"] * p["heads"] * (
            QK_DIM * element + p["kv_lora"] * BYTES_PER_ELEMENT["bf16"]))
