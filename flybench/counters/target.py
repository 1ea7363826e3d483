"""The process a profiler runs: one case's gated call, warmed up, then once inside the profiled range.

    python -m flybench.counters.target --status STATUS.json WORKLOAD SHAPE_SET CASE PROVIDER DTYPE

The call is the one the timing pass times (flybench.measure.case.checked_call:
the same inputs, and only once it passed the correctness gate). Warm-up
calls compile and autotune outside the range, so the profiler sees the
steady-state kernels of exactly one call. The range is marked with the
profiler API of the device runtime (`cudaProfilerStart`/`Stop`, which
torch maps to HIP's on ROCm); profilers start with collection off and
collect only inside it. STATUS.json says whether the call ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flybench import hardware

WARMUP_CALLS = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flybench.counters.target", description=__doc__.splitlines()[0])
    parser.add_argument("--status", type=Path, required=True, help="where to write whether the call ran")
    for name in ("workload", "shape_set", "case", "provider", "dtype"):
        parser.add_argument(name)
    args = parser.parse_args(argv)
    from flybench.measure.case import checked_call

    call, record = checked_call(args.workload, args.shape_set, args.case, args.provider, args.dtype)
    if call is not None and hardware.detect().kind != "cpu":  # a CPU has no profiled range: nothing to count
        import torch

        for _ in range(WARMUP_CALLS):
            call()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        call()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    args.status.write_text(json.dumps({"status": record.status, "reason": record.reason, "errors": record.errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
