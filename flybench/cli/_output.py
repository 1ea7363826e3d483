"""`--output FILE` of every verb that writes a report or an export: checked when the arguments are parsed.

A path that cannot be written is an error before the verb does its work
(a bisect can run for an hour), with argparse's exit status 2. A missing
folder on the way is created, as `--db` creates the database's folder: CI
names report files in folders a fresh checkout does not have yet.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def output_path(text: str) -> Path:
    """The argparse type of --output: a file to write (replacing it if it exists), its folder made if missing."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory: name a file, e.g. {path / 'report.md'}")
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise argparse.ArgumentTypeError(f"{blocker} is a file, so {text} cannot be written: name another path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot create the folder {path.parent} for {text}: {exc.strerror}") from exc
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be written here (no permission): name another path")
    return path
