"""Which of torch's two MLA decode paths is faster per case: SDPA with the heads as queries, or two batched GEMMs.

    python -m studies.mla_torch_paths        # on a GPU

For each quick mla_decode case (bf16) both paths of flybench.providers.torch_ops
are checked against the float32 reference, then timed: five warm-up calls,
then 50 calls each between two CUDA events, the median printed. Eager calls,
no cache flush: a comparison of the two paths in one run, not flybench's
timing method. Its figures set `torch_ops.MLA_BMM_CONTEXT`.
"""

from __future__ import annotations

import torch

from flybench.measure import correctness
from flybench.providers.torch_ops import mla_decode_bmm, mla_decode_sdpa
from flybench.workloads import get_workload

CALLS = 50


def median_us(call) -> float:
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(CALLS):
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[CALLS // 2]


def main() -> None:
    workload = get_workload("mla_decode")
    for case in workload.cases("quick"):
        inputs = workload.make_inputs(case, "bf16", "cuda")
        reference = workload.reference(case, inputs)
        for name, build in (("sdpa", mla_decode_sdpa), ("bmm", mla_decode_bmm)):
            call = build(case, inputs)
            verdict = correctness.check(call(), reference, "bf16")
            print(f"{case.name} {name}: {median_us(call):.1f} us, gate {'passed' if verdict.passed else 'FAILED'} "
                  f"{verdict.errors}", flush=True)
        del inputs, reference
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
