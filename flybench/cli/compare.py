"""`flybench compare BASE HEAD`: two stored commits on one machine, judged (exit 1 on a regression, 2 on bad input)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from flybench.cli._output import output_path
from flybench.errors import FlybenchError, unknown_name
from flybench.regress.compare import compare
from flybench.regress.report import FORMATS, exit_code, write
from flybench.store import DEFAULT_DB, queries


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compare", help="compare two commits on one machine",
        description="Compare HEAD with BASE on one machine, from the store: the change is head's geometric mean "
                    "of round medians over base's; with two rounds or more a side, Welch's t over the rounds' log "
                    "medians (one round: the series' history noise), against relative and absolute thresholds, "
                    "with matching measurement contracts (docs/verdicts.md). A pull request is judged by "
                    "`flybench gate`. "
                    "Exit status: 0 no regression, 1 regression, 2 bad input (unknown commit, machine or subject).")
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
    parser.add_argument("--output", type=output_path,
                        help="write the report to this file instead of stdout (a missing folder is created)")


def check_scope(db: Path, machine: str | None, subject: str | None) -> pd.DataFrame:
    """The (subject, machine, name) series a report reads; an empty database or an unknown name is an error.

    Otherwise a typo in CI would read no series and pass as "no regressions".
    """
    names = queries.series_names(db)
    if names.empty:
        raise FlybenchError(f"{db} holds no results: run `flybench ingest <results dir> --db {db}` first")
    chosen = names
    for kind, value in (("subject", subject), ("machine", machine)):
        if value is not None:
            if value not in set(names[kind]):
                raise unknown_name(kind, value, sorted(set(names[kind])))
            chosen = chosen[chosen[kind] == value]
    if chosen.empty:
        elsewhere = sorted(set(names[names["subject"] == subject]["machine"]))
        raise FlybenchError(f"subject {subject!r} has no results on machine {machine!r}; "
                            f"it has results on: {', '.join(elsewhere)}")
    return chosen


def main(args: argparse.Namespace) -> int:
    scope = check_scope(args.db, args.machine, args.subject)
    machine = args.machine or _only_machine(args.db, scope)
    comparison = compare(args.db, machine, args.base, args.head, subject=args.subject, config=args.config)
    if not comparison.resources and all(c.verdict == "skipped" for c in comparison.cases):
        raise FlybenchError(f"{args.base} and {args.head} share no case measured on both on {machine}: nothing to "
                            "compare (`flybench export --query` lists what each commit has)")
    write(comparison, args.format, args.output)
    return exit_code(comparison)


def _only_machine(db: Path, scope: pd.DataFrame) -> str:
    """The machine to use when none was named: there must be exactly one with results."""
    names = sorted(set(scope["machine"]))
    if len(names) != 1:
        raise FlybenchError(f"pass --machine: {db} holds results of {', '.join(names)}")
    return names[0]
