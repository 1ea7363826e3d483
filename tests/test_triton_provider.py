"""The `triton` provider's availability, its configuration tables, split planning and the tuning script.

Nothing here needs a GPU or imports triton: the kernels themselves are checked
in test_triton_kernels.py (interpreter) and test_triton_compile.py (cross-compiles).
"""

from __future__ import annotations

import ast
import importlib.util

import pytest

from flybench.errors import FlybenchError
from flybench.hardware import Device
from flybench.kernels.triton import cases, config_table, configs, tune
from flybench.measure.case import measure_case
from flybench.measure.contract import PRESETS
from flybench.providers import get_provider
from flybench.workloads import get_workload

GPU = {"sm_90": Device("cuda", "sm_90", "NVIDIA H200", "h200", "cuda 12.8", "cuda"),
       "sm_80": Device("cuda", "sm_80", "NVIDIA A100", "a100", "cuda 12.8", "cuda"),
       "gfx942": Device("rocm", "gfx942", "AMD Instinct MI300X", "gfx942", "hip 6.4", "cuda")}


def test_provider_is_registered_for_both_seed_workloads():
    assert get_provider("triton").workloads == {"diffusion_attention", "moe"}


def test_unavailable_on_cpu_with_an_actionable_reason():
    record = measure_case("moe", "tiny", "tiny-h64-i32-e4k2-t20", "triton", "bf16", PRESETS["tiny"])
    assert record.status == "unavailable" and not record.samples_s
    assert "NVIDIA or AMD GPU" in record.reason and "TRITON_INTERPRET=1" in record.reason


def test_unavailable_without_triton(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    reason = get_provider("triton").unavailable_reason("moe", "bf16", GPU["sm_90"])
    assert "triton is not installed" in reason and "pip install" in reason


def test_interpreter_mode_is_never_timed(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert "unset it" in get_provider("triton").unavailable_reason("diffusion_attention", "bf16", GPU["sm_90"])


@pytest.mark.parametrize("arch,available", [("sm_90", True), ("gfx942", True), ("sm_80", False)])
def test_fp8_needs_fp8_matrix_units(monkeypatch, arch, available):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    reason = get_provider("triton").unavailable_reason("moe", "fp8", GPU[arch])
    assert (reason is None) == available
    assert get_provider("triton").unavailable_reason("moe", "bf16", GPU[arch]) is None


@pytest.mark.parametrize("arch", list(config_table.TABLE))
def test_every_table_is_complete_and_ordered(arch):
    table = config_table.TABLE[arch]
    assert table["provenance"] and table["compute_units"] > 0
    amd = arch.startswith("gfx")
    for workload, dtypes in (("diffusion_attention", ("bf16",)), ("moe", ("bf16", "fp8"))):
        for dtype in dtypes:
            entries = configs.entries(arch, workload, dtype)
            bounds = [next(e[k] for k in configs.BUCKET_KEYS if k in e) for e in entries]
            assert bounds[-1] is None and bounds[:-1] == sorted(bounds[:-1])  # ordered, last one unbounded
            for entry in entries:
                config = configs.Config.from_entry(entry)
                assert all(v & (v - 1) == 0 for k, v in config.constexprs.items() if k.startswith("BLOCK_"))
                amd_only = {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} & set(config.options)
                assert not amd_only or amd  # CUDA rejects AMD-only launch options


def test_lookups_pick_buckets_and_fall_back_per_vendor():
    assert configs.moe_config("sm_90", "bf16", 1).constexprs["BLOCK_M"] == 16
    assert configs.moe_config("sm_90", "bf16", 16384).constexprs["BLOCK_M"] == 128
    assert configs.attention_config("gfx950", 7 * 32).constexprs["BLOCK_M"] == 128
    assert configs.table_arch("sm_100") == "sm_90" and configs.table_arch("gfx90a") == "gfx942"
    with pytest.raises(FlybenchError, match="no Triton kernel configuration"):
        configs.table_arch("cpu")


@pytest.mark.parametrize("max_context,programs,expected", [
    (32768, 1 * 4, 64),  # Dream b1 ctx32k: few programs, long prefix -> many splits (capped)
    (4096, 8 * 8, 5),  # Llama-3 b8: about two programs per compute unit
    (4096, 64 * 32, 1),  # LLaDA b64: the grid is full without splitting
    (100, 4, 1),  # a prefix shorter than one split
])
def test_split_plan(max_context, programs, expected):
    from flybench.kernels.triton.diffusion_attention import plan_splits

    assert plan_splits(max_context, programs, 132, 64, 256) == expected


@pytest.mark.parametrize("workload", cases.WORKLOADS)
def test_meta_inputs_mirror_the_workload_inputs(workload):
    w = get_workload(workload)
    for case in w.cases("tiny"):
        for dtype in w.dtypes:
            real = w.make_inputs(case, dtype, "cpu")
            meta = cases.meta_inputs(case, dtype, "sm_90")  # a CPU draws OCP fp8, like sm_90
            assert {k: (tuple(v.shape), v.dtype) for k, v in meta.items()} == \
                   {k: (tuple(v.shape), v.dtype) for k, v in real.items()}


def test_fp8_flavour_per_architecture():
    import torch

    assert cases.fp8_dtype("gfx942") == torch.float8_e4m3fnuz
    assert cases.fp8_dtype("gfx950") == cases.fp8_dtype("sm_90") == torch.float8_e4m3fn


def test_tuning_candidates_start_with_the_current_entry():
    entry = configs.entries("gfx942", "moe", "fp8")[0]
    found = tune.candidates("gfx942", "moe", entry)
    assert found[0] == entry and len(found) == len({str(sorted(c.items())) for c in found})
    assert all(c["max_tokens"] == 16 and c["BLOCK_M"] in (16, 32) for c in found)
    assert all("waves_per_eu" not in c for c in tune.candidates("sm_90", "moe", configs.entries(
        "sm_90", "moe", "bf16")[0]))


def test_tuning_dry_run_lists_work_and_refuses_to_tune_on_cpu(capsys):
    assert tune.main(["--dry-run", "--arch", "sm_90", "--set", "quick"]) == 0
    listed = capsys.readouterr().out
    assert "moe fp8 bucket 0" in listed and "diffusion_attention bf16 bucket 1" in listed
    assert tune.main(["--set", "quick"]) == 2
    assert "needs a GPU" in capsys.readouterr().err


def test_table_rewrite_round_trips(tmp_path):
    path = tmp_path / "config_table.py"
    tune.write_table(config_table.TABLE, path)
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree) == config_table.__doc__.strip("\n")
    assert ast.literal_eval(tree.body[-1].value) == config_table.TABLE


def test_correctness_check_refuses_cpu_without_the_interpreter(monkeypatch, capsys):
    from flybench.kernels.triton import check

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert check.main(["--set", "tiny"]) == 2
    assert "TRITON_INTERPRET=1" in capsys.readouterr().err


class _NoInputs:
    dtypes = ("bf16", "fp8")

    def make_inputs(self, case, dtype, device, seed=0):
        return {}

    def reference(self, case, inputs):
        return {}


def test_tuning_picks_the_fastest_working_candidate(monkeypatch):
    """The bucket logic on fake timings: failures dropped, the winner must beat the current entry by the margin."""
    monkeypatch.setattr(tune, "get_workload", lambda name: _NoInputs())
    device = Device("cuda", "sm_90", "NVIDIA H200", "h200", "", "cpu")
    bucket = get_workload("moe").cases("full")[:2]

    def fake(speed):
        def measure(case, dtype, entry, device_, inputs, reference):
            if entry["BLOCK_K"] == 64 and entry["num_stages"] == 2:
                raise RuntimeError("out of resources: shared memory")
            return speed(entry) * (2.0 if case is bucket[1] else 1.0)
        return measure

    monkeypatch.setattr(tune, "_measure", fake(lambda e: 0.5 if (e["BLOCK_N"], e["GROUP_M"]) == (128, 8) else 1.0))
    record = tune.tune_bucket(device, "moe", "fp8", 0, bucket, None, 0.02)
    assert record["winner"]["BLOCK_N"] == 128 and record["winner"]["GROUP_M"] == 8
    assert all(row["failed"].startswith(bucket[0].name) for row in record["candidates"]
               if row["config"]["BLOCK_K"] == 64 and row["config"]["num_stages"] == 2)
    monkeypatch.setattr(tune, "_measure", fake(lambda e: 1.0))
    record = tune.tune_bucket(device, "moe", "fp8", 0, bucket, None, 0.02)
    assert record["winner"] == configs.entries("sm_90", "moe", "fp8")[0]  # a tie keeps the current entry


def test_routing_check_accepts_any_order_of_equal_logits_and_nothing_else():
    import types

    import torch

    from flybench.kernels.triton.check import routing_mismatches
    from flybench.workloads.moe import sort_by_expert

    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [4.0, 2.0, 1.0, 0.0]])
    inputs = {"router_logits": logits, "w13": torch.empty(4, 1, 1)}

    def plan(ids: list[list[int]]) -> types.SimpleNamespace:
        ids_t = torch.tensor(ids, dtype=torch.int32)
        sorted_ids, experts, total = sort_by_expert(ids_t, 4, 2)
        weights = torch.softmax(torch.gather(logits, 1, ids_t.long()), dim=-1)
        return types.SimpleNamespace(routing=types.SimpleNamespace(
            ids=ids_t, sorted_ids=sorted_ids, block_expert=experts, total=total, weights=weights))

    assert routing_mismatches(plan([[1, 2], [0, 1]]), inputs, 2) == 0  # torch.topk's own order
    assert routing_mismatches(plan([[2, 1], [0, 1]]), inputs, 2) == 0  # the tie the other way round
    assert routing_mismatches(plan([[2, 0], [0, 1]]), inputs, 2) >= 1  # expert 0 is not among the top two
    assert routing_mismatches(plan([[1, 2], [1, 0]]), inputs, 2) >= 1  # not highest first
    wrong_sort = plan([[1, 2], [0, 1]])
    wrong_sort.routing.sorted_ids = wrong_sort.routing.sorted_ids.flip(0)
    assert routing_mismatches(wrong_sort, inputs, 2) >= 1


def test_tuning_provenance_names_each_tuned_bucket_once_across_runs(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(__version__="3.6.0"))
    device = GPU["sm_90"]
    first = tune._provenance(device, "quick", [{"workload": "moe", "dtype": "bf16", "bucket": 2}],
                                    "hand-picked seed")
    second = tune._provenance(device, "full", [{"workload": "moe", "dtype": "bf16", "bucket": 2},
                                                      {"workload": "diffusion_attention", "dtype": "bf16",
                                                       "bucket": 0}], first)
    segments = second.split("; ")
    assert [s.split(": ")[0] for s in segments] == ["moe bf16 bucket 2", "diffusion_attention bucket 0",
                                                     "hand-picked seed"]
    assert "--set full" in segments[0] and "--set quick" not in second
