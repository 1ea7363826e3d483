"""`flybench <verb>`: one module per verb, each with add_parser(subparsers) and main(args).

Every public module in this package is a verb; a new verb needs no edit here.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from flybench.errors import FlybenchError

FIRST = ("run", "ingest", "compare", "regressions", "bisect", "accept", "dashboard")
"""Verbs listed first in --help, in the order of the data flow; the rest follow alphabetically."""


def verbs() -> list[str]:
    found = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [v for v in FIRST if v in found] + [v for v in found if v not in FIRST]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flybench", description="Benchmarks and regression tracking for FlyDSL kernels.")
    subparsers = parser.add_subparsers(dest="verb", required=True)
    for verb in verbs():
        try:
            module = importlib.import_module(f"flybench.cli.{verb}")
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("flybench"):
                raise
            _add_missing(subparsers, verb, exc.name or str(exc))
            continue
        module.add_parser(subparsers).set_defaults(handler=module.main)
    return parser


def _add_missing(subparsers, verb: str, package: str) -> None:
    """A verb whose optional dependency is not installed still shows up, and says what to install."""
    extra = {"duckdb": "store", "scipy": "store", "streamlit": "dashboard", "altair": "dashboard"}.get(package, "test")

    def refuse(args: argparse.Namespace) -> int:
        raise FlybenchError(f"'flybench {verb}' needs the Python package {package!r}, which is not installed; "
                            f"install it with: pip install -e '.[{extra}]'")

    parser = subparsers.add_parser(verb, help=f"(needs {package}: pip install -e '.[{extra}]')")
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    parser.set_defaults(handler=refuse)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except FlybenchError as exc:
        print(f"flybench {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"flybench {args.verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
