"""The model lane's Mixtral-shaped decoder on a tiny model, on the CPU: the MoE formulations compute the same
step, bf16 stays near the float32 step, and decoding through the KV cache gives what a full prefill gives. The
Triton MoE layer runs its kernels in Triton's interpreter (a subprocess), the rest in XLA on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import torch  # noqa: E402

from flybench.measure.case import measure_case  # noqa: E402
from flybench.measure.contract import PRESETS  # noqa: E402
from flybench.model import attribution, lane, mixtral  # noqa: E402
from flybench.workloads import Case, get_workload  # noqa: E402

CONFIG = mixtral.TINY
XLA_MOE = ("ragged_dot", "dense")
"""The MoE layers XLA runs on a CPU; `triton` launches GPU kernels (its test runs them interpreted)."""


def run(moe: str, dtype: str, tokens, cache_len: int = 16):
    params = mixtral.for_moe(mixtral.init(CONFIG, dtype), moe)
    cache = mixtral.empty_cache(CONFIG, tokens.shape[0], cache_len, dtype)
    return mixtral.compiled(CONFIG, moe)(params, tokens, cache, 0)


TOKENS = jax.random.randint(jax.random.PRNGKey(1), (2, 6), 0, CONFIG.vocab)


@pytest.mark.parametrize("moe", XLA_MOE)
def test_a_bf16_step_stays_near_the_float32_step(moe: str) -> None:
    exact, _ = run(moe, "float32", TOKENS)
    fast, _ = run(moe, "bfloat16", TOKENS)
    error = float(jnp.max(jnp.abs(fast - exact)) / jnp.max(jnp.abs(exact)))
    assert fast.shape == (2, CONFIG.vocab) and 0 < error < 0.05


def test_the_moe_formulations_compute_the_same_step() -> None:
    ragged, _ = run("ragged_dot", "float32", TOKENS)
    dense, _ = run("dense", "float32", TOKENS)
    assert float(jnp.max(jnp.abs(ragged - dense))) < 1e-4 * float(jnp.max(jnp.abs(dense)))


@pytest.mark.parametrize("moe", XLA_MOE)
def test_decoding_through_the_cache_gives_what_a_full_prefill_gives(moe: str) -> None:
    params = mixtral.for_moe(mixtral.init(CONFIG, "float32"), moe)
    step = mixtral.compiled(CONFIG, moe)
    full, _ = step(params, TOKENS, mixtral.empty_cache(CONFIG, 2, 16, "float32"), 0)
    logits, cache = step(params, TOKENS[:, :4], mixtral.empty_cache(CONFIG, 2, 16, "float32"), 0)
    for position in (4, 5):
        logits, cache = step(params, TOKENS[:, position:position + 1], cache, position)
    assert float(jnp.max(jnp.abs(logits - full))) < 1e-4 * float(jnp.max(jnp.abs(full)))


def test_the_weights_of_mixtral_at_four_layers_fit_one_gpu() -> None:
    size = mixtral.with_layers(mixtral.MIXTRAL, 4).weights_bytes_bf16
    assert 11e9 < size < 13e9  # 4 of Mixtral's 32 layers: 2.9 GB a layer, plus embeddings


def test_the_triton_moe_layer_computes_the_step_inside_the_model() -> None:
    pytest.importorskip("triton")
    script = Path(__file__).parent / "helpers" / "interpreted_jax_triton.py"
    done = subprocess.run([sys.executable, str(script), "model"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shape"] == [2, CONFIG.vocab] and result["moe_calls"] == CONFIG.layers
    assert 0 < result["error"] < 0.05  # bf16 Triton MoE against the float32 step with the dense MoE



# The model lane as cases: measured through the same path as every kernel case.

STEP = get_workload("mixtral_step")


@pytest.mark.parametrize("provider, moe", [("xla", "ragged_dot"), ("xla-dense", "dense")])
@pytest.mark.parametrize("case_name", [c.name for c in STEP.cases("tiny")])
def test_a_model_case_is_gated_timed_and_carries_its_conditions(monkeypatch, provider: str, moe: str,
                                                                 case_name: str) -> None:
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_command_buffer=")
    record = measure_case("mixtral_step", "tiny", case_name, provider, "bf16", PRESETS["tiny"])
    assert record.status == "ok", record.reason
    assert 0 < record.errors["out"] < record.tolerance == STEP.tolerances["bf16"]
    assert record.median_s > 0 and record.flops == STEP.flops(STEP.case(case_name))
    conditions = record.implementation["conditions"]
    case = STEP.case(case_name)
    assert conditions["moe"] == moe and conditions["precision"] == "bf16"
    assert conditions["batch"] == case.shape["batch"] and conditions["xla_flags"] == "--xla_gpu_enable_command_buffer="
    routed = lane.moe_flops(lane.config_of(case), case.shape["batch"] * case.shape["tokens"], "ragged_dot")
    assert conditions["moe_flops"] == routed * (CONFIG.experts // CONFIG.top_k if moe == "dense" else 1)


def test_the_decode_reference_is_the_prefill_of_the_prompt_and_the_new_token() -> None:
    decode = STEP.case("tiny-l2-decode-b2-ctx6")
    inputs = STEP.make_inputs(decode, "bf16", "cpu", seed=3)
    whole = torch.cat([inputs["prompt"], inputs["next"]], dim=1)
    prefill = Case("mixtral_step", "t7", {**decode.shape, "phase": "prefill", "tokens": 7, "context": 0})
    by_decode = lane.reference(decode, inputs)["out"]
    by_prefill = lane.reference(prefill, {"prompt": whole})["out"]
    assert torch.allclose(by_decode, by_prefill, rtol=1e-4, atol=1e-4 * float(by_prefill.abs().max()))


def test_the_minimum_bytes_read_only_the_experts_a_step_routes_to() -> None:
    decode, prefill = STEP.case("mixtral-l4-decode-b1-ctx512"), STEP.case("mixtral-l4-prefill-b1-t2048")
    c = lane.config_of(decode)
    expert_bytes = 2 * 3 * c.hidden * c.intermediate * c.layers
    assert STEP.min_bytes(prefill, "bf16") - STEP.min_bytes(decode, "bf16") > (c.experts - c.top_k) * expert_bytes
    assert c.top_k * expert_bytes < STEP.min_bytes(decode, "bf16") < c.top_k * expert_bytes * 1.3


@pytest.fixture(scope="module")
def lane_store(tmp_path_factory):
    """The tiny model cases of xla and xla-dense run through `flybench run` (asv) on the CPU, then ingested."""
    from flybench.store.ingest import ingest
    from tests.test_asv_run import _config

    tmp_path = tmp_path_factory.mktemp("lane")
    config = _config(tmp_path)
    done = subprocess.run([sys.executable, "-m", "flybench", "run", "--set", "tiny", "--config", str(config),
                           "--machine", "ci-cpu", "-w", "mixtral_step", "-p", "xla", "-p", "xla-dense", "-d", "bf16"],
                          capture_output=True, text=True, cwd=Path(__file__).parents[1],
                          env={**os.environ, "FLYBENCH_DEVICE": "cpu", "XLA_FLAGS": ""}, timeout=900)
    db = tmp_path / "store.duckdb"
    if done.returncode == 0:
        ingest(tmp_path / "results", db, subject="flybench")
    return tmp_path, done, db


def test_model_rows_go_through_asv_and_the_store_like_every_case(lane_store) -> None:
    from asv.results import Results

    from flybench.measure import record as records

    tmp_path, done, db = lane_store
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 cases measured" in done.stdout
    machine_dir = tmp_path / "results" / "ci-cpu"
    [results_file] = [p for p in machine_dir.glob("*.json") if p.name != "machine.json"]
    results = Results.load(str(results_file))
    name = "mixtral_step.Tiny.track_time"
    values = [v for v in results.get_result_value(name, results.get_result_params(name)) if v == v]
    assert len(values) == 4 and all(v > 0 for v in values)
    found = [r for r in records.read(records.beside(results_file))[0] if r["status"] == "ok"]
    assert {(r["provider"], r["contract"]["conditions"]["moe"]) for r in found} == {
        ("xla", "ragged_dot"), ("xla-dense", "dense")}
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT count(*) FROM results WHERE benchmark LIKE 'mixtral_step.%' AND value > 0"
                           ).fetchone()[0]
    assert rows == 4


def test_the_model_page_sets_each_layer_beside_ragged_dot_with_its_conditions(lane_store, monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    _, done, db = lane_store
    assert done.returncode == 0
    monkeypatch.setenv("FLYBENCH_DB", str(db))
    # the timeout bounds a hang, it is not a time the page must beat
    at = AppTest.from_file(str(Path(__file__).parents[1] / "dashboard" / "app.py"), default_timeout=600)
    at.switch_page("views/model.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    table = at.dataframe[0].value
    assert set(zip(table["case"], table["provider"])) == {(c.name, p) for c in STEP.cases("tiny")
                                                          for p in ("xla", "xla-dense")}
    stock = table[table["provider"] == "xla"]
    assert (stock["speedup"] == 1.0).all()
    dense = table[table["provider"] == "xla-dense"].set_index("case")
    ragged = stock.set_index("case")
    assert (abs(dense["speedup"] - ragged["ms"] / dense["ms"]) < 1e-9).all()
    prefill = dense.loc["tiny-l2-prefill-b2-t6"]
    assert prefill["tokens_per_s"] == pytest.approx(2 * 6 / (prefill["ms"] / 1e3))
    assert prefill["conditions"].startswith("bf16; batch 2 x 6 tokens, context 0; 2 layers; MoE dense performs ")
    assert prefill["conditions"].endswith("XLA_FLAGS: none")
    assert any("flybench run -w mixtral_step --roles" in i.value for i in at.info)  # no split stored: how to fill it


def test_a_trace_of_the_step_attributes_its_kernels_to_every_role(tmp_path) -> None:
    params = mixtral.for_moe(mixtral.init(CONFIG, "float32"), "ragged_dot")
    cache = mixtral.empty_cache(CONFIG, 2, 6, "float32")
    step = jax.jit(lambda p, t, c: mixtral.step(p, t, c, 0, config=CONFIG, moe="ragged_dot"))
    call = (params, TOKENS, cache)
    found = attribution.attribute(step.lower(*call).compile(), call, tmp_path / "trace", steps=3)
    assert set(found.roles_ms) <= set(mixtral.ROLES) | {"rest"} and set(found.role_events) == set(found.roles_ms)
    assert all(found.roles_ms.get(role, 0) > 0 for role in mixtral.ROLES)  # every scope's kernels found
    # What is left unattributed is counted in kernels, not in their time: a kernel's role comes from its name,
    # its duration from the machine. This step's kernels take about 0.3 ms together, so on a loaded machine
    # (load 16 on 2 cores) one "rest" copy descheduled for a time slice (milliseconds) outweighed them all.
    assert found.role_events.get("rest", 0) < 0.5 * sum(found.role_events.values())
    assert sum(found.role_events.values()) == pytest.approx(found.events_per_step) and found.events_per_step > 0
    assert 0 < found.kernel_share


@pytest.mark.parametrize("command_buffers", [True, False])
def test_a_step_compiled_for_either_trace_mode_attributes_every_role(tmp_path, command_buffers) -> None:
    """Both compile options are XLA's own (an unknown one is refused), and neither loses a role's kernels."""
    params = mixtral.for_moe(mixtral.init(CONFIG, "float32"), "ragged_dot")
    step = jax.jit(lambda p, t, c: mixtral.step(p, t, c, 0, config=CONFIG, moe="ragged_dot"))
    call = (params, TOKENS, mixtral.empty_cache(CONFIG, 2, 6, "float32"))
    found = attribution.attribute(attribution.compile_for_trace(step.lower(*call), command_buffers), call,
                                  tmp_path / "trace", steps=2)
    assert all(found.role_events.get(role, 0) > 0 for role in mixtral.ROLES)


def test_a_kernel_inside_a_command_buffer_is_found_by_its_own_name() -> None:
    """Inside a command buffer a kernel's hlo_op names the buffer; the kernel is named after its fusion, with
    the fusion's '.' and '-' as '_'."""
    hlo = ('%gemm_fusion_dot.85 = bf16[8,4096]{1,0} fusion(%p0, %p1), kind=kCustom, '
           'metadata={op_name="jit(step)/layer_0/role_moe/dot_general"}\n'
           '%dynamic-update-slice_fusion.2 = bf16[8]{0} fusion(%p2), kind=kLoop, '
           'metadata={op_name="jit(step)/layer_0/role_attention/dynamic_update_slice"}\n')
    names = attribution.scopes(hlo)
    in_buffer = {"args": {"hlo_op": "command_buffer.3"}}
    assert attribution.role_of(attribution.scope_of({**in_buffer, "name": "gemm_fusion_dot_85"}, names)) == "moe"
    assert attribution.role_of(attribution.scope_of(
        {**in_buffer, "name": "dynamic_update_slice_fusion_2"}, names)) == "attention"
    assert attribution.role_of(attribution.scope_of({"args": {"hlo_op": "gemm_fusion_dot.85"}, "name": "x"},
                                                    names)) == "moe"
    assert attribution.scope_of({**in_buffer, "name": "nvjet_hsh_128x256"}, names) == ""
    events = [{**in_buffer, "name": "gemm_fusion_dot_85", "dur": 300.0},
              {**in_buffer, "name": "nvjet_hsh_128x256", "dur": 100.0},
              {"args": {"hlo_op": "dynamic-update-slice_fusion.2"}, "name": "x", "dur": 100.0}]
    found = attribution.attribute_events(events, names, steps=1, step_ms=0.6)
    assert found.roles_ms == {"moe": 0.3, "rest": 0.1, "attention": 0.1}
    assert found.unnamed_ms == pytest.approx(0.1)  # the cuBLAS kernel's role is unknown, not absent


def test_an_instruction_xla_made_takes_the_role_of_what_it_fuses_or_of_its_readers() -> None:
    """Layout copies and converts XLA inserts carry no metadata: a fusion takes the one role of the instructions
    it fuses, any other instruction the one role of its readers; where its readers lie in two roles it keeps
    none."""
    hlo = """
%fused_computation.3 (param_0.1: bf16[8,4]) -> bf16[8,4] {
  %param_0.1 = bf16[8,4]{1,0} parameter(0)
  ROOT %multiply.2 = bf16[8,4]{1,0} multiply(%param_0.1, %param_0.1), metadata={op_name="jit(step)/role_norms/mul"}
}

ENTRY %main.9 (p0: bf16[4,8], p1: bf16[8,4]) -> bf16[8,8] {
  %p0 = bf16[4,8]{1,0} parameter(0)
  %p1 = bf16[8,4]{1,0} parameter(1)
  %loop_transpose_fusion.5 = bf16[8,4]{1,0} transpose(%p0), dimensions={1,0}
  %norm_fusion.1 = bf16[8,4]{1,0} fusion(%p1), kind=kLoop, calls=%fused_computation.3
  %dot.7 = bf16[8,8]{1,0} dot(%loop_transpose_fusion.5, %norm_fusion.1), metadata={op_name="jit(step)/role_moe/dot"}
  %add.8 = bf16[8,4]{1,0} add(%p1, %p1), metadata={op_name="jit(step)/role_attention/add"}
}
"""
    names = attribution.scopes(hlo)
    assert attribution.role_of(names["norm_fusion.1"]) == "norm"  # from what it fuses, not from its reader
    assert attribution.role_of(names["loop_transpose_fusion.5"]) == "moe"  # from its one reader
    assert attribution.role_of(names["loop_transpose_fusion_5"]) == "moe"  # as its kernel is named
    assert attribution.role_of(names["p0"]) == "moe"  # two hops: p0 -> the transpose -> the dot
    assert "p1" not in names  # read by the norms' fusion and by attention: no one role


def test_a_role_is_its_whole_scope_name() -> None:
    assert attribution.role_of("jit(<lambda>)/role_moe/dot_general") == "moe"
    assert attribution.role_of("jit(<lambda>)/role_moe_extra/add") == "rest"
    assert attribution.role_of("") == "rest"


def test_the_amdahl_check_gives_the_figures_of_the_model_lane_doc() -> None:
    data = Path(__file__).parents[1] / "docs" / "data" / "h200-model-attribution"
    base, head = (json.loads((data / name).read_text()) for name in (
        "attribution-ragged_dot-prefill-2048-rerun.json", "attribution-triton-prefill-2048.json"))
    check = attribution.amdahl(*(attribution.Attribution(r["step_ms"], r["roles_ms"]) for r in (base, head)))
    assert round(check["predicted_step_ms"], 2) == 174.06  # 64.43 - 55.54 + 165.17 ms
    assert (round(check["predicted"], 3), round(check["measured"], 3)) == (0.37, 0.375)
