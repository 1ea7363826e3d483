"""`flydsl` and `flydsl+append`: FlyDSL's own kernels, from a FlyDSL source checkout.

FlyDSL's `kernels/` package is not in its PyPI wheel, so the kernels come from
the checkout named by FLYBENCH_FLYDSL_SRC (in asv, the checkout being
benchmarked); the `flydsl` package itself may be the wheel or the checkout's
build. Calls follow upstream's own tests (tests/kernels/test_flash_attn_fwd.py,
tests/kernels/test_moe_gemm_2stage.py):

- attention: `kernels.attention.flash_attn_interface.flydsl_flash_attn_func`,
  dense BSHD with `return_lse` (it dispatches between the generic and the
  gfx950 kernels itself).
- diffusion attention: the same function's varlen paged path (packed queries,
  `cu_seqlens_*`, vLLM block table, bottom-right causal). It reads K/V only
  through pages, and only pages of 64 tokens; the draft block is appended to
  the cache (`_paged_append`). `flydsl` times the kernel with the draft
  already in the cache, `flydsl+append` times append plus kernel. No LSE:
  the paged path has none. With at most 256 queries per sequence and no bias,
  every diffusion case takes the generic light paged kernel
  (`_build_paged_light`: flash_attn_generic with paged=True), never the gfx950
  dualwave one; FlyDSL's own paged tests pass a bias and 512 queries, so they
  take dualwave and do not exercise this kernel (docs/rocm.md).
- moe, fp8: `kernels.moe.moe_gemm_2stage` stage 1 (gate+up, SwiGLU) and
  stage 2 (down, routing weight, atomic sum) with per-token activation and
  per-channel weight scales. Routing, sorting and activation quantisation are
  torch ops inside the timed call.
- moe, bf16 (gfx950 only, as upstream's tests): `kernels.moe.moe_2stage_a16wmix`
  with `w_dtype="bf16"` (a16w16), through the host glue in FlyDSL's
  tests/kernels/moe_a16wmix_host.py (`flydsl_a16w4_gemm1`/`_gemm2`), set up as
  tests/kernels/test_moe_gemm.py `_run_a16w4_moe_e2e` sets it up: raw bf16
  weights preshuffled in 16x16 tiles, a dummy scale, the packed sorted ids as
  row indices, tile_m 32, tile_n 256 (128 when inter % 256 != 0), tile_k 256,
  no tuned CSV.

Written against FlyDSL at commit 11c4174 (2026-08-21); not yet run on AMD hardware.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from flybench import envvars
from flybench.hardware import Device
from flybench.providers import _moe_layout, _paged_append, register
from flybench.providers._rocm import device_reason, module_reason, paged_diffusion_runner
from flybench.providers.base import Provider, Runner
from flybench.workloads.base import Case, Tensors

if TYPE_CHECKING:
    import torch

PAGE_SIZE = 64
"""The only page size FlyDSL's paged flash attention takes (flash_attn_interface._PAGED_PAGE_SIZE)."""
MOE_TILE_N, MOE_TILE_K = 128, 128
"""Stage tiles valid for every catalog model (inter and hidden are multiples of 128)."""
A16WMIX_TILE_M = 32
"""The tile_m of upstream's a16w16 test (test_moe_gemm.py, test_a16w4_moe_e2e)."""
A16WMIX_ARCH = "gfx950"
"""moe_2stage_a16wmix's bf16 weights run on gfx950 and later (upstream's tests skip a16w16 below gfx95); its int4
weights (a16wi4) run on gfx942 too (test_moe_gemm.py: int4_bf16 routes to it on CDNA3 and CDNA4)."""
A8W4_REASON = ("flydsl does not launch its a8w4 MoE (kernels.moe.mxfp_moe, fp8 activations x MX-FP4 weights): "
               "upstream marks it broken and memory-unsafe and its tests do not run it "
               "(tests/kernels/test_moe_gemm.py, _MXFP4_FUSED_XFAIL: end-to-end cosine ~0.07); FlyDSL's CI still "
               "times it on gfx950, which `flybench import flydsl-ci` files under this case")
FLY_BUILD_DIR = "FLY_BUILD_DIR"
"""FlyDSL's own variable for its build directory (scripts/build.sh, setup.py): absolute, or relative to the checkout."""
DEFAULT_BUILD_DIR = "build-fly"
_INT32_MAX = 2**31 - 1
INTERFACE = Path("kernels") / "attention" / "flash_attn_interface.py"
_A16WMIX_HOST = Path("tests") / "kernels" / "moe_a16wmix_host.py"
"""Host launch glue of moe_2stage_a16wmix; upstream keeps it beside its tests, not in kernels/."""


def checkout() -> Path | None:
    """The FlyDSL checkout named by FLYBENCH_FLYDSL_SRC, or None when unset."""
    value = os.environ.get(envvars.FLYDSL_SRC, "").strip()
    return Path(value).expanduser().resolve() if value else None


def checkout_reason() -> str | None:
    """None when FLYBENCH_FLYDSL_SRC names a FlyDSL checkout whose flydsl package imports."""
    src = checkout()
    if src is None:
        return (f"flydsl needs a FlyDSL source checkout (its kernels/ are not in the PyPI wheel): "
                f"git clone https://github.com/ROCm/FlyDSL and set {envvars.FLYDSL_SRC}=/path/to/FlyDSL")
    if not (src / INTERFACE).is_file():
        return f"{envvars.FLYDSL_SRC}={src} is not a FlyDSL checkout: {INTERFACE} is missing there"
    _add_to_path(src)
    return module_reason("flydsl", f"pip install flydsl, or build the checkout (pip install -e {src})")


def build_dir(src: Path) -> Path:
    """The checkout's build: $FLY_BUILD_DIR (absolute, or relative to the checkout), else build-fly."""
    value = os.environ.get(FLY_BUILD_DIR, "").strip()
    return src / Path(value or DEFAULT_BUILD_DIR).expanduser()


def _add_to_path(src: Path) -> None:
    """The checkout root (for `kernels`) and its build's python_packages, as FlyDSL's tests/conftest.py sets them."""
    for path in (build_dir(src) / "python_packages", src):
        if path.is_dir() and str(path) not in sys.path:
            sys.path.insert(0, str(path))


def import_kernel(module: str) -> ModuleType:
    """Import `module` (e.g. "kernels.moe.moe_gemm_2stage") from the checkout."""
    import importlib

    reason = checkout_reason()
    if reason:
        raise RuntimeError(reason)
    return importlib.import_module(module)


def import_a16wmix_host() -> ModuleType:
    """FlyDSL's tests/kernels/moe_a16wmix_host.py, loaded by path (a `tests` package would clash with others')."""
    import importlib.util

    import_kernel("kernels.moe.moe_2stage_a16wmix")
    path = checkout() / _A16WMIX_HOST
    spec = importlib.util.spec_from_file_location("flydsl_moe_a16wmix_host", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise RuntimeError(f"{path} is missing: this FlyDSL checkout predates moe_2stage_a16wmix's host glue")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FlyDSL(Provider):
    """FlyDSL kernels; with `time_append`, only the diffusion workload, append step included."""

    module = "flydsl"

    def __init__(self, name: str, time_append: bool) -> None:
        self.name, self.time_append = name, time_append
        self.workloads = frozenset({"diffusion_attention"} if time_append
                                   else {"attention", "diffusion_attention", "moe", "moe_stage"})
        self.description = ("FlyDSL paged flash attention, draft block appended to the cache inside the timed call"
                            if time_append else "FlyDSL kernels: flash attention (dense and paged), moe_gemm_2stage, "
                                                "moe_2stage_a16wmix")

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        reason = device_reason(self.name, "FlyDSL kernels", device) or checkout_reason()
        if reason:
            return reason
        if workload in ("moe", "moe_stage") and dtype == "bf16" and device.arch != A16WMIX_ARCH:
            return (f"flydsl's bf16 MoE (moe_2stage_a16wmix) runs on {A16WMIX_ARCH} (MI350X/MI355X) only; "
                    f"this machine is {device.arch} - use fp8 (moe_gemm_2stage) here")
        if dtype == "a8w4":
            return A8W4_REASON
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        os.environ.setdefault("FLYDSL_GPU_ARCH", device.arch)  # kernels consult it; unset, FlyDSL assumes gfx942
        if case.workload == "moe":
            return _moe_runner(case, inputs) if "w13_scale" in inputs else _a16w16_runner(case, inputs)
        if case.workload == "moe_stage":
            return _fp8_stage_runner(case, inputs) if dtype == "fp8" else _a16wmix_stage_runner(case, dtype, inputs)
        attention = import_kernel("kernels.attention.flash_attn_interface").flydsl_flash_attn_func
        check_scale(case)
        if case.workload == "attention":
            args, kwargs = attention_call(case, inputs)
            return lambda: dict(zip(("out", "lse"), attention(*args, **kwargs)))
        check_page_size(inputs)
        out = _out_like_packed(inputs)

        def attend(cache: _paged_append.AppendedCache) -> Tensors:
            return {"out": attention(_paged_append.packed_queries(inputs), cache.k_cache, cache.v_cache,
                                     **paged_call(case, inputs, cache, out))}

        return paged_diffusion_runner(inputs, attend, self.time_append)

    def entry_points(self, case: Case, dtype: str) -> list[str]:
        return _entry_points(case, dtype)

    def implementation(self, case: Case, dtype: str) -> dict[str, Any]:
        """FlyDSL's version, the checkout its kernels came from, the entry points and the tiles flybench chose."""
        return {**super().implementation(case, dtype), "checkout": str(checkout()), **dispatched(case, dtype)}


_ATTENTION = "kernels.attention.flash_attn_interface.flydsl_flash_attn_func"


def _entry_points(case: Case, dtype: str) -> list[str]:
    """The entry points `build` calls for `case`, without importing the checkout."""
    if case.workload in ("attention", "diffusion_attention"):
        return [_ATTENTION]
    stages = (case.shape["stage"],) if case.workload == "moe_stage" else (1, 2)
    if dtype == "fp8":
        return [f"kernels.moe.moe_gemm_2stage.compile_moe_gemm{s}" for s in stages]
    if dtype not in A16WMIX_W_DTYPE:  # a8w4: no build launches it
        return []
    return [f"{_A16WMIX_HOST.as_posix()}:flydsl_a16w4_gemm{s}" for s in stages]


def dispatched(case: Case, dtype: str) -> dict[str, Any]:
    """The entry points `build` calls for `case` and the configuration it passes them."""
    p, kernels = case.shape, _entry_points(case, dtype)
    if case.workload == "attention":
        return {"kernels": kernels,
                "unexposed": "which kernel flydsl_flash_attn_func dispatches (generic or gfx950) is not returned"}
    if case.workload == "diffusion_attention":
        return {"kernels": kernels, "config": {"page_size": PAGE_SIZE, "paged": True},
                "unexposed": "not returned; read from flash_attn_interface._flydsl_flash_attn_paged, these cases "
                             "(no bias, at most 256 queries per sequence) take _build_paged_light"}
    if dtype == "fp8":
        tiles = {"tile_m": _moe_layout.row_tile(p["tokens"], p["top_k"], p["experts"]), "tile_n": MOE_TILE_N,
                 "tile_k": MOE_TILE_K}
        return {"kernels": kernels, "config": tiles}
    if dtype not in A16WMIX_W_DTYPE:
        return {"kernels": kernels, "unexposed": A8W4_REASON}
    return {"kernels": kernels,
            "config": {"w_dtype": A16WMIX_W_DTYPE[dtype], "use_csv_config": False, **a16wmix_tiles(case, dtype)}}


def check_scale(case: Case) -> None:
    """flydsl_flash_attn_func has no scale argument: it applies 1/sqrt(head_dim)."""
    if abs(case.shape["scale"] - case.shape["head_dim"] ** -0.5) > 1e-12:
        raise NotImplementedError(f"flydsl attention uses scale 1/sqrt(head_dim); this case has {case.shape['scale']}")


def check_page_size(inputs: Tensors) -> None:
    page = int(inputs["k_cache"].shape[1])
    if page != PAGE_SIZE:
        raise NotImplementedError(f"FlyDSL's paged flash attention takes page size {PAGE_SIZE} only; "
                                  f"this case has {page} (only the p64 cases run on flydsl)")


def attention_call(case: Case, inputs: Tensors) -> tuple[tuple, dict]:
    """Positional and keyword arguments of the dense `flydsl_flash_attn_func` call (BSHD, GQA, LSE)."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    kwargs = {"causal": bool(case.shape["causal"]), "num_kv_heads": int(k.shape[2]), "return_lse": True,
              "out": _empty_like(q)}
    return (q, k, v), kwargs


def paged_call(case: Case, inputs: Tensors, cache: _paged_append.AppendedCache, out: "torch.Tensor") -> dict:
    """Keyword arguments of the varlen paged call, as upstream's test_bias_paged_varlen_ragged_seqlen_k."""
    return {
        "causal": case.shape["mask"] == "causal", "num_kv_heads": int(cache.k_cache.shape[2]),
        "cu_seqlens_q": cache.cu_seqlens_q, "cu_seqlens_kv": cache.cu_seqlens_kv,
        "max_seqlen_q": cache.max_seqlen_q, "max_seqlen_kv": cache.max_seqlen_k, "cross_seqlen": True,
        "block_table": cache.block_table, "seqlen_k": cache.seqlen_k, "kv_cache_layout": "linear", "out": out,
    }


def _empty_like(t: "torch.Tensor") -> "torch.Tensor":
    import torch

    return torch.empty_like(t)


def _out_like_packed(inputs: Tensors) -> "torch.Tensor":
    return _empty_like(_paged_append.packed_queries(inputs))


def flat_operand(t: "torch.Tensor") -> "torch.Tensor":
    """1-D, or 2-D when the element count overflows the JIT ABI's int32 extents (upstream's _flat_or_2d)."""
    flat = t.contiguous().view(-1)
    if flat.numel() <= _INT32_MAX:
        return flat
    for width in (8192, 4096, 2048, 1024, 512, 256, 128):
        if flat.numel() % width == 0 and flat.numel() // width <= _INT32_MAX:
            return flat.view(-1, width)
    raise ValueError(f"cannot split {flat.numel()} elements into int32 extents")


def stage_args(out: "torch.Tensor", x: "torch.Tensor", w: "torch.Tensor", x_scale: "torch.Tensor",
               w_scale: "torch.Tensor", routing: _moe_layout.SortedRouting, n: int, k: int, tokens: int,
               stream: object) -> tuple:
    """The positional launch tuple shared by moe_gemm1 (n=inter, k=hidden) and moe_gemm2 (n=hidden, k=inter)."""
    return (out, flat_operand(x), flat_operand(w), x_scale.reshape(-1).contiguous(), w_scale.reshape(-1).contiguous(),
            routing.sorted_ids, routing.expert_ids, routing.sorted_weights, routing.num_valid_ids,
            tokens, n, k, routing.blocks, stream)


class Fp8Stages:
    """moe_gemm_2stage compiled for one case, with its preshuffled weights, per-row scales and routing tile."""

    def __init__(self, case: Case, inputs: Tensors, stages: tuple[int, ...]) -> None:
        gemm = import_kernel("kernels.moe.moe_gemm_2stage")
        p = case.shape
        self.tile_m = _moe_layout.row_tile(p["tokens"], p["top_k"], p["experts"])
        shape = {"model_dim": p["hidden"], "inter_dim": p["inter"], "experts": p["experts"], "topk": p["top_k"],
                 "tile_m": self.tile_m, "tile_n": MOE_TILE_N, "tile_k": MOE_TILE_K, "out_dtype": "bf16",
                 "in_dtype": "fp8"}
        self.stage1 = gemm.compile_moe_gemm1(doweight_stage1=False, **shape) if 1 in stages else None
        self.stage2 = gemm.compile_moe_gemm2(doweight_stage2=True, accumulate=True, **shape) if 2 in stages else None
        self.w1 = _moe_layout.preshuffle(inputs["w13"]) if 1 in stages else None
        self.w2 = _moe_layout.preshuffle(inputs["w2"]) if 2 in stages else None
        self.s1, self.s2 = inputs["w13_scale"].float(), inputs["w2_scale"].float()
        self.fp8 = inputs["w13"].dtype


def _moe_runner(case: Case, inputs: Tensors) -> Runner:
    """Route, sort, quantise x, stage 1, quantise its rows, stage 2 (atomic sum into a zeroed output)."""
    import torch

    from flybench.workloads._inputs import quantize_fp8
    from flybench.workloads.moe import route

    p = case.shape
    t, h, inter, experts, top_k = p["tokens"], p["hidden"], p["inter"], p["experts"], p["top_k"]
    f = Fp8Stages(case, inputs, (1, 2))
    mid = torch.empty((t, top_k, inter), dtype=torch.bfloat16, device=inputs["x"].device)
    out = torch.empty((t, h), dtype=torch.bfloat16, device=inputs["x"].device)

    def run() -> Tensors:
        stream = torch.cuda.current_stream()
        weights, ids = route(inputs["router_logits"], top_k)
        routing = _moe_layout.sort_routing(ids, weights, experts, f.tile_m)
        xq, xs = quantize_fp8(inputs["x"], f.fp8, per_row=True)
        f.stage1(*stage_args(mid, xq, f.w1, xs, f.s1, routing, inter, h, t, stream))
        aq, a_scale = quantize_fp8(mid.view(t * top_k, inter), f.fp8, per_row=True)
        out.zero_()
        f.stage2(*stage_args(out, aq, f.w2, a_scale, f.s2, routing, h, inter, t, stream))
        return {"out": out}

    return run


def _fp8_stage_runner(case: Case, inputs: Tensors) -> Runner:
    """One moe_gemm_2stage stage over routing sorted here and activations quantised per row here, as FlyDSL's
    CI times a stage: stage 1 writes SwiGLU rows in pair order, stage 2 sums into a zeroed output."""
    import torch

    from flybench.workloads._inputs import quantize_fp8
    from flybench.workloads.moe import route

    p = case.shape
    t, h, inter, top_k, stage = p["tokens"], p["hidden"], p["inter"], p["top_k"], p["stage"]
    f = Fp8Stages(case, inputs, (stage,))
    weights, ids = route(inputs["router_logits"], top_k)
    routing = _moe_layout.sort_routing(ids, weights, p["experts"], f.tile_m)
    device = inputs["x"].device
    if stage == 1:
        xq, xs = quantize_fp8(inputs["x"], f.fp8, per_row=True)
        mid = torch.empty((t, top_k, inter), dtype=torch.bfloat16, device=device)

        def first() -> Tensors:
            f.stage1(*stage_args(mid, xq, f.w1, xs, f.s1, routing, inter, h, t, torch.cuda.current_stream()))
            return {"out": mid.view(t * top_k, inter)}

        return first
    aq, a_scale = quantize_fp8(inputs["act"], f.fp8, per_row=True)
    out = torch.empty((t, h), dtype=torch.bfloat16, device=device)

    def second() -> Tensors:
        out.zero_()
        f.stage2(*stage_args(out, aq, f.w2, a_scale, f.s2, routing, h, inter, t, torch.cuda.current_stream()))
        return {"out": out}

    return second


A16WMIX_W_DTYPE = {"bf16": "bf16", "int4_bf16": "int4"}
"""moe_2stage_a16wmix's w_dtype for each flybench dtype it runs (a16w16 and a16wi4)."""


def a16wmix_tiles(case: Case, dtype: str) -> dict[str, Any]:
    """Stage tiles. bf16: those of upstream's a16w16 test (tile_m 32, tile_k 256, stage 1's tile_n 256, or 128
    when inter is not a multiple of 256, stage 2's 256). int4_bf16: tile_m from the host's
    `a16wi4_recommend_block_m`, tile_n and tile_k left (None) to the host's per-token defaults."""
    p = case.shape
    if dtype == "int4_bf16":
        tile_m = import_a16wmix_host().a16wi4_recommend_block_m(p["tokens"], p["experts"], p["top_k"])
        return {"tile_m": int(tile_m), "tile_k": None, "tile_n_stage1": None, "tile_n_stage2": None}
    return {"tile_m": A16WMIX_TILE_M, "tile_k": 256, "tile_n_stage1": 256 if p["inter"] % 256 == 0 else 128,
            "tile_n_stage2": 256}


def a16wmix_weight(inputs: Tensors, name: str, dtype: str) -> tuple["torch.Tensor", "torch.Tensor"]:
    """One stage's weight as the host reads it, and its scale: bf16 preshuffled in 16x16 tiles with a one-byte
    dummy scale, or int4 packed two to a byte (even K in the low nibble) and preshuffled as bytes, with its
    group scales as bf16 [E, N, K / 32] (the (E, N, G//2, 2) pairs of `a16wi4_scale_to_kernel_layout`)."""
    import torch

    weight = inputs[name]
    if dtype == "bf16":
        return _moe_layout.preshuffle(weight), torch.zeros(1, dtype=torch.uint8, device=weight.device)
    packed = _moe_layout.preshuffle(_moe_layout.pack_int4(weight)).view(-1)
    return packed, inputs[f"{name}_scale"].to(torch.bfloat16).contiguous()


def a16wmix_call(stage: int, case: Case, dtype: str, routing: _moe_layout.SortedRouting, weight: "torch.Tensor",
                 scale: "torch.Tensor", mid: "torch.Tensor", rows: "torch.Tensor") -> dict:
    """Keyword arguments of `flydsl_a16w4_gemm1` (stage 1: `rows` is x [T, H]) or `flydsl_a16w4_gemm2` (stage 2:
    `rows` is the flat [T * H] output) of moe_a16wmix_host.py, as test_moe_gemm.py `_run_a16w4_moe_e2e` passes
    them: the packed sorted ids as row indices, mid [slots, I] bf16 by sorted position, no tuned CSV."""
    p, tiles = case.shape, a16wmix_tiles(case, dtype)
    call = {"sorted_expert_ids": routing.expert_ids, "cumsum_tensor": routing.num_valid_ids, "NE": p["experts"],
            "D_HIDDEN": p["hidden"], "D_INTER": p["inter"], "topk": p["top_k"], "tile_m": tiles["tile_m"],
            "w_dtype": A16WMIX_W_DTYPE[dtype], "use_csv_config": False, "tile_n": tiles[f"tile_n_stage{stage}"]}
    if tiles["tile_k"] is not None:
        call["tile_k"] = tiles["tile_k"]
    if stage == 1:
        return {**call, "a_bf16": rows, "w1_u8": weight, "w1_scale_u8": scale, "m_indices": routing.sorted_ids,
                "inter_sorted_bf16": mid, "n_tokens": p["tokens"]}
    return {**call, "inter_sorted_bf16": mid, "w2_u8": weight, "w2_scale_u8": scale,
            "sorted_token_ids": routing.sorted_ids, "sorted_weights": routing.sorted_weights, "flat_out": rows,
            "M_logical": p["tokens"], "max_sorted": int(mid.shape[0])}


def _sorted_rows(case: Case, tile_m: int, device: "torch.device") -> "torch.Tensor":
    """The bf16 [slots, I] rows stage 1 writes by sorted position, zeroed once as upstream's test allocates them:
    padding rows are never written and must not hold NaNs."""
    import torch

    p = case.shape
    slots = _moe_layout.capacity(p["tokens"], p["top_k"], p["experts"], tile_m)[0]
    return torch.zeros((slots, p["inter"]), dtype=torch.bfloat16, device=device)


def _a16w16_runner(case: Case, inputs: Tensors) -> Runner:
    """bf16 MoE on moe_2stage_a16wmix: route, sort, stage 1 (gate+up, SiLU * up, bf16 rows by sorted
    position), stage 2 (down, routing weight, bf16 atomics into a zeroed output)."""
    import torch

    from flybench.workloads.moe import route

    host = import_a16wmix_host()
    p = case.shape
    t, h, top_k = p["tokens"], p["hidden"], p["top_k"]
    x = inputs["x"]
    (w1, s1), (w2, s2) = a16wmix_weight(inputs, "w13", "bf16"), a16wmix_weight(inputs, "w2", "bf16")
    mid = _sorted_rows(case, A16WMIX_TILE_M, x.device)
    out = torch.empty(t * h, dtype=torch.bfloat16, device=x.device)

    def run() -> Tensors:
        weights, ids = route(inputs["router_logits"], top_k)
        routing = _moe_layout.sort_routing(ids, weights, p["experts"], A16WMIX_TILE_M)
        host.flydsl_a16w4_gemm1(**a16wmix_call(1, case, "bf16", routing, w1, s1, mid, x))
        out.zero_()
        host.flydsl_a16w4_gemm2(**a16wmix_call(2, case, "bf16", routing, w2, s2, mid, out))
        return {"out": out.view(t, h)}

    return run


def _a16wmix_stage_runner(case: Case, dtype: str, inputs: Tensors) -> Runner:
    """One moe_2stage_a16wmix stage (bf16 or int4 weights) over routing sorted here. Stage 1's kernel writes rows
    by sorted position, so its timed call also gathers them into the workload's pair order (one index_select of
    T * k * I bf16); stage 2's input is scattered into sorted order here, once."""
    import torch

    from flybench.workloads.moe import route

    host = import_a16wmix_host()
    p = case.shape
    t, h, top_k, stage = p["tokens"], p["hidden"], p["top_k"], p["stage"]
    tile_m = a16wmix_tiles(case, dtype)["tile_m"]
    weights, ids = route(inputs["router_logits"], top_k)
    routing = _moe_layout.sort_routing(ids, weights, p["experts"], tile_m)
    positions = _moe_layout.pair_positions(routing, t, top_k)
    weight, scale = a16wmix_weight(inputs, "w13" if stage == 1 else "w2", dtype)
    x = inputs["x"]
    mid = _sorted_rows(case, tile_m, x.device)
    if stage == 1:
        act = torch.empty((t * top_k, p["inter"]), dtype=torch.bfloat16, device=x.device)
        call = a16wmix_call(1, case, dtype, routing, weight, scale, mid, x)

        def first() -> Tensors:
            host.flydsl_a16w4_gemm1(**call)
            return {"out": torch.index_select(mid, 0, positions, out=act)}

        return first
    mid[positions] = inputs["act"]
    out = torch.empty(t * h, dtype=torch.bfloat16, device=x.device)
    call = a16wmix_call(2, case, dtype, routing, weight, scale, mid, out)

    def second() -> Tensors:
        out.zero_()
        host.flydsl_a16w4_gemm2(**call)
        return {"out": out.view(t, h)}

    return second


register(FlyDSL("flydsl", time_append=False))
register(FlyDSL("flydsl+append", time_append=True))
