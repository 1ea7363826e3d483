"""asv-facing glue: one parameterized benchmark class per (workload, shape set).

Each case is measured once per run, in `setup`, and the result appended to
the run's sidecar file; the class's five tracked values (device time with its
samples, TFLOP/s, GB/s, roofline fraction, correctness error) each run in a
fresh asv process and read that one measurement back instead of measuring
again. Quick and full shape sets are separate classes, so a quick run can
never overwrite a full result of the same commit.
"""

from __future__ import annotations

import os
from pathlib import Path

from flybench.measure.record import CaseRecord

RUN_ID_ENV = "FLYBENCH_RUN_ID"
TIMEOUT_S = {"tiny": 300.0, "quick": 900.0, "full": 1800.0}
"""asv kills a case's process after this long; a hang then costs one timeout, not five."""


def make_suite(workload_name: str, shape_set: str) -> type:
    """A benchmark class over case x provider x dtype for asv to discover."""
    from flybench.providers import provider_names
    from flybench.workloads import get_workload

    workload = get_workload(workload_name)
    params = [[c.name for c in workload.cases(shape_set)], provider_names(workload_name), list(workload.dtypes)]
    return type(shape_set.capitalize(), (CaseSuite,), {
        "workload": workload_name, "shape_set": shape_set, "params": params, "timeout": TIMEOUT_S[shape_set],
        "__doc__": f"{workload.description} ({shape_set} shape set)",
    })


class CaseSuite:
    """The tracked values of one measured case; subclasses set workload, shape_set, params."""

    workload = ""
    shape_set = ""
    param_names = ["case", "provider", "dtype"]

    def setup(self, case: str, provider: str, dtype: str) -> None:
        self.record = measured(self.workload, self.shape_set, case, provider, dtype)
        if self.record.status == "unavailable":
            raise NotImplementedError(self.record.reason)

    def track_time(self, *_):
        return {"samples": self._ok().samples_s, "number": 1}

    track_time.type, track_time.unit = "time", "seconds"

    def track_tflops(self, *_):
        return self._ok().tflops

    track_tflops.unit = "TFLOP/s"

    def track_gbps(self, *_):
        return self._ok().gbps

    track_gbps.unit = "GB/s"

    def track_roofline(self, *_):
        return self._ok().roofline_fraction

    track_roofline.unit = "fraction of roofline"

    def track_error(self, *_):
        """Reported even for a failed gate: how wrong a wrong result was is worth tracking."""
        if "out" not in self.record.errors:
            raise RuntimeError(f"no correctness error measured: {self.record.reason}")
        return self.record.errors["out"]

    track_error.unit = "relative error"

    def _ok(self) -> CaseRecord:
        if self.record.status != "ok":
            raise RuntimeError(f"{self.record.provider} {self.record.case} {self.record.dtype}: {self.record.reason}")
        return self.record


DIED = "the measuring process died before it finished (crash, hang past the asv timeout, or killed)"


def measured(workload: str, shape_set: str, case: str, provider: str, dtype: str) -> CaseRecord:
    """This run's record of the case, measuring it (and appending it to the sidecar) if absent.

    A placeholder saying the process died is written before measuring; if the
    process crashes or hangs, the case's other tracked values find that
    placeholder and report the failure instead of crashing again.
    """
    from flybench.measure import record as records

    sidecar = _sidecar()
    run_id = os.environ.get(RUN_ID_ENV) or f"asv-{os.getppid()}"
    key = (workload, shape_set, case, provider, dtype)
    if sidecar is not None:
        found = records.find(sidecar, run_id, key)
        if found is not None:
            return found
        records.append(sidecar, _stamped(CaseRecord(run_id, *key, status="failed", reason=DIED), sidecar))
    from flybench.measure.case import measure_case  # imports torch: only the process that measures pays it
    from flybench.measure.contract import PRESETS

    record = measure_case(workload, shape_set, case, provider, dtype, PRESETS[shape_set], run_id=run_id)
    if sidecar is not None:
        records.append(sidecar, _stamped(record, sidecar))
    return record


def _stamped(record: CaseRecord, sidecar: Path) -> CaseRecord:
    record.commit = os.environ.get("ASV_COMMIT") or os.environ["FLYBENCH_COMMIT"]
    record.env = os.environ.get("ASV_ENV_NAME") or os.environ["FLYBENCH_ENV_NAME"]
    record.machine = sidecar.parent.name
    return record


def _sidecar() -> Path | None:
    """Where this run's records go, or None outside a run that says so.

    asv gives benchmark processes in an existing environment no ASV_COMMIT
    or ASV_ENV_NAME, so `flybench run` passes them as FLYBENCH_COMMIT and
    FLYBENCH_ENV_NAME; a plain `asv run` without them measures every tracked
    value separately (correct, just slower).
    """
    from flybench.hardware import machine_name
    from flybench.measure.record import sidecar_path

    commit = os.environ.get("ASV_COMMIT") or os.environ.get("FLYBENCH_COMMIT")
    env = os.environ.get("ASV_ENV_NAME") or os.environ.get("FLYBENCH_ENV_NAME")
    if not commit or not env:
        return None
    results = Path(os.environ.get("FLYBENCH_RESULTS_DIR") or Path(os.environ["ASV_CONF_DIR"]) / "results" / "flybench")
    machine = os.environ.get("FLYBENCH_MACHINE") or machine_name()
    return sidecar_path(results, machine, commit, env)
