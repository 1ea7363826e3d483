"""`flybench run` measures the repository you stand in: its asv config and its HEAD, never the installed checkout's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(where: Path, *words: str) -> str:
    return subprocess.run(["git", "-C", str(where), *words], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT}).stdout.strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second clone of this repository, one commit ahead, run with the first one's flybench installed."""
    where = tmp_path_factory.mktemp("second") / "flybench"
    git(ROOT.parent, "clone", "-q", "--depth", "1", f"file://{ROOT}", str(where))
    git(where, "commit", "-q", "--allow-empty", "-m", "the second clone's own commit")
    return where


def flybench(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The installed console script (`python -m flybench` would import the clone's own package from cwd)."""
    return subprocess.run([str(Path(sys.executable).with_name("flybench")), *argv], cwd=cwd, capture_output=True,
                          text=True,
                          env={**os.environ, "FLYBENCH_DEVICE": "cpu"})


def test_config_and_head_come_from_the_current_directorys_repository(clone: Path) -> None:
    assert git(clone, "rev-parse", "HEAD") != git(ROOT, "rev-parse", "HEAD")
    done = flybench(clone / "benchmarks", "run", "--dry-run", "-w", "gemm", "-p", "torch")  # from a subfolder too
    assert done.returncode == 0, done.stderr
    assert f"config: {clone / 'asv.conf.json'}; commit: {git(clone, 'rev-parse', 'HEAD')}" in done.stdout
    # the plan: how many measuring processes, and the asv command that runs them, shell-quoted
    lines = done.stdout.splitlines()
    plan = next(i for i, line in enumerate(lines) if line.startswith("plan: gemm: "))
    assert lines[plan].endswith("measuring processes (torch bf16)")
    assert lines[plan + 1].startswith(f"  asv run --config {clone / 'asv.conf.json'} --python=same ")
    assert lines[-1].endswith("measuring processes in all; nothing was run (--dry-run)")


def test_a_commit_of_the_repository_is_resolved_to_its_hash(clone: Path) -> None:
    done = flybench(clone, "run", "--dry-run", "--commit", "HEAD~1", "-w", "gemm", "-p", "torch")
    assert done.returncode == 0, done.stderr
    assert f"commit: {git(clone, 'rev-parse', 'HEAD~1')}" in done.stdout


def test_an_unknown_commit_is_bad_input_before_asv_runs(clone: Path) -> None:
    done = flybench(clone, "run", "--commit", "nothere")
    assert done.returncode == 2
    assert f"commit 'nothere' is not in the repository {clone}" in done.stderr and "--commit" in done.stderr
    assert "Traceback" not in done.stderr and "device:" not in done.stdout  # nothing was started


def test_a_commit_git_would_read_as_an_option_is_refused_before_git_sees_it(clone: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("kept")
    done = flybench(clone, "run", "--dry-run", f"--commit=--output={victim}")
    assert done.returncode == 2 and victim.read_text() == "kept"
    assert f"--commit '--output={victim}' begins with '-', so git would read it as an option" in done.stderr


def test_outside_any_repository_says_where_to_run(tmp_path: Path) -> None:
    done = flybench(tmp_path, "run", "--dry-run")
    assert done.returncode == 2
    assert f"{tmp_path} is in no git repository" in done.stderr and "--config" in done.stderr


def test_a_remote_repository_needs_a_full_hash(tmp_path: Path) -> None:
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "project": "flydsl", "repo": "https://github.com/ROCm/FlyDSL.git",
                                  "results_dir": "."}))
    done = flybench(tmp_path, "run", "--config", str(config), "--commit", "main")
    assert done.returncode == 2
    assert "measures the remote repository https://github.com/ROCm/FlyDSL.git: pass --commit with a full" in done.stderr


def test_a_run_whose_cases_failed_exits_1_not_2(clone: Path, monkeypatch, capsys) -> None:
    """asv exits 2 when a benchmark failed; `flybench run` keeps 2 for bad input, so the gate that runs it can tell
    a refused selection from a case that failed (recorded, and judged as failed)."""
    from flybench.cli import main, run

    asv_runs: list[list[str]] = []

    def fake_asv(command: list[str], cwd: Path, env: dict[str, str]) -> int:
        assert command[1:4] == ["-m", "flybench.asv_main", "run"]
        asv_runs.append(command)
        return 2  # asv's exit status when a benchmark failed

    monkeypatch.chdir(clone)
    monkeypatch.setenv("FLYBENCH_DEVICE", "cpu")
    monkeypatch.setattr(run, "_register_machine", lambda *a: None)
    monkeypatch.setattr(run, "_asv", fake_asv)
    monkeypatch.setattr("flybench.cli._summary.print_run_summary", lambda *a: None)
    assert main(["run", "-w", "gemm", "-p", "torch", "-d", "bf16", "--machine", "t"]) == 1
    assert len(asv_runs) == 1
    assert "some cases failed or did not finish" in capsys.readouterr().err


def test_an_empty_commit_is_refused_not_taken_as_head(clone: Path) -> None:
    done = flybench(clone, "run", "--dry-run", "-w", "gemm", "-p", "torch", "--commit", "")
    assert done.returncode == 2 and "--commit '' names no commit" in done.stderr and "Traceback" not in done.stderr


def test_a_cases_file_names_exactly_what_runs_and_bad_ones_are_refused(clone: Path, tmp_path: Path) -> None:
    listing = tmp_path / "cases.json"
    listing.write_text('[["gemm", "64x48x32", "torch", "bf16"]]')
    done = flybench(clone, "run", "--dry-run", "--set", "tiny", "--cases", str(listing))
    assert done.returncode == 0, done.stderr
    assert "plan: gemm: 1 cases of 1 (provider, dtype) = 1 measuring processes (torch bf16)" in done.stdout
    for text, said in (('[["gemm", "nope", "torch", "bf16"]]', "gemm has no case 'nope' in the tiny set"),
                       ('[["gemm"]]', "is not a [workload, case, provider, dtype] list"), ("{", "is not JSON")):
        listing.write_text(text)
        done = flybench(clone, "run", "--dry-run", "--set", "tiny", "--cases", str(listing))
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
