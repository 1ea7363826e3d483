"""What is at a path, in words: a regular file, a folder, a FIFO, a device, a link that leads nowhere.

Reading or writing anything but a regular file does something else than a
file would: a FIFO blocks until someone writes to it (an ingest hung on
one), /dev/zero never ends, a rename onto a device node replaces the node.
Readers (ingest, merge) and writers (flybench.write_target) ask here first,
and say what they found in the words this gives.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def describe(path: Path) -> str:
    """What `path` is, following links: "a regular file", "a FIFO (named pipe)", "a link to X, which cannot be
    followed (...)", "nothing" when no entry is there."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if path.is_symlink():
            return f"a link to {os.readlink(path)}, which cannot be followed ({exc.strerror or exc})"
        if not os.path.lexists(path):
            return "nothing"
        return f"unreadable ({exc.strerror or exc})"
    return next((kind for test, kind in _KINDS if test(mode)), "a special file")


def is_regular(path: Path) -> bool:
    """Whether `path` is a regular file, or a link that leads to one."""
    return describe(path) == "a regular file"
