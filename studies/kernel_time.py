"""flybench's time of every case against the profiler's summed kernel time of one call. Needs a GPU.

For each case of a shape set that runs here, in one process: flybench's own
measurement (`measure_case` under the set's contract: correctness gate, the
cache flush, device-graph replay where the runner can be captured), then a
fresh runner whose calls torch.profiler (CUPTI) traces, the kernels of each
call summed (flush and launch gaps excluded: `summed_kernel_times`). The
ratio of the two medians says how much of flybench's time is not kernel
time: launch gaps, host work. Each case's row is written as soon as it is
measured, so a cut run keeps what it did.

    python -m studies.kernel_time --set quick --out kernel-time.json [-w moe] [-p triton]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from flybench import hardware
from flybench.measure.case import measure_case
from flybench.measure.contract import PRESETS
from flybench.measure.timing import _flush_buffer
from flybench.selection import choices
from flybench.workloads import get_workload

WITHIN = 0.03
"""The study's bar: flybench's median at most 3% above the summed kernel time."""


def cases(shape_set: str, workloads: list[str] | None, providers: list[str] | None, dtypes: list[str] | None):
    device = hardware.detect()
    for choice in choices(device, workloads, providers, dtypes):
        if choice.reason is None:
            for case in get_workload(choice.workload).cases(shape_set):
                yield choice.workload, case.name, choice.provider, choice.dtype


def summed_kernel_times(runner, flush, calls: int) -> list[float]:
    """Seconds of kernel execution in each of `calls` calls, each after the cache flush, from a CUPTI trace.

    The flush runs on a stream of its own and marks where each call begins:
    every other kernel up to the next flush is the call's, whoever launched
    it (torch, Triton's launcher, cuBLAS, XLA), and gaps between kernels are
    not counted.
    """
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    side = torch.cuda.Stream()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            with torch.cuda.stream(side):
                flush.add_(1)
            torch.cuda.synchronize()
            runner()
            torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        events = json.loads(Path(trace.name).read_text())["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    if not kernels:
        return []
    flush_stream = kernels[0]["args"]["stream"]  # the first kernel launched is a flush
    per_call: list[float] = []
    for kernel in kernels:
        if kernel["args"]["stream"] == flush_stream and kernel["name"] == kernels[0]["name"]:
            per_call.append(0.0)
        else:
            per_call[-1] += kernel["dur"] * 1e-6
    return per_call if len(per_call) == calls else []


def kernel_time(workload_name: str, case_name: str, provider_name: str, dtype: str, calls: int) -> float | None:
    """Median over `calls` of one call's summed kernel time, each call after the cache flush."""
    import torch

    from flybench.providers import get_provider

    device = hardware.detect()
    workload = get_workload(workload_name)
    case = workload.case(case_name)
    inputs = workload.make_inputs(case, dtype, device.torch_device, seed=0)
    runner = get_provider(provider_name).build(case, dtype, inputs, device)
    for _ in range(3):
        runner()
    torch.cuda.synchronize()
    try:
        per_call = summed_kernel_times(runner, _flush_buffer(device), calls)
        return statistics.median(per_call) if per_call else None
    finally:
        del runner, inputs
        torch.cuda.empty_cache()


def study(shape_set: str, out: Path, workloads: list[str] | None, providers: list[str] | None,
          dtypes: list[str] | None, calls: int) -> None:
    rows = []
    for workload, case, provider, dtype in cases(shape_set, workloads, providers, dtypes):
        start = time.perf_counter()
        record = measure_case(workload, shape_set, case, provider, dtype, PRESETS[shape_set])
        row = {"workload": workload, "case": case, "provider": provider, "dtype": dtype, "status": record.status,
               "reason": record.reason, "graph": record.contract.get("graph"), "timer": record.contract.get("timer"),
               "note": record.contract.get("note"), "flybench_s": record.median_s, "samples": len(record.samples_s)}
        if record.status == "ok":
            try:
                row["kernel_s"] = kernel_time(workload, case, provider, dtype, calls)
                row["ratio"] = record.median_s / row["kernel_s"] if row["kernel_s"] else None
            except Exception as exc:  # noqa: BLE001 - a profiler failure is this case's row, not the study's end
                row["kernel_error"] = f"{type(exc).__name__}: {exc}"[:300]
        row["wall_s"] = time.perf_counter() - start
        rows.append(row)
        out.write_text(json.dumps(rows, indent=1))
        ratio = f"{row['ratio']:.3f}" if row.get("ratio") else "-"
        print(f"{len(rows):4d} {workload:20s} {provider:9s} {dtype:5s} {case:44s} {record.status:6s} "
              f"graph={row['graph']!s:5s} flybench={_us(row['flybench_s'])} kernels={_us(row.get('kernel_s'))} "
              f"ratio={ratio}", flush=True)
    summarize(rows)


def _us(seconds: float | None) -> str:
    return f"{seconds * 1e6:9.1f}us" if seconds else "        -"


def summarize(rows: list[dict]) -> None:
    measured = [r for r in rows if r.get("ratio")]
    if not measured:
        print("no case measured")
        return
    ratios = [r["ratio"] for r in measured]
    over = [r for r in measured if r["ratio"] > 1 + WITHIN]
    print(f"{len(measured)} cases: ratio median {statistics.median(ratios):.4f}, max {max(ratios):.4f}; "
          f"{len(over)} more than {WITHIN:.0%} above their kernel time")
    for r in sorted(over, key=lambda r: -r["ratio"]):
        print(f"  {r['ratio']:.3f} {r['workload']} {r['provider']} {r['dtype']} {r['case']} "
              f"(graph={r['graph']}, timer={r['timer']}{', ' + r['note'] if r.get('note') else ''})")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.kernel_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", dest="shape_set", default="quick")
    parser.add_argument("--workload", "-w", action="append")
    parser.add_argument("--provider", "-p", action="append")
    parser.add_argument("--dtype", "-d", action="append")
    parser.add_argument("--calls", type=int, default=30, help="profiled calls per case (default: 30)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--summary", action="store_true", help="only summarise an existing --out file")
    args = parser.parse_args()
    if args.summary:
        summarize(json.loads(args.out.read_text()))
    else:
        study(args.shape_set, args.out, args.workload, args.provider, args.dtype, args.calls)


if __name__ == "__main__":
    main()
