"""`flybench gate`: the rounds' schedule, and the whole path on the CPU (worktrees, a process per side and round)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from flybench.cli import main
from flybench.compile import affected, registry
from flybench.rounds import Selection, rerun, run_rounds
from flybench.workloads import get_workload
from studies import gate_study


class Clock:
    """A clock that each measured process moves on by its cost."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_rounds_interleave_alternate_and_add_rounds_only_for_the_ambiguous() -> None:
    clock, calls = Clock(), []
    still = [[("moe", "c1", "triton", "bf16"), ("moe", "c2", "torch", "bf16")], [("moe", "c1", "triton", "bf16")], []]

    def measure(side: str, selections: list[Selection]) -> None:
        calls.append((side, selections))
        clock.now += 10

    schedule = run_rounds([Selection("moe"), Selection("attention")], measure, lambda: still.pop(0),
                          initial=3, cap=8, budget_s=3600, clock=clock)
    sides = [side for side, _ in calls]
    assert sides[:6] == ["base", "head", "head", "base", "base", "head"]  # one process a side a round, ABBA
    assert all(selections == [Selection("moe"), Selection("attention")] for _, selections in calls[:6])
    extra = [selections for _, selections in calls[6:]]
    assert extra == [[Selection("moe", ("torch", "triton"), ("bf16",), ("c1", "c2"))]] * 2 + \
                    [[Selection("moe", ("triton",), ("bf16",), ("c1",))]] * 2
    assert [r.adaptive for r in schedule.rounds] == [False] * 3 + [True] * 2
    assert schedule.stopped == "no ambiguous case that more rounds could settle" and schedule.ambiguous == []
    summary = schedule.summary(3600, 8)
    assert summary[0].startswith("3 rounds of everything selected") and "2 more rounds" in summary[1]


def test_rounds_stop_at_the_budget_and_at_the_cap() -> None:
    clock = Clock()

    def measure(side: str, selections: list[Selection]) -> None:
        clock.now += 100

    always = [("moe", "c1", "triton", "bf16")]
    short = run_rounds([Selection("moe", ("triton",), ("bf16",), ("c1",))], measure, lambda: always, initial=2,
                       cap=8, budget_s=450, clock=clock)
    assert len(short.rounds) == 2 and "would not fit in the budget" in short.stopped  # 400 s spent, 200 more
    capped = run_rounds([Selection("moe")], measure, lambda: always, initial=2, cap=4, budget_s=1e9, clock=Clock())
    assert len(capped.rounds) == 4 and capped.stopped == "1 still ambiguous at the cap of 4 rounds"
    with pytest.raises(ValueError):
        run_rounds([Selection("moe")], measure, lambda: [], initial=3, cap=2)


def test_a_rerun_covers_each_workloads_ambiguous_cases_in_one_process() -> None:
    selections = rerun([("moe", "a", "torch", "bf16"), ("attention", "b", "flex", "fp16"),
                        ("moe", "c", "triton", "bf16")])
    assert selections == [Selection("attention", ("flex",), ("fp16",), ("b",)),
                          Selection("moe", ("torch", "triton"), ("bf16",), ("a", "c"))]


@pytest.fixture(scope="module")
def subject(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of this project's files with a base commit, a docs-only head, a planted head, and a head
    that changes the Triton vector-add kernel's code."""
    root = tmp_path_factory.mktemp("subject") / "repo"
    gate_study.prepare(root)
    kernel = root / "flybench" / "compile" / "triton_kernels.py"
    old = "tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)"
    assert old in kernel.read_text()
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "-b", "kernel", "base"], check=True)
    new = "tl.load(x_ptr + offsets, mask=mask) * 2.0 + tl.load(y_ptr + offsets, mask=mask) * 3.0"  # one more FMA
    kernel.write_text(kernel.read_text().replace(old, new))
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
                    "-am", "vector add scales x and y"], check=True)
    return root


def test_the_compile_half_reports_every_resource_a_kernel_change_moved(subject: Path, tmp_path: Path) -> None:
    """What a reviewer reads: the changed kernel's resources per target, exactly, and a check that passes."""
    md = tmp_path / "gate.md"
    args = ["gate", "base", "kernel", "--repo", str(subject), "--workdir", str(tmp_path / "work"), "--no-timing",
            "-k", "triton_vector_add", "--markdown", str(md), "--json", str(tmp_path / "gate.json")]
    assert main(args) == 0
    text = md.read_text()
    assert "- timing: not measured (--no-timing)" in text
    assert "- compile: 3 kernel x target compiles a side" in text
    section = text[text.index("#### Resource changes"):]
    assert "- triton_vector_add: code bytes" in section and " on gfx942 (worse)" in section
    assert " on gfx950 " in section and " on sm_90 " in section
    assert "- machine code changed in 1 kernel: triton_vector_add (gfx942, gfx950, sm_90); ISA diffs in" in text
    diff = (tmp_path / "work" / "isa-diff" / "triton_vector_add@gfx942.diff").read_text()
    assert diff.startswith("--- base/triton_vector_add@gfx942\n+++ head/triton_vector_add@gfx942\n")
    assert ".file" not in diff and "\n+\tv_" in diff  # the code alone, each side's checkout path left out
    resources = json.loads((tmp_path / "gate.json").read_text())["resources"]
    assert {r["arch"] for r in resources} == {"gfx942", "gfx950", "sm_90"}
    assert all(r["name"] == "triton_vector_add" and r["base"] != r["head"] for r in resources)
    same = ["gate", "base", "aa", "--repo", str(subject), "--workdir", str(tmp_path / "aa"), "--no-timing",
            "-k", "triton_vector_add", "--json", str(tmp_path / "aa.json")]
    assert main(same) == 0 and json.loads((tmp_path / "aa.json").read_text())["resources"] == []
    assert not (tmp_path / "aa" / "isa-diff").exists()  # the same code at two paths is no change


def test_a_comment_in_a_kernels_module_changes_no_machine_code(subject: Path, tmp_path: Path) -> None:
    """The two sides compile from checkouts at different paths, which the debug sections name: not a change."""
    out = tmp_path / "gate.json"
    assert main(["gate", "base", "family", "--repo", str(subject), "--workdir", str(tmp_path / "work"), "--no-timing",
                 "-k", "triton_moe:down_bf16_t16", "--arch", "gfx942", "--json", str(out)]) == 0
    notes = json.loads(out.read_text())["notes"]
    assert "compile: 1 kernel x target compiles a side, 0 resource changes" in " ".join(notes)
    assert not any(n.startswith("machine code changed") for n in notes)
    assert not (tmp_path / "work" / "isa-diff").exists()


def test_the_gate_measures_both_sides_in_rounds_of_their_own_processes(subject: Path, tmp_path: Path,
                                                                       capsys) -> None:
    """On the CPU: two rounds a side of one tiny torch MoE case, each a `flybench run` of its own, judged over
    the rounds; the reports say how many rounds and what the budget bought."""
    out = tmp_path / "gate.json"
    args = ["gate", "base", "aa", "--repo", str(subject), "--workdir", str(tmp_path / "work"), "--set", "tiny",
            "-w", "moe", "-p", "torch", "-d", "bf16", "-c", "tiny-h64-i32-e16k4-t1", "--all-cases", "--rounds", "2",
            "--max-rounds", "2", "--json", str(out), "--markdown", str(tmp_path / "gate.md")]  # docs-only: --all-cases
    code = main(args)  # a busy machine can move one side's two rounds: any verdict may come, never a crash
    data = json.loads(out.read_text())
    (case,) = data["cases"]
    assert code == (1 if case["verdict"] == "regression" else 0)
    assert case["params"] == {"case": "tiny-h64-i32-e16k4-t1", "provider": "torch", "dtype": "bf16"}
    assert case["rounds"] == [2, 2] and case["verdict"] in ("unchanged", "ambiguous", "regression", "improvement")
    assert case["test"] == "welch-t (rounds)" and case["noise_source"] == "rounds"
    assert data["notes"][0].endswith(": its own worktree")  # each side's code
    assert any(n.startswith("2 rounds of everything selected, base and head interleaved") for n in data["notes"])
    text = (tmp_path / "gate.md").read_text()
    assert "- 2 rounds of everything selected, base and head interleaved" in text
    records = list((tmp_path / "work" / "head" / "results" / "flybench").glob("gate-*/*.cases.jsonl"))
    assert len(records) == 1 and len({json.loads(line)["run_id"] for line in records[0].read_text().splitlines()}) == 2
    capsys.readouterr()
    # the same pair again without --resume would count the old rounds as its own: refused, exit 2
    assert main(args) == 2
    assert "pass --resume" in capsys.readouterr().err


def test_the_gate_refuses_bad_input_before_measuring(subject: Path, tmp_path: Path, capsys) -> None:
    work = ["--repo", str(subject), "--workdir", str(tmp_path / "w"), "--set", "tiny"]
    assert main(["gate", "base", "nosuchbranch", *work]) == 2
    assert "'nosuchbranch' is not a commit of" in capsys.readouterr().err
    assert main(["gate", "base", "aa", *work, "-c", "no-such-case"]) == 2
    assert "unknown case of the tiny set 'no-such-case'" in capsys.readouterr().err
    assert main(["gate", "base", "aa", *work, "--rounds", "4", "--max-rounds", "3"]) == 2
    assert not (tmp_path / "w").exists()  # nothing was checked out or measured


def test_a_change_selects_the_kernels_built_from_its_files_and_shared_code_selects_all() -> None:
    files = {"flash_attn_generic:causal": {"kernels/attention/flash_attn_generic.py", "kernels/common/lds.py"},
             "moe_gemm_2stage:stage1": {"kernels/moe/moe_gemm_2stage.py", "kernels/common/lds.py"},
             "pa_decode_tile:bs16": {"kernels/attention/pa_decode_tile.py"}}
    one = affected.select(files, ["kernels/moe/moe_gemm_2stage.py", "README.md"], affected.flydsl_shared)
    assert one.selected == ["moe_gemm_2stage:stage1"] and len(one.left_out) == 2
    assert one.lines()[0] == ("compile selection: 1 of 3 kernels, built from changed files: moe_gemm_2stage:stage1 "
                              "(kernels/moe/moe_gemm_2stage.py)")
    common = affected.select(files, ["kernels/common/lds.py"], affected.flydsl_shared)
    assert common.selected == ["flash_attn_generic:causal", "moe_gemm_2stage:stage1"]
    assert affected.select(files, ["lib/Dialect/Fly/Utils/IntTupleUtils.cpp"], affected.flydsl_shared).shared
    assert affected.select(files, ["CMakeLists.txt"], affected.flydsl_shared).shared == ["CMakeLists.txt"]  # build
    compiler = affected.select(files, ["python/flydsl/compiler/passes.py", "docs/x.md"], affected.flydsl_shared)
    assert compiler.selected == sorted(files) and compiler.shared == ["python/flydsl/compiler/passes.py"]
    assert "shared code changed (python/flydsl/compiler/passes.py)" in compiler.lines()[0]
    docs = affected.select(files, ["docs/kernels.md", "tests/test_moe.py", "kernels/unused_new.py",
                                   "scripts/bench_rdna3_gemm_compare.py", "CLAUDE.md"], affected.flydsl_shared)
    assert docs.selected == [] and docs.lines() == ["compile selection: none of 3 kernels is built from a changed file"]
    assert affected.select(files, ["flybench/compile/runner.py"], affected.flybench_shared).shared


def test_a_docs_only_pull_request_compiles_nothing(subject: Path, tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    assert main(["gate", "base", "aa", "--repo", str(subject), "--workdir", str(tmp_path / "work"), "--no-timing",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    own = sum(case.origin == "own" for case in registry.CASES.values())
    assert f"compile selection: none of {own} kernels is built from a changed file" in data["notes"]
    assert "- compile: 0 kernel x target compiles a side, 0 resource changes" in "\n".join(
        f"- {n}" for n in data["notes"]) and data["resources"] == []


def test_the_instruction_mix_counts_every_instruction_once_by_class() -> None:
    from collections import Counter

    from flybench.compile.isa import AmdKernel

    kernel = AmdKernel("k", mnemonics=Counter({"v_mfma_f32_32x32x8_bf16": 4, "v_add_f32": 3, "s_waitcnt": 2,
                                               "s_cbranch_scc1": 1, "s_load_dwordx2": 1, "global_load_dword": 2,
                                               "ds_read_b64_tr_b16": 5, "s_add_u32": 6, "s_endpgm": 1}))
    assert kernel.mix == {"mfma": 4, "waitcnt": 2, "branch": 1, "smem": 1, "vmem": 2, "lds": 5, "valu": 3,
                          "salu": 7, "other": 0}
    assert sum(kernel.mix.values()) == kernel.instructions


@pytest.fixture
def flydsl_like(tmp_path: Path) -> tuple[Path, str]:
    """A repository shaped like FlyDSL's: a kernels/ tree, one commit."""
    repo = tmp_path / "FlyDSL"
    (repo / "kernels" / "attention").mkdir(parents=True)
    (repo / "kernels" / "attention" / "flash_attn_generic.py").write_text("# a kernel\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
                    "-m", "kernels"], check=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return repo, head


def test_a_flydsl_side_is_measured_by_this_flybench_with_the_commits_kernels(flydsl_like, tmp_path: Path) -> None:
    """FlyDSL's timing half (not yet run on AMD hardware): each side's rounds run this flybench's suites under an
    asv config of the side's own, with the side's exported kernels/ as FLYBENCH_FLYDSL_SRC."""
    from flybench import envvars
    from flybench.cli import gate

    repo, commit = flydsl_like
    side = gate._side(repo, "head", commit, True, "installed", tmp_path / "work", tmp_path / "cache", [])
    config = json.loads(side.config.read_text())
    assert config["project"] == "flydsl" and config["repo"] == str(repo)
    assert config["benchmark_dir"] == str(gate.RUN_ROOT / "benchmarks")
    assert config["results_dir"] == str(tmp_path / "work" / "head" / "results")
    src = Path(side.env[envvars.FLYDSL_SRC])
    assert (src / "kernels" / "attention" / "flash_attn_generic.py").read_text() == "# a kernel\n"
    assert side.build.root == src and side.build.options == ["--flydsl-src", str(src)]
    assert "flydsl installed" in side.note


def test_gating_flydsl_where_no_flydsl_provider_runs_needs_the_compile_half(flydsl_like, capsys) -> None:
    repo, commit = flydsl_like
    assert main(["gate", commit, commit, "--flydsl-repo", str(repo), "--no-compile", "--set", "tiny"]) == 2
    assert "no subject provider of the selection runs here" in capsys.readouterr().err


FLYDSL_CLONE = os.environ.get("FLYBENCH_FLYDSL_SRC")


@pytest.mark.skipif(not FLYDSL_CLONE or not (Path(FLYDSL_CLONE) / ".git").exists(),
                    reason="set FLYBENCH_FLYDSL_SRC to a full clone of FlyDSL (with commit 3a02102e, PR #1008)")
def test_a_real_flydsl_pull_request_through_the_compile_half(tmp_path: Path) -> None:
    """FlyDSL #1008 (the gmem->LDS async copy for f16/bf16 preshuffle GEMM), compile half on the CPU with the
    wheel of its time: only the preshuffle GEMM kernels are compiled, and the comment says what changed."""
    md = tmp_path / "gate.md"
    assert main(["gate", "3a02102e^1", "3a02102e", "--flydsl-repo", FLYDSL_CLONE, "--no-timing",
                 "--workdir", str(tmp_path / "work"), "--markdown", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("<!-- flybench-compare -->\n### :white_check_mark: flybench:")
    assert "- compile selection: 7 of 33 kernels, built from changed files: preshuffle\\_gemm:bf16\\_prefill " \
           "(kernels/gemm/preshuffle\\_gemm.py)" in text  # file names from the diff, as literal markdown
    assert "kernels/ exported, flydsl 0." in text and "left out, none of their files changed: flash\\_attn" in text


def test_timed_cases_are_selected_by_the_files_their_provider_and_workload_are_built_from() -> None:
    root = Path(__file__).resolve().parents[1]
    torch_moe, triton_moe = (affected.case_files(root, "moe", p) for p in ("torch", "triton"))
    assert "flybench/kernels/triton/moe.py" in triton_moe and "flybench/kernels/triton/moe.py" not in torch_moe
    assert "flybench/workloads/moe.py" in torch_moe and "flybench/workloads/attention.py" not in torch_moe
    triton_attention = affected.case_files(root, "diffusion_attention", "triton")
    assert "flybench/kernels/triton/diffusion_attention.py" in triton_attention  # one provider, two families:
    assert not {"flybench/kernels/triton/moe.py", "flybench/kernels/triton/moe_routing.py"} & triton_attention
    files = {f"moe/{p}": affected.case_files(root, "moe", p) for p in ("torch", "triton")}
    files["attention/torch"] = affected.case_files(root, "attention", "torch")
    kernel = affected.select(files, ["flybench/kernels/triton/moe.py"], affected.flybench_timing_shared)
    assert kernel.selected == ["moe/triton"]
    workload = affected.select(files, ["flybench/workloads/moe.py"], affected.flybench_timing_shared)
    assert workload.selected == ["moe/torch", "moe/triton"]
    harness = affected.select(files, ["flybench/measure/timing.py"], affected.flybench_timing_shared)
    assert harness.selected == sorted(files) and harness.shared == ["flybench/measure/timing.py"]


def test_a_docs_only_pull_request_measures_nothing(subject: Path, tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    comment = tmp_path / "gate.md"
    assert main(["gate", "base", "aa", "--repo", str(subject), "--workdir", str(tmp_path / "work"), "--set", "tiny",
                 "--json", str(out), "--markdown", str(comment)]) == 0
    assert "flybench: nothing measured; 0 regressions" in comment.read_text().splitlines()[1]  # the headline says so
    notes = json.loads(out.read_text())["notes"]
    assert any(n.startswith("timing selection: none of the ") and n.endswith("workload/provider pairs loads a "
                                                                             "changed file") for n in notes)
    assert "timing: not measured (no case loads a changed file)" in notes


def test_a_dry_run_says_what_each_half_would_select_and_which_providers_watch_for_drift(
        subject: Path, tmp_path: Path, capsys) -> None:
    """Selection by diff, shown without measuring: a harness change reaches every timed case; a change to one
    provider's module is measured with the config's control providers of the same workloads beside it; a
    change to the Triton MoE family compiles only that family's kernels."""
    work = ["--repo", str(subject), "--set", "tiny", "--dry-run"]
    assert main(["gate", "base", "shared", *work, "--workdir", str(tmp_path / "shared")]) == 0
    out = capsys.readouterr().out
    assert "shared code changed (flybench/measure/timing.py)" in out and "timing would measure: " in out
    assert "compile selection: none of " in out and "compile would build 0 kernels at both sides" in out
    assert not list((tmp_path / "shared").rglob("results/*"))  # nothing measured

    torch_module = subject / "flybench" / "providers" / "torch_eager.py"
    subprocess.run(["git", "-C", str(subject), "checkout", "-q", "-b", "torch-provider", "base"], check=True)
    torch_module.write_text(torch_module.read_text() + "# a comment\n")
    subprocess.run(["git", "-C", str(subject), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit",
                    "-q", "-am", "torch provider: a comment"], check=True)
    config = tmp_path / "pr.toml"
    config.write_text('[regress]\ncontrol_providers = ["xla"]\n')
    assert main(["gate", "base", "torch-provider", *work, "--no-compile", "--config", str(config),
                 "--workdir", str(tmp_path / "torch")]) == 0
    lines = capsys.readouterr().out.splitlines()
    (plan,) = [line for line in lines if line.startswith("timing would measure: ")]
    assert "moe (torch, xla; 4 cases, bf16)" in plan and "diffusion_attention (torch, xla; " in plan
    (controls,) = [line for line in lines if line.startswith("drift controls")]
    assert "moe/xla" in controls and "moe/torch" not in controls

    assert main(["gate", "base", "family", *work, "--no-timing", "--workdir", str(tmp_path / "family")]) == 0
    out = capsys.readouterr().out
    assert "compile selection: 4 of " in out and "triton_moe:gate_up_bf16_t16 (flybench/kernels/triton/moe.py)" in out
    assert "triton_diffusion_attention" not in out.split("left out")[0]


def test_flydsls_timed_cases_are_selected_by_the_modules_their_provider_says_they_launch(tmp_path: Path) -> None:
    """FlyDSL's timing half (its flydsl providers run on ROCm only, so the selection is exercised alone): a
    change to the attention kernels times the attention cases, with CK beside them as the drift control; a change
    to the GEMM, which flybench does not time, times nothing; the compiler times everything."""
    from flybench.cli import gate
    from flybench.regress.config import RegressConfig
    from flybench.selection import Choice

    src = tmp_path / "kernels-tree"
    for path, text in {"kernels/__init__.py": "", "kernels/attention/__init__.py": "",
                       "kernels/attention/flash_attn_interface.py": "from kernels.attention import flash_attn_generic\n",
                       "kernels/attention/flash_attn_generic.py": "from kernels.common import lds\n",
                       "kernels/common/lds.py": "", "kernels/moe/moe_gemm_2stage.py": "from kernels.common import lds\n",
                       "kernels/gemm/preshuffle_gemm.py": ""}.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    side = gate.Side("base", "0" * 40, tmp_path / "asv.conf.json", {}, gate.Build(src, [], [], src), "")
    sides = {"base": side, "head": side._replace(name="head")}
    runnable = [Choice("attention", "flydsl", "bf16", None), Choice("moe", "flydsl", "fp8", None),
                Choice("attention", "ck", "bf16", None), Choice("attention", "torch", "bf16", None),
                Choice("moe", "ck", "fp8", None)]
    cfg = RegressConfig(subject_providers=frozenset({"flydsl*"}), control_providers=frozenset({"ck"}))

    def select(*changed: str):
        chosen = gate._timing_selection(runnable, sides, list(changed), cfg, True, "quick", None, [], tmp_path,
                                        "0" * 40)
        selections, subjects = gate._measured(chosen, runnable, cfg)
        return selections, chosen.lines() + gate._controls_line(selections, subjects), subjects

    attention = tuple(sorted(c.name for c in get_workload("attention").cases("quick")))
    chosen, said, subjects = select("kernels/attention/flash_attn_generic.py")
    assert chosen == [Selection("attention", ("flydsl", "ck"), ("bf16",), attention)] and subjects == {"flydsl"}
    assert said[0].startswith(f"timing selection: {len(attention)} of ")
    assert said[0].endswith(f"in 2 workload/provider pairs: attention/flydsl ({len(attention)} of {len(attention)} "
                            "cases, by static imports: kernels/attention/flash_attn_generic.py)")
    assert said[-1].endswith("attention/ck")
    shared_kernel, _, _ = select("kernels/common/lds.py")
    assert [s.workload for s in shared_kernel] == ["attention", "moe"]
    assert select("kernels/gemm/preshuffle_gemm.py", "docs/x.md")[0] == []
    compiler, said, _ = select("python/flydsl/compiler/jit_function.py")
    assert len(compiler) == 2 and "shared code changed" in said[0]


def test_a_kernel_that_fails_only_with_the_heads_other_wheel_is_not_called_broken(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """FlyDSL's sides compile with the wheel of each commit's time; where those differ, a failure at head may be
    the wheel's (the replay met three: an op's arguments, an import the older wheel lacked), so it is not
    compared rather than failing the pull request."""
    import argparse

    from flybench.cli import gate
    from flybench.regress.compare import Comparison
    from flybench.regress.config import RegressConfig

    def compiled(build, commit, kernels, arches, cache):
        failed = commit == "h" * 40
        return [{"kernel": "flash_attn_generic:causal_m128", "arch": "gfx942", "status": "failed" if failed else "ok",
                 "reason": "TypeError: RawPtrBufferLoadOp.__init__() takes 5 positional arguments" if failed else "",
                 "metrics": {}}]

    monkeypatch.setattr(gate, "_compile_side", compiled)
    build = gate.Build(tmp_path, [], [], tmp_path)
    args = argparse.Namespace(kernel=["flash_attn_generic:causal_m128"], arch=["gfx942"], isa_diff=tmp_path / "isa")

    def judged(base_wheel: str, head_wheel: str) -> tuple[str, str]:
        sides = {name: gate.Side(name, c * 40, tmp_path / "asv.conf.json", {}, build, f"flydsl {w}")
                 for name, c, w in (("base", "b", base_wheel), ("head", "h", head_wheel))}
        comparison = Comparison("m", "b" * 40, "h" * 40, 0.001)
        gate._compile_half(comparison, sides, [], True, ["flash_attn_generic:causal_m128"], args, RegressConfig(),
                           tmp_path, tmp_path)
        (case,) = comparison.cases
        return case.verdict, case.detail

    assert judged("0.3.1", "0.3.1")[0] == "broken"
    verdict, detail = judged("0.3.0", "0.3.1")
    assert verdict == "incomparable" and "the sides compiled with different flydsl wheels" in detail


def test_a_case_over_the_devices_memory_is_known_before_it_runs(monkeypatch) -> None:
    """XLA's ragged MoE at 4,096 tokens of DeepSeek-V3 asks for 112 GiB: on an H200 it is skipped once, with its
    reason, and costs no round; the same provider's small case and another provider's are measured."""
    from flybench.cli import gate
    from flybench.providers import get_provider

    h200 = 139 * 2**30
    big, small = get_workload("moe").case("dsv3-tp8-t4096"), get_workload("moe").case("dsv3-tp8-t1")
    assert get_provider("xla").memory_reason(big, "bf16", h200).startswith("needs about 112 GiB of device memory")
    assert get_provider("xla").memory_reason(small, "bf16", h200) is None
    assert get_provider("triton").memory_reason(big, "bf16", h200) is None
    monkeypatch.setattr(gate.hardware, "memory_bytes", lambda device: h200)
    found = gate._over_memory([["moe", "dsv3-tp8-t4096", "xla", "bf16"], ["moe", "dsv3-tp8-t1", "xla", "bf16"],
                               ["moe", "dsv3-tp8-t4096", "triton", "bf16"]], None)
    assert list(found) == [("moe", "dsv3-tp8-t4096", "xla", "bf16")]


def test_filters_that_share_no_case_are_bad_input(subject: Path, tmp_path: Path, capsys) -> None:
    """`-w mixtral_step -p flex` once passed as 'not measured', exit 0: flex runs no model step."""
    assert main(["gate", "base", "aa", "--repo", str(subject), "--workdir", str(tmp_path / "w"), "--set", "tiny",
                 "-w", "mixtral_step", "-p", "flex", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "the filters name no case: -w mixtral_step -p flex share no workload, provider and dtype" in err
    assert "Traceback" not in err and not (tmp_path / "w").exists()
