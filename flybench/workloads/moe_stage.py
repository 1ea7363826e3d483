"""One stage of a routed MoE layer, as FlyDSL's CI times its two-stage kernels (`moe_gemm1`, `moe_gemm2_*`).

The routing is an input here (FlyDSL builds its sorting buffers once, outside
the timed stage), so a stage is its grouped GEMM and what is fused into it:

- stage 1 (`-s1`): for every routed (token, slot) pair p = token * k + slot,
  act[p] = silu(g) * u with (g, u) = w13[e] @ x[token], e = ids[token, slot];
- stage 2 (`-s2`): out[t] = sum over t's slots of weight[t, slot] * w2[e] @ act[p].
  FlyDSL's `atomic` and `reduce` variants are two ways of doing this sum; they
  are kernels of one case, not two cases.

Inputs are the `moe` workload's (x, router_logits, w13, w2, fp8 scales; the
routing is `moe.route` of the logits) plus, for stage 2, `act` [T * k, I]
bf16. Every stage's output is "out": stage 1's is the activation [T * k, I]
in pair order. Cases are FlyDSL's shape strings (`t32768-d8192x8192-e16k4`:
tokens, hidden x intermediate, experts, top-k) with the stage appended.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from flybench.workloads._inputs import generator, randn
from flybench.workloads.base import Case, Tensors, Workload
from flybench.workloads.dtypes import BYTES_PER_ELEMENT
from flybench.workloads.moe import MoeWorkload, route

if TYPE_CHECKING:
    import torch

_FLYDSL_CI = [(32768, 8192, 8192, 16, 4), (64, 6144, 1024, 128, 8)]
"""(tokens, hidden, intermediate, experts, top-k) of FlyDSL CI's fp8 moe_gemm1/moe_gemm2 series."""
_TINY = [(7, 128, 64, 8, 2), (33, 64, 48, 16, 4)]
_LAYER = MoeWorkload()


def _case(tokens: int, hidden: int, inter: int, experts: int, top_k: int, stage: int, model: str) -> Case:
    name = f"t{tokens}-d{hidden}x{inter}-e{experts}k{top_k}-s{stage}"
    shape = {"tokens": tokens, "hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k, "stage": stage}
    return Case("moe_stage", name, shape, model)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    full = [_case(*shape, stage, "flydsl-ci") for shape in _FLYDSL_CI for stage in (1, 2)]
    tiny = [_case(*shape, stage, "tiny") for shape in _TINY for stage in (1, 2)]
    return {"tiny": tiny, "quick": full, "full": full}


def _dequantized(inputs: Tensors, name: str, expert: int) -> "torch.Tensor":
    weight = inputs[name][expert].float()
    scale = inputs.get(f"{name}_scale")
    return weight if scale is None else weight * scale[expert, :, None]


class MoeStageWorkload(Workload):
    """Stage 1 (gate+up GEMM with SwiGLU) or stage 2 (down GEMM with the weighted sum) of a routed MoE."""

    name = "moe_stage"
    dtypes = ("bf16", "fp8")
    description = "One MoE stage over given routing: gate+up GEMM and SwiGLU, or down GEMM and weighted sum."

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        """The layer's inputs; stage 2 also gets an O(1) activation, drawn after them."""
        import torch

        self.check_dtype(dtype)
        p = case.shape
        inputs = _LAYER.make_inputs(case, dtype, device, seed)
        if p["stage"] == 2:
            gen = generator(seed + 1)
            inputs["act"] = randn(gen, (p["tokens"] * p["top_k"], p["inter"]), torch.bfloat16, device)
        return inputs

    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        """Expert by expert over the routed pairs, weights dequantised one expert at a time, in float32."""
        import torch

        p = case.shape
        k, inter = p["top_k"], p["inter"]
        weights, ids = route(inputs["router_logits"], k)
        if p["stage"] == 1:
            x = inputs["x"].float()
            act = torch.empty((p["tokens"] * k, inter), dtype=torch.float32, device=x.device)
        else:
            act_in = inputs["act"].float()
            out = torch.zeros((p["tokens"], p["hidden"]), dtype=torch.float32, device=act_in.device)
        for e in torch.unique(ids).tolist():
            token, slot = torch.nonzero(ids == e, as_tuple=True)
            pair = token * k + slot
            if p["stage"] == 1:
                gate_up = x[token] @ _dequantized(inputs, "w13", e).T
                act[pair] = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
            else:
                down = act_in[pair] @ _dequantized(inputs, "w2", e).T
                out.index_add_(0, token, down * weights[token, slot, None])
        return {"out": act if p["stage"] == 1 else out}

    def flops(self, case: Case) -> float:
        """FlyDSL's count: 2 * T*k rows * (2I x H) for stage 1, 2 * T*k * (H x I) for stage 2."""
        p = case.shape
        rows = p["tokens"] * p["top_k"]
        return 2.0 * rows * p["hidden"] * p["inter"] * (2 if p["stage"] == 1 else 1)

    def min_bytes(self, case: Case, dtype: str) -> float:
        """The stage's bf16 rows in and out (x and act, or act and out: the same sizes either way), the
        routing (an int32 expert and a float32 weight per pair), and the touched experts' weights and
        fp8 scales, each read once. Experts touched as in `moe.min_bytes`: E (1 - (1 - k/E)^T)."""
        p = case.shape
        t, h, i, e, k = p["tokens"], p["hidden"], p["inter"], p["experts"], p["top_k"]
        touched = e * (1 - (1 - k / e) ** t)
        rows = 2 * (t * h + t * k * i)
        weights = touched * (2 * i * h if p["stage"] == 1 else h * i) * BYTES_PER_ELEMENT[dtype]
        scales = touched * (2 * i if p["stage"] == 1 else h) * 4 if dtype == "fp8" else 0
        return float(rows + t * k * 8 + weights + scales)
