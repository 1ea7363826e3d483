"""Compile entries that go wrong on purpose, for the tests of the compile runner's failure handling.

Each takes the case's configuration like a real compile entry. `fail`
raises as a kernel with a bug would, `crash` kills the worker process the
way a compiler segfault does, `hang` never returns (a compiler stuck in a
loop).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def fail(config: dict[str, Any]) -> None:
    raise ValueError(f"tile_k must divide K (config {config})")


def crash(config: dict[str, Any]) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(config: dict[str, Any]) -> None:
    time.sleep(config.get("seconds", 3600))
