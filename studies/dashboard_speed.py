"""How fast the dashboard's pages render on a million-row database (a load test; the data is synthetic).

    python -m studies.dashboard_speed [--db /tmp/load.duckdb] [--commits 1000] [--machines 10]

Builds (unless it exists) a database of 10 machines x 1,000 commits x 100
series = 1,000,000 result rows, then times every dashboard page under
streamlit's AppTest: the first load (empty cache: the queries run) and the
reruns after it (served from the cache, as every click or reload is). The rows are labelled as what they are: the subject
is `synthetic-load-test`, machines are `synthetic-NN-<arch>`, and where the
store has a `source` column it says `synthetic-load-test` too. They are not
measurements and must never be shown as such; the database is a throwaway.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from flybench.store import connect

SUBJECT = "synthetic-load-test"
WORKLOADS = ("attention", "moe")
METRICS = {"track_time": "seconds", "track_tflops": "TFLOP/s", "track_gbps": "GB/s",
           "track_roofline": "fraction of roofline", "track_error": "relative error"}
CASES = [f"case{i}" for i in range(5)]
PROVIDERS = ("flydsl", "ck")
PAGES = {"Overview": None, "History": "history", "Compare": "compare", "Regressions": "regressions",
         "Kernel resources": "resources", "Roofline": "roofline"}
APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


def build(db: Path, machines: int, commits: int, seed: int = 0) -> int:
    """Write the synthetic database; returns the number of result rows."""
    rng = np.random.default_rng(seed)
    names = [f"synthetic-{m:02d}-{('gfx942', 'gfx950')[m % 2]}" for m in range(machines)]
    hashes = [f"{rng.integers(1 << 63):016x}{i:024x}" for i in range(commits)]
    dates = pd.date_range("2024-01-01", periods=commits, freq="6h")
    series = [(f"{w}.Quick.{m}", unit, json.dumps({"case": c, "provider": p, "dtype": "bf16"}))
              for w in WORKLOADS for m, unit in METRICS.items() for c in CASES for p in PROVIDERS]
    with connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info('results')").fetchall()}
        conn.execute("INSERT INTO commits SELECT ?, unnest(?::VARCHAR[]), unnest(?::TIMESTAMP[]), 'main'",
                     [SUBJECT, hashes, list(dates)])
        for name in names:
            conn.execute("INSERT INTO machines (name, host, accelerator, arch, cpu) VALUES (?, ?, ?, ?, ?)",
                         [name, name.rsplit("-", 1)[0], name.rsplit("-", 1)[1], name.rsplit("-", 1)[1],
                          "synthetic load test, not a real machine"])
            frame = _machine_rows(rng, name, hashes, series)
            if "source" in columns:
                frame["source"] = SUBJECT
            conn.register("batch", frame)
            conn.execute("INSERT INTO results BY NAME SELECT * FROM batch")
            conn.unregister("batch")
        return int(conn.execute("SELECT count(*) FROM results").fetchone()[0])


def _machine_rows(rng: np.random.Generator, machine: str, hashes: list[str],
                  series: list[tuple[str, str, str]]) -> pd.DataFrame:
    """Every series of one machine over all commits: a level, 1% noise and a 30% step in one series in ten."""
    n, k = len(hashes), len(series)
    level = rng.uniform(1e-4, 1e-2, k)
    steps = np.where(np.arange(k) % 10 == 0, 1.3, 1.0)
    values = level[None, :] * (1 + 0.01 * rng.standard_normal((n, k)))
    values[n // 2:] *= steps
    benchmark = [s[0] for s in series] * n
    time_rows = np.array([s[1] == "seconds" for s in series] * n)
    flat = values.reshape(-1)
    samples = [list(v * (1 + 0.01 * rng.standard_normal(10))) if t else None for v, t in zip(flat, time_rows)]
    return pd.DataFrame({
        "subject": SUBJECT, "machine": machine, "commit_hash": np.repeat(hashes, k), "env_name": "synthetic",
        "benchmark": benchmark, "params": [s[2] for s in series] * n, "unit": [s[1] for s in series] * n,
        "value": flat, "ci_99_a": flat * 0.99, "ci_99_b": flat * 1.01, "samples": samples, "status": "ok",
        "source_file": f"{machine}/synthetic.json",
    })


def time_pages(db: Path, warm_runs: int = 3, only: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Seconds per page: the first load (cache cleared) and the median of the reruns after it.

    One AppTest per page, as one browser session: its first run also pays
    AppTest's own start (it scans the installed packages for components,
    about 1 s here), its reruns are what a visitor gets on every click or
    reload once the queries are cached.
    """
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["FLYBENCH_DB"] = str(db)
    st.cache_data.clear()
    figures: dict[str, dict[str, float]] = {}
    for title, page in PAGES.items():
        if only and title not in only:
            continue
        at = AppTest.from_file(str(APP), default_timeout=900)
        if page:
            at.switch_page(f"views/{page}.py")
        runs = []
        for _ in range(1 + warm_runs):
            start = time.perf_counter()
            at.run()
            runs.append(time.perf_counter() - start)
            if at.exception:
                raise RuntimeError(f"{title}: {at.exception[0].message}")
        figures[title] = {"first": runs[0], "after": statistics.median(runs[1:]), "worst_after": max(runs[1:])}
        print(f"{title:18s} first load {runs[0]:7.2f} s   after: median {figures[title]['after']:6.3f} s, "
              f"worst {figures[title]['worst_after']:6.3f} s", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/flybench-dashboard-load.duckdb"))
    parser.add_argument("--machines", type=int, default=10)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--page", action="append", choices=list(PAGES), help="time only this page (repeatable)")
    args = parser.parse_args(argv)
    if not args.db.exists():
        start = time.perf_counter()
        rows = build(args.db, args.machines, args.commits)
        print(f"built {args.db}: {rows:,} result rows in {time.perf_counter() - start:.1f} s", flush=True)
    figures = time_pages(args.db, args.warm_runs, args.page)
    if args.json:
        args.json.write_text(json.dumps({"db": str(args.db), "pages": figures}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
