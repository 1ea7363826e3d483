"""Printing rich tables and text to stdout, or to a file or pipe, without cutting lines.

Every command's terminal output goes through `print_rich`, so a CI log reads
the same tables as a terminal does.
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console, RenderableType
from rich.measure import Measurement


def print_rich(renderable: RenderableType, file: IO[str] | None = None, most: int | None = None) -> None:
    """Print to `file` (default stdout): on a terminal at its width, elsewhere (a CI log, a file, a pipe) at the
    renderable's full width, where rich would otherwise cut every line to 80 columns; never wider than `most`
    columns where given (a table's cells then fold onto more lines, text wraps)."""
    stream = file or sys.stdout
    if getattr(stream, "isatty", lambda: False)():
        console = Console(file=stream)
        Console(file=stream, width=min(console.width, most or console.width)).print(renderable)
        return
    console = Console(file=stream, width=10**6)
    width = max(Measurement.get(console, console.options, renderable).maximum, 80)
    Console(file=stream, width=min(width, most or width)).print(renderable)
