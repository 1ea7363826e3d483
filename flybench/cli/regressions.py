"""`flybench regressions`: step detection over the stored history (exit 1 when one is open)."""

from __future__ import annotations

import argparse

from flybench.cli.compare import add_common
from flybench.regress import find_regressions
from flybench.regress.report import exit_code, write


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "regressions", help="find regressions in the history of every benchmark",
        description="asv's Potts-model step detection over each series ordered by commit date; a step is "
                    "kept when it beats the relative, absolute and noise thresholds. Every change of a "
                    "deterministic metric is listed. Exit status: 0 none, 1 regressions, 2 bad input.")
    parser.add_argument("--benchmark", help="glob on benchmark names, e.g. 'attention.*'")
    add_common(parser)
    return parser


def main(args: argparse.Namespace) -> int:
    found = find_regressions(args.db, machine=args.machine, subject=args.subject,
                             benchmark=args.benchmark, config=args.config)
    write(found, args.format, args.output)
    return exit_code(found)
