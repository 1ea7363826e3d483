"""The nightly alert: each regression names its series, range, size, confidence and runs, links to its
History view, gives the command that bisects it, and stays until the series is back or its level accepted."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from fixtures.asv_project import MACHINE, PROJECT, STEP_AT, AsvProject, build

from flybench.cli import main
from flybench.regress import accepted, stored
from flybench.regress.report import bisect_command, history_url
from flybench.store import ingest

SERIES = "attention.Quick.track_time(c1, flydsl, bf16)"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


@pytest.fixture
def db(project: AsvProject, tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    assert ingest(project.results_dir, path, branch="main").ok
    return path


def test_the_alert_names_everything_needed_to_act(db: Path, project: AsvProject, tmp_path: Path) -> None:
    [step] = [r for r in stored.regressions(db) if r.series == SERIES]
    assert (step.step.last_good, step.step.first_bad) == (project.commits[STEP_AT - 1], project.commits[STEP_AT])
    assert step.runs == "main"
    url = urlsplit(history_url(step, "https://dash.example/flybench/"))
    assert url.path == "/flybench/history"
    assert parse_qs(url.query) == {"subject": [PROJECT], "machine": [MACHINE], "benchmark": ["attention.Quick.track_time"],
                                   "case": ["c1"], "provider": ["flydsl"], "dtype": ["bf16"]}
    command = bisect_command(step)
    assert command.startswith(f"flybench bisect '{SERIES}' {project.commits[STEP_AT - 1][:12]} "
                              f"{project.commits[STEP_AT][:12]}")
    # a parameter value from the data cannot run anything when the command is pasted, or end its code span
    from dataclasses import replace
    import shlex

    hostile = replace(step, params={**step.params, "case": "x'; touch PWNED; echo `"})
    assert shlex.split(bisect_command(hostile))[2] == hostile.series
    from flybench.regress.report import _next_steps
    cell = _next_steps(hostile, None)
    assert cell.startswith("`` flybench bisect ") and cell.endswith(" ``")
    imported = replace(step, benchmark="attention.FlydslCI.track_tflops")
    assert bisect_command(imported) is None and _next_steps(imported, None) == "-"  # bisect refuses these
    out = tmp_path / "alert.md"
    code = main(["regressions", "--db", str(db), "--format", "markdown", "--output", str(out),
                 "--dashboard-url", "https://dash.example/flybench"])
    text = out.read_text()
    assert code == 1
    row = next(line for line in text.splitlines() if "c1, flydsl, bf16" in line and "track_time" in line)
    assert f"{project.commits[STEP_AT - 1][:8]}..{project.commits[STEP_AT][:8]}" in row
    assert "+50.5%" in row and "% (noise" in row  # the size (the levels' medians) and the confidence
    assert "| main |" in row and "[History](https://dash.example/flybench/history?" in row
    assert "`flybench bisect '" in row and "flybench accept" in text


def test_an_accepted_level_closes_the_alert_and_keeps_its_reason(db: Path, project: AsvProject,
                                                                tmp_path: Path, capsys) -> None:
    file = tmp_path / "accepted.json"
    code = main(["accept", SERIES, project.commits[STEP_AT][:8], "--reason", "slower kernel, exact lse",
                 "--db", str(db), "--accepted", str(file)])
    assert code == 0 and "accepted" in capsys.readouterr().out
    [entry] = accepted.load(file)
    assert (entry.machine, entry.benchmark, entry.commit) == (MACHINE, "attention.Quick.track_time",
                                                               project.commits[STEP_AT])
    assert entry.params == {"case": "c1", "provider": "flydsl", "dtype": "bf16"} and entry.reason
    assert SERIES not in [r.series for r in stored.regressions(db, accepted=accepted.load(file))]
    assert SERIES in [r.series for r in stored.regressions(db)]  # without the file the step is still there
    out = tmp_path / "alert.md"
    main(["regressions", "--db", str(db), "--benchmark", "attention.Quick.*", "--accepted", str(file),
          "--format", "markdown", "--output", str(out)])
    assert "c1, flydsl, bf16" not in out.read_text()


def test_undo_takes_an_acceptance_back_and_the_alert_opens_again(db: Path, project: AsvProject, tmp_path: Path,
                                                                   capsys) -> None:
    """`flybench accept --undo` (and the dashboard's un-accept, through the same `accepted.remove`) leaves the other
    acceptances in the file and opens the series' alert again."""
    file = tmp_path / "accepted.json"
    commit = project.commits[STEP_AT][:8]
    other = accepted.Acceptance("p", "m", "b", {"case": "x"}, "0" * 40, "kept", accepted.now())
    accepted.add(file, other)
    assert main(["accept", SERIES, commit, "--reason", "exact lse", "--db", str(db), "--accepted", str(file)]) == 0
    assert SERIES not in [r.series for r in stored.regressions(db, accepted=accepted.load(file))]
    assert main(["accept", SERIES, commit, "--undo", "--db", str(db), "--accepted", str(file)]) == 0
    assert "no longer accepted" in capsys.readouterr().out
    assert accepted.load(file) == [other]
    assert SERIES in [r.series for r in stored.regressions(db, accepted=accepted.load(file))]
    assert main(["accept", SERIES, commit, "--undo", "--db", str(db), "--accepted", str(file)]) == 0
    assert "nothing changed" in capsys.readouterr().out and accepted.load(file) == [other]


@pytest.mark.parametrize("args, message", [
    (["accept", "attention.Quick.track_time(c9, flydsl, bf16)", "abc", "--reason", "x"], "no series"),
    (["accept", "no such thing((", "abc", "--reason", "x"], "is not a series"),
    (["accept", SERIES, "ffffffff", "--reason", "x"], "has no result"),
    (["accept", SERIES, "0", "--reason", "   "], "--reason is missing or empty"),
])
def test_bad_acceptances_exit_2_and_say_what_to_do(db: Path, tmp_path: Path, capsys, args, message) -> None:
    assert main([*args, "--db", str(db), "--accepted", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "a.json").exists()


def test_a_malformed_accepted_file_is_bad_input(db: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "accepted.json"
    bad.write_text(json.dumps({"accepted": []}))
    assert main(["regressions", "--db", str(db), "--accepted", str(bad)]) == 2
    assert "not an accepted-levels file" in capsys.readouterr().err


def test_accepting_is_idempotent_atomic_and_safe_under_concurrency(db: Path, project: AsvProject, tmp_path: Path,
                                                                   capsys, monkeypatch) -> None:
    import subprocess
    import sys

    file = tmp_path / "accepted.json"
    accept = ["accept", SERIES, project.commits[STEP_AT][:8], "--reason", "exact lse", "--db", str(db),
              "--accepted", str(file)]
    assert main(accept) == 0 and main(accept) == 0
    assert "already accepted" in capsys.readouterr().out and len(accepted.load(file)) == 1
    before = file.read_bytes()

    def full_disk(*_):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:  # the write fails: the file is as it was, the temporary gone
        patch.setattr(accepted.os, "fsync", full_disk)
        assert main([*accept[:2], project.commits[STEP_AT - 1][:8], *accept[3:]]) == 2
    assert "No space left on device" in capsys.readouterr().err and file.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert main([*accept[:-1], str(tmp_path)]) == 2 and "is a directory" in capsys.readouterr().err
    # eight accepts of eight commits at once, each its own process: all eight kept, the file valid JSON
    script = ("import sys; from flybench.regress import accepted; a = accepted.Acceptance('s', 'm', 'b', {}, "
              "sys.argv[1], 'r', 't'); accepted.add(accepted.Path(sys.argv[2]), a)")
    many = tmp_path / "many.json"
    runs = [subprocess.Popen([sys.executable, "-c", script, f"c{i}", str(many)]) for i in range(8)]
    assert [r.wait() for r in runs] == [0] * 8
    assert sorted(a.commit for a in accepted.load(many)) == [f"c{i}" for i in range(8)]


def _listed(db: Path, capsys) -> tuple[str, str]:
    main(["regressions", "--db", str(db), "--benchmark", "attention.Quick.*"])
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_acceptances_live_with_the_store_whatever_folder_a_command_runs_in(db: Path, project: AsvProject,
                                                                          tmp_path: Path, capsys,
                                                                          monkeypatch) -> None:
    """Accepted in one folder, read from another: the store's own file beside --db, never ./results."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    monkeypatch.chdir(here)
    assert main(["accept", SERIES, project.commits[STEP_AT][:8], "--reason", "exact lse", "--db", str(db)]) == 0
    assert f"({db.with_name('store.accepted.json')};" in capsys.readouterr().out
    assert not (here / "results").exists()
    [entry] = accepted.load(tmp_path / "store.accepted.json")
    assert entry.reason == "exact lse"
    monkeypatch.chdir(there)
    out, err = _listed(db, capsys)
    assert "c1, flydsl, bf16" not in out and not err


def test_the_old_results_accepted_json_is_still_applied_and_said(db: Path, project: AsvProject, tmp_path: Path,
                                                                capsys, monkeypatch) -> None:
    old = tmp_path / "checkout"
    monkeypatch.chdir(old.parent)
    out, _ = _listed(db, capsys)
    assert "c1, flydsl, bf16" in out  # open without any acceptance
    accepted.add(old / "results" / "accepted.json", accepted.Acceptance(
        PROJECT, MACHINE, "attention.Quick.track_time", {"case": "c1", "provider": "flydsl", "dtype": "bf16"},
        project.commits[STEP_AT], "accepted before the move", accepted.now()))
    monkeypatch.chdir(old)
    out, err = _listed(db, capsys)
    assert "c1, flydsl, bf16" not in out
    assert "1 acceptance(s) from results/accepted.json" in err and str(db.with_name("store.accepted.json")) in err


def test_accept_where_the_folder_cannot_be_written_exits_2_and_says_so(db: Path, project: AsvProject,
                                                                      tmp_path: Path, capsys, monkeypatch) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    target = folder / "accepted.json"
    if os.geteuid() == 0:  # root writes anywhere: the lock file's open fails as it does for a user
        def denied(file: Path):
            raise PermissionError(13, "Permission denied", str(file) + ".lock")
        monkeypatch.setattr(accepted, "_locked", denied)
    else:
        folder.chmod(0o555)
    try:
        code = main(["accept", SERIES, project.commits[STEP_AT][:8], "--reason", "r", "--db", str(db),
                     "--accepted", str(target)])
    finally:
        folder.chmod(0o755)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"cannot write {target} (Permission denied: {target}.lock)" in err and "--accepted" in err
    assert list(folder.iterdir()) == []


def test_accept_writes_through_a_link(db: Path, project: AsvProject, tmp_path: Path) -> None:
    real = tmp_path / "kept" / "levels.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"version": accepted.FORMAT_VERSION, "accepted": []}))
    link = tmp_path / "accepted.json"
    link.symlink_to(real)
    for commit in (STEP_AT, STEP_AT - 1):  # the target rewritten twice: the link stays a link
        assert main(["accept", SERIES, project.commits[commit][:8], "--reason", "r", "--db", str(db),
                     "--accepted", str(link)]) == 0
        assert link.is_symlink() and os.readlink(link) == str(real)
    assert [a.commit for a in accepted.load(real)] == [project.commits[STEP_AT], project.commits[STEP_AT - 1]]
    assert not list(tmp_path.glob(".*.tmp")) and not list(real.parent.glob(".*.tmp"))


def test_a_fresh_clones_first_report_judges_only_what_was_measured_there(project: AsvProject, tmp_path: Path,
                                                                        capsys, monkeypatch) -> None:
    """Results committed to the repository by the machine that ran them are listed apart, not judged: the first
    `flybench regressions` in a clone exits 0 and says what it left out; --include-others judges them (exit 1 on
    the planted step), as the nightly does with the results it has just committed."""
    import shutil
    import subprocess

    clone = tmp_path / "clone"
    shutil.copytree(project.results_dir, clone / "results" / "flybench")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "results"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "results"], check=True)
    db = tmp_path / "store.duckdb"
    assert ingest(clone / "results" / "flybench", db, subject=PROJECT, branch="main").ok
    monkeypatch.chdir(clone)
    out, err = _listed(db, capsys)
    assert "c1, flydsl, bf16" not in out
    assert "not judged: " in err and f"on {MACHINE} ({PROJECT}: committed to this repository)" in err
    assert main(["regressions", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["regressions", "--db", str(db), "--include-others"]) == 1
    assert "c1, flydsl, bf16" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)  # outside the checkout the same rows are nobody else's: judged
    assert main(["regressions", "--db", str(db)]) == 1
