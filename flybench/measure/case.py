"""Measure one case: availability, inputs, correctness gate, then timing.

Every outcome becomes a CaseRecord: "unavailable" with the provider's reason,
"failed" with the error (wrong result, exception, out of device memory), or
"ok" with samples. Nothing here raises for a provider's failure, so one bad
case never stops a suite.
"""

from __future__ import annotations

import datetime
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

from flybench import hardware
from flybench.measure import correctness, loaded, roofline, timing
from flybench.measure.contract import Contract, describe, for_device
from flybench.measure.record import CaseRecord
from flybench.providers import get_provider
from flybench.workloads import get_workload


def measure_case(workload_name: str, shape_set: str, case_name: str, provider_name: str, dtype: str,
                 contract: Contract, run_id: str = "", seed: int = 0) -> CaseRecord:
    """Run the whole measurement of one case and say how it went (`measure_s`: how long that took here)."""
    start = time.perf_counter()
    names = _resolve(workload_name, case_name, provider_name, dtype)
    before = set(sys.modules)  # with the registries loaded, as in asv's process for a case
    device = hardware.detect()
    record = _new_record(run_id, workload_name, shape_set, case_name, provider_name, dtype, device)
    try:
        gated = _gate(record, *names, dtype, device, seed)
        if gated is not None:
            _time(record, gated, device, for_device(contract, device))
    except Exception as exc:  # noqa: BLE001 - any provider failure is recorded, never fatal
        record.status, record.reason = "failed", _failure_reason(exc)
    finally:
        _release_device_memory(device)
        record.measure_s = time.perf_counter() - start
    if record.status != "unavailable":
        record.loaded = _loaded(before, *names)
    return record


def _loaded(before: set[str], workload, case, provider) -> list[str]:
    """The project's files this case loaded (`flybench.measure.loaded`): its provider's and workload's modules, not
    the other providers and workloads the suite imported to list them."""
    from flybench.providers import PROVIDERS
    from flybench.workloads import WORKLOADS

    own = {type(provider).__module__, type(workload).__module__}
    others = {type(member).__module__ for member in (*PROVIDERS.values(), *WORKLOADS.values())} - own
    return loaded.files(before, own, others)


def checked_call(workload_name: str, shape_set: str, case_name: str, provider_name: str, dtype: str,
                 seed: int = 0) -> tuple[Callable[[], Any] | None, CaseRecord]:
    """The case's call once it passed the correctness gate, else None with the record saying why.

    For passes that run a case without timing it (hardware counters): they
    see exactly the call the timing pass timed, gated the same way.
    """
    names = _resolve(workload_name, case_name, provider_name, dtype)
    device = hardware.detect()
    record = _new_record("", workload_name, shape_set, case_name, provider_name, dtype, device)
    try:
        gated = _gate(record, *names, dtype, device, seed)
    except Exception as exc:  # noqa: BLE001 - as in measure_case
        record.status, record.reason = "failed", _failure_reason(exc)
        return None, record
    return (gated.runner if gated else None), record


def _new_record(run_id, workload_name, shape_set, case_name, provider_name, dtype, device) -> CaseRecord:
    return CaseRecord(run_id, workload_name, shape_set, case_name, provider_name, dtype, status="ok",
                      device=device.as_dict(),
                      started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))


class _Gated(NamedTuple):
    workload: Any
    case: Any
    runner: Callable[[], Any]
    inputs: Any
    reference: Any


def _resolve(workload_name: str, case_name: str, provider_name: str, dtype: str) -> tuple[Any, Any, Any]:
    """Workload, case and provider of these names; an unknown name raises, listing the valid ones."""
    workload = get_workload(workload_name)
    case = workload.case(case_name)
    workload.check_dtype(dtype)
    return workload, case, get_provider(provider_name)


def _gate(record, workload, case, provider, dtype, device, seed):
    """A case whose provider runs here and whose result is right, else None with the record's status and reason
    set."""
    workload_name, provider_name = workload.name, provider.name
    if workload_name not in provider.workloads:
        record.status, record.reason = "unavailable", f"provider {provider_name} does not implement {workload_name}"
        return None
    reason = provider.unavailable_reason(workload_name, dtype, device)
    if reason:
        record.status, record.reason = "unavailable", reason
        return None
    inputs = workload.make_inputs(case, dtype, device.torch_device, seed=seed)
    reference = workload.reference(case, inputs)
    provider = workload.built_by(provider)  # the model lane's step around the provider's layer, for a model case
    runner = provider.build(case, dtype, inputs, device)
    record.implementation = provider.implementation(case, dtype)
    if not _passes(record, runner, inputs, reference, dtype, "wrong result",
                   tolerance=workload.tolerances.get(dtype)):
        return None
    return _Gated(workload, case, runner, inputs, reference)


def _time(record, gated: _Gated, device, contract) -> None:
    workload, case, runner, inputs, reference = gated
    dtype = record.dtype
    timed = timing.prepare(runner, device, contract)
    if timed.outputs is not None and not _passes(record, timed.call, inputs, reference, dtype,
                                                 "wrong result under device-graph replay", timed.outputs,
                                                 workload.tolerances.get(dtype)):
        return
    del reference, gated
    record.samples_s = timing.time_call(timed, device)
    record.contract = describe(timed.contract, device, len(record.samples_s))
    record.contract["roofline_basis"] = roofline.ceilings(device)[1]
    if timed.note:
        record.contract["note"] = timed.note
    if "conditions" in record.implementation:  # a model row's (flybench.model.lane): the store keeps the contract
        record.contract["conditions"] = record.implementation["conditions"]
    record.flops, record.bytes = workload.flops(case) or None, workload.min_bytes(case, dtype)
    record.floor_s = roofline.floor_s(record.flops or 0.0, record.bytes, dtype, device)
    record.tflops, record.gbps, record.roofline_fraction = roofline.rates(
        record.flops, record.bytes, record.floor_s, record.median_s)


def _passes(record: CaseRecord, call, inputs, reference, dtype: str, failure: str, outputs=None,
            tolerance: float | None = None) -> bool:
    """Run `call` over poisoned outputs and check them against the reference; a failure is recorded.

    `outputs` are the tensors the call rewrites (a graph's); without them the
    call's first result is poisoned and its second checked, so the first call
    also compiles whatever compiles lazily.
    """
    if outputs is None:
        correctness.poison(call(), keep=inputs)
        outputs = call()
    else:
        correctness.poison(outputs, keep=inputs)
        call()
    verdict = correctness.check(outputs, reference, dtype, tolerance)
    record.errors, record.tolerance = verdict.errors, verdict.tolerance
    if not verdict.passed:
        record.status, record.reason = "failed", f"{failure}: {verdict.reason}"
    return verdict.passed


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
