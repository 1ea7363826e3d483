"""Compile-only drivers for the kernels of a FlyDSL source checkout (run inside a compile worker).

Each driver builds one kernel the way FlyDSL's own tests and
`scripts/run_benchmark.sh` do, with placeholder tensors on torch's "meta"
device (real shapes and dtypes, no memory), and calls `flyc.compile` under
`COMPILE_ONLY=1`, so nothing is launched. The worker has set ARCH,
FLYDSL_GPU_ARCH (the kernels read it), ROCM_PATH and the dump directory
before calling. Builder arguments go through `call()`, which drops
arguments an older checkout's builder does not take and says so, so one
driver serves many commits of the checkout.

flydsl and torch are imported inside the drivers: the registry imports
this module only for its names, on machines without either.
"""

from __future__ import annotations

import inspect
import os
from typing import Any
from collections.abc import Callable

DROPPED: list[str] = []
"""Builder arguments the checkout's builder did not accept, reported with the record."""


def call(builder: Callable[..., Any], **kwargs: Any) -> Any:
    """builder(**kwargs) without the keywords its signature lacks (unless it takes **kwargs)."""
    params = inspect.signature(builder).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        for name in [k for k in kwargs if k not in params]:
            DROPPED.append(f"{getattr(builder, '__name__', builder)} takes no {name}={kwargs.pop(name)!r}")
    return builder(**kwargs)


def _meta(shape: tuple[int, ...] | int, dtype: str) -> Any:
    import torch

    return torch.empty(shape, dtype=getattr(torch, dtype), device="meta")


def _fp8() -> str:
    """gfx942 uses e4m3 fnuz, gfx950 OCP e4m3fn (as the kernels and FlyDSL's tests do)."""
    return "float8_e4m3fn" if os.environ["FLYDSL_GPU_ARCH"].startswith("gfx95") else "float8_e4m3fnuz"


def _torch_dtype(name: str) -> str:
    return {"bf16": "bfloat16", "f16": "float16", "fp16": "float16", "f32": "float32"}[name]


def flash_attn_generic(config: dict[str, Any]) -> None:
    """kernels/attention/flash_attn_generic.py through its launcher's own `.compile` (dense BSHD)."""
    from kernels.attention.flash_attn_generic import build_flash_attn_func_module

    b, s, h, hkv, d = (config[k] for k in ("batch", "seq_len", "num_heads", "num_kv_heads", "head_dim"))
    launch = call(build_flash_attn_func_module, num_heads=h, head_dim=d, causal=config["causal"],
                  dtype_str=config["dtype"], num_kv_heads=hkv, block_m=config["block_m"],
                  flat_work_group_size=config["flat_work_group_size"], waves_per_eu=config.get("waves_per_eu", 2))
    q, kv = _meta((b, s, h, d), _torch_dtype(config["dtype"])), _meta((b, s, hkv, d), _torch_dtype(config["dtype"]))
    launch.compile(q, kv, kv, q, b, s)


def _dualwave(config: dict[str, Any]) -> dict[str, Any]:
    """The gfx950 dual-wave builders' arguments, as FlyDSL's flash-attention test (and CI) passes them."""
    return dict(num_heads=config["num_heads"], head_dim=config["head_dim"], causal=config["causal"],
                dtype_str=config["dtype"], num_kv_heads=config["num_kv_heads"], waves_per_eu=2, daz=True,
                dualwave_swp_lazy_rescale=True, dualwave_swp_setprio=True, dualwave_swp_enable_stagger=True)


def flash_attn_gfx950(config: dict[str, Any]) -> None:
    """kernels/attention/flash_attn_gfx950.py (dual-wave, software-pipelined), the gfx950 dense path."""
    from kernels.attention.flash_attn_gfx950 import build_flash_attn_dualwave_swp_module

    b, s, h, hkv, d = (config[k] for k in ("batch", "seq_len", "num_heads", "num_kv_heads", "head_dim"))
    launch = call(build_flash_attn_dualwave_swp_module, **_dualwave(config))
    q, kv = _meta((b, s, h, d), _torch_dtype(config["dtype"])), _meta((b, s, hkv, d), _torch_dtype(config["dtype"]))
    launch.compile(q, kv, kv, q, b, s)


def flash_attn_fp8_gfx950(config: dict[str, Any]) -> None:
    """kernels/attention/flash_attn_fp8_gfx950.py: e4m3fn Q/K/V with per-tensor descales and a bf16 output,
    flattened as the interface passes them."""
    from kernels.attention.flash_attn_fp8_gfx950 import build_flash_attn_dualwave_swp_fp8_module

    b, s, h, hkv, d = (config[k] for k in ("batch", "seq_len", "num_heads", "num_kv_heads", "head_dim"))
    launch = call(build_flash_attn_dualwave_swp_fp8_module, **_dualwave(config))
    kv, descale = _meta(b * s * hkv * d, _fp8()), _meta(1, "float32")
    launch.compile(_meta(b * s * h * d, _fp8()), kv, kv, _meta(b * s * h * d, "bfloat16"), b, s,
                   q_descale=descale, k_descale=descale, v_descale=descale)


def mla_decode(config: dict[str, Any]) -> None:
    """kernels/attention/mla_fwd_decode_m16x8_fp8_fp8.py: DeepSeek MLA decode (128 heads, fp8 Q and KV, page size
    1), one persistent workgroup per CU walking aiter's work list; CU count and LDS per CU are MI300X's / MI355X's."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.attention import mla_fwd_decode_m16x8_fp8_fp8 as mla

    b, ctx = config["batch"], config["context_length"]
    cus, lds = {"gfx942": (304, 65536), "gfx950": (256, 163840)}[os.environ["FLYDSL_GPU_ARCH"]]
    # aiter's scheduler sizes the work list and the split results at run time: one of each per CU here
    rows, pages, partials = b * mla.NUM_QO_HEADS, b * ctx, cus * mla.NUM_QO_HEADS
    fp8 = _fp8()
    flyc.compile(mla.launch_mla_fwd_decode_m16x8_fp8_fp8, _meta((rows, mla.QK_HEAD_DIM), fp8),
                 _meta((pages, mla.QK_HEAD_DIM), fp8), _meta(pages, "int32"), _meta(cus + 1, "int32"),
                 _meta(cus * mla.SIZE_MLA_WORK_INFO_IN_DW, "int32"), _meta((rows, mla.V_HEAD_DIM), "bfloat16"),
                 _meta((partials, mla.V_HEAD_DIM), "float32"), _meta(partials, "float32"),
                 mla.QK_HEAD_DIM ** -0.5, cus, lds, fx.Stream(None))


def pa_decode_tile(config: dict[str, Any]) -> None:
    """kernels/attention/pa_decode_tile.py: fp8 paged KV, bf16 query, `num_partitions` context splits."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.attention.pa_decode_tile import compile_pa_decode_tile

    d, group, block, qlen = config["head_dim"], config["query_group_size"], config["block_size"], config["query_length"]
    seqs, kv_heads, ctx, parts = config["batch"], 1, config["context_length"], config["num_partitions"]
    per_token = config["per_token_kv"]
    compiled = call(compile_pa_decode_tile, head_dim=d, query_group_size=group, block_size=block,
                    num_partitions=parts, query_dtype=config["dtype"], per_token_kv=per_token,
                    query_length=qlen, trans_v=True)
    blocks_per_seq = -(-ctx // block)
    num_blocks = seqs * blocks_per_seq
    q_dtype, fp8 = _torch_dtype(config["dtype"]), _fp8()
    query = _meta((seqs * qlen, group * kv_heads, d), q_dtype)
    rows = qlen * group
    pmax = _meta(seqs * kv_heads * parts * rows, "float32")
    pout = _meta(seqs * kv_heads * parts * rows * d, q_dtype)
    key_cache = _meta((num_blocks, kv_heads, d // 16, block, 16), fp8)
    value_cache = _meta((num_blocks, kv_heads, block // 16, d, 16), fp8)
    scale = _meta((num_blocks, kv_heads, block) if per_token else (1,), "float32")
    strides = (kv_heads * block, block) if per_token else (0, 0)
    launch = compiled["launch"] if isinstance(compiled, dict) else compiled
    flyc.compile(launch, query, pmax, pmax, pout, query, key_cache, value_cache,
                 _meta((seqs, blocks_per_seq), "int32"), _meta(seqs, "int32"), scale, scale,
                 blocks_per_seq, seqs, kv_heads, *strides, group * kv_heads * d, d, fx.Stream(None))


def _moe_routing(tokens: int, topk: int, experts: int, tile_m: int) -> tuple[Any, Any, Any, Any, int]:
    """Sorted token ids, expert ids, weights and valid count, sized as moe sorting pads them."""
    padded = tokens * topk + experts * (tile_m - 1)
    blocks = -(-padded // tile_m)
    return (_meta(padded, "int32"), _meta(blocks, "int32"), _meta(padded, "float32"), _meta(1, "int32"), blocks)


def moe_gemm_2stage(config: dict[str, Any]) -> None:
    """kernels/moe/moe_gemm_2stage: stage 1 (gate-up + SiLU) or stage 2 (down projection, atomically accumulated
    per token, or with accumulate=False one row per (token, expert slot) for a later reduce), with fp8 operands
    and per-token scales, or W4A16 (`in_dtype` int4_bf16: bf16 activations, packed int4 weights, one fp32 scale
    per `group_size` of K), as FlyDSL's test_moe_gemm.py passes them."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.moe import moe_gemm_2stage as moe

    tokens, model, inter, experts, topk = (config[k] for k in ("tokens", "model_dim", "inter_dim", "experts", "topk"))
    tile_m, tile_n, tile_k = config["tile_m"], config["tile_n"], config["tile_k"]
    in_dtype, group = config.get("in_dtype", "fp8"), config.get("group_size", 0)
    common = dict(model_dim=model, inter_dim=inter, experts=experts, topk=topk, tile_m=tile_m, tile_n=tile_n,
                  tile_k=tile_k, out_dtype=config["out_dtype"], in_dtype=in_dtype,
                  **({"group_size": group} if group else {}))
    sorted_ids, expert_ids, weights, valid, blocks = _moe_routing(tokens, topk, experts, tile_m)
    w4a16 = in_dtype == "int4_bf16"
    activation, out_dtype = ("bfloat16" if w4a16 else _fp8()), _torch_dtype(config["out_dtype"])
    stage1 = config["stage"] == 1
    n, k = (inter, model) if stage1 else (model, inter)
    rows = experts * (2 * inter if stage1 else model)  # weight rows: gate and up, or the down projection
    if w4a16:  # two int4 values a byte; scales [E, K // group, N]; no activation scale
        w, scale_w, scale_x = (_meta(rows * k // 2, "int8"), _meta(rows * (k // group), "float32"),
                               _meta(0, "float32"))
    else:
        w, scale_w = _meta(rows * k, activation), _meta(rows, "float32")
        scale_x = _meta(tokens if stage1 else tokens * topk, "float32")
    if stage1:
        exe = call(moe.compile_moe_gemm1, doweight_stage1=False, use_cshuffle_epilog=False, **common)
        out, x = _meta((tokens, topk, inter), out_dtype), _meta(tokens * model, activation)
    else:
        accumulate = config.get("accumulate", True)
        exe = call(moe.compile_moe_gemm2, doweight_stage2=True, accumulate=accumulate, **common)
        out = _meta((tokens if accumulate else tokens * topk, model), out_dtype)
        x = _meta(tokens * topk * inter, activation)
    flyc.compile(exe, out, x, w, scale_x, scale_w, sorted_ids, expert_ids, weights, valid, tokens, n, k, blocks,
                 fx.Stream(None))


def mixed_moe_gemm_2stage(config: dict[str, Any]) -> None:
    """kernels/moe/mixed_moe_gemm_2stage.py: MX-FP4 weights with MX-FP4 (`a_dtype` fp4, two values a byte) or
    MX-FP8 activations, e8m0 scales per 32 of K as bytes, f16 out; stage 1 (gate-up + SiLU) or stage 2 (atomic,
    or with accumulate=False one row per (token, expert slot) for a later reduce), as test_moe_gemm.py builds it."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.moe import mixed_moe_gemm_2stage as mixed

    tokens, model, inter, experts, topk = (config[k] for k in ("tokens", "model_dim", "inter_dim", "experts", "topk"))
    tile_m, stage1, fp4 = config["tile_m"], config["stage"] == 1, config["a_dtype"] == "fp4"
    common = dict(model_dim=model, inter_dim=inter, experts=experts, topk=topk, tile_m=tile_m,
                  tile_n=config["tile_n"], tile_k=config["tile_k"], a_dtype=config["a_dtype"], b_dtype="fp4",
                  out_dtype="f16")
    sorted_ids, expert_ids, weights, valid, blocks = _moe_routing(tokens, topk, experts, tile_m)
    k = model if stage1 else inter
    rows, a_rows = experts * (2 * inter if stage1 else model), tokens if stage1 else tokens * topk

    def activations(count: int) -> Any:
        return _meta(count // 2, "uint8") if fp4 else _meta(count, "float8_e4m3fn")

    x, scale_x = activations(a_rows * k), _meta(a_rows * k // 32, "uint8")
    w, scale_w, bias = _meta(rows * k // 2, "uint8"), _meta(rows * k // 32, "uint8"), _meta(0, "float32")
    if stage1:
        exe = call(mixed.compile_mixed_moe_gemm1, doweight_stage1=False, act="silu", **common)
        out = _meta((tokens, topk, inter), "float16")
        flyc.compile(exe, out, x, w, scale_x, scale_w, sorted_ids, expert_ids, weights, valid, bias,
                     _meta(0, "uint8"), tokens, inter * 2, model, blocks, fx.Stream(None))
        return
    accumulate = config["accumulate"]
    exe = call(mixed.compile_mixed_moe_gemm2, doweight_stage2=True, accumulate=accumulate, **common)
    out = _meta((tokens, model), "float16") if accumulate else _meta(tokens * topk * model, "float16")
    flyc.compile(exe, out, x, w, scale_x, scale_w, sorted_ids, expert_ids, weights, valid, bias, tokens, model,
                 inter, blocks, fx.Stream(None))


def preshuffle_gemm(config: dict[str, Any]) -> None:
    """kernels/gemm/preshuffle_gemm.py: C[M,N] = A[M,K] B[N,K]^T with B pre-shuffled, per-token scales for 8-bit."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.gemm.preshuffle_gemm import compile_preshuffle_gemm

    m, n, k, dtype = config["M"], config["N"], config["K"], config["in_dtype"]
    async_copy = {key: config[key] for key in ("use_async_copy", "waves_per_eu") if key in config}
    launch = call(compile_preshuffle_gemm, N=n, K=k, tile_m=config["tile_m"], tile_n=config["tile_n"],
                  tile_k=config["tile_k"], in_dtype=dtype, out_dtype="bf16", **async_copy)
    eight_bit = dtype in ("fp8", "int8")
    element = "int8" if eight_bit else _torch_dtype(dtype)  # the tests pass fp8 data viewed as int8
    b = _meta(n * k, element)
    scale_a = _meta(m if eight_bit else 0, "float32")
    scale_b = _meta(n if eight_bit else 0, "float32")
    flyc.compile(launch, _meta(m * n, "bfloat16"), _meta(m * k, element), b, scale_a, scale_b,
                 _meta(0, "bfloat16"), m, n, fx.Stream(None))


def mxfp_moe_stage1(config: dict[str, Any]) -> None:
    """kernels/moe/mxfp_moe stage 1: MX-FP4 (a4w4) or fp8 (a8w4) activations times MX-FP4 gate-up weights, SiLU
    and the fp4 re-quant of the result; its operands are raw pointers, so nothing is allocated."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.moe.mxfp_moe import gemm1

    tokens, model, inter, experts, topk = (config[k] for k in ("tokens", "model_dim", "inter_dim", "experts", "topk"))
    bm = config["tile_m"]
    # the test streams the weights (non-temporal loads) at BM 32, and the host keeps that while there are fewer
    # M blocks than experts
    use_nt = bm == 32 and -(-tokens * topk // bm) < experts
    launch = call(gemm1.compile_gemm1_a4w4_port, BM=bm, use_nt=use_nt, inline_quant=False, D_HIDDEN=model,
                  D_INTER=inter, NE=experts, TOPK=topk, a_dtype=config["a_dtype"])
    grid = gemm1.gemm1_grid(tokens, bm, NE=experts, TOPK=topk, INTER=inter)
    flyc.compile(launch, *[0] * 7, tokens, grid, 0, 0, 0, fx.Stream(None))


def gemm_a16w16(config: dict[str, Any]) -> None:
    """kernels/gemm/gemm_a16w16_gfx950.py (FlyDSL CI's hgemm): C = A B in the NT layout, f16/bf16 in and out, with
    the parameters and layout-dynamic operands its `gemm_a16w16` host passes."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.gemm import gemm_a16w16_gfx950 as hgemm

    m, n, k = config["M"], config["N"], config["K"]
    dtype_id = hgemm.GEMM_A16W16_DTYPE_FP16 if config["dtype"] == "fp16" else hgemm.GEMM_A16W16_DTYPE_BF16
    param = call(hgemm.make_gemm_a16w16_gfx950_param, in_dtype_id=dtype_id, out_dtype_id=dtype_id,
                 **{key: config[key] for key in ("block_m", "block_n", "block_k", "stages", "split_k", "m_waves",
                                                 "n_waves", "k_waves", "use_half_tile_interleaved")},
                 group_m=0, a_is_transposed=False, b_is_transposed=True, has_bias=False)
    element = _torch_dtype(config["dtype"])

    def dynamic(tensor: Any, leading_dim: int) -> Any:
        return flyc.from_torch_tensor(tensor).mark_layout_dynamic(leading_dim=leading_dim)

    a = dynamic(_meta((m, k), element), 1)
    flags = _meta(hgemm.SPLIT_K_SEMAPHORE_MAX_LEN, "int32")  # the split-K semaphores and signals
    flyc.compile(hgemm.gemm_a16w16_gfx950, dynamic(_meta((m, n), element), 1), a,
                 dynamic(_meta((n, k), element).t(), 0), a, flags, flags, config["split_k"], param, fx.Stream(None))


def hgemm_splitk(config: dict[str, Any]) -> None:
    """kernels/gemm/hgemm_splitk.py (FlyDSL CI's hgemm in the imported month, both targets): C = A B^T, f16/bf16,
    split-K through semaphores, with the tile, stages and warps CI passes and the host's other defaults."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.gemm import hgemm_splitk as hgemm  # imported by flydsl_driver.prepare, which lets it import here

    m, n, k = config["M"], config["N"], config["K"]
    kwargs = hgemm.get_default_kwargs(m, n, k)
    kwargs.update(TILE_M=config["block_m"], TILE_N=config["block_n"], TILE_K=config["block_k"],
                  STAGES=config["stages"], SPLIT_K=config["split_k"], BLOCK_M_WARPS=config["m_waves"],
                  BLOCK_N_WARPS=config["n_waves"], BLOCK_K_WARPS=config["k_waves"], HAS_BIAS=False)
    launch = call(hgemm.compile_hgemm_kernel, dtype="f16" if config["dtype"] == "fp16" else "bf16", n=n, k=k, **kwargs)
    element = _torch_dtype(config["dtype"])
    a, flags = _meta((m, k), element), _meta(hgemm.SPLIT_K_SEMAPHORE_MAX_LEN, "int32")
    flyc.compile(launch, _meta((m, n), element), a, _meta((n, k), element), a, m, flags, flags, fx.Stream(None))


def fp8_gemm_8wave(config: dict[str, Any]) -> None:
    """kernels/gemm/fp8_gemm_8wave.py: 8-wave ping-pong fp8 GEMM with row scales, B row-major; B and the scales
    are static tensors (`from_torch_tensor`), as FlyDSL's test passes them by default."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.gemm.fp8_gemm_8wave import compile_fp8_gemm_8w

    m, n, k = config["M"], config["N"], config["K"]
    launch = call(compile_fp8_gemm_8w, K=k, BLOCK_M=config["tile_m"], BLOCK_N=config["tile_n"], b_preshuffled=False)
    static = flyc.from_torch_tensor
    flyc.compile(launch, _meta(m * k, "int8"), static(_meta(n * k, "int8")), _meta(m * n, "bfloat16"),
                 static(_meta(m, "float32")), static(_meta(n, "float32")), m, n, fx.Stream(None))


def fp4_gemm_4wave(config: dict[str, Any]) -> None:
    """kernels/gemm/fp4_gemm_4wave.py: MX-FP4 GEMM (fp4 pairs and e8m0 scales per 32 as bytes, B pre-shuffled),
    bf16 out, M and N baked in as FlyDSL's test does."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from kernels.gemm.fp4_gemm_4wave import compile_fp4_gemm_4w

    m, n, k = config["M"], config["N"], config["K"]
    launch = call(compile_fp4_gemm_4w, K=k, MN=(m, n))
    flyc.compile(launch, _meta(m * k // 2, "uint8"), _meta(n * k // 2, "uint8"), _meta(m * n, "bfloat16"),
                 _meta(m * k // 32, "uint8"), _meta(n * k // 32, "uint8"), m, n, fx.Stream(None))


def norm(config: dict[str, Any]) -> None:
    """kernels/norm/: layernorm, rmsnorm or softmax of each row of an [M, N] tensor, one workgroup a row."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx

    m, n, op, dtype = config["M"], config["N"], config["op"], config["dtype"]
    rows = _meta((m, n), _torch_dtype(dtype))
    if op == "layernorm":  # input, gamma, beta and output as raw pointers
        from kernels.norm.layernorm_kernel import build_layernorm_module

        element = getattr(fx, {"bf16": "BFloat16", "f16": "Float16", "f32": "Float32"}[dtype])
        launch, args = call(build_layernorm_module, N=n, dtype_str=dtype), [flyc.from_c_void_p(element, 0)] * 4
    elif op == "rmsnorm":
        from kernels.norm.rmsnorm_kernel import build_rmsnorm_module

        launch, args = call(build_rmsnorm_module, N=n, dtype_str=dtype), [rows, _meta(n, _torch_dtype(dtype)), rows]
    else:
        from kernels.norm.softmax_kernel import build_softmax_module

        launch, args = call(build_softmax_module, M=m, N=n, dtype_str=dtype), [rows, rows]
    flyc.compile(launch, *args, m, fx.Stream(None))
