"""`flybench run --gpus/--shard/--max-minutes/--resume`: the selection dealt to workers, run, and summed up.

The dealing is flybench.shard's, the workers flybench.workers', the merge
of their trees flybench.merge's; this module turns the command's options
into them and prints what happened.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from flybench import envvars, gpu_check, hardware, shard, workers
from flybench.errors import FlybenchError
from flybench.file_kinds import describe
from flybench.measure import record as records
from flybench.measure.process import DIED
from flybench.selection import Choice, case_keys


NEXT_STEP = "next: flybench ingest (stores these results), then flybench dashboard or flybench regressions"

def dealt_cases(args: argparse.Namespace, runnable: list[Choice], shape_set: str, results: Path, machine: str,
                commit: str, env_name: str) -> list[shard.Case]:
    """The cases this call measures: the selection, its shard (--shard), less those already recorded (--resume);
    each with its expected seconds. Prints the deal's name, so the logs of a pool's shards can be compared."""
    keys = case_keys(shape_set, runnable, args.case)
    records.files_in(results / machine)  # the record files this run reads and appends to: no FIFO among them
    source = args.durations or results / machine
    if args.durations is not None:
        _check_durations(args.durations)
    cases = shard.estimate(keys, shard.stored_durations(source))
    known = sum(c.measured for c in cases)
    print(f"deal: {len(cases)} cases, {known} with a stored duration (from {source}), the others estimated; "
          f"{shard.load(cases) / 60:.1f} expected minutes in all; deal {shard.fingerprint(cases)}")
    if args.shard:
        index, total = shard.parse_shard(args.shard)
        cases = shard.deal(cases, total)[index - 1]
        print(f"shard {index}/{total}: {len(cases)} cases, {shard.load(cases) / 60:.1f} expected minutes")
    if args.resume:
        path = records.path_for(results, machine, commit, env_name)
        finished = {key for key, r in records.latest(records.read(path)[0]).items() if r.get("reason") != DIED} \
            if os.path.lexists(path) else set()
        before = len(cases)
        cases = [c for c in cases if c.key not in finished]
        print(f"resume: {before - len(cases)} of {before} cases already recorded for this commit; {len(cases)} to go")
    return cases


def _check_durations(path: Path) -> None:
    """--durations names a machine's folder of record files or one record file. A file of which no line is a
    case record (a binary, another format) is a wrong path, not a machine without history: dealt as one, the
    shards would be unbalanced without a word."""
    what = describe(path)
    if what == "a directory":
        return
    if what != "a regular file":
        raise FlybenchError(f"--durations {path} is {what}: name a machine's folder of a results tree or a "
                            ".cases.jsonl file")
    try:
        found, skipped = records.read(path)
    except OSError as exc:
        raise FlybenchError(f"cannot read --durations {path} ({exc.strerror or exc}): make it readable, or name "
                            "another record file") from exc
    if not found and skipped:
        raise FlybenchError(f"--durations {path} holds no case record ({len(skipped)} lines are none; the first: "
                            f"{skipped[0].removeprefix(f'{path}, ')}): name a .cases.jsonl file that `flybench run` "
                            "wrote, or a machine's folder of a results tree")


def node_workers(spec: str | None, device: hardware.Device, run_id: str) -> list[workers.Worker]:
    """One worker per GPU asked for (`--gpus N|all`), or one unpinned worker without --gpus.

    The lists of the deal go to the GPUs in a rotation that starts at a place the run id picks, so that over
    several runs each case meets several GPUs and the per-GPU check can compare them (flybench.gpu_check).
    """
    if spec is None:
        return [workers.Worker(0, None)]
    try:
        found = hardware.gpus(device)
    except ValueError as exc:
        raise FlybenchError(str(exc)) from exc
    if not found:
        raise FlybenchError(f"--gpus {spec}: this machine has no GPU that torch sees ({device.name}); leave --gpus "
                            f"out to measure on it (tests stand in GPUs with {envvars.FAKE_GPUS}=N)")
    if spec != "all" and not (spec.isdigit() and 1 <= int(spec) <= len(found)):
        raise FlybenchError(f"--gpus {spec}: give all, or a number from 1 to {len(found)} (the GPUs torch sees here)")
    chosen = found if spec == "all" else found[:int(spec)]
    models = sorted({g.name for g in chosen})
    if len(models) > 1:
        raise FlybenchError(f"--gpus {spec}: these GPUs are of {len(models)} models ({', '.join(models)}), and one asv "
                            "machine is one model: select one model's GPUs with CUDA_VISIBLE_DEVICES (ROCm: "
                            "ROCR_VISIBLE_DEVICES) and run once per model, each with its own --machine")
    offset = int(run_id[:8], 16) % len(chosen) if run_id[:8].isalnum() else 0
    return [workers.Worker(i, chosen[(i + offset) % len(chosen)]) for i in range(len(chosen))]


def print_deal(args: argparse.Namespace, device: hardware.Device, runnable: list[Choice], shape_set: str,
               results: Path, machine: str, commit: str, env_name: str) -> int:
    """--dry-run: the deal, worker by worker, and nothing run."""
    cases = dealt_cases(args, runnable, shape_set, results, machine, commit, env_name)
    crew = node_workers(args.gpus, device, "0")
    for worker, dealt in zip(crew, shard.deal(cases, len(crew))):
        longest = max(dealt, key=lambda c: c.seconds, default=None)
        print(f"plan: {worker.label}: {len(dealt)} cases, {shard.load(dealt) / 60:.1f} expected minutes"
              + (f"; longest {' '.join(longest.key)} ({longest.seconds:.1f} s)" if longest else ""))
    print("plan: nothing was run (--dry-run)")
    return 0


def run_dealt(args: argparse.Namespace, device: hardware.Device, runnable: list[Choice], shape_set: str,
              config: Path, results: Path, machine: str, run: dict[str, str], env: dict[str, str],
              asv_args: list[str]) -> int:
    """Measure the dealt cases with the workers, and print what each did. Exit status as `flybench run`'s."""
    from flybench.cli._summary import print_run_summary, run_records

    run_id, commit, env_name = run[envvars.RUN_ID], run[envvars.COMMIT], run[envvars.ENV_NAME]
    cases = dealt_cases(args, runnable, shape_set, results, machine, commit, env_name)
    crew = node_workers(args.gpus, device, run_id)
    lists = shard.deal(cases, len(crew))
    scratch = Path(tempfile.mkdtemp(prefix="flybench-workers-"))
    budget = args.max_minutes * 60 if args.max_minutes is not None else None
    plan = workers.Plan(config, asv_args, env, results, machine, commit, env_name, run_id,
                        device.kind, scratch, append_samples=args.append_samples, budget_s=budget,
                        batch_s=budget / 4 if budget is not None else None)
    for worker, dealt in zip(crew, lists):
        pinned = f" ({worker.gpu.name}, {worker.gpu.uuid or 'no UUID'})" if worker.gpu else ""
        print(f"{worker.label}{pinned}: {len(dealt)} cases, {shard.load(dealt) / 60:.1f} expected minutes",
              flush=True)
    progress = workers.Progress(crew, [len(d) for d in lists])
    outcome = workers.run(plan, crew, lists, progress)
    for worker in crew:
        print(f"{worker.label}: {outcome.wall_s.get(worker.number, 0.0):.1f} s")
    per_workload: dict[str, float] = {}
    for invocation in outcome.invocations:
        per_workload[invocation["workload"]] = per_workload.get(invocation["workload"], 0.0) + invocation["wall_s"]
    print("asv time per workload (summed over workers): "
          + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in sorted(per_workload.items())))
    print(f"results: {results / machine}")
    print_run_summary(results / machine, run_id)
    if args.gpus and len(crew) > 1:
        this_run = run_records(results / machine, run_id)
        history = [r for path in records.files_in(results / machine)
                   for r in records.read(path)[0] if r.get("run_id") != run_id]
        for line in gpu_check.lines(gpu_check.figures(this_run, history)):
            print(line)
    if outcome.left:
        print(f"--max-minutes: {len(outcome.left)} cases not started within the budget; run again with --resume "
              "to measure them")
    for error in outcome.errors:
        print(f"flybench run: a worker stopped: {error}", flush=True)
    if outcome.errors or outcome.lost:
        print(f"the workers' asv logs are kept in {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    hardware.warn_if_busy("at the end of the run")
    print(NEXT_STEP)
    failed = outcome.errors or outcome.lost or any(r["status"] == "failed" for r in outcome.done.values())
    if failed:
        print("flybench run: some cases failed or did not finish; each reason is in the table above and in the "
              "case records", file=sys.stderr)
        return 1
    return 0
