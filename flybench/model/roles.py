"""The role split of a model-lane case, written by `flybench run --roles`: format, path, writer, reader, and the
process that traces one case.

One JSON object a line in `<commit8>-<env>.roles.jsonl` beside asv's results
(a suffix asv ignores, as the case and counter records have), one line per
`mixtral_step` case the pass tried:

- `version` (1), `run_id`, the case key (`workload`, `shape_set`, `case`,
  `provider`, `dtype`), `commit`, `env`, `machine`, `started_at`;
- `status`: ok, failed (the step ran, but its trace could not be attributed:
  `reason`) or unavailable (the provider's step cannot be traced here:
  `reason`);
- `step_ms`: the step's median wall time over `attribution.TIMED_CALLS` calls, timed just before
  the traced ones, under the same flags; `roles_ms`: the kernels' device
  time a step per role (`flybench.model.mixtral.ROLES`, and "rest" for the
  kernels whose instruction names no role); `role_events`: kernels a step
  per role; `rest_top`: the largest unattributed kernels;
- `conditions`: what the split and an Amdahl check on it hold under
  (`flybench.model.lane.conditions`: precision, phase, batch, tokens,
  context, layers, the MoE layer and its FLOPs, the XLA_FLAGS of the
  traced process, and whether its kernels ran inside command buffers);
- `tracer`: jax's version, the platform and device kind that ran the step.

The timing pass never reads this file, and the role pass adds nothing to
asv's results. A torn last line is skipped with a warning.

    python -m flybench.model.roles --out SPLIT.json WORKLOAD SHAPE_SET CASE PROVIDER DTYPE

traces one case in a process of its own (what the pass runs) and writes its
split as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flybench.measure.record import SideRecords

FORMAT_VERSION = 1
SUFFIX = ".roles.jsonl"
WORKLOAD = "mixtral_step"
STEPS = 5
"""Calls traced: the split is their mean (the step's wall time is timed apart, `attribution.TIMED_CALLS`)."""
COMMAND_BUFFERS = False
"""Whether the traced step runs its kernels inside command buffers, as the timed step does, or one launch a kernel
(`flybench.model.attribution.compile_for_trace`); the split's conditions carry it as `command_buffers`."""
UNNAMED_AT_MOST = 0.05
"""The share of a step's kernel time that may be of unknown role before a split is refused."""
GROUPS = {"moe": ("moe",), "attention": ("attention",), "other": ("norm", "routing", "head")}
"""The split the dashboard shows: the MoE, attention, and the other roles together; "rest" stays apart."""


@dataclass
class RoleRecord:
    run_id: str
    workload: str
    shape_set: str
    case: str
    provider: str
    dtype: str
    status: str
    reason: str | None = None
    step_ms: float | None = None
    roles_ms: dict[str, float] = field(default_factory=dict)
    role_events: dict[str, float] = field(default_factory=dict)
    rest_top: list[list] = field(default_factory=list)
    steps: int = STEPS
    conditions: dict[str, Any] = field(default_factory=dict)
    tracer: dict[str, str] = field(default_factory=dict)
    contract: dict[str, Any] = field(default_factory=dict)
    commit: str = ""
    env: str = ""
    machine: str = ""
    started_at: str = ""
    version: int = FORMAT_VERSION


def possible_times(record: dict[str, Any]) -> None:
    """ValueError for an ok split whose times no step can have: a step of 0 ms or less, a role's time below 0 ms or
    not a finite number. A split with step_ms -5 was stored as ok and the Model lane page showed "MoE share
    -7.5%"."""
    if record.get("status") != "ok":
        return
    step = record.get("step_ms")
    if type(step) not in (int, float) or not 0 < step < math.inf:
        raise ValueError(f"step_ms {step!r} is no time a step can take (more than 0 ms)")
    odd = {role: ms for role, ms in (record.get("roles_ms") or {}).items()
           if type(ms) not in (int, float) or not 0 <= ms < math.inf}
    if odd:
        raise ValueError(f"roles_ms {odd} holds times no kernel can take (0 ms or more)")


FILE = SideRecords(SUFFIX, FORMAT_VERSION, ("roles_ms", "role_events", "conditions"), possible_times)
"""The file's format: where it lies, how a RoleRecord is appended, which lines are read back."""
path_for, append, read = FILE.path_for, FILE.append, FILE.read


def shares(roles_ms: dict[str, float], step_ms: float | None) -> dict[str, float]:
    """ms a step of the MoE, attention, the other roles, the unattributed kernels ("rest") and the time no kernel
    ran ("untraced": launch gaps and host time), each with its share of the step."""
    split = {group: sum(roles_ms.get(r, 0.0) for r in roles) for group, roles in GROUPS.items()}
    split["rest"] = roles_ms.get("rest", 0.0)
    if step_ms:
        split["untraced"] = max(step_ms - sum(roles_ms.values()), 0.0)
    out = {f"{name}_ms": ms for name, ms in split.items()}
    if step_ms:
        out.update({f"{name}_share": ms / step_ms for name, ms in split.items()})
    return out


def untraceable(provider: str) -> str | None:
    """Why a provider's step cannot be traced by role, else None."""
    from flybench.model.lane import MOE_OF_PROVIDER

    if provider not in MOE_OF_PROVIDER:
        return (f"provider {provider} has no MoE layer in the model lane's step "
                f"(traceable: {', '.join(sorted(MOE_OF_PROVIDER))}), so its step cannot be traced by role")
    return None


def traced_step(case_name: str, provider: str, dtype: str) -> tuple[Any, tuple, dict[str, Any]]:
    """One case's step built as the timing pass builds it (bf16 weights, the provider's MoE layer, the same
    inputs), lowered for tracing: the lowered step, its arguments and its conditions."""
    import jax

    from flybench import hardware
    from flybench.model import lane, mixtral
    from flybench.providers.xla import to_jax
    from flybench.workloads import get_workload

    workload = get_workload(WORKLOAD)
    case = workload.case(case_name)
    moe = lane.MOE_OF_PROVIDER[provider]
    config = lane.config_of(case)
    inputs = workload.make_inputs(case, dtype, hardware.detect().torch_device, seed=0)
    params = mixtral.for_moe(mixtral.init(config, "bfloat16", seed=lane.WEIGHTS_SEED), moe)
    prompt = to_jax(inputs["prompt"])
    if case.shape["phase"] == "prefill":
        tokens, position = prompt, 0
        cache = mixtral.empty_cache(config, case.shape["batch"], case.shape["tokens"], "bfloat16")
    else:  # decode: the prompt prefilled outside the trace; every traced call decodes the same position
        tokens, position = to_jax(inputs["next"]), case.shape["context"]
        cache = lane._prefilled(config, moe, params, prompt, case, "bfloat16")
    # No donated cache, unlike the timed decode: every traced call reads the same one.
    step = jax.jit(lambda p, t, c: mixtral.step(p, t, c, position, config=config, moe=moe))
    args = (params, tokens, cache)
    return step.lower(*args), args, lane.conditions(case, moe)


def attributed(lowered: Any, args: tuple, conditions: dict[str, Any], provider: str, trace_dir: Path,
               steps: int = STEPS, command_buffers: bool = COMMAND_BUFFERS) -> dict[str, Any]:
    """The traced step's kernels attributed by role: the fields of a RoleRecord."""
    import jax

    from flybench.model import attribution

    found = attribution.attribute(attribution.compile_for_trace(lowered, command_buffers), args, trace_dir,
                                  steps=steps)
    device = jax.devices()[0]
    out = {"step_ms": found.step_ms, "roles_ms": found.roles_ms, "role_events": found.role_events,
           "rest_top": [list(pair) for pair in found.rest_top], "steps": steps,
           "conditions": {**conditions, "command_buffers": command_buffers},
           "tracer": {"jax": jax.__version__, "platform": device.platform, "device": device.device_kind}}
    if found.unnamed_ms > UNNAMED_AT_MOST * found.kernels_ms:
        out.update(status="failed", reason=(
            f"{found.unnamed_ms:.3g} ms of the {found.kernels_ms:.3g} ms of kernels a step ran inside command buffers "
            "under names no instruction of the step has (cuBLAS's, Triton custom calls', shared fusion kernels): "
            "their roles are unknown, so the split would be wrong; trace with command buffers off"))
    elif not found.events_per_step:
        out.update(status="failed", reason=(
            f"the trace of {provider}'s step holds no kernel event naming its HLO instruction, so no role could "
            f"be found (XLA_FLAGS: {os.environ.get('XLA_FLAGS') or 'none'})"))
    elif found.role_events.get("moe", 0) == 0:
        out.update(status="failed", reason=(
            f"no kernel of {provider}'s step was attributed to the MoE: its MoE kernels carry no role scope in "
            "the trace, so the split and an Amdahl check on it would be wrong"))
    else:
        out["status"] = "ok"
    return out


def split_of(case_name: str, provider: str, dtype: str, trace_dir: Path, steps: int = STEPS,
             command_buffers: bool = COMMAND_BUFFERS) -> dict[str, Any]:
    """Build one case's step as the timing pass does, trace it and attribute its kernels by role: the fields of
    a RoleRecord."""
    if reason := untraceable(provider):
        return {"status": "unavailable", "reason": reason}
    lowered, args, conditions = traced_step(case_name, provider, dtype)
    return attributed(lowered, args, conditions, provider, trace_dir, steps, command_buffers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flybench.model.roles", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the split (one JSON object)")
    parser.add_argument("--steps", type=int, default=STEPS)
    for name in ("workload", "shape_set", "case", "provider", "dtype"):
        parser.add_argument(name)
    args = parser.parse_args(argv)
    if args.workload != WORKLOAD:
        found = {"status": "unavailable", "reason": f"only {WORKLOAD} cases are split by role, not {args.workload}"}
    else:
        with tempfile.TemporaryDirectory(prefix="flybench-roles-") as tmp:
            found = split_of(args.case, args.provider, args.dtype, Path(tmp), args.steps)
    args.out.write_text(json.dumps(found, allow_nan=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
