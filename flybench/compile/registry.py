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


def _attention(name: str, entry: str, **config: Any) -> KernelCase:
    shape = dict(batch=4, seq_len=8192, num_heads=64, num_kv_heads=64, head_dim=128, dtype="bf16")
    gfx950_only = entry.endswith("gfx950")
    return KernelCase(
        name, "flydsl", "checkout", f"flybench.compile.flydsl_upstream:{entry}", {**shape, **config},
        arches=("gfx950",) if gfx950_only else AMD_ARCHES, module=f"kernels/attention/{entry}.py",
        not_applicable=("its own guard rejects other targets: it needs gfx950's ds_read_b64_tr (transpose-on-read)"
                        if gfx950_only else ""))


def _moe(name: str, stage: int, tokens: int, model: int, inter: int, experts: int, topk: int,
         tile: tuple[int, int, int]) -> KernelCase:
    config = dict(stage=stage, tokens=tokens, model_dim=model, inter_dim=inter, experts=experts, topk=topk,
                  tile_m=tile[0], tile_n=tile[1], tile_k=tile[2], out_dtype="bf16")
    return KernelCase(name, "flydsl", "checkout", "flybench.compile.flydsl_upstream:moe_gemm_2stage", config,
                      module="kernels/moe/moe_gemm_2stage")


def _gemm(name: str, dtype: str, m: int, n: int, k: int, tile: tuple[int, int, int]) -> KernelCase:
    config = dict(in_dtype=dtype, M=m, N=n, K=k, tile_m=tile[0], tile_n=tile[1], tile_k=tile[2])
    return KernelCase(name, "flydsl", "checkout", "flybench.compile.flydsl_upstream:preshuffle_gemm", config,
                      module="kernels/gemm/preshuffle_gemm.py")


def _pa(name: str, block: int, query_length: int, per_token: bool) -> KernelCase:
    config = dict(head_dim=128, query_group_size=8, block_size=block, query_length=query_length, batch=128,
                  context_length=8192, num_partitions=8, per_token_kv=per_token, dtype="bf16")
    return KernelCase(name, "flydsl", "checkout", "flybench.compile.flydsl_upstream:pa_decode_tile", config,
                      module="kernels/attention/pa_decode_tile.py")


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
    # tests/kernels/test_pa.py test_normal_accuracy: head 128, 8 query heads per KV head, block 16/64,
    # per-tensor and per-token fp8 KV; 8 partitions is what get_recommended_splits gives for batch 128.
    _pa("pa_decode_tile:bs16_q1", block=16, query_length=1, per_token=False),
    _pa("pa_decode_tile:bs64_q4_pertoken", block=64, query_length=4, per_token=True),
    # run_benchmark.sh MOE_SHAPES "32768,8192,8192,16,4,64,128,128,256,128" and "64,6144,1024,128,8,16,64,256,64,256".
    _moe("moe_gemm_2stage:stage1_prefill", 1, 32768, 8192, 8192, 16, 4, (64, 128, 128)),
    _moe("moe_gemm_2stage:stage2_prefill", 2, 32768, 8192, 8192, 16, 4, (64, 256, 128)),
    _moe("moe_gemm_2stage:stage1_decode", 1, 64, 6144, 1024, 128, 8, (16, 64, 256)),
    _moe("moe_gemm_2stage:stage2_decode", 2, 64, 6144, 1024, 128, 8, (16, 64, 256)),
    # run_benchmark.sh GEMM_SHAPES rows "fp8,16,40960,5120,16,128,256", "fp8,5120,5120,8320,64,256,128", "bf16,...".
    _gemm("preshuffle_gemm:fp8_decode", "fp8", 16, 40960, 5120, (16, 128, 256)),
    _gemm("preshuffle_gemm:fp8_prefill", "fp8", 5120, 5120, 8320, (64, 256, 128)),
    _gemm("preshuffle_gemm:bf16_prefill", "bf16", 5120, 5120, 8320, (64, 256, 128)),
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
