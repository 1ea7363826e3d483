"""FlyDSL's cases in the gate: timed only when one of their registered kernels' machine code or launch
configuration differs at base and head (`case_selection.narrow_by_code`), a compiler change included; what the
compile cannot carry (the compiler's C++) is timed and says why. The comparison of two compile records
(`gate._differs`) on real ISA files in a compile cache folder."""

from __future__ import annotations

from pathlib import Path

from flybench import case_selection
from flybench.case_selection import COMPILED_IDENTICALLY, IMPORTS, Chosen, narrow_by_code
from flybench.cli import gate
from flybench.compile.cache import entry_dir
from flybench.providers import get_provider
from flybench.workloads import get_workload

ATTENTION = ("attention", "a", "flydsl", "bf16")
MOE = ("moe", "m", "flydsl", "fp8")
A16 = ("moe", "m", "flydsl", "int4_bf16")
A8W4 = ("moe_stage", "s", "flydsl", "a8w4")
KERNELS = {ATTENTION: ["flash_attn_generic:causal_m128", "flash_attn_gfx950:causal"],
           MOE: ["moe_gemm_2stage:stage1_decode"], A16: [], A8W4: []}
def launches(key: tuple) -> bool:
    """flydsl's entry points: none for a8w4."""
    return key[3] != "a8w4"


def narrow(selected: Chosen, compare, unjudged: list[str] | None = None) -> Chosen:
    return narrow_by_code(selected, KERNELS.__getitem__, compare, unjudged or [], REGISTERED.__contains__, launches)


REGISTERED = {"kernels/attention/flash_attn_generic.py", "kernels/attention/flash_attn_gfx950.py",
              "kernels/moe/moe_gemm_2stage.py"}


def chosen(shared: list[str], why: dict | None = None) -> Chosen:
    keys = sorted(KERNELS)
    return Chosen(keys if shared else sorted(why or {}), [], {k: IMPORTS for k in keys}, why or {}, shared)


def test_a_compiler_change_times_only_the_cases_whose_kernels_changed() -> None:
    asked = []

    def compare(kernels: list[str]) -> dict[str, list[str]]:
        asked.append(kernels)
        return {"flash_attn_gfx950:causal": ["machine code changed on gfx950"]}

    narrowed = narrow(chosen(["python/flydsl/expr/typing.py"]), compare)
    assert asked == [["flash_attn_generic:causal_m128", "flash_attn_gfx950:causal", "moe_gemm_2stage:stage1_decode"]]
    assert narrowed.selected == [ATTENTION, A16]  # A16: no registered kernel, so nothing proves it unchanged
    assert narrowed.untimed[A8W4] == case_selection.LAUNCHES_NOTHING  # flydsl launches nothing for a8w4
    assert narrowed.timed[ATTENTION] == ["flash_attn_gfx950:causal: machine code changed on gfx950"]
    assert "no registered kernel" in narrowed.timed[A16][0]
    assert narrowed.untimed[MOE] == COMPILED_IDENTICALLY and MOE in narrowed.left_out
    lines = narrowed.lines()
    assert lines[0].startswith("timing selection: 2 of 4 cases") and "shared code changed" not in "".join(lines)
    assert any(line.startswith("not timed (1 case), compiled identically at base and head") for line in lines)


def test_nothing_that_changed_code_times_nothing() -> None:
    why = {MOE: ["kernels/moe/moe_gemm_2stage.py"]}
    narrowed = narrow(chosen([], why), lambda kernels: {})
    assert narrowed.selected == [] and narrowed.nothing_changed
    assert narrowed.lines()[0] == ("timing selection: none of the 1 case in 1 workload/provider pair: "
                                   f"{case_selection.NOTHING_CHANGED}")


def test_a_changed_file_that_builds_none_of_the_cases_registered_kernels_is_timed() -> None:
    why = {ATTENTION: ["kernels/attention/flash_attn_paged.py"]}  # the paged kernel is not registered
    narrowed = narrow(chosen([], why), lambda kernels: {})
    assert narrowed.selected == [ATTENTION] and "kernels/attention/flash_attn_paged.py" in narrowed.timed[ATTENTION][0]


def test_a_change_to_the_compilers_cxx_is_timed_not_judged() -> None:
    def compare(kernels: list[str]) -> dict[str, list[str]]:
        raise AssertionError("nothing is compiled: the overlay cannot carry lib/")

    narrowed = narrow(chosen(["lib/Dialect/Fly/X.cpp"]), compare, ["lib/Dialect/Fly/X.cpp"])
    assert narrowed.selected == sorted(set(KERNELS) - {A8W4})
    assert all("lib/Dialect/Fly/X.cpp" in reasons[0] for reasons in narrowed.timed.values())


def test_the_changed_files_that_an_overlay_cannot_carry() -> None:
    assert gate._beyond_overlay(["lib/a.cpp", "include/b.h", "CMakeLists.txt", "python/flydsl/c.py",
                                 "kernels/d.py", "README.md"]) == ["lib/a.cpp", "include/b.h", "CMakeLists.txt"]


def _record(cache: Path, arch: str, key: str, isa: str, **metrics: int) -> dict:
    folder = entry_dir(cache / "compile-cache", "k:x", arch, key)
    folder.mkdir(parents=True)
    (folder / "kernel.s").write_text(isa)
    return {"kernel": "k:x", "arch": arch, "status": "ok", "key": key, "isa_file": "kernel.s",
            "metrics": {"lds_static": 1024, "lds_dynamic": 0, "scratch": 0, **metrics}, "primary": "k",
            "kernels": {"k": {"workgroup_size": metrics.get("workgroup_size", 256)}}}


def test_two_compiles_differ_by_code_launch_or_a_side_that_does_not_build(tmp_path: Path) -> None:
    code = "k:\n  s_load_dword s0, s[0:1], 0x0 ; comment\n  s_endpgm\n"
    base = _record(tmp_path, "gfx950", "a" * 64, code)
    same = _record(tmp_path, "gfx950", "b" * 64, code.replace("; comment", "; another comment"))
    assert gate._differs(base, same, "gfx950", tmp_path) == []  # comments are not code
    other = _record(tmp_path, "gfx950", "c" * 64, code.replace("0x0", "0x8"), lds_static=2048, workgroup_size=512)
    assert gate._differs(base, other, "gfx950", tmp_path) == [
        "machine code changed on gfx950",
        "launch configuration changed on gfx950 (workgroup 256 -> 512, lds_static 1024 -> 2048)"]
    failed = {"kernel": "k:x", "arch": "gfx950", "status": "failed", "reason": "TypeError: x\nmore"}
    assert gate._differs(base, failed, "gfx950", tmp_path) == ["it builds on gfx950 at base only"]
    assert gate._differs(failed, failed, "gfx950", tmp_path)[0].startswith("it failed to build on gfx950 (TypeError")
    absent = {"kernel": "k:x", "arch": "gfx950", "status": "unavailable"}
    assert gate._differs(absent, absent, "gfx950", tmp_path) == []
    lost = dict(other, key="d" * 64)  # a listing missing from the cache is not equal code
    assert gate._differs(base, lost, "gfx950", tmp_path) == [
        "its machine code on gfx950 could not be read back from the compile cache"]


def test_the_flydsl_provider_names_its_entry_points_without_a_checkout() -> None:
    flydsl = get_provider("flydsl")
    stage = next(iter(get_workload("moe_stage").cases("quick")))
    assert flydsl.entry_points(stage, "fp8") == [f"kernels.moe.moe_gemm_2stage.compile_moe_gemm{stage.shape['stage']}"]
    assert flydsl.entry_points(stage, "int4_bf16")[0].startswith("tests/kernels/moe_a16wmix_host.py:")
    assert flydsl.entry_points(stage, "a8w4") == []  # no build launches it (it raised KeyError)


def test_a_registered_kernel_stands_for_the_cases_of_its_variant() -> None:
    causal = {"causal": True, "block_m": 128}
    assert gate._agrees(causal, {"causal": True, "seq": 8192})
    assert not gate._agrees(causal, {"causal": False})
    assert not gate._agrees(causal, {"mask": "bidirectional"}) and gate._agrees(causal, {"mask": "causal"})
    assert gate._agrees({"stage": 1}, {"tokens": 16}) and not gate._agrees({"stage": 1}, {"stage": 2})
