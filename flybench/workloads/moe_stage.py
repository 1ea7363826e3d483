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

Two quantised-weight dtypes, named as FlyDSL's CI names them, draw the bf16
case's inputs (same seed, same x, routing and weights before quantisation)
and quantise the weights per group of 32 along K (`_inputs.GROUP`):

- `int4_bf16` (W4A16): w13/w2 are int8 codes in [-8, 7] with float32 scales
  [E, N, K / 32] that bf16 holds exactly; activations bf16.
- `a8w4`: w13/w2 are MX-FP4 (uint8 e2m1 codes, bit 3 the sign, and uint8
  e8m0 scales [E, N, K / 32]); x is bf16, which providers quantise to MX-FP8
  themselves, as they quantise x for fp8. Stage 2's `act` is drawn on the
  MX-FP4 grid (quantised and dequantised, stored as bf16), because an a8w4
  stage 2 reads the MX-FP4 activation stage 1 wrote (FlyDSL's re-quantises
  it on the device), and quantising it again then loses nothing.

The reference dequantises the weights exactly; both dtypes need hidden and
inter to be multiples of 32.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from flybench.workloads._inputs import GROUP, dequantize, generator, quantize_int4, quantize_mxfp4, randn
from flybench.workloads.base import Case, Tensors, Workload
from flybench.workloads.moe import MoeWorkload, route

if TYPE_CHECKING:
    import torch

_FLYDSL_CI = [(32768, 8192, 8192, 16, 4), (64, 6144, 1024, 128, 8)]
"""(tokens, hidden, intermediate, experts, top-k) of FlyDSL CI's fp8 moe_gemm1/moe_gemm2 series."""
_FLYDSL_CI_W4A16 = [(t, 7168, 256, 384, 8) for t in (128, 256, 512)]
"""FlyDSL CI's int4_bf16 series (moe_w4a16_s1, moe_w4a16_s2_*; Kimi 2.5 TP8 in scripts/run_benchmark.sh)."""
_FLYDSL_CI_A8W4 = [(t, 3072, 3072, 128, 4) for t in (512, 1024, 2048, 4096, 8192)]
"""FlyDSL CI's a8w4 series (moe_a8w4_s1, moe_a8w4_s2_*; GPT-OSS-like, gfx950 only)."""
_QUICK_EXTRA = [_FLYDSL_CI_W4A16[0], _FLYDSL_CI_A8W4[0]]
_TINY = [(7, 128, 64, 8, 2), (33, 64, 32, 16, 4)]
_QUANTISED = ("int4_bf16", "a8w4")
_WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "int4_bf16": 0.5 + 2 / GROUP, "a8w4": 0.5 + 1 / GROUP}
"""Bytes per weight element, group scales included (fp8's per-row float32 scales are counted per row)."""
_LAYER = MoeWorkload()


def _case(tokens: int, hidden: int, inter: int, experts: int, top_k: int, stage: int, model: str) -> Case:
    name = f"t{tokens}-d{hidden}x{inter}-e{experts}k{top_k}-s{stage}"
    shape = {"tokens": tokens, "hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k, "stage": stage}
    return Case("moe_stage", name, shape, model)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    def stages(shapes: list) -> list[Case]:
        return [_case(*shape, stage, "flydsl-ci") for shape in shapes for stage in (1, 2)]

    tiny = [_case(*shape, stage, "tiny") for shape in _TINY for stage in (1, 2)]
    return {"tiny": tiny, "quick": stages(_FLYDSL_CI + _QUICK_EXTRA),
            "full": stages(_FLYDSL_CI + _FLYDSL_CI_W4A16 + _FLYDSL_CI_A8W4)}


def _dequantized(inputs: Tensors, name: str, expert: int) -> "torch.Tensor":
    """One expert's weight in float32: as stored, times its per-row fp8 scale, or dequantised by group."""
    weight, scale = inputs[name][expert], inputs.get(f"{name}_scale")
    if scale is None:
        return weight.float()
    if scale.dim() == 3:
        return dequantize(weight, scale[expert])
    return weight.float() * scale[expert, :, None]


def _quantize_weights(inputs: Tensors, dtype: str) -> None:
    """w13 and w2 (bf16) replaced by their int4 or MX-FP4 codes and group scales, one expert at a time."""
    import torch

    quantize = quantize_int4 if dtype == "int4_bf16" else quantize_mxfp4
    for name in ("w13", "w2"):
        parts = [quantize(w) for w in inputs[name]]
        inputs[name] = torch.stack([q for q, _ in parts])
        inputs[f"{name}_scale"] = torch.stack([s for _, s in parts])


class MoeStageWorkload(Workload):
    """Stage 1 (gate+up GEMM with SwiGLU) or stage 2 (down GEMM with the weighted sum) of a routed MoE."""

    name = "moe_stage"
    dtypes = ("bf16", "fp8", *_QUANTISED)
    description = ("One MoE stage over given routing: gate+up GEMM and SwiGLU, or down GEMM and weighted sum; "
                   "bf16, fp8, int4 weights (int4_bf16), MX-FP4 weights with fp8 activations (a8w4).")

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        """The layer's inputs (the bf16 ones, weights then quantised, for int4_bf16 and a8w4); stage 2 also gets
        an O(1) activation, drawn after them."""
        import torch

        self.check_dtype(dtype)
        p = case.shape
        inputs = _LAYER.make_inputs(case, "bf16" if dtype in _QUANTISED else dtype, device, seed)
        if dtype in _QUANTISED:
            _quantize_weights(inputs, dtype)
        if p["stage"] == 2:
            gen = generator(seed + 1)
            act = randn(gen, (p["tokens"] * p["top_k"], p["inter"]), torch.bfloat16, device)
            inputs["act"] = dequantize(*quantize_mxfp4(act)).to(torch.bfloat16) if dtype == "a8w4" else act
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
        routing (an int32 expert and a float32 weight per pair), and the touched experts' weights with
        their scales (fp8: float32 per row; int4_bf16: bf16, a8w4: e8m0, per group of 32), each read
        once. Experts touched as in `moe.min_bytes`: E (1 - (1 - k/E)^T)."""
        p = case.shape
        t, h, i, e, k = p["tokens"], p["hidden"], p["inter"], p["experts"], p["top_k"]
        touched = e * (1 - (1 - k / e) ** t)
        rows = 2 * (t * h + t * k * i)
        weights = touched * (2 * i * h if p["stage"] == 1 else h * i) * _WEIGHT_BYTES[dtype]
        scales = touched * (2 * i if p["stage"] == 1 else h) * 4 if dtype == "fp8" else 0
        return float(rows + t * k * 8 + weights + scales)
