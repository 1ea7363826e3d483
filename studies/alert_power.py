"""Does the pull-request check catch 3%, 5% and 10% slowdowns on every quick case, and stay quiet on no change?

Step 1, on a GPU (`run`): for every quick case of every provider that runs
here, the case is built and passes the correctness gate once, and its call
is prepared the way `flybench run` prepares it (`measure.timing.prepare`:
a device-graph replay where it can be captured). Beside it, one call per
planted size: the same call followed by a `torch.cuda._sleep` spin,
captured into the same graph, whose length is calibrated so the call takes
3%, 5% or 10% longer (the spin's own cost at zero cycles, measured once
on a short kernel, is taken off). The PR job's interleaved rounds are then reproduced inside one
process: each round times base, A/A head (the same call again) and the
three planted heads with `measure.timing.time_call` under the quick
contract (warm-up shortened to 0.1 s after the case's first timing: the
clocks are already up), in alternating order. Samples go to one JSON line
per case, written as each case ends, so a cut run keeps what it measured;
an existing line is not measured again.

Step 2, anywhere (`report`): each head against base, judged by
`flybench.regress.compare.judge` as `flybench compare` judges a PR's two
commits (rounds pooled as `--append-samples` pools them, the rounds'
medians as each case's noise), under three gates on the same data: the PR
config (`.github/flybench-pr.toml`), the old fixed gate (20%, 10 us, no
noise), and FlyDSL's CI rule (head at least 3% slower than base, no test).

    python -m studies.alert_power run --out /tmp/power.jsonl -w diffusion_attention -p triton -d bf16
    python -m studies.alert_power report /tmp/power.jsonl --json docs/data/alert-power.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
SIZES = (0.03, 0.05, 0.10)
ROUNDS = 2
PR_CONFIG = ROOT / ".github" / "flybench-pr.toml"
FLYDSL_RULE = 0.03
"""FlyDSL's CI flags a same-job result at least 3% worse than main."""


# --- step 1: measure (GPU) ---------------------------------------------------------------------------------------

def spin_rate() -> float:
    """`torch.cuda._sleep` cycles per second on this GPU, from one long spin timed with events."""
    import torch

    cycles = 20_000_000
    torch.cuda._sleep(cycles // 10)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles / (start.elapsed_time(end) / 1e3)


def planted(runner: Callable[[], Any], cycles: int, host_timed: bool) -> Callable[[], Any]:
    """`runner` followed by a spin of `cycles` on the current stream (waited for when the runner is host-timed)."""
    import torch

    from flybench.measure import timing

    def call() -> Any:
        out = runner()
        torch.cuda._sleep(cycles)
        if host_timed:
            torch.cuda.synchronize()
        return out

    return timing.host_timed(call) if host_timed else call


def spin_overheads(device, contract) -> dict[bool, float]:
    """What a spin of zero cycles adds to a call, device-timed in a graph (False) and host-timed (True).

    Measured once on a short stable kernel: measured per case, the noise of
    a multi-millisecond case would swamp it.
    """
    import torch

    from flybench.measure import timing

    x = torch.ones(1 << 22, device="cuda")

    def short() -> dict[str, Any]:
        return {"out": x.mul_(1.0)}

    def short_blocking() -> dict[str, Any]:
        out = short()
        torch.cuda.synchronize()
        return out

    steady = replace(contract, target_s=0.3)
    found = {}
    for host, call in ((False, short), (True, timing.host_timed(short_blocking))):
        plain, spun = timing.prepare(call, device, steady), timing.prepare(planted(call, 0, host), device, steady)
        found[host] = statistics.median(timing.time_call(spun, device)) - statistics.median(timing.time_call(plain, device))
    return found


def measure_case(workload, case, provider, dtype: str, device, contract, rate: float,
                 overheads: dict[bool, float]) -> dict[str, Any]:
    """Gate, calibrate and time one case in interleaved rounds; the line the study keeps for it."""
    from flybench.measure import correctness, timing

    line: dict[str, Any] = {"workload": workload.name, "case": case.name, "provider": provider.name, "dtype": dtype}
    inputs = workload.make_inputs(case, dtype, device.torch_device, seed=0)
    reference = workload.reference(case, inputs)
    runner = provider.build(case, dtype, inputs, device)
    correctness.poison(runner(), keep=inputs)
    verdict = correctness.check(runner(), reference, dtype)
    if not verdict.passed:
        return {**line, "status": "failed", "reason": verdict.reason}
    base = timing.prepare(runner, device, contract)
    if base.outputs is not None:
        correctness.poison(base.outputs, keep=inputs)
        base.call()
        verdict = correctness.check(base.outputs, reference, dtype)
        if not verdict.passed:
            return {**line, "status": "failed", "reason": f"under graph replay: {verdict.reason}"}
    host = getattr(runner, timing.HOST_TIMED, False)
    calibrate = replace(base.contract, warmup_s=0.05, target_s=0.1, min_samples=10)
    first = replace(calibrate, warmup_s=contract.warmup_s)  # the case's first timing brings the clocks up
    level = statistics.median(timing.time_call(replace(base, contract=first), device))
    overhead = overheads[host]
    heads: dict[str, Any] = {"aa": base}
    cycles: dict[str, int] = {}
    for size in SIZES:
        cycles[f"{size:g}"] = max(0, round((size * level - max(overhead, 0.0)) * rate))
        heads[f"{size:g}"] = timing.prepare(planted(runner, cycles[f"{size:g}"], host), device, contract)
    del reference
    rounds = replace(base.contract, warmup_s=0.1)
    samples: dict[str, list[list[float]]] = {"base": [], **{name: [] for name in heads}}
    order = ["base", *heads]
    for r in range(ROUNDS):
        for name in order if r % 2 == 0 else order[::-1]:
            timed = base if name == "base" else heads[name]
            samples[name].append(timing.time_call(replace(timed, contract=rounds), device))
    return {**line, "status": "ok", "graph": base.contract.graph, "timer": base.contract.timer,
            "contract": json.dumps({"statistic": base.contract.statistic, "flush": base.contract.flush,
                                    "graph": base.contract.graph, "timer": base.contract.timer}),
            "level_s": level, "spin_overhead_s": overhead, "spin_rate_hz": rate, "cycles": cycles,
            "samples_ns": {k: [[round(s * 1e9) for s in rnd] for rnd in v] for k, v in samples.items()}}


def run(args: argparse.Namespace) -> int:
    from flybench import hardware
    from flybench.measure.contract import PRESETS, for_device
    from flybench.providers import get_provider
    from flybench.selection import choices
    from flybench.workloads import get_workload

    device = hardware.detect()
    if device.kind != "cuda":
        print("the planted spin needs an NVIDIA GPU (torch.cuda._sleep)", file=sys.stderr)
        return 2
    out = Path(args.out)
    done = set()
    if out.exists():
        done = {(d["workload"], d["case"], d["provider"], d["dtype"]) for d in map(json.loads, out.read_text().splitlines())}
    contract = for_device(PRESETS["quick"], device)
    rate, overheads = spin_rate(), spin_overheads(device, contract)
    print(f"spin: {rate / 1e9:.3f} GHz, zero-cycle cost {overheads[False] * 1e6:.2f} us in a graph, "
          f"{overheads[True] * 1e6:.2f} us host-timed", flush=True)
    import torch

    for choice in choices(device, args.workload, args.provider, args.dtype):
        if choice.reason:
            continue
        workload, provider = get_workload(choice.workload), get_provider(choice.provider)
        for case in workload.cases("quick"):
            key = (choice.workload, case.name, choice.provider, choice.dtype)
            if key in done:
                continue
            try:
                line = measure_case(workload, case, provider, choice.dtype, device, contract, rate, overheads)
            except Exception as exc:  # noqa: BLE001 - a case that fails is recorded, the study goes on
                line = {"workload": key[0], "case": key[1], "provider": key[2], "dtype": key[3],
                        "status": "failed", "reason": f"{type(exc).__name__}: {str(exc)[:300]}"}
            torch.cuda.empty_cache()
            with out.open("a") as f:
                f.write(json.dumps(line) + "\n")
            print(f"{line['status']:6} {'/'.join(key)}", flush=True)
    return 0


# --- step 2: judge (anywhere) ------------------------------------------------------------------------------------

def row(rounds: list[list[float]], contract: str) -> dict[str, Any]:
    """A store row as `--append-samples` leaves it: every round's samples pooled, each round's median kept."""
    pooled = [s for rnd in rounds for s in rnd]
    return {"value": statistics.median(pooled), "status": "ok", "reason": None, "contract": contract,
            "samples": pooled, "ci_99_a": None, "ci_99_b": None, "errors": None,
            "rounds": [statistics.median(rnd) for rnd in rounds]}


def gates() -> dict[str, Any]:
    from flybench.regress.config import RegressConfig, load_config

    pr = load_config(PR_CONFIG)
    return {"pr": pr, "pr-3%": replace(pr, relative=0.03), "pr-2%": replace(pr, relative=0.02),
            "old-20%-10us": RegressConfig(relative=0.20, absolute={"seconds": 1e-5})}


def judge_line(line: dict[str, Any], configs: dict[str, Any]) -> list[dict[str, Any]]:
    """One verdict per head and gate for one case, with the change really planted."""
    from flybench.benchmark_names import benchmark_name
    from flybench.regress import noise
    from flybench.regress.compare import judge

    samples = {k: [[s / 1e9 for s in rnd] for rnd in v] for k, v in line["samples_ns"].items()}
    base = row(samples["base"], line["contract"])
    name = benchmark_name(line["workload"], "quick")
    params = {"case": line["case"], "provider": line["provider"], "dtype": line["dtype"]}
    verdicts = []
    for head_name in [k for k in samples if k != "base"]:
        head = row(samples[head_name], line["contract"])
        measured = head["value"] / base["value"] - 1
        entry = {**params, "workload": line["workload"], "planted": 0.0 if head_name == "aa" else float(head_name),
                 "measured": measured, "base_s": base["value"], "flydsl-3%": measured >= FLYDSL_RULE}
        for label, cfg in configs.items():
            thresholds = cfg.thresholds(name, ", ".join(params.values()), "seconds")
            case_noise = None if label.startswith("old") else noise.from_rounds(base["rounds"], head["rounds"])
            result = judge(name, params, "env", "seconds", base, head, thresholds, cfg, case_noise)
            entry[label] = result.verdict == "regression"
            entry[f"{label}:detectable"] = result.detectable
            entry[f"{label}:false"] = result.verdict == "improvement"
        verdicts.append(entry)
    return verdicts


def summarise(verdicts: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    """Per planted size and gate: cases, detections and their rate; cases whose detectable change exceeds the size."""
    table: dict[str, Any] = {}
    for size in (0.0, *SIZES):
        rows = [v for v in verdicts if v["planted"] == size]
        entry: dict[str, Any] = {"cases": len(rows)}
        for label in labels:
            flagged = sum(bool(v[label]) for v in rows)
            entry[label] = {"flagged": flagged, "rate": flagged / len(rows) if rows else None}
            if size and not label.startswith("flydsl"):
                reach = [v for v in rows if v[f"{label}:detectable"] is not None and v[f"{label}:detectable"] <= size]
                entry[label].update(within_reach=len(reach), caught_within_reach=sum(bool(v[label]) for v in reach),
                                    below_detectable=sorted(_name(v) for v in rows if v not in reach))
        table[f"{size:g}"] = entry
    return table


def _name(v: dict[str, Any]) -> str:
    return f"{v['workload']}/{v['case']}/{v['provider']}/{v['dtype']}"


def report(args: argparse.Namespace) -> int:
    lines = [json.loads(t) for t in _read_text(Path(args.data)).splitlines() if t.strip()]
    ok = [line for line in lines if line["status"] == "ok"]
    configs = gates()
    verdicts = [v for line in ok for v in judge_line(line, configs)]
    labels = [*configs, "flydsl-3%"]
    summary = {"cases": len(ok), "failed": [f"{d['workload']}/{d['case']}/{d['provider']}/{d['dtype']}: {d['reason']}"
                                           for d in lines if d["status"] != "ok"],
               "by_size": summarise(verdicts, labels),
               "providers": sorted({line["provider"] for line in ok})}
    text = json.dumps({"summary": summary, "verdicts": verdicts}, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(markdown(summary, labels))
    return 0


def markdown(summary: dict[str, Any], labels: list[str]) -> str:
    head = "| planted | cases | " + " | ".join(labels) + " |"
    rows = [head, "|" + " --- |" * (len(labels) + 2)]
    for size, entry in summary["by_size"].items():
        cells = [f"{entry[label]['flagged']} ({entry[label]['rate']:.0%})" if entry["cases"] else "-" for label in labels]
        rows.append(f"| {'A/A' if size == '0' else f'+{float(size):.0%}'} | {entry['cases']} | " + " | ".join(cells) + " |")
    rows += ["", "Cases whose minimum detectable change is at most the planted size, and how many of them were caught:",
             "", "| planted | " + " | ".join(labels[:-1]) + " |", "|" + " --- |" * len(labels)]
    for size, entry in summary["by_size"].items():
        if size != "0":
            cells = [f"{entry[label]['caught_within_reach']} of {entry[label]['within_reach']}" for label in labels[:-1]]
            rows.append(f"| +{float(size):.0%} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _read_text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.alert_power", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    measure = sub.add_parser("run", help="measure on a GPU")
    measure.add_argument("--out", required=True, help="JSON-lines file, appended to (cases already in it are skipped)")
    measure.add_argument("-w", "--workload", action="append")
    measure.add_argument("-p", "--provider", action="append")
    measure.add_argument("-d", "--dtype", action="append")
    judged = sub.add_parser("report", help="judge the measured heads against base under each gate")
    judged.add_argument("data", help="the run's JSON lines (.gz accepted)")
    judged.add_argument("--json", help="write every verdict and the summary here")
    args = parser.parse_args(argv)
    return run(args) if args.step == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
