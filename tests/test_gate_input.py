"""Bad input to `flybench gate`, `bisect` and `run` that got past the parser: each is now exit 2 with what to do.

- `gate --workdir FILE` ended in a FileExistsError traceback; a relative
  --workdir was made inside the gated repository (git -C read it there), so
  the same command run again failed with "already exists".
- `--wheel 'x;...'` reached pip, whose traceback's tail was the message.
- `run --max-minutes -1` (or nan) was taken: one case measured, the rest
  left, exit 0.
- A short hash that begins several commits was called "not a commit".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from flybench.cli import main


def _refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_workdir_that_is_a_file_is_refused(tmp_path: Path, capsys) -> None:
    plain = tmp_path / "notes.txt"
    plain.write_text("mine\n")
    err = _refused(capsys, ["gate", "base", "head", "--workdir", str(plain)])
    assert f"argument --workdir: {plain} is a regular file, not a folder" in err
    assert plain.read_text() == "mine\n"


def _two_commits(root: Path) -> Path:
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for text in ("one\n", "two\n"):
        (root / "notes.txt").write_text(text)
        subprocess.run([*git, "add", "notes.txt"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", text.strip()], check=True)
    return root


def test_a_relative_workdir_is_where_the_command_runs_and_a_second_run_reuses_it(
        tmp_path: Path, monkeypatch, capsys) -> None:
    subject = _two_commits(tmp_path / "subject")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    argv = ["gate", "HEAD~1", "HEAD", "--repo", str(subject), "--set", "tiny", "--dry-run", "--no-timing",
            "--workdir", "work"]
    assert main(argv) == 0
    assert main(argv) == 0, capsys.readouterr().err
    work = tmp_path / "here" / "work"
    assert (work / "base" / ".git").exists() and (work / "head" / ".git").exists()
    assert not (subject / "work").exists()
    assert f"work in {work}" in capsys.readouterr().out


@pytest.mark.parametrize("verb", [["gate", "base", "head"], ["bisect", "s(x)", "a", "b"]])
@pytest.mark.parametrize("wheel", ["x;touch /tmp/pwned", "0.4.2 --index-url http://evil", "", "latest"])
def test_a_wheel_that_is_no_version_never_reaches_pip(verb: list[str], wheel: str, capsys) -> None:
    err = _refused(capsys, [*verb, "--wheel", wheel])
    assert f"argument --wheel: {wheel!r} is not of-its-time, installed or a flydsl version" in err
    assert "write e.g. --wheel 0.4.2" in err


@pytest.mark.parametrize("wheel", ["0.4.2", "0.5.0.dev123", "0.5.0rc1", "0.4.2+rocm6.4", "installed", "of-its-time"])
def test_a_wheel_version_is_taken(wheel: str) -> None:
    from flybench.subject_code import wheel_policy

    assert wheel_policy(wheel) == wheel


@pytest.mark.parametrize("minutes", ["-1", "0", "nan", "inf", "soon"])
def test_a_budget_of_no_minutes_is_refused(minutes: str, capsys) -> None:
    err = _refused(capsys, ["run", "--max-minutes", minutes, "--dry-run"])
    assert f"argument --max-minutes: {minutes!r} is not a number of minutes above 0" in err


def _colliding_repo(root: Path) -> tuple[str, list[str]]:
    """A repository of empty commits, made at once by git fast-import, in which two commits share the first four
    hex digits of their hashes (1,500 commits: all 65,536 prefixes distinct has odds of about e^-17)."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    stream = "".join(f"commit refs/heads/main\nmark :{i}\ncommitter t <t@example.com> {1700000000 + i} +0000\n"
                     f"data {len(f'c{i}')}\nc{i}\n" + (f"from :{i - 1}\n" if i > 1 else "") + "\n"
                     for i in range(1, 1501))
    subprocess.run(["git", "-C", str(root), "fast-import", "--quiet"], input=stream.encode(), check=True)
    hashes = subprocess.run(["git", "-C", str(root), "rev-list", "main"], capture_output=True, text=True,
                            check=True).stdout.split()
    seen: dict[str, list[str]] = {}
    for h in hashes:
        seen.setdefault(h[:4], []).append(h)
    prefix, both = next((p, hs) for p, hs in seen.items() if len(hs) > 1)
    return prefix, both


def test_an_ambiguous_short_hash_is_said_to_be_ambiguous_with_its_candidates(tmp_path: Path, capsys) -> None:
    repo = tmp_path / "repo"
    prefix, candidates = _colliding_repo(repo)
    code = main(["gate", prefix, "main", "--repo", str(repo), "--set", "tiny", "--no-compile", "--dry-run",
                 "--workdir", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "is not a commit" not in err
    assert f"BASE {prefix!r} is ambiguous in {repo}: {len(candidates)} commits begin with it" in err
    assert all(c[:12] in err for c in candidates) and "Give more digits of the hash" in err
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("minutes", ["-1", "0", "nan", "-inf", "inf", "soon"])
def test_a_gate_budget_of_no_minutes_is_refused_as_runs_is(minutes: str, capsys) -> None:
    """`gate --budget-minutes nan` was taken (nan <= 0 is false), and so was -inf's opposite, inf."""
    err = _refused(capsys, ["gate", "base", "head", f"--budget-minutes={minutes}", "--dry-run"])
    assert f"argument --budget-minutes: {minutes!r} is not a number of minutes above 0" in err
    assert "e.g. --budget-minutes 30, or leave it out for the default, 60" in err


def test_the_gate_and_run_share_one_minutes_check() -> None:
    from flybench.cli import gate, run

    assert gate.minutes_above_0 is run.minutes_above_0
