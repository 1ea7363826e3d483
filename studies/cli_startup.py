"""How long `flybench --help` takes: wall time of a fresh process, the median of several.

    python -m studies.cli_startup [--runs 15] [--verb compare]

Each run starts a new interpreter through the installed `flybench` console
script (the one beside this interpreter), as a user's shell does, so imports
are never warm in the process measured (the OS's file cache is, after the
first run, which is why that run is dropped). `--verb` also times `flybench
VERB --help`, which imports that verb's module and what it needs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def wall_times(command: list[str], runs: int) -> list[float]:
    """Seconds per run of `command`, after one unmeasured run."""
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times[1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--verb", action="append", default=[], help="also time `flybench VERB --help` (repeatable)")
    args = parser.parse_args(argv)
    script = Path(sys.executable).with_name("flybench")
    entry = [str(script)] if script.is_file() else [sys.executable, "-m", "flybench"]
    for words in ([], *([verb] for verb in args.verb)):
        times = wall_times([*entry, *words, "--help"], args.runs)
        print(f"flybench {' '.join([*words, '--help'])}: median {statistics.median(times) * 1e3:.0f} ms "
              f"(min {min(times) * 1e3:.0f}, max {max(times) * 1e3:.0f}; {args.runs} fresh processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
