"""`flybench ingest`: build or update the DuckDB store from an asv results tree."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flybench.store import DEFAULT_DB, ingest
from flybench.store.ingest import default_results_dir


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "ingest", help="load asv results into DuckDB (idempotent, incremental)",
        description="Load new or changed asv results files (and their .cases.jsonl sidecars) into DuckDB. "
                    "Exit status: 0 all loaded, 1 some files failed (the others loaded), 2 bad input.")
    parser.add_argument("results_dir", nargs="?", type=Path,
                        help="asv's results_dir (default: the results_dir of --config)")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    parser.add_argument("--subject", help="repository whose commits these are (default: the asv config's project)")
    parser.add_argument("--config", type=Path, help="asv config naming the subject and the results_dir "
                                                    "(default: asv.conf.json at or above the results)")
    parser.add_argument("--branch", help="branch of the commits read in this run, when known")
    return parser


def main(args: argparse.Namespace) -> int:
    results_dir = args.results_dir or default_results_dir(args.config or Path("asv.conf.json"))
    report = ingest(results_dir, args.db, args.subject, config=args.config, branch=args.branch)
    print(report.summary(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1
