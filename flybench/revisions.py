"""Revisions and clones that a user or a data file names, checked before git sees them.

git takes every word of its command line that begins with '-' as an option,
wherever it stands before `--`: `--main-ref=--output=FILE` handed to
`git log` made git write over FILE. So a revision that came from a flag, an
environment variable or a stored record goes through `checked` (which
refuses a word git would read as an option, and blanks or control
characters, which no ref name holds) and is resolved with `commit`
(`rev-parse --verify --quiet --end-of-options REV^{commit}`) before any other
git call sees it; the calls after that are handed the full hash.

`clone` says what a path given as a repository is when it is none (missing,
a file, an empty folder): git's own answer ("not a git repository", or a
missing main branch further on) hides which of them it was.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from flybench.errors import FlybenchError


def checked(revision: str, flag: str) -> str:
    """`revision` unchanged when git can only read it as a revision; an error naming `flag` otherwise."""
    if not revision:
        raise FlybenchError(f"{flag} is empty: give a commit hash, branch or tag")
    if revision.startswith("-"):
        raise FlybenchError(f"{flag} {revision!r} begins with '-', so git would read it as an option, not a "
                            "revision: give a commit hash, branch or tag")
    if any(c.isspace() or not c.isprintable() for c in revision):
        raise FlybenchError(f"{flag} {revision!r} holds blanks or control characters, which no revision has: give "
                            "a commit hash, branch or tag")
    return revision


def commit(repo: Path, revision: str, flag: str) -> str | None:
    """The full hash of the commit `revision` names in `repo` (after `checked`), None when it names none there."""
    try:
        done = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                               f"{checked(revision, flag)}^{{commit}}"], capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise FlybenchError("git is not installed; it is needed to read the repository's commits") from exc
    return done.stdout.strip() if done.returncode == 0 else None


def clone(path: Path, flag: str) -> Path:
    """`path` when git finds a repository there; else an error that says what the path is and what to give."""
    try:
        what = (f"{flag} {path} does not exist" if not path.exists() else
                f"{flag} {path} is a file, not a folder" if not path.is_dir() else
                f"{flag} {path} is an empty folder" if not any(path.iterdir()) else None)
    except OSError as exc:
        what = f"{flag} {path} cannot be read ({exc.strerror})"
    if what is None:
        try:
            done = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, text=True)
        except FileNotFoundError as exc:
            raise FlybenchError("git is not installed; it is needed to read the repository's commits") from exc
        if done.returncode == 0:
            return path
        what = f"{flag} {path} is in no git repository"
    raise FlybenchError(f"{what}: give the folder of a clone of the repository (git clone URL FOLDER)")
