"""Measure one case: availability, inputs, correctness gate, then timing.

Every outcome becomes a CaseRecord: "unavailable" with the provider's reason,
"failed" with the error (wrong result, exception, out of device memory), or
"ok" with samples. Nothing here raises for a provider's failure, so one bad
case never stops a suite.
"""

from __future__ import annotations

import datetime
import traceback
from dataclasses import replace

from flybench import hardware
from flybench.measure import correctness, roofline
from flybench.measure.contract import Contract, describe, for_device
from flybench.measure.record import CaseRecord
from flybench.measure.timing import HOST_TIMED, time_runner
from flybench.providers import get_provider
from flybench.workloads import get_workload


def measure_case(workload_name: str, shape_set: str, case_name: str, provider_name: str, dtype: str,
                 contract: Contract, run_id: str = "", seed: int = 0) -> CaseRecord:
    """Run the whole measurement of one case and say how it went."""
    workload = get_workload(workload_name)
    case = workload.case(case_name)
    workload.check_dtype(dtype)
    provider = get_provider(provider_name)
    device = hardware.detect()
    contract = for_device(contract, device)
    record = CaseRecord(run_id, workload_name, shape_set, case_name, provider_name, dtype, status="ok",
                        device=device.as_dict(),
                        started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    if workload_name not in provider.workloads:
        record.status, record.reason = "unavailable", f"provider {provider_name} does not implement {workload_name}"
        return record
    reason = provider.unavailable_reason(workload_name, dtype, device)
    if reason:
        record.status, record.reason = "unavailable", reason
        return record
    try:
        _gate_and_time(record, workload, case, provider, dtype, device, contract, seed)
    except Exception as exc:  # noqa: BLE001 - any provider failure is recorded, never fatal
        record.status, record.reason = "failed", _failure_reason(exc)
    finally:
        _release_device_memory(device)
    return record


def _gate_and_time(record, workload, case, provider, dtype, device, contract, seed) -> None:
    inputs = workload.make_inputs(case, dtype, device.torch_device, seed=seed)
    reference = workload.reference(case, inputs)
    runner = provider.build(case, dtype, inputs, device)
    correctness.poison(runner(), keep=inputs)  # first call compiles; its outputs must be rewritten
    verdict = correctness.check(runner(), reference, dtype)
    record.errors, record.tolerance = verdict.errors, verdict.tolerance
    if not verdict.passed:
        record.status, record.reason = "failed", f"wrong result: {verdict.reason}"
        return
    del reference
    if getattr(runner, HOST_TIMED, False) and device.kind != "cpu":
        contract = replace(contract, timer="host-clock-after-sync")
    record.samples_s = time_runner(runner, device, contract)
    record.contract = describe(contract, device, len(record.samples_s))
    record.contract["roofline_basis"] = roofline.ceilings(device)[1]
    median = record.median_s
    flops, nbytes = workload.flops(case), workload.min_bytes(case, dtype)
    record.tflops = flops / median / 1e12 if flops else None
    record.gbps = nbytes / median / 1e9
    record.roofline_fraction = roofline.fraction(flops, nbytes, median, dtype, device)


def _failure_reason(exc: BaseException) -> str:
    """One line for the record; the last frame says where it happened."""
    text = f"{type(exc).__name__}: {exc}".strip()
    if "out of memory" in text.lower():
        text = f"out of device memory: {text}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return (text.splitlines()[0] if text else type(exc).__name__)[:500] + where


def _release_device_memory(device: hardware.Device) -> None:
    if device.kind != "cpu":
        import torch

        torch.cuda.empty_cache()
