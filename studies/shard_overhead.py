"""What `--gpus 1` costs: the same selection through `flybench run` as it is and through one worker.

Runs the selection both ways, in alternating order (plain, workers, workers,
plain, ...), each into a machine of its own so neither replaces the other's
results, and writes the wall times and their ratio as JSON. The target is
`--gpus 1` within 3% of the plain run.

    python -m studies.shard_overhead --set quick -w diffusion_attention -p triton -p torch -d bf16 \\
        --machine-prefix h200 --repeats 2 --out shard-overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str]) -> tuple[float, int]:
    print(f"== flybench run {' '.join(argv)}", flush=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flybench", "run", *argv], cwd=ROOT)
    wall = time.perf_counter() - start
    print(f"== exit {done.returncode}, {wall:.1f} s", flush=True)
    return wall, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", dest="shape_set", default="quick")
    parser.add_argument("-w", "--workload", action="append", default=[])
    parser.add_argument("-p", "--provider", action="append", default=[])
    parser.add_argument("-d", "--dtype", action="append", default=[])
    parser.add_argument("--machine-prefix", default="overhead")
    parser.add_argument("--repeats", type=int, default=1, help="pairs of runs, their order alternating")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    selection = ["--set", args.shape_set, *[a for flag, values in (("-w", args.workload), ("-p", args.provider),
                                                                    ("-d", args.dtype)) for v in values
                                            for a in (flag, v)]]
    ways = {"plain": selection + ["--machine", f"{args.machine_prefix}-plain"],
            "gpus 1": selection + ["--gpus", "1", "--machine", f"{args.machine_prefix}-gpus1"]}
    walls: dict[str, list[float]] = {way: [] for way in ways}
    codes: dict[str, list[int]] = {way: [] for way in ways}
    for repeat in range(args.repeats):
        for way in (list(ways) if repeat % 2 == 0 else list(reversed(ways))):
            wall, code = timed(ways[way])
            walls[way].append(wall)
            codes[way].append(code)
    ratio = statistics.median(walls["gpus 1"]) / statistics.median(walls["plain"])
    report = {"selection": selection, "walls_s": walls, "exit_codes": codes, "ratio_gpus1_over_plain": ratio,
              "target": "at most 1.03"}
    args.out.write_text(json.dumps(report, indent=1))
    print(f"plain {statistics.median(walls['plain']):.1f} s, --gpus 1 {statistics.median(walls['gpus 1']):.1f} s: "
          f"{ratio:.3f}x (target: at most 1.03)")


if __name__ == "__main__":
    main()
