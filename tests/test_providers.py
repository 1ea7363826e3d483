"""Every provider that runs on the CPU passes the gate on every tiny case; failures are recorded."""

import pytest

from flybench import hardware
from flybench.errors import FlybenchError
from flybench.measure.case import measure_case
from flybench.measure.contract import PRESETS
from flybench.providers import get_provider, provider_names
from flybench.providers.base import Provider
from flybench.workloads import WORKLOADS

CPU_CASES = [
    (workload.name, case.name, provider, dtype)
    for workload in WORKLOADS.values()
    for case in workload.cases("tiny")
    for provider in provider_names(workload.name)
    for dtype in workload.dtypes
    if get_provider(provider).unavailable_reason(workload.name, dtype, hardware.detect()) is None
]


@pytest.mark.parametrize("workload,case,provider,dtype", CPU_CASES)
def test_provider_matches_reference_and_is_timed(workload, case, provider, dtype):
    record = measure_case(workload, "tiny", case, provider, dtype, PRESETS["tiny"])
    assert record.status == "ok", record.reason
    assert record.errors["out"] <= record.tolerance
    if provider == "flex":
        assert "lse" in record.errors  # FlexAttention returns the log-sum-exp; it is checked too
    assert len(record.samples_s) >= PRESETS["tiny"].min_samples and record.median_s > 0
    assert record.contract["timer"] == "perf_counter" and record.contract["flush"] == "none"


def test_every_workload_has_a_provider_running_on_cpu():
    assert {w for w, *_ in CPU_CASES} == set(WORKLOADS)


def test_unavailable_provider_says_why():
    record = measure_case("moe", "tiny", WORKLOADS["moe"].cases("tiny")[0].name, "rocblas", "bf16", PRESETS["tiny"])
    assert record.status == "unavailable" and "ROCm GPU" in record.reason and not record.samples_s


class _Broken(Provider):
    name, workloads, description = "broken", frozenset({"gemm"}), "test double"

    def __init__(self, failure):
        self.failure = failure

    def unavailable_reason(self, workload, dtype, device):
        return None

    def build(self, case, dtype, inputs, device):
        def run():
            if self.failure == "raise":
                raise RuntimeError("HIP out of memory. Tried to allocate 2.00 GiB")
            out = inputs["a"] @ inputs["b"].T
            return {"out": out * 2 if self.failure == "wrong" else out}

        return run


@pytest.mark.parametrize("failure,expected", [("raise", "out of device memory"), ("wrong", "wrong result")])
def test_failing_provider_is_recorded_not_raised(monkeypatch, failure, expected):
    from flybench import providers

    monkeypatch.setitem(providers.PROVIDERS, "broken", _Broken(failure))
    record = measure_case("gemm", "tiny", "64x48x32", "broken", "bf16", PRESETS["tiny"])
    assert record.status == "failed" and expected in record.reason
    assert not record.samples_s  # a failing provider is never timed


@pytest.mark.parametrize("kind,name", [("workload", "nope"), ("provider", "nope")])
def test_unknown_names_list_valid_ones(kind, name):
    args = {"workload": ("nope", "tiny", "x", "torch", "bf16"), "provider": ("gemm", "tiny", "64x48x32", "nope", "bf16")}
    with pytest.raises(FlybenchError, match="valid"):
        measure_case(*args[kind], PRESETS["tiny"])


def test_a_record_says_which_package_and_version_ran():
    from importlib import metadata

    case = WORKLOADS["moe"].cases("tiny")[0].name
    record = measure_case("moe", "tiny", case, "torch", "bf16", PRESETS["tiny"])
    assert record.implementation == {"package": "torch", "version": metadata.version("torch")}
    assert '"implementation": {"package": "torch"' in record.to_json()


def test_a_failed_record_still_says_what_ran(monkeypatch):
    """A wrong result is a fact about one version of one implementation: the record keeps which."""
    import torch

    from flybench.providers import torch_eager

    real = torch_eager.TorchEager.build
    monkeypatch.setattr(torch_eager.TorchEager, "build", lambda self, *a: (
        lambda run: lambda: {"out": torch.zeros_like(run()["out"])})(real(self, *a)))
    record = measure_case("gemm", "tiny", WORKLOADS["gemm"].cases("tiny")[0].name, "torch", "bf16", PRESETS["tiny"])
    assert record.status == "failed" and record.implementation["package"] == "torch"


def test_unavailable_records_claim_no_implementation():
    record = measure_case("moe", "tiny", WORKLOADS["moe"].cases("tiny")[0].name, "rocblas", "bf16", PRESETS["tiny"])
    assert record.implementation == {}


@pytest.mark.parametrize("name", provider_names())
def test_every_provider_names_its_package(name):
    """Each provider's `module` is the top-level module of what it runs, so its distribution can be found."""
    provider = get_provider(name)
    assert provider.module in {"torch", "triton", "jaxlib", "jax_triton", "flydsl", "aiter"}, name
    if name == "torch":
        assert provider.implementation(WORKLOADS["moe"].cases("tiny")[0], "bf16")["package"] == "torch"


@pytest.mark.parametrize("provider", ["torch", "flex"])
def test_the_paged_baselines_lay_out_the_block_table_outside_the_timed_call(provider):
    """The mask and the table's index form depend only on the inputs: the timed call must not read the raw table."""
    workload = WORKLOADS["diffusion_attention"]
    case = workload.cases("tiny")[0]
    inputs = workload.make_inputs(case, "bf16", "cpu")
    runner = get_provider(provider).build(case, "bf16", inputs, hardware.detect())
    reference = workload.reference(case, inputs)
    inputs["block_table"] = inputs["context_lens"] = None  # what a timed call would rebuild its layouts from
    assert (runner()["out"].float() - reference["out"]).abs().max() < 0.05
