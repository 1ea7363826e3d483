"""asv-facing glue: one parameterized benchmark class per (workload, shape set), one benchmark per case.

Each case (case x provider x dtype) is one asv benchmark, `track_time`,
measured once in `setup`: its device samples go to asv, and everything asv
has no field for (correctness, failure reason, contract, FLOP and byte
counts, the rates derived from them) to the case record beside asv's
results file (flybench.measure.record). A case is measured once under
`flybench run` and under a plain `asv run` alike. Quick and full shape sets
are separate classes, so a quick run can never overwrite a full result of
the same commit.

Importing this module imports torch and flybench's measuring code, so that
asv's forkserver, which imports the suites once and forks a process per
case, hands every case a process with them loaded (no GPU is touched before
the fork).
"""

from __future__ import annotations

import torch  # noqa: F401 - loaded once in asv's forkserver, not once per case

from flybench import benchmark_names
from flybench.measure.case import measure_case
from flybench.measure.contract import PRESETS
from flybench.measure.process import DIED, recorded
from flybench.measure.record import CaseRecord

__all__ = ["DIED", "TIMEOUT_S", "CaseSuite", "make_suite", "measured"]

TIMEOUT_S = {"tiny": 300.0, "quick": 900.0, "full": 1800.0}
"""asv kills a case's process after this long."""


def make_suite(workload_name: str, shape_set: str) -> type:
    """A benchmark class over case x provider x dtype for asv to discover."""
    from flybench.providers import provider_names
    from flybench.workloads import get_workload

    workload = get_workload(workload_name)
    params = [[c.name for c in workload.cases(shape_set)], provider_names(workload_name), list(workload.dtypes)]
    return type(benchmark_names.suite_class(shape_set), (CaseSuite,), {
        "workload": workload_name, "shape_set": shape_set, "params": params, "timeout": TIMEOUT_S[shape_set],
        "__doc__": f"{workload.description} ({shape_set} shape set)",
    })


class CaseSuite:
    """One measured case per parameter combination; subclasses set workload, shape_set, params."""

    workload = ""
    shape_set = ""
    param_names = list(benchmark_names.PARAM_NAMES)

    def setup(self, case: str, provider: str, dtype: str) -> None:
        self.record = measured(self.workload, self.shape_set, case, provider, dtype)
        if self.record.status == "unavailable":
            raise NotImplementedError(self.record.reason)

    def track_time(self, *_):
        """Device seconds per call, one sample each; a case that failed its gate has no time."""
        if self.record.status != "ok":
            raise RuntimeError(f"{self.record.provider} {self.record.case} {self.record.dtype}: {self.record.reason}")
        return {"samples": self.record.samples_s, "number": 1}

    track_time.type, track_time.unit = "time", "seconds"


def measured(workload: str, shape_set: str, case: str, provider: str, dtype: str) -> CaseRecord:
    """Measure the case, with its record appended beside the run's results when the run is known."""
    return recorded((workload, shape_set, case, provider, dtype), TIMEOUT_S[shape_set],
                    lambda run_id: measure_case(workload, shape_set, case, provider, dtype, PRESETS[shape_set],
                                                run_id=run_id))
