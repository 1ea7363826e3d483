"""Plain attention prefill (causal and not), BSHD layout, as FlyDSL's CI compares it.

Inputs: `q` [B, S, H, D], `k` and `v` [B, S, Hkv, D] (GQA: query head h reads
kv head h // (H // Hkv)). Outputs: "out" [B, S, H, D] and "lse" [B, H, S], the
natural-log log-sum-exp of the scaled scores. Causal means query i sees keys
j <= i (top-left aligned; queries and keys have the same length here).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from flybench.workloads._inputs import generator, randn
from flybench.workloads.base import Case, Tensors, Workload
from flybench.workloads.dtypes import BYTES_PER_ELEMENT, device_dtype

if TYPE_CHECKING:
    import torch

_SCORE_BUDGET = 1 << 28
"""Score elements (float32) the reference holds at once: 1 GiB, so 8k x 8k x 64 heads fits any GPU."""

# (B, S, H, Hkv, D, causal); FlyDSL CI names its shapes `B16S8192H16Hkv16D128_causal`.
_FLYDSL_CI = [
    (16, 8192, 16, 16, 128, True), (32, 8192, 8, 8, 128, True), (4, 8192, 64, 64, 128, True),
    (4, 8192, 64, 8, 128, True), (1, 1, 4, 4, 128, True), (1, 1, 4, 4, 128, False),
    (1, 30, 4, 4, 128, True), (1, 30, 4, 4, 128, False), (1, 64, 4, 4, 128, True),
    (1, 64, 4, 4, 128, False), (2, 7, 4, 4, 128, True), (2, 7, 4, 4, 128, False),
    (3, 31, 3, 3, 128, True), (3, 31, 3, 3, 128, False), (3, 65, 3, 3, 128, True),
    (3, 65, 3, 3, 128, False), (5, 33, 5, 5, 128, True), (5, 33, 5, 5, 128, False),
    (5, 63, 7, 7, 128, True), (5, 63, 7, 7, 128, False),
]
_EXTRA = [  # the big non-causal FlyDSL shape, and Llama-3-8B-like GQA (32 q / 8 kv heads) prefill
    ((16, 8192, 16, 16, 128, False), "flydsl-ci"),
    ((4, 2048, 32, 8, 128, True), "Llama-3-8B"),
    ((4, 2048, 32, 8, 128, False), "Llama-3-8B"),
]
_QUICK = [
    "B16S8192H16Hkv16D128_causal", "B16S8192H16Hkv16D128_nocausal", "B4S8192H64Hkv8D128_causal",
    "B4S2048H32Hkv8D128_causal", "B1S1H4Hkv4D128_nocausal", "B3S65H3Hkv3D128_causal",
]
_TINY = [  # same structure, CPU-sized: GQA, ragged-looking lengths, a single token
    (2, 64, 4, 2, 128, True), (2, 64, 4, 2, 128, False), (1, 1, 4, 4, 128, False),
    (3, 31, 3, 3, 128, True), (1, 40, 6, 2, 128, True),
]


def _case(shape: tuple[int, int, int, int, int, bool], model: str) -> Case:
    b, s, h, hkv, d, causal = shape
    name = f"B{b}S{s}H{h}Hkv{hkv}D{d}_{'causal' if causal else 'nocausal'}"
    params = {"batch": b, "seq": s, "heads": h, "kv_heads": hkv, "head_dim": d, "causal": causal, "scale": d**-0.5}
    return Case("attention", name, params, model)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    full = [_case(s, "flydsl-ci") for s in _FLYDSL_CI] + [_case(s, m) for s, m in _EXTRA]
    by_name = {c.name: c for c in full}
    tiny = [by_name.get(c.name, c) for c in (_case(s, "tiny") for s in _TINY)]  # CI's small shapes are tiny too
    return {"tiny": tiny, "quick": [by_name[n] for n in _QUICK], "full": full}


def attend(
    q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", scale: float, mask: "torch.Tensor | None"
) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Float32 softmax attention of one sequence, GQA by broadcasting (no K/V copies per head).

    q [Lq, H, D], k and v [Lk, Hkv, D], mask [Lq, Lk] bool (True = visible) or None.
    Returns out [Lq, H, D] and lse [H, Lq].
    """
    lq, h, d = q.shape
    hkv = k.shape[1]
    qg = q.float().permute(1, 0, 2).reshape(hkv, h // hkv, lq, d)
    kg = k.float().permute(1, 0, 2).unsqueeze(1)  # [Hkv, 1, Lk, D]
    vg = v.float().permute(1, 0, 2).unsqueeze(1)
    scores = (qg @ kg.transpose(-1, -2)) * scale  # [Hkv, G, Lq, Lk]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = scores.logsumexp(dim=-1, keepdim=True)
    out = (scores - lse).exp_() @ vg  # [Hkv, G, Lq, D]
    return out.reshape(h, lq, d).permute(1, 0, 2), lse.reshape(h, lq)


class AttentionWorkload(Workload):
    """Prefill flash attention: the kernels FlyDSL's CI times against CK and Triton."""

    name = "attention"
    dtypes = ("bf16", "fp16")
    description = "Attention prefill, BSHD q/k/v, causal and non-causal, MHA and GQA."

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        self.check_dtype(dtype)
        p = case.shape
        gen, dt = generator(seed), device_dtype(dtype, device)
        q_shape = (p["batch"], p["seq"], p["heads"], p["head_dim"])
        kv_shape = (p["batch"], p["seq"], p["kv_heads"], p["head_dim"])
        return {
            "q": randn(gen, q_shape, dt, device),
            "k": randn(gen, kv_shape, dt, device),
            "v": randn(gen, kv_shape, dt, device),
        }

    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        """Query rows in chunks (at most `_SCORE_BUDGET` scores live); causal chunks skip future keys."""
        import torch

        p = case.shape
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        b, s, h, d = q.shape
        out = torch.empty((b, s, h, d), dtype=torch.float32, device=q.device)
        lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
        rows = max(1, _SCORE_BUDGET // (h * s))
        pos = torch.arange(s, device=q.device)
        for i in range(b):
            for start in range(0, s, rows):
                stop = min(s, start + rows)
                keys = stop if p["causal"] else s
                mask = pos[start:stop, None] >= pos[None, :keys] if p["causal"] else None
                o, l = attend(q[i, start:stop], k[i, :keys], v[i, :keys], p["scale"], mask)
                out[i, start:stop], lse[i, :, start:stop] = o, l
        return {"out": out, "lse": lse}

    def flops(self, case: Case) -> float:
        """4 * D per visible score (QK^T and PV, 2 FLOPs per MAC); causal sees S(S+1)/2 of S^2."""
        p = case.shape
        s = p["seq"]
        visible = s * (s + 1) // 2 if p["causal"] else s * s
        return 4.0 * p["batch"] * p["heads"] * visible * p["head_dim"]

    def min_bytes(self, case: Case, dtype: str) -> float:
        """q, k, v read once and out written once, all in `dtype`; lse (optional, small) not counted."""
        p = case.shape
        tokens = p["batch"] * p["seq"] * p["head_dim"]
        return float(BYTES_PER_ELEMENT[dtype] * tokens * (2 * p["heads"] + 2 * p["kv_heads"]))
