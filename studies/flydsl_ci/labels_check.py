"""A second look at the labels (docs/data/flydsl-labels/check.md): a seeded sample of labels and of unlabelled
sizable moves, each re-judged by a different test on the main runs alone (Welch's t over up to WIDE runs each
side, and the means' change), printed with the values and the range's merged pull requests for a reading by
hand.

    python -m studies.flydsl_ci.labels_check --db STORE --flydsl-repo CLONE --labels labels.json [--seed 36]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from pathlib import Path

from scipy import stats

from studies.flydsl_ci.data import load
from studies.flydsl_ci.labels import MIN_STEP

WIDE = 6
SIZABLE = 0.03  # an unlabelled pair whose next two runs' median is this far from the last three's


def second(values: list[float], i: int) -> tuple[float, float]:
    """(means' change in percent, Welch p) of up to WIDE log values each side of pair (i, i+1)."""
    before = [math.log(v) for v in values[max(0, i - WIDE + 1): i + 1]]
    after = [math.log(v) for v in values[i + 1: i + 1 + WIDE]]
    change = 100 * math.expm1(statistics.mean(after) - statistics.mean(before))
    if len(before) < 2 or len(after) < 2:
        return change, math.nan
    return change, float(stats.ttest_ind(before, after, equal_var=False).pvalue)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.flydsl_ci.labels_check")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args(argv)
    history = load(args.db, args.flydsl_repo)
    labels = json.loads(args.labels.read_text())["labels"]
    labelled = {(tuple(x["key"]), x["first_bad"]) for x in labels}
    near = {(tuple(x["key"]), history.position[x["first_bad"]]) for x in labels}
    moves = []
    for key, s in sorted(history.series.items()):
        pts = [p for p in s.points if p.value and p.commit in history.position]
        values = [p.value for p in pts]
        for i in range(2, len(pts) - 2):
            old, new = statistics.median(values[max(0, i - 2): i + 1]), statistics.median(values[i + 1: i + 3])
            if abs(math.log(new / old)) >= SIZABLE and (key, pts[i + 1].commit) not in labelled and not any(
                    (key, history.position[pts[j].commit]) in near for j in range(max(0, i - 1), min(len(pts), i + 3))):
                moves.append({"key": list(key), "arch": s.arch, "op": s.op, "case": s.case, "dtype": s.dtype,
                              "last_good": pts[i].commit, "first_bad": pts[i + 1].commit,
                              "percent": round(100 * math.expm1(math.log(new / old)), 2)})
    rng = random.Random(args.seed)
    picks = [("label", x) for x in rng.sample(labels, min(args.n, len(labels)))] + [
        ("unlabelled", x) for x in rng.sample(moves, min(args.n, len(moves)))]
    print(f"{len(labels)} labels, {len(moves)} unlabelled sizable moves; seed {args.seed}")
    for n, (what, x) in enumerate(picks, 1):
        s = history.series[tuple(x["key"])]
        pts = [p for p in s.points if p.value and p.commit in history.position]
        values = [p.value for p in pts]
        i = next(j for j, p in enumerate(pts) if p.commit == x["first_bad"]) - 1
        change, p = second(values, i)
        agrees = "step" if p < 0.01 and abs(change) >= 100 * MIN_STEP else "no step"
        med = statistics.median(values)
        row = " ".join(("|" if j == i + 1 else "") + f"{100 * (v / med - 1):+.1f}" for j, v in enumerate(values))
        prs = ", ".join(f"#{c.merged_pr}" if c.merged_pr else c.hash[:8]
                        for c in history.merged_between(x["last_good"], x["first_bad"]))
        kind = f"{x['kind']} {x['direction']} {x['confidence']}" if what == "label" else "unlabelled"
        print(f"{n:2} {what:10} {s.arch} {s.op} {s.case} {s.dtype} {x['last_good'][:8]}..{x['first_bad'][:8]} "
              f"{kind} {x['percent']:+.1f}% | second: {change:+.1f}% p={p:.3g} -> {agrees} | range: {prs}")
        print(f"   values (% of median): {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
