"""Which kernels are compiled, at which configurations, for which targets.

A kernel joins by adding one `KernelCase`: its name (the asv parameter), the
backend, the function that compiles it, and its compile-time configuration.
The configurations of the FlyDSL checkout's kernels are the ones FlyDSL's
own runtime benchmark (`scripts/run_benchmark.sh`) and kernel tests use;
each entry says which row it comes from. Importing this module imports
neither torch, flydsl nor triton: asv imports it on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flybench.errors import unknown_name

AMD_ARCHES = ("gfx942", "gfx950")
NVIDIA_ARCHES = ("sm_90",)
ARCHES = AMD_ARCHES + NVIDIA_ARCHES
OWN_FLYDSL_FILE = "tests/kernels/flydsl_vector_add.py"


@dataclass(frozen=True)
class KernelCase:
    """One kernel at one compile-time configuration.

    `entry` is "package.module:function" or "relative/file.py:function" (from
    this repository's root). FlyDSL entries take the config and compile with
    `flyc.compile` under COMPILE_ONLY; Triton entries name the `@triton.jit`
    function and the config holds signature, constexprs and per-vendor options.
    `module` is the checkout file the kernel lives in (checkout kernels only):
    when a checkout lacks it, the kernel is unavailable there, not failed.
    """

    name: str
    backend: str  # "flydsl" or "triton"
    origin: str  # "own" (this repository) or "checkout" (a FlyDSL source checkout)
    entry: str
    config: dict[str, Any] = field(default_factory=dict)
    arches: tuple[str, ...] = AMD_ARCHES
    not_applicable: str = ""
    module: str = ""
    primary: str = ""  # substring of the reported kernel's symbol when one compile builds several
    ci_op: str = ""
    """The FlyDSL CI op (the `op` of FlyDSL CI's benchmark records) this kernel's timing corresponds to,
    so its compile metrics can be read next to CI's runtime; empty when CI times no such kernel."""


_LLVM_ABORTS = "LLVM aborts for gfx942: Do not know how to expand this operator's operand!"


def _checkout(name: str, driver: str, module: str, config: dict[str, Any], ci_op: str,
              gfx950_only: str = "") -> KernelCase:
    """A FlyDSL checkout kernel; `gfx950_only` is why it cannot be built for other targets."""
    return KernelCase(name, "flydsl", "checkout", f"flybench.compile.flydsl_upstream:{driver}", config,
                      arches=("gfx950",) if gfx950_only else AMD_ARCHES, not_applicable=gfx950_only,
                      module=module, ci_op=ci_op)


def _attention(name: str, entry: str, ci_op: str = "flash_attn", **config: Any) -> KernelCase:
    shape = dict(batch=4, seq_len=8192, num_heads=64, num_kv_heads=64, head_dim=128, dtype="bf16")
    return _checkout(name, entry, f"kernels/attention/{entry}.py", {**shape, **config}, ci_op,
                     gfx950_only=("its own guard rejects other targets: it needs gfx950's ds_read_b64_tr "
                                  "(transpose-on-read)" if entry.endswith("gfx950") else ""))


def _moe(name: str, stage: int, tokens: int, model: int, inter: int, experts: int, topk: int,
         tile: tuple[int, int, int], reduce: bool = False, in_dtype: str = "fp8", group_size: int = 0) -> KernelCase:
    """A kernel of moe_gemm_2stage as FlyDSL's CI builds it: test_moe_gemm.py's --out_dtype defaults to f16 at
    every commit of the imported month and today, and run_benchmark.sh passes none (the June builders reject a
    bf16 stage-1 output, so a bf16 entry had no machine code before #807)."""
    config = dict(stage=stage, tokens=tokens, model_dim=model, inter_dim=inter, experts=experts, topk=topk,
                  tile_m=tile[0], tile_n=tile[1], tile_k=tile[2], out_dtype="f16")
    if reduce:  # only the reduce entries carry the key, so the atomic ones keep their compile cache keys
        config["accumulate"] = False
    if in_dtype != "fp8":  # W4A16: bf16 activations, packed int4 weights with a scale per group of K
        config.update(in_dtype=in_dtype, group_size=group_size)
    family = "moe_gemm" if in_dtype == "fp8" else "moe_w4a16_s"
    ci_op = f"{family}1" if stage == 1 else f"{family}2_reduce" if reduce else f"{family}2_atomic"
    return _checkout(name, "moe_gemm_2stage", "kernels/moe/moe_gemm_2stage", config, ci_op)


def _mixed_moe(name: str, stage: int, a_dtype: str, tokens: int, model: int, inter: int, experts: int, topk: int,
               tile: tuple[int, int, int], reduce: bool = False) -> KernelCase:
    """kernels/moe/mixed_moe_gemm_2stage.py: the MX-FP4-weight MoE that FlyDSL's CI timed as moe_fp4 (fp4
    activations) and moe_a8w4 (fp8 activations) until #892 moved it into mxfp_moe."""
    config = dict(stage=stage, a_dtype=a_dtype, tokens=tokens, model_dim=model, inter_dim=inter, experts=experts,
                  topk=topk, tile_m=tile[0], tile_n=tile[1], tile_k=tile[2], accumulate=not reduce)
    family = "moe_a8w4" if a_dtype == "fp8" else "moe_fp4"
    ci_op = f"{family}_s1" if stage == 1 else f"{family}_s2_reduce" if reduce else f"{family}_s2_atomic"
    return _checkout(name, "mixed_moe_gemm_2stage", "kernels/moe/mixed_moe_gemm_2stage.py", config, ci_op,
                     gfx950_only=f"it needs gfx950's scaled MFMA (FlyDSL's CI skips it elsewhere; {_LLVM_ABORTS})")


def _mxfp_moe(name: str, a_dtype: str, tokens: int, model: int, inter: int, experts: int, topk: int,
              tile_m: int) -> KernelCase:
    config = dict(a_dtype=a_dtype, tokens=tokens, model_dim=model, inter_dim=inter, experts=experts, topk=topk,
                  tile_m=tile_m)
    return _checkout(name, "mxfp_moe_stage1", "kernels/moe/mxfp_moe/gemm1.py", config,
                     "moe_a8w4_s1" if a_dtype == "fp8" else "moe_fp4_s1",
                     gfx950_only=f"it needs gfx950's scaled MFMA and 16-byte global->LDS DMA ({_LLVM_ABORTS})")


def _gemm(name: str, dtype: str, m: int, n: int, k: int, tile: tuple[int, int, int],
          waves_per_eu: int = 0) -> KernelCase:
    config = dict(in_dtype=dtype, M=m, N=n, K=k, tile_m=tile[0], tile_n=tile[1], tile_k=tile[2])
    if waves_per_eu:  # the async-copy rows: buffer_load ... lds straight from global memory
        config.update(use_async_copy=True, waves_per_eu=waves_per_eu)
    return _checkout(name, "preshuffle_gemm", "kernels/gemm/preshuffle_gemm.py", config,
                     "gemm_async" if waves_per_eu else "gemm",
                     gfx950_only=("its builder rejects use_async_copy off gfx950, the only target buffer_load ... lds "
                                  "lowers on" if waves_per_eu else ""))


def _hgemm(name: str, dtype: str, m: int, n: int, k: int, tile: tuple[int, int, int], stages: int, split_k: int,
           waves: tuple[int, int, int], hti: bool = False) -> KernelCase:
    config = dict(dtype=dtype, M=m, N=n, K=k, block_m=tile[0], block_n=tile[1], block_k=tile[2], stages=stages,
                  split_k=split_k, m_waves=waves[0], n_waves=waves[1], k_waves=waves[2],
                  use_half_tile_interleaved=hti)
    return _checkout(name, "gemm_a16w16", "kernels/gemm/gemm_a16w16_gfx950.py", config, "hgemm",
                     gfx950_only="it is written for gfx950's 16-byte global->LDS DMA and 160 KiB of LDS (for "
                                 "gfx942 LLVM aborts, or the builder rejects the LDS stages); FlyDSL's CI runs it on "
                                 "gfx95* only")


def _hgemm_splitk(name: str, arch: str, dtype: str, m: int, n: int, k: int, tile: tuple[int, int, int], stages: int,
                  split_k: int, waves: tuple[int, int, int]) -> KernelCase:
    """kernels/gemm/hgemm_splitk.py, FlyDSL CI's hgemm in the imported month: run_benchmark.sh times one pair of rows
    on gfx95* (HGEMM_SHAPES_GFX950) and another on CDNA3 (HGEMM_SHAPES_CDNA3), each on its own target."""
    config = dict(dtype=dtype, M=m, N=n, K=k, block_m=tile[0], block_n=tile[1], block_k=tile[2], stages=stages,
                  split_k=split_k, m_waves=waves[0], n_waves=waves[1], k_waves=waves[2])
    return KernelCase(name, "flydsl", "checkout", "flybench.compile.flydsl_upstream:hgemm_splitk", config,
                      arches=(arch,), not_applicable=f"FlyDSL's CI runs this row on {arch} only",
                      module="kernels/gemm/hgemm_splitk.py", ci_op="hgemm")


def _norm(op: str, m: int, n: int, dtype: str) -> KernelCase:
    return _checkout(f"{op}:{dtype}_{m}x{n}", "norm", f"kernels/norm/{op}_kernel.py",
                     dict(op=op, M=m, N=n, dtype=dtype), op)


def _pa(name: str, block: int, query_length: int, per_token: bool) -> KernelCase:
    config = dict(head_dim=128, query_group_size=8, block_size=block, query_length=query_length, batch=128,
                  context_length=8192, num_partitions=8, per_token_kv=per_token, dtype="bf16")
    return _checkout(name, "pa_decode_tile", "kernels/attention/pa_decode_tile.py", config, "")


CHECKOUT_CASES = (
    # run_benchmark.sh FLASH_ATTN shape "4,8192,64,64,128,bf16,true"; m128 is the 256-thread tile the
    # interface uses below 4096 tokens, m256 the 512-thread tile it picks for this shape on gfx942.
    _attention("flash_attn_generic:causal_m128", "flash_attn_generic", causal=True, block_m=128,
               flat_work_group_size=256),
    _attention("flash_attn_generic:causal_m256", "flash_attn_generic", causal=True, block_m=256,
               flat_work_group_size=512),
    _attention("flash_attn_generic:noncausal_m128", "flash_attn_generic", causal=False, block_m=128,
               flat_work_group_size=256),
    _attention("flash_attn_gfx950:causal", "flash_attn_gfx950", causal=True),
    _attention("flash_attn_gfx950:noncausal", "flash_attn_gfx950", causal=False),
    # tests/kernels/test_flash_attn_fwd.py --dtype fp8 (run_fp8_config) at the same shape; CI's flash_attn rows
    # are all bf16, so no CI op times this kernel.
    _attention("flash_attn_fp8_gfx950:causal", "flash_attn_fp8_gfx950", ci_op="", causal=True, dtype="fp8"),
    _attention("flash_attn_fp8_gfx950:noncausal", "flash_attn_fp8_gfx950", ci_op="", causal=False, dtype="fp8"),
    # run_benchmark.sh MLA_DECODE_SHAPES "32,8192" (tests/kernels/test_mla_decode.py: DeepSeek MLA, 128 heads,
    # fp8 Q/KV, page size 1).
    _checkout("mla_decode:fp8_b32_ctx8192", "mla_decode", "kernels/attention/mla_fwd_decode_m16x8_fp8_fp8.py",
              dict(batch=32, context_length=8192), "mla"),
    # tests/kernels/test_pa.py test_normal_accuracy: head 128, 8 query heads per KV head, block 16/64,
    # per-tensor and per-token fp8 KV; 8 partitions is what get_recommended_splits gives for batch 128.
    # run_benchmark.sh has no paged-attention row, so no CI op.
    _pa("pa_decode_tile:bs16_q1", block=16, query_length=1, per_token=False),
    _pa("pa_decode_tile:bs64_q4_pertoken", block=64, query_length=4, per_token=True),
    # run_benchmark.sh MOE_SHAPES "32768,8192,8192,16,4,64,128,128,256,128" and "64,6144,1024,128,8,16,64,256,64,256"
    # (tests/kernels/test_moe_gemm_2stage.py: stage 2 atomic, then reduce).
    _moe("moe_gemm_2stage:stage1_prefill", 1, 32768, 8192, 8192, 16, 4, (64, 128, 128)),
    _moe("moe_gemm_2stage:stage2_prefill", 2, 32768, 8192, 8192, 16, 4, (64, 256, 128)),
    _moe("moe_gemm_2stage:stage2_reduce_prefill", 2, 32768, 8192, 8192, 16, 4, (64, 256, 128), reduce=True),
    _moe("moe_gemm_2stage:stage1_decode", 1, 64, 6144, 1024, 128, 8, (16, 64, 256)),
    _moe("moe_gemm_2stage:stage2_decode", 2, 64, 6144, 1024, 128, 8, (16, 64, 256)),
    _moe("moe_gemm_2stage:stage2_reduce_decode", 2, 64, 6144, 1024, 128, 8, (16, 64, 256), reduce=True),
    # run_benchmark.sh MOE_W4A16_SHAPES "128,7168,256,384,8,16,128,128,128,256" (test_moe_gemm.py --in_dtype
    # int4_bf16 --group_size 32; stage 2 at tile_n2 x tile_k2).
    _moe("moe_w4a16:stage1_t128", 1, 128, 7168, 256, 384, 8, (16, 128, 128), in_dtype="int4_bf16", group_size=32),
    _moe("moe_w4a16:stage2_t128", 2, 128, 7168, 256, 384, 8, (16, 128, 256), in_dtype="int4_bf16", group_size=32),
    _moe("moe_w4a16:stage2_reduce_t128", 2, 128, 7168, 256, 384, 8, (16, 128, 256), reduce=True,
         in_dtype="int4_bf16", group_size=32),
    # the month's MOE_FP4_SHAPES row "2048,7168,256,257,9,64,256,256,256,256" and MOE_A8W4_SHAPES row
    # "512,3072,3072,128,4,32,128,256,256,256" through test_moe_gemm.py's mixed path (f16 out, stage 2 atomic, then
    # reduce), as CI built them before #892.
    _mixed_moe("mixed_moe:fp4_stage1", 1, "fp4", 2048, 7168, 256, 257, 9, (64, 256, 256)),
    _mixed_moe("mixed_moe:fp4_stage2", 2, "fp4", 2048, 7168, 256, 257, 9, (64, 256, 256)),
    _mixed_moe("mixed_moe:fp4_stage2_reduce", 2, "fp4", 2048, 7168, 256, 257, 9, (64, 256, 256), reduce=True),
    _mixed_moe("mixed_moe:a8w4_stage1", 1, "fp8", 512, 3072, 3072, 128, 4, (32, 128, 256)),
    _mixed_moe("mixed_moe:a8w4_stage2", 2, "fp8", 512, 3072, 3072, 128, 4, (32, 256, 256)),
    _mixed_moe("mixed_moe:a8w4_stage2_reduce", 2, "fp8", 512, 3072, 3072, 128, 4, (32, 256, 256), reduce=True),
    # run_benchmark.sh MOE_FP4_SHAPES "2048,7168,256,257,9,64,..." and MOE_A8W4_SHAPES "512,3072,3072,128,4,32,..."
    # (tests/kernels/test_moe_gemm.py _run_mxfp_moe_e2e: stage 1 of the fused mxfp_moe pipeline; at 11c4174d the
    # script skips both as a known-broken pipeline, so CI's rows for them hold no timing).
    _mxfp_moe("mxfp_moe:fp4_stage1", "fp4", 2048, 7168, 256, 257, 9, 64),
    _mxfp_moe("mxfp_moe:a8w4_stage1", "fp8", 512, 3072, 3072, 128, 4, 32),
    # run_benchmark.sh GEMM_SHAPES rows "fp8,16,40960,5120,16,128,256", "fp8,256,2112,7168,64,64,256",
    # "fp8,5120,5120,8320,64,256,128", "int8,9728,8192,8320,64,256,128", "bf16,5120,5120,8320,64,256,128".
    _gemm("preshuffle_gemm:fp8_decode", "fp8", 16, 40960, 5120, (16, 128, 256)),
    _gemm("preshuffle_gemm:fp8_m256", "fp8", 256, 2112, 7168, (64, 64, 256)),
    _gemm("preshuffle_gemm:fp8_prefill", "fp8", 5120, 5120, 8320, (64, 256, 128)),
    _gemm("preshuffle_gemm:int8_prefill", "int8", 9728, 8192, 8320, (64, 256, 128)),
    _gemm("preshuffle_gemm:bf16_prefill", "bf16", 5120, 5120, 8320, (64, 256, 128)),
    # run_benchmark.sh GEMM_SHAPES_ASYNC rows "fp8,256,2112,7168,64,64,256" (GEMM_WAVES_PER_EU=2) and
    # "fp8,5120,5120,8320,128,256,128,2", with --use_async_copy (its int8 row takes over a minute to compile).
    _gemm("preshuffle_gemm:fp8_async_m256", "fp8", 256, 2112, 7168, (64, 64, 256), waves_per_eu=2),
    _gemm("preshuffle_gemm:fp8_async_prefill", "fp8", 5120, 5120, 8320, (128, 256, 128), waves_per_eu=2),
    # run_benchmark.sh HGEMM_SHAPES_GFX950 (tests/kernels/test_gemm_a16w16_gfx950.py): a 4-stage fp16 tile,
    # the 16-way split-K decode tile, and the half-tile-interleaved 256x256 tile.
    _hgemm("hgemm:fp16_2048", "fp16", 2048, 2048, 2048, (128, 128, 64), 4, 1, (4, 4, 1)),
    _hgemm("hgemm:bf16_splitk16", "bf16", 32, 384, 7168, (32, 64, 64), 5, 16, (2, 2, 1)),
    _hgemm("hgemm:bf16_hti_8192", "bf16", 8192, 8192, 8192, (256, 256, 64), 2, 1, (2, 4, 1), hti=True),
    # the month's HGEMM_SHAPES_GFX950 "fp16,2048,2048,2048,128,128,64,4,1,4,4,1", "bf16,32,384,7168,32,64,64,5,16,2,2,1"
    # and HGEMM_SHAPES_CDNA3 "fp16,4096,4096,4096,128,128,64,2,1,2,2,1", "bf16,32,384,7168,16,64,128,2,14,1,2,1"
    # (tests/kernels/test_hgemm_splitk.py)
    _hgemm_splitk("hgemm_splitk:fp16_2048", "gfx950", "fp16", 2048, 2048, 2048, (128, 128, 64), 4, 1, (4, 4, 1)),
    _hgemm_splitk("hgemm_splitk:bf16_splitk16", "gfx950", "bf16", 32, 384, 7168, (32, 64, 64), 5, 16, (2, 2, 1)),
    _hgemm_splitk("hgemm_splitk:fp16_4096", "gfx942", "fp16", 4096, 4096, 4096, (128, 128, 64), 2, 1, (2, 2, 1)),
    _hgemm_splitk("hgemm_splitk:bf16_splitk14", "gfx942", "bf16", 32, 384, 7168, (16, 64, 128), 2, 14, (1, 2, 1)),
    # run_benchmark.sh FP8_GEMM_8WAVE_ROWSCALE_SHAPES "5120,5120,8320,256,256,0" (test_fp8_gemm_rowscale.py
    # --wave_8: row-major B, static weight and scale tensors).
    _checkout("fp8_gemm_8wave:rowscale_5120", "fp8_gemm_8wave", "kernels/gemm/fp8_gemm_8wave.py",
              dict(M=5120, N=5120, K=8320, tile_m=256, tile_n=256), "fp8_8wave_rowscale",
              gfx950_only=f"it is written for gfx950's buffer_load ... lds and 16x16x128 fp8 MFMA ({_LLVM_ABORTS})"),
    # run_benchmark.sh GEMM_FP4_SHAPES "8192,8192,8192" (tests/kernels/test_fp4_gemm_4wave.py: its native
    # 256x256x256 tile, M and N baked in).
    _checkout("fp4_gemm_4wave:8192", "fp4_gemm_4wave", "kernels/gemm/fp4_gemm_4wave.py",
              dict(M=8192, N=8192, K=8192), "gemm_fp4",
              gfx950_only="it needs gfx950's scaled MFMA and permlane16.swap (gfx942 lacks the target feature "
                          "'permlane16-swap')"),
    # run_benchmark.sh SOFTMAX_SHAPES, LAYERNORM_SHAPES and RMSNORM_SHAPES "32768,8192,bf16".
    _norm("softmax", 32768, 8192, "bf16"),
    _norm("layernorm", 32768, 8192, "bf16"),
    _norm("rmsnorm", 32768, 8192, "bf16"),
)

_MATMUL_SIGNATURE = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
                     "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
OWN_CASES = (
    KernelCase("flydsl_vector_add", "flydsl", "own", f"{OWN_FLYDSL_FILE}:compile_vector_add",
               {"n": 1 << 20, "block": 256, "vec": 4}),
    KernelCase("triton_vector_add", "triton", "own", "flybench.compile.triton_kernels:vector_add_kernel", {
        "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
        "constexprs": {"BLOCK": 1024}, "divisible_by_16": ["x_ptr", "y_ptr", "out_ptr"],
        "options": {"hip": {"num_warps": 4}, "cuda": {"num_warps": 4}}}, arches=ARCHES),
    # Large tiles that spill on neither gfx942 nor gfx950 (256x256x64 spills 6 VGPRs on gfx950) and, for
    # sm_90, the 128x256x64 / 8 warps / 3 stages entry of Triton's matmul tutorial; not tuned on hardware yet.
    KernelCase("triton_matmul_bf16", "triton", "own", "flybench.compile.triton_kernels:matmul_kernel", {
        "signature": _MATMUL_SIGNATURE, "divisible_by_16": ["a_ptr", "b_ptr", "c_ptr", "N", "K", "stride_am",
                                                            "stride_bk", "stride_cm"],
        "constexprs": {"hip": {"BM": 256, "BN": 256, "BK": 32, "GROUP_M": 8},
                       "cuda": {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}},
        "options": {"hip": {"num_warps": 8, "num_stages": 2}, "cuda": {"num_warps": 8, "num_stages": 3}}},
        arches=ARCHES),
)



def _plan(name: str, workload: str, case: str, dtype: str, launch: str) -> KernelCase:
    """A kernel of the `triton` provider as one quick-suite case launches it, per target at its table entry."""
    module = "diffusion_attention" if workload == "diffusion_attention" else "moe"
    return KernelCase(name, "triton", "own", f"flybench.kernels.triton.{module}:{launch}",
                      {"plan": {"workload": workload, "case": case, "dtype": dtype, "launch": launch}}, arches=ARCHES)


TRITON_PROVIDER_CASES = (
    # the reference decode case (page 64, split-K) and its combine kernel; MoE decode and prefill shapes
    _plan("triton_diffusion_attention:b8_ctx4k_p64", "diffusion_attention", "llama3-8b-b8-ctx4k-d32-p64-bidir", "bf16",
          "diffusion_attention_fwd"),
    _plan("triton_diffusion_attention:combine", "diffusion_attention", "llama3-8b-b8-ctx4k-d32-p64-bidir", "bf16",
          "combine_splits"),
    _plan("triton_moe:gate_up_bf16_t16", "moe", "mixtral8x7b-t16", "bf16", "moe_gate_up"),
    _plan("triton_moe:down_bf16_t16", "moe", "mixtral8x7b-t16", "bf16", "moe_down"),
    _plan("triton_moe:gate_up_fp8_t16", "moe", "mixtral8x7b-t16", "fp8", "moe_gate_up"),
    _plan("triton_moe:gate_up_bf16_t4096", "moe", "dsv3-tp8-t4096", "bf16", "moe_gate_up"),
)

CASES: dict[str, KernelCase] = {case.name: case for case in OWN_CASES + TRITON_PROVIDER_CASES + CHECKOUT_CASES}


def get_case(name: str) -> KernelCase:
    if name not in CASES:
        raise unknown_name("kernel", name, list(CASES))
    return CASES[name]


def check_arch(arch: str) -> str:
    if arch not in ARCHES:
        raise unknown_name("target", arch, ARCHES)
    return arch
