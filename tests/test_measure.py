"""The correctness gate, the timer's CPU path, contracts and case records."""

import json
import math

import pytest
import torch

from flybench.hardware import Device
from flybench.measure import correctness
from flybench.measure.contract import PRESETS, Contract, for_device
from flybench.measure.record import FORMAT_VERSION, CaseRecord, append, beside, latest, read
from flybench.measure.roofline import rates
from flybench.measure.timing import _sample_count, time_runner

CPU = Device("cpu", "cpu", "test cpu", "cpu", "", "cpu")


def test_gate_passes_close_result_and_reports_error():
    ref = torch.randn(64, 64)
    out = (ref + 1e-3 * torch.randn(64, 64)).to(torch.bfloat16)
    verdict = correctness.check({"out": out}, {"out": ref}, "bf16")
    assert verdict.passed and verdict.reason is None
    assert 1e-4 < verdict.errors["out"] < 1e-2


@pytest.mark.parametrize("damage", ["nan", "inf", "wrong"])
def test_gate_rejects_nan_inf_and_wrong_values(damage):
    ref = torch.randn(32, 32)
    out = ref.clone()
    out[3, 4] = {"nan": math.nan, "inf": math.inf, "wrong": 0.0}[damage]
    if damage == "wrong":
        out = out + 0.5
    verdict = correctness.check({"out": out}, {"out": ref}, "fp32")
    assert not verdict.passed
    assert ("non-finite" in verdict.reason) == (damage != "wrong")


def test_gate_checks_lse_and_shape_and_missing_out():
    ref = {"out": torch.ones(4, 4), "lse": torch.ones(2, 4)}
    assert not correctness.check({"out": torch.ones(4, 4), "lse": torch.zeros(2, 4)}, ref, "bf16").passed
    assert "shape" in correctness.check({"out": torch.ones(4, 5)}, ref, "bf16").reason
    assert "no 'out'" in correctness.check({"lse": torch.ones(2, 4)}, ref, "bf16").reason


def test_poison_leaves_inputs_alone_and_fills_outputs():
    x = torch.randn(8)
    out = torch.randn(8)
    correctness.poison({"out": out, "alias": x}, keep={"x": x})
    assert torch.isnan(out).all() and torch.isfinite(x).all()


def test_host_timer_returns_positive_samples_within_budget():
    contract = Contract(warmup_s=0.01, target_s=0.02, min_samples=5, max_samples=40)
    calls = []
    samples = time_runner(lambda: calls.append(1) or {"out": torch.ones(1)}, CPU, contract)
    assert 5 <= len(samples) <= 40 and all(s > 0 for s in samples)
    assert len(calls) > len(samples)  # warm-up calls happened first


def test_sample_count_is_clamped():
    contract = Contract(target_s=1.0, min_samples=10, max_samples=100)
    assert _sample_count(1.0, contract) == 10
    assert _sample_count(1e-6, contract) == 100
    assert _sample_count(0.02, contract) == 50


def test_cpu_contract_says_no_flush_and_host_timer():
    contract = for_device(PRESETS["quick"], CPU)
    assert (contract.flush, contract.timer, contract.graph) == ("none", "perf_counter", False)
    assert contract.static_key() != PRESETS["quick"].static_key()


def test_record_round_trip_run_isolation_and_torn_lines(tmp_path):
    path = tmp_path / "m" / "abc-env.cases.jsonl"
    first = CaseRecord("run1", "gemm", "tiny", "c", "torch", "bf16", "ok", samples_s=[1.0, 3.0, 2.0], flops=2e12)
    append(path, first)
    append(path, CaseRecord("run2", "gemm", "tiny", "c", "torch", "bf16", "failed", reason="boom"))
    path.open("a").write('{"torn": \n')
    path.open("a").write(first.to_json().replace('"version": 2', '"version": 3') + "\n")
    found, warnings = read(path)
    assert [r["run_id"] for r in found] == ["run1", "run2"]
    assert len(warnings) == 2 and "line 3" in warnings[0] and "format version 3" in warnings[1]
    assert latest(found, "run1")[first.key]["median_s"] == 2.0
    assert latest(found, "run1")[first.key]["version"] == FORMAT_VERSION
    assert latest(found, "run2")[first.key]["reason"] == "boom"
    assert latest(found)[first.key]["run_id"] == "run2" and latest(found, "run3") == {}
    assert beside(tmp_path / "m" / "abc-env.json") == path


def test_a_record_without_version_is_the_five_metric_format(tmp_path):
    path = tmp_path / "old.cases.jsonl"
    path.write_text(json.dumps({"run_id": "r", "workload": "gemm", "shape_set": "tiny", "case": "c",
                                "provider": "torch", "dtype": "bf16", "status": "ok", "tflops": 1.5}) + "\n")
    [record], warnings = read(path)
    assert warnings == [] and record.get("version", 1) == 1 and record["tflops"] == 1.5


def test_rates_follow_from_counts_and_time():
    assert rates(2e9, 4e6, 1e-3, 2e-3) == (1.0, 2.0, 0.5)
    assert rates(None, 4e6, None, 2e-3) == (None, 2.0, None)
    assert rates(2e12, 4e9, 1e-3, None) == (None, None, None)
    assert rates(2e12, 4e9, 1e-3, float("nan")) == (None, None, None)
