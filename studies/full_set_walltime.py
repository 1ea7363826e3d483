"""The full shape set's wall time on one GPU, measured across calls of a few minutes each.

Each call measures workloads one after another with `flybench run --set full
-w W --gpus 1 --resume --max-minutes M`, where M is what is left of this
call's budget: asv's results and the records of every finished invocation
are saved in the results tree, and the next call resumes where this one
stopped. The wall time of every `flybench run` call is added to its
workload's total in a JSON state file; when every workload is complete the
file holds the full set's wall time per workload (start-up of each call
included, which the file counts as calls per workload).

    python -m studies.full_set_walltime --state full-walltime.json --minutes 8.5 --machine h200-full
    # again, until it prints "complete"
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from flybench.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[1]
MARGIN_S = 45.0
"""Left for the start-up of a `flybench run` call and the merge after its last invocation."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, required=True, help="JSON file kept between calls")
    parser.add_argument("--minutes", type=float, default=8.5, help="this call's budget")
    parser.add_argument("--machine", default=None, help="asv machine name (keep it the same across calls)")
    parser.add_argument("-w", "--workload", action="append", help="only these workloads (default: all)")
    args = parser.parse_args()
    state = json.loads(args.state.read_text()) if args.state.is_file() else {"workloads": {}}
    start = time.monotonic()
    for workload in args.workload or list(WORKLOADS):
        entry = state["workloads"].setdefault(workload, {"wall_s": 0.0, "calls": 0, "complete": False})
        if entry["complete"]:
            continue
        left_s = args.minutes * 60 - (time.monotonic() - start) - MARGIN_S
        if left_s < 60:
            break
        argv = [sys.executable, "-m", "flybench", "run", "--set", "full", "-w", workload, "--gpus", "1", "--resume",
                "--max-minutes", f"{left_s / 60:.2f}", *(["--machine", args.machine] if args.machine else [])]
        began = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        entry["wall_s"] += time.perf_counter() - began
        entry["calls"] += 1
        sys.stdout.write(done.stdout[-2000:])
        if done.returncode == 2:
            raise SystemExit(f"flybench run refused {workload}: {done.stderr.strip()[-800:]}")
        entry["complete"] = re.search(r"^--max-minutes: \d+ cases not started", done.stdout, re.M) is None
        args.state.write_text(json.dumps(state, indent=1))
        if not entry["complete"]:
            break
    done_all = all(state["workloads"].get(w, {}).get("complete") for w in args.workload or WORKLOADS)
    for workload, entry in state["workloads"].items():
        print(f"{workload}: {entry['wall_s']:.1f} s over {entry['calls']} calls"
              + ("" if entry["complete"] else " (not complete yet)"))
    print("complete" if done_all else "not complete: call again")


if __name__ == "__main__":
    main()
