"""`flybench run`: detect the hardware, run the asv suite, summarise what was measured.

The results land in asv's own format under results/flybench/<machine>/, with
the machine named after host and accelerator. The run uses the current
Python environment (asv's `--python=same`), so results are attributed to a
commit with `--set-commit-hash`.

The config and the commit default to the repository you stand in, not to the
folder flybench is installed from: the asv config at the top of the current
directory's git repository, and that repository's HEAD. A second clone that
shares the first one's virtualenv thus measures, and writes results into,
itself. The commit is resolved before anything runs, so a wrong `--commit`
is bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from flybench import benchmark_names, envvars, hardware, revisions, run_identity, subject_code
from flybench.errors import FlybenchError
from flybench.selection import Choice, asv_regex, check_shape_set, choices, with_cases

ROOT = Path(__file__).resolve().parents[2]
"""The checkout flybench is installed from: benchmarks import its flybench where the measured repository has none."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "run", help="run the benchmark suite through asv on this machine",
        description="Measure the selected cases of the repository you stand in (its asv.conf.json, its HEAD or "
                    "--commit) with asv on this machine, each case in a process of its own, checked against its "
                    "float32 reference first; results go to asv's results_dir beside a record per case. --dry-run "
                    "prints the plan (cases, providers, the asv command) and runs nothing. A machine busy with "
                    "other work (its load average at or above three quarters of its cores) is said at the start "
                    "and the end: its timings are slower and noisier than an idle machine's. Exit status: 0 every "
                    "case that started was measured (with --max-minutes, the cases left unstarted are named and "
                    "are no failure: --resume measures them), 1 a case that started failed or did not finish "
                    "(each reason in the summary), 2 bad input.")
    parser.add_argument("--set", dest="shape_set", default=None,
                        help="shape set: tiny, quick or full (default: quick on a GPU, tiny on a CPU)")
    parser.add_argument("--quick", action="store_const", const="quick", dest="shape_set", help="same as --set quick")
    parser.add_argument("--workload", "-w", action="append", help="only this workload (repeatable)")
    parser.add_argument("--provider", "-p", action="append", help="only this provider (repeatable)")
    parser.add_argument("--dtype", "-d", action="append", help="only this element type (repeatable)")
    parser.add_argument("--case", "-c", action="append",
                        help="only the case of this name, as `flybench list` shows it (repeatable)")
    parser.add_argument("--commit", default=None,
                        help="commit to attribute results to: hash, branch or tag of the measured repository "
                             "(default: its HEAD)")
    parser.add_argument("--machine", default=None, help="asv machine name (default: <host>-<accelerator>)")
    parser.add_argument("--config", type=Path, default=None,
                        help="asv config of the subject (default: asv.conf.json at the top of the git repository "
                             "of the current directory)")
    parser.add_argument("--append-samples", action="store_true",
                        help="add this run's samples to the commit's existing results instead of replacing them "
                             "(asv's --append-samples): a pull request's repeated rounds pool their samples, and "
                             "each round's median is kept as the case's run-to-run noise")
    parser.add_argument("--counters", action="store_true",
                        help="after timing, run each case that passed its gate once more under the hardware-counter "
                             "profiler (Nsight Compute on NVIDIA, rocprofv3 on ROCm) and record its counters beside "
                             "the results; counter runs give no timing samples")
    parser.add_argument("--roles", action="store_true",
                        help="after timing, trace each mixtral_step case that passed its gate once more under JAX's "
                             "profiler, attribute its kernels to the step's roles (MoE, attention, norms, routing, "
                             "head) and record the split beside the results, for the Model lane page; traced runs "
                             "give no timing samples")
    parser.add_argument("--gpus", default=None,
                        help="N or all: one worker per GPU of this node, each pinned to its GPU, the cases dealt "
                             "longest first by their stored durations; results merged into the one tree "
                             f"(tests: {envvars.FAKE_GPUS}=N deals CPU cases to N stand-ins)")
    parser.add_argument("--shard", default=None,
                        help="I/N: measure only the I-th of N lists dealt from the selection (runners of a pool; "
                             "every runner deals the same lists from the same stored durations); then "
                             "`flybench merge` the runners' trees")
    parser.add_argument("--durations", type=Path, default=None,
                        help="the case records whose measure_s the deal reads: a machine's folder of a results "
                             "tree or a .cases.jsonl file (default: this machine's folder in the results tree)")
    parser.add_argument("--max-minutes", type=_minutes, default=None,
                        help="start no asv invocation expected to end later than this; the cases left are named "
                             "and do not change the exit status (add --resume to a later call to measure them)")
    parser.add_argument("--resume", action="store_true",
                        help="skip the cases this commit already has a record of on this machine (a run cut short)")
    parser.add_argument("--one-process", action="store_true",
                        help="measure every selected case in one process, one after another (asv's benchmarks run "
                             "in one measuring process instead of one each): the context, the JIT compiles and the "
                             "warm-up are paid once, not per case; a case that ends the process costs only itself, "
                             "and the next case starts a fresh one. A pull request's round (flybench gate) runs so")
    parser.add_argument("--cases", type=Path, default=None,
                        help="measure exactly the cases this JSON file lists, as [workload, case, provider, dtype] "
                             "lists (flybench gate hands each round's cases over so); not with -w, -p, -d, -c")
    parser.add_argument("--dry-run", action="store_true", help="show what would run, run nothing")
    return parser


def main(args: argparse.Namespace) -> int:
    config = args.config or _default_config(Path.cwd())
    repo, commit = _commit(config, args.commit)
    print(f"config: {config}; commit: {commit}")
    device = hardware.detect()
    shape_set = args.shape_set or ("tiny" if device.kind == "cpu" else "quick")
    check_shape_set(shape_set)
    listed = read_cases(args.cases, shape_set, args) if args.cases else None
    if listed is not None:
        combos = [c for c in choices(device, sorted({w for w, _, _ in listed}), sorted({p for _, p, _ in listed}),
                                     sorted({d for _, _, d in listed})) if (c.workload, c.provider, c.dtype) in listed]
    else:
        combos = choices(device, args.workload, args.provider, args.dtype)
        workloads = with_cases(shape_set, sorted({c.workload for c in combos}), args.case)
        combos = [c for c in combos if c.workload in workloads]
    cases = listed if listed is not None else args.case
    machine = args.machine or hardware.machine_name(device)
    print(f"device: {device.name} ({device.arch}{', ' + device.driver if device.driver else ''}); "
          f"machine: {machine}; shape set: {shape_set}")
    hardware.warn_if_busy("before the run")
    _print_availability(combos)
    if args.counters:
        from flybench.counters import unavailable_reason

        if reason := unavailable_reason(device):
            print(f"counters: will not be collected: {reason}. Timing runs as usual.", flush=True)
    runnable = [c for c in combos if c.reason is None]
    if not runnable:
        raise FlybenchError("nothing can run here with this selection; see the reasons above")
    dealt = args.gpus or args.shard or args.max_minutes is not None or args.resume
    if dealt and (args.one_process or listed is not None):
        raise FlybenchError("--one-process and --cases measure a plain run: leave out --gpus, --shard, --max-minutes "
                            "and --resume")
    if args.roles and dealt:
        raise FlybenchError("--roles traces the cases of a plain run: run it without --gpus, --shard, --max-minutes "
                            "and --resume")
    if args.dry_run and not dealt:
        _print_plan(runnable, shape_set, cases, config, commit)
        return 0
    results = results_dir(config)
    if dealt and args.dry_run:
        from flybench.cli._dealt import print_deal

        return print_deal(args, device, runnable, shape_set, results, machine, commit, _asv_env_name(str(config)))
    _register_machine(str(config), machine, device)
    run = run_identity.exports(commit, _asv_env_name(str(config)), machine, results)
    source = repo if repo is not None and (repo / "flybench" / "__init__.py").is_file() else ROOT
    env = {**os.environ, **run,
           # asv drops PYTHONPATH for benchmark processes and honours ASV_PYTHONPATH instead
           "ASV_PYTHONPATH": os.pathsep.join(p for p in (str(source), os.environ.get("PYTHONPATH", "")) if p)}
    if args.one_process:
        env[envvars.ONE_PROCESS] = "1"
        # JAX takes 75% of the device at its first use unless told otherwise: in one process with torch's cases
        # that would leave them a quarter; on demand, each framework holds what its cases used
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    asv_args = ["--python=same", "--set-commit-hash", commit, "--machine", machine, "--record-samples",
                "--show-stderr"]
    if dealt:
        from flybench.cli._dealt import run_dealt

        return run_dealt(args, device, runnable, shape_set, config, results, machine, run, env, asv_args)
    command = [sys.executable, "-m", "flybench.asv_main", "run", "--config", str(config), *asv_args,
               *(["--append-samples"] if args.append_samples else [])]
    code = 0
    chunks = _chunks(runnable) if not args.one_process else {"every workload": runnable}
    from flybench.measure.record import path_for
    from flybench.workers import Follower

    # A line per case as it ends (a table rewritten in place on a terminal), read from the run's case records:
    # asv itself says nothing until a workload's invocation ends, minutes later.
    with Follower(path_for(results, machine, commit, run[envvars.ENV_NAME]), run[envvars.RUN_ID],
                  _case_count(runnable, shape_set, cases), device.name):
        for number, (workload, chunk) in enumerate(chunks.items(), start=1):
            providers = sorted({c.provider for c in chunk})
            print(f"[{number}/{len(chunks)}] {workload}: {', '.join(providers)}"
                  f"{' (one measuring process)' if args.one_process else ''}", flush=True)
            patterns = [arg for pattern in _patterns(shape_set, chunk, cases) for arg in ("--bench", pattern)]
            code = max(code, _asv(command + patterns, config.resolve().parent, env))
    print(f"results: {results / machine}")
    from flybench.cli._summary import print_run_summary

    print_run_summary(results / machine, run[envvars.RUN_ID])
    if args.counters:
        from flybench.cli._counters import counter_pass

        counter_pass(results, machine, commit, run[envvars.ENV_NAME], run[envvars.RUN_ID])
    if args.roles:
        from flybench.cli._roles import role_pass

        role_pass(results, machine, commit, run[envvars.ENV_NAME], run[envvars.RUN_ID])
    from flybench.cli._dealt import NEXT_STEP

    hardware.warn_if_busy("at the end of the run")
    print(NEXT_STEP)
    if code:  # asv says 2 when a benchmark failed; here 2 means bad input, and failed cases are recorded
        print("flybench run: some cases failed or did not finish; each reason is in the table above and in the "
              "case records", file=sys.stderr)
        return 1
    return 0


def _asv(command: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Run one asv invocation, passing its progress lines on as they come and leaving out the parameter tables
    it prints at the end of a benchmark: flybench's own summary lists every measured case, and asv's tables are
    mostly `n/a` rows of the providers that cannot run here."""
    with subprocess.Popen(command, cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as asv:
        for line in without_tables(asv.stdout):
            print(line, end="", flush=True)
    return asv.returncode


ASV_TABLE_BORDER = re.compile(r"^\[\s*[\d.]+%\] ·+ =[= ]*$")
"""The first line of a parameter table in asv's output: `[100.00%] ··· ====== ====== ...`."""


def without_tables(lines: Iterable[str]) -> Iterator[str]:
    """asv's output without its parameter tables: a table starts at its border line, and its rows are the
    indented lines after it, up to asv's next line of its own (which starts with `[` or `·`)."""
    in_table = False
    for line in lines:
        if ASV_TABLE_BORDER.match(line.rstrip("\n")):
            in_table = True
            continue
        if in_table and line[:1].isspace():
            continue
        in_table = False
        yield line


Cases = "list[str] | dict[tuple[str, str, str], list[str]] | None"
"""The cases a run names: every case (None), these names (-c), or per (workload, provider, dtype) (--cases)."""


def read_cases(path: Path, shape_set: str, args: argparse.Namespace) -> dict[tuple[str, str, str], list[str]]:
    """--cases FILE: per (workload, provider, dtype), the case names it lists; anything else is bad input."""
    from flybench.file_kinds import describe
    from flybench.workloads import WORKLOADS, get_workload

    if args.workload or args.provider or args.dtype or args.case:
        raise FlybenchError("--cases lists the cases itself: leave out -w, -p, -d and -c")
    if not path.is_file():
        raise FlybenchError(f"--cases {path}: {describe(path) if path.exists() else 'no such file'}; give a JSON "
                            "file of [workload, case, provider, dtype] lists")
    try:
        listed = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise FlybenchError(f"--cases {path} is not JSON ({exc}): give a list of [workload, case, provider, dtype] "
                            "lists") from exc
    found: dict[tuple[str, str, str], list[str]] = {}
    for item in listed if isinstance(listed, list) else [listed]:
        if not (isinstance(item, list) and len(item) == 4 and all(isinstance(v, str) for v in item)):
            raise FlybenchError(f"--cases {path}: {str(item)[:80]!r} is not a [workload, case, provider, dtype] "
                                "list of four names")
        workload, case, provider, dtype = item
        if workload not in WORKLOADS:
            raise FlybenchError(f"--cases {path}: no workload {workload!r}; the workloads: {', '.join(WORKLOADS)}")
        if case not in {c.name for c in get_workload(workload).cases(shape_set)}:
            raise FlybenchError(f"--cases {path}: {workload} has no case {case!r} in the {shape_set} set "
                                "(`flybench list` names them)")
        found.setdefault((workload, provider, dtype), []).append(case)
    if not found:
        raise FlybenchError(f"--cases {path} lists no case")
    return found


def _names(workload: str, shape_set: str, cases: Cases, choice: Choice | None = None) -> list[str]:
    """The case names a run measures of one workload (of one provider and dtype, for --cases)."""
    from flybench.workloads import get_workload

    if isinstance(cases, dict):
        return cases.get((workload, choice.provider, choice.dtype), []) if choice is not None else \
            sorted({n for (w, _, _), names in cases.items() if w == workload for n in names})
    return [c.name for c in get_workload(workload).cases(shape_set) if not cases or c.name in cases]


def _patterns(shape_set: str, runnable: list[Choice], cases: Cases) -> list[str]:
    """asv `--bench` patterns selecting exactly the cases a run names."""
    if not isinstance(cases, dict):
        return asv_regex(shape_set, runnable, cases)
    return [benchmark_names.asv_pattern(c.workload, shape_set, c.provider, c.dtype,
                                        _names(c.workload, shape_set, cases, c)) for c in runnable]


def _print_plan(runnable: list[Choice], shape_set: str, cases: Cases, config: Path, commit: str) -> None:
    """--dry-run: per workload, how many cases each runnable (provider, dtype) measures, and the asv command."""
    total = 0
    for workload, chunk in _chunks(runnable).items():
        count = sum(len(_names(workload, shape_set, cases, c)) for c in chunk)
        total += count
        pairs = ", ".join(f"{c.provider} {c.dtype}" for c in chunk)
        print(f"plan: {workload}: {count} cases of {len(chunk)} (provider, dtype) = {count} "
              f"measuring processes ({pairs})")
        patterns = [arg for pattern in _patterns(shape_set, chunk, cases) for arg in ("--bench", pattern)]
        print("  " + shlex.join(["asv", "run", "--config", str(config), "--python=same", "--set-commit-hash", commit,
                                 *patterns]))
    print(f"plan: {total} measuring processes in all; nothing was run (--dry-run)")


def _chunks(runnable: list[Choice]) -> dict[str, list[Choice]]:
    """One asv invocation per workload.

    asv writes its results file only when an invocation ends, so a run that
    is killed part-way keeps every workload that finished; each invocation
    merges into the same results file of the commit. Each one also costs a
    few seconds of asv start-up, discovery and forkserver imports, which is
    why the chunks are workloads and not (workload, provider) pairs.
    """
    chunks: dict[str, list[Choice]] = {}
    for choice in runnable:
        chunks.setdefault(choice.workload, []).append(choice)
    return chunks


def _print_availability(combos: list[Choice]) -> None:
    """What runs here, a line per workload, and what cannot, a line per provider and reason (naming where):
    one row per (workload, provider, dtype) was hundreds of lines before anything was measured."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="providers on this machine", show_lines=False)
    for column in ("provider", "runs here?", "workloads (dtypes)"):
        table.add_column(column)
    for provider, reason, where in availability_rows(combos):  # reasons as literal text: "'.[jax]'" keeps its brackets
        table.add_row(Text(provider), Text("yes" if reason is None else f"no: {reason}"), Text(where))
    Console().print(table)


def availability_rows(combos: list[Choice]) -> list[tuple[str, str | None, str]]:
    """(provider, reason or None, "attention (bf16, fp16), moe (bf16)") per provider and reason, runnable first."""
    groups: dict[tuple[str, str | None], dict[str, list[str]]] = {}
    for c in combos:
        groups.setdefault((c.provider, c.reason), {}).setdefault(c.workload, []).append(c.dtype)
    rows = [(provider, reason, ", ".join(f"{w} ({', '.join(dict.fromkeys(d))})" for w, d in where.items()))
            for (provider, reason), where in groups.items()]
    return sorted(rows, key=lambda r: (r[1] is not None, r[0], r[1] or ""))


def _case_count(runnable: list[Choice], shape_set: str, cases: Cases) -> int:
    """How many cases the run measures: each runnable (provider, dtype) times its workload's cases."""
    return sum(len(_names(c.workload, shape_set, cases, c)) for c in runnable)


def _asv_env_name(config: str) -> str:
    """The name asv gives this interpreter's environment, which names the results file."""
    from asv.config import Config
    from asv.environment import ExistingEnvironment

    return ExistingEnvironment(Config.load(config), sys.executable, {}, {}).name


def _default_config(cwd: Path) -> Path:
    """asv.conf.json at the top of the git repository `cwd` is in."""
    top = _git(cwd, "rev-parse", "--show-toplevel")
    if top is None:
        raise FlybenchError(f"{cwd} is in no git repository: run flybench run inside a clone of the repository to "
                            "measure, or pass --config (and --commit)")
    config = Path(top) / "asv.conf.json"
    if not config.is_file():
        raise FlybenchError(f"no asv.conf.json at the top of the repository {top}: run flybench run in a clone that "
                            "has one (flybench's own), or pass --config")
    return config


def _commit(config: Path, commit: str | None) -> tuple[Path | None, str]:
    """The repository the config measures (None when it is remote) and the full hash of `commit` (default HEAD).

    Resolved here, before asv runs, which would otherwise fail on a commit that does not exist with its own
    traceback.
    """
    repo = str(_read_config(config).get("repo", "."))
    if commit is not None and not commit.strip():  # '' was taken as HEAD: results filed under a commit not named
        raise FlybenchError(f"--commit {commit!r} names no commit: pass a hash, branch or tag, or leave --commit out "
                            "to measure HEAD")
    ref = commit or "HEAD"
    if "://" in repo or repo.startswith("git@"):  # a remote repository: only a full hash can be taken as given
        if re.fullmatch(r"[0-9a-f]{40}", ref):
            return None, ref
        raise FlybenchError(f"{config} measures the remote repository {repo}: pass --commit with a full 40-digit "
                            f"commit hash of it (not {ref!r})")
    where = (config.resolve().parent / repo).resolve()
    full = revisions.commit(where, ref, "--commit")
    if full is None:
        ambiguous = subject_code.ambiguity(where, ref)
        if ambiguous:
            raise FlybenchError(f"--commit {ambiguous}")
        raise FlybenchError(f"commit {ref!r} is not in the repository {where} (which {config} measures): "
                            "pass a commit hash, branch or tag of it with --commit")
    return where, full


def minutes_above_0(flag: str, what: str, otherwise: str) -> Callable[[str], float]:
    """The argparse type of a time budget in minutes (`run --max-minutes`, `gate --budget-minutes`): a finite
    number above 0. A budget of -1 or nan was taken: the run measured one case, left the rest and exited 0, as if
    a budget had been kept; the gate's comparison `<= 0` let nan through the same way.

    `what` takes the time (the run, the gate); `otherwise` is what leaving the flag out gives."""
    def minutes(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes above 0: give the time {what} "
                                             f"may take, e.g. {flag} 30, or leave it out for {otherwise}")
        return value
    return minutes


_minutes = minutes_above_0("--max-minutes", "the run", "no limit")


def _git(where: Path, *words: str) -> str | None:
    """The output of `git -C where words...`, or None when git fails (or is not installed)."""
    try:
        done = subprocess.run(["git", "-C", str(where), *words], capture_output=True, text=True)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _read_config(config: Path) -> dict:
    try:
        return json.loads(config.read_text())
    except (OSError, ValueError) as exc:
        raise FlybenchError(f"cannot read asv config {config}: {exc}") from exc


def results_dir(config: Path) -> Path:
    """The results folder the asv config names, absolute."""
    return (config.resolve().parent / _read_config(config).get("results_dir", "results")).resolve()


def _register_machine(config: str, machine: str, device: hardware.Device) -> None:
    """Write asv's machine entry; machine.json has no GPU field, so the accelerator goes into `cpu`."""
    from flybench.versions import package_versions

    cpu = platform.processor() or platform.machine()
    accelerator = "none" if device.kind == "cpu" else f"{device.name} {device.arch} {device.driver}"
    versions = " ".join(f"{k}={v}" for k, v in package_versions().items())
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    done = subprocess.run([sys.executable, "-m", "flybench.asv_main", "machine", "--yes", "--config", config,
                           "--machine", machine,
                           "--os", f"{platform.system()} {platform.release()}", "--arch", platform.machine(),
                           "--cpu", f"{cpu}; accelerator: {accelerator}; {versions}", "--num_cpu",
                           str(os.cpu_count()), "--ram", f"{ram // 2**30}GB"], capture_output=True, text=True)
    if done.returncode != 0:
        raise FlybenchError(f"asv could not record machine {machine!r}: {(done.stderr or done.stdout).strip()[-800:]}")
