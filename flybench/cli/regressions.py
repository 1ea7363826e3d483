"""`flybench regressions`: step detection over the stored history (exit 1 when one is open)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from fnmatch import fnmatchcase
from pathlib import Path

from flybench.cli.compare import add_common, check_scope
from flybench.errors import FlybenchError
from flybench.regress import accepted, scan, stored
from flybench.regress.history import PERSIST, Regression
from flybench.regress.counters import counter_changes
from flybench.regress.report import exit_code, link_address, write
from flybench.store import origin, queries


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "regressions", help="the open alerts of every benchmark's history, with their evidence",
        description="The open alerts of the stored history: each machine's history replayed commit by commit "
                    "(the same alerts however the rows arrived); a step must beat the step floor and the series' "
                    "own scatter net of the runner's per-job shift, and, where the store knows what changed (an "
                    "import with its clone; the machine code of the series' kernels, flybench.compile.code_history), "
                    "it is an alert only when its range changed what the series runs: the machine code where it is "
                    "known, else the files, the compiler's counted (else it is listed as the environment's); each "
                    "row says its evidence and state (docs/alerts.md); the report's head says what it cannot vouch "
                    "for (no clone, a shallow one, main runs taken as branch runs). Every change of a deterministic metric is listed, "
                    "and of a watched hardware counter (instruction counts, launch resources; a call's DRAM bytes "
                    "at 2% or more). Rows that came with the repository (results committed by the machines that ran "
                    "them) are left out and counted on stderr unless --include-others; an imported history is "
                    "judged. Exit status: 0 none, 1 an open alert or a standing worse "
                    "change among the rows judged, 2 bad input "
                    "(an empty database, an unknown machine or subject, a --benchmark glob that matches nothing).")
    parser.add_argument("--benchmark", help="glob on benchmark names, e.g. 'attention.*'")
    parser.add_argument("--accepted", type=Path,
                        help="accepted levels (flybench accept): steps up to them are not reported (default: the "
                             "store's own file beside --db, <database name>.accepted.json, if it exists; and, while "
                             f"it exists, the old {accepted.OLD_PATH} of the working folder, said on stderr)")
    parser.add_argument("--runs", choices=("main", "pr", "branch", "all"), default="main",
                        help="whose steps: main's (default, the nightly report), pull requests' runs, other "
                             "branches', or all; a pull request's own check is `flybench gate`")
    parser.add_argument("--closed", action="store_true",
                        help="also list the alerts that recovered or were accepted (with their state); they never "
                             "make the exit status 1")
    parser.add_argument("--include-others", action="store_true",
                        help="also judge the results committed to the repository by the machines that ran "
                             "them. Without it they are left out, and a line on stderr says so: a fresh clone's "
                             "first report is about what was measured (or imported, as FlyDSL's CI history) here. "
                             "The nightly, judging the results it has just committed, passes it")
    parser.add_argument("--dashboard-url", help="the dashboard's address: each regression links to its History "
                                                "view there")
    add_common(parser)
    return parser


def acceptances(args: argparse.Namespace) -> list[accepted.Acceptance]:
    """The store's acceptances (or --accepted's), saying on stderr when the old file of this folder is applied."""
    found, note = accepted.for_store(args.db, args.accepted)
    if note:
        print(f"flybench regressions: {note}", file=sys.stderr)
    return found


def main(args: argparse.Namespace) -> int:
    dashboard = None if args.dashboard_url is None else link_address(args.dashboard_url, "--dashboard-url")
    names = sorted(set(check_scope(args.db, args.machine, args.subject)["name"]))
    if args.benchmark is not None and not any(fnmatchcase(name, args.benchmark) for name in names):
        raise FlybenchError(_no_match(args.benchmark, names))
    found = stored.regressions(args.db, machine=args.machine, subject=args.subject,
                                benchmark=args.benchmark, config=args.config,
                                accepted=acceptances(args), closed=args.closed)
    found = [r for r in found if args.runs in ("all", r.context)]
    found += counter_changes(args.db, machine=args.machine, subject=args.subject, benchmark=args.benchmark)
    if not args.include_others:
        found = mine(found, origin.others(args.db))
    runs = queries.longest_series(args.db, args.machine, args.subject)
    if not found and runs < scan.JUDGED_RUNS:
        print(f"history too short to judge: the longest series here has {runs} measured run(s); a step needs "
              f"{scan.JUDGED_RUNS} ({scan.MIN_BEFORE} at its old level, {PERSIST} at its new one). No regression "
              "can be reported yet, and none is ruled out.")
        if args.format == "terminal" and not args.output:
            return 0
    write(found, args.format, args.output, dashboard=dashboard,
          warnings=stored.attribution_warnings(args.db, args.machine, args.subject))
    return exit_code(found)


def mine(found: list[Regression], others: dict[tuple[str, str], str]) -> list[Regression]:
    """The rows of machines measured here; the others' are counted on stderr, by machine and why, never judged."""
    left = [r for r in found if (r.subject, r.machine) in others]
    if left:
        by = Counter((r.subject, r.machine) for r in left)
        listed = "; ".join(f"{n} on {machine} ({subject}: {others[subject, machine]})"
                           for (subject, machine), n in sorted(by.items()))
        print(f"flybench regressions: not judged: {len(left)} row(s) on data nobody measured in this checkout: "
              f"{listed}. Pass --include-others to list and judge them.", file=sys.stderr)
    return [r for r in found if (r.subject, r.machine) not in others]


def _no_match(glob: str, names: list[str]) -> str:
    """Why a glob selected nothing, with a few of the names it could have matched."""
    few = ", ".join(names[:5]) + (f" (and {len(names) - 5} more)" if len(names) > 5 else "")
    hint = "" if any(c in glob for c in "*?[") else f"; a glob matches whole names, e.g. '*{glob}*'"
    return f"--benchmark {glob!r} matches no benchmark; the benchmarks here include {few}{hint}"
