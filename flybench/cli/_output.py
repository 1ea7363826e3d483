"""The paths a verb writes (`--output`, `--json`, `--markdown`, `--isa-diff`, `--dir`, `--into`): checked when the
arguments are parsed.

A path that cannot be written, or that is no regular file or folder
(flybench.write_target), is an error before the verb does its work (a
bisect can run for an hour), with argparse's exit status 2. A missing folder
on the way to an output file is created, as `--db` creates the database's
folder: CI names report files in folders a fresh checkout does not have yet.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from flybench.errors import FlybenchError
from flybench.write_target import check_file, check_folder


def output_path(text: str) -> Path:
    """The argparse type of --output: a file to write (replacing it if it exists), its folder made if missing."""
    path = Path(text)
    try:
        check_file(path)
    except FlybenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot create the folder {path.parent} for {text}: {exc.strerror}") from exc
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be written here (no permission): name another path")
    return path


def output_folder(text: str) -> Path:
    """The argparse type of a folder a verb writes into (created by the verb when missing, not here).

    Made absolute against the current directory: a verb hands it to processes
    that start elsewhere (`git -C REPO worktree add` read a relative
    `gate --workdir` inside the gated repository).
    """
    path = Path(text).expanduser().absolute()
    try:
        check_folder(path)
    except FlybenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return path
