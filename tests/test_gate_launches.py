"""The gate times what compiled differently: a case whose changed files are kernel code is timed only when its
launches' machine code, launch configuration or arguments differ at base and head; the report says why for each
case; records that could steer git or the selection are ignored and named; the budget is a ceiling on the whole
run; compiles of the Triton kernels do not grow with shapes. Cross-compiles for sm_90 on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from flybench.case_selection import COMPILED_IDENTICALLY, NOTHING_CHANGED, Chosen, narrow
from flybench.cli import main
from flybench.compile import affected, case_launches
from flybench.compile.isa import code_lines
from flybench.regress.compare import Comparison
from flybench.regress.report import headline
from flybench.rounds import Selection, run_rounds
from studies import gate_study

MOE = "flybench/kernels/triton/moe.py"


@pytest.fixture(scope="module")
def subject(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This project's files as a repository with the study's heads: `comment` (a comment inside a diffusion-attention
    kernel), `retune` (sm_90 bf16 MoE bucket 2 num_stages 4 -> 3, bucket 3 BLOCK_N 128 -> 64), `family` (a comment
    at the end of the Triton MoE module)."""
    root = tmp_path_factory.mktemp("subject") / "repo"
    gate_study.prepare(root)
    return root


def _dry_run(subject: Path, head: str, work: Path, capsys, *extra: str) -> list[str]:
    assert main(["gate", "base", head, "--repo", str(subject), "--dry-run", "--no-compile", "--arch", "sm_90",
                 "--workdir", str(work), "--cache", str(work.parent / "cache"), *extra]) == 0
    return capsys.readouterr().out.splitlines()


def _line(lines: list[str], start: str) -> str:
    (found,) = [line for line in lines if line.startswith(start)]
    return found


def test_a_comment_in_a_triton_kernel_times_nothing_and_says_why(subject: Path, tmp_path: Path, capsys) -> None:
    """The comment sits inside a @triton.jit helper: the file reaches every diffusion-attention case of the Triton
    kernels, each compiles to the same code at both sides, so none is timed, and the headline says so."""
    lines = _dry_run(subject, "comment", tmp_path / "w", capsys, "-w", "diffusion_attention", "-p", "triton",
                     "-d", "bf16", "--set", "tiny")
    assert _line(lines, "timing selection: ") == f"timing selection: none of the 5 cases in 1 workload/provider pair: " \
                                                 f"{NOTHING_CHANGED}"
    assert "diffusion_attention/triton (5 of 5 cases, by static imports: " \
           "flybench/kernels/triton/diffusion_attention.py)" in _line(lines, "changed files reach 5 cases: ")
    assert _line(lines, "not timed (5 cases), ").startswith(f"not timed (5 cases), {COMPILED_IDENTICALLY}: "
                                                            "diffusion_attention/triton bf16 (")
    assert f"timing: not measured ({NOTHING_CHANGED})" in lines
    assert not any(line.startswith("timed: ") for line in lines)


def test_a_config_retune_times_the_cases_whose_kernels_changed(subject: Path, tmp_path: Path, capsys) -> None:
    """Bucket 2 (129-1024 tokens) loses a pipeline stage: mixtral t1024 is timed, and says which kernels and
    why; mixtral t16 (bucket 0) compiled identically and is not; the XLA baseline loads no changed file."""
    lines = _dry_run(subject, "retune", tmp_path / "w", capsys, "-w", "moe", "-p", "triton", "-p", "xla",
                     "-d", "bf16", "-c", "mixtral8x7b-t16", "-c", "mixtral8x7b-t1024")
    assert _line(lines, "timing selection: ") == ("timing selection: 1 of 4 cases in 2 workload/provider pairs: "
                                                  "moe/triton (1 of 2 cases)")
    assert not any(line.startswith("timed: ") for line in lines)  # it cannot run on this CPU machine: never "timed"
    assert _line(lines, "chosen, cannot run here: ") == (
        "chosen, cannot run here: moe/triton mixtral8x7b-t1024 bf16: machine code of moe_gate_up changed "
        "(num_stages 4 -> 3); machine code of moe_down changed (num_stages 4 -> 3)")
    assert _line(lines, "not timed (1 case), ") == (f"not timed (1 case), {COMPILED_IDENTICALLY}: moe/triton bf16 "
                                                    "(mixtral8x7b-t16)")
    assert "left out, none of their cases loads a changed file: moe/xla" in lines


def test_host_code_and_kernel_code_are_told_apart() -> None:
    """A comment or a docstring changes nothing; a kernel body's change is kernel code, judged by compiling; a
    change to the host code beside the kernels (how a plan fills its buffers) is host code, timed by the file."""
    before = Path(MOE).read_text()
    commented = before.replace("    pid = tl.program_id(0)\n", "    # which program\n    pid = tl.program_id(0)\n", 1)
    kernel = before.replace("h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u", "h = acc_g * acc_u", 1)
    host = before.replace("buffer.fill_(value)", "buffer.zero_()", 1)
    assert commented != before and kernel != before and host != before
    assert case_launches.normalized_source(commented) == case_launches.normalized_source(before)
    assert affected.kernel_code_only(MOE, before, kernel)
    assert not affected.kernel_code_only(MOE, before, host)
    assert affected.kernel_code_only(affected.KERNEL_CONFIGURATION, "TABLE = {}", "TABLE = {'sm_90': {}}")
    assert not affected.kernel_code_only("flybench/providers/triton.py", before, before)  # not the kernel package
    assert not affected.kernel_code_only(MOE, None, before)  # a module added or removed is host code


def _launch(kernel: str, key: str, constants: dict, grid=(8,), arguments=None, status="ok") -> dict:
    compiled = {"status": status, "num_warps": 4, "num_stages": constants.get("num_stages", 3), "shared": 1024}
    if status != "ok":
        compiled = {"status": status, "reason": "RuntimeError: PassManager::run failed"}
    return {"kernel": kernel, "grid": list(grid), "options": {}, "constants": constants, "key": key,
            "arguments": arguments or {"pairs": 32}, "compiled": compiled}


def _cache_entry(cache: Path, key: str, listing: str) -> None:
    """A compile as `side_launches` caches it: the listing, and its entry naming the key and the listing's digest."""
    import hashlib

    (cache / f"{key}.code").write_text(listing)
    (cache / f"{key}.json").write_text(json.dumps({"status": "ok", "key": key, "num_warps": 4, "num_stages": 3,
                                                   "shared": 1024,
                                                   "code_sha256": hashlib.sha256(listing.encode()).hexdigest()}))


def test_launches_are_compared_by_code_then_configuration_then_arguments(tmp_path: Path) -> None:
    _cache_entry(tmp_path, "a", ".visible .entry k()\n{\n\tret;\n}\n.loc 1 10 2\n")
    _cache_entry(tmp_path, "b", ".visible .entry k()\n{\n\tret;\n}\n.loc 1 12 2\n")  # only a line moved
    _cache_entry(tmp_path, "c", ".visible .entry k()\n{\n\tbar.sync 0;\n\tret;\n}\n")
    base = [_launch("moe_gate_up", "a", {"BLOCK_N": 128})]
    assert case_launches.compare(base, base, tmp_path, code_lines) == []
    assert case_launches.compare(base, [_launch("moe_gate_up", "b", {"BLOCK_N": 128})], tmp_path, code_lines) == []
    assert case_launches.compare(base, [_launch("moe_gate_up", "c", {"BLOCK_N": 64})], tmp_path, code_lines) == [
        "machine code of moe_gate_up changed (BLOCK_N 128 -> 64)"]
    assert case_launches.compare(base, [_launch("moe_gate_up", "a", {"BLOCK_N": 128}, grid=(16,))], tmp_path,
                                 code_lines) == ["launch configuration of moe_gate_up changed (grid 8 -> 16)"]
    assert case_launches.compare(base, [_launch("moe_gate_up", "a", {"BLOCK_N": 128}, arguments={"pairs": 64})],
                                 tmp_path, code_lines) == ["arguments of moe_gate_up changed (pairs 32 -> 64)"]
    broken = case_launches.compare(base, [_launch("moe_gate_up", "d", {"BLOCK_N": 128}, status="failed")], tmp_path,
                                   code_lines)
    assert broken == ["moe_gate_up failed to compile at head: RuntimeError: PassManager::run failed"]
    assert case_launches.compare(base, {"error": "its launches could not be planned on sm_90: KeyError: 'x'"},
                                 tmp_path, code_lines) == [
        "at head, its launches could not be planned on sm_90: KeyError: 'x'"]


def test_narrow_times_host_changes_and_changed_launches_and_names_the_rest() -> None:
    keys = [("moe", "t16", "triton", "bf16"), ("moe", "t1024", "triton", "bf16"), ("moe", "t16", "xla", "bf16"),
            ("moe", "t16", "torch", "bf16")]
    chosen = Chosen(keys, [], {k: "static imports" for k in keys},
                    why={keys[0]: [MOE], keys[1]: [MOE], keys[2]: [MOE], keys[3]: [MOE, "flybench/providers/torch_ops.py"]})
    compared = {}

    def compare(pending):
        compared["keys"] = pending
        return {keys[0]: [], keys[1]: ["machine code of moe_down changed (num_stages 4 -> 3)"]}

    found = narrow(chosen, lambda path: path == MOE, lambda w, p: p == "triton", compare)
    assert compared["keys"] == keys[:2]  # only the cases that launch the project's kernels are compiled
    assert found.selected == [keys[1], keys[3]]
    assert found.timed[keys[3]] == ["host code changed: flybench/providers/torch_ops.py"]
    assert found.untimed == {keys[0]: COMPILED_IDENTICALLY, keys[2]: case_launches_none()}
    assert not found.nothing_changed


def case_launches_none() -> str:
    from flybench.case_selection import LAUNCHES_NONE

    return LAUNCHES_NONE


def test_a_gate_that_times_nothing_on_purpose_says_why_in_its_headline() -> None:
    comparison = Comparison("m", "a" * 40, "b" * 40, 0.001, unmeasured=NOTHING_CHANGED)
    assert headline(comparison).startswith(f"nothing measured: {NOTHING_CHANGED}; ")
    assert headline(Comparison("m", "a" * 40, "b" * 40, 0.001)).startswith("nothing measured; ")


def _record(case: str, commit: str, loaded) -> str:
    return json.dumps({"run_id": "r", "workload": "moe", "shape_set": "tiny", "case": case, "provider": "triton",
                       "dtype": "bf16", "status": "ok", "commit": commit, "loaded": loaded, "version": 2}) + "\n"


def test_records_that_could_steer_git_or_the_selection_are_ignored_and_named(subject: Path, tmp_path: Path,
                                                                           capsys) -> None:
    """A record whose commit is `--output=PATH` never reaches git (PATH is not written); records whose `loaded`
    is empty, absolute or climbs out of the repository deselect nothing: each is named and ignored, and the
    cases they name are selected by their static imports."""
    base = subprocess.run(["git", "-C", str(subject), "rev-parse", "base"], capture_output=True, text=True,
                          check=True).stdout.strip()
    target = tmp_path / "overwritten"
    cases = ["tiny-h128-i64-e8k2-t7", "tiny-h64-i32-e16k4-t1", "tiny-h64-i48-e16k4-t33", "tiny-h64-i32-e4k2-t20"]
    records = tmp_path / "records.cases.jsonl"
    records.write_text(_record(cases[0], f"--output={target}", ["flybench/providers/xla.py"])
                       + _record(cases[1], base, []) + _record(cases[2], base, ["/etc/passwd"])
                       + _record(cases[3], base, ["../outside.py"]))
    lines = _dry_run(subject, "family", tmp_path / "w", capsys, "-w", "moe", "-p", "triton", "-d", "bf16",
                     "--set", "tiny", "--records", str(records))
    assert not target.exists()
    ignored = _line(lines, "case records ignored (4)")
    assert f"{cases[0]} bf16 (its commit '--output={target}' is not a commit of the repository)" in ignored
    assert f"{cases[1]} bf16 (its loaded files '[]' are not a non-empty list of repository paths)" in ignored
    assert "'/etc/passwd' is not a path inside the repository" in ignored and ignored.endswith("; and 1 more")
    assert "by static imports for 4 (no usable record)" in _line(lines, "selected by what each case loaded")


def test_records_that_are_no_regular_file_are_refused_not_read(subject: Path, tmp_path: Path, capsys) -> None:
    """Reading a FIFO waits for a writer for ever: `--records FIFO` is bad input, and one inside a results tree
    is named and passed over."""
    fifo = tmp_path / "records.cases.jsonl"
    os.mkfifo(fifo)
    assert main(["gate", "base", "family", "--repo", str(subject), "--set", "tiny", "--dry-run", "--no-compile",
                 "--workdir", str(tmp_path / "w"), "--records", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert f"--records {fifo} is neither a regular file nor a folder" in err and "Traceback" not in err
    tree = tmp_path / "tree" / "machine"
    tree.mkdir(parents=True)
    os.mkfifo(tree / "x.cases.jsonl")
    lines = _dry_run(subject, "family", tmp_path / "t", capsys, "-w", "moe", "-p", "triton", "-d", "bf16",
                     "--set", "tiny", "-c", "tiny-h64-i32-e16k4-t1", "--records", str(tmp_path / "tree"))
    assert "x.cases.jsonl: not a regular file, not read" in _line(lines, "case records ignored (1)")


def test_all_cases_dry_run_names_what_cannot_run_here(subject: Path, tmp_path: Path, capsys) -> None:
    lines = _dry_run(subject, "family", tmp_path / "w", capsys, "-w", "moe", "-p", "triton", "-d", "bf16",
                     "--set", "tiny", "--all-cases")
    assert "timing selection: every case the filters name (--all-cases), whatever the change" in lines
    assert _line(lines, "named but cannot run on this machine: ").startswith(
        "named but cannot run on this machine: moe/triton bf16 (the triton provider needs an NVIDIA or AMD GPU")


def test_the_budget_is_a_ceiling_on_the_whole_run_initial_rounds_included() -> None:
    """The first round always runs; a later one starts only if it would end within the budget, counted from the
    gate's start (its selection's compiles included)."""
    now = [100.0]
    measured = []

    def measure(side: str, selections: list[Selection]) -> None:
        measured.append(side)
        now[0] += 60.0  # a process a side: a round takes two minutes

    schedule = run_rounds([Selection("moe", ("triton",), ("bf16",), ("t16",))], measure, lambda: [], initial=3,
                          cap=8, budget_s=300.0, clock=lambda: now[0], started=40.0)
    assert len(schedule.rounds) == 2 and len(measured) == 4  # 60 s of selection + 2 rounds; a third would end at 420 s
    assert schedule.stopped == "round 3 of 3 (about 2.0 min) would not fit in the budget"
    lines = schedule.summary(300.0, 8, now[0] - 40.0)
    assert lines[-1] == ("round 3 of 3 (about 2.0 min) would not fit in the budget; 4.0 min of rounds, 5.0 min in "
                         "all of a 5.0 min budget, at most 8 rounds a case")


def test_compiles_do_not_grow_with_shapes() -> None:
    """Sizes and strides are run-time values: contexts from 4,096 to 8,192 tokens (in steps of 64) and batches of 1
    to 64 compile 3 diffusion-attention kernels each (with the strides as constants, 66 and 72), and the full set
    compiles no more than it did before strides were constants (134 on gfx942) plus 10%."""
    from flybench.kernels.triton import cases, specs
    from flybench.workloads import get_workload

    reference = get_workload("diffusion_attention").cases("quick")[0]

    def compiles(shapes: list[dict]) -> int:
        found = set()
        for shape in shapes:
            case = replace(reference, shape={**reference.shape, **shape})
            plan = cases.build(case, "bf16", cases.meta_inputs(case, "bf16", "sm_90"), "sm_90")
            for launch in plan.launches:
                spec = specs.KernelSpec(launch.name, launch.kernel, *specs.specialize(launch, "cuda"), launch.options)
                found.add(spec.key())
        return len(found)

    batch = reference.shape["batch"]
    assert compiles([{"context_lens": (n,) * batch} for n in range(4096, 8193, 64)]) <= 4
    assert compiles([{"batch": b, "context_lens": (4096,) * b} for b in range(1, 65)]) <= 4
    assert len(specs.kernel_specs("gfx942", "full")) <= 147


def test_drift_controls_join_only_the_workloads_with_a_timed_subject() -> None:
    """A change that reaches moe and diffusion attention but alters only the MoE's kernels measures the XLA
    baseline of the MoE, over the MoE's timed cases, and no diffusion-attention case at all."""
    from flybench.cli.gate import _measured
    from flybench.regress.config import RegressConfig
    from flybench.selection import Choice

    timed = ("moe", "t1024", "triton", "bf16")
    untimed = ("diffusion_attention", "b8", "triton", "bf16")
    chosen = Chosen([timed], [untimed], {timed: "static imports", untimed: "static imports"},
                    why={timed: [MOE], untimed: [MOE]}, timed={timed: ["machine code of moe_down changed"]},
                    untimed={untimed: COMPILED_IDENTICALLY})
    runnable = [Choice(w, p, "bf16", None) for w in ("moe", "diffusion_attention") for p in ("triton", "xla")]
    selections, subjects = _measured(chosen, runnable, RegressConfig(control_providers=frozenset({"xla"})))
    assert subjects == frozenset({"triton"})
    assert selections == [Selection("moe", ("triton", "xla"), ("bf16",), ("t1024",))]


def test_a_damaged_compile_cache_is_compiled_again_never_read_as_the_same_code(tmp_path: Path) -> None:
    """A pruned cache (entries without their listings), one whose listings are all one file, a listing from another
    key and a FIFO named like a listing: none of them vouches for a compile, so it is compiled again, and two
    launches whose listings are gone are never 'compiled identically' (exit 0 with nothing timed)."""
    cache = tmp_path / "case-compiles"
    cache.mkdir()
    _cache_entry(cache, "a", ".visible .entry k()\n{\n\tret;\n}\n")
    _cache_entry(cache, "b", ".visible .entry k()\n{\n\tbar.sync 0;\n\tret;\n}\n")
    assert case_launches.cached(cache, "a")["status"] == "ok"
    before, after = [_launch("moe_gate_up", "a", {"BLOCK_N": 128})], [_launch("moe_gate_up", "b", {"BLOCK_N": 64})]
    (cache / "a.code").unlink()
    (cache / "b.code").unlink()  # pruned
    assert case_launches.cached(cache, "a") is None
    assert case_launches.compare(before, after, cache, code_lines) == [
        f"machine code of moe_gate_up could not be read back from the compile cache {cache}: not known to be the same"]
    (cache / "a.code").write_text("same file\n")
    (cache / "b.code").write_text("same file\n")  # every listing one file: not the listings their entries wrote
    assert case_launches.cached(cache, "a") is None and case_launches.cached(cache, "b") is None
    assert case_launches.compare(before, after, cache, code_lines) != []
    (cache / "b.json").write_text((cache / "a.json").read_text())  # another key's entry
    assert case_launches.cached(cache, "b") is None
    (cache / "a.code").unlink()
    os.mkfifo(cache / "a.code")  # read, it would block the gate for ever
    assert case_launches.cached(cache, "a") is None
    case_launches._replace(cache / "a.code", "rewritten\n")  # a FIFO in the way is replaced, never opened
    assert (cache / "a.code").is_file() and (cache / "a.code").read_text() == "rewritten\n"
    os.mkfifo(cache / "c.json")
    assert case_launches.cached(cache, "c") is None


def test_only_tritons_own_decorators_make_kernel_code() -> None:
    """A host helper under `@torch.jit.ignore` that makes 50 extra passes per call is host code (timed by its file);
    a body under `@triton.autotune` and `@triton.jit` is kernel code (judged by compiling)."""
    host = "import torch\n\n@torch.jit.ignore\ndef passes(x):\n    return x\n"
    slower = host.replace("return x", "for _ in range(50):\n        x = x + 0\n    return x")
    assert not affected.kernel_code_only("flybench/kernels/triton/helpers.py", host, slower)
    kernel = ("import triton\n\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    y = x\n\n"
              "@triton.heuristics({})\ndef h(x):\n    y = x\n")
    changed = kernel.replace("    y = x\n", "    y = x + 1\n")
    assert affected.kernel_code_only("flybench/kernels/triton/helpers.py", kernel, changed)


def test_the_compile_key_covers_every_project_module_the_kernel_reaches(tmp_path: Path) -> None:
    """A `@triton.jit` helper in a subpackage of the kernel package, imported by the kernel's module, changes the
    key of its compiles (head was once served base's compile: 716 lines of PTX where its own had 2,312); a
    comment there changes nothing."""
    package = tmp_path / "flybench" / "kernels" / "triton"
    (package / "sub").mkdir(parents=True)
    for init in (tmp_path / "flybench", tmp_path / "flybench" / "kernels", package, package / "sub"):
        (init / "__init__.py").write_text("")
    (package / "k.py").write_text("from flybench.kernels.triton.sub.helpers import helper\n")
    helpers = package / "sub" / "helpers.py"
    helpers.write_text("import triton\n\n@triton.jit\ndef helper(x):\n    return x\n")
    first = case_launches.reached_digest(str(package / "k.py"))
    helpers.write_text("import triton\n\n@triton.jit\ndef helper(x):\n    # the same\n    return x\n")
    assert case_launches.reached_digest(str(package / "k.py")) == first
    helpers.write_text("import triton\n\n@triton.jit\ndef helper(x):\n    return x * 2\n")
    assert case_launches.reached_digest(str(package / "k.py")) != first


def test_without_triton_the_launches_are_said_not_compiled_and_the_cases_selected_by_files(
        subject: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """The README's main install has no Triton: the gate said 'the launches of 28 cases compiled at both sides'
    and timed them on ModuleNotFoundErrors. Now it says they could not be compiled, and selects by files."""
    monkeypatch.setattr(case_launches, "cannot_compile", lambda: "Triton is not installed here")
    assert main(["gate", "base", "retune", "--repo", str(subject), "--dry-run", "--no-compile", "--arch", "sm_90",
                 "--workdir", str(tmp_path / "w"), "-w", "moe", "-p", "triton", "-d", "bf16",
                 "-c", "mixtral8x7b-t16"]) == 0
    captured = capsys.readouterr()
    assert "could not be compiled: Triton is not installed here; they are selected by their files" in captured.err
    assert "compiled at both sides" not in captured.err and "ModuleNotFoundError" not in captured.out
    assert _line(captured.out.splitlines(), "chosen, cannot run here: moe/triton mixtral8x7b-t16 bf16: ").endswith(
        "selected by its files: its launches could not be compiled (Triton is not installed here)")


def test_a_cache_that_cannot_be_written_is_said_and_done_without(tmp_path: Path) -> None:
    from flybench.cli.gate import _cache_folder

    (tmp_path / "file").write_text("")
    folder, said = _cache_folder(tmp_path / "file" / "cache", tmp_path / "work")
    assert folder == tmp_path / "work"
    assert said.startswith(f"the cache {tmp_path / 'file' / 'cache'} cannot be written (")
    assert said.endswith(f"the gate goes on without it, keeping this run's compiles in the work folder "
                         f"{tmp_path / 'work'}")
    assert _cache_folder(tmp_path / "fine", tmp_path / "work") == (tmp_path / "fine", "")


def test_records_whose_loaded_files_are_not_the_cases_repository_files_are_ignored(
        subject: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """`./flybench/...`, 300,000 made-up paths and another case's files once steered the selection and left out the
    case whose provider changed: each such record is named and ignored, and its case selected by static imports."""
    monkeypatch.setattr(case_launches, "cannot_compile", lambda: "not compiled in this test")
    base = subprocess.run(["git", "-C", str(subject), "rev-parse", "base"], capture_output=True, text=True,
                          check=True).stdout.strip()
    own = ["flybench/providers/triton.py", "flybench/workloads/moe.py"]
    cases = ["tiny-h64-i32-e16k4-t1", "tiny-h128-i64-e8k2-t7", "tiny-h64-i48-e16k4-t33"]
    records = tmp_path / "records.cases.jsonl"
    records.write_text(_record(cases[0], base, ["./" + MOE, *own])
                       + _record(cases[1], base, [*own, *(f"flybench/made/up{i}.py" for i in range(300_000))])
                       + _record(cases[2], base, ["flybench/providers/xla.py", "flybench/workloads/moe.py"]))
    lines = _dry_run(subject, "family", tmp_path / "w", capsys, "-w", "moe", "-p", "triton", "-d", "bf16",
                     "--set", "tiny", "--records", str(records))
    ignored = _line(lines, "case records ignored (3)")
    assert f"{cases[0]} bf16 (its loaded file './{MOE}' is not a path inside the repository)" in ignored
    assert (f"{cases[1]} bf16 (its loaded file 'flybench/made/up0.py' and 299999 more is no file of the repository "
            "at the base)") in ignored
    assert f"{cases[2]} bf16 (its loaded files lack its own flybench/providers/triton.py" in ignored
    reached = _line(lines, "changed files reach ")
    assert "moe/triton (" in reached and "by static imports" in reached
    assert "by case records" not in reached


def test_the_repositorys_older_records_are_named_once_in_one_short_line(subject: Path, tmp_path: Path, capsys,
                                                                        monkeypatch) -> None:
    """Records written before cases listed their loaded files (the repository's own committed results) select
    nothing and are no cause for suspicion: one short line counts them (it once printed 409 of them as 'could
    steer the selection', in a line of 2,436 characters)."""
    monkeypatch.setattr(case_launches, "cannot_compile", lambda: "not compiled in this test")
    old = json.loads(_record("tiny-h64-i32-e16k4-t1", "0" * 40, []))
    del old["loaded"]
    records = tmp_path / "records.cases.jsonl"
    records.write_text((json.dumps(old) + "\n") * 409)
    lines = _dry_run(subject, "family", tmp_path / "w", capsys, "-w", "moe", "-p", "triton", "-d", "bf16",
                     "--set", "tiny", "--records", str(records))
    assert "409 case records older than the loaded files they would list: not used" in lines
    assert not any(line.startswith("case records ignored") for line in lines)


def test_the_model_lane_is_reached_through_the_kernels_it_launches() -> None:
    """A change to `moe_gate_up`'s body once left `mixtral_step/jax-triton`, which runs that kernel, out ('none of the
    3 cases ... loads a changed file'): the static reading does not follow a module named after another workload.
    The pair's launches name the MoE kernels' modules; the XLA step launches none."""
    from flybench.cli.gate import launched_files

    files = launched_files("mixtral_step", "jax-triton", "tiny", ["bf16"])
    assert {MOE, "flybench/kernels/triton/moe_routing.py"} <= files
    assert not affected.case_files(Path("."), "mixtral_step", "jax-triton") >= {MOE}  # what the static reading misses
    assert launched_files("mixtral_step", "xla", "tiny", ["bf16"]) == set()
