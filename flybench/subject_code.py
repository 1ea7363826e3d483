"""The subject's code at a commit: what `flybench bisect` probes and what `flybench gate` measures.

A subject is the repository whose commits are measured. For flybench
itself that is a git worktree of the commit, whose `flybench` and
`benchmarks/` the measuring processes import. For FlyDSL it is the commit's
`kernels/` tree, exported, with the `flydsl` wheel of its time (its Python
API moves with its kernels), as `flybench.compile.history` compiles its
history: FLYBENCH_FLYDSL_SRC points at the tree, the wheel goes on the path.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from flybench import revisions
from flybench.errors import FlybenchError

INSTALLED = "installed"
"""`--wheel installed`: the flydsl package of this environment for every commit, as the nightly measures."""
OF_ITS_TIME = "of-its-time"
"""`--wheel of-its-time` (default): each FlyDSL commit with the first wheel built at or after it."""


_VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9]+(\.[A-Za-z0-9]+)*)?")
"""A version as pip takes it after `flydsl==` (PEP 440's public versions, a local label allowed)."""


def wheel_policy(text: str) -> str:
    """The argparse type of `--wheel` (gate, bisect): of-its-time, installed, or a version such as 0.5.0.dev12.

    Anything else never reaches pip: `--wheel 'x;...'` made pip fail and the
    user read the tail of pip's traceback instead of what to write.
    """
    if text in (OF_ITS_TIME, INSTALLED) or _VERSION.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not {OF_ITS_TIME}, {INSTALLED} or a flydsl version: write e.g. "
                                     f"--wheel 0.4.2 (a version published on PyPI), --wheel {INSTALLED} or leave it "
                                     f"out ({OF_ITS_TIME})")


def git_run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def resolve(repo: Path, name: str, role: str) -> str:
    """The full hash of `name` in `repo` (checked by `revisions` first); an error that says what to pass when it is
    none."""
    full = revisions.commit(repo, name, role)
    if full is None:
        ambiguous = ambiguity(repo, name)
        if ambiguous:
            raise FlybenchError(f"{role} {ambiguous}")
        shallow = git_run(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        raise FlybenchError(f"{role} {name!r} is not a commit of {repo}"
                            + ("; it is a shallow clone: run `git fetch --unshallow` there" if shallow else
                               "; give a hash, branch or tag of that repository (`git log --first-parent` lists its "
                               "commits; `git fetch` first if it is newer than the clone)"))
    return full


def ambiguity(repo: Path, name: str) -> str | None:
    """"'NAME' is ambiguous in REPO: ... candidates" when `name` is a short hash that begins several commits there
    (git then answers only that it is no commit), else None."""
    if not re.fullmatch(r"[0-9a-fA-F]{4,39}", name):
        return None
    objects = git_run(repo, "rev-parse", f"--disambiguate={name.lower()}").stdout.split()
    commits = [o for o in objects if git_run(repo, "cat-file", "-t", o).stdout.strip() == "commit"]
    if len(commits) < 2:
        return None
    shown = [git_run(repo, "show", "-s", "--format=%h %cs %s", "--abbrev=12", c).stdout.strip() for c in commits[:10]]
    more = f" (and {len(commits) - 10} more)" if len(commits) > 10 else ""
    return (f"{name!r} is ambiguous in {repo}: {len(commits)} commits begin with it: {'; '.join(shown)}{more}. "
            "Give more digits of the hash")


def toplevel(path: Path) -> Path:
    """The top of the git repository `path` is in; an error that says what `path` is when it is in none."""
    done = git_run(revisions.clone(path, "the repository"), "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise FlybenchError(f"{path} is a git repository without a work tree (a bare clone): pass a clone with one "
                            "(git clone URL FOLDER)")
    return Path(done.stdout.strip())


def changed_files(repo: Path, base: str, head: str) -> list[str]:
    """The files a pull request changes: head against its merge base with base (`git diff base...head`)."""
    done = git_run(repo, "diff", "--name-only", f"{base}...{head}")
    if done.returncode != 0:
        raise FlybenchError(f"git cannot tell what {head[:12]} changes against {base[:12]} in {repo}: "
                            f"{done.stderr.strip()[-200:]}")
    return [line for line in done.stdout.splitlines() if line]


def checkout(repo: Path, where: Path, commit: str) -> Path:
    """A lasting checkout of `commit` at `where`: a git worktree of `repo`, made there or moved to the commit."""
    if (where / ".git").exists():
        if git_run(where, "checkout", "--quiet", "--detach", commit).returncode != 0:
            raise FlybenchError(f"cannot check out {commit[:12]} in {where}: remove that folder or choose another")
        return where
    where.parent.mkdir(parents=True, exist_ok=True)
    done = git_run(repo, "worktree", "add", "--detach", "--force", str(where), commit)
    if done.returncode != 0:
        raise FlybenchError(f"git could not make a worktree of {repo} at {where} ({done.stderr.strip()[-200:]}): "
                            "remove that folder or choose another")
    return where


def work_root() -> Path:
    """Exported trees and installed wheels, shared with flybench.compile.history (under the compile cache)."""
    from flybench.compile.cache import cache_root

    return cache_root() / "history"


class Wheels:
    """Which flydsl package a FlyDSL commit is measured with: the wheel of its time (default), one given
    version for every commit, or the one installed here (`installed`, as the nightly measures)."""

    def __init__(self, repo: Path, policy: str = OF_ITS_TIME, work: Path | None = None) -> None:
        self.repo, self.policy, self.work = repo, policy, work or work_root()
        self._counts: dict[str, int] | None = None

    def version(self, commit: str) -> str | None:
        """The wheel version for `commit`; None for the installed flydsl."""
        from flybench.compile import history

        if self.policy == INSTALLED:
            return None
        if self.policy != OF_ITS_TIME:
            return self.policy
        if self._counts is None:
            self._counts = history.wheel_counts(self.repo, history.published_versions())
            if not self._counts:
                raise FlybenchError("no published FlyDSL wheel matches a tag or dev number of this clone: "
                                    "`git fetch --tags` there, or pass --wheel VERSION or --wheel installed")
        return history.wheel_for(history.named_commits(self.repo, [commit])[0], self._counts)

    def checkout(self, commit: str) -> tuple[Path, list[str], str]:
        """(the commit's exported kernels/ tree, the wheel's directory for the path, a note naming the wheel)."""
        from flybench.compile import history

        version = self.version(commit)
        try:
            src = history.export_kernels(self.repo, history.named_commits(self.repo, [commit])[0], self.work / "trees")
        except subprocess.CalledProcessError as exc:
            raise FlybenchError(f"{commit[:10]} has no kernels/ tree to export (git archive: "
                                f"{(exc.stderr or b'').decode(errors='replace').strip()[-200:]}): is "
                                f"{self.repo} a FlyDSL clone?") from exc
        path = [str(history.install_wheel(version, self.work / "wheels"))] if version else []
        return src, path, f"flydsl {version}" if version else "flydsl installed"


@contextlib.contextmanager
def worktree(repo: Path, commit: str, parent: Path) -> Iterator[Path]:
    """A detached git worktree of `repo` at `commit`, removed afterwards."""
    parent.mkdir(parents=True, exist_ok=True)
    path = parent / f"worktree-{commit[:12]}-{os.getpid()}"
    done = git_run(repo, "worktree", "add", "--detach", str(path), commit)
    if done.returncode != 0:
        raise FlybenchError(f"git worktree add {commit[:10]} failed: {done.stderr.strip()[-300:]}")
    try:
        yield path
    finally:
        git_run(repo, "worktree", "remove", "--force", str(path))
