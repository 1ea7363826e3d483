"""Does flybench's device time agree with do_bench and the profiler, and is it repeatable?

For each representative case, in one process: flybench's timer, triton's
do_bench (median) and torch.profiler's kernel time, each taken `--repeats`
times with the three methods interleaved round by round, so that slow drifts
of the GPU's state hit all three alike. Reports per case the within-run
coefficient of variation of flybench's samples, the spread (CV) of each
method's median across repeats, and the ratio of the medians. Needs a GPU.

    python -m studies.timing_method --out timing.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict

from flybench import hardware
from flybench.measure.contract import PRESETS
from flybench.measure.timing import _flush_buffer, time_runner
from flybench.providers import get_provider
from flybench.workloads import get_workload

CASES = [  # (workload, case, provider, dtype): a GEMM, a launch-heavy MoE loop, attention prefill
    ("gemm", "4096x4096x4096", "torch", "bf16"),
    ("moe", "mixtral8x7b-t1024", "cublas", "bf16"),
    ("attention", "B4S2048H32Hkv8D128_causal", "flex", "bf16"),
    ("diffusion_attention", "llada8b-b8-ctx4k-d32-p16-bidir", "flex", "bf16"),
]


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def profiler_kernel_time(runner, flush, calls: int = 30) -> float:
    """Median over calls of the device time of the kernels each call launched (flush excluded).

    Each call runs inside its own record_function range; the range's
    device_time_total sums the kernels launched from inside it, which leaves
    out the flush launched between ranges and any gaps between kernels.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            flush.add_(1)
            with record_function(f"flybench_call_{i}"):
                runner()
        torch.cuda.synchronize()
    per_call = [e.device_time_total / 1e6 for e in prof.events()
                if e.name.startswith("flybench_call_") and e.device_type.name == "CPU"]
    return statistics.median(per_call)


def study(repeats: int, out: str | None = None) -> list[dict]:
    import torch
    from triton.testing import do_bench

    device = hardware.detect()
    contract = PRESETS["quick"]
    flush = _flush_buffer(device)
    rows = []
    for workload_name, case_name, provider_name, dtype in CASES:
        workload = get_workload(workload_name)
        case = workload.case(case_name)
        inputs = workload.make_inputs(case, dtype, "cuda")
        runner = get_provider(provider_name).build(case, dtype, inputs, device)
        runner()
        medians = defaultdict(list)
        within_cv = []
        for _ in range(repeats):
            samples = time_runner(runner, device, contract)
            medians["flybench"].append(statistics.median(samples))
            within_cv.append(_cv(samples))
            medians["do_bench"].append(do_bench(runner, warmup=100, rep=500, return_mode="median") / 1e3)
            medians["profiler"].append(profiler_kernel_time(runner, flush))
        fly = statistics.median(medians["flybench"])
        rows.append({
            "case": f"{workload_name}/{case_name}/{provider_name}/{dtype}",
            "flybench_median_us": fly * 1e6,
            "do_bench_median_us": statistics.median(medians["do_bench"]) * 1e6,
            "profiler_median_us": statistics.median(medians["profiler"]) * 1e6,
            "within_run_cv": statistics.median(within_cv),
            "median_spread_cv": {m: _cv(v) for m, v in medians.items()},
            "ratio_do_bench": statistics.median(medians["do_bench"]) / fly,
            "ratio_profiler": statistics.median(medians["profiler"]) / fly,
            "medians_us": {m: [x * 1e6 for x in v] for m, v in medians.items()},
        })
        del inputs, runner
        torch.cuda.empty_cache()
        if out:  # after every case, so a run cut short still leaves what it measured
            with open(out, "w") as handle:
                json.dump({"device": device.as_dict(), "rows": rows}, handle, indent=1)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    rows = study(args.repeats, args.out)
    print(f"{'case':60s} {'flybench':>10s} {'do_bench':>10s} {'profiler':>10s} {'cv(run)':>8s} "
          f"{'spread fb':>9s} {'spread db':>9s} {'spread pr':>9s}")
    for r in rows:
        s = r["median_spread_cv"]
        print(f"{r['case']:60s} {r['flybench_median_us']:10.1f} {r['do_bench_median_us']:10.1f} "
              f"{r['profiler_median_us']:10.1f} {r['within_run_cv']:8.2%} {s['flybench']:9.2%} "
              f"{s['do_bench']:9.2%} {s['profiler']:9.2%}")


if __name__ == "__main__":
    main()
