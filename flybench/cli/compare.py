"""`flybench compare BASE HEAD`: the pull-request check (exit 1 on a regression, 2 on bad input)."""

from __future__ import annotations

import argparse
from pathlib import Path

from flybench.errors import FlybenchError
from flybench.regress import compare
from flybench.regress.report import FORMATS, exit_code, write
from flybench.store import DEFAULT_DB, queries


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compare", help="compare two commits on one machine",
        description="Compare HEAD with BASE on one machine: Mann-Whitney U on the samples, relative and "
                    "absolute thresholds, matching measurement contracts. "
                    "Exit status: 0 no regression, 1 regression, 2 bad input (unknown commit or machine).")
    parser.add_argument("base", help="base commit (hash or unique prefix)")
    parser.add_argument("head", help="head commit (hash or unique prefix)")
    add_common(parser)
    return parser


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options `compare` and `regressions` share."""
    parser.add_argument("--machine", help="asv machine name (compare: default the only machine in the database)")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    parser.add_argument("--subject", help="repository whose commits these are, if the database holds several")
    parser.add_argument("--config", type=Path, help="flybench.toml with a [regress] section")
    parser.add_argument("--format", choices=FORMATS, default="terminal")
    parser.add_argument("--output", type=Path, help="write the report here instead of stdout")


def main(args: argparse.Namespace) -> int:
    machine = args.machine or _only_machine(args.db)
    comparison = compare(args.db, machine, args.base, args.head, subject=args.subject, config=args.config)
    write(comparison, args.format, args.output)
    return exit_code(comparison)


def _only_machine(db: Path) -> str:
    """The machine to use when none was named: there must be exactly one."""
    names = list(queries.machines(db)["name"])
    if len(names) != 1:
        raise FlybenchError(f"pass --machine: {db} holds {', '.join(names) or 'no machines'}")
    return names[0]
