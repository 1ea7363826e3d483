"""`flybench <verb>`: one module per verb, each with add_parser(subparsers) and main(args)."""

from __future__ import annotations

import argparse
import importlib
import sys

from flybench.errors import FlybenchError

VERBS = ("run", "list", "doctor", "ingest", "compare", "regressions", "dashboard")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flybench", description="Benchmarks and regression tracking for FlyDSL kernels.")
    subparsers = parser.add_subparsers(dest="verb", required=True)
    for verb in VERBS:
        try:
            module = importlib.import_module(f"flybench.cli.{verb}")
        except ModuleNotFoundError as exc:
            if exc.name != f"flybench.cli.{verb}":
                raise
            continue
        module.add_parser(subparsers).set_defaults(handler=module.main)
    return parser


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
