"""`flybench import flydsl-ci FILE`: bring another system's benchmark history into the store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flybench.errors import FlybenchError
from flybench.importers.flydsl_ci import import_file
from flybench.importers.flydsl_ci.store import DEFAULT_SUBJECT
from flybench.importers.git_history import main_commit
from flybench.regress import stored
from flybench.store import DEFAULT_DB


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "import", help="import another system's results (FlyDSL's CI history) into DuckDB",
        description="Import results measured elsewhere into the store. Every imported row is marked with its "
                    "source, so it is never shown as flybench's own measurement. Exit status: 0 all imported, "
                    "2 bad input: some records rejected (the others imported, each rejection named) or "
                    "nothing importable; 1 is kept for a regression.")
    sources = parser.add_subparsers(dest="source", required=True)
    flydsl = sources.add_parser(
        "flydsl-ci", help="FlyDSL's CI dashboard history.json (schema 1, plain or gzip)",
        description="Idempotent and incremental: the same file twice changes nothing, a newer file adds only "
                    "its new records. Without --flydsl-repo, commits are ordered by the CI jobs' completion "
                    "times and FlyDSL's 'pr: null' is taken as main; with it, by main's first-parent history, "
                    "and each main commit's changed files are read for the history scan's code attribution (the "
                    "commits not attributed before). A shallow clone or one of another repository moves no run "
                    "off main, and the summary says what the clone could not vouch for.")
    flydsl.add_argument("file", type=Path, help="history.json or history.json.gz")
    flydsl.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    flydsl.add_argument("--subject", default=DEFAULT_SUBJECT,
                        help=f"the measured repository's name in the store (default: {DEFAULT_SUBJECT}); a subject "
                             "that holds another repository's commits is refused")
    flydsl.add_argument("--flydsl-repo", type=Path, help="a full clone of FlyDSL: order commits by its main branch and read what each "
                                                         "main commit changed")
    flydsl.add_argument("--main-ref", help="main branch of the clone (default: origin/main, main, else HEAD)")
    return parser


def main(args: argparse.Namespace) -> int:
    if args.flydsl_repo is not None:  # the clone and its main ref are checked before the store is opened
        main_commit(args.flydsl_repo, args.main_ref)
    elif args.main_ref is not None:
        raise FlybenchError("--main-ref names main's branch in the clone that --flydsl-repo gives: pass --flydsl-repo "
                            "too, or leave --main-ref out")
    report = import_file(args.file, args.db, args.subject, flydsl_repo=args.flydsl_repo, main_ref=args.main_ref)
    print(report.summary(), file=sys.stdout if report.ok else sys.stderr)
    print(stored.summary(stored.refresh(args.db)))  # readers then read the steps instead of refitting them
    return 0 if report.ok else 2  # rejected records are bad input; 1 means a regression
