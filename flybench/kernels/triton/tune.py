"""Tune the Triton kernels' configuration table on this GPU; optionally write the winners back.

For every bucket of this architecture's table (diffusion attention: query rows
per KV head; MoE: dtype x token count), each candidate configuration runs every
case of the shape set that falls into the bucket: first the correctness gate
against the float32 reference (a candidate that fails, or does not compile,
is dropped with its reason), then flybench's own device timer (cache flushed
before every sample, median). A candidate's score is the geometric mean over
the bucket's cases of its median over the current entry's median; the best
replaces the current entry only if it wins by more than --margin. Every
measured median goes into --out, so the table never holds a number that was
not measured; the table itself holds configurations only.

    python -m flybench.kernels.triton.tune --set full --out tune-h200.json --write
    python -m flybench.kernels.triton.tune --dry-run     # buckets, cases and candidate counts; runs anywhere
    python -m flybench.kernels.triton.tune --workload moe --dtype fp8 --max-candidates 40

Needs a GPU (NVIDIA or AMD) for anything but --dry-run.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import itertools
import json
import math
import pprint
import random
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from flybench.kernels.triton import cases, config_table, configs
from flybench.measure.contract import Contract
from flybench.workloads import get_workload

TUNE_CONTRACT = Contract(warmup_s=0.1, target_s=0.2, min_samples=10, max_samples=200)
"""Shorter than the suite's: a ranking needs consistent medians, not a full sample budget."""

_ATTENTION = {"BLOCK_M": (64, 128), "BLOCK_N": (32, 64, 128), "num_warps": (4, 8), "num_stages": (1, 2, 3),
              "min_split_tokens": (128, 256, 512)}
_MOE = {"BLOCK_N": (64, 128), "BLOCK_K": (64, 128), "GROUP_M": (1, 8), "num_warps": (4, 8), "num_stages": (2, 3, 4)}
_MOE_BLOCK_M = {16: (16, 32), 128: (16, 32, 64), 1024: (32, 64, 128), None: (64, 128)}
_AMD = {"waves_per_eu": (0, 2)}


def candidates(arch: str, workload: str, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The current entry first, then every point of the search space (AMD adds waves_per_eu)."""
    space = dict(_ATTENTION) if workload == "diffusion_attention" else {"BLOCK_M": _MOE_BLOCK_M[entry["max_tokens"]],
                                                                        **_MOE}
    if configs.table_arch(arch).startswith("gfx"):
        space.update(_AMD)
    bound = {k: v for k, v in entry.items() if k in configs.BUCKET_KEYS}
    fixed = {k: v for k, v in entry.items() if k not in space and k not in bound}
    points = [dict(zip(space, values)) for values in itertools.product(*space.values())]
    found = [entry] + [{**bound, **point, **fixed} for point in points]
    unique = {json.dumps(c, sort_keys=True): c for c in found}
    return list(unique.values())


def _measure(case, dtype: str, entry: dict[str, Any], device, inputs, reference) -> float:
    """Median seconds of one candidate on one case; raises when it fails the gate."""
    import statistics

    import torch

    from flybench.measure import correctness
    from flybench.measure.timing import time_runner

    units = torch.cuda.get_device_properties(0).multi_processor_count
    runner = cases.build(case, dtype, inputs, device.arch, units, config=configs.Config.from_entry(entry))
    correctness.poison(runner(), keep=inputs)
    verdict = correctness.check(runner(), reference, dtype)
    if not verdict.passed:
        raise RuntimeError(f"wrong result: {verdict.reason}")
    return statistics.median(time_runner(runner, device, TUNE_CONTRACT))


def tune_bucket(device, workload: str, dtype: str, index: int, bucket: list, max_candidates: int | None,
                margin: float) -> dict[str, Any]:
    """Measure the candidates of one bucket; return the record with the winner."""
    entry = configs.entries(device.arch, workload, dtype)[index]
    trials = candidates(device.arch, workload, entry)
    if max_candidates and len(trials) > max_candidates:
        trials = trials[:1] + random.Random(f"{workload}{dtype}{index}").sample(trials[1:], max_candidates - 1)
    w = get_workload(workload)
    record: dict[str, Any] = {"workload": workload, "dtype": dtype, "bucket": index, "current": entry,
                              "cases": [c.name for c in bucket], "candidates": []}
    for case in bucket:
        inputs = w.make_inputs(case, dtype, device.torch_device, seed=0)
        reference = w.reference(case, inputs)
        for position, trial in enumerate(trials):
            if len(record["candidates"]) <= position:
                record["candidates"].append({"config": trial, "median_s": {}, "failed": None})
            row = record["candidates"][position]
            if row["failed"]:
                continue
            try:
                row["median_s"][case.name] = _measure(case, dtype, trial, device, inputs, reference)
            except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is recorded and dropped
                row["failed"] = f"{case.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        del inputs, reference
        times = [row["median_s"][case.name] for row in record["candidates"] if case.name in row["median_s"]]
        current = record["candidates"][0]["median_s"].get(case.name)
        print(f"  {case.name}: {len(times)} ran, fastest {min(times, default=math.nan) * 1e6:.1f} us, "
              f"current entry {(current or math.nan) * 1e6:.1f} us", flush=True)
    done = [row for row in record["candidates"] if not row["failed"]]
    for row in done:  # geometric mean over the cases of the time relative to the fastest candidate
        row["score"] = math.exp(sum(math.log(row["median_s"][c] / min(r["median_s"][c] for r in done))
                                    for c in record["cases"]) / len(record["cases"]))
    best = min(done, key=lambda row: row["score"]) if done else None
    current = record["candidates"][0]
    keep = best is None or ("score" in current and current["score"] <= best["score"] * (1.0 + margin))
    record["winner"] = entry if keep else best["config"]
    if keep:
        verdict = "kept the current entry"
    elif "score" in current:
        verdict = f"new entry, {current['score'] / best['score']:.2f}x faster than the current one"
    else:
        verdict = f"new entry; the current one failed ({current['failed']})"
    print(f"{workload} {dtype} bucket {index}: {len(done)}/{len(trials)} candidates ran; {verdict}", flush=True)
    return record


def write_table(table: dict[str, Any], path: Path = Path(config_table.__file__)) -> None:
    """Rewrite config_table.py: its docstring, then TABLE as a plain literal."""
    doc = '"""' + (config_table.__doc__ or "").strip("\n") + '\n"""\n\n'
    path.write_text(doc + "TABLE = " + pprint.pformat(table, width=110, sort_dicts=False) + "\n")


def _provenance(device, shape_set: str, records: list[dict[str, Any]], before: str) -> str:
    """`<bucket>: <how it was chosen>` for each bucket tuned in this run; other buckets keep their segment."""
    import torch
    import triton

    how = (f"tuned on {device.name} ({device.arch}) {datetime.date.today().isoformat()}, triton {triton.__version__},"
           f" torch {torch.__version__}, flybench.kernels.triton.tune --set {shape_set}")
    names = [_bucket_name(r["workload"], r["dtype"], r["bucket"]) for r in records]
    kept = [segment for segment in before.split("; ") if segment.split(": ", 1)[0] not in names]
    return "; ".join([f"{name}: {how}" for name in names] + kept)


def _bucket_name(workload: str, dtype: str, index: int) -> str:
    """Attention entries serve every dtype; MoE entries are per dtype."""
    return f"moe {dtype} bucket {index}" if workload == "moe" else f"{workload} bucket {index}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="full", help="shape set whose cases are tuned on (default full)")
    parser.add_argument("--workload", action="append", choices=cases.WORKLOADS)
    parser.add_argument("--dtype", action="append", help="bf16, fp16, fp8 (default: each workload's)")
    parser.add_argument("--bucket", type=int, action="append", help="only this table entry (index; repeatable)")
    parser.add_argument("--max-candidates", type=int, help="sample this many candidates per bucket (seeded)")
    parser.add_argument("--margin", type=float, default=0.02, help="a new entry must be this much faster")
    parser.add_argument("--out", help="write every measurement here (JSON)")
    parser.add_argument("--write", action="store_true", help="rewrite config_table.py with the winners")
    parser.add_argument("--dry-run", action="store_true", help="list buckets, cases and candidate counts")
    parser.add_argument("--arch", help="with --dry-run: the table to list (default: this machine's)")
    args = parser.parse_args(argv)
    from flybench import hardware

    device = None if args.dry_run and args.arch else hardware.detect()
    arch = args.arch or device.arch
    if device is not None and device.kind == "cpu":
        print("tuning needs a GPU; this machine has none (--dry-run --arch gfx942|gfx950|sm_90 lists the work)",
              file=sys.stderr)
        return 2
    table_key = configs.table_arch(arch)
    records = []
    for workload in args.workload or cases.WORKLOADS:
        dtypes = [d for d in get_workload(workload).dtypes if not args.dtype or d in args.dtype]
        for dtype in dtypes if workload == "moe" else dtypes[:1]:  # attention entries do not depend on dtype
            for index, bucket in sorted(cases.bucket_cases(arch, workload, dtype,
                                                                   get_workload(workload).cases(args.set)).items()):
                if args.bucket and index not in args.bucket:
                    continue
                if args.dry_run:
                    entry = configs.entries(arch, workload, dtype)[index]
                    print(f"{table_key} {workload} {dtype} bucket {index}: {len(bucket)} cases, "
                          f"{len(candidates(arch, workload, entry))} candidates: {', '.join(c.name for c in bucket)}")
                    continue
                records.append(tune_bucket(device, workload, dtype, index, bucket, args.max_candidates, args.margin))
                _save(args, device, table_key, records)  # after every bucket: a run cut short keeps what it measured
    return 0


def _save(args: argparse.Namespace, device, table_key: str, records: list[dict[str, Any]]) -> None:
    """Every measurement to --out; with --write, the winners so far into the table."""
    if args.out:
        Path(args.out).write_text(json.dumps({"device": device.as_dict(), "contract": asdict(TUNE_CONTRACT),
                                              "set": args.set, "buckets": records}, indent=1))
    if args.write:
        table = copy.deepcopy(config_table.TABLE)
        for record in records:
            target = table[table_key][record["workload"]]
            (target[record["dtype"]] if isinstance(target, dict) else target)[record["bucket"]] = record["winner"]
        table[table_key]["provenance"] = _provenance(device, args.set, records, table[table_key]["provenance"])
        write_table(table)


if __name__ == "__main__":
    sys.exit(main())
