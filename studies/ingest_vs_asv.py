"""`flybench ingest` end to end (the regression rescan included) against asv's own loading of the same results tree.

Both read the same tree in one run on this machine: asv's loader
(`asv.results.iter_results`, every results file parsed into a `Results`)
and `flybench ingest` end to end into a fresh store, the regression rescan
included. The tree is read where it lies. Times are this process's CPU
time (DuckDB's threads included), so a busy machine does not move them
much; wall time is printed beside.

    python -m studies.ingest_vs_asv --results /tmp/django-asv/results --subject Django
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from asv import results as asv_results

from flybench.regress import stored
from flybench.store import ingest


def asv_load(root: Path) -> tuple[float, int, int]:
    """(seconds, files, result entries) for asv's own loader over every machine folder."""
    began = time.process_time()
    files = entries = 0
    for result in asv_results.iter_results(str(root)):
        files += 1
        entries += sum(1 for _ in result.get_all_result_keys())
    return time.process_time() - began, files, entries


def flybench_ingest(root: Path, subject: str) -> tuple[float, float, int]:
    """(seconds to load and store, seconds to rescan, rows stored) for `flybench ingest`'s two parts, as the
    verb runs them, into a fresh store."""
    with tempfile.TemporaryDirectory() as work:
        db = Path(work) / "store.duckdb"
        began = time.process_time()
        report = ingest(root, db, subject)
        loaded = time.process_time()
        stored.refresh(db)
        return loaded - began, time.process_time() - loaded, report.rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.ingest_vs_asv", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="an asv results tree (machine folders)")
    parser.add_argument("--subject", required=True)
    args = parser.parse_args(argv)
    asv_s, files, entries = asv_load(args.results)
    print(f"asv's loader: {files} files, {entries} result entries in {asv_s:.1f} s of CPU", flush=True)
    load_s, scan_s, rows = flybench_ingest(args.results, args.subject)
    total = load_s + scan_s
    print(f"flybench ingest: {rows} rows; load and store {load_s:.1f} s, rescan {scan_s:.1f} s of CPU, "
          f"{total:.1f} s in all = {total / asv_s:.2f}x asv's loader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
