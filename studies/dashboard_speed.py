"""How fast the dashboard's pages render in a real browser on a million-row database (a load test; synthetic data).

    python -m studies.dashboard_speed [--db /tmp/load.duckdb] [--commits 1000] [--machines 10] [--page History]
    python -m studies.dashboard_speed --cpu --real --db /tmp/real.duckdb   # server CPU per render, real data

`--cpu` reports what does not depend on how loaded the machine is: the
server's own CPU seconds (user + system of the streamlit process, every
thread) per render, warm: each page is opened once to fill the query cache,
then opened again in a new session (its "first render" as a second visitor
sees it) and its sidebar's "Imported runs" choice changed (a widget change).
`--real` builds the database, when it does not exist, from what a fresh
clone holds: `flybench ingest` of the committed results and `flybench import
flydsl-ci` of FlyDSL's CI month (`--flydsl-ci FILE`); its imported rows are
FlyDSL's measurements, not flybench's.

Builds (unless it exists) a database of 10 machines x 1,000 commits x 100
series = 1,000,000 result rows, stores its regressions as `flybench ingest`
does (a no-op when they are current), starts the dashboard on it (`streamlit run`,
as `flybench dashboard` does) and drives headless Chromium through every
page: the first render once the server is up (the page's queries run for the
first time), then a widget change on the page (its rerun, served from the
cache where the queries did not change). A render ends when Streamlit's
script is done and every chart has drawn. The rows are labelled as what they
are: the subject is `synthetic-load-test`, machines are
`synthetic-NN-<arch>`, the `source` is `synthetic-load-test` too. They are
not measurements and must never be shown as such; the database is a throwaway.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flybench.regress import stored
from flybench.store import connect, heads

SUBJECT = "synthetic-load-test"
WORKLOADS = ("attention", "moe")
METRICS = {"track_time": "seconds", "track_tflops": "TFLOP/s", "track_gbps": "GB/s",
           "track_roofline": "fraction of roofline", "track_error": "relative error"}
CASES = [f"case{i}" for i in range(5)]
PROVIDERS = ("flydsl", "ck")
PAGES = {"Overview": "overview", "History": "history", "Compare": "compare", "Pull request": "pull_request",
         "Regressions": "regressions", "Kernel resources": "resources", "Roofline": "roofline",
         "Model lane": "model"}
WIDGETS = {"History": ("Logarithmic value axis",), "Compare": ("two machines", "two commits")}
"""What each page's changes click in turn (a toggle, or a radio's options alternately, so every click changes the
value); the other pages pick one more Machine in the sidebar."""
NO_RERUN_S = 15
"""A change whose click started no rerun by then is reported and left out of the figures."""
_WATCH = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    window.__flybenchRerun?.disconnect();
    window.__flybenchRan = false;
    window.__flybenchRerun = new MutationObserver(records => {  // a fast rerun may be over before this runs
        if (records.some(r => r.oldValue === 'running')
            || app.getAttribute('data-test-script-state') === 'running') window.__flybenchRan = true;
    });
    window.__flybenchRerun.observe(app, {attributes: true, attributeOldValue: true,
                                         attributeFilter: ['data-test-script-state']});
}"""
"""Notes when Streamlit's script starts running again, so a change counts until that rerun is over however fast."""


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
        heads.refresh(conn, SUBJECT)
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


def time_pages(db: Path, changes: int = 3, only: list[str] | None = None,
               timeout_s: float = 300.0) -> dict[str, dict[str, Any]]:
    """Seconds per page in Chromium: the first render, and the median and worst of `changes` widget changes.

    One server for all pages, started before the clock runs, with an empty
    cache: each page's first render pays for its own queries (and for those
    it shares with the pages before it, which then come from the cache).
    """
    from tests.browser.harness import browser, chromium, load, serve

    executable = chromium()
    if executable is None:
        raise SystemExit("chromium is not installed: apt-get install -y chromium")
    figures: dict[str, dict[str, Any]] = {}
    with serve(db.resolve()) as url, browser(executable) as page:
        for title in only or PAGES:  # the pages asked for in the order asked, else all in the app's order
            name = PAGES[title]
            start = time.perf_counter()
            try:
                load(page, url, name, charts=0, timeout_ms=int(timeout_s * 1000))
            except Exception as exc:  # a page that does not finish within the limit is reported as such
                figures[title] = {"first": None, "note": f"not done within {timeout_s:.0f} s ({type(exc).__name__})"}
                print(f"{title:18s} first render over {timeout_s:.0f} s", flush=True)
                continue
            first = time.perf_counter() - start
            runs = [r for r in (_change(page, title, timeout_s, i) for i in range(changes)) if r is not None]
            figures[title] = {"first": first, "change": statistics.median(runs) if runs else None,
                              "worst_change": max(runs, default=None)}
            print(f"{title:18s} first render {first:7.2f} s   widget change: "
                  + (f"median {statistics.median(runs):6.2f} s, worst {max(runs):6.2f} s" if runs else "no widget"),
                  flush=True)
    return figures


def cpu_per_render(db: Path, changes: int = 4, only: list[str] | None = None,
                   timeout_s: float = 300.0) -> dict[str, dict[str, Any]]:
    """Server CPU seconds per page: a warm first render (a new session, the queries cached by an earlier visit)
    and the median and worst of `changes` changes of the sidebar's imported-runs choice."""
    from tests.browser.harness import browser, chromium, load, server

    executable = chromium()
    if executable is None:
        raise SystemExit("chromium is not installed: apt-get install -y chromium")
    figures: dict[str, dict[str, Any]] = {}
    with server(db.resolve()) as (url, process), browser(executable) as page:
        def cpu() -> float:
            return _cpu_seconds(process.pid)

        for title in only or PAGES:
            name = PAGES[title]
            timeout_ms = int(timeout_s * 1000)
            load(page, url, name, charts=0, timeout_ms=timeout_ms)  # cold: fills the cache
            before = cpu()
            load(page, url, name, charts=0, timeout_ms=timeout_ms)  # a new session: the warm first render
            first = cpu() - before
            runs = []
            radio = page.locator("[data-testid=stSidebar] [data-testid=stRadio]").filter(has_text="Imported runs")
            shown = title not in NO_RUNS_CONTROL
            if shown:
                try:  # the sidebar can be drawn after the script ends: wait for the control, not for a time
                    radio.first.wait_for(timeout=CONTROL_WAIT_S * 1000)
                except Exception:  # a store without imported pull-request runs offers no choice
                    shown = False
            for index in range(changes if shown else 0):
                page.evaluate(_WATCH)
                before = cpu()
                radio.first.get_by_text(RUN_CHOICES[index % len(RUN_CHOICES)], exact=True).click()
                if _rerun_done(page, timeout_s):
                    runs.append(cpu() - before)
            figures[title] = {"first": first, "change": statistics.median(runs) if runs else None,
                              "worst_change": max(runs, default=None)}
            print(f"{title:18s} server CPU: first render {first:5.2f} s   imported-runs change: "
                  + (f"median {statistics.median(runs):5.2f} s, worst {max(runs):5.2f} s" if runs else "no such control"),
                  flush=True)
    return figures


RUN_CHOICES = ("all", "pull requests", "main only")
NO_RUNS_CONTROL = {"Pull request", "Model lane"}
"""Pages that show no imported-runs choice (a pull request's runs are the page; the model lane has no imports)."""
CONTROL_WAIT_S = 15
"""The sidebar's imported-runs options, clicked in turn so each click changes the choice."""


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rerun_done(page: Any, timeout_s: float) -> bool:
    """Wait until the rerun a click started is over and its charts are drawn; False if it started none."""
    try:
        page.wait_for_function("() => window.__flybenchRan", timeout=NO_RERUN_S * 1000)
    except Exception:
        print(f"a change started no rerun within {NO_RERUN_S} s; not counted", flush=True)
        return False
    page.wait_for_function("() => document.querySelector('[data-testid=stApp]')"
                           ".getAttribute('data-test-script-state') !== 'running'", timeout=timeout_s * 1000)
    embeds = page.locator(".vega-embed")
    for index in range(embeds.count()):
        embeds.nth(index).locator("svg, canvas").first.wait_for(timeout=timeout_s * 1000)
    return True


def build_real(db: Path, flydsl_ci: Path, flydsl_repo: Path | None) -> None:
    """What a fresh clone holds, as a new user loads it: the committed results, then FlyDSL's CI month imported."""
    flybench = [sys.executable, "-m", "flybench"]
    subprocess.run([*flybench, "ingest", "--db", str(db)], check=True)
    subprocess.run([*flybench, "import", "flydsl-ci", str(flydsl_ci), "--db", str(db),
                    *(["--flydsl-repo", str(flydsl_repo)] if flydsl_repo else [])], check=True)


def _change(page: Any, title: str, timeout_s: float, index: int = 0) -> float | None:
    """Make the page's `index`-th change; seconds until Streamlit's rerun is done and its charts are drawn again."""
    page.evaluate(_WATCH)
    start = time.perf_counter()
    if title in WIDGETS:
        labels = WIDGETS[title]
        page.get_by_text(labels[index % len(labels)], exact=True).first.click()
    else:
        machine = page.locator("[data-testid=stSidebar] [data-testid=stMultiSelect]").filter(has_text="Machine")
        if not machine.count():  # a page with nothing to filter (no resources in this database)
            return None
        machine.first.locator("input").click()
        page.locator("[role=listbox]").first.wait_for(timeout=5000)  # the options are open
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")  # adds the highlighted machine: a new filter, so a rerun
        page.keyboard.press("Escape")
    if not _rerun_done(page, timeout_s):
        return None
    return time.perf_counter() - start


@contextlib.contextmanager
def busy(cores: int) -> Iterator[None]:
    """`cores` processes that spin until the block ends: the load another job puts on a shared runner."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/flybench-dashboard-load.duckdb"))
    parser.add_argument("--machines", type=int, default=10)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=3, help="widget changes timed per page")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a page may take before it is reported")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--page", action="append", choices=list(PAGES), help="time only this page (repeatable; in the order given)")
    parser.add_argument("--busy-cores", type=int, default=0,
                        help="keep this many cores busy with spinning processes while the pages are timed (a loaded "
                             "CI runner, not an idle machine)")
    parser.add_argument("--cpu", action="store_true",
                        help="report the server's CPU seconds per warm render instead of the browser's wall time")
    parser.add_argument("--real", action="store_true",
                        help="build a missing --db from the committed results and FlyDSL's CI month, not synthetic rows")
    parser.add_argument("--flydsl-ci", type=Path,
                        default=Path("../shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz"),
                        help="FlyDSL's CI history for --real")
    parser.add_argument("--flydsl-repo", type=Path, help="a clone of FlyDSL, to order the imported commits (--real)")
    args = parser.parse_args(argv)
    if args.real and not args.db.exists():
        build_real(args.db, args.flydsl_ci, args.flydsl_repo)
    elif not args.db.exists():
        start = time.perf_counter()
        rows = build(args.db, args.machines, args.commits)
        print(f"built {args.db}: {rows:,} result rows in {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()  # what `flybench ingest` ends with: the steps stored for the pages to read
    print(f"{stored.summary(stored.refresh(args.db))} ({time.perf_counter() - start:.1f} s)", flush=True)
    load_before = os.getloadavg()
    with busy(args.busy_cores):
        timer = cpu_per_render if args.cpu else time_pages
        figures = timer(args.db, args.changes, args.page, args.timeout)
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {', '.join(f'{v:.2f}' for v in load_before)}; "
          f"after {', '.join(f'{v:.2f}' for v in load_after)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"db": str(args.db), "busy_cores": args.busy_cores,
                                         "measure": "server CPU s" if args.cpu else "browser wall s",
                                         "load_before": load_before, "load_after": load_after, "pages": figures},
                                        indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
