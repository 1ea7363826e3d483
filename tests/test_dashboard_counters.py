"""The History page's counter section, on the counter pass committed from the H200: what it draws and lines up."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from dashboard import counters
from dashboard.charts import vega_spec
from flybench.store import ingest, queries

from test_dashboard_db import ci_store, dash_db  # noqa: F401  (fixtures)

RESULTS = Path(__file__).parents[1] / "results" / "flybench"
BENCHMARK = "diffusion_attention.Quick.track_time"
CASE = "llama3-8b-b8-ctx4k-d32-p64-bidir"
PARAMS = [json.dumps({"case": CASE, "provider": p, "dtype": "bf16"}) for p in ("triton", "torch")]

pytestmark = pytest.mark.skipif(not any(RESULTS.glob("*/*.counters.jsonl")), reason="no committed counter pass")


@cache
def _db(root: str) -> Path:
    tree = Path(root) / "results"
    shutil.copytree(RESULTS, tree)
    db = Path(root) / "db.duckdb"
    assert ingest(tree, db, "flybench").ok
    return db


@pytest.fixture
def db(tmp_path_factory) -> Path:
    return _db(str(tmp_path_factory.getbasetemp() / "counters"))


def test_the_figures_drawn_are_labelled_as_a_person_reads_them(db):
    frame = counters.figure_frame(queries.case_counter_history(db, BENCHMARK, PARAMS))
    assert set(frame["figure"]) == {"DRAM / minimum", "DRAM bandwidth", "L2 hit rate", "matrix busy", "occupancy",
                                    "LDS conflicts / instr"}
    ratio = frame[(frame["figure"] == "DRAM / minimum")].set_index("provider")["shown"]
    assert ratio.to_dict() == {"Triton (flybench)": "1.33x", "torch (SDPA / grouped GEMM)": "4.54x"}
    assert not frame["shown"].str.contains("None|nan|-").any()


def test_the_chart_is_one_small_multiple_per_figure(db):
    frame = counters.figure_frame(queries.case_counter_history(db, BENCHMARK, PARAMS))
    spec = vega_spec(counters.chart(frame))
    assert spec["facet"]["row"]["field"] == "panel"
    assert spec["facet"]["row"]["sort"] == ["DRAM / minimum (ratio)", "DRAM bandwidth (GB/s)", "L2 hit rate (%)",
                                            "matrix busy (%)", "occupancy (%)", "LDS conflicts / instr (ratio)"]
    assert spec["resolve"]["scale"]["y"] == "independent"  # a ratio and a GB/s never share an axis
    assert spec["spec"]["height"] >= 100
    x, y = (spec["spec"]["layer"][0]["encoding"][c] for c in ("x", "y"))
    assert x["field"] == "order" and "commits in order" in x["title"]  # History's axis, not the wall clock
    assert y["axis"]["format"] == ",.4~r"  # never 1.2e+3


def test_why_lines_up_base_and_head_with_the_change():
    frame = pd.DataFrame({
        "machine": ["m"] * 4, "provider": ["Triton"] * 4, "figure": ["DRAM / minimum", "L2 hit rate"] * 2,
        "counter": ["hbm_over_min", "l2_hit_rate"] * 2, "value": [1.0, 0.5, 1.38, 0.5],
        "shown": ["1x", "50.0%", "1.38x", "50.0%"], "commit_hash": ["a", "a", "b", "b"]})
    why = counters.why_frame(frame, "a", "b")
    assert why[counters.WHY_COLUMNS].values.tolist() == [
        ["m", "Triton", "DRAM / minimum", "1x", "1.38x", "+38.0%"],
        ["m", "Triton", "L2 hit rate", "50.0%", "50.0%", "+0.0%"]]


def test_the_kernels_of_the_profiled_call_are_listed_in_launch_order(db):
    [commit] = queries.case_counter_history(db, BENCHMARK, PARAMS[:1])["commit_hash"].unique()
    kernels = counters.kernel_frame(queries.case_kernels(db, BENCHMARK, PARAMS[0], "dev-h200", [commit]))
    assert list(kernels["kernel"]) == ["diffusion_attention_fwd", "combine_splits"]
    assert kernels["DRAM read (MB)"].iloc[0] > 90 and kernels["registers"].iloc[0] > 0


def test_the_pair_lined_up_first_is_the_newest_step_both_sides_profiled():
    steps = pd.DataFrame({"last_good": ["a", "c"], "first_bad": ["b", "d"],
                          "first_bad_date": pd.to_datetime(["2026-01-01", "2026-02-01"])})
    assert counters._pair(["a", "b", "c"], steps) == ("a", "b")  # d was never profiled
    assert counters._pair(["a", "b", "c"], steps.iloc[:0]) == ("b", "c")
    assert counters._pair(["a"], steps.iloc[:0]) == ("a", "a")


def test_the_history_page_shows_the_counters_beside_the_timing(db, monkeypatch):
    from test_dashboard_pages import charts, open_page, texts

    monkeypatch.setenv("FLYBENCH_DB", str(db))
    monkeypatch.setenv("FLYBENCH_VALIDATE_CHARTS", "1")
    at = open_page(db, "history", subject="flybench", benchmark=BENCHMARK, params=f"{CASE}, bf16")
    assert at.selectbox(key="params").value == f"{CASE}, bf16"
    assert "Hardware counters" in texts(at, "subheader")
    assert charts(at) == 2  # the timing panels and the counters' small multiples
    # one profiled commit: no why table that would compare it with itself, and the page says what would add one
    assert not any("figure" in t.value.columns and "change" in t.value.columns for t in at.dataframe)
    assert any(c.startswith("One profiled commit (") and "a why table needs two" in c for c in texts(at, "caption"))
    readings = " ".join(m.value for m in at.markdown if m.value.startswith("**Reading, "))
    assert "It moves 1.33x the workload's minimum bytes" in readings and "It moves 4.54x" in readings
    assert any("never a timing sample" in c for c in texts(at, "caption"))


def test_a_case_shows_its_measured_and_imported_rates_side_by_side(ci_store, monkeypatch):  # noqa: F811
    from test_dashboard_pages import charts, open_page, texts

    from dashboard import elsewhere

    rows = elsewhere.rate_frame(queries.case_rates(ci_store, "moe_stage", "t64-d6144x1024-e128k8-s1", "fp8"))
    assert set(rows["provenance"]) == {"flybench", "flydsl-ci"}
    assert {p for p in rows["panel"] if p.endswith("†")} == {"gfx942 · linux-flydsl-mi325-1 †",
                                                              "gfx950 · linux-flydsl-mi355-1 †"}
    assert any(p.startswith("sm_90 · dev-h200") and not p.endswith("†") for p in rows["panel"])
    spec = vega_spec(elsewhere.chart(rows))
    assert spec["resolve"]["scale"]["x"] == "independent"  # each system along its own repository's commits
    for panel in spec["vconcat"]:
        x = panel["layer"][0]["encoding"]["x"]
        assert x["field"] == "order" and x["title"].startswith("commits in order")  # in commit order, as History
        assert panel["layer"][0]["encoding"]["y"]["title"] == "TFLOP/s"
    assert {p["title"]["text"] for p in spec["vconcat"]} == set(rows["panel"])
    monkeypatch.setenv("FLYBENCH_DB", str(ci_store))
    for benchmark, case in (("moe_stage.Quick.track_time", "t64-d6144x1024-e128k8-s1, fp8"),
                            ("moe_stage.FlydslCI.track_tflops", "t64-d6144x1024-e128k8-s1, moe_gemm1, fp8")):
        at = open_page(ci_store, "history", subject="flybench" if "Quick" in benchmark else "flydsl",
                       benchmark=benchmark, params=case, runs="all")
        assert "This case, measured and imported" in texts(at, "subheader"), benchmark
        assert charts(at) >= 2
    # the sidebar's architecture filter holds here too: on gfx950 only FlyDSL CI measured it, so nothing to set
    # side by side (flybench's H200 and the gfx942 runner are filtered out)
    at = open_page(ci_store, "history", subject="flydsl", benchmark="moe_stage.FlydslCI.track_tflops",
                   params="t64-d6144x1024-e128k8-s1, moe_gemm1, fp8", runs="all", arch="gfx950")
    assert "This case, measured and imported" not in texts(at, "subheader") and charts(at) >= 1


def test_the_regressions_page_lists_a_watched_counter_change_beside_the_resources(tmp_path, monkeypatch):
    from test_counters_store import store_with_a_counter_change
    from test_dashboard_pages import open_page

    db = store_with_a_counter_change(tmp_path)
    monkeypatch.setenv("FLYBENCH_DB", str(db))
    at = open_page(db, "regressions", subject="flybench")
    table = next(t.value for t in at.dataframe if "metric_label" in t.value.columns)
    [row] = table[table["metric_label"] == "smsp__inst_executed.sum"].to_dict("records")
    assert row["kernel"] == "moe.Quick.track_time (mixtral8x7b-t16, triton, bf16)" and row["delta"] == "+500"
    assert row["resources"].startswith("history?") and "mixtral8x7b-t16" in row["resources"]


def test_the_reading_says_what_the_figures_mean():
    kernels = pd.DataFrame({"kernel": ["attend", "combine"], "time (us)": [54.0, 8.0]})
    said = counters.diagnosis({"hbm_gbps": 1500.0, "hbm_over_min": 1.33, "occupancy": 0.22, "matrix_busy": 0.4},
                              kernels, 4500.0, "measured: gemm copy-1GiB (cublas)")
    assert said[0] == ("DRAM bandwidth 1,500 GB/s is 33% of this machine's copy (4,500 GB/s, measured: gemm "
                       "copy-1GiB (cublas)): well below the copy: memory is not what limits it unless the bytes are "
                       "far above the minimum.")
    assert said[1] == "It moves 1.33x the workload's minimum bytes: re-reads or spills cost traffic."
    assert said[2].startswith("Occupancy 22%: few waves to hide latency")
    assert said[3] == "Matrix units busy 40% of the time."
    assert said[4] == "2 kernels: attend takes 54.0 of 62.0 us; the other 1 take 8.0 us (13%), worth fusing."
    assert counters.diagnosis({}, kernels.iloc[:1], None) == []  # nothing measured, nothing said


def test_the_history_page_reads_the_counters_of_the_newest_profiled_call(db, monkeypatch):
    from test_dashboard_pages import open_page

    monkeypatch.setenv("FLYBENCH_DB", str(db))
    at = open_page(db, "history", subject="flybench", benchmark=BENCHMARK, params=f"{CASE}, bf16")
    readings = [m.value for m in at.markdown if m.value.startswith("**Reading, ")]
    triton = next(r for r in readings if r.startswith("**Reading, Triton (flybench) on dev-h200"))
    assert "It moves 1.33x the workload's minimum bytes" in triton
    assert "of this machine's copy (" in triton and "GB/s, measured: gemm copy" in triton
