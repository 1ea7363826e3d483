"""Real compiles on this CPU: flybench's own FlyDSL kernel for gfx942/gfx950, its Triton kernels for those and sm_90.

The compiles run once per session into a shared cache directory (about 40 s
on a 2-core machine); tests/test_compile_asv.py reads the same cache.
"""

import os
from pathlib import Path

import pytest

from flybench import envvars
from flybench.compile import cache, occupancy, registry, runner
from flybench.compile.registry import KernelCase

OWN = [("flydsl_vector_add", "gfx942"), ("flydsl_vector_add", "gfx950"), ("triton_vector_add", "gfx942"),
       ("triton_vector_add", "gfx950"), ("triton_vector_add", "sm_90"), ("triton_matmul_bf16", "gfx942"),
       ("triton_matmul_bf16", "gfx950"), ("triton_matmul_bf16", "sm_90")]


def shared_cache(tmp_path_factory) -> Path:
    """One cache per test session, so the asv test reads what these tests compiled."""
    return tmp_path_factory.getbasetemp() / "compile-cache"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    previous = os.environ.get(envvars.COMPILE_CACHE)
    os.environ[envvars.COMPILE_CACHE] = str(shared_cache(tmp_path_factory))
    yield Path(os.environ[envvars.COMPILE_CACHE])
    if previous is None:
        os.environ.pop(envvars.COMPILE_CACHE)
    else:
        os.environ[envvars.COMPILE_CACHE] = previous


@pytest.fixture(scope="module")
def records(cache_dir):
    found = runner.measure([(registry.get_case(name), arch) for name, arch in OWN])
    return {(r.kernel, r.arch): r for r in found}


def _consistent_occupancy(record) -> None:
    """The stored estimate is the one the counts give, and no more than the register file allows."""
    kernel, metrics = record.kernels[record.primary], record.metrics
    expected = occupancy.estimate(record.arch, kernel["vgprs_unified"], metrics["sgprs"],
                                  metrics["lds_static"] + metrics["lds_dynamic"], kernel["workgroup_size"])
    assert metrics["occupancy"] == expected.waves > 0
    assert metrics["occupancy"] <= 512 // (-(-kernel["vgprs_unified"] // 8) * 8)


def test_every_own_kernel_compiles_without_suspicion(records):
    for key, record in records.items():
        assert record.status == "ok", (key, record.reason)
        assert record.suspect == [], (key, record.suspect)
        assert record.metrics["code_size"] > 16 and record.metrics["compile_time"] > 0


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_flydsl_vector_add_metrics(records, cache_dir, arch):
    record = records[("flydsl_vector_add", arch)]
    m = record.metrics
    assert record.primary == "vector_add_kernel_0" and record.toolchain["flydsl"] == "0.5.0"
    assert 0 < m["vgprs"] <= 32 and m["agprs"] == 0 and m["sgprs"] > 0
    assert (m["lds_static"], m["lds_dynamic"], m["scratch"], m["vgpr_spills"], m["sgpr_spills"]) == (0, 0, 0, 0, 0)
    assert (m["mfma"], m["ds_read_b64_tr"]) == (0, 0) and m["occupancy"] == 8.0
    _consistent_occupancy(record)
    isa = (cache.entry_dir(cache_dir, record.kernel, arch, record.key) / record.isa_file).read_text()
    assert f"amdgcn-amd-amdhsa--{arch}" in isa or f"unknown-{arch}" in isa
    assert isa.count("buffer_load_dwordx4") == 2 and "buffer_store_dwordx4" in isa and "amdhsa.kernels" in isa


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_triton_matmul_uses_mfma_and_gfx950_transpose_reads(records, arch):
    record = records[("triton_matmul_bf16", arch)]
    m, kernel = record.metrics, record.kernels[record.primary]
    assert m["mfma"] > 0 and all(kind.endswith("_bf16") for kind in kernel["mfma_by_kind"])
    assert (m["ds_read_b64_tr"] > 0) == (arch == "gfx950")  # transpose-on-read exists on gfx950 only
    assert m["lds_static"] == 0 and m["lds_dynamic"] > 0  # Triton passes its LDS at launch
    assert kernel["workgroup_size"] == 512 and m["vgpr_spills"] == 0
    _consistent_occupancy(record)


def test_triton_vector_add_on_amd_has_no_matrix_work(records):
    for arch in ("gfx942", "gfx950"):
        m = records[("triton_vector_add", arch)].metrics
        assert (m["mfma"], m["ds_read_b64_tr"], m["lds_dynamic"]) == (0, 0, 0) and m["vgprs"] > 0
        _consistent_occupancy(records[("triton_vector_add", arch)])


def test_triton_sm90_registers_spills_shared_memory(records):
    add, matmul = records[("triton_vector_add", "sm_90")].metrics, records[("triton_matmul_bf16", "sm_90")].metrics
    assert 0 < add["registers"] < matmul["registers"] <= 255
    assert add["smem_dynamic"] == 0 and matmul["smem_dynamic"] > 0 and matmul["spill_bytes"] == 0
    assert "vgprs" not in matmul and matmul["code_size"] > add["code_size"]


def test_second_measure_is_served_from_the_cache(records):
    again = runner.measure([(registry.get_case("flydsl_vector_add"), "gfx942")])[0]
    assert again == records[("flydsl_vector_add", "gfx942")]


def _own(name: str, entry: str, **config) -> KernelCase:
    return KernelCase(name, "flydsl", "own", entry, config)


def test_miscompiles_are_flagged(cache_dir):
    noop, tanh = runner.measure([(_own("noop", "tests/kernels/flydsl_vector_add.py:compile_noop"), "gfx942"),
                                 (_own("tanh", "tests/kernels/flydsl_vector_add.py:compile_tanh"), "gfx950")])
    assert noop.status == "ok" and noop.metrics["code_size"] == 4
    assert "bare s_endpgm" in noop.suspect[0]
    # FlyDSL 0.5.0 cannot lower fx.math.tanh for AMDGPU: LLVM prints an error, the compile still "succeeds".
    assert tanh.status == "ok" and any("no libcall available for ftanh" in s for s in tanh.suspect)


def test_failures_are_recorded_and_the_other_kernels_still_compile(cache_dir):
    cases = [_own("bug", "tests/kernels/misbehaving.py:fail", tile_k=96),
             _own("segfault", "tests/kernels/misbehaving.py:crash"),
             _own("stuck", "tests/kernels/misbehaving.py:hang", seconds=600),
             registry.get_case("flydsl_vector_add")]
    bug, segfault, stuck, good = runner.measure([(c, "gfx942") for c in cases], timeout_s=10, force=True)
    assert bug.status == "failed" and bug.reason.startswith("ValueError: tile_k must divide K")
    assert segfault.status == "failed" and "compiler process died (signal 11)" in segfault.reason
    assert stuck.status == "failed" and "did not finish within 10 s" in stuck.reason
    assert good.status == "ok" and good.metrics["vgprs"] > 0
    again = runner.measure([(cases[0], "gfx942")])[0]  # failures are cached like successes
    assert again.reason == bug.reason and again.created_at == bug.created_at
