"""Which (workload, shape set, provider, dtype) combinations a run covers, and why others are left out."""

from __future__ import annotations

from dataclasses import dataclass

from flybench import benchmark_names
from flybench.errors import unknown_name
from flybench.hardware import Device
from flybench.providers import get_provider, provider_names
from flybench.workloads import SHAPE_SETS, WORKLOADS, get_workload


@dataclass(frozen=True)
class Choice:
    workload: str
    provider: str
    dtype: str
    reason: str | None  # None: runs here


def choices(device: Device, workloads: list[str] | None = None, providers: list[str] | None = None,
            dtypes: list[str] | None = None) -> list[Choice]:
    """Every requested combination with the reason it cannot run here, if any."""
    names = workloads or list(WORKLOADS)
    for name in names:
        get_workload(name)
    for name in providers or []:
        get_provider(name)
    all_dtypes = sorted({d for w in WORKLOADS.values() for d in w.dtypes})
    for dtype in dtypes or []:
        if dtype not in all_dtypes:
            raise unknown_name("dtype", dtype, all_dtypes)
    found = []
    for name in names:
        workload = get_workload(name)
        for provider in provider_names(name):
            if providers and provider not in providers:
                continue
            for dtype in workload.dtypes:
                if not dtypes or dtype in dtypes:
                    reason = get_provider(provider).unavailable_reason(name, dtype, device)
                    found.append(Choice(name, provider, dtype, reason))
    return found


def check_shape_set(shape_set: str) -> None:
    if shape_set not in SHAPE_SETS:
        raise unknown_name("shape set", shape_set, SHAPE_SETS)


def with_cases(shape_set: str, workloads: list[str], cases: list[str] | None) -> list[str]:
    """The workloads that hold one of the named cases in the shape set (all of them when none is named).

    A named case that none of the workloads holds is an error that lists the known ones.
    """
    if not cases:
        return workloads
    names = {name: {c.name for c in get_workload(name).cases(shape_set)} for name in workloads}
    known = sorted(set().union(*names.values()))
    for case in cases:
        if case not in known:
            raise unknown_name(f"case of the {shape_set} set", case, known)
    return [name for name in workloads if names[name] & set(cases)]


def asv_regex(shape_set: str, runnable: list[Choice], cases: list[str] | None = None) -> list[str]:
    """asv `--bench` patterns selecting exactly the runnable combinations of one shape set (only `cases`, if
    given)."""
    return [benchmark_names.asv_pattern(c.workload, shape_set, c.provider, c.dtype, cases) for c in runnable]


def case_keys(shape_set: str, runnable: list[Choice], cases: list[str] | None = None) -> list[tuple[str, ...]]:
    """Every case the runnable combinations measure in the shape set (only `cases`, if given), as record keys
    (workload, shape set, case, provider, dtype): what `flybench run --gpus`/`--shard` deals."""
    return [(c.workload, shape_set, case.name, c.provider, c.dtype) for c in runnable
            for case in get_workload(c.workload).cases(shape_set) if not cases or case.name in cases]
