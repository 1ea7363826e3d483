"""Line up the compile-half replay with what FlyDSL's CI measured on the same pull requests.

For every merged pull request that both the replay (`studies/flydsl_replay.py`,
its rows.jsonl) and FlyDSL's imported CI history cover, this puts side by
side:

- what the gate's compile half said: the kernels whose machine code changed
  and the resources that moved, each kernel mapped to the FlyDSL CI op it
  corresponds to (`KernelCase.ci_op`);
- what FlyDSL's CI measured on the pull request's last run before the merge:
  per CI op and AMD architecture (gfx942, gfx950), the median over its
  shapes of `vs_main.delta_pct`, the pull request against main measured in
  the same job. An op's time "moved" when that median is at least
  MOVED_PCT in either direction.

Each pull request then falls in one of: both moved (on the same op), code
alone, time alone, neither. The CI history is read where it lies and never
copied; the table says it is imported.

    python -m studies.replay_lineup --ci-history ../shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz \\
        --flydsl-repo ~/FlyDSL --replay docs/data/flydsl-replay --out docs/data/flydsl-replay/lineup.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from studies.flydsl_replay import merges

MOVED_PCT = 5.0
"""A CI op's time moved on a pull request when the median `vs_main` change of its shapes is at least this (%):
above the 2-5% modes FlyDSL's gfx950 runner switches between whatever the commit."""
AMD = ("gfx942", "gfx950")


def ci_moves(records: list[dict]) -> dict[int, dict[tuple[str, str], float]]:
    """Per pull request: (op, arch) -> the median `vs_main` change (%) over the op's shapes in its last run,
    signed so that negative is slower (CI's metrics are throughputs and speedups)."""
    runs: dict[int, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("pr") and r.get("arch") in AMD and isinstance(r.get("vs_main"), dict) and r["status"] == "ok":
            runs[r["pr"]][r["run_id"]].append(r)
    moves = {}
    for pr, by_run in runs.items():
        last = max(by_run.values(), key=lambda rs: max(r["ts"] for r in rs))
        per_op: dict[tuple[str, str], list[float]] = defaultdict(list)
        for r in last:
            if r["vs_main"].get("delta_pct") is not None:
                per_op[r["op"], r["arch"]].append(float(r["vs_main"]["delta_pct"]))
        moves[pr] = {key: statistics.median(values) for key, values in per_op.items()}
    return moves


def changed_kernels(row: dict) -> list[str]:
    """The kernels a replay row says changed machine code ("machine code changed in 2 kernels: a (gfx942); b ...")."""
    text = row.get("code", "")
    if not text:
        return []
    listed = text.split(": ", 1)[1].split("; ISA diffs")[0]
    return [re.sub(r" \(.*\)$", "", part) for part in listed.split("; ")]


def lineup(rows: list[dict], subjects: dict[str, tuple[str, str]], moves: dict[int, dict]) -> list[dict]:
    from flybench.compile.registry import CASES

    found = []
    for row in rows:
        date, subject = subjects[row["commit"]]
        number = re.search(r"\(#(\d+)\)\s*$", subject)
        if not number or int(number[1]) not in moves or "error" in row:
            continue
        pr = int(number[1])
        kernels = changed_kernels(row)
        code_ops = {CASES[k].ci_op for k in kernels if k in CASES and CASES[k].ci_op}
        moved = {key: pct for key, pct in moves[pr].items() if abs(pct) >= MOVED_PCT}
        time_ops = {op for op, _ in moved}
        if kernels and code_ops & time_ops:
            kind = "both moved"
        elif kernels and moved:
            kind = "both moved, different ops"
        elif kernels:
            kind = "code alone"
        elif moved:
            kind = "time alone"
        else:
            kind = "neither"
        found.append({"pr": pr, "date": date, "commit": row["commit"][:8], "subject": subject,
                      "selection": row.get("selection", ""), "kernels": kernels, "code_ops": sorted(code_ops),
                      "resources": row.get("resources", []), "moved": moved, "kind": kind,
                      "ops_measured": len(moves[pr])})
    return found


def markdown(found: list[dict], source: Path) -> str:
    kinds = defaultdict(int)
    for f in found:
        kinds[f["kind"]] += 1
    lines = [f"Imported: FlyDSL's own CI results, `{source.name}` (read where it lies, not copied). "
             f"{len(found)} merged pull requests are in both the replay and that history.",
             "",
             f"CI time moved: the median `vs_main` change of an op's shapes on gfx942 or gfx950, in the pull "
             f"request's last CI run, at least {MOVED_PCT:g}% (negative: slower).",
             "",
             "| outcome | pull requests |", "| --- | --- |",
             *(f"| {kind} | {n} |" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1])),
             "",
             "| pull request | date | compile half: machine code changed (CI op) | resources moved | "
             "CI time moved (op, arch, median %) | outcome |",
             "| --- | --- | --- | --- | --- | --- |"]
    for f in found:
        code = "; ".join(f["kernels"]) + (f" ({', '.join(f['code_ops'])})" if f["code_ops"] else "") or "none"
        resources = "; ".join(f["resources"][:3]) + (f" (+{len(f['resources']) - 3})"
                                                     if len(f["resources"]) > 3 else "") or "none"
        moved = "; ".join(f"{op} {arch} {pct:+.1f}%" for (op, arch), pct in sorted(f["moved"].items())) or \
            f"none of {f['ops_measured']}"
        lines.append(f"| #{f['pr']} {f['subject'][:60].replace('|', '/')} | {f['date']} | {code} | {resources} | "
                     f"{moved} | {f['kind']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.replay_lineup", description=__doc__.splitlines()[0])
    parser.add_argument("--ci-history", type=Path, required=True, help="FlyDSL's imported CI history (.json.gz)")
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--replay", type=Path, required=True, help="the replay's folder (rows.jsonl)")
    parser.add_argument("--since", default="2026-06-01")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with gzip.open(args.ci_history, "rt") as f:
        records = json.load(f)["records"]
    rows = [json.loads(line) for line in (args.replay / "rows.jsonl").read_text().splitlines()]
    subjects = {h: (d, s) for h, d, s in merges(args.flydsl_repo, args.since)}
    found = lineup([r for r in rows if r["commit"] in subjects], subjects, ci_moves(records))
    args.out.write_text(markdown(found, args.ci_history))
    print(markdown(found, args.ci_history))
    return 0


if __name__ == "__main__":
    sys.exit(main())
