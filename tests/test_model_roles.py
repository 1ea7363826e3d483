"""The model lane's role split through `flybench run --roles`, the store and the Model lane page, on the CPU: the
tiny cases of xla (ragged_dot) and xla-dense are measured, traced once more by role, ingested, and the page shows
each step's split and the Amdahl check of dense against ragged_dot with its conditions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("jax")

from dashboard import frames  # noqa: E402
from flybench.model import mixtral, roles  # noqa: E402
from flybench.workloads import get_workload  # noqa: E402

ROOT = Path(__file__).parents[1]
STEP = get_workload("mixtral_step")


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The tiny model cases of xla and xla-dense through `flybench run --roles` on the CPU, then ingested."""
    from flybench.store.ingest import ingest
    from tests.test_asv_run import _config

    tmp_path = tmp_path_factory.mktemp("roles")
    config = _config(tmp_path)
    done = subprocess.run([sys.executable, "-m", "flybench", "run", "--set", "tiny", "--config", str(config),
                           "--machine", "ci-cpu", "-w", "mixtral_step", "-p", "xla", "-p", "xla-dense", "-d", "bf16",
                           "--roles"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "FLYBENCH_DEVICE": "cpu", "XLA_FLAGS": ""}, timeout=900)
    db = tmp_path / "store.duckdb"
    report = ingest(tmp_path / "results", db, subject="flybench") if done.returncode == 0 else None
    return tmp_path, done, db, report


def test_the_run_writes_each_measured_steps_split_beside_its_results(traced) -> None:
    tmp_path, done, _, _ = traced
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "roles: 4 cases traced under jax.profiler" in done.stdout
    [path] = (tmp_path / "results" / "ci-cpu").glob(f"*{roles.SUFFIX}")
    found, warnings = roles.read(path)
    assert not warnings
    assert {(r["case"], r["provider"]) for r in found} == {(c.name, p) for c in STEP.cases("tiny")
                                                           for p in ("xla", "xla-dense")}
    for r in found:
        assert r["status"] == "ok", r["reason"]
        assert r["step_ms"] > 0 and all(r["roles_ms"].get(role, 0) > 0 for role in mixtral.ROLES)
        assert "rest" in r["roles_ms"]  # the unattributed kernels, kept apart
        assert r["role_events"]["rest"] < 0.5 * sum(r["role_events"].values())
        case = STEP.case(r["case"])
        assert r["conditions"]["moe"] == {"xla": "ragged_dot", "xla-dense": "dense"}[r["provider"]]
        assert {k: r["conditions"][k] for k in ("precision", "batch", "tokens", "context", "layers", "xla_flags",
                                                "command_buffers")} \
            == {"precision": "bf16", **{k: case.shape[k] for k in ("batch", "tokens", "context", "layers")},
                "xla_flags": "", "command_buffers": roles.COMMAND_BUFFERS}
        assert r["tracer"]["platform"] == "cpu" and r["contract"]["timing_samples"] == 0
        split = roles.shares(r["roles_ms"], r["step_ms"])
        assert sum(split[f"{p}_ms"] for p in frames.SPLIT) == pytest.approx(max(r["step_ms"], sum(
            r["roles_ms"].values())))


def test_ingest_stores_the_splits_apart_from_the_benchmark_series(traced) -> None:
    import duckdb

    from flybench.regress import stored
    from flybench.store.ingest import ingest

    tmp_path, done, db, report = traced
    assert done.returncode == 0 and report.role_rows == 4 and not report.errors
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM role_splits WHERE status = 'ok' AND step_ms > 0").fetchone()[0] == 4
        keys = con.execute("SELECT DISTINCT benchmark, params::VARCHAR FROM role_splits").fetchall()
        series = con.execute("SELECT DISTINCT benchmark, params::VARCHAR FROM results").fetchall()
        assert set(keys) <= set(series)  # keyed like results
        assert con.execute("SELECT count(*) FROM results WHERE benchmark LIKE 'mixtral_step.%' AND value > 0"
                           ).fetchone()[0] == 4
    again = ingest(tmp_path / "results", db, subject="flybench")
    assert again.role_rows == 0  # an unchanged file is left alone
    stored.refresh(db)
    with duckdb.connect(str(db), read_only=True) as con:
        scanned = con.execute("SELECT count(*) FROM series_noise").fetchone()[0]
        assert scanned == len(series)  # the scan's series are the results', the splits add none


def test_the_model_page_shows_the_split_and_the_amdahl_check_with_conditions(traced, monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    _, done, db, _ = traced
    assert done.returncode == 0
    monkeypatch.setenv("FLYBENCH_DB", str(db))
    # the timeout bounds a hang, it is not a time the page must beat
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=600)
    at.switch_page("views/model.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert [h.value for h in at.subheader] == ["Tokens/s by MoE layer", "Where a step's time goes", "Amdahl check"]
    steps, by_layer, split, check = (d.value for d in at.dataframe)
    prefill = "tiny-l2-prefill-b2-t6"
    layer = by_layer.set_index("case").loc[prefill]
    ragged = steps[(steps["case"] == prefill) & (steps["provider"] == "xla")].iloc[0]
    assert layer["ragged_dot"] == pytest.approx(ragged["tokens_per_s"]) and "xla at " in layer["provenance"]
    assert len(split) == 4 and (split["status"] == "ok").all()
    assert (split["moe_ms"] > 0).all() and (split["attention_ms"] > 0).all() and (split["other_ms"] > 0).all()
    assert ((split["moe_share"] > 0) & (split["moe_share"] < 1)).all()
    assert split["provenance"].str.contains(r"commit \w{8}.*jax .* on cpu .*5 steps traced").all()
    assert set(check["case"]) == {c.name for c in STEP.cases("tiny")}
    row = check.set_index("case").loc[prefill]
    assert row["variant"] == "dense over ragged_dot"
    assert row["measured"] == pytest.approx(row["base_ms"] / row["head_ms"])
    assert row["predicted"] == pytest.approx(row["base_ms"] / row["predicted_ms"])
    assert row["conditions"].startswith("bf16; batch 2 x 6 tokens, context 0; 2 layers; MoE dense performs ")
    assert row["conditions"].endswith(f"XLA_FLAGS: none; traced with command buffers "
                                      f"{'on' if roles.COMMAND_BUFFERS else 'off'}")


def _split(provider: str, moe: str, step_ms: float, moe_ms: float, flags: str = "", status: str = "ok",
           reason: str | None = None) -> dict:
    conditions = {"precision": "bf16", "phase": "prefill", "batch": 1, "tokens": 2048, "context": 0, "layers": 4,
                  "moe": moe, "moe_flops": 5.8e12, "xla_flags": flags}
    return {"machine": "m", "benchmark": "mixtral_step.Quick", "case": "mixtral-l4-prefill-b1-t2048",
            "provider": provider, "commit_hash": "abcdef0123", "commit_date": pd.Timestamp("2026-12-02"),
            "status": status, "reason": reason, "step_ms": step_ms if status == "ok" else None,
            "roles_ms": json.dumps({"moe": moe_ms, "attention": 2.3, "norm": 0.15, "rest": 4.35}),
            "conditions": json.dumps(conditions), "tracer": json.dumps({"jax": "0.11.2", "platform": "gpu",
                                                                        "device": "NVIDIA H200"}),
            "steps": 5, "source_file": "m/abcdef01-env.roles.jsonl"}


def test_the_check_gives_the_figures_of_the_model_lane_doc_and_refuses_unlike_conditions() -> None:
    flags = "--xla_gpu_enable_command_buffer="
    rows = frames.role_rows(pd.DataFrame([_split("xla", "ragged_dot", 64.43, 55.54, flags),
                                          _split("jax-triton", "triton", 171.88, 165.17, flags)]))
    [check] = frames.amdahl_rows(rows).to_dict("records")
    assert round(check["predicted_ms"], 2) == 174.06 and round(check["predicted"], 3) == 0.37
    assert round(check["measured"], 3) == 0.375 and "XLA_FLAGS: --xla_gpu_enable_command_buffer=" in check["conditions"]
    unlike = frames.role_rows(pd.DataFrame([_split("xla", "ragged_dot", 64.43, 55.54, flags),
                                            _split("xla-dense", "dense", 39.52, 30.81, "")]))
    [check] = frames.amdahl_rows(unlike).to_dict("records")
    assert check["check"].startswith("not comparable: xla_flags") and pd.isna(check.get("measured", float("nan")))


def test_a_step_that_cannot_be_traced_says_why() -> None:
    assert "flydsl-jax has no MoE layer in the model lane's step" in roles.untraceable("flydsl-jax")
    assert roles.untraceable("jax-triton") is None
    rows = frames.role_rows(pd.DataFrame([_split("xla", "ragged_dot", 0, 0, status="failed",
                                                 reason="the trace holds no kernel event")]))
    assert rows.loc[0, "reason"] == "the trace holds no kernel event" and frames.amdahl_rows(rows).empty


def test_splits_traced_in_different_command_buffer_modes_are_not_compared() -> None:
    """A step traced with its kernels in command buffers and one traced a launch a kernel differ in their gaps:
    the check refuses the pair and says why, and the mode is printed with the conditions."""
    with_buffers, without = (_split(p, m, ms, moe) for p, m, ms, moe in (
        ("xla", "ragged_dot", 64.43, 55.54), ("jax-triton", "triton", 171.88, 165.17)))
    for split, mode in ((with_buffers, True), (without, False)):
        split["conditions"] = json.dumps({**json.loads(split["conditions"]), "command_buffers": mode})
    rows = frames.role_rows(pd.DataFrame([with_buffers, without]))
    assert rows.set_index("provider").loc["xla", "conditions"].endswith("traced with command buffers on")
    [check] = frames.amdahl_rows(rows).to_dict("records")
    assert check["check"] == "not comparable: command_buffers True against False"