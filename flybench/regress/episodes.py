"""Steps read together: a kernel's regression moves several cases of its benchmark; the runner moves everything.

One series alone cannot tell a code change from the runner's per-job modes:
FlyDSL's gfx950 runner moves whole jobs by 2-5% whatever the commit. So the
worse steps a scan finds on one machine are read together, grouped by the
commit at which they start (environment, first bad commit):

- **environment**: at that commit, series of at least
  `environment_workloads` workloads stepped, or a control provider's series
  (`[regress] control_providers`, the baselines measured beside the subject)
  did. Such steps are kept as kind "environment": reported apart, never an
  alert, never a regression's exit status.
- **code**: at least `corroborate` series of the kernel (one benchmark and
  provider: its other cases and dtypes) stepped there, or every series it
  has, when it has fewer. They stay statistical steps, and open alerts.
- anything else, a lone series moving, is dropped: it is what a runner's mode
  looks like from one series.

Deterministic metrics' changes ("change") pass through untouched: they need
no witness.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from flybench.benchmark_names import workload_of
from flybench.regress.config import RegressConfig

if TYPE_CHECKING:  # history calls this module on what it found
    from flybench.regress.history import Regression

ENVIRONMENT = "environment"
UNCONFIRMED = "unconfirmed"
"""A step that rests on files alone on a series that flips between runner modes, with nothing that separates the
code from the runner (flybench.regress.scan, `confirmed`): listed apart, never an alert, never exit 1."""
KernelKey = tuple[str, str, str, str, str]
"""(subject, machine, environment, benchmark, provider)."""


def read_together(found: Sequence[Regression], series_per_kernel: dict[KernelKey, int],
                  cfg: RegressConfig) -> list[Regression]:
    """`found` with each statistical worse step judged beside the others at its commit (module docstring).

    `series_per_kernel`: how many series each `kernel_key` has, so a kernel measured on one case can still
    open an alert.
    """
    at: dict[tuple, list[Regression]] = defaultdict(list)
    for r in found:
        if _statistical(r):
            at[r.subject, r.machine, r.env_name, r.step.first_bad].append(r)
    kept = []
    for r in found:
        if not _statistical(r):
            kept.append(r)
            continue
        together = at[r.subject, r.machine, r.env_name, r.step.first_bad]
        if _environment(together, cfg):
            kept.append(replace(r, kind=ENVIRONMENT))
            continue
        needed = min(cfg.corroborate, series_per_kernel.get(kernel_key(r.subject, r.machine, r.env_name,
                                                                         r.benchmark, r.params), 1))
        if sum(1 for o in together if (o.benchmark, _provider(o.params)) == (r.benchmark, _provider(r.params))) \
                >= needed:
            kept.append(r)
    return kept


def kernel_key(subject: str, machine: str, env_name: str, benchmark: str, params: dict) -> KernelKey:
    """The series that witness each other: one benchmark and provider on one machine and environment."""
    return subject, machine, env_name, benchmark, _provider(params)


def _provider(params: dict) -> str:
    return str(params.get("provider", ""))


def _statistical(r: Regression) -> bool:
    return r.kind == "step" and r.step.worse and bool(r.env_name)


def _environment(together: Sequence[Regression], cfg: RegressConfig) -> bool:
    workloads = {workload_of(r.benchmark) for r in together}
    controls = any(cfg.is_control(_provider(r.params)) for r in together)
    return controls or len(workloads) >= cfg.environment_workloads
