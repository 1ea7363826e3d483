"""The Triton kernels against the workloads' float32 references, in Triton's interpreter on the CPU.

The interpreter has to be on before triton is imported and the compile tests
need it off, so the checks run in subprocesses (`python -m
flybench.kernels.triton.check`, one per workload, side by side). Each run draws
fresh random inputs (the seed is in the results) for the tiny cases and the
extra shapes (split-K, GQA 7, 64-bit offsets, several routing chunks), with
the configuration tables of gfx942, gfx950 and sm_90 in turn.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from flybench.kernels.triton import cases, check

pytest.importorskip("triton", reason="the Triton kernels need triton (pip install -e '.[test]' brings it)")

CHECKS = [(c.case.workload, c.case.name, dtype) for c in check.selected("tiny", True, list(cases.WORKLOADS))
          for dtype in c.dtypes]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[tuple[str, str, str], dict]:
    """Run both workloads' checks in parallel interpreter subprocesses; results keyed by (workload, case, dtype)."""
    folder = tmp_path_factory.mktemp("triton-interpret")
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_DEFAULT_FP_FUSION": "1"}
    runs = []
    for workload in cases.WORKLOADS:
        out = folder / f"{workload}.json"
        command = [sys.executable, "-m", "flybench.kernels.triton.check", "--set", "tiny", "--extra",
                   "--workload", workload, "--json", str(out)]
        runs.append((subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                     out))
    found = {}
    for process, out in runs:
        log, _ = process.communicate(timeout=900)
        assert out.exists(), f"the interpreter check wrote no results:\n{log[-4000:]}"
        for row in json.loads(out.read_text()):
            found[(row["workload"], row["case"], row["dtype"])] = row
    return found


@pytest.mark.parametrize("workload,case,dtype", CHECKS)
def test_kernel_matches_reference_in_interpreter(results, workload, case, dtype):
    row = results[(workload, case, dtype)]
    assert row["passed"], f"{case} {dtype} on the {row['arch']} table (seed {row['seed']}): {row['reason']}"
    outputs = {"out", "lse"} if workload == "diffusion_attention" else {"out"}
    assert set(row["errors"]) == outputs  # the log-sum-exp is checked too, wherever the kernel returns it
    assert all(math.isfinite(e) and e <= row["tolerance"] for e in row["errors"].values())
    if workload == "moe":
        assert row["routing_mismatches"] == 0  # device routing == route() + sort_by_expert(), exactly


def test_checks_cover_the_interesting_paths():
    extra = {c.case.name: c for c in check.EXTRA}
    assert any(c.num_splits and c.num_splits > 1 for c in extra.values())  # split-K + combine kernel
    assert any(dict(c.constexprs).get("WIDE_OFFSETS") for c in extra.values())  # 64-bit cache offsets
    tokens = max(c.case.shape["tokens"] * c.case.shape["top_k"] for c in extra.values() if c.case.workload == "moe")
    assert tokens > 16 * 128  # more routing chunks than one pass of the offsets loop takes
    assert {"bf16", "fp16", "fp8"} <= {d for _, _, d in CHECKS}
