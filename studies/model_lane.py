"""The model lane side by side: ragged_dot, dense and the Triton MoE in one process, for the same steps, each
checked, timed and split by role, with the Amdahl check of each variant against ragged_dot.

The steps are the `mixtral_step` workload's cases (`--set quick`: prefill
1 x 2048, decode 1 x 1 and 8 x 1 at context 512, 4 of Mixtral-8x7B's
layers with random weights, bf16), built and timed as `flybench run` builds
and times them (`flybench.model.lane.runner`: the jitted call from Python
until its logits are ready; decode feeds each call's cache to the next).
For each step and variant:

1. correctness: the bf16 logits against the float32 step of the same
   weights (`lane.reference`), within the workload's tolerance, before any
   timing;
2. tokens/s: the median of `--repeats` calls after one warm-up;
3. the role split (`flybench.model.roles.attributed`): 5 steps timed, 5 more
   traced, their kernels attributed by role, once with the kernels inside
   command buffers as the timed step runs them and once one launch a
   kernel;
4. the Amdahl check against ragged_dot, per split: the speed measured over
   the traced steps, and the speed predicted by replacing only the MoE's
   kernel time.

The JSON holds the conditions (precision, layers, batch, tokens, context,
XLA_FLAGS, the versions of jax, jaxlib, jax-triton and triton, the device)
and one entry per step. Partial results are written after every variant.

    python -m studies.model_lane --out docs/data/h200-model-lane-side-by-side.json \
        --case mixtral-l4-prefill-b1-t2048 --case mixtral-l4-decode-b1-ctx512
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flybench.model import attribution, lane, roles

PROVIDERS = ("xla", "xla-dense", "jax-triton")
"""The MoE layers ragged_dot, dense and triton, as `flybench run` names their providers."""
BASE = "xla"


def versions() -> dict[str, str]:
    found = {}
    for package in ("jax", "jaxlib", "jax-triton", "triton", "torch"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def checked_and_timed(case, provider: str, inputs, reference, repeats: int) -> dict[str, Any]:
    """The variant's bf16 logits against the float32 step by the workload's tolerance (the gate `flybench run`
    applies before timing); if they pass, the median ms of the timed call after the checked one."""
    from flybench.measure import correctness
    from flybench.workloads import get_workload

    call = lane.runner(case, lane.MOE_OF_PROVIDER[provider], inputs)
    verdict = correctness.check(call(), reference, "bf16", get_workload(case.workload).tolerances["bf16"])
    found: dict[str, Any] = {"check": {"passed": verdict.passed, "error": verdict.errors.get("out"),
                                       "tolerance": verdict.tolerance, "reason": verdict.reason}}
    if verdict.passed:
        samples = []
        for _ in range(repeats):
            began = time.perf_counter()
            call()
            samples.append(time.perf_counter() - began)
        found["ms"] = 1e3 * statistics.median(samples)
        found["tokens_per_s"] = case.shape["batch"] * case.shape["tokens"] / (found["ms"] / 1e3)
    return found


def amdahl_checks(variants: dict[str, dict]) -> dict[str, dict]:
    """Per split mode, each variant against ragged_dot: measured and predicted speed and their gap."""
    checks: dict[str, dict] = {}
    base = variants.get(BASE)
    for mode in ("command_buffers", "one_launch_a_kernel"):
        if not base or base["splits"].get(mode, {}).get("status") != "ok":
            continue
        b = base["splits"][mode]
        for provider, found in variants.items():
            split = found["splits"].get(mode, {})
            if provider == BASE or split.get("status") != "ok":
                continue
            check = attribution.amdahl(attribution.Attribution(b["step_ms"], b["roles_ms"]),
                                       attribution.Attribution(split["step_ms"], split["roles_ms"]))
            check["gap"] = check["predicted"] / check["measured"] - 1
            checks.setdefault(mode, {})[provider] = check
    return checks


def repeats(text: str) -> int:
    """The argparse type of --repeats: a whole number of timed calls, 1 or more (0 had no median to take)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of calls above 0: give how many calls to "
                                         "time after the checked one, e.g. --repeats 20")
    return value


def main(argv: list[str] | None = None) -> int:
    from flybench.cli._output import output_path
    from flybench.workloads import SHAPE_SETS, get_workload

    parser = argparse.ArgumentParser(prog="python -m studies.model_lane", description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="quick", choices=SHAPE_SETS, help="the mixtral_step cases to run")
    parser.add_argument("--case", action="append", help="only these cases of the set (repeatable; default all)")
    parser.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=list(PROVIDERS))
    parser.add_argument("--repeats", type=repeats, default=20, help="timed calls a variant (default 20)")
    parser.add_argument("--out", type=output_path, required=True,
                        help="the JSON file to write (checked before any work: a folder there was found only at "
                             "the end, after minutes of measuring)")
    args = parser.parse_args(argv)
    workload = get_workload("mixtral_step")
    cases = [c for c in workload.cases(args.set) if not args.case or c.name in args.case]
    if not cases:
        parser.error(f"no case of the {args.set} set is named {', '.join(args.case)}: "
                     f"{', '.join(c.name for c in workload.cases(args.set))}")
    import jax  # after the arguments are checked: it takes seconds to load and to find the device

    from flybench import hardware

    device = jax.devices()[0]
    document: dict[str, Any] = {
        "what": __doc__.splitlines()[0], "command": "python -m studies.model_lane " + " ".join(argv or sys.argv[1:]),
        "conditions": {"precision": "bf16", "model": "Mixtral-8x7B dimensions, random weights",
                       "xla_flags": os.environ.get("XLA_FLAGS", ""), "device": device.device_kind,
                       "platform": device.platform, "versions": versions(), "repeats": args.repeats,
                       "trace_steps": roles.STEPS},
        "steps": []}
    torch_device = hardware.detect().torch_device
    for case in cases:
        inputs = workload.make_inputs(case, "bf16", torch_device, seed=0)
        reference = lane.reference(case, inputs)
        entry = {"case": case.name, **{k: case.shape[k] for k in ("phase", "batch", "tokens", "context", "layers")},
                 "variants": {}}
        document["steps"].append(entry)
        for provider in args.providers:
            moe = lane.MOE_OF_PROVIDER[provider]
            found: dict[str, Any] = {"moe": moe, "conditions": lane.conditions(case, moe)}
            entry["variants"][provider] = found
            found.update(checked_and_timed(case, provider, inputs, reference, args.repeats))
            print(case.name, provider, json.dumps({k: found.get(k) for k in ("check", "ms", "tokens_per_s")}),
                  flush=True)
            if not found["check"]["passed"]:
                continue
            found["splits"] = {}
            lowered, call, _ = roles.traced_step(case.name, provider, "bf16")
            for mode, command_buffers in (("command_buffers", True), ("one_launch_a_kernel", False)):
                with tempfile.TemporaryDirectory(prefix="model-lane-trace-") as tmp:
                    split = roles.attributed(lowered, call, {}, provider, Path(tmp), command_buffers=command_buffers)
                split.pop("conditions")
                split["kernel_share"] = sum(split["roles_ms"].values()) / split["step_ms"]
                split["groups"] = roles.shares(split["roles_ms"], split["step_ms"])
                found["splits"][mode] = split
                print(case.name, provider, mode, json.dumps({k: split.get(k) for k in
                      ("status", "step_ms", "kernel_share", "roles_ms", "rest_top", "reason")}), flush=True)
            del lowered, call
            entry["amdahl"] = amdahl_checks(entry["variants"])
            args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
        if "tokens_per_s" in entry["variants"].get(BASE, {}):
            entry["speed_vs_ragged_dot"] = {p: v["tokens_per_s"] / entry["variants"][BASE]["tokens_per_s"]
                                            for p, v in entry["variants"].items() if "tokens_per_s" in v}
        args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
