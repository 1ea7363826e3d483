"""Which timed cases `flybench gate` selects: by the files each case loaded (its record), else by static imports;
filters narrow the selection; a change whose cases cannot run here says so. All on the CPU, as dry runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from flybench.cli import main
from flybench.measure.case import measure_case
from flybench.measure.contract import PRESETS
from flybench.workloads import get_workload
from studies import gate_study


def _commit(repo: Path, branch: str, path: str, line: str) -> None:
    """A head `branch` off base that appends `line` to `path`."""
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", branch, "base"], check=True)
    with (repo / path).open("a") as f:
        f.write(line)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
                    "-am", f"{path}: {line.strip()}"], check=True)


@pytest.fixture(scope="module")
def subject(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This project's files as a repository: base, and heads changing a comment in the Triton MoE kernels
    (`family`), in the timing harness (`shared`) and in the Triton configuration module (`configs`), and the host
    code of the Triton MoE module (`host`)."""
    root = tmp_path_factory.mktemp("subject") / "repo"
    gate_study.prepare(root)
    _commit(root, "configs", "flybench/kernels/triton/configs.py", "# a comment\n")
    _commit(root, "host", "flybench/kernels/triton/moe.py", "\nMoePlan.fills_on_the_host = True\n")
    return root


def _dry_run(subject: Path, head: str, work: Path, capsys, *extra: str) -> list[str]:
    assert main(["gate", "base", head, "--repo", str(subject), "--set", "tiny", "--dry-run", "--no-compile",
                 "--arch", "sm_90", "--workdir", str(work), "--cache", str(work.parent / "cache"), *extra]) == 0
    return capsys.readouterr().out.splitlines()


def _line(lines: list[str], start: str) -> str:
    (found,) = [line for line in lines if line.startswith(start)]
    return found


def test_a_case_records_the_files_it_loaded_and_not_the_other_providers() -> None:
    """The model lane's xla step loads the lane and the XLA provider; it never loads the Triton MoE, the
    jax-triton provider that also serves the lane, or the other workloads the suite lists."""
    step = get_workload("mixtral_step").cases("tiny")[0].name
    record = measure_case("mixtral_step", "tiny", step, "xla", "bf16", PRESETS["tiny"])
    assert record.status == "ok", record.reason
    loaded = set(record.loaded)
    assert {"flybench/model/lane.py", "flybench/model/mixtral.py", "flybench/providers/xla.py",
            "flybench/workloads/mixtral_step.py", "flybench/workloads/base.py", "flybench/model/__init__.py"} <= loaded
    assert not {"flybench/kernels/triton/moe.py", "flybench/kernels/triton/cases.py",
                "flybench/providers/jax_custom_call.py", "flybench/workloads/moe.py"} & loaded
    moe = get_workload("moe").cases("tiny")[0].name
    record = measure_case("moe", "tiny", moe, "xla", "bf16", PRESETS["tiny"])
    assert record.status == "ok" and not any(f.startswith(("flybench/model/", "flybench/kernels/"))
                                             for f in record.loaded)
    assert json.loads(record.to_json())["loaded"] == record.loaded  # it goes into the case record
    unavailable = measure_case("moe", "tiny", moe, "triton", "bf16", PRESETS["tiny"])
    assert unavailable.status == "unavailable" and unavailable.loaded is None  # never built: no evidence


def test_a_comment_in_the_triton_moe_selects_its_cases_not_the_xla_baselines(subject: Path, tmp_path: Path,
                                                                              capsys) -> None:
    """The XLA baselines are the drift controls: a kernel change must not make them subjects. The comment reaches
    the Triton MoE cases by their imports; they compile to the same code at both sides, so none is timed. A change
    to the plan's host code is timed by the file; on the CPU the selected Triton cases cannot run, and the dry run
    says so instead of saying nothing was selected."""
    lines = _dry_run(subject, "family", tmp_path / "w", capsys)
    reached = _line(lines, "changed files reach ")
    assert "moe/triton (8 of 8 cases, by static imports: flybench/kernels/triton/moe.py)" in reached  # 4 x bf16, fp8
    assert "moe/xla" not in reached and "moe/xla-dense" not in reached and "moe/jax-triton (" in reached
    assert _line(lines, "timing selection: ").endswith(": the change alters no compiled kernel and no host code "
                                                       "that launches or measures a case")
    lines = _dry_run(subject, "host", tmp_path / "h", capsys, "-w", "moe", "-p", "triton")
    assert _line(lines, "chosen, cannot run here: moe/triton tiny-h64-i32-e16k4-t1 bf16").endswith(
        "host code changed: flybench/kernels/triton/moe.py")
    cannot = _line(lines, "selected but cannot run on this machine: ")
    assert "moe/triton bf16" in cannot and "needs an NVIDIA or AMD GPU" in cannot
    assert "timing: not measured (the cases the change selects cannot run on this machine)" in lines


def test_filters_narrow_the_selection_and_all_cases_measures_everything(subject: Path, tmp_path: Path,
                                                                        capsys) -> None:
    """-w/-p/-d/-c intersect what the change selects: the Triton MoE comment selects no diffusion-attention case,
    so `-w diffusion_attention -d bf16` measures nothing; --all-cases measures what the filters name."""
    lines = _dry_run(subject, "family", tmp_path / "a", capsys, "-w", "diffusion_attention", "-d", "bf16")
    assert _line(lines, "timing selection: ").startswith("timing selection: none of ")
    assert "timing: not measured (no case loads a changed file)" in lines
    lines = _dry_run(subject, "family", tmp_path / "b", capsys, "-w", "diffusion_attention", "-d", "bf16",
                     "-p", "torch", "--all-cases")
    assert "timing selection: every case the filters name (--all-cases), whatever the change" in lines
    assert _line(lines, "timing would measure: ") == "timing would measure: diffusion_attention (torch; every case, bf16)"
    # a harness change selects everything; the filters keep only what they name
    case = get_workload("moe").cases("tiny")[0].name
    lines = _dry_run(subject, "shared", tmp_path / "c", capsys, "-p", "xla", "-c", case)
    assert _line(lines, "timing selection: ").startswith("timing selection: all 2 cases in 1 workload/provider pair: shared code")
    assert _line(lines, "timing would measure: ") == "timing would measure: moe (xla; 1 case, bf16)"


def test_case_records_select_where_they_exist_and_static_imports_elsewhere(subject: Path, tmp_path: Path,
                                                                          capsys) -> None:
    """A comment in the Triton configurations: read statically, the model lane's xla steps import them (the lane
    holds jax-triton's layer too); their records say they never loaded them, so they are not selected. The
    jax-triton step has no record and is selected by its imports. A record whose files changed since its commit
    cannot speak for the base, and is not used."""
    base = subprocess.run(["git", "-C", str(subject), "rev-parse", "base"], capture_output=True, text=True,
                          check=True).stdout.strip()
    steps = [c.name for c in get_workload("mixtral_step").cases("tiny")]
    loaded = ["flybench/model/lane.py", "flybench/model/mixtral.py", "flybench/providers/xla.py",
              "flybench/workloads/mixtral_step.py"]
    records = tmp_path / "records.cases.jsonl"
    records.write_text("".join(json.dumps({
        "run_id": "r", "workload": "mixtral_step", "shape_set": "tiny", "case": step, "provider": provider,
        "dtype": "bf16", "status": "ok", "commit": base, "loaded": loaded, "version": 2}) + "\n"
        for step in steps for provider in ("xla", "xla-dense")))
    original = records.read_text()
    static = _line(_dry_run(subject, "configs", tmp_path / "s", capsys, "-w", "mixtral_step"), "changed files reach ")
    assert "mixtral_step/xla (2 of 2 cases, by static imports: flybench/kernels/triton/configs.py)" in static
    lines = _dry_run(subject, "configs", tmp_path / "r", capsys, "-w", "mixtral_step", "--records", str(records))
    selected = _line(lines, "changed files reach ")
    assert "mixtral_step/xla" not in selected and "mixtral_step/xla-dense" not in selected
    assert "mixtral_step/jax-triton (2 of 2 cases, by static imports: flybench/kernels/triton/configs.py)" in selected
    assert ("selected by what each case loaded (its case record) for 4 cases, by static imports for 4 "
            "(no usable record)") in lines
    # a record that lists the changed file selects its case, by records
    records.write_text(records.read_text().replace('"flybench/model/lane.py"',
                                                   '"flybench/kernels/triton/configs.py"', 1))
    selected = _line(_dry_run(subject, "configs", tmp_path / "one", capsys, "-w", "mixtral_step", "-p", "xla",
                              "--records", str(records)), "changed files reach ")
    assert "mixtral_step/xla (1 of 2 cases, by case records: flybench/kernels/triton/configs.py)" in selected
    # a record of a commit after which one of its files changed is not used: the static reading stands in
    _commit(subject, "lane-moved", "flybench/model/lane.py", "# moved on\n")
    stale = original.replace(base, subprocess.run(
        ["git", "-C", str(subject), "rev-parse", "lane-moved"], capture_output=True, text=True, check=True
    ).stdout.strip())
    records.write_text(stale)
    lines = _dry_run(subject, "configs", tmp_path / "stale", capsys, "-w", "mixtral_step", "-p", "xla",
                     "--records", str(records))
    assert "by static imports for 2 (no usable record)" in _line(lines, "selected by what each case loaded")


def test_records_that_do_not_exist_are_bad_input(subject: Path, tmp_path: Path, capsys) -> None:
    assert main(["gate", "base", "family", "--repo", str(subject), "--set", "tiny", "--dry-run",
                 "--workdir", str(tmp_path / "w"), "--records", str(tmp_path / "nothing-here")]) == 2
    assert "--records" in capsys.readouterr().err and not (tmp_path / "w").exists()
