"""`flybench gate BASE HEAD`: measure a pull request's base and head in interleaved rounds and judge it.

The check a pull request gets, run the same way on a CI runner, a laptop
and an engineer's own GPU. Two halves, each over both commits:

- timing, where a selected provider runs here: both commits are checked out
  as worktrees of the subject's repository; each side is measured with its
  own code, every case of a side's round in one process (`flybench run
  --one-process --append-samples`), in the schedule of `flybench.rounds`: a few rounds of
  everything, then more rounds of the subject cases whose verdict is still
  ambiguous, within a time budget. Each round gives a case one median, and
  the verdicts are judged over those medians (`flybench.regress.verdict`);
  providers outside `[regress] subject_providers` are drift controls that
  never fail the check. FlyDSL's commits (`--flydsl-repo`) are measured by
  this flybench with each side's exported kernels/ (FLYBENCH_FLYDSL_SRC)
  and flydsl wheel; their subjects default to the flydsl providers, which
  run on ROCm gfx942/gfx950 only. Not yet run on AMD hardware.
- compile, on any machine: the registered kernels of the subject compiled
  for gfx942, gfx950 (and sm_90 for flybench's Triton kernels) at both
  commits (`python -m flybench.compile`; FlyDSL's kernels with the flydsl
  wheel of each commit's time, `flybench.subject_code`); every resource
  that changed is reported exactly, and a kernel that compiled in base and
  fails in head is broken.

Exit status: 0 pass, 1 a regression or a case that broke, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from flybench import benchmark_names, case_selection, envvars, hardware, subject_code
from flybench.cli._output import output_folder, output_path
from flybench.cli.run import ROOT as RUN_ROOT
from flybench.cli.run import minutes_above_0, results_dir
from flybench.compile import affected, case_launches, registry
from flybench.compile.runner import source_files
from flybench.compile.record import AMD_METRICS, NVIDIA_METRICS
from flybench.errors import FlybenchError
from flybench.measure.record import SUFFIX as RECORD_SUFFIX
from flybench.regress.compare import Comparison, compile_changes
from flybench.regress.verdict import detectable_at
from flybench.rounds import Case, Selection, run_rounds
from flybench.selection import check_shape_set, choices, with_cases

ASV_CONFIG = "asv.conf.json"
FLYDSL_CONFIG = Path(__file__).resolve().parents[2] / "results" / "flydsl" / ASV_CONFIG
"""The FlyDSL subject's asv config (project flydsl), which each side's own config starts from."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "gate", help="measure base and head in interleaved rounds and judge the pull request",
        description="Check out BASE and HEAD of the subject's repository, measure both in interleaved rounds "
                    "(one measuring process per side and round), add rounds for the cases still ambiguous, and "
                    "judge over the rounds' medians. Exit status: 0 pass, 1 regression or broken case, "
                    "2 bad input.")
    parser.add_argument("base", help="base commit (hash, branch or tag)")
    parser.add_argument("head", help="head commit (hash, branch or tag)")
    parser.add_argument("--repo", type=Path, default=None,
                        help="flybench's git repository, when its own commits are gated (default: the one the "
                             "current directory is in)")
    parser.add_argument("--flydsl-repo", type=Path, default=None,
                        help="gate FlyDSL's commits: a clone of FlyDSL holding BASE and HEAD (compile half)")
    parser.add_argument("--wheel", type=subject_code.wheel_policy, default=subject_code.OF_ITS_TIME,
                        help="the flydsl package FlyDSL's commits compile with: of-its-time (default, the first "
                             "wheel built at or after each commit), a VERSION for both, or installed")
    parser.add_argument("--kernel", "-k", action="append",
                        help="compile half: only the kernels matching this glob (default: every kernel of the subject)")
    parser.add_argument("--arch", action="append", help="compile half: only this target (repeatable)")
    parser.add_argument("--isa-diff", type=output_folder, default=None,
                        help="compile half: write a unified ISA diff per kernel and target whose code changed here "
                             "(default: isa-diff/ in the work folder)")
    parser.add_argument("--no-timing", action="store_true", help="skip the timing half")
    parser.add_argument("--no-compile", action="store_true", help="skip the compile half")
    parser.add_argument("--dry-run", action="store_true",
                        help="check out both sides and say what each half would select and why; measure nothing")
    parser.add_argument("--workdir", type=output_folder, default=None,
                        help="where the worktrees, results and database go (default: a folder per commit pair "
                             "under the system's temporary directory)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="where compiles (the launches', the compile half's, Triton's and JAX's), FlyDSL's "
                             f"exported trees and wheels are kept for later gates (default: ${envvars.GATE_CACHE}, "
                             "else $XDG_CACHE_HOME/flybench/gate, else ~/.cache/flybench/gate); a folder that "
                             "cannot be written is said, and the gate goes on without it")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rounds an earlier gate of the same pair left in --workdir and add to them")
    parser.add_argument("--set", dest="shape_set", default="quick", help="shape set (default: quick)")
    parser.add_argument("--workload", "-w", action="append",
                        help="only this workload (repeatable): narrows the cases the change selects")
    parser.add_argument("--provider", "-p", action="append",
                        help="only this provider (repeatable): narrows the cases the change selects")
    parser.add_argument("--dtype", "-d", action="append",
                        help="only this element type (repeatable): narrows the cases the change selects")
    parser.add_argument("--case", "-c", action="append",
                        help="only the case of this name (repeatable): narrows the cases the change selects")
    parser.add_argument("--all-cases", action="store_true",
                        help="time every case the filters above name (every case of the set without them), "
                             "whether or not the change can affect it")
    parser.add_argument("--records", type=Path, action="append", default=[],
                        help="case records (a results tree or a .cases.jsonl file) whose loaded files select the "
                             "timed cases, besides those in the base commit's own results tree (repeatable)")
    parser.add_argument("--machine", default=None, help="asv machine name (default: gate-<host>-<accelerator>)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of everything selected (default: 3)")
    parser.add_argument("--max-rounds", type=int, default=8,
                        help="rounds a case gets at most, the ambiguous ones (default: 8)")
    parser.add_argument("--budget-minutes", type=minutes_above_0("--budget-minutes", "the gate", "the default, 60"),
                        default=60.0,
                        help="no round is added that would end past this (default: 60); the first rounds always run")
    parser.add_argument("--config", type=Path, help="flybench.toml with a [regress] section (thresholds, subjects)")
    parser.add_argument("--json", type=output_path, help="write the JSON report (every case) here")
    parser.add_argument("--markdown", type=output_path, help="write the markdown report (a PR comment) here")
    return parser


def main(args: argparse.Namespace) -> int:
    from flybench.regress import exit_code, load_config
    from flybench.regress.report import TERMINAL_WIDTH, write

    started = time.monotonic()  # the budget is a ceiling on the whole run, the selection's compiles included
    check_shape_set(args.shape_set)
    if not 1 <= args.rounds <= args.max_rounds:
        raise FlybenchError(f"--rounds {args.rounds} must be at least 1 and at most --max-rounds {args.max_rounds}")
    cfg = load_config(args.config)  # a wrong config is bad input before anything is measured
    flydsl = args.flydsl_repo is not None
    if flydsl and cfg.subject_providers == frozenset({"*"}):
        cfg = replace(cfg, subject_providers=frozenset({"flydsl*"}))  # FlyDSL's pull requests change FlyDSL's code
    if flydsl and not cfg.control_providers:
        cfg = replace(cfg, control_providers=frozenset({"ck"}))  # AMD's own kernels beside FlyDSL's, as drift controls
    workloads = with_cases(args.shape_set, args.workload or _workloads(), args.case)
    for path in args.records:
        _check_records(path)
    device = hardware.detect()
    candidates = choices(device, workloads, args.provider, args.dtype)
    if not candidates:  # `-w mixtral_step -p flex` once passed as "not measured", exit 0
        given = " ".join(f"{flag} {value}" for flag, values in (("-w", args.workload), ("-p", args.provider),
                                                                 ("-d", args.dtype), ("-c", args.case))
                         for value in values or ())
        raise FlybenchError(f"the filters name no case: {given} share no workload, provider and dtype (`flybench "
                            "list` names each workload's providers and dtypes); widen or drop one")
    runnable = [c for c in candidates if c.reason is None]
    subjects_run = any(cfg.is_subject(c.provider) for c in runnable)
    kernels = [] if args.no_compile else compile_kernels(flydsl, args.kernel, args.arch)
    if not args.dry_run and not kernels and (args.no_timing or not subjects_run):
        raise FlybenchError("nothing to measure: no subject provider of the selection runs here (`flybench list` "
                            "says why) and the compile half is off")
    # the timing selection is made and reported wherever the gate runs, as its dry run makes it
    timing = not args.no_timing
    repo = subject_code.toplevel(args.flydsl_repo or args.repo or Path.cwd())
    base, head = (subject_code.resolve(repo, ref, role) for ref, role in ((args.base, "BASE"), (args.head, "HEAD")))
    machine = args.machine or f"gate-{hardware.machine_name(device)}"
    workdir = (args.workdir or Path(tempfile.gettempdir()) / "flybench-gate" / f"{repo.name}-{base[:8]}-{head[:8]}")
    print(f"gate: {repo} base {base[:8]} head {head[:8]}; work in {workdir}", flush=True)
    cache, said = _cache_folder(args.cache, workdir)
    if said:
        print(f"gate: {said}", file=sys.stderr, flush=True)
    changed = subject_code.changed_files(repo, base, head)
    sides = {name: _side(repo, name, commit, flydsl, args.wheel, workdir, cache, changed)
             for name, commit in (("base", base), ("head", head))}
    notes: list[str] = [f"{name} {side.commit[:8]}: {side.note}" for name, side in sides.items()]
    if said:
        notes.append(said)
    selections = [Selection(w, tuple(args.provider or ()), tuple(args.dtype or ()), tuple(args.case or ()))
                  for w in workloads]
    untimed = "--no-timing" if args.no_timing else "no subject provider of the selection runs on this machine"
    unmeasured = ""
    if timing and args.all_cases:
        notes.append("timing selection: every case the filters name (--all-cases), whatever the change")
        notes += case_selection.cannot_run_lines({(c.workload, c.provider, c.dtype): c.reason for c in candidates
                                                  if c.reason and cfg.is_subject(c.provider)}, "named")
        timing = subjects_run
    elif timing:
        chosen = _timing_selection(candidates, sides, changed, cfg, flydsl, args.shape_set, args.case,
                                   [results_dir(sides["base"].config), *args.records], repo, base)
        if not flydsl:
            chosen = case_selection.narrow(chosen, _kernel_code_only(sides), _launches_kernels,
                                           _launch_comparison(sides, device, args.arch, cache))
        else:
            chosen = case_selection.narrow_by_code(chosen, _flydsl_kernels(sides, args.shape_set),
                                                   _code_comparison(sides, device, args.arch, cache),
                                                   _beyond_overlay(changed), _registered(sides),
                                                   _launches_flydsl(args.shape_set))
        notes += chosen.lines()
        selections, subjects = _measured(chosen, runnable, cfg)
        notes += _controls_line(selections, subjects)
        untimed = ("the cases the change selects cannot run on this machine" if chosen.selected
                   else case_selection.NOTHING_CHANGED if chosen.nothing_changed else "no case loads a changed file")
        unmeasured = untimed if chosen.nothing_changed else ""
        timing = bool(selections)
        if subjects:
            cfg = replace(cfg, subject_providers=subjects)
    too_big = _over_memory(_round_cases(selections, runnable, args.shape_set), device) if timing else {}
    if too_big:
        notes.append(f"not measured, known before they run ({len(too_big)}): "
                     + "; ".join(f"{w}/{p} {c} {d}: {why}" for (w, c, p, d), why in sorted(too_big.items())))
        if not [c for c in _round_cases(selections, runnable, args.shape_set) if tuple(c) not in too_big]:
            timing, untimed = False, "every case selected is over this device's memory by its estimate"
    untimed = f"timing: not measured ({untimed})"
    if args.dry_run:
        notes.append("timing would measure: " + "; ".join(_described(s) for s in selections) if timing else untimed)
        print("\n".join(notes + _compile_plan(sides, changed, flydsl, kernels, args)))
        return 0
    if timing:
        _check_fresh(sides, machine, args.resume)
        db = workdir / "gate.duckdb"
        compiled = _compiled_code_caches(cache)

        def measure(name: str, round_selections: list[Selection]) -> None:
            cases = [c for c in _round_cases(round_selections, runnable, args.shape_set) if tuple(c) not in too_big]
            if cases:
                _run_side(sides[name], machine, args.shape_set, cases, workdir, compiled)

        def ambiguous() -> list[Case]:
            return _ambiguous(_judge(sides, db, machine, cfg), args.max_rounds)

        schedule = run_rounds(selections, measure, ambiguous, initial=args.rounds, cap=args.max_rounds,
                              budget_s=60 * args.budget_minutes, started=started)
        comparison = _judge(sides, db, machine, cfg)
        notes += schedule.summary(60 * args.budget_minutes, args.max_rounds, time.monotonic() - started)
    else:
        comparison = Comparison(machine, base, head, cfg.p_threshold, unmeasured=unmeasured)
        notes.append(untimed)
    if kernels:
        notes += _compile_half(comparison, sides, changed, flydsl, kernels, args, cfg, workdir, cache)
    comparison = replace(comparison, notes=notes)
    write(comparison, "terminal", width=TERMINAL_WIDTH)
    if args.json:
        write(comparison, "json", args.json)
    if args.markdown:
        write(comparison, "markdown", args.markdown)
    return exit_code(comparison)


METRIC_UNITS = {m.name: m.unit for m in (*AMD_METRICS, *NVIDIA_METRICS)}
"""Each compile metric's unit, as the compile-only suite declares it."""


class Side(NamedTuple):
    """One side's code: its commit, the asv config its rounds run under, the environment they need, and where
    its kernels compile from."""

    name: str
    commit: str
    config: Path  # asv config: results go to its results_dir
    env: dict[str, str]  # added to the measuring processes' environment
    build: "Build"
    wheel: str  # FlyDSL's sides: the flydsl package they compile and run with ("flydsl 0.3.1"); flybench's: ""

    @property
    def note(self) -> str:
        return f"kernels/ exported, {self.wheel}" if self.wheel else "its own worktree"


def _side(repo: Path, name: str, commit: str, flydsl: bool, wheel: str, workdir: Path, cache: Path,
          changed: list[str]) -> Side:
    """flybench's commits: a worktree, measured and compiled with its own code. FlyDSL's: the commit's exported
    kernels/ tree with the flydsl wheel of its time (`subject_code.Wheels`), measured by this flybench under an
    asv config of the side's own (the clone as asv's repository, for commit dates) and compiled by it."""
    if not flydsl:
        tree = subject_code.checkout(repo, workdir / name, commit)
        return Side(name, commit, tree / ASV_CONFIG, {}, Build(tree, [str(tree)], [], tree), "")
    src, path, note = subject_code.Wheels(repo, wheel, cache / "flydsl").checkout(commit)
    _flat_layouts(src)
    overlay = {}
    if path and any(f.startswith("python/flydsl/") for f in changed):  # the pull request changes FlyDSL's
        # Python compiler: each side's own python/flydsl laid over the wheel, as code_history builds a commit
        path, note, tree = _overlaid(repo, commit, note.removeprefix("flydsl "), cache / "flydsl")
        overlay = {envvars.FLYDSL_PYTHON: tree}
    config = workdir / name / ASV_CONFIG
    config.parent.mkdir(parents=True, exist_ok=True)
    conf = json.loads(FLYDSL_CONFIG.read_text())
    conf.update(repo=str(repo), benchmark_dir=str(RUN_ROOT / "benchmarks"), results_dir=str(workdir / name / "results"),
                html_dir=str(workdir / name / "html"), env_dir=str(workdir / name / "env"))
    config.write_text(json.dumps(conf, indent=2))
    pythonpath = [*path, str(RUN_ROOT)]
    env = {envvars.FLYDSL_SRC: str(src), **overlay, "PYTHONPATH": os.pathsep.join(
        [*pythonpath, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])}
    return Side(name, commit, config, env, Build(RUN_ROOT, pythonpath, ["--flydsl-src", str(src)], src, overlay),
                note)


def _overlaid(repo: Path, commit: str, version: str, work: Path) -> tuple[list[str], str, str]:
    """The flydsl wheel `version` with the commit's python/flydsl laid over it (`code_history.library_dir`): the
    path, the note, and the tree laid (part of each compile's key, since the wheel's version cannot tell an overlay
    from the wheel)."""
    from flybench.compile import code_history

    tree = subject_code.git_run(repo, "rev-parse", f"{commit}:python/flydsl").stdout.strip()
    if not tree:
        return [str(code_history.history.install_wheel(version, work / "wheels"))], f"flydsl {version}", ""
    library = code_history.Library(version, None, commit, tree, False, "")
    return [str(code_history.library_dir(repo, library, work))], library.label, tree


def _flat_layouts(src: Path) -> None:
    """A tree from before FlyDSL moved its kernels into domain packages (#807) gets a stand-in at each registered
    kernel's path and the provider's (`code_history.flat_layout`), so its cases and kernels are found and built."""
    from flybench.compile.code_history import flat_layout
    from flybench.providers.flydsl import INTERFACE

    for module in sorted({case.module for case in registry.CHECKOUT_CASES} | {INTERFACE.as_posix()}):
        flat_layout(src, module)


def _beyond_overlay(changed: list[str]) -> list[str]:
    """FlyDSL's changed files that an overlay of python/flydsl cannot carry: the compiler's C++ and its build, which
    only a wheel built from the commit holds (FlyDSL publishes release wheels only)."""
    from flybench.compile.code_history import COMPILER_PATHS

    return [path for path in changed if path.split("/")[0] in COMPILER_PATHS or path in affected.FLYDSL_BUILD]


def _family(dtype: str | None) -> str | None:
    """Element types one registered kernel stands for: the same source builds a bf16 and an fp16 kernel."""
    return "16-bit float" if dtype in ("fp16", "f16", "bf16") else dtype


def _flydsl_kernels(sides: dict[str, Side], shape_set: str):
    """`kernels_of(key)` for `case_selection.narrow_by_code`: the registered FlyDSL kernels built from a file the
    case loads at either side (its modules and what they import from kernels/), of the case's element type (bf16
    standing for fp16) and variant (`_agrees`) where the kernel's configuration names them."""
    from flybench.workloads import get_workload

    loaded: dict[tuple[str, str, str], set[str]] = {}  # per (workload, provider, dtype): its cases' files
    modules = {kernel.name: _module_of(kernel, sides) for kernel in registry.CHECKOUT_CASES}
    shapes: dict[tuple[str, str], dict] = {}

    def kernels_of(key: case_selection.Key) -> list[str]:
        workload, name, provider, dtype = key
        if (workload, name) not in shapes:
            shapes.update({(workload, case.name): case.shape for case in get_workload(workload).cases(shape_set)})
        if (workload, provider, dtype) not in loaded:
            loaded[workload, provider, dtype] = set().union(*(affected.flydsl_case_files(
                side.build.root, workload, provider, shape_set, [dtype]) for side in sides.values()))
        files = loaded[workload, provider, dtype]
        return [kernel.name for kernel in registry.CHECKOUT_CASES
                if _family(kernel.config.get("dtype", kernel.config.get("in_dtype"))) in (None, _family(dtype))
                and _agrees(kernel.config, shapes[workload, name]) and modules[kernel.name] & files]

    return kernels_of


def _launches_flydsl(shape_set: str):
    """`launches(key)` for `case_selection.narrow_by_code`: whether the case's provider names an entry point for it
    (`Provider.entry_points`; flydsl names none for a8w4, which it does not run)."""
    from flybench.providers import get_provider
    from flybench.providers.base import Provider
    from flybench.workloads import get_workload

    def launches(key: case_selection.Key) -> bool:
        workload, name, provider, dtype = key
        chosen = get_provider(provider)
        if type(chosen).entry_points is Provider.entry_points:  # it does not say (flydsl-jax): it may launch some
            return True
        case = next(c for c in get_workload(workload).cases(shape_set) if c.name == name)
        return bool(chosen.entry_points(case, dtype))

    return launches


def _agrees(config: dict, shape: dict) -> bool:
    """Whether a registered kernel's configuration builds the variant a case runs where both say: causal or not
    (attention's `causal`, the paged cases' `mask`), and the MoE stage."""
    causal = shape.get("causal", shape["mask"] == "causal" if "mask" in shape else None)
    if "causal" in config and causal is not None and config["causal"] != causal:
        return False
    return "stage" not in config or "stage" not in shape or config["stage"] == shape["stage"]


def _registered(sides: dict[str, Side]):
    """`registered(path)` for `case_selection.narrow_by_code`: whether a file is one some registered FlyDSL kernel
    is built from at either side (`_kernel_files`)."""
    files: set[str] = set()

    def registered(path: str) -> bool:
        if not files:
            kernels = [case.name for case in registry.CHECKOUT_CASES]
            files.update(*_kernel_files(kernels, [side.build for side in sides.values()]).values())
        return path in files

    return registered


def _module_of(kernel: registry.KernelCase, sides: dict[str, Side]) -> set[str]:
    """The kernel's own module file at either side, relative to the exported tree (and, for a stand-in, the file
    it stands for: the module where it lay before #807)."""
    from flybench.compile.code_history import STAND_IN
    from flybench.imports import module_file

    found = set()
    for side in sides.values():
        path = module_file(side.build.root, kernel.module)
        if path is not None:
            found.add(path.relative_to(side.build.root).as_posix())
            if path.read_text(errors="replace").startswith(f"# {STAND_IN}"):
                found.add(f"kernels/{PurePosixPath(kernel.module).stem}.py")
    return found


def _code_comparison(sides: dict[str, Side], device, arches: list[str] | None, cache: Path):
    """`compare(kernels)` for `case_selection.narrow_by_code`: the kernels compiled at both sides (the compile
    half's compiles, `_compile_side`, its cache shared) for this machine's GPU (where it has none: the `--arch`
    targets, else gfx942 and gfx950), and per kernel what differs: its machine code (`isa.code_lines`), its launch
    configuration (workgroup and LDS), or a side where it does not build."""
    if device.kind != "cpu":
        targets = [device.arch] if device.arch in registry.AMD_ARCHES else []
    else:
        targets = list(arches or registry.AMD_ARCHES)

    def compare(kernels: list[str]) -> dict[str, list[str]]:
        if not kernels:
            return {}
        if not targets:
            return {k: [f"it cannot be compiled for {device.arch} here"] for k in kernels}
        began = time.monotonic()
        records = {name: {(r["kernel"], r["arch"]): r for r in _compile_side(side.build, side.commit, kernels,
                                                                               targets, cache)}
                   for name, side in sides.items()}
        print(f"gate: the {len(kernels)} registered kernels of the reached cases compiled at both sides for "
              f"{', '.join(targets)} in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
        return {k: [reason for arch in targets for reason in _differs(records["base"].get((k, arch)),
                                                                       records["head"].get((k, arch)), arch, cache)]
                for k in kernels}

    return compare


LAUNCH_METRICS = ("lds_static", "lds_dynamic", "scratch")
"""What a launch reserves besides the code, compared with the workgroup size."""


def _differs(base: dict | None, head: dict | None, arch: str, cache: Path) -> list[str]:
    """What differs between one kernel's compiles at the two sides on `arch`, in words; [] when nothing does
    (or the kernel is built at neither side)."""
    from flybench.compile.cache import entry_dir
    from flybench.compile.isa import code_lines

    built = [r is not None and r.get("status") == "ok" for r in (base, head)]
    if not any(built):
        failed = [r for r in (base, head) if r is not None and r.get("status") == "failed"]
        return [f"it failed to build on {arch} ({(failed[0].get('reason') or '').splitlines()[0][:120]}): its "
                "machine code cannot be compared"] if failed else []
    if not all(built):
        return [f"it builds on {arch} at {'base' if built[0] else 'head'} only"]

    def code(record: dict) -> list[str] | None:
        path = entry_dir(cache / "compile-cache", record["kernel"], arch, record.get("key") or "") / (
            record.get("isa_file") or "kernel.s")
        try:
            return code_lines(path.read_text(errors="replace"))
        except OSError:
            return None

    before, after = code(base), code(head)
    if before is None or after is None:
        return [f"its machine code on {arch} could not be read back from the compile cache"]
    reasons = [f"machine code changed on {arch}"] if before != after else []
    launch = [f"{m} {base['metrics'].get(m)} -> {head['metrics'].get(m)}" for m in LAUNCH_METRICS
              if (base.get("metrics") or {}).get(m) != (head.get("metrics") or {}).get(m)]
    groups = [_workgroup(r) for r in (base, head)]
    if groups[0] != groups[1]:
        launch.insert(0, f"workgroup {groups[0]} -> {groups[1]}")
    if launch:
        reasons.append(f"launch configuration changed on {arch} ({', '.join(launch)})")
    return reasons


def _workgroup(record: dict) -> object:
    kernels = record.get("kernels") or {}
    primary = kernels.get(record.get("primary") or "") or {}
    return primary.get("workgroup_size")


def _timing_selection(candidates, sides: dict[str, Side], changed: list[str], cfg, flydsl: bool, shape_set: str,
                      names: list[str] | None, trees: list[Path], repo: Path, base: str) -> case_selection.Chosen:
    """The subject's cases (of `candidates`, narrowed to `names` when given) that the change can affect: by what
    each case loaded where a usable case record under `trees` says (`case_selection`), else by the files its
    provider and workload import at either side (flybench's: `affected.case_files`; FlyDSL's:
    `affected.flydsl_case_files`, the modules its cases launch)."""
    from flybench.workloads import get_workload

    subject = [c for c in candidates if not flydsl or cfg.is_subject(c.provider)]
    keys = [(c.workload, case.name, c.provider, c.dtype) for c in subject
            for case in get_workload(c.workload).cases(shape_set) if not names or case.name in names]
    static: dict[tuple[str, str], set[str]] = {}

    def files(workload: str, provider: str) -> set[str]:
        if (workload, provider) not in static:
            dtypes = sorted({c.dtype for c in subject if (c.workload, c.provider) == (workload, provider)})
            static[workload, provider] = set().union(*(
                affected.flydsl_case_files(side.build.root, workload, provider, shape_set, dtypes) if flydsl
                else affected.case_files(side.build.root, workload, provider) for side in sides.values()))
            if not flydsl:
                static[workload, provider] |= launched_files(workload, provider, shape_set, dtypes)
        return static[workload, provider]

    recorded, refused, older = case_selection.recorded_files([t for t in trees if t.exists()], shape_set,
                                                      _commit_of(repo), _unchanged_since(repo, base),
                                                      _record_fits(repo, base, flydsl))
    chosen = case_selection.choose(keys, recorded, files, changed,
                                   affected.flydsl_shared if flydsl else affected.flybench_timing_shared,
                                   {(c.workload, c.provider, c.dtype): c.reason for c in subject if c.reason})
    return replace(chosen, refused=refused, older=older)


def launched_files(workload: str, provider: str, shape_set: str, dtypes: list[str]) -> set[str]:
    """The modules of the project's Triton kernels that the cases of (workload, provider) launch, relative to the
    repository: how the model lane's steps are reached through the MoE kernels they run, which the static reading
    leaves out (a module named after another workload is not followed). Planned on meta tensors with this
    flybench's code (`case_launches.launches`); nothing where the pair launches none, or Triton is missing."""
    from flybench.workloads import get_workload

    if (workload, provider) not in case_launches.LAUNCHERS or case_launches.cannot_compile():
        return set()
    found: set[str] = set()
    for dtype in dtypes:
        for case in get_workload(workload).cases(shape_set):
            try:
                modules = {launch.kernel.fn.__code__.co_filename
                           for launch in case_launches.launches((workload, case.name, provider, dtype), "sm_90")}
            except Exception:  # noqa: BLE001 - a plan that cannot be made here leaves the static reading as it is
                continue
            found |= {Path(m).resolve().relative_to(RUN_ROOT).as_posix() for m in modules
                      if Path(m).resolve().is_relative_to(RUN_ROOT)}
    return found


def _record_fits(repo: Path, base: str, flydsl: bool):
    """`fits(key, loaded)` for `case_selection.recorded_files`: why a record's `loaded` cannot speak for its case
    (None when it can). Each path must be a file of the repository at the base (`./flybench/x.py`, made-up paths
    and files of another checkout are not), and a record of flybench's own must list its case's provider and
    workload modules, which every case loads (a list of another case's files would deselect this one)."""
    from flybench.providers import get_provider
    from flybench.workloads import get_workload

    listed = subject_code.git_run(repo, "ls-tree", "-r", "--name-only", "-z", base)
    files = set(listed.stdout.split("\0")) if listed.returncode == 0 else set()

    def module(obj: object) -> str:
        return type(obj).__module__.replace(".", "/") + ".py"

    def fits(key: case_selection.Key, loaded: list[str]) -> str | None:
        missing = [path for path in loaded if path not in files]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            return f"its loaded file {missing[0][:60]!r}{more} is no file of the repository at the base"
        if flydsl:
            return None
        try:
            own = {module(get_provider(key[2])), module(get_workload(key[0]))}
        except (FlybenchError, KeyError, ValueError):
            return f"its case {key[0]}/{key[2]} is not one of this flybench"
        lacking = sorted(own - set(loaded))
        if lacking:
            return (f"its loaded files lack its own {', '.join(lacking)}, which every such case loads: the files "
                    "of another case")
        return None

    return fits


def _kernel_code_only(sides: dict[str, Side]):
    """Whether a changed file reaches cases only through the Triton kernels they launch
    (`affected.kernel_code_only`, reading the file at both sides)."""

    def text(side: Side, path: str) -> str | None:
        try:
            return (side.build.root / path).read_text()
        except (OSError, UnicodeDecodeError):
            return None

    return lambda path: affected.kernel_code_only(path, text(sides["base"], path), text(sides["head"], path))


def _launches_kernels(workload: str, provider: str) -> bool:
    return (workload, provider) in case_launches.LAUNCHERS


def _launch_comparison(sides: dict[str, Side], device, arches: list[str] | None, cache: Path):
    """`compare(keys)` for `case_selection.narrow`: each case's launches listed and compiled in both sides'
    checkouts (`case_launches.run_side`) for this machine's GPU (where it has none: the `--arch` targets, else
    every target), and what differs, per case."""
    from flybench.compile.isa import code_lines

    if device.kind != "cpu":
        targets = [device.arch] if device.arch in registry.ARCHES else []
    else:
        targets = list(arches or registry.ARCHES)
    folder = cache / "case-compiles"

    def compare(keys: list[case_selection.Key]) -> dict[case_selection.Key, list[str]]:
        if not keys:
            return {}
        if not targets:
            return {key: [f"its launches cannot be compiled for {device.arch} here (compile-only targets: "
                          f"{', '.join(registry.ARCHES)})"] for key in keys}
        why = case_launches.cannot_compile()
        if why:
            print(f"gate: the launches of {len(keys)} cases could not be compiled: {why}; they are selected by "
                  "their files", file=sys.stderr, flush=True)
            return {key: [f"selected by its files: its launches could not be compiled ({why})"] for key in keys}
        began = time.monotonic()
        found = {}
        for name, side in sides.items():
            found[name] = case_launches.run_side(side.build.root, list(keys), targets, folder, os.cpu_count() or 1,
                                                 prefix=f"gate: {name} launches: ")
        print(f"gate: the launches of {len(keys)} cases listed and compiled (or found in the cache) at both sides "
              f"for {', '.join(targets)} in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
        return {key: [f"{reason}{f' on {arch}' if len(targets) > 1 else ''}" for arch in targets
                      for reason in case_launches.compare(found["base"]["|".join((*key, arch))],
                                                          found["head"]["|".join((*key, arch))], folder, code_lines)]
                for key in keys}

    return compare


def _check_records(path: Path) -> None:
    """--records names a results tree or a record file; anything else (a FIFO, a device) is refused before it is
    opened, where reading it could wait for ever."""
    if not path.exists():
        raise FlybenchError(f"--records {path}: no such file or folder")
    if not (path.is_dir() or path.is_file()):
        raise FlybenchError(f"--records {path} is neither a regular file nor a folder (a pipe, socket or device): "
                            f"give a results tree or a {RECORD_SUFFIX} file")


def _measured(chosen: case_selection.Chosen, runnable, cfg) -> tuple[list[Selection], frozenset[str]]:
    """The measuring processes of the selected cases that run here, with the drift controls of each workload (the
    `[regress] control_providers` the change does not reach), and the subject providers."""
    keys = chosen.runnable()
    subjects = frozenset(key[2] for key in keys)
    controls = {w: sorted({c.provider for c in runnable if c.workload == w and c.provider not in subjects
                           and cfg.is_control(c.provider)}) for w in {key[0] for key in keys}}
    return case_selection.selections(keys, controls), subjects


def _controls_line(selections: list[Selection], subjects: frozenset[str]) -> list[str]:
    controls = sorted({f"{s.workload}/{p}" for s in selections for p in s.providers if p not in subjects})
    return (["drift controls, measured in the same rounds, never failing the check: " + "; ".join(controls)]
            if controls else [])


def _described(selection: Selection) -> str:
    """One measuring process in a few words: the workload, its providers, and how many cases and dtypes."""
    cases = f"{len(selection.cases)} case{'s' if len(selection.cases) != 1 else ''}" if selection.cases else \
        "every case"
    return (f"{selection.workload} ({', '.join(selection.providers) or 'every provider'}; {cases}"
            f"{', ' + ', '.join(selection.dtypes) if selection.dtypes else ''})")


def _commit_of(repo: Path):
    """A record's commit as the full hash of a commit of `repo`, None when it is none (`revisions.commit`: a word
    git would read as an option never reaches it); kept per commit."""
    from flybench import revisions

    found: dict[str, str | None] = {}

    def commit_of(commit: str) -> str | None:
        if commit not in found:
            try:
                found[commit] = revisions.commit(repo, commit, "a case record's commit")
            except FlybenchError:
                found[commit] = None
        return found[commit]

    return commit_of


def _unchanged_since(repo: Path, base: str):
    """Whether none of `files` changed between `commit` (a full hash, from `_commit_of`) and the base: a record of
    an older commit still says what the base's case loads (git's answer kept per commit)."""
    diffs: dict[str, set[str] | None] = {}

    def unchanged(commit: str, files: set[str]) -> bool:
        if commit not in diffs:
            done = subject_code.git_run(repo, "diff", "--name-only", commit, base, "--")
            diffs[commit] = set(done.stdout.split()) if done.returncode == 0 else None
        return diffs[commit] is not None and not diffs[commit] & files

    return unchanged


def _compile_half(comparison: Comparison, sides: dict[str, Side], changed: list[str], flydsl: bool,
                  kernels: list[str], args: argparse.Namespace, cfg, workdir: Path, cache: Path) -> list[str]:
    """Compile the kernels a change can affect at both sides; their resource changes and broken kernels join the
    comparison; the lines the report says about it."""
    began = time.monotonic()
    kernels, notes = _compile_selection(sides, changed, flydsl, kernels, args)
    records = {name: _compile_side(side.build, side.commit, kernels, args.arch, cache) if kernels else []
               for name, side in sides.items()}
    diffs = args.isa_diff or workdir / "isa-diff"
    changed_code = _isa_diffs(records["base"], records["head"], cache / "compile-cache", diffs)
    if changed_code:
        notes.append(f"machine code changed in {len(changed_code)} kernel{'s' if len(changed_code) != 1 else ''}: "
                     + "; ".join(f"{k} ({', '.join(a)})" for k, a in changed_code.items()) + f"; ISA diffs in {diffs}")
    changes, broken = compile_changes(records["base"], records["head"], METRIC_UNITS, cfg)
    if sides["base"].wheel != sides["head"].wheel:  # FlyDSL's sides got different wheels: a failure may be the wheel's
        broken = [replace(case, verdict="incomparable", detail=f"{case.detail} (base: {sides['base'].note}; head: "
                          f"{sides['head'].note}: the sides compiled with different flydsl wheels, so this may be "
                          "the wheel's doing; gate again with --wheel set to one version to tell)")
                  if case.verdict == "broken" else case for case in broken]
    comparison.resources += changes
    comparison.cases += broken
    notes.append(_compiles_line(records, len(changes), time.monotonic() - began))
    return notes


def _compiles_line(records: dict[str, list[dict]], changes: int, seconds: float) -> str:
    """'compile: 3 kernel x target compiles a side, 0 resource changes, 14 s', counting only the compiles that
    ran; those that could not run here (a missing package) are said as such, never as compiles."""
    ran = {name: [r for r in found if r.get("status") != "unavailable"] for name, found in records.items()}
    line = f"compile: {len(ran['head'])} kernel x target compiles a side, {changes} resource changes, {seconds:.0f} s"
    missing = [r for r in records["head"] if r.get("status") == "unavailable"]
    if missing:
        reasons = sorted({str(r.get("reason") or "")[:160] for r in missing})
        line += (f"; {len(missing)} could not compile here, so nothing was compared for them: {'; '.join(reasons)}")
    return line


def _compile_selection(sides: dict[str, Side], changed: list[str], flydsl: bool, kernels: list[str],
                       args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The kernels the change can affect, from the files each is built from (all of `kernels` when --kernel
    names them), and the lines the report says about it."""
    if args.kernel:
        return kernels, []
    selection = affected.select(_kernel_files(kernels, [s.build for s in sides.values()]), changed,
                                affected.flydsl_shared if flydsl else affected.flybench_shared)
    return selection.selected, selection.lines()


def _compile_plan(sides: dict[str, Side], changed: list[str], flydsl: bool, kernels: list[str],
                  args: argparse.Namespace) -> list[str]:
    """--dry-run: what the compile half would compile."""
    if not kernels:
        return ["compile: off (--no-compile)"]
    chosen, lines = _compile_selection(sides, changed, flydsl, kernels, args)
    return lines + [f"compile would build {len(chosen)} kernel{'s' if len(chosen) != 1 else ''} at both sides"]


def compile_kernels(flydsl: bool, patterns: list[str] | None, arches: list[str] | None) -> list[str]:
    """The registered kernels the compile half compiles: the subject's own (FlyDSL's from a checkout, or
    flybench's), narrowed by `patterns`; a pattern or target that matches nothing is bad input."""
    from fnmatch import fnmatchcase

    for arch in arches or []:
        registry.check_arch(arch)
    origin = "checkout" if flydsl else "own"
    names = [n for n, case in registry.CASES.items() if case.origin == origin]
    for pattern in patterns or []:
        if not any(fnmatchcase(n, pattern) for n in names):
            raise FlybenchError(f"no kernel of the subject matches {pattern!r}; its kernels: {', '.join(names)}")
    return [n for n in names if not patterns or any(fnmatchcase(n, p) for p in patterns)]


class Build(NamedTuple):
    """Where one side's kernels compile from: the folder, the Python path, compile options, and the folder the
    subject's files are relative to (a worktree, or FlyDSL's exported tree)."""

    cwd: Path
    pythonpath: list[str]
    options: list[str]
    root: Path
    env: dict[str, str] = {}  # FlyDSL's sides: the python/flydsl tree laid over the wheel (part of each key)


def _kernel_files(kernels: list[str], builds) -> dict[str, set[str]]:
    """Per kernel, the files it is built from on either side, relative to the subject's root."""
    files: dict[str, set[str]] = {}
    for name in kernels:
        case = registry.get_case(name)
        for build in builds:
            found = source_files(case, build.root, root=build.root)
            files.setdefault(name, set()).update(p.relative_to(build.root).as_posix() for p in found)
    return files


def _compile_side(build: Build, commit: str, kernels: list[str], arches: list[str] | None,
                  cache: Path) -> list[dict]:
    """One side's compile records (`python -m flybench.compile --format json`).

    Both sides share one compile cache, keyed by each kernel's sources and
    toolchain, so a kernel neither side changed compiles once.
    """
    command = [sys.executable, "-m", "flybench.compile", "--format", "json", *build.options,
               *[arg for k in kernels for arg in ("-k", k)], *[arg for a in arches or () for arg in ("--arch", a)]]
    env = {**os.environ, **build.env, "PYTHONPATH": os.pathsep.join(build.pythonpath),
           envvars.COMPILE_CACHE: str(cache / "compile-cache")}
    returncode, stdout, stderr = _streamed(command, build.cwd, env, f"compile {commit[:8]}: ")
    try:
        records = json.loads(stdout)
    except ValueError:
        records = None
    if returncode == 2 or not isinstance(records, list):
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        raise FlybenchError(f"the compile half of {commit[:8]} gave no records (exit {returncode}): {tail}")
    return records


def _streamed(command: list[str], cwd, env: dict[str, str], prefix: str) -> tuple[int, str, str]:
    """Run `command`, its stderr (the compile's line per kernel, with the count done and left) passed on to
    ours line by line as it comes, each line after `prefix`; its stdout kept. Returns exit status, stdout,
    stderr."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE, text=True)
        lines = []
        for line in proc.stderr:
            lines.append(line)
            print(prefix + line.rstrip("\n"), file=sys.stderr, flush=True)
        proc.wait()
        out.seek(0)
        return proc.returncode, out.read(), "".join(lines)


def _isa_diffs(base: list[dict], head: list[dict], cache: Path, out: Path) -> dict[str, list[str]]:
    """A unified diff of the machine code (AMDGPU ISA, or PTX on NVIDIA) of every kernel and target whose code
    differs between the sides, written to `out`; the kernels with the targets where their code changed."""
    import difflib

    from flybench.compile.cache import entry_dir
    from flybench.compile.isa import code_lines

    def code(record: dict) -> list[str] | None:
        if record.get("status") != "ok" or not record.get("isa_file"):
            return None
        path = entry_dir(cache, record["kernel"], record["arch"], record.get("key") or "") / record["isa_file"]
        try:
            return code_lines(path.read_text(errors="replace"))
        except OSError:
            return None

    sides = [{(r["kernel"], r["arch"]): r for r in records} for records in (base, head)]
    changed: dict[str, list[str]] = {}
    for kernel, arch in sorted(sides[0].keys() & sides[1].keys()):
        before, after = code(sides[0][kernel, arch]), code(sides[1][kernel, arch])
        if before is None or after is None or before == after:
            continue
        out.mkdir(parents=True, exist_ok=True)
        name = f"{kernel}@{arch}".replace(":", "_").replace("/", "_")
        (out / f"{name}.diff").write_text("".join(difflib.unified_diff(before, after, f"base/{name}",
                                                                       f"head/{name}")))
        changed.setdefault(kernel, []).append(arch)
    return changed


def _judge(sides: dict[str, Side], db: Path, machine: str, cfg) -> Comparison:
    """Ingest both sides' results so far and compare them."""
    from flybench.regress.compare import compare
    from flybench.store import ingest

    for side in sides.values():
        report = ingest(results_dir(side.config), db, config=side.config)
        if not report.ok:
            raise FlybenchError(f"the results in {results_dir(side.config)} could not be stored: {report.summary()}")
    return compare(db, machine, sides["base"].commit, sides["head"].commit, config=cfg)


def _ambiguous(comparison, cap: int) -> list[Case]:
    """The subject cases still ambiguous that more rounds could settle, as (workload, case, provider, dtype).

    A case whose noise between rounds is so large that even `cap` rounds a
    side would leave it unable to see a change of twice its tolerance
    (`verdict.detectable_at`) gets no more rounds: it stays ambiguous, and
    the budget goes to cases that can be settled.
    """
    found = []
    for case in comparison.having("ambiguous"):
        name = benchmark_names.parse(case.benchmark)
        if case.noise_source == "rounds" and case.noise is not None and case.threshold is not None:
            if detectable_at(case.noise, cap, case.threshold, comparison.p_threshold) > 2 * case.threshold:
                continue
        if name is not None:
            found.append((name.workload, str(case.params["case"]), str(case.params["provider"]),
                          str(case.params["dtype"])))
    return found


def default_cache() -> Path:
    """The compile cache a gate keeps between runs when --cache is not given: every gate of a repository on this
    machine shares it, so a second pull request compiles only what it changed."""
    if os.environ.get(envvars.GATE_CACHE):
        return Path(os.environ[envvars.GATE_CACHE])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flybench" / "gate"


def _cache_folder(given: Path | None, workdir: Path) -> tuple[Path, str]:
    """The cache folder, and what to say about it: one that cannot be created or written (a read-only folder, a
    file in the way) is said, and the gate goes on without it, keeping this run's compiles in the work folder."""
    cache = given or default_cache()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        probe = cache / f".write-probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
        return cache, ""
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return workdir, (f"the cache {cache} cannot be written ({why}): the gate goes on without it, keeping this "
                         f"run's compiles in the work folder {workdir}")


def _round_cases(selections: list[Selection], runnable, shape_set: str) -> list[list[str]]:
    """Every case a round's selections name that runs here, as [workload, case, provider, dtype] (`flybench run
    --cases`): a selection without providers, dtypes or cases names all that run."""
    from flybench.workloads import get_workload

    found: list[list[str]] = []
    for s in selections:
        names = [c.name for c in get_workload(s.workload).cases(shape_set) if not s.cases or c.name in s.cases]
        found += [[s.workload, name, c.provider, c.dtype] for c in runnable if c.workload == s.workload
                  and (not s.providers or c.provider in s.providers) and (not s.dtypes or c.dtype in s.dtypes)
                  for name in names]
    return found


def _over_memory(cases: list[list[str]], device) -> dict[tuple[str, ...], str]:
    """The cases whose memory estimate exceeds this device's (`Provider.memory_reason`), and why: skipped once,
    said once, never a round spent on them."""
    from flybench.providers import get_provider
    from flybench.workloads import get_workload

    size = hardware.memory_bytes(device)
    if size is None:
        return {}
    found = {}
    for workload, name, provider, dtype in cases:
        why = get_provider(provider).memory_reason(get_workload(workload).case(name), dtype, size)
        if why:
            found[workload, name, provider, dtype] = why
    return found


def _compiled_code_caches(cache: Path) -> dict[str, str]:
    """The measuring processes' compiled code kept across rounds and sides under the gate's cache: Triton's cache
    and JAX's persistent compilation cache (every compile kept, however quick). Both key by what they compile,
    so a kernel the sides share compiles once; a variable the user set is left as it is."""
    wanted = {"TRITON_CACHE_DIR": str(cache / "triton"), "JAX_COMPILATION_CACHE_DIR": str(cache / "jax"),
              "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    return {name: value for name, value in wanted.items() if name not in os.environ}


def _run_side(side: Side, machine: str, shape_set: str, cases: list[list[str]], workdir: Path,
              compiled: dict[str, str]) -> None:
    """One side's round: `flybench run --one-process` under the side's asv config, every case of the round in one
    measuring process, with the compiled-code caches the rounds share (`compiled`).

    It runs from `workdir`, so that this flybench's CLI runs it; the
    benchmarks import the side's own flybench (its benchmark folder's
    parent comes first on their path), or, for FlyDSL, this flybench with
    the side's kernels and wheel. A run that fails is not fatal: its cases
    are recorded as failed, and the comparison says so.
    """
    listing = workdir / f"{side.name}.round-cases.json"
    listing.write_text(json.dumps(cases))
    command = [sys.executable, "-m", "flybench", "run", "--config", str(side.config), "--commit", side.commit,
               "--machine", machine, "--set", shape_set, "--append-samples", "--one-process", "--cases", str(listing)]
    workloads = sorted({c[0] for c in cases})
    print(f"gate: {side.name}: {len(cases)} case{'s' if len(cases) != 1 else ''} of {', '.join(workloads)} in one "
          "measuring process", flush=True)
    done = subprocess.run(command, cwd=workdir, env={**os.environ, **compiled, **side.env, "PYTHONUNBUFFERED": "1"})
    if done.returncode == 2:
        raise FlybenchError(f"flybench run refused the selection for {', '.join(workloads)} on {side.name}: see above")
    if not any((results_dir(side.config) / machine).glob("*.cases.jsonl")):
        raise FlybenchError(f"the {side.name} side measured nothing ({', '.join(workloads)}; flybench run exited "
                            f"{done.returncode}): see its output above")


def _check_fresh(sides: dict[str, Side], machine: str, resume: bool) -> None:
    """Rounds left by an earlier gate would count as this one's: refuse them unless --resume says to add to them."""
    left = [results_dir(s.config) / machine for s in sides.values() if (results_dir(s.config) / machine).is_dir()]
    if left and not resume:
        raise FlybenchError(f"{left[0]} holds rounds of an earlier gate of this pair: pass --resume to add to them, "
                            "or --workdir to start elsewhere")


def _workloads() -> list[str]:
    from flybench.workloads import WORKLOADS

    return list(WORKLOADS)
