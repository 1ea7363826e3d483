"""What a local clone of the measured repository says about commits: order on main, dates, titles.

CI records carry job completion times, which order commits only roughly (a
job can finish after a later push's job) and say nothing about which branch
a commit is on: FlyDSL's `pr: null` marks push-to-main runs and also pull
request runs whose PR it could not resolve. A clone settles both: main's
first-parent history gives the order and the membership, the commit title
gives the pull request a squash merge came from.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from flybench import revisions
from flybench.errors import FlybenchError

MAIN_REFS = ("origin/main", "refs/heads/main", "main", "HEAD")
"""Tried in order when no main ref is given: a normal clone's origin/main, a mirror's main, else HEAD."""
_MERGED_PR = re.compile(r"\(#(\d+)\)\s*$")


@dataclass(frozen=True)
class CommitInfo:
    """One commit as the clone knows it; `order_date` sorts main's commits in main's order."""

    hash: str
    date: datetime
    order_date: datetime
    title: str
    on_main: bool
    main_position: int | None
    merged_pr: int | None


@dataclass(frozen=True)
class Clone:
    """The commits asked about that the clone has (keyed as asked and by full hash), and its main tip's date.

    A commit the clone lacks although the clone's main is newer is not on
    main (a force-pushed branch, a fork); one newer than the tip is unknown.
    """

    commits: dict[str, CommitInfo]
    main_tip: datetime
    asked: frozenset[str]
    shallow: bool = False

    @property
    def trusted(self) -> bool:
        """Whether a commit the clone lacks says anything: not in a shallow clone (its history is cut), nor in one
        that holds none of the commits asked about (a clone of another repository)."""
        return not self.shallow and bool(self.commits)

    def on_main(self, commit: str, seen: datetime) -> bool | None:
        info = self.commits.get(commit)
        if info is not None:
            return info.on_main
        return False if seen < self.main_tip and self.trusted else None


def read_clone(repo: str | Path, commits: Iterable[str], main_ref: str | None = None) -> Clone:
    """Info on each of `commits` that the clone has (the others are left out), keyed as asked and by full hash.

    On main, `order_date` is the committer date raised where needed to keep
    main's first-parent order (a rebased commit can carry an older date than
    its parent); elsewhere it is the committer date.
    """
    root = Path(repo)
    ref = main_commit(root, main_ref)
    order = {h: i for i, h in enumerate(_git(root, "rev-list", "--first-parent", "--reverse", ref).split())}
    tip = _git(root, "log", "-1", "--format=%cI", ref).strip()
    main_tip = datetime.fromisoformat(tip).astimezone(timezone.utc).replace(tzinfo=None)
    wanted = sorted({c.lower() for c in commits})
    known = _existing(root, wanted) if wanted else {}
    shallow = _git(root, "rev-parse", "--is-shallow-repository").strip() == "true"
    if not known:
        return Clone({}, main_tip, frozenset(wanted), shallow)
    log = _git(root, "log", "--no-walk=unsorted", "--stdin", "--format=%H%x00%cI%x00%s",
               stdin="\n".join(known.values()) + "\n")
    by_full = {info.hash: info for info in (_info(line, order) for line in log.splitlines())}
    by_full = _keep_main_order(by_full)
    found = {asked: by_full[full] for asked, full in known.items() if full in by_full}
    return Clone({**found, **{info.hash: info for info in found.values()}}, main_tip, frozenset(wanted), shallow)


def main_history(repo: str | Path, main_ref: str | None = None) -> list[CommitInfo]:
    """Main's first-parent history, oldest first: the commits (and merged PRs) inside a step's range."""
    root = Path(repo)
    ref = main_commit(root, main_ref)
    log = _git(root, "log", "--first-parent", "--reverse", "--format=%H%x00%cI%x00%s", ref)
    lines = log.splitlines()
    order = {line.split("\x00", 1)[0]: i for i, line in enumerate(lines)}
    return [_info(line, order) for line in lines]


def _info(line: str, main_order: dict[str, int]) -> CommitInfo:
    """A `%H%x00%cI%x00%s` log line; a squash merge's title ends in `(#N)`, which names its PR."""
    full, date_text, title = line.split("\x00", 2)
    date = datetime.fromisoformat(date_text).astimezone(timezone.utc).replace(tzinfo=None)
    position = main_order.get(full)
    merged = _MERGED_PR.search(title) if position is not None else None
    return CommitInfo(full, date, date, title, position is not None, position, int(merged.group(1)) if merged else None)


def _keep_main_order(found: dict[str, CommitInfo]) -> dict[str, CommitInfo]:
    """Main's commits get strictly increasing order dates along main (one second past the previous at least)."""
    previous: datetime | None = None
    for info in sorted((i for i in found.values() if i.on_main), key=lambda i: i.main_position or 0):
        if previous is not None and info.order_date <= previous:
            found[info.hash] = CommitInfo(info.hash, info.date, previous + timedelta(seconds=1), info.title,
                                          True, info.main_position, info.merged_pr)
        previous = found[info.hash].order_date
    return found


def _existing(root: Path, hashes: list[str]) -> dict[str, str]:
    """The given (possibly abbreviated) hashes that name commits in the clone, with their full hashes."""
    out = _git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin="\n".join(hashes) + "\n")
    answers = [line.split() for line in out.splitlines()]
    return {asked: parts[0] for asked, parts in zip(hashes, answers) if len(parts) == 2 and parts[1] == "commit"}


def main_commit(root: Path, main_ref: str | None) -> str:
    """The full hash of main's tip: of `main_ref` when given (checked by `revisions` before git reads it), else of
    the first of MAIN_REFS the clone has. `root` is checked to be a clone first, so a missing path, a file or an
    empty folder is named as such rather than as a clone without a main branch."""
    revisions.clone(root, "--flydsl-repo")
    if main_ref is not None:
        tip = revisions.commit(root, main_ref, "--main-ref")
        if tip is None:
            raise FlybenchError(f"--main-ref {main_ref!r} is not a commit of {root}: give main's branch there, e.g. "
                                "origin/main (`git -C CLONE branch -a` lists them), or leave --main-ref out")
        return tip
    for ref in MAIN_REFS:
        if tip := revisions.commit(root, ref, "--main-ref"):
            return tip
    raise FlybenchError(f"{root}: no main branch found (tried {', '.join(MAIN_REFS)}); pass --main-ref")


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise FlybenchError("git is not installed; it is needed to read --flydsl-repo") from exc
    if done.returncode != 0:
        raise FlybenchError(f"{root}: git {args[0]} failed: {done.stderr.strip() or done.returncode} "
                            "(is it a clone of the measured repository?)")
    return done.stdout
