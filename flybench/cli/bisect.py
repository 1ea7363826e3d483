"""`flybench bisect SERIES GOOD BAD`: the first bad commit of one series in GOOD..BAD (flybench.regress.bisect).

Exit status: 0 the first bad commit was found, 1 it lies among commits that
could not be measured (they are listed), 2 bad input (a series, parameter,
commit or range that does not exist, GOOD and BAD that cannot be told
apart, a series that cannot be measured on this machine).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from flybench import benchmark_names, envvars, revisions
from flybench.cli._output import output_path
from flybench.errors import FlybenchError
from flybench.regress import bisect as search
from flybench.subject_code import wheel_policy

FORMATS = ("terminal", "markdown", "json")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "bisect", help="find the first bad commit of one series between a good and a bad commit",
        description="Binary search over the first-parent commits GOOD..BAD of the subject's repository, measuring "
                    "SERIES at each probed commit: a compile-only metric of FlyDSL's kernels is compiled on this "
                    "CPU with the FlyDSL wheel of the commit's time; a timing is measured by an asv run of that "
                    "one case (on a machine that runs its provider). A deterministic metric is bad where it "
                    "differs from GOOD's value, a timing where its median is closer to BAD's than to GOOD's. "
                    "Commits that cannot be measured are skipped and reported. Exit status: 0 found, 1 the first "
                    "bad commit is among commits that could not be measured, 2 bad input.")
    parser.add_argument("series", help="benchmark(params) as `flybench regressions` names it, e.g. "
                                       "'compile_metrics.Amd.track_vgprs(flash_attn_gfx950:causal, gfx950)'")
    parser.add_argument("good", help="the last commit known good (hash, branch or tag of the subject's repository)")
    parser.add_argument("bad", help="a commit known bad, on GOOD's first-parent line after it")
    parser.add_argument("--subject", default="flydsl",
                        help="whose commits GOOD and BAD are: flydsl (default; needs --flydsl-repo) or flybench "
                             "(this repository)")
    parser.add_argument("--flydsl-repo", type=Path, default=None,
                        help=f"a clone of FlyDSL with its history (default: ${envvars.FLYDSL_SRC} when it is one)")
    parser.add_argument("--machine", default=None,
                        help="asv machine name timing probes are recorded under (default: this machine's, as "
                             "`flybench run` names it); compile-only metrics are measured here whatever it says")
    parser.add_argument("--wheel", type=wheel_policy, default=search.OF_ITS_TIME,
                        help="flydsl package for FlyDSL's commits: 'of-its-time' (default: the first wheel built at "
                             "or after each commit), a version for every commit (e.g. 0.3.1), or 'installed'")
    parser.add_argument("--max-skips", type=int, default=search.MAX_SKIPS,
                        help=f"stop after this many commits could not be measured (default {search.MAX_SKIPS})")
    parser.add_argument("--plan", action="store_true", help="print the range and how each commit would be measured")
    parser.add_argument("--format", choices=FORMATS, default="terminal")
    parser.add_argument("--output", type=output_path,
                        help="write the report to this file instead of stdout (a missing folder is created)")
    return parser


def main(args: argparse.Namespace) -> int:
    if args.max_skips < 0:
        raise FlybenchError(f"--max-skips {args.max_skips} is negative: give 0 (stop at the first commit that cannot "
                            "be measured) or more")
    config, results_dir = search.subject_tree(args.subject)
    where = results_dir / "benchmarks.json"
    series = search.parse_series(args.series, args.subject, search.load_benchmarks(where), where)
    repo = _repo(args)
    commits = search.first_parent_range(repo, args.good, args.bad)
    probe, method = _probe(series, repo, config, args)
    if args.plan:
        return _plan(series, commits, probe, method)
    if isinstance(probe, search.FlydslCompile):
        _check_toolchain()
    print(f"bisect {series.label}: {len(commits) - 1} commits after GOOD {commits[0].short} up to BAD "
          f"{commits[-1].short}; {method}", file=sys.stderr, flush=True)
    result = search.bisect(series, repo, args.good, args.bad, probe, method, max_skips=args.max_skips,
                           progress=_progress)
    text = search.render(result, args.format)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return search.exit_status(result)


def _repo(args: argparse.Namespace) -> Path:
    if args.subject != "flydsl":
        return search.ROOT
    given = args.flydsl_repo or (Path(os.environ[envvars.FLYDSL_SRC]) if os.environ.get(envvars.FLYDSL_SRC) else None)
    if given is None:
        raise FlybenchError("bisecting FlyDSL's commits needs a clone of FlyDSL with its history: pass "
                            f"--flydsl-repo ~/FlyDSL or set {envvars.FLYDSL_SRC} to one "
                            "(git clone https://github.com/ROCm/FlyDSL)")
    return revisions.clone(given.expanduser().resolve(), "--flydsl-repo" if args.flydsl_repo else envvars.FLYDSL_SRC)


def _probe(series: search.Series, repo: Path, config: Path, args: argparse.Namespace) -> tuple[search.Probe, str]:
    flydsl = args.subject == "flydsl"
    if series.benchmark.startswith("compile_metrics."):
        if flydsl:
            return (search.FlydslCompile(repo, series, args.wheel),
                    f"compiled here for {series.params['arch']} with "
                    + ("the FlyDSL wheel of each commit's time" if args.wheel == search.OF_ITS_TIME else
                       "the installed flydsl" if args.wheel == search.INSTALLED else f"flydsl {args.wheel}"))
        return search.FlybenchCompile(series), "compiled here from a git worktree of each flybench commit"
    parsed = benchmark_names.parse(series.benchmark)
    if parsed is None:
        raise FlybenchError(f"{series.benchmark} is neither a compile metric nor a case suite flybench measures "
                            "(an imported series, such as FlyDSL's CI dashboard, is measured by its own source): "
                            "it cannot be bisected here")
    from flybench import hardware

    machine = args.machine or hardware.machine_name()
    _check_runs_here(series, repo if flydsl else None, args.bad)
    if args.machine and args.machine != hardware.machine_name():
        print(f"note: measuring on this machine ({hardware.machine_name()}), recorded as {args.machine}",
              file=sys.stderr)
    return (search.AsvCase(series, config, repo, machine, flydsl=flydsl, wheel=args.wheel),
            f"an asv run of that one case per commit on {machine}")


def _check_toolchain() -> None:
    """An error before any probe when FlyDSL's kernels cannot be compiled here: without a ROCm install or the
    compile extra's ld.lld (ziglang) and bitcode (triton), every probe failed and the bisect said only, a minute
    later, that GOOD had no value."""
    from flybench.compile import cache, toolchain

    toolkit = toolchain.rocm_root(cache.cache_root())
    if not toolkit.usable or toolkit.problems:
        raise FlybenchError("compile-only metrics are bisected by compiling FlyDSL's kernels here, and this machine "
                            f"cannot: {'; '.join(toolkit.problems)}. Install the compile extra "
                            f"({toolchain.INSTALL}) or ROCm, then bisect again (`flybench doctor` checks it)")


def _check_runs_here(series: search.Series, flydsl_repo: Path | None, bad: str) -> None:
    """An error when the series' provider cannot run on this machine: every probe would fail."""
    from flybench import hardware
    from flybench.providers import get_provider

    parsed = benchmark_names.parse(series.benchmark)
    device = hardware.detect()
    saved = os.environ.get(envvars.FLYDSL_SRC)
    try:
        if flydsl_repo is not None:
            src, _, _ = search.Wheels(flydsl_repo, search.INSTALLED).checkout(search.resolve(flydsl_repo, bad, "BAD"))
            os.environ[envvars.FLYDSL_SRC] = str(src)
        reason = get_provider(series.params["provider"]).unavailable_reason(parsed.workload, series.params["dtype"],
                                                                            device)
    finally:
        if saved is None:
            os.environ.pop(envvars.FLYDSL_SRC, None)
        else:
            os.environ[envvars.FLYDSL_SRC] = saved
    if reason:
        raise FlybenchError(f"{series.label} cannot be measured on this machine ({device.name}, {device.arch}): "
                            f"{reason}. Bisect a timing on a machine that runs it (the nightly's runners do); "
                            "compile-only metrics bisect on any CPU")


def _plan(series: search.Series, commits: list[search.CommitInfo], probe: search.Probe, method: str) -> int:
    print(f"bisect {series.label}: {method}")
    wheels = getattr(probe, "wheels", None)
    for index, c in enumerate(commits):
        role = "GOOD" if index == 0 else "BAD" if index == len(commits) - 1 else f"{index}"
        wheel = f"  flydsl {wheels.version(c.hash) or 'installed'}" if wheels is not None else ""
        print(f"{role:>5} {c.short} {c.date}{wheel}  {c.subject[:70]}")
    return 0


def _progress(step: search.Step, last: int) -> None:
    m = step.measurement
    value = search.format_value(m.value) if m.ok else f"no value ({(m.reason or '')[:160]})"
    position = f" {step.position:.2f}" if step.position is not None else ""
    print(f"  probe {step.commit[:10]} ({step.index}/{last}, {m.note}): {value} -> {step.verdict}{position} "
          f"({m.seconds:.0f} s)", file=sys.stderr, flush=True)
