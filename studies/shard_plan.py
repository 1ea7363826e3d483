"""The deal's predicted wall time on 2, 4 and 8 GPUs, from stored durations, against the ideal split.

Reads the case records of a machine's folder (or one .cases.jsonl file),
takes each case's latest `measure_s` plus the per-case overhead
(flybench.shard.CASE_OVERHEAD_S), deals them as `flybench run --gpus N`
would, and prints per N the longest list (the predicted wall time, less the
few seconds of asv start-up each worker pays per workload), the ideal split
(total / N), their ratio, and the longest case, which no deal can split:
once total / N falls below it, it sets the floor. Predictions from stored
durations, not measurements.

    python -m studies.shard_plan results/flybench/dev-h200 --set quick --gpus 2 4 8 [--out plan.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from flybench import shard


def plan(durations: dict, counts: list[int]) -> dict:
    cases = shard.estimate(sorted(durations), durations)
    total = shard.load(cases)
    longest = max(cases, key=lambda c: c.seconds)
    rows = []
    for n in counts:
        lists = shard.deal(cases, n)
        wall = max(shard.load(x) for x in lists)
        ideal = total / n
        rows.append({"gpus": n, "predicted_s": wall, "ideal_s": ideal, "ratio": wall / ideal,
                     "floor_s": longest.seconds, "floor_binds": longest.seconds >= ideal})
    return {"cases": len(cases), "total_s": total, "longest_case": list(longest.key),
            "longest_s": longest.seconds, "case_overhead_s": shard.CASE_OVERHEAD_S, "deals": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("durations", type=Path, help="a machine's folder of a results tree, or a .cases.jsonl file")
    parser.add_argument("--set", dest="shape_set", default=None, help="only this shape set's cases")
    parser.add_argument("--gpus", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--out", type=Path, help="write the figures as JSON too")
    args = parser.parse_args()
    durations = {k: v for k, v in shard.stored_durations(args.durations).items()
                 if args.shape_set is None or k[1] == args.shape_set}
    if not durations:
        raise SystemExit(f"no case record with measure_s in {args.durations}")
    report = {"source": str(args.durations), "shape_set": args.shape_set, **plan(durations, args.gpus)}
    print(f"{report['cases']} cases with a stored duration, {report['total_s']:.0f} s in all (each plus "
          f"{shard.CASE_OVERHEAD_S} s overhead); predictions from stored durations")
    print(f"longest case: {' '.join(report['longest_case'])}, {report['longest_s']:.1f} s")
    for row in report["deals"]:
        print(f"{row['gpus']} GPUs: predicted {row['predicted_s']:.1f} s, ideal {row['ideal_s']:.1f} s, "
              f"{row['ratio']:.3f}x the ideal" + ("; the longest case sets the floor" if row["floor_binds"] else ""))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
