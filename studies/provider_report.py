"""One provider against the others and against the device's ceilings measured in the same run, as markdown.

Reads a run's case records (the `.cases.jsonl` sidecar `flybench run` writes
beside asv's results file) and, for every case the subject provider measured:
its median, its bytes over time as a fraction of the copy bandwidth measured
in the same run (`gemm` `copy-1GiB`, counting bytes read and written), its
FLOP rate as a fraction of the best bf16 GEMM rate of the run, and the ratio
of every other provider's median to its own (above 1: the subject is
faster). FLOPs and minimum bytes come from the workloads' current formulas,
so a corrected byte count applies to old records too. Only records with
status ok are used; the last record of a case wins (a rerun replaces).

    python -m studies.provider_report results/flybench/dev-h200/ef420c15-*.cases.jsonl --subject triton
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flybench.workloads import get_workload

Key = tuple[str, str, str, str]  # workload, case, provider, dtype


def load(path: Path) -> dict[Key, dict]:
    records: dict[Key, dict] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        records[(record["workload"], record["case"], record["provider"], record["dtype"])] = record
    return {key: r for key, r in records.items() if r["status"] == "ok" and r.get("median_s")}


def ceilings(records: dict[Key, dict]) -> tuple[float, float]:
    """(copy GB/s, best bf16 GEMM TFLOP/s) measured in this run."""
    gemm = get_workload("gemm")
    copy = [gemm.min_bytes(gemm.case(c), d) / r["median_s"] / 1e9 for (w, c, _, d), r in records.items()
            if w == "gemm" and c.startswith("copy")]
    rate = [gemm.flops(gemm.case(c)) / r["median_s"] / 1e12 for (w, c, _, d), r in records.items()
            if w == "gemm" and not c.startswith("copy") and d == "bf16"]
    if not copy or not rate:
        raise SystemExit("the run has no gemm copy or bf16 GEMM record: run `flybench run -w gemm` in the same run")
    return max(copy), max(rate)


def table(records: dict[Key, dict], subject: str, workload: str, dtype: str, copy_gbps: float,
          gemm_tflops: float) -> str:
    work = get_workload(workload)
    mine = {c: r for (w, c, p, d), r in records.items() if (w, p, d) == (workload, subject, dtype)}
    others = sorted({p for (w, c, p, d) in records if (w, d) == (workload, dtype) and p != subject})
    head = ["case", f"{subject} us", "GB/s", "of copy", "TFLOP/s", "of bf16 GEMM",
            *(f"{p} us" for p in others), *(f"vs {p}" for p in others)]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for case_name in [c.name for c in work.cases("full") if c.name in mine] + sorted(set(mine) - {
            c.name for c in work.cases("full")}):
        case, median = work.case(case_name), mine[case_name]["median_s"]
        gbps, tflops = work.min_bytes(case, dtype) / median / 1e9, work.flops(case) / median / 1e12
        theirs = [records.get((workload, case_name, p, dtype)) for p in others]
        lines.append("| " + " | ".join([
            case_name, f"{median * 1e6:.1f}", f"{gbps:.0f}", f"{gbps / copy_gbps:.0%}", f"{tflops:.1f}",
            f"{tflops / gemm_tflops:.0%}",
            *(f"{t['median_s'] * 1e6:.1f}" if t else "-" for t in theirs),
            *(f"{t['median_s'] / median:.2f}x" if t else "-" for t in theirs)]) + " |")
    return "\n".join(lines)


def report(path: Path, subject: str) -> str:
    records = load(path)
    copy_gbps, gemm_tflops = ceilings(records)
    parts = [f"Ceilings measured in this run: copy {copy_gbps:.0f} GB/s (read + write), "
             f"bf16 GEMM {gemm_tflops:.0f} TFLOP/s (best gemm case).", ""]
    pairs = sorted({(w, d) for (w, c, p, d) in records if p == subject})
    for workload, dtype in pairs:
        parts += [f"### {workload}, {dtype}", "", table(records, subject, workload, dtype, copy_gbps, gemm_tflops), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.provider_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path, help="a run's .cases.jsonl")
    parser.add_argument("--subject", default="triton", help="the provider to report on (default: triton)")
    args = parser.parse_args(argv)
    print(report(args.cases, args.subject))
    return 0


if __name__ == "__main__":
    sys.exit(main())
