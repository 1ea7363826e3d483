"""Routed MoE layer: top-k routing, gate+up grouped GEMM, SwiGLU, down grouped GEMM, weighted sum.

Inputs (T tokens, E experts, H hidden, I intermediate):
  x              [T, H] bf16 (for fp8 too: providers quantise activations per token themselves)
  router_logits  float32 [T, E]
  w13            [E, 2I, H]  rows 0..I-1 are the gate projection, rows I..2I-1 the up projection
  w2             [E, H, I]
  w13_scale      float32 [E, 2I], w2_scale float32 [E, H]  (fp8 only: per output row, w ≈ q * scale)
fp8 weights are e4m3: fnuz on a ROCm gfx942, OCP e4m3fn elsewhere.
out[t] = sum_k weight[t, k] * w2[e] @ (silu(g) * u), (g, u) = w13[e] @ x[t], e = ids[t, k], where
the weights are the softmax over the top-k logits (renormalised over the chosen experts).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from flybench.workloads._inputs import generator, quantize_fp8, randn
from flybench.workloads.base import Case, Tensors, Workload
from flybench.workloads.dtypes import BYTES_PER_ELEMENT, device_dtype

if TYPE_CHECKING:
    import torch

# short name -> (model, hidden, intermediate per expert, experts, top-k)
MODELS = {
    "mixtral8x7b": ("Mixtral-8x7B", 4096, 14336, 8, 2),
    "dsv3-tp8": ("DeepSeek-V3-TP8", 7168, 256, 256, 8),
    "qwen3-30b-a3b": ("Qwen3-30B-A3B", 2048, 768, 128, 8),
}
TOKENS = (1, 16, 128, 1024, 4096, 16384)
_QUICK = [
    "mixtral8x7b-t16", "mixtral8x7b-t1024", "dsv3-tp8-t1", "dsv3-tp8-t128", "dsv3-tp8-t4096",
    "qwen3-30b-a3b-t16", "qwen3-30b-a3b-t1024",
]
_TINY = [  # (hidden, intermediate, experts, top-k, tokens): some experts idle, one token, E < T*k
    (128, 64, 8, 2, 7), (64, 32, 16, 4, 1), (64, 48, 16, 4, 33), (64, 32, 4, 2, 20),
]


def _case(prefix: str, model: str, hidden: int, inter: int, experts: int, top_k: int, tokens: int) -> Case:
    shape = {"tokens": tokens, "hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k}
    return Case("moe", f"{prefix}-t{tokens}", shape, model)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    full = [_case(p, m, h, i, e, k, t) for p, (m, h, i, e, k) in MODELS.items() for t in TOKENS]
    by_name = {c.name: c for c in full}
    tiny = [_case(f"tiny-h{h}-i{i}-e{e}k{k}", "tiny", h, i, e, k, t) for h, i, e, k, t in _TINY]
    return {"tiny": tiny, "quick": [by_name[n] for n in _QUICK], "full": full}


def route(router_logits: "torch.Tensor", top_k: int) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Top-k experts per token and their weights: softmax over the chosen logits (sums to 1).

    Returns float32 weights [T, k] and int32 expert ids [T, k], highest logit first.
    """
    import torch

    values, ids = torch.topk(router_logits.float(), top_k, dim=-1)
    return torch.softmax(values, dim=-1), ids.to(torch.int32)


def sort_by_expert(
    topk_ids: "torch.Tensor", num_experts: int, block_size: int
) -> tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]:
    """The aligned-block routing metadata of fused MoE kernels (vLLM's moe_align_block_size).

    Flat pair index i = token * top_k + k. Pairs are grouped by expert (ascending; within an
    expert by i), each group padded with the sentinel T * top_k to a multiple of `block_size`;
    experts without pairs get no block. Returns int32 sorted_token_ids [N], expert id per block
    [N // block_size], and num_tokens_post_padded [1] == N.
    """
    import torch

    flat = topk_ids.flatten().long()
    device = flat.device
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_size - 1) // block_size * block_size
    group_start = torch.cumsum(padded, 0) - padded
    order = torch.argsort(flat, stable=True)
    rank = torch.arange(flat.numel(), device=device) - (torch.cumsum(counts, 0) - counts)[flat[order]]
    total = int(padded.sum())
    sorted_ids = torch.full((total,), flat.numel(), dtype=torch.int32, device=device)
    sorted_ids[group_start[flat[order]] + rank] = order.to(torch.int32)
    experts = torch.repeat_interleave(torch.arange(num_experts, device=device), padded // block_size)
    return sorted_ids, experts.to(torch.int32), torch.tensor([total], dtype=torch.int32, device=device)


class MoeWorkload(Workload):
    """A routed MoE layer from decode (1 token) to prefill (16k tokens)."""

    name = "moe"
    dtypes = ("bf16", "fp8")
    description = "Routed MoE: top-k softmax routing, gate+up GEMM, SwiGLU, down GEMM, weighted scatter-add."

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        """Weights have std 1/sqrt(fan_in), so gate, up and out stay O(1) whatever the model."""
        import torch

        self.check_dtype(dtype)
        p = case.shape
        t, h, i, e = p["tokens"], p["hidden"], p["inter"], p["experts"]
        gen, bf16 = generator(seed), torch.bfloat16
        weight_dt = torch.float32 if dtype == "fp8" else device_dtype(dtype, device)
        inputs = {
            "x": randn(gen, (t, h), bf16, device),
            "router_logits": randn(gen, (t, e), torch.float32, device),
            "w13": randn(gen, (e, 2 * i, h), weight_dt, device, std=h**-0.5),
            "w2": randn(gen, (e, h, i), weight_dt, device, std=i**-0.5),
        }
        if dtype == "fp8":
            fp8 = device_dtype("fp8", device)
            for name in ("w13", "w2"):
                inputs[name], inputs[f"{name}_scale"] = quantize_fp8(inputs.pop(name), fp8, per_row=True)
        return inputs

    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        """Expert by expert over the routed (token, k) pairs, weights dequantised one expert at a time."""
        import torch

        x = inputs["x"].float()
        weights, ids = route(inputs["router_logits"], case.shape["top_k"])
        inter = case.shape["inter"]
        out = torch.zeros_like(x)
        for e in torch.unique(ids).tolist():
            token, slot = torch.nonzero(ids == e, as_tuple=True)
            w13, w2 = inputs["w13"][e].float(), inputs["w2"][e].float()
            if "w13_scale" in inputs:
                w13, w2 = w13 * inputs["w13_scale"][e, :, None], w2 * inputs["w2_scale"][e, :, None]
            gate_up = x[token] @ w13.T
            act = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
            out.index_add_(0, token, (act @ w2.T) * weights[token, slot, None])
        return {"out": out}

    def flops(self, case: Case) -> float:
        """Both grouped GEMMs over T*k routed rows: 2*(2I*H) + 2*(H*I) per row; routing, SwiGLU and
        the weighted sum are O(T*k*(I+H)) and not counted."""
        p = case.shape
        return 6.0 * p["tokens"] * p["top_k"] * p["hidden"] * p["inter"]

    def min_bytes(self, case: Case, dtype: str) -> float:
        """x (bf16) and router logits (fp32) read once, out (bf16) written once, plus the weights (and
        fp8 scales) of the experts the routing touches, read once each.

        The inputs' router logits are i.i.d. random, so each token picks k of E experts uniformly and an
        expert stays untouched with probability (1 - k/E)^T: E (1 - (1 - k/E)^T) experts are expected
        to be read. (Counting min(E, T k) instead overstated the bytes by up to 1.6x, e.g. 128 against
        the 82 experts 16 tokens touch in Qwen3-30B-A3B.)"""
        p = case.shape
        t, h, i, e = p["tokens"], p["hidden"], p["inter"], p["experts"]
        touched = e * (1 - (1 - p["top_k"] / e) ** t)
        weights = touched * 3 * h * i * BYTES_PER_ELEMENT[dtype]
        scales = touched * (2 * i + h) * 4 if dtype == "fp8" else 0
        return float(2 * t * h * 2 + t * e * 4 + weights + scales)
