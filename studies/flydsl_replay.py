"""Replay the gate's compile half over FlyDSL's merged pull requests: what each would have been told.

For every first-parent merge of a FlyDSL clone's main in a window (newest
first), `flybench gate MERGE^1 MERGE --flydsl-repo CLONE --no-timing` runs as
a pull request's CI would run it, with the wheel of each commit's time and
one cache shared by all of them (so a kernel neither side changed compiles
once). Each pull request's JSON report and comment go to OUT, and a table
(pull request, date, kernels selected, code and resources changed, verdict,
seconds) to OUT/table.md. A run cut short keeps what it finished; a merge
already in OUT is not run again.

    python -m studies.flydsl_replay --flydsl-repo ~/FlyDSL --since 2026-06-01 --out docs/data/flydsl-replay \\
        --cache /tmp/replay-cache --budget-minutes 30
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path


def merges(repo: Path, since: str) -> list[tuple[str, str, str]]:
    """(hash, date, subject) of main's first-parent commits since `since`, newest first."""
    out = subprocess.run(["git", "-C", str(repo), "log", "--first-parent", f"--since={since}",
                          "--format=%H%x09%cs%x09%s", "main"], capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("\t", 2)) for line in out.splitlines() if line]  # type: ignore[misc]


def replay_one(repo: Path, commit: str, out: Path, cache: Path) -> dict:
    report = out / f"{commit[:8]}.json"
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "flybench", "gate", f"{commit}^1", commit, "--flydsl-repo",
                           str(repo), "--no-timing", "--workdir", str(cache / "work" / commit[:8]), "--cache",
                           str(cache), "--json", str(report), "--markdown", str(out / f"{commit[:8]}.md")],
                          capture_output=True, text=True)
    seconds = time.monotonic() - began
    if not report.is_file():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"commit": commit, "status": done.returncode, "error": tail[:300], "seconds": round(seconds)}
    data = json.loads(report.read_text())
    notes = data["notes"]
    return {"commit": commit, "status": done.returncode, "seconds": round(seconds),
            "selection": next((n for n in notes if n.startswith("compile selection:")), ""),
            "code": next((n for n in notes if n.startswith("machine code changed")), ""),
            "resources": [f"{r['name']} {r['metric']} {r['base']:g} -> {r['head']:g} on {r['arch']}"
                          for r in data["resources"]],
            "broken": [c["params"] for c in data["cases"] if c["verdict"] == "broken"],
            "not_compared": [c["params"] for c in data["cases"] if c["verdict"] == "incomparable"]}


def table(rows: list[dict], subjects: dict[str, tuple[str, str]]) -> str:
    lines = ["| pull request | date | selected | machine code changed | resources changed | verdict | s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        date, subject = subjects[row["commit"]]
        number = re.search(r"\(#(\d+)\)\s*$", subject)
        name = f"#{number[1]}" if number else row["commit"][:8]
        if "error" in row:
            lines.append(f"| {name} | {date} | - | - | - | could not run: {row['error']} | {row['seconds']} |")
            continue
        selected = re.sub(r"^compile selection: ", "", row["selection"]).split(", built from")[0].split(":")[0]
        code = re.sub(r"^machine code changed in ", "", row["code"]).split("; ISA diffs")[0] or "none"
        verdict = {0: "pass", 1: "broken kernel", 2: "bad input"}.get(row["status"], f"exit {row['status']}")
        if row.get("not_compared"):
            verdict += f"; {len(row['not_compared'])} kernel x target failed at head only, sides on different wheels"
        resources = "; ".join(row["resources"][:4]) + (f" (+{len(row['resources']) - 4})"
                                                         if len(row["resources"]) > 4 else "") or "none"
        lines.append(f"| {name} | {date} | {selected} | {code} | {resources} | {verdict} | {row['seconds']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.flydsl_replay", description=__doc__.splitlines()[0])
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--since", default="2026-06-01")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--budget-minutes", type=float, default=60.0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows_file = args.out / "rows.jsonl"
    done = {json.loads(line)["commit"]: json.loads(line) for line in rows_file.read_text().splitlines()} \
        if rows_file.is_file() else {}
    found = merges(args.flydsl_repo, args.since)
    subjects = {h: (d, s) for h, d, s in found}
    start = time.monotonic()
    for number, (commit, date, subject) in enumerate(found, start=1):
        if commit in done:
            continue
        if time.monotonic() - start > 60 * args.budget_minutes:
            print(f"budget spent: {len(done)} of {len(found)} merges replayed", flush=True)
            break
        row = replay_one(args.flydsl_repo, commit, args.out, args.cache)
        done[commit] = row
        with rows_file.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{number}/{len(found)}] {commit[:8]} {subject[:60]}: {row.get('selection') or row.get('error')} "
              f"({row['seconds']} s)", flush=True)
    rows = [done[h] for h, _, _ in found if h in done]
    (args.out / "table.md").write_text(
        f"{len(rows)} of {len(found)} first-parent merges of FlyDSL's main since {args.since}, newest first.\n\n"
        + table(rows, subjects))
    return 0


if __name__ == "__main__":
    sys.exit(main())
