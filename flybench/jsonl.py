"""Record files beside asv's results: one JSON object a line, appended durably, read back line by line.

The case records (flybench.measure.record) and the counter records
(flybench.counters.record) are such files. asv runs one benchmark process at
a time, so appends never interleave; a process killed mid-write leaves a
torn last line, which a reader skips with a warning instead of failing, as
it skips a line that is not UTF-8 text and any line its format's check
refuses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flybench.errors import FlybenchError
from flybench.file_kinds import describe


def beside_results(results_dir: Path, machine: str, commit: str, env: str, suffix: str) -> Path:
    """asv's `<machine>/<commit8>-<env>.json` with `suffix` (one asv ignores) in place of `.json`."""
    from asv.results import get_filename

    results_file = results_dir / get_filename(machine, commit, env)
    return results_file.with_name(results_file.stem + suffix)


def append(path: Path, line: str) -> None:
    """Append one line and make it durable before the process can die."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def check_regular(path: Path) -> None:
    """An error unless `path` is a regular file (or a link to one): a FIFO named like a record file blocked
    `flybench run --durations` and `--resume` until someone killed them, and /dev/zero never ends."""
    what = describe(path)
    if what != "a regular file":
        raise FlybenchError(f"{path} is {what}, not a record file flybench writes, so it was not read: remove it "
                            "(or move it out of the results tree) and run again")


def read(path: Path, check: Callable[[dict[str, Any]], None]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every object `check` accepts, in file order, and a warning per line skipped; an error, before anything is
    opened, for a path that is no regular file (`check_regular`).

    `check` raises ValueError, KeyError or TypeError for an object its format
    cannot use, and may normalise the object in place.
    """
    check_regular(path)
    records, warnings = [], []
    with path.open("rb") as lines:  # decoded line by line: bytes that are not UTF-8 cost their line, not the file
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                if type(record) is not dict:
                    raise ValueError("a line must hold one JSON object")
                check(record)
            except (ValueError, KeyError, TypeError) as exc:
                warnings.append(f"{path}, line {number} skipped: {type(exc).__name__}: {exc}")
                continue
            records.append(record)
    return records, warnings
