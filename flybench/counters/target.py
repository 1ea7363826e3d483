"""The process a profiler runs: one case's gated call, warmed up, then once inside the profiled range.

    python -m flybench.counters.target --status STATUS.json WORKLOAD SHAPE_SET CASE PROVIDER DTYPE [--range roctx]

The call is the one the timing pass times (flybench.measure.case.checked_call:
the same inputs, and only once it passed the correctness gate). Warm-up
calls compile and autotune outside the range, so the profiler sees the
steady-state kernels of exactly one call. The range is marked with the
profiler API of the device runtime (`cudaProfilerStart`/`Stop`, for ncu),
or with `--range roctx` by ROCTx's `roctxProfilerResume`/`Pause` (for
rocprofv3, which takes no range from HIP's); the profiler collects only
inside the range, or (rocprofv3) keeps only what was launched inside it.
STATUS.json says whether the call ran.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from collections.abc import Callable
from pathlib import Path

from flybench import hardware

WARMUP_CALLS = 3
ROCTX_LIBRARIES = ("librocprofiler-sdk-roctx.so.1", "librocprofiler-sdk-roctx.so")
"""ROCTx of rocprofiler-sdk (its rocprofiler-sdk-roctx package), whose profiler-control calls rocprofv3 records."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flybench.counters.target", description=__doc__.splitlines()[0])
    parser.add_argument("--status", type=Path, required=True, help="where to write whether the call ran")
    for name in ("workload", "shape_set", "case", "provider", "dtype"):
        parser.add_argument(name)
    parser.add_argument("--range", choices=("cuda", "roctx"), default="cuda",
                        help="the API that marks the profiled range: the device runtime's profiler start/stop "
                             "(ncu), or ROCTx's roctxProfilerResume/Pause (rocprofv3)")
    args = parser.parse_args(argv)
    from flybench.measure.case import checked_call

    call, record = checked_call(args.workload, args.shape_set, args.case, args.provider, args.dtype)
    if call is not None and hardware.detect().kind != "cpu":  # a CPU has no profiled range: nothing to count
        import torch

        for _ in range(WARMUP_CALLS):
            call()
        start, stop = profiled_range(args.range)
        torch.cuda.synchronize()
        start()
        call()
        torch.cuda.synchronize()
        stop()
    args.status.write_text(json.dumps({"status": record.status, "reason": record.reason, "errors": record.errors}))
    return 0


def profiled_range(api: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """Start and stop of the profiled range. rocprofv3 takes no range from hipProfilerStart/Stop (what torch's
    profiler start/stop call on ROCm); its range markers are roctxProfilerResume(0) and roctxProfilerPause(0)."""
    if api == "cuda":
        import torch

        return torch.cuda.profiler.start, torch.cuda.profiler.stop
    return _roctx("roctxProfilerResume"), _roctx("roctxProfilerPause")


def _roctx(name: str) -> Callable[[], None]:
    errors = []
    for library in ROCTX_LIBRARIES:
        try:
            function = getattr(ctypes.CDLL(library), name)
            break
        except OSError as exc:
            errors.append(str(exc))
    else:
        raise OSError(f"no ROCTx library for {name}: {'; '.join(errors)}")
    function.argtypes, function.restype = [ctypes.c_uint64], ctypes.c_int

    def call() -> None:
        if (code := function(0)) != 0:  # 0: all threads of the process
            raise RuntimeError(f"{name}(0) returned {code}")
    return call


if __name__ == "__main__":
    sys.exit(main())
