"""`flybench ingest`: build or update the DuckDB store from asv results trees."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from flybench.regress import stored
from flybench.store import DEFAULT_DB, ingest, interrupts
from flybench.store.ingest import default_results_dir, size_limit_as_advice, subject_of

DEFERRED = ("regressions: rescan deferred (--no-rescan): the next `flybench ingest` computes and stores it; "
            "until then `flybench regressions` computes it each time it runs")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "ingest", help="load asv results into DuckDB (idempotent, incremental)",
        description="Load new or changed asv results files (and their .cases.jsonl sidecars) into DuckDB. "
                    "Without a results_dir: this project's tree and every other subject's tree beside it "
                    "(results/<subject>/ with its own asv.conf.json, e.g. results/flydsl/). "
                    f"Reading more than {Progress.MIN_FILES} files prints the files read so far on stderr, "
                    "about once a second. Ends by rescanning for regressions the machines whose rows changed "
                    "(see --no-rescan). "
                    "Exit status: 0 all loaded, 2 bad input: a tree that cannot be read, or some files that "
                    "could not (each reported with its reason; the others loaded).")
    parser.add_argument("results_dir", nargs="?", type=Path,
                        help="asv's results_dir (default: the results_dir of --config, plus the other subjects' trees)")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    parser.add_argument("--subject", help="repository whose commits these are (default: the asv config's project)")
    parser.add_argument("--config", type=Path, help="asv config naming the subject and the results_dir "
                                                    "(default: asv.conf.json at or above the results)")
    parser.add_argument("--branch", help="branch of the commits read in this run, when known")
    parser.add_argument("--prune", action="store_true",
                        help="remove the stored rows of files this tree no longer holds, in the machine folders "
                             "it holds (default: keep them, as when trees of several runners are merged); a "
                             "machine whose folder is not in the tree keeps its rows")
    parser.add_argument("--no-rescan", action="store_true",
                        help="skip the end-of-ingest regression rescan (most of a large ingest's time): the next "
                             "`flybench ingest` does it, and `flybench regressions` computes it meanwhile")
    return parser


@interrupts.deferred()  # Ctrl-C stops between stored files, or after the rescan, never inside a write
def main(args: argparse.Namespace) -> int:
    if args.results_dir:
        trees = [args.results_dir]
    else:
        main_tree = default_results_dir(args.config or Path("asv.conf.json"))
        trees = [main_tree, *subject_trees(main_tree.parent, main_tree)]
    for tree in trees:  # every tree's config checked before any tree is written
        first = tree == trees[0]  # --subject and --config name the first tree; the others carry their own config
        if tree.is_dir():
            subject_of(tree, args.subject if first else None, args.config if first else None)
    status = 0
    progress = Progress()
    for tree in trees:
        first = tree == trees[0]
        report = ingest(tree, args.db, args.subject if first else None, config=args.config if first else None,
                        branch=args.branch, prune=args.prune, progress=progress)
        print(report.summary(), file=sys.stdout if report.ok else sys.stderr)
        status = max(status, 0 if report.ok else 2)  # 1 is kept for regressions
    if args.no_rescan:
        print(DEFERRED)
        return status
    if progress.shown:  # a long ingest: say what the wait is now for
        print("regressions: rescanning the machines whose rows changed (--no-rescan defers it)", file=sys.stderr)
    with size_limit_as_advice(args.db):
        print(stored.summary(stored.refresh(args.db)))  # readers then read the steps instead of refitting them
    return status


class Progress:
    """Files read out of files to read, on stderr while a long tree is read: a tree of thousands of files takes a
    minute, and a silent minute looks like a hang. At most about once a second, and only past MIN_FILES files,
    so that a small ingest stays quiet. On a terminal the line is rewritten in place."""

    MIN_FILES = 200

    def __init__(self, stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream, self._clock = stream, clock
        self._last: float | None = None
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if total <= self.MIN_FILES:
            return
        now = self._clock()
        if done < total and self._last is not None and now - self._last < 1.0:
            return
        self._last = now
        stream = self._stream or sys.stderr
        line = f"ingest: {done:,} / {total:,} files read"
        if getattr(stream, "isatty", lambda: False)():
            print(f"\r{line}", end="\n" if done == total else "", file=stream, flush=True)
        else:
            print(line, file=stream, flush=True)
        self.shown = True


def subject_trees(results_root: Path, main_tree: Path) -> list[Path]:
    """The other subjects' results trees: folders beside the main one that carry their own asv config."""
    return sorted(p.parent for p in results_root.glob("*/asv.conf.json") if p.parent.resolve() != main_tree.resolve())
