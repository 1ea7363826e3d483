"""Which registered kernels a FlyDSL CI series runs: its op, shape and dtype on one target, read against the registry.

FlyDSL's CI times ops (`flash_attn`, `gemm`, `moe_gemm1`, ...) at many
shapes; the registry compiles each kernel family at a few configurations,
each naming the op that times it (`KernelCase.ci_op`). A series is covered
by the registered kernels of its op that are built for its target and
agree with it on what selects the code (the dtype, causal or not; the
async-copy GEMMs are their own op). `exact` says whether the registered
configuration is the series' own shape (and tile); otherwise it is the same
kernel source at another shape, which changes with the series' code
whenever the kernel or the compiler does, but may miss a change that only
reaches other shapes. A series with no kernel is not covered: its steps can
be judged by files only.

Read from the registry alone, so it needs neither a clone nor a compiler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flybench.compile.registry import CHECKOUT_CASES, KernelCase

_ATTENTION = re.compile(r"B(\d+)S(\d+)H(\d+)Hkv(\d+)D(\d+)_(causal|nocausal)")
_MOE = re.compile(r"t(\d+)-d(\d+)x(\d+)-e(\d+)k(\d+)")
_GEMM = re.compile(r"(\d+)x(\d+)x(\d+)(?:_tile(\d+)x(\d+)(?:x(\d+))?)?.*")
_NORM = re.compile(r"(\d+)x(\d+)")
_MOE_DTYPES = {"moe_gemm1": "fp8", "moe_gemm2_atomic": "fp8", "moe_gemm2_reduce": "fp8",
               **{f"moe_{family}_{stage}": dtype for family, dtype in (("fp4", "fp4"), ("a8w4", "a8w4"),
                                                                       ("w4a16", "int4_bf16"))
                  for stage in ("s1", "s2_atomic", "s2_reduce")}}
"""The one dtype each MoE op's registered kernels are built for (CI's dtype names)."""


@dataclass(frozen=True)
class SeriesKernel:
    kernel: str
    arch: str
    exact: bool


def kernels_for(op: str, shape: str, dtype: str, arch: str) -> list[SeriesKernel]:
    """The registered kernels the CI series (op, shape, dtype) on `arch` runs; [] when none is registered."""
    found = []
    for case in CHECKOUT_CASES:
        if case.ci_op != op or arch not in case.arches:
            continue
        same = _same_code(case, op, shape, dtype)
        if same is not None:
            found.append(SeriesKernel(case.name, arch, same))
    return found


def _same_code(case: KernelCase, op: str, shape: str, dtype: str) -> bool | None:
    """None when the series does not run this kernel; else whether the registered configuration is its shape."""
    config = case.config
    if op == "flash_attn":
        match = _ATTENTION.fullmatch(shape)
        if not match or dtype != config["dtype"] or (match[6] == "causal") != config["causal"]:
            return None
        return tuple(map(int, match.groups()[:5])) == tuple(
            config[k] for k in ("batch", "seq_len", "num_heads", "num_kv_heads", "head_dim"))
    if op in _MOE_DTYPES:
        match = _MOE.fullmatch(shape)
        if not match or dtype != _MOE_DTYPES[op]:
            return None
        return tuple(map(int, match.groups())) == tuple(
            config[k] for k in ("tokens", "model_dim", "inter_dim", "experts", "topk"))
    if op in ("gemm", "gemm_async", "hgemm", "fp8_8wave_rowscale", "gemm_fp4"):
        match = _GEMM.fullmatch(shape)
        wanted = config.get("in_dtype") or config.get("dtype") or {"fp8_8wave_rowscale": "fp8", "gemm_fp4": "fp4"}[op]
        if not match or dtype != wanted:
            return None
        return _gemm_shape(config) == tuple(int(g) for g in match.groups() if g is not None)
    if op in ("layernorm", "rmsnorm", "softmax"):
        match = _NORM.fullmatch(shape)
        if not match or dtype != config["dtype"]:
            return None
        return (int(match[1]), int(match[2])) == (config["M"], config["N"])
    if op == "mla":
        return shape == f"B{config['batch']}C{config['context_length']}" if dtype == "fp8" else None
    return None


def _gemm_shape(config: dict[str, Any]) -> tuple[int, ...]:
    """M, N, K and the tile as CI's shape names them (`5120x5120x8320_tile64x256x128`)."""
    tile = [config.get(k) for k in ("tile_m", "tile_n", "tile_k")]
    if tile[0] is None:
        tile = [config.get(k) for k in ("block_m", "block_n", "block_k")]
    return tuple(v for v in (config["M"], config["N"], config["K"], *tile) if v is not None)
