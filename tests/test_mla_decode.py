"""The MLA decode workload: FlyDSL's cases, its FLOP count, and a float32 reference that follows the page indices."""

from __future__ import annotations

import pytest
import torch

from flybench.workloads import get_workload

MLA = get_workload("mla_decode")


def naive(case, inputs) -> torch.Tensor:
    """Per sequence and head, softmax(q k^T * scale) v with torch.softmax, pages gathered one by one."""
    p = case.shape
    c = p["context"]
    out = torch.empty(p["batch"], p["heads"], p["kv_lora"])
    for b in range(p["batch"]):
        pages = [int(i) for i in inputs["kv_indices"][b * c:(b + 1) * c]]
        tokens = torch.stack([inputs["kv_cache"][i].float() for i in pages])
        for h in range(p["heads"]):
            weights = torch.softmax(tokens @ inputs["q"][b, h].float() * p["scale"], dim=0)
            out[b, h] = weights @ tokens[:, :p["kv_lora"]]
    return out


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("name", ["B1C63", "B3C17"])
def test_the_reference_follows_the_shuffled_pages(name: str, dtype: str) -> None:
    case = MLA.case(name)
    inputs = MLA.make_inputs(case, dtype, "cpu")
    assert sorted(inputs["kv_indices"].tolist()) == list(range(case.shape["batch"] * case.shape["context"]))
    assert inputs["kv_indices"].tolist() != sorted(inputs["kv_indices"].tolist())
    expected = naive(case, inputs)
    reference = MLA.reference(case, inputs)
    torch.testing.assert_close(reference["out"], expected, rtol=1e-4, atol=1e-5)
    unshuffled = dict(inputs, kv_indices=torch.arange(len(inputs["kv_indices"]), dtype=torch.int32))
    if case.shape["batch"] > 1:  # a reference that ignored the indices would mix the sequences' tokens
        assert not torch.allclose(MLA.reference(case, unshuffled)["out"], expected, atol=1e-3)
    scores = torch.einsum("bhd,bcd->bhc", inputs["q"].float(),
                          inputs["kv_cache"][inputs["kv_indices"].long()].float().view(
                              case.shape["batch"], case.shape["context"], -1)) * case.shape["scale"]
    torch.testing.assert_close(reference["lse"], scores.logsumexp(-1), rtol=1e-5, atol=1e-5)


def test_fp8_inputs_are_e4m3_and_the_queries_and_cache_are_576_wide() -> None:
    inputs = MLA.make_inputs(MLA.case("B1C63"), "fp8", "cpu")
    assert inputs["q"].dtype == torch.float8_e4m3fn and inputs["kv_cache"].dtype == torch.float8_e4m3fn
    assert tuple(inputs["q"].shape) == (1, 128, 576) and tuple(inputs["kv_cache"].shape) == (63, 576)


def test_cases_and_counts_are_flydsl_ci_s() -> None:
    assert [c.name for c in MLA.cases("full")] == ["B1C63", "B1C64", "B1C128", "B4C2048", "B33C2333", "B32C8192"]
    assert [c.name for c in MLA.cases("quick")] == ["B1C128", "B4C2048", "B32C8192"]
    case = MLA.case("B32C8192")
    total_kv = 32 * 8192
    assert MLA.flops(case) == total_kv * 128 * (576 + 512) * 2  # tests/kernels/test_mla_decode.py's flops
    flydsl_bw = total_kv * 576 * 1 + 32 * 128 * 576 * 1 + 32 * 128 * 512 * 2  # its bw, fp8
    assert MLA.min_bytes(case, "fp8") == flydsl_bw + 4 * total_kv


def test_both_torch_paths_pass_the_gate_and_the_context_picks_one():
    from flybench.measure import correctness
    from flybench.providers import get_provider
    from flybench.providers import torch_ops

    for case in MLA.cases("tiny"):
        inputs = MLA.make_inputs(case, "bf16", "cpu")
        reference = MLA.reference(case, inputs)
        for build in (torch_ops.mla_decode_sdpa, torch_ops.mla_decode_bmm):
            assert correctness.check(build(case, inputs)(), reference, "bf16").passed, (case.name, build.__name__)
    short, long = (MLA.case(n) for n in ("B1C128", "B32C8192"))
    assert torch_ops.mla_decode_path(short) == "sdpa" and torch_ops.mla_decode_path(long) == "bmm"
    assert get_provider("torch").implementation(long, "bf16")["kernels"] == ["torch.bmm, softmax, torch.bmm"]
