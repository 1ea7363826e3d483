"""Whether a path is safe to write onto: every verb that writes a file or a folder asks here first.

A verb writes by opening a path for writing, or by renaming a temporary file
onto it. Done on anything but a regular file, either does something else: a
FIFO blocks the command, `/dev/full` fails it, and a rename replaces the
device node itself (as root, `--accepted /dev/null` would replace the
system's `/dev/null` with a file). So a file is written only where a regular
file is (a link to one is written through) or nothing is yet; a folder is
written into only where a folder is or nothing is yet. Anything else is the
user's mistake, said before any work is done.
"""

from __future__ import annotations

import os
from pathlib import Path

from flybench.errors import FlybenchError
from flybench.file_kinds import describe


def check_file(path: Path) -> None:
    """Refuse `path` as a file to write unless it is a regular file, or nothing yet under folders only."""
    if path.is_dir():
        raise FlybenchError(f"{path} is a directory: name a file, e.g. {path / 'report.md'}")
    _check_parents(path)
    what = describe(path)
    if what not in ("a regular file", "nothing"):
        raise FlybenchError(f"{path} is {what}, not a regular file: flybench writes only regular files; "
                            "name a file path")


def check_folder(path: Path) -> None:
    """Refuse `path` as a folder to write into unless it is a folder, or nothing yet under folders only."""
    _check_parents(path)
    what = describe(path)
    if what not in ("a directory", "nothing"):
        raise FlybenchError(f"{path} is {what}, not a folder: name a folder (new or existing) to write into")


def _check_parents(path: Path) -> None:
    blocker = next((p for p in path.parents if os.path.lexists(p) and not p.is_dir()), None)
    if blocker is not None:
        raise FlybenchError(f"{blocker} is a file, so {path} cannot be written: name another path")
