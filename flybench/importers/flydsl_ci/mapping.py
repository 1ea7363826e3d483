"""FlyDSL's op and shape names mapped onto flybench's workloads, where one corresponds.

- `flash_attn` `B16S8192H16Hkv16D128_causal` -> workload `attention`, case of the
  same name (flybench's attention catalog uses FlyDSL's naming), shape parsed
  into the catalog's keys (batch, seq, heads, kv_heads, head_dim, causal, scale).
- `moe_gemm1`, `moe_gemm2_atomic|reduce` and the quantised families
  (`moe_fp4_s1`, `moe_a8w4_s2_reduce`, ...) -> workload `moe_stage`, case
  `<shape>-s<stage>` as flybench names its stage cases (the kernel, FlyDSL's
  op, tells atomic from reduce); `t16-d7168x256-e257k9` -> tokens, hidden,
  inter, experts, top_k. FlyDSL's dtype names are kept: `fp8`, `int4_bf16`
  (the `moe_w4a16_*` series) and `a8w4` are moe_stage dtypes, so those series
  land on measured cases of the same case and dtype; the fp4 (a4w4) series
  have no flybench case. A bare family name (`moe_fp4`) is FlyDSL's row for a
  whole skipped MoE test: workload `moe`, case the shape.
- `mla` `B32C8192` -> workload `mla_decode`, case of the same name.
- `gemm` `8192x8192x8192_tile128x256x128` -> workload `gemm`, case `MxNxK`,
  the tile suffix as `config`.

Everything else (hgemm, gemm_async, fp8_gemm, norms, softmax, ...) keeps
its FlyDSL name, as does an op whose shape string does not parse: a mapping
that has to guess is worse than none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flybench.workloads import mla_decode

SUITE = "FlydslCI"
"""The middle part of every imported benchmark name: `attention.FlydslCI.track_tflops`."""
PROVIDER = "flydsl"
METRIC_SLUGS = {"TFLOPS": "tflops", "TB/s": "tbps", "speedup": "speedup"}

_ATTENTION = re.compile(r"B(\d+)S(\d+)H(\d+)Hkv(\d+)D(\d+)_(causal|nocausal)")
_MOE_STAGE = re.compile(r"moe_(?:(?P<family>[a-z0-9]+)_)?(?:gemm|s)(?P<stage>[12])(?:_(?P<variant>atomic|reduce))?")
_MOE_WHOLE = re.compile(r"moe_(?P<family>[a-z0-9]+)")
_MOE_SHAPE = re.compile(r"t(\d+)-d(\d+)x(\d+)-e(\d+)k(\d+)")
_MLA_SHAPE = re.compile(r"B(\d+)C(\d+)")
_GEMM_SHAPE = re.compile(r"(\d+)x(\d+)x(\d+)(?:_(?P<config>.+))?")


@dataclass(frozen=True)
class Mapping:
    """Where one FlyDSL (op, shape, dtype, metric) lands: workload (None if none fits), benchmark, params, shape."""

    workload: str | None
    benchmark: str
    params: dict[str, Any]
    shape: dict[str, Any] | None


def benchmark_name(name: str, metric: str) -> str:
    """asv-style `module.Class.method`, so code that reads the workload from the first part keeps working."""
    return f"{name}.{SUITE}.track_{METRIC_SLUGS[metric]}"


def map_case(op: str, shape: str, dtype: str, metric: str) -> Mapping:
    """The flybench identity of one FlyDSL case (the metric must be one of METRIC_SLUGS)."""
    for mapper in (_attention, _moe, _mla, _gemm):
        found = mapper(op, shape)
        if found is not None:
            workload, case, extra, parsed = found
            params = {"case": case, **extra, "provider": PROVIDER, "dtype": dtype}
            return Mapping(workload, benchmark_name(workload, metric), params, parsed)
    return Mapping(None, benchmark_name(op, metric), {"case": shape, "provider": PROVIDER, "dtype": dtype}, None)


Found = tuple[str, str, dict[str, Any], dict[str, Any]] | None


def _attention(op: str, shape: str) -> Found:
    match = _ATTENTION.fullmatch(shape)
    if op != "flash_attn" or not match:
        return None
    b, s, h, hkv, d = map(int, match.groups()[:5])
    parsed = {"batch": b, "seq": s, "heads": h, "kv_heads": hkv, "head_dim": d,
              "causal": match.group(6) == "causal", "scale": d**-0.5}
    return "attention", shape, {}, parsed


def _moe(op: str, shape: str) -> Found:
    stage = _MOE_STAGE.fullmatch(op)
    whole = None if stage else _MOE_WHOLE.fullmatch(op)
    match = _MOE_SHAPE.fullmatch(shape)
    if not (stage or whole) or not match:
        return None
    tokens, hidden, inter, experts, top_k = map(int, match.groups())
    parsed: dict[str, Any] = {"tokens": tokens, "hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k}
    if stage:
        parsed |= {"stage": int(stage["stage"]), "variant": stage["variant"] or "", "family": stage["family"] or ""}
        return "moe_stage", f"{shape}-s{stage['stage']}", {"kernel": op}, parsed
    parsed |= {"stage": None, "variant": "", "family": whole["family"]}  # type: ignore[index]
    return "moe", shape, {"kernel": op}, parsed


def _mla(op: str, shape: str) -> Found:
    match = _MLA_SHAPE.fullmatch(shape)
    if op != "mla" or not match:
        return None
    batch, context = map(int, match.groups())
    return "mla_decode", shape, {}, {"batch": batch, "context": context, "heads": mla_decode.HEADS,
                                     "kv_lora": mla_decode.KV_LORA, "rope": mla_decode.ROPE,
                                     "scale": mla_decode.QK_DIM**-0.5}


def _gemm(op: str, shape: str) -> Found:
    match = _GEMM_SHAPE.fullmatch(shape)
    if op != "gemm" or not match:
        return None
    m, n, k = map(int, match.groups()[:3])
    return "gemm", f"{m}x{n}x{k}", {"config": match["config"] or ""}, {"kind": "gemm", "m": m, "n": n, "k": k}
