"""Where a model step's time goes: each kernel of a JAX profiler trace attributed to a role of the step, and the
Amdahl check of one variant against another.

Each kernel event of a trace names the HLO instruction it ran (`hlo_op`);
the compiled module's text gives that instruction's `op_name` metadata, the
scope path it was traced under, and `flybench.model.mixtral.ROLES` names the
scopes. A kernel whose instruction carries no role scope is "rest". On a GPU,
XLA runs a step's kernels inside command buffers (CUDA graphs) by default,
and runs them one by one instead while a profiler is active, unless told
otherwise: `compile_for_trace` says which. A kernel inside a command buffer
names the buffer as its `hlo_op`; its own name is its fusion's, sanitised
(`gemm_fusion_dot.85` runs as `gemm_fusion_dot_85`), and that is how it is
found. On a CPU the trace's thunks carry `hlo_op` the same way, which is what
the tests attribute.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flybench.model import mixtral


@dataclass(frozen=True)
class MethodChange:
    """A change of how a step's time is attributed: a split traced at a commit before it is of the older method."""

    commit: str
    date: str  # ISO 8601, the commit's date
    what: str


METHOD_CHANGES = (
    MethodChange("224786053f2d9f7dcff0fb1f0c61576ab8bdf8fb", "2026-12-02T16:10:23+00:00",
                 "an instruction XLA made without metadata takes the role of what it fuses or feeds (kernels with "
                 "no role: 38 to 2 a step on the CPU's tiny step)"),
    MethodChange("5d2675c81455a98867eae1f5673932a45ae73dc6", "2026-12-02T16:18:46+00:00",
                 "a step's wall time is the median of 20 calls, not the mean of 5 (the Triton decode step's host "
                 "dispatch moved the mean from 1.74 to 2.18 ms between two runs)"),
)
"""Every change of the attribution method, oldest first; add one with each change, so that the Model lane page
says which stored splits predate it."""

_COMMAND_BUFFER = "command_buffer"
"""How a kernel's `hlo_op` begins inside a command buffer (`command_buffer_1`: JAX 0.11.2 on an H200)."""
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->.*\{\s*$")
_CALLS = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*?\bcalls=%?([\w.\-]+)", re.M)
_DEFINES = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_OPERAND = re.compile(r"%([\w.\-]+)")
_USER_HOPS = 3
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*?metadata=\{[^}]*op_name=\"([^\"]+)\"", re.M)


@dataclass
class Attribution:
    """A step's median wall time and its kernels' device time per role, in ms."""

    step_ms: float
    roles_ms: dict[str, float]
    rest_top: list[tuple[str, float]] = field(default_factory=list)
    events_per_step: float = 0.0
    role_events: dict[str, float] = field(default_factory=dict)
    """Kernels per step, per role: what the attribution found by name alone, whatever the machine's load did to
    their times (a kernel descheduled for one time slice outlasts a small step's kernels together)."""
    unnamed_ms: float = 0.0
    """Of the "rest", the kernels inside a command buffer whose own name is no instruction's either (cuBLAS's,
    Triton custom calls', kernels XLA shares between fusions): their role is unknown, not absent."""

    @property
    def kernels_ms(self) -> float:
        return sum(self.roles_ms.values())

    @property
    def kernel_share(self) -> float:
        """How much of the step the kernels account for (the rest is launch gaps and host time)."""
        return self.kernels_ms / self.step_ms


TRACE_OPTIONS = {True: {"xla_enable_command_buffers_during_profiling": True},
                 False: {"xla_gpu_enable_command_buffer": ""}}
"""Compile options of a traced step, by whether its kernels run inside command buffers as the timed step's do."""


def compile_for_trace(lowered: Any, command_buffers: bool) -> Any:
    """The lowered step compiled to be traced with its kernels inside command buffers, as it runs untraced (XLA
    otherwise leaves them while a profiler is active), or without them, one launch a kernel."""
    return lowered.compile(TRACE_OPTIONS[command_buffers])


def scopes(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> its op_name (the traced scope path); each name also as a kernel names it.

    An instruction XLA made without metadata of its own (a layout copy, a convert, a transpose it inserted
    around the traced operations) takes the scope of the instructions it fuses, else of the instructions that
    read it (up to `_USER_HOPS` steps away), where those with a scope all lie in one role's."""
    found = {name: op for name, op in _INSTRUCTION.findall(hlo_text)}
    inner = _computation_scopes(hlo_text)
    for name, computation in _CALLS.findall(hlo_text):
        if name not in found and (op := _one_role(inner.get(computation, []))):
            found[name] = op
    users = _users(hlo_text)
    for _ in range(_USER_HOPS):
        more = {name: op for name, readers in users.items() if name not in found
                and (op := _one_role([found[r] for r in readers if r in found]))}
        if not more:
            break
        found.update(more)
    return {**{_kernel_name(name): op for name, op in found.items()}, **found}


def _one_role(op_names: list[str]) -> str | None:
    """One of `op_names` if those with a role all lie in one role's scope, else None."""
    by_role = {role_of(op): op for op in op_names}
    by_role.pop("rest", None)
    return next(iter(by_role.values())) if len(by_role) == 1 else None


def _users(hlo_text: str) -> dict[str, list[str]]:
    """Each instruction -> the instructions that read it (a layout copy XLA inserted belongs to its readers)."""
    users: dict[str, list[str]] = {}
    for line in hlo_text.splitlines():
        defined = _DEFINES.match(line)
        if defined:
            for operand in set(_OPERAND.findall(line[defined.end():].split(" metadata=")[0])):
                users.setdefault(operand, []).append(defined.group(1))
    return users


def _computation_scopes(hlo_text: str) -> dict[str, list[str]]:
    """Each computation of the module -> the op_names of its instructions."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            current = found.setdefault(header.group(1), [])
        elif line.strip() == "}":
            current = None
        elif current is not None:
            current += [op for _, op in _INSTRUCTION.findall(line)]
    return found


def _kernel_name(instruction: str) -> str:
    """The name XLA gives the kernel of an instruction: every character but letters, digits and _ as _."""
    return re.sub(r"\W", "_", instruction)


def scope_of(event: dict, names: dict[str, str]) -> str:
    """The scope path of a kernel event's instruction: by the `hlo_op` it names, else (inside a command buffer,
    whose name `hlo_op` holds) by its kernel's name; "" when neither is an instruction of the module."""
    kernel = event.get("name", "")
    return names.get(event["args"].get("hlo_op", "")) or names.get(kernel) or names.get(_kernel_name(kernel), "")


def role_of(op_name: str) -> str:
    """The step's role whose named scope `op_name` lies in, else "rest"."""
    return next((role for role, scope in mixtral.ROLES.items() if f"/{scope}/" in f"/{op_name}/"), "rest")


def kernel_events(trace_dir: Path) -> list[dict]:
    """The kernel events (complete events naming their HLO instruction) of the newest perfetto trace."""
    path = max(trace_dir.rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    events = json.loads(gzip.open(path, "rt").read())
    events = events["traceEvents"] if isinstance(events, dict) else events
    return [e for e in events if e.get("ph") == "X" and isinstance(e.get("args"), dict)
            and ("hlo_op" in e["args"] or "kernel_details" in e["args"])]


TIMED_CALLS = 20
"""Calls the step's wall time is the median of: a short step's host dispatch varies by tenths of a millisecond
from call to call (the Triton decode step: 1.74 ms in one run's mean of 5 calls, 2.18 ms in another's)."""


def attribute(compiled: Any, args: Sequence[Any], trace_dir: Path, steps: int = 5,
              clock: Callable[[], float] = time.perf_counter) -> Attribution:
    """Time the compiled step (median of `TIMED_CALLS` calls), then trace `steps` calls and attribute their
    kernels by role."""
    import jax

    names = scopes(compiled.as_text())
    jax.block_until_ready(compiled(*args))
    calls = []
    for _ in range(TIMED_CALLS):
        began = clock()
        jax.block_until_ready(compiled(*args))
        calls.append(clock() - began)
    step_ms = 1e3 * statistics.median(calls)
    with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
        for _ in range(steps):
            jax.block_until_ready(compiled(*args))
    return attribute_events(kernel_events(trace_dir), names, steps, step_ms)


def attribute_events(events: list[dict], names: dict[str, str], steps: int, step_ms: float) -> Attribution:
    """`steps` steps' kernel events attributed by role through the module's scopes (`scopes`)."""
    by_role: Counter[str] = Counter()
    counted: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    unnamed = 0.0
    for event in events:
        op, kernel = event["args"].get("hlo_op", ""), event.get("name", "")
        scope = scope_of(event, names)
        role = role_of(scope)
        by_role[role] += event["dur"] / 1e3 / steps
        counted[role] += 1 / steps
        if role == "rest":
            unknown[f"{kernel} ({op})" if op and op != kernel else kernel or "?"] += event["dur"] / 1e3 / steps
            if op.startswith(_COMMAND_BUFFER) and not scope:
                unnamed += event["dur"] / 1e3 / steps
    return Attribution(step_ms, dict(by_role), unknown.most_common(8), len(events) / steps, dict(counted), unnamed)


def amdahl(base: Attribution, head: Attribution, role: str = "moe") -> dict[str, float]:
    """The head's speed over the base, measured and as predicted by replacing only `role`'s kernel time.

    "2.9x in prefill, of which MoE explains 2.6x": `measured` is the first
    figure, `predicted` the second.
    """
    predicted_ms = base.step_ms - base.roles_ms.get(role, 0.0) + head.roles_ms.get(role, 0.0)
    return {"measured": base.step_ms / head.step_ms, "predicted": base.step_ms / predicted_ms,
            "predicted_step_ms": predicted_ms}
