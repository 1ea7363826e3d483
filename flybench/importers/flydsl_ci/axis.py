"""Which commit axis imported records land on: FlyDSL's commits only, each under its full hash.

A subject is one repository's commits (docs/store.md): the regression scan
orders a subject's commits and walks its series along them, so a FlyDSL
commit filed under flybench's subject would sit between flybench's commits.
A subject that holds commits no FlyDSL CI import stored (flybench's own
`flybench ingest` rows) takes FlyDSL's records only when those commits are
shown to be FlyDSL's: the clone has one of them, or, without a clone, the
file measured one of them or the subject is FlyDSL's own (`flydsl`, whose
asv results tree holds flybench's runs of FlyDSL's commits).

FlyDSL's records may name a commit by an abbreviated hash. Stored as given,
`42ae697` and `42ae6972b00d...` would be two commits of the axis, so a short
hash is filed under its full hash: the clone's, else the one full hash
known for the subject (stored or in the same file) that it starts.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from flybench.errors import FlybenchError
from flybench.importers.flydsl_ci.derive import SOURCE
from flybench.importers.git_history import Clone

DEFAULT_SUBJECT = "flydsl"
"""FlyDSL's commits, kept apart from flybench's own (docs/store.md, Schema: one repository per subject)."""
FULL = 40
"""Digits of a full (SHA-1) git hash."""


@dataclass(frozen=True)
class Resolved:
    """Short hashes' full hashes, and the short hashes that matched none (or several)."""

    full: dict[str, str]
    unresolved: frozenset[str]

    def __call__(self, commit: str) -> str:
        return self.full.get(commit, commit)


def resolve(hashes: Iterable[str], known: Iterable[str], clone: Clone | None) -> Resolved:
    """The full hash of each short one of `hashes`: the clone's, else the only one of `known` it starts."""
    candidates = sorted(h for h in set(known) if len(h) == FULL)
    full, unresolved = {}, set()
    for short in {h for h in hashes if len(h) < FULL}:
        info = clone.commits.get(short) if clone is not None else None
        matches = [info.hash] if info is not None else [h for h in candidates if h.startswith(short)]
        if len(matches) == 1:
            full[short] = matches[0]
        else:
            unresolved.add(short)
    return Resolved(full, frozenset(unresolved))


def subject_commits(conn: duckdb.DuckDBPyConnection, subject: str) -> tuple[set[str], set[str]]:
    """(every commit of the subject's axis, those that no FlyDSL CI import stored)."""
    found = conn.execute(
        "SELECT hash, EXISTS (SELECT 1 FROM imported_commits i WHERE i.source = ? AND i.subject = c.subject "
        "AND i.hash = c.hash) FROM commits c WHERE subject = ?", [SOURCE, subject]).fetchall()
    return {h for h, _ in found}, {h for h, imported in found if not imported}


def check_subject(conn: duckdb.DuckDBPyConnection, subject: str, foreign: Collection[str],
                  commits: Collection[str], clone: Clone | None, repo: Path | None) -> None:
    """Refuse FlyDSL's `commits` on a subject whose `foreign` commits (not imported from FlyDSL's CI) are
    another repository's; `clone` (read from `repo`) must have been asked about the foreign commits."""
    if not foreign:
        return
    if clone is not None:
        if any(h in clone.commits for h in foreign):
            return
        evidence = f"a commit of {repo}"
    elif subject == DEFAULT_SUBJECT or not set(foreign).isdisjoint(commits):
        return
    else:
        evidence = "one of this file's commits"
    held = _sources(conn, subject)
    fixes = [f"--subject {DEFAULT_SUBJECT}"] if subject != DEFAULT_SUBJECT else []
    raise FlybenchError(
        f"subject {subject!r} already holds {_plural(len(foreign), 'commit')} that no FlyDSL CI import stored"
        f"{f' ({held})' if held else ''}, and {'it is not' if len(foreign) == 1 else 'none of them is'} {evidence}, "
        f"so FlyDSL's commits would share another repository's commit axis: import into "
        f"{' or '.join([*fixes, 'a new subject name'])}; nothing was imported"
        + ("" if clone is not None else "; if its commits are FlyDSL's, --flydsl-repo CLONE shows it"))


def _sources(conn: duckdb.DuckDBPyConnection, subject: str) -> str:
    """'12 result rows of source 'flybench'': who wrote the subject's rows that are not FlyDSL CI imports."""
    counts = conn.execute("SELECT source, count(*) FROM results WHERE subject = ? AND source IS DISTINCT FROM ? "
                          "GROUP BY source ORDER BY source", [subject, SOURCE]).fetchall()
    return ", ".join(f"{_plural(n, 'result row')} of source {source!r}" for source, n in counts)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
