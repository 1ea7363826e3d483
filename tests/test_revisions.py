"""Revisions and clones from users are checked before git sees them: no file written, exit 2, the fault named.

`--main-ref=--output=FILE` once reached `git rev-list`/`git log` as an option and emptied FILE; a
`--flydsl-repo` that was a file, a missing path or an empty folder was reported as a clone without a main
branch. The repositories here are small ones made on the spot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_import_flydsl_ci import _repo

from flybench.cli import main as cli
from flybench.compile import history
from flybench.errors import FlybenchError
from flybench.regress import bisect

KEPT = "nobody may write over this\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file a revision such as `--output=FILE` would make git write over."""
    path = tmp_path / "victim.txt"
    path.write_text(KEPT)
    return path


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """A FlyDSL CI history with one record (schema 1)."""
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"schema": 1, "repo": "ROCm/FlyDSL", "records": [
        {"op": "flash_attn", "shape": "B1S128H1Hkv1D128_causal", "dtype": "bf16", "metric": "TFLOPS", "value": 5.0,
         "status": "ok", "ts": "2026-07-09T00:21:27Z", "commit": "abcdef1", "pr": None, "run_id": 1, "source": "ci",
         "runner": "linux-flydsl-mi325-1", "arch": "gfx942"}]}))
    return path


def test_a_main_ref_that_git_would_read_as_an_option_writes_nothing(tmp_path: Path, victim: Path, records: Path,
                                                                    capsys) -> None:
    repo = tmp_path / "clone"
    _repo(repo)
    db = tmp_path / "store.duckdb"
    code = cli(["import", "flydsl-ci", str(records), "--db", str(db), "--flydsl-repo", str(repo),
                f"--main-ref=--output={victim}"])
    err = capsys.readouterr().err
    assert code == 2
    assert victim.read_text() == KEPT and not db.exists()
    assert f"--main-ref '--output={victim}' begins with '-', so git would read it as an option" in err
    assert "usage: git" not in err and "Traceback" not in err


def test_a_main_ref_the_clone_lacks_is_named_before_the_store_is_opened(tmp_path: Path, records: Path,
                                                                        capsys) -> None:
    repo = tmp_path / "clone"
    _repo(repo)
    db = tmp_path / "store.duckdb"
    assert cli(["import", "flydsl-ci", str(records), "--db", str(db), "--flydsl-repo", str(repo),
                "--main-ref", "trunk"]) == 2
    assert f"--main-ref 'trunk' is not a commit of {repo}" in capsys.readouterr().err and not db.exists()


@pytest.mark.parametrize("kind, said", [("file", "is a file, not a folder"), ("missing", "does not exist"),
                                        ("empty", "is an empty folder"), ("plain", "is in no git repository")])
def test_a_flydsl_repo_that_is_no_clone_says_what_it_is(tmp_path: Path, records: Path, kind: str, said: str,
                                                        capsys) -> None:
    path = tmp_path / kind
    if kind == "file":
        path.write_text("not a clone")
    elif kind != "missing":
        path.mkdir()
        if kind == "plain":
            (path / "README").write_text("an exported tree, no history")
    code = cli(["import", "flydsl-ci", str(records), "--db", str(tmp_path / "s.duckdb"), "--flydsl-repo", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--flydsl-repo {path} {said}: give the folder of a clone" in err
    assert "no main branch" not in err


def test_compile_history_refuses_option_like_commits_and_refs(tmp_path: Path, victim: Path, capsys) -> None:
    repo = tmp_path / "clone"
    _repo(repo)
    for flag in ("--commit", "--ref"):
        code = history.main(["--flydsl-repo", str(repo), f"{flag}=--output={victim}", "--wheels", "0.1.dev1",
                             "--plan"])
        assert code == 2 and victim.read_text() == KEPT
        assert f"{flag} '--output={victim}' begins with '-'" in capsys.readouterr().err


@pytest.mark.parametrize("good", ["--output=FILE", "HEAD~1 HEAD", "main\n"])
def test_bisect_names_a_revision_no_commit_can_have(tmp_path: Path, good: str) -> None:
    repo = tmp_path / "clone"
    _repo(repo)
    with pytest.raises(FlybenchError, match=r"GOOD '.*' (begins with '-'|holds blanks or control characters)"):
        bisect.first_parent_range(repo, good.replace("FILE", str(tmp_path / "victim")), "main")
    assert not (tmp_path / "victim").exists()
