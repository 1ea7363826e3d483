"""`flybench merge SOURCE... --into DEST`: merge results trees of several runners or workers into one.

The trees of the shards of a run (`flybench run --shard I/N` on several
runners, each tree copied off its runner) become one asv results file per
commit and machine in DEST, which `asv compare`, `asv publish` and
`flybench ingest` read as if one runner had measured everything, and one
case-record file beside it. The rules (a case measured twice, what the
destination already holds) are flybench.merge's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flybench.cli._output import output_folder
from flybench.errors import FlybenchError
from flybench.merge import merge


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "merge", help="merge results trees of several runners or workers into one (shards of a run)",
        description="Merge asv results trees (each as a runner left it: <machine>/machine.json, the results files "
                    "and their .cases.jsonl records, benchmarks.json) into DEST: one results file per commit and "
                    "machine, one record file beside it. Sources are taken in the order given, after what DEST "
                    "already holds: a case measured twice keeps the later measurement, and each such case is "
                    "named. Merging the same trees again changes nothing. "
                    "Exit status: 0 merged, 2 bad input (a source that is no results tree, an unreadable file, "
                    "trees of different benchmark code).")
    parser.add_argument("sources", nargs="+", type=Path, help="results trees, one per shard or worker")
    parser.add_argument("--into", dest="dest", type=output_folder, required=True,
                        help="the results tree to write (created if missing; e.g. the asv config's results_dir)")
    return parser


def main(args: argparse.Namespace) -> int:
    dest = args.dest.resolve()
    sources = [s.resolve() for s in args.sources]
    if dest in sources:
        raise FlybenchError(f"{args.dest} is both a source and the destination: name the copied trees as sources "
                            "and the tree to write with --into")
    if len(set(sources)) != len(sources):
        raise FlybenchError("a source is named twice: name each copied tree once")
    report = merge(sources, dest)
    for line in report.replaced:
        print(f"measured twice: {line}")
    print(f"{report.summary()}: {', '.join(str(p) for p in report.files)}")
    return 0
