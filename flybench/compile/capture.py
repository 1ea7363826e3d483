"""Worker-side helpers: load a case's entry function, capture what the compiler prints, word failures.

LLVM writes its diagnostics ("error: no libcall available for ftanh",
"failed to meet occupancy target") straight to file descriptor 2 from C++,
past Python's sys.stderr. A compile that prints an error and still returns
a code object is exactly the silent miscompile flybench must catch, so the
worker redirects descriptors 1 and 2 to a file around each compile.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[2]
_DIAGNOSTIC = re.compile(r"\b(error|warning)\b\s*:", re.IGNORECASE)
MAX_DIAGNOSTICS = 20


def load_entry(entry: str) -> Callable[..., Any]:
    """The function named by "package.module:function" or "relative/path.py:function" (from the repo root)."""
    target, _, attribute = entry.rpartition(":")
    if target.endswith(".py"):
        path = ROOT / target
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist (this kernel ships with flybench's source tree, "
                                    "not with an installed wheel)")
        name = "flybench_own_" + re.sub(r"\W", "_", target)
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, attribute)


@contextmanager
def captured_output(path: Path) -> Iterator[None]:
    """Send descriptors 1 and 2 (and Python's streams) to `path` for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    with path.open("ab") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def diagnostics(text: str) -> list[str]:
    """The compiler's error and warning lines, each once, in order (at most MAX_DIAGNOSTICS)."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        line = line.strip()
        if _DIAGNOSTIC.search(line) and not line.startswith(("File ", "Traceback")):
            seen.setdefault(line[:400], None)
    return list(seen)[:MAX_DIAGNOSTICS]


def errors_in(lines: list[str]) -> list[str]:
    return [line for line in lines if re.search(r"\berror\b\s*:", line, re.IGNORECASE)]


def failure_reason(exc: BaseException) -> str:
    """One line: the exception, and the last frame (the kernel code, usually) where it was raised."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:600]
    frames = traceback.extract_tb(exc.__traceback__)
    return text + (f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else "")
