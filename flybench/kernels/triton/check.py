"""The Triton kernels against the workloads' float32 references, on a GPU or in Triton's interpreter.

Each case gets fresh random inputs (a new seed every run unless --seed is
given; the seed is reported), runs twice with its first outputs poisoned, and
goes through the harness's own gate (flybench.measure.correctness: relative
Frobenius error per output, "out" and "lse", NaN never passes). MoE cases also
check the device routing against `sort_by_expert`, element for element.

    python -m flybench.kernels.triton.check --set quick              # GPU: every quick case
    TRITON_INTERPRET=1 python -m flybench.kernels.triton.check --set tiny --extra --json out.json

Under TRITON_INTERPRET=1 the kernels run on CPU tensors, for tests only; each
case then uses the configuration table of one architecture in turn (gfx942,
gfx950, sm_90) and fp8 in that architecture's flavour. Triton's interpreter
has two numerics bugs that `patch_interpreter` works around for the test run
(bfloat16 `tl.dot` and float-to-fp8 rounding); the kernels are unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from dataclasses import dataclass
from typing import Any

from flybench.kernels.triton import cases
from flybench.workloads import get_workload
from flybench.workloads.base import Case

ARCHES = ("gfx942", "gfx950", "sm_90")


def _attention_case(name: str, hq: int, hkv: int, lens: tuple[int, ...], draft: int, page: int, mask: str) -> Case:
    shape = {"batch": len(lens), "q_heads": hq, "kv_heads": hkv, "head_dim": 128, "draft": draft, "page_size": page,
             "context_lens": lens, "mask": mask, "scale": 128**-0.5}
    return Case("diffusion_attention", name, shape, "check")


def _moe_case(name: str, hidden: int, inter: int, experts: int, top_k: int, tokens: int) -> Case:
    shape = {"tokens": tokens, "hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k}
    return Case("moe", name, shape, "check")


@dataclass(frozen=True)
class Check:
    """One case to check, in which dtypes, with an optional forced split count and constant overrides."""

    case: Case
    dtypes: tuple[str, ...]
    num_splits: int | None = None
    constexprs: tuple[tuple[str, Any], ...] = ()  # set on every launch that has the constant


EXTRA = [  # what the tiny set leaves out: split-K and its combine, GQA 7 over two row tiles, a draft of 64,
    # 64-bit cache offsets, several routing chunks (the offsets pass loops), the MoE buckets above 128 tokens
    Check(_attention_case("split3-gqa-p16-causal", 4, 2, (300, 33, 1), 16, 16, "causal"), ("bf16", "fp16"), 3),
    Check(_attention_case("dream-g7-d32-p16-causal", 7, 1, (64, 17), 32, 16, "causal"), ("bf16", "fp16")),
    Check(_attention_case("mha-d64-p64-bidir-split2", 2, 2, (128, 200), 64, 64, "bidirectional"), ("bf16",), 2),
    Check(_attention_case("wide-offsets-gqa-p16-bidir", 4, 2, (90,), 16, 16, "bidirectional"), ("fp16",),
          constexprs=(("WIDE_OFFSETS", True),)),
    Check(_moe_case("moe-e8k2-t200", 64, 32, 8, 2, 200), ("bf16", "fp8")),
    Check(_moe_case("moe-e4k2-t1100-multichunk", 64, 32, 4, 2, 1100), ("bf16",)),
]


def patch_interpreter() -> None:
    """Fix two numerics bugs of Triton 3.9's interpreter (CPU only; compiled kernels are untouched).

    1. tl.dot multiplies bfloat16 operands as their raw uint16 bits (triton-lang/triton#11584;
       upstream: bf16 is not supported in the interpreter): widen them to float32 first, as MMA does.
    2. float -> fp8 casts drop the carry when rounding overflows the mantissa (126.2 -> 64, not
       128; triton-lang/triton#8322): cast through torch, round to nearest even like the hardware.
    """
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder, "_flybench_patched", False):
        return
    dot, to_fp = builder.create_dot, builder.create_fp_to_fp
    fp8 = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e4b8: torch.float8_e4m3fnuz,
           tl.float8e5: torch.float8_e5m2, tl.float8e5b16: torch.float8_e5m2fnuz}

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        a = self.cast_impl(a, tl.float32) if a.dtype == tl.bfloat16 else a
        b = self.cast_impl(b, tl.float32) if b.dtype == tl.bfloat16 else b
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        target = fp8.get(dst_type.scalar)
        if target is None or src.dtype not in (tl.float32, tl.float16):
            return to_fp(self, src, dst_type, rounding_mode)
        values = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32))
        return interpreter.TensorHandle(values.to(target).view(torch.uint8).numpy(), dst_type.scalar)

    builder.create_dot, builder.create_fp_to_fp = create_dot, create_fp_to_fp
    builder._flybench_patched = True


def _as_arch_fp8(inputs: dict, arch: str) -> None:
    """Requantise fp8 weights into `arch`'s flavour (a CPU draws OCP e4m3fn; gfx942 takes fnuz)."""
    from flybench.workloads._inputs import quantize_fp8

    fp8 = cases.fp8_dtype(arch)
    for name in ("w13", "w2"):
        if inputs[name].dtype != fp8:
            values = inputs[name].float() * inputs.pop(f"{name}_scale")[..., None]
            inputs[name], inputs[f"{name}_scale"] = quantize_fp8(values, fp8, per_row=True)


def routing_mismatches(plan: Any, inputs: dict, top_k: int) -> int:
    """Entries where the device routing is not a top-k routing of the logits, sorted as sort_by_expert() sorts it.

    Equal logits (frequent in bf16 over many tokens) make more than one top-k
    correct: a token passes when the logits of the experts it chose are the k
    highest, highest first. The sort, blocks and weights are then checked
    against the reference built from the device's own choice.
    """
    import torch

    from flybench.workloads.moe import sort_by_expert

    routing = plan.routing
    logits = inputs["router_logits"].float()
    chosen = torch.gather(logits, 1, routing.ids.long())
    bad = int((chosen != torch.topk(logits, top_k, dim=-1).values).any(dim=1).sum())
    weights = torch.softmax(chosen, dim=-1)
    block_m = routing.sorted_ids.numel() // routing.block_expert.numel()
    sorted_ids, experts, total = sort_by_expert(routing.ids, inputs["w13"].shape[0], block_m)
    n, blocks = int(total), int(total) // block_m
    got_total = int(routing.total[0])
    if got_total != n:
        return bad + abs(got_total - n) + 1
    bad += int((routing.sorted_ids[:n] != sorted_ids).sum())
    bad += int((routing.block_expert[:blocks] != experts).sum())
    return bad + int(((routing.weights - weights).abs() > 1e-6).sum())


def check_case(check: Check, dtype: str, arch: str, device: str, seed: int, compute_units: int | None = None
               ) -> dict[str, Any]:
    """Run one case twice (first outputs poisoned) and judge the second against the reference.

    An exception is a failed check with its reason, never an abort of the run.
    """
    case = check.case
    result: dict[str, Any] = {"workload": case.workload, "case": case.name, "dtype": dtype, "arch": arch,
                              "seed": seed, "errors": {}, "passed": False, "reason": None}
    try:
        result.update(_run_check(check, dtype, arch, device, seed, compute_units))
    except Exception as exc:  # noqa: BLE001 - recorded per case, like the harness does
        result["reason"] = f"{type(exc).__name__}: {exc}"[:1000]
    return result


def _run_check(check: Check, dtype: str, arch: str, device: str, seed: int, compute_units: int | None
               ) -> dict[str, Any]:
    from flybench.measure import correctness

    case = check.case
    workload = get_workload(case.workload)
    inputs = workload.make_inputs(case, dtype, device, seed=seed)
    if dtype == "fp8":
        _as_arch_fp8(inputs, arch)
    reference = workload.reference(case, inputs)
    plan = cases.build(case, dtype, inputs, arch, compute_units, check.num_splits)
    for launch in plan.launches:
        launch.constexprs.update({k: v for k, v in check.constexprs if k in launch.constexprs})
    correctness.poison(plan(), keep=inputs)
    verdict = correctness.check(plan(), reference, dtype)
    result = {"errors": verdict.errors, "tolerance": verdict.tolerance, "passed": verdict.passed,
              "reason": verdict.reason}
    if case.workload == "moe":
        result["routing_mismatches"] = routing_mismatches(plan, inputs, case.shape["top_k"])
        result["passed"] = result["passed"] and result["routing_mismatches"] == 0
    else:
        result["splits"] = plan.num_splits
    return result


def selected(shape_set: str, extra: bool, workloads: list[str]) -> list[Check]:
    """The shape set's cases in every dtype of their workload, then (with `extra`) the extra shapes."""
    chosen = [Check(c, get_workload(w).dtypes) for w in workloads for c in get_workload(w).cases(shape_set)]
    return chosen + [c for c in EXTRA if extra and c.case.workload in workloads]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="tiny", help="shape set: tiny, quick or full")
    parser.add_argument("--extra", action="store_true", help="add the extra small shapes (splits, GQA 7, multi-chunk)")
    parser.add_argument("--workload", action="append", choices=cases.WORKLOADS, help="repeatable; default both")
    parser.add_argument("--seed", type=int, help="input seed; default: a fresh one per run")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if interpret:
        patch_interpreter()
        device, arches, units = "cpu", ARCHES, None
    else:
        import torch

        from flybench import hardware

        found = hardware.detect()
        if found.kind == "cpu":
            print("no GPU here: run on a GPU, or set TRITON_INTERPRET=1 (slow, tiny shapes only)", file=sys.stderr)
            return 2
        device, arches = found.torch_device, (found.arch,)
        units = torch.cuda.get_device_properties(0).multi_processor_count
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    results = []
    for check in selected(args.set, args.extra, args.workload or list(cases.WORKLOADS)):
        for dtype in check.dtypes:
            arch = arches[len(results) % len(arches)]
            result = check_case(check, dtype, arch, device, seed + len(results), units)
            results.append(result)
            errors = " ".join(f"{k}={v:.2e}" for k, v in result["errors"].items())
            print(f"{'ok  ' if result['passed'] else 'FAIL'} {check.case.name} {dtype} {arch} {errors} "
                  f"{result.get('reason') or ''}", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    failed = sum(not r["passed"] for r in results)
    print(f"{len(results) - failed} passed, {failed} failed (seed {seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
