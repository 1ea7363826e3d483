"""Ceilings for the roofline: a large GEMM (peak matrix rate) and a device copy (bandwidth).

GEMM (kind "gemm", case name "MxNxK"): C = A @ B^T with `a` [M, K] and `b` [N, K];
fp8 adds float32 per-tensor scales `a_scale`, `b_scale` (0-dim; A ≈ a.float() * a_scale).
fp8 is e4m3: fnuz on a ROCm gfx942, OCP e4m3fn elsewhere. C is bf16 for both dtypes.
Copy (kind "copy", case name "copy-<size>"): `src` is a 1-D buffer of `bytes` bytes;
"out" is a copy of it. The buffer size is the same for every dtype.
"""

from __future__ import annotations

from functools import lru_cache

from flybench.workloads._inputs import generator, quantize_fp8, randn
from flybench.workloads.base import Case, Tensors, Workload
from flybench.workloads.dtypes import BYTES_PER_ELEMENT, device_dtype

_OUT_BYTES = 2
"""C is bf16 whatever the input type."""
_COPY_TILE = 1 << 24
"""Random elements generated for a copy buffer, tiled to its size: host generation of GiBs is slow."""


def _gemm(m: int, n: int, k: int) -> Case:
    return Case("gemm", f"{m}x{n}x{k}", {"kind": "gemm", "m": m, "n": n, "k": k}, "ceiling")


def _copy(nbytes: int) -> Case:
    label = f"{nbytes >> 30}GiB" if nbytes >= 1 << 30 else f"{nbytes >> 20}MiB"
    return Case("gemm", f"copy-{label}", {"kind": "copy", "bytes": nbytes}, "ceiling")


@lru_cache(maxsize=1)
def _catalog() -> dict[str, list[Case]]:
    return {
        "tiny": [_gemm(64, 48, 32), _gemm(1, 16, 64), _gemm(96, 80, 128), _copy(1 << 20)],
        "quick": [_gemm(4096, 4096, 4096), _gemm(8192, 8192, 8192), _copy(1 << 30)],
        "full": [
            _gemm(4096, 4096, 4096), _gemm(8192, 8192, 8192), _gemm(16384, 8192, 8192),
            _gemm(5120, 5120, 8320), _copy(1 << 30), _copy(4 << 30),
        ],
    }


class GemmWorkload(Workload):
    """Measured ceilings: what this machine's matrix units and memory actually deliver."""

    name = "gemm"
    dtypes = ("bf16", "fp8")
    description = "Large GEMM C = A @ B^T (peak matrix rate) and a device-to-device copy (bandwidth)."

    def catalog(self) -> dict[str, list[Case]]:
        return _catalog()

    def make_inputs(self, case: Case, dtype: str, device: str, seed: int = 0) -> Tensors:
        """B has std 1/sqrt(K), so C stays O(1); fp8 inputs are scaled to the e4m3 range."""
        import torch

        self.check_dtype(dtype)
        p = case.shape
        gen, dt = generator(seed), device_dtype(dtype, device)
        if p["kind"] == "copy":
            count = p["bytes"] // BYTES_PER_ELEMENT[dtype]
            tile = randn(gen, (min(count, _COPY_TILE),), torch.float32, device).to(dt)
            src, whole = torch.empty(count, dtype=dt, device=device), count // tile.numel() * tile.numel()
            src[:whole].view(-1, tile.numel()).copy_(tile)
            src[whole:].copy_(tile[: count - whole])
            return {"src": src}
        m, n, k = p["m"], p["n"], p["k"]
        if dtype != "fp8":
            return {"a": randn(gen, (m, k), dt, device), "b": randn(gen, (n, k), dt, device, std=k**-0.5)}
        a, a_scale = quantize_fp8(randn(gen, (m, k), torch.float32, device), dt, per_row=False)
        b, b_scale = quantize_fp8(randn(gen, (n, k), torch.float32, device, std=k**-0.5), dt, per_row=False)
        return {"a": a, "b": b, "a_scale": a_scale, "b_scale": b_scale}

    def reference(self, case: Case, inputs: Tensors) -> Tensors:
        if case.shape["kind"] == "copy":
            return {"out": inputs["src"].float()}
        a, b = inputs["a"].float(), inputs["b"].float()
        if "a_scale" in inputs:
            a, b = a * inputs["a_scale"], b * inputs["b_scale"]
        return {"out": a @ b.T}

    def flops(self, case: Case) -> float:
        """2*M*N*K; a copy does none."""
        p = case.shape
        return 0.0 if p["kind"] == "copy" else 2.0 * p["m"] * p["n"] * p["k"]

    def min_bytes(self, case: Case, dtype: str) -> float:
        """Copy: the buffer read and written once. GEMM: A and B read once (plus two fp32 scales
        for fp8), C written once in bf16."""
        p = case.shape
        if p["kind"] == "copy":
            return 2.0 * p["bytes"]
        m, n, k = p["m"], p["n"], p["k"]
        scales = 8 if dtype == "fp8" else 0
        return float(BYTES_PER_ELEMENT[dtype] * (m + n) * k + _OUT_BYTES * m * n + scales)
