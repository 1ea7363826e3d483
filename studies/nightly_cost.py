"""What one more night costs on top of a long stored history: the nightly's import and scan, in CPU time.

A store holds M months of a FlyDSL CI history; the night brings one more
main run (with `--day`, the newest whole day of runs, pull requests' included). The nightly imports the CI's published file (a rolling window: here
the newest month, the night included; records already stored are skipped)
and refreshes the stored scans. The issue it answers: that cost must grow with
the night, not with the stored history.

The months are FlyDSL's real month repeated: copy k has its commits renamed
(`sha1(commit, k)`), its times and run ids shifted by k months, so each copy
is a month of new commits with the real month's values and runner modes. No
clone: the steps are judged without code attribution (a clone cannot know
the synthetic commits). Times are this process's CPU time (DuckDB's threads
included), median of `--repeats` nights, each on a fresh copy of the store;
the store is built once per size.

With `--tree results/flydsl`, each size also times the nightly workflow's own path
(`.github/workflows/nightly.yml`): the store of that size with the tree less its
newest results file ingested, then one more night is `flybench ingest TREE`
(the newest file, the tree's machine-code.jsonl) followed by `flybench regressions
--subject flydsl`, both run as the commands users run; CPU time of the two
processes (start-up included), median of `--repeats`.

    python -m studies.nightly_cost --history ../shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz \\
        --months 1 8 --tree results/flydsl --out docs/data/nightly-cost.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flybench.importers.flydsl_ci.store import import_file
from flybench.regress import stored

MONTH = dt.timedelta(days=31)


def copies(records: list[dict], months: int) -> list[dict]:
    """`months` copies of the month, oldest first; copy 0 is the month as published."""
    out = []
    for k in range(months):
        for r in records:
            shifted = dt.datetime.fromisoformat(r["ts"].replace("Z", "+00:00")) + k * MONTH
            commit = r["commit"] if k == 0 else hashlib.sha1(f"{r['commit']}:{k}".encode()).hexdigest()
            out.append({**r, "commit": commit, "ts": shifted.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "run_id": int(r["run_id"]) + k * 10**9})
    return out


def last_main_run(records: list[dict]) -> set[str]:
    """The run ids of the newest main run (by its last record's time): the night the store does not hold yet."""
    ends: dict[str, str] = {}
    for r in records:
        if r.get("pr") is None:
            ends[str(r["run_id"])] = max(ends.get(str(r["run_id"]), ""), r["ts"])
    newest = max(ends.values())
    return {run for run, end in ends.items() if end == newest}


def last_day(records: list[dict]) -> set[str]:
    """The run ids of the newest day's runs (every run with a record on the newest date, pull requests' included:
    FlyDSL's month ends with 1,254 records of 9 commits on 2026-07-12)."""
    day = max(r["ts"] for r in records)[:10]
    return {str(r["run_id"]) for r in records if r["ts"][:10] == day}


def night(work: Path, document: dict, months: int, repeats: int, tree: Path | None = None,
          day: bool = False) -> dict:
    """Build the store of `months` months less the newest night, then time the night's import and scan."""
    records = copies(document["records"], months)
    tonight = last_day(records) if day else last_main_run(records)
    window_start = max(r["ts"] for r in records)[:10]
    window_start = (dt.date.fromisoformat(window_start) - MONTH).isoformat()
    history, window = work / f"history-{months}.json", work / f"window-{months}.json"
    history.write_text(json.dumps({**document, "records": [r for r in records if str(r["run_id"]) not in tonight]}))
    window.write_text(json.dumps({**document, "records": [r for r in records if r["ts"] >= window_start]}))
    base = work / f"base-{months}.duckdb"
    built = time.monotonic()
    import_file(history, base)
    stored.refresh(base)
    built = time.monotonic() - built
    cpu, wall = [], []
    for i in range(repeats):
        db = work / f"night-{months}-{i}.duckdb"
        shutil.copyfile(base, db)
        began, began_wall = time.process_time(), time.monotonic()
        import_file(window, db)
        stored.refresh(db)
        cpu.append(time.process_time() - began)
        wall.append(time.monotonic() - began_wall)
    row = {"months": months, "records": len(records), "night_records": sum(str(r["run_id"]) in tonight for r in records), "night_cpu_s": round(statistics.median(cpu), 2),
           "night_wall_s": round(statistics.median(wall), 2), "cpu_each": [round(c, 2) for c in cpu],
           "store_built_s": round(built, 1)}
    if tree is not None:
        row["workflow_cpu_each"] = workflow(work, base, tree, months, repeats)
        row["workflow_night_cpu_s"] = statistics.median(row["workflow_cpu_each"])
    return row


def workflow(work: Path, base: Path, tree: Path, months: int, repeats: int) -> list[float]:
    """The nightly workflow's night on `base`: `flybench ingest` of the tree with its newest results file added
    (the store holds the rest), then `flybench regressions`; CPU of both commands, per repeat."""
    full, less = work / "tree-full", work / "tree-less"
    if not full.exists():
        shutil.copytree(tree, full)
        files = [p for p in full.rglob("*.json") if p.parent != full and p.name != "machine.json"]
        newest = max(files, key=lambda p: json.loads(p.read_text()).get("date") or 0)
        shutil.copytree(full, less)
        (less / newest.relative_to(full)).unlink()
    held = work / f"workflow-{months}.duckdb"
    shutil.copyfile(base, held)
    _flybench("ingest", str(less), "--db", str(held))
    cpu = []
    for i in range(repeats):
        db = work / f"workflow-night-{months}-{i}.duckdb"
        shutil.copyfile(held, db)
        began = _children()
        _flybench("ingest", str(full), "--db", str(db))
        _flybench("regressions", "--db", str(db), "--subject", "flydsl")
        cpu.append(round(_children() - began, 2))
    return cpu


def _flybench(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "flybench", *args], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def _children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.nightly_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=Path, required=True, help="FlyDSL's CI history (.json.gz), read in place")
    parser.add_argument("--months", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument("--day", action="store_true",
                        help="the night is the newest whole day of runs (pull requests' included), not one main run")
    parser.add_argument("--tree", type=Path, help="also time the workflow's path with this results tree (results/flydsl)")
    args = parser.parse_args(argv)
    with gzip.open(args.history, "rt") as f:
        document = json.load(f)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for months in args.months:
            rows.append(night(Path(work), document, months, args.repeats, args.tree, args.day))
            print(json.dumps(rows[-1]), flush=True)
    if len(rows) > 1:
        print(f"one more night: {rows[-1]['night_cpu_s']} s of CPU on {rows[-1]['months']} months against "
              f"{rows[0]['night_cpu_s']} s on {rows[0]['months']} ({rows[-1]['night_cpu_s'] / rows[0]['night_cpu_s']:.2f}x)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
