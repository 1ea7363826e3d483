"""The Overview's arithmetic and names without an app: speedups against the best baseline, provider labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard import frames
from dashboard.names import PROVIDER_LABELS, provider_label
from flybench.providers import provider_names


def latest(times: dict[str, float], status: dict[str, str] | None = None) -> pd.DataFrame:
    """One gemm case on one machine, measured by each provider in `times` (seconds)."""
    status = status or {}
    return pd.DataFrame([
        {"subject": "s", "machine": "m-gfx950", "arch": "gfx950", "workload": "moe", "shape_set": "Quick",
         "case": "c1", "dtype": "bf16", "provider": p, "value": t, "status": status.get(p, "ok"), "reason": None,
         "unit": "seconds", "roofline_fraction": None, "commit_hash": "abc", "section": "gfx950 · m-gfx950",
         "commit_date": pd.Timestamp("2026-07-01"), "source": None}
        for p, t in times.items()])


def test_speedup_against_the_best_baseline_names_it_and_counts_the_others() -> None:
    """The fastest baseline is neither the first listed nor the first by name: rocblas at 1.8 ms of three."""
    pairs = frames.speedup_pairs(latest({"flydsl": 1.0e-3, "torch": 3.0e-3, "rocblas": 1.8e-3, "ck": 2.5e-3}))
    flydsl = pairs[pairs["provider"] == "flydsl"]
    [best] = frames.best_baseline(flydsl).to_dict("records")
    assert best["baseline"] == "rocblas" and best["best_of"] == 3 and best["speedup"] == pytest.approx(1.8)
    assert best["shown"] == "1.80× vs rocBLAS loop (best of 3)" and best["baseline_label"] == frames.BEST
    each = flydsl.set_index("baseline")["shown"].to_dict()
    assert each == {"torch": "3.00×", "rocblas": "1.80×", "ck": "2.50×"}  # and against each one


def test_a_failed_baseline_is_not_the_best_and_one_baseline_has_no_best() -> None:
    pairs = frames.speedup_pairs(latest({"flydsl": 1.0e-3, "torch": 3.0e-3, "rocblas": 0.5e-3, "ck": 2.5e-3},
                                        status={"rocblas": "failed"}))
    [best] = frames.best_baseline(pairs[pairs["provider"] == "flydsl"]).to_dict("records")
    assert best["shown"] == "2.50× vs CK (AITER) (best of 2)"
    single = frames.speedup_pairs(latest({"flydsl": 1.0e-3, "torch": 3.0e-3}))
    assert frames.best_baseline(single[single["provider"] == "flydsl"]).empty


def test_every_registered_provider_has_a_display_label() -> None:
    missing = [p for p in provider_names() if p not in PROVIDER_LABELS]
    assert not missing, f"providers without a label in dashboard/names.py: {missing}"
    assert provider_label("torch") == "torch (SDPA / grouped GEMM)" and provider_label("cublas") == "cuBLAS loop"
    assert provider_label("someone-elses") == "someone-elses"


def test_no_view_prints_a_string_meant_for_developers() -> None:
    """Streamlit writes every bare expression of a page script onto the page: a string after the docstring
    (an attribute docstring, say) would be printed above the title."""
    import ast

    views = Path(__file__).resolve().parents[1] / "dashboard" / "views"
    for script in sorted(views.glob("*.py")):
        body = ast.parse(script.read_text()).body[1:]  # the module docstring is not printed
        printed = [node.lineno for node in body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)]
        assert not printed, f"{script.name}: bare strings on lines {printed} would show on the page"


def test_each_dtype_is_held_against_its_own_roof_never_the_fp8_one() -> None:
    """fp16 and bf16 share the 16-bit matrix rate; an fp16 case read against the fp8 roof showed half its
    fraction. A dtype with no roof of its class gets no fraction rather than another class's."""
    roofs = pd.DataFrame([
        {"machine": "m", "ceiling": "bf16 matrix", "dtype": "bf16", "tflops": 989.0, "gbps": np.nan, "basis": "vendor"},
        {"machine": "m", "ceiling": "fp8 matrix", "dtype": "fp8", "tflops": 1979.0, "gbps": np.nan, "basis": "vendor"},
        {"machine": "m", "ceiling": "memory copy", "dtype": "", "tflops": np.nan, "gbps": 4800.0, "basis": "vendor"}])
    points = pd.DataFrame({"machine": ["m", "m", "m"], "dtype": ["fp16", "fp8", "fp32"],
                           "tflops": [700.0, 700.0, 50.0], "intensity": [70_000.0, 70_000.0, 70_000.0]})
    judged = frames.against_roofs(points, roofs)
    assert list(judged["of_roof"][:2]) == pytest.approx([700 / 989, 700 / 1979])
    assert judged["roof_basis"][0].startswith("bf16 matrix (vendor)")
    assert np.isnan(judged["of_roof"][2]) and judged["roof_basis"][2] == "no fp32 matrix roof for this machine"


def test_a_resource_change_later_reverted_reads_as_undone() -> None:
    dates = pd.to_datetime(["2026-06-01", "2026-06-02", "2026-06-03", "2026-06-04"])
    shown = pd.DataFrame({"arch": ["gfx950"] * 4, "metric_label": ["VGPRs"] * 4, "value": [238, 256, 256, 238],
                          "status": ["ok", "ok", "failed", "ok"], "short": ["a", "b", "c", "d"], "commit_date": dates})
    found = pd.DataFrame({"arch": ["gfx950", "gfx950"], "metric": ["VGPRs", "VGPRs"], "before": [238, 256],
                          "first_bad_date": [dates[1], dates[3]]})
    assert frames.undone(found, shown) == ["at d (2026-06-04)", ""]


def test_where_it_stands_is_the_geomean_trend_per_op_and_architecture_with_the_worst_case_and_alerts() -> None:
    times = pd.date_range("2026-06-01", periods=12, freq="D")
    rows = []
    for case, values in (("a", [100.0] * 9 + [90.0] * 3), ("b", [50.0] * 12)):
        for t, v in zip(times, values):
            rows.append({"machine": "m", "arch": "gfx950", "benchmark": "attention.FlydslCI.track_tflops",
                         "params": json.dumps({"case": case, "provider": "flydsl", "dtype": "bf16"}),
                         "source_op": "flash_attn", "status": "ok", "value": v, "job_time": t})
    alerts = pd.DataFrame({"machine": ["m"], "benchmark": ["attention.FlydslCI.track_tflops"],
                           "params": [json.dumps({"dtype": "bf16", "case": "a", "provider": "flydsl"})]})
    (row,) = frames.standing(pd.DataFrame(rows), alerts).itertuples()
    assert (row.op, row.arch, row.cases, row.alerts) == ("flash_attn", "gfx950", 2, 1)
    assert row.trend == pytest.approx((0.9 * 1.0) ** 0.5)  # newest 90 against the first three of the last ten (100)
    assert row.worst == "a, bf16: -10.0%" and row.newest == times[-1]
