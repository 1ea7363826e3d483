"""`flybench <verb>`: one module per verb, each with add_parser(subparsers) and main(args).

Every public module in this package is a verb; a new verb needs no edit here.
Its docstring's first line, "`flybench <verb> ...`: what it does", names
the verb and is its line in `flybench --help`. That line is read from the
module's source, so the top-level help imports no verb module, and only the
verb being run is imported: several verbs load DuckDB, pandas or scipy,
which take a second or more to import.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

from flybench.errors import FlybenchError

FIRST = ("run", "ingest", "compare", "render", "regressions", "bisect", "accept", "dashboard")
"""Verbs listed first in --help, in the order of the data flow; the rest follow alphabetically."""

_FIRST_LINE = re.compile(r'"""`flybench ([a-z][a-z-]*)[^`]*`: (.+?)\.?(?:""")?\s*$')


class Verb(NamedTuple):
    name: str  # as typed after `flybench`
    module: str  # in this package (`import` is import_cmd: a module cannot be named after a keyword)
    summary: str


def verbs() -> list[Verb]:
    """Every verb, in --help order, from its module's first line."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        source = Path(__path__[0]) / f"{info.name}.py"
        with source.open(encoding="utf-8") as f:
            match = _FIRST_LINE.match(f.readline())
        if match is None:
            raise RuntimeError(f"{source} must start with a docstring '\"\"\"`flybench <verb> ...`: what it does'")
        found.append(Verb(match.group(1), info.name, match.group(2)))
    order = {name: i for i, name in enumerate(FIRST)}
    return sorted(found, key=lambda v: (order.get(v.name, len(FIRST)), v.name))


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """Every verb: those named in `load` (default: all) with their options, the others by their summary only."""
    parser = argparse.ArgumentParser(prog="flybench", description="Benchmarks and regression tracking for FlyDSL kernels.")
    subparsers = parser.add_subparsers(dest="verb", required=True)
    for verb in verbs():
        if load is not None and verb.name not in load:
            subparsers.add_parser(verb.name, help=verb.summary)
            continue
        try:
            module = importlib.import_module(f"{__name__}.{verb.module}")
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("flybench"):
                raise
            _add_missing(subparsers, verb.name, exc.name or str(exc))
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


class _ReaderGone:
    """stdout that, once its reader has gone (`flybench import ... | head -1`), drops what is written instead
    of failing the verb: the work goes on and its exit status is its own."""

    def __init__(self, stream) -> None:
        self._stream, self._gone = stream, False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self._gone = True
        with contextlib.suppress(OSError, ValueError):  # the interpreter's own flush at exit then succeeds too
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Run one verb. Ctrl-C is said in a line, exit 130, from the first moment: the verb's modules (pandas, scipy)
    take seconds to import, and a Ctrl-C then was a traceback of their insides."""
    argv = sys.argv[1:] if argv is None else argv
    stdout, name = sys.stdout, "flybench"
    try:
        args = build_parser(load=argv[:1]).parse_args(argv)  # the verb, if any, comes first
        name = f"flybench {args.verb}"
        sys.stdout = _ReaderGone(stdout)
        return int(args.handler(args) or 0)
    except FlybenchError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted" if name != "flybench" else "flybench: interrupted while starting; nothing was "
              "done", file=sys.stderr)
        return 130
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
