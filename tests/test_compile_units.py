"""Occupancy against hand-computed cases, the ISA/ELF readers, availability decisions, toolchain and cache.

No compiler runs here; tests/test_compile.py compiles for real.
"""

import pytest

from flybench import envvars
from flybench.compile import cache, occupancy, registry, runner, toolchain
from flybench.compile.elf import binaries_in_mlir, function_sizes
from flybench.compile.isa import count_mnemonics, function_body, parse_amdgpu_isa, suspicions
from flybench.compile.record import CompileRecord
from flybench.errors import FlybenchError

# Excerpt of a real gfx942 ISA (FlyDSL 0.5.0's vector add), trimmed: body, resource symbols, metadata.
ISA = """\t.amdgcn_target "amdgcn-amd-amdhsa-unknown-gfx942"
vecAddKernel_0:                         ; @vecAddKernel_0
\ts_load_dwordx2 s[4:5], s[0:1], 0x0
; %bb.0:
\tbuffer_load_dwordx4 v[0:3], v8, s[4:7], 0 offen
\tv_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]  ; a comment
\tv_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]
\tds_read_b64_tr_b16 v[4:5], v6
\tbuffer_store_dwordx4 v[0:3], v8, s[12:15], 0 offen
\ts_endpgm
.Lfunc_end0:
\t.set .LvecAddKernel_0.num_vgpr, 9
\t.set .LvecAddKernel_0.num_agpr, 16
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     16
    .args:
      - .address_space:  global
        .offset:         0
        .size:           8
    .group_segment_fixed_size: 1024
    .max_flat_workgroup_size: 256
    .name:           vecAddKernel_0
    .private_segment_fixed_size: 0
    .sgpr_count:     22
    .sgpr_spill_count: 0
    .vgpr_count:     28
    .vgpr_spill_count: 3
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa-unknown-gfx942
\t.end_amdgpu_metadata
"""


@pytest.mark.parametrize("arch, vgprs, sgprs, lds, group, waves, limiters", [
    # 250 VGPRs -> 256 allocated -> 2 waves; 65536 // 33792 = 1 workgroup of 4 waves per CU -> 1 wave per SIMD
    ("gfx942", 250, 30, 33792, 256, 1.0, ("lds",)),
    # 238 -> 240 -> 2 waves; 163840 // 49152 = 3 workgroups, but registers allow 4*2 // 4 = 2 -> 2 waves
    ("gfx950", 238, 32, 49152, 256, 2.0, ("vgpr",)),
    # 256 VGPRs + 28 AGPRs: unified 284 -> 288 -> 512 // 288 = 1 wave (and LDS also allows 1 workgroup)
    ("gfx942", occupancy.unified_vgprs(256, 28), 29, 33792, 256, 1.0, ("vgpr", "lds")),
    # 9 VGPRs -> 16 allocated -> 32 waves by registers, capped at 8 per SIMD
    ("gfx942", 9, 22, 0, 256, 8.0, ("waves",)),
    # 106 SGPRs -> 7 waves (GFX9 rule); 24 VGPRs would allow 8
    ("gfx950", 24, 106, 0, 256, 7.0, ("sgpr",)),
    # one-wave workgroups holding 40 KiB each: 1 per CU on gfx942 -> 1 wave per CU -> 0.25 per SIMD
    ("gfx942", 32, 20, 40 * 1024, 64, 0.25, ("lds",)),
    # the same on gfx950: 160 // 40 = 4 workgroups -> 1 wave per SIMD
    ("gfx950", 32, 20, 40 * 1024, 64, 1.0, ("lds",)),
    # 512-thread workgroup (8 waves, 2 per SIMD), 246 VGPRs -> 2 waves: exactly one workgroup per CU
    ("gfx950", 246, 52, 68096, 512, 2.0, ("vgpr",)),
])
def test_occupancy_matches_hand_computed_cases(arch, vgprs, sgprs, lds, group, waves, limiters):
    result = occupancy.estimate(arch, vgprs, sgprs, lds, group)
    assert (result.waves, result.limiters) == (waves, limiters)


def test_occupancy_of_what_cannot_fit_is_zero_and_unknown_arch_is_an_error():
    assert occupancy.estimate("gfx942", 513, 20, 0, 64).waves == 0.0
    assert occupancy.estimate("gfx942", 64, 20, 64 * 1024 + 4, 64).waves == 0.0
    assert occupancy.estimate("gfx950", 64, 20, 64 * 1024 + 4, 64).waves > 0  # gfx950 has 160 KiB
    assert occupancy.unified_vgprs(250, 6) == 258 and occupancy.unified_vgprs(9, 0) == 9
    with pytest.raises(FlybenchError, match="no occupancy rules for 'gfx90a'; known: gfx942, gfx950"):
        occupancy.estimate("gfx90a", 64, 20, 0, 64)


def test_isa_metadata_and_instruction_mix():
    [kernel] = parse_amdgpu_isa(ISA).values()
    assert kernel.symbol == "vecAddKernel_0"
    assert (kernel.vgprs, kernel.agpr_count, kernel.vgpr_count, kernel.sgpr_count) == (9, 16, 28, 22)
    assert (kernel.lds_static_bytes, kernel.scratch_bytes, kernel.vgpr_spills, kernel.sgpr_spills) == (1024, 0, 3, 0)
    assert (kernel.workgroup_size, kernel.wavefront_size) == (256, 64)
    assert kernel.mfma == {"v_mfma_f32_32x32x8_bf16": 2} and kernel.ds_read_b64_tr == 1
    assert kernel.instructions == 7 and kernel.stores == 1 and suspicions(kernel, 140) == []
    assert function_body(ISA, "nope") == [] and count_mnemonics(["; only a comment", "label:", "\t.p2align 8"]) == {}


def test_bare_endpgm_and_storeless_kernels_are_suspected():
    head, tail = ISA.split("vecAddKernel_0:")[0], ISA.split(".Lfunc_end0:\n")[1]
    bare = head + "vecAddKernel_0:\n\ts_endpgm\n.Lfunc_end0:\n" + tail
    [kernel] = parse_amdgpu_isa(bare).values()
    assert "bare s_endpgm (1 instruction(s), 4 bytes of code)" in suspicions(kernel, 4)[0]
    no_store = ISA.replace("\tbuffer_store_dwordx4 v[0:3], v8, s[12:15], 0 offen\n", "")
    [kernel] = parse_amdgpu_isa(no_store).values()
    assert "no store or atomic instruction" in suspicions(kernel, 120)[0]


def test_elf_reader_and_mlir_binary_unescaping():
    assert function_sizes(b"not an elf") == {} and function_sizes(b"\x7fELF" + bytes(60)) == {}
    assert binaries_in_mlir('gpu.binary @k [#gpu.object<bin = "\\7FELF\\00a\\"b\\\\">]') == [b"\x7fELF\x00a\"b\\"]


def test_record_values_for_asv():
    ok = CompileRecord("k", "gfx942", "ok", metrics={"vgprs": 9, "code_size": None})
    assert ok.value("vgprs") == 9 and ok.value("code_size") is None
    with pytest.raises(NotImplementedError, match="not applicable: gfx950 only"):
        CompileRecord("k", "gfx942", "not_applicable", "gfx950 only").value("vgprs")
    with pytest.raises(RuntimeError, match="failed to compile: ValueError: boom"):
        CompileRecord("k", "gfx942", "failed", "ValueError: boom").value("vgprs")
    assert CompileRecord.from_json(ok.to_json()) == ok


def test_registry_names_and_targets():
    with pytest.raises(FlybenchError, match="unknown kernel 'nope'; valid kernels: .*flydsl_vector_add"):
        registry.get_case("nope")
    with pytest.raises(FlybenchError, match="unknown target 'gfx90a'; valid targets: gfx942, gfx950, sm_90"):
        registry.check_arch("gfx90a")
    assert registry.get_case("flash_attn_gfx950:causal").arches == ("gfx950",)


def test_unavailable_and_not_applicable_are_decided_without_compiling(tmp_path, monkeypatch):
    monkeypatch.setenv(envvars.COMPILE_CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv(envvars.FLYDSL_SRC, raising=False)
    gfx950_only = registry.get_case("flash_attn_gfx950:causal")
    generic = registry.get_case("preshuffle_gemm:fp8_decode")
    no_src, na, bad_target = runner.measure([(generic, "gfx942"), (gfx950_only, "gfx942"), (generic, "gfx90a")])
    assert (no_src.status, no_src.reason) == ("unavailable", runner.NO_CHECKOUT)
    assert na.status == "not_applicable" and "needs gfx950's ds_read_b64_tr" in na.reason
    assert bad_target.status == "failed" and "known targets: gfx942, gfx950, sm_90" in bad_target.reason
    [wrong] = runner.measure([(generic, "gfx942")], checkout=tmp_path)
    assert wrong.status == "unavailable" and f"{tmp_path.resolve()} is not a FlyDSL source checkout" in wrong.reason
    (tmp_path / "kernels").mkdir()
    [missing] = runner.measure([(generic, "gfx942")], checkout=tmp_path)
    assert "kernels/gemm/preshuffle_gemm.py does not exist in the checkout" in missing.reason
    [flydsl_on_nvidia] = runner.measure([(registry.get_case("flydsl_vector_add"), "sm_90")])
    assert flydsl_on_nvidia.status == "not_applicable" and "AMDGPU code only" in flydsl_on_nvidia.reason


def test_pypi_toolkit_links_with_ziglang_lld(tmp_path, monkeypatch):
    monkeypatch.delenv("ROCM_PATH", raising=False)
    toolkit = toolchain.provision(tmp_path)
    assert toolkit.usable and toolkit.origin == "pypi" and toolkit.problems == ()
    assert "LLD" in toolchain.lld_version(toolkit.root)
    assert all((toolkit.root / "amdgcn" / "bitcode" / f).stat().st_size > 0 for f in ("ocml.bc", "ockl.bc"))
    assert toolchain.provision(tmp_path).root == toolkit.root  # laid out once, found again


def test_cache_keys_and_round_trip(tmp_path):
    key = cache.make_key("k", "gfx942", {"tile": 64}, "src1", {"flydsl": "0.5.0"})
    assert len({key, cache.make_key("k", "gfx950", {"tile": 64}, "src1", {"flydsl": "0.5.0"}),
                cache.make_key("k", "gfx942", {"tile": 128}, "src1", {"flydsl": "0.5.0"}),
                cache.make_key("k", "gfx942", {"tile": 64}, "src2", {"flydsl": "0.5.0"}),
                cache.make_key("k", "gfx942", {"tile": 64}, "src1", {"flydsl": "0.4.2"})}) == 5
    record = CompileRecord("flash_attn_generic:causal_m128", "gfx942", "failed", "boom", key=key)
    directory = cache.store(tmp_path, record, {"kernel.s": "s_endpgm\n"})
    assert directory.name == key[:16] and (directory / "kernel.s").read_text() == "s_endpgm\n"
    assert cache.load(tmp_path, record.kernel, "gfx942", key) == record
    assert cache.load(tmp_path, record.kernel, "gfx942", "0" * 64) is None


def test_dynamic_lds_is_read_from_the_launch():
    from flybench.compile.amd import dynamic_lds_from_mlir

    ir = ("    %c2048_i32 = arith.constant 2048 : i32\n"
          "    %4 = gpu.launch_func async [%arg4] @kernels::@attn_0 blocks in (%3, %c1, %c1) threads in (%c256, %c1, "
          "%c1) dynamic_shared_memory_size %c2048_i32 args(%arg0 : !llvm.ptr<1>)\n"
          "    %5 = gpu.launch_func async [%4] @kernels::@other_0 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) "
          "dynamic_shared_memory_size %n args(%arg0 : !llvm.ptr<1>)\n")
    assert dynamic_lds_from_mlir(ir) == {"attn_0": 2048}  # a size computed at run time is not a constant
