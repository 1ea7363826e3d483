"""Whose rows a store holds: measured or imported here, or ones that came with the repository.

A fresh clone's store is filled from what the repository ships (the
committed results of machines nobody here ran on: the H200's runs, the
compile-only history). None of it is the user's measurement, so a first
`flybench regressions` must not fail on it as if it were; it says what it
left out and how to judge it too. A machine's rows came with the repository
when every results file they were read from is tracked by git in the
checkout the command runs in. A history the user imported (FlyDSL's CI
month, `flybench import flydsl-ci`) was put in the store to be judged, and
is: `flybench regressions --subject flydsl` after an import is that
history's report.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from flybench.store import queries


def others(db: Path, checkout: Path | None = None) -> dict[tuple[str, str], str]:
    """(subject, machine) -> why its rows are not this checkout's own measurement ('committed to this
    repository'). Machines measured here, imported histories, and everything in a folder that is no git checkout
    are absent."""
    files = queries.machine_files(db)
    tracked = _tracked_results(checkout or Path.cwd())
    found: dict[tuple[str, str], str] = {}
    for (subject, machine), group in files.groupby(["subject", "machine"], sort=True):
        if set(group["source"]) == {"flybench"} and tracked and set(group["source_file"]) <= tracked:
            found[subject, machine] = "committed to this repository"
    return found


def _tracked_results(folder: Path) -> set[str]:
    """`<machine>/<file>` of every results file git tracks in the checkout holding `folder` (as ingest stores a
    row's source file); empty outside a git checkout."""
    try:
        top = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=False)
        if top.returncode != 0:
            return set()
        listed = subprocess.run(["git", "-C", top.stdout.strip(), "ls-files", "-z", "--", "results"],
                                capture_output=True, text=True, check=False)
    except OSError:  # no git on this machine: nothing can be said to be committed
        return set()
    return {"/".join(Path(p).parts[-2:]) for p in listed.stdout.split("\0") if p and len(Path(p).parts) >= 3}
