"""How fast are ingest and the dashboard's queries on a nightly-sized history?

Writes a load-test results tree in asv's format 2 (10 machines x 100 commits
= 1,000 files; 100 benchmarks x 10 parameter combinations = 1,000 rows per
file, about a million rows; synthetic values, in a temporary directory,
never shown anywhere), ingests it, re-ingests it (nothing changed), and
times the queries behind the dashboard's History and Overview pages, each
opening the database read-only as the dashboard does. Run:

    python -m studies.store_scale [--machines 10 --commits 100 --benchmarks 100]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from flybench.store import ingest, queries

COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
           "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
PARAMS = [["'case0'", "'case1'", "'case2'", "'case3'", "'case4'"], ["'torch'", "'flex'"], ["'bf16'"]]


def write_tree(root: Path, machines: int, commits: int, benchmarks: int, samples: int) -> int:
    """The asv results tree; returns the number of result rows written."""
    names = [f"load{b // 10}.Quick.track_time_{b % 10}" for b in range(benchmarks)]
    (root / "benchmarks.json").write_text(json.dumps({**{n: {
        "name": n, "param_names": ["case", "provider", "dtype"], "params": PARAMS, "type": "time",
        "unit": "seconds", "version": "v1"} for n in names}, "version": 2}))
    rng = random.Random(0)
    combos = len(PARAMS[0]) * len(PARAMS[1]) * len(PARAMS[2])
    for m in range(machines):
        machine = root / f"load-m{m}"
        machine.mkdir()
        (machine / "machine.json").write_text(json.dumps({"machine": f"load-m{m}", "cpu": "load test", "version": 1}))
        for c in range(commits):
            results = {}
            for name in names:
                values = [rng.gauss(1e-3, 1e-5) for _ in range(combos)]
                results[name] = [values, PARAMS, "v1", 0, 1.0, [v * 0.99 for v in values], [v * 1.01 for v in values],
                                 [v * 0.995 for v in values], [v * 1.005 for v in values], [1] * combos,
                                 [samples] * combos, [[v] * samples for v in values]]
            commit = f"{c:08x}{m:032x}"
            (machine / f"{commit[:8]}-existing-py_load.json").write_text(json.dumps({
                "commit_hash": commit, "env_name": "existing-py_load", "date": 1_700_000_000_000 + c * 3_600_000,
                "params": {"machine": f"load-m{m}", "python": "load"}, "python": "load", "requirements": {},
                "env_vars": {}, "result_columns": COLUMNS, "results": results, "durations": {}, "version": 2}))
    return machines * commits * benchmarks * combos


def _timed(call, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=10)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--benchmarks", type=int, default=100)
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, db = Path(tmp) / "results", Path(tmp) / "load.duckdb"
        root.mkdir()
        rows = write_tree(root, args.machines, args.commits, args.benchmarks, args.samples)
        start = time.perf_counter()
        report = ingest(root, db, subject="load-test")
        first = time.perf_counter() - start
        start = time.perf_counter()
        ingest(root, db, subject="load-test")
        again = time.perf_counter() - start
        opening = _timed(lambda: queries.table_counts(db))
        print(f"{rows:,} rows in {args.machines * args.commits} files: ingest {first:.1f} s "
              f"({rows / first:,.0f} rows/s); re-ingest of unchanged files {again:.2f} s")
        print(f"{report.summary()}")
        print(f"opening the database read-only for a query (counting its tables): {opening * 1e3:.0f} ms")
        for label, machines in (("one machine", ["load-m3"]), (f"all {args.machines} machines", None)):
            history = _timed(lambda on=machines: queries.benchmark_history(db, "load5.Quick.track_time_3", on))
            overview = _timed(lambda on=machines: queries.latest_cases(db, on[0] if on else None))
            print(f"dashboard queries on {label}: History (one benchmark) {history * 1e3:.0f} ms; "
                  f"Overview (newest row of every series) {overview * 1e3:.0f} ms")

if __name__ == "__main__":
    main()
