"""The FlyDSL checkout's kernels, compiled for gfx942 and gfx950 (about 4 minutes on 2 cores).

Runs only when FLYBENCH_FLYDSL_SRC names a FlyDSL source checkout: CI has
none (FlyDSL's kernels/ is not in its wheel, and flybench never vendors it).
    FLYBENCH_FLYDSL_SRC=/path/to/FlyDSL python -m pytest tests/test_compile_checkout.py
"""

import os

import pytest

from flybench import envvars
from flybench.compile import occupancy, registry, runner

pytestmark = pytest.mark.skipif(not os.environ.get(envvars.FLYDSL_SRC),
                                reason=f"set {envvars.FLYDSL_SRC} to a FlyDSL source checkout to compile its kernels")


@pytest.fixture(scope="module")
def records():
    requests = [(case, arch) for case in registry.CHECKOUT_CASES for arch in registry.AMD_ARCHES]
    return {(r.kernel, r.arch): r for r in runner.measure(requests)}


def test_every_checkout_kernel_compiles_or_is_not_applicable(records):
    for (kernel, arch), record in records.items():
        if arch not in registry.get_case(kernel).arches:
            assert record.status == "not_applicable" and "gfx950" in record.reason, (kernel, arch)
            continue
        assert record.status == "ok", (kernel, arch, record.reason)
        assert record.suspect == [], (kernel, arch, record.suspect)


def test_checkout_kernels_are_matrix_kernels_with_consistent_occupancy(records):
    for (kernel, arch), record in records.items():
        if record.status != "ok":
            continue
        m, k = record.metrics, record.kernels[record.primary]
        row_wise = registry.get_case(kernel).ci_op in ("softmax", "layernorm", "rmsnorm")  # reductions, no MFMA
        assert (m["mfma"] == 0) == row_wise, kernel
        assert m["vgprs"] > 0 and m["lds_static"] > 0 and m["code_size"] > 1000, kernel
        estimate = occupancy.estimate(arch, k["vgprs_unified"], m["sgprs"], m["lds_static"] + m["lds_dynamic"],
                                      k["workgroup_size"])
        assert m["occupancy"] == estimate.waves > 0, kernel


def test_transpose_reads_only_in_gfx950_attention(records):
    for (kernel, arch), record in records.items():
        if record.status != "ok":
            continue
        reads = record.metrics["ds_read_b64_tr"]
        if arch == "gfx942":
            assert reads == 0, kernel
        elif kernel.startswith("flash_attn"):
            assert reads > 0, kernel
