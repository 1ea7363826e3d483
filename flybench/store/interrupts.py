"""Ctrl-C while the store is written: taken where nothing is half-written, then the command ends as interrupted.

DuckDB turns a SIGINT that lands inside a query into its own error ("Query
interrupted"), and one that lands while it reads a registered DataFrame into
an InvalidInputException naming the frame: an interrupted ingest ended in a
traceback, or named a good results file as one it could not store. Inside
`deferred()`, the first Ctrl-C is noted (and said) and raised as
KeyboardInterrupt at the next `checkpoint()`, which writers call before a
transaction begins, or when the block ends; a second Ctrl-C interrupts at
once, as without it.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class _Noted:
    """The SIGINT handler of a deferred block: the first signal is kept for the next checkpoint."""

    def __init__(self) -> None:
        self.pending = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.pending:
            raise KeyboardInterrupt
        self.pending = True
        print("Ctrl-C: stopping once the file being stored is stored (nothing is left half-written); Ctrl-C again "
              "to stop at once", file=sys.stderr, flush=True)


_active: _Noted | None = None


@contextmanager
def deferred() -> Iterator[None]:
    """Ctrl-C inside the block is raised at a checkpoint (or at its end). A block inside another, or outside the
    main thread (where no handler can be set), changes nothing."""
    global _active
    if _active is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    _active = _Noted()
    previous = signal.signal(signal.SIGINT, _active)
    try:
        yield
        checkpoint()
    finally:
        signal.signal(signal.SIGINT, previous)
        _active = None


def checkpoint() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed in the deferred block: call it where nothing is in flight."""
    if _active is not None and _active.pending:
        raise KeyboardInterrupt
