"""`python -m flybench.compile`: compile the registered kernels for their targets and print the metrics.

    python -m flybench.compile --flydsl-src ~/FlyDSL --arch gfx942 --arch gfx950 --format markdown

Exit status: 0 when every kernel compiled (or was unavailable or not
applicable here), 1 when one failed or is a suspected miscompile, 2 on bad
input (an unknown target, a kernel pattern that matches nothing).
"""

from __future__ import annotations

import argparse
import sys
import time
from fnmatch import fnmatchcase

from flybench import envvars
from flybench.compile import registry, report, runner
from flybench.errors import FlybenchError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flybench.compile", description=__doc__.splitlines()[0])
    parser.add_argument("--flydsl-src", default=None,
                        help=f"FlyDSL source checkout whose kernels/ to compile (default: ${envvars.FLYDSL_SRC})")
    parser.add_argument("--arch", action="append",
                        help=f"target (repeatable; default all: {', '.join(registry.ARCHES)})")
    parser.add_argument("--kernel", "-k", action="append", help="kernel name or glob (repeatable; default all)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--force", action="store_true", help="compile again even when the cache has the record")
    parser.add_argument("--jobs", type=int, default=None, help="compile workers at once (default: CPU count)")
    parser.add_argument("--timeout", type=float, default=runner.TIMEOUT_S, help="seconds one kernel may take")
    return parser


def select(kernels: list[str] | None, arches: list[str] | None) -> list[tuple[registry.KernelCase, str]]:
    """(case, arch) pairs for the patterns; every pattern must match, every target must be known."""
    for arch in arches or []:
        registry.check_arch(arch)
    names = list(registry.CASES)
    if kernels:
        for pattern in kernels:
            if not any(fnmatchcase(n, pattern) for n in names):
                raise FlybenchError(f"no kernel matches {pattern!r}; kernels: {', '.join(names)}")
        names = [n for n in names if any(fnmatchcase(n, p) for p in kernels)]
    targets = tuple(arches or registry.ARCHES)
    return [(registry.get_case(n), a) for n in names for a in targets
            if a in registry.get_case(n).arches or a in registry.AMD_ARCHES]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        requests = select(args.kernel, args.arch)
    except FlybenchError as exc:
        print(f"python -m flybench.compile: error: {exc}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    records = runner.measure(requests, args.flydsl_src, force=args.force, parallel=args.jobs, timeout_s=args.timeout,
                             progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(report.to_json(records) if args.format == "json" else report.markdown(records))
    print(f"{len(records)} compiles in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    bad = any(r.status == "failed" or r.suspect for r in records)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
