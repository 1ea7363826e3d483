"""`flybench accept SERIES COMMIT --reason ...`: accept a series' new level, so its alert closes.

The acceptance is written to the accepted-levels file of the store `--db`
names (`<database name>.accepted.json` beside it; flybench.regress.accepted),
which `flybench regressions` and the dashboard read: a step at or before the
accepted commit is no longer reported. Commit the file with the results, so
the next nightly sees it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from flybench.benchmark_names import parse_series, series_name
from flybench.errors import FlybenchError
from flybench.regress import accepted
from flybench.store import DEFAULT_DB, queries


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "accept", help="accept a series' new level as its baseline, with a reason",
        description="Record that the level of SERIES at COMMIT is accepted (an intended trade-off, a new "
                    "baseline): `flybench regressions` and the dashboard stop reporting the step that led there. "
                    "The acceptance is kept beside the database (--db), in <database name>.accepted.json. "
                    "--undo takes an acceptance back. Exit status: 0 recorded, 2 bad input (unknown series, machine or "
                    "commit; a file that cannot "
                    "be written).")
    parser.add_argument("series", help="benchmark(params), as the alert names it, e.g. "
                                       "'attention.Quick.track_time(B1S1H4Hkv4D128_causal, flex, bf16)'")
    parser.add_argument("commit", help="the commit (or unique prefix) whose level becomes the baseline")
    parser.add_argument("--reason", help="why the new level is accepted (kept with it; required unless --undo)")
    parser.add_argument("--undo", action="store_true",
                        help="take the acceptance of SERIES at COMMIT back: its alert opens again (as the "
                             "dashboard's Regressions page does)")
    parser.add_argument("--machine", help="machine of the series (needed when several machines have it)")
    parser.add_argument("--subject", help="repository of the commits (needed when several have the series)")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    parser.add_argument("--accepted", type=Path,
                        help="accepted-levels file (default: the store's own, beside --db: "
                             f"{accepted.beside(DEFAULT_DB)} for the default database)")
    return parser


def main(args: argparse.Namespace) -> int:
    if not args.undo and not (args.reason or "").strip():
        raise FlybenchError("--reason is missing or empty: say why the new level is accepted")
    try:
        benchmark, values = parse_series(args.series)
    except ValueError as exc:
        raise FlybenchError(str(exc)) from exc
    rows = queries.history(args.db, machine=args.machine, subject=args.subject, benchmark=benchmark)
    rows = rows[[list(map(str, json.loads(p).values())) == values for p in rows["params"]]]
    if rows.empty:
        raise FlybenchError(f"no series {args.series!r} in {args.db}"
                            + (f" on machine {args.machine!r}" if args.machine else "")
                            + (f" of subject {args.subject!r}" if args.subject else "")
                            + ": name it as `flybench regressions` prints it")
    places = sorted(set(zip(rows["subject"], rows["machine"])))
    if len(places) > 1:
        listing = ", ".join(f"{s} on {m}" for s, m in places)
        raise FlybenchError(f"{args.series} exists for several subjects or machines ({listing}): "
                            "pass --subject and --machine")
    (subject, machine), = places
    commits = list(dict.fromkeys(rows["commit_hash"]))
    matches = [c for c in commits if c.startswith(args.commit.lower())]
    if len(matches) != 1:
        what = "is ambiguous" if matches else "has no result"
        raise FlybenchError(f"commit {args.commit!r} {what} in {args.series} on {machine}; its commits: "
                            + ", ".join(c[:8] for c in commits))
    params = json.loads(rows["params"].iloc[0])
    name = series_name(benchmark, list(params.values()))
    path = args.accepted or accepted.beside(args.db)
    if args.undo:
        entry = accepted.Acceptance(subject, machine, benchmark, params, matches[0], "", "")
        if accepted.remove(path, entry):
            print(f"no longer accepted: {name} on {machine} at {matches[0][:8]} ({path}; commit it with the results)")
        else:
            print(f"{name} on {machine} is not accepted at {matches[0][:8]} in {path}: nothing changed")
        return 0
    entry = accepted.Acceptance(subject, machine, benchmark, params, matches[0], args.reason.strip(), accepted.now())
    path, new = accepted.add(path, entry)
    if not new:
        print(f"{name} on {machine} is already accepted at {matches[0][:8]} in {path}: nothing changed")
        return 0
    print(f"accepted {name} on {machine} at {matches[0][:8]}: {entry.reason} ({path}; commit it with the results)")
    return 0
