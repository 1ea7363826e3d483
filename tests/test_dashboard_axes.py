"""What the charts' axes read: commits in order wherever commits are the axis, every point inside its plot,
a unit on every numeric axis, numbers without scientific notation, and tick labels that differ."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_dashboard_db import DashboardDB, dash_db  # noqa: F401  (fixtures)
from test_dashboard_pages import db, open_page  # noqa: F401  (fixtures)

from dashboard import charts
from dashboard.charts import vega_spec


def dated(n: int) -> pd.DataFrame:
    return pd.DataFrame({"commit_hash": [f"{i:040x}" for i in range(n)],
                         "commit_date": pd.date_range("2026-11-30", periods=n, freq="6h")})


@pytest.mark.parametrize("commits", [1, 2, 6, 7, 8, 9, 40])
def test_the_commit_axis_reaches_the_last_commit(commits: int) -> None:
    """Six commits once got ticks at 0-4 and a domain ending at 4.5: the newest point (dev-h200's only
    jax-triton run) was drawn right of the plot."""
    rows = dated(commits)
    rows, x = charts.in_commit_order(rows)
    assert list(rows["order"]) == list(range(commits))
    ticks, _ = charts.commit_ticks(rows)
    assert 0 in ticks and commits - 1 in ticks and len(ticks) <= min(commits, 8)
    assert len(set(ticks.values())) == len(ticks)  # no two ticks read alike
    low, high = x.to_dict()["scale"]["domain"]
    assert low < 0 and high > commits - 1


def test_commits_of_one_day_get_one_date_label_not_identical_pairs() -> None:
    """Six commits, two a day over three days, were labelled 'd1, d1, d2, d2, d3, d3': which commit a tick names
    could not be told without hovering."""
    rows = pd.DataFrame({"commit_hash": [f"{i:040x}" for i in range(6)],
                         "commit_date": pd.to_datetime(["2026-06-11 01:00", "2026-06-11 13:00", "2026-06-12 01:00",
                                                        "2026-06-12 13:00", "2026-06-13 01:00", "2026-06-13 13:00"])})
    ticks, _ = charts.commit_ticks(charts.in_commit_order(rows)[0])
    assert ticks == {0: "2026-06-11", 2: "2026-06-12", 5: "2026-06-13"}
    one_day = rows.assign(commit_date=pd.date_range("2026-06-11 01:00", periods=6, freq="1h"))
    ticks, _ = charts.commit_ticks(charts.in_commit_order(one_day)[0])
    assert ticks == {0: "2026-06-11 01:00", 5: "2026-06-11 06:00"}


@pytest.mark.parametrize("changes", [[-0.004, 0.003], [0.5, -0.2], [0.0012], [-3.5, 0.1], [0.02, 0.021, 0.019],
                                     [0.0], []])
def test_the_change_bars_never_repeat_a_tick_label(changes: list[float]) -> None:
    frame = pd.DataFrame({"label": [f"c{i}" for i in range(len(changes))], "change": changes,
                          "verdict": "unchanged", "base_text": "", "head_text": "", "evidence": ""})
    x = vega_spec(charts.change_bars(frame, "change"))["encoding"]["x"]
    decimals = int(x["axis"]["format"][2:-1])
    labels = [f"{v:+.{decimals}%}" for v in x["axis"]["values"]]  # d3's "+.N%" as Python writes it
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    assert x["axis"]["values"][0] <= min([0, *changes]) and x["axis"]["values"][-1] >= max([0, *changes])


def test_kernel_resources_draw_commits_in_order_with_each_metric_unit(db: DashboardDB) -> None:  # noqa: F811
    at = open_page(db.path, "resources", kernel="flash_attn_generic")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    line = next(layer for layer in spec["spec"]["layer"] if layer["mark"]["type"] == "line")
    x, y = line["encoding"]["x"], line["encoding"]["y"]
    assert x["field"] == "order" and x["type"] == "quantitative" and "commits in order" in x["title"]
    assert all(label.count("-") == 2 for label in json.loads(x["axis"]["labelExpr"].split("[")[0]).values())
    assert y["axis"]["format"] == charts.NUMBER_FORMAT
    assert spec["facet"]["row"]["field"] == "panel"


def test_each_resource_panel_is_headed_with_its_unit() -> None:
    rows = dated(3).assign(arch="gfx950", short="abc", message="", status="ok")
    frame = pd.concat([rows.assign(metric_label="VGPRs", value=[238, 256, 256], unit="registers"),
                       rows.assign(metric_label="occupancy", value=[2, 2, 1], unit="waves"),
                       rows.assign(metric_label="spill count", value=[0, 0, 1], unit="count")])
    drawn = next(iter(charts.resource_lines(frame).to_dict()["datasets"].values()))
    assert {r["panel"] for r in drawn} == {"VGPRs (registers)", "occupancy (waves per SIMD)", "spill count"}
    assert sorted({r["order"] for r in drawn}) == [0, 1, 2]


def test_every_numeric_axis_names_its_unit_and_reads_without_exponents() -> None:
    points = pd.DataFrame({"intensity": [10.0, 300.0], "tflops": [5.0, 900.0], "label": ["a", "b"],
                           "provider": ["x", "y"], "machine": ["m", "m"], "workload": ["w", "w"], "gbps": [1.0, 2.0],
                           "of_roof": [0.1, 0.2], "roof_basis": ["", ""], "provenance": ["flybench"] * 2})
    roofs = pd.DataFrame({"roof": ["bf16"], "intensity": [1.0], "tflops": [1000.0], "machine": ["m"],
                          "end": [True]})
    layer = vega_spec(charts.roofline(points, roofs))["spec"]["layer"][0]["encoding"]
    assert layer["x"]["title"] == "arithmetic intensity (FLOP/byte)" and layer["y"]["title"] == "achieved TFLOP/s"
    assert layer["x"]["axis"]["format"] == layer["y"]["axis"]["format"] == charts.NUMBER_FORMAT
    assert "e" not in charts.NUMBER_FORMAT
