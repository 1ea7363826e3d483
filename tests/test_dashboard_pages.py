"""Every dashboard page under streamlit's AppTest, on the fixture database of real asv results: the numbers shown.

The database (see test_dashboard_db.py) holds the toy project on two
machines (flydsl failing correctness at the newest commit on m1-gfx950,
1.25x faster than torch on m2-gfx942) and, when the checkout has them, the
real H200 results of `flybench run`.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
from fixtures.asv_project import MACHINE, PROJECT
from streamlit.testing.v1 import AppTest
from test_dashboard_db import FAILED_REASON, SECOND, DashboardDB, ci_store, dash_db  # noqa: F401  (fixtures)
from test_import_flydsl_ci import records as flydsl_ci_records

from dashboard import frames, ui
from flybench.benchmark_names import benchmark_name
from flybench.regress import RegressConfig
from flybench.regress.report import value_text
from flybench.store import connect, ingest

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


def open_page(db: Path, page: str | None = None, config: Path | None = None, **query: str | list[str]) -> AppTest:
    """Run the app on `db` (then switch to views/<page>.py), with filters given as URL query parameters."""
    at = AppTest.from_file(str(APP), default_timeout=600)  # a bound against a hang, not a time to beat
    if page:  # a fresh session opened on that page's URL: the query initialises the bound filters
        at.switch_page(f"views/{page}.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.fixture
def db(dash_db: DashboardDB, monkeypatch: pytest.MonkeyPatch) -> DashboardDB:  # noqa: F811
    monkeypatch.setenv("FLYBENCH_DB", str(dash_db.path))
    monkeypatch.setenv("FLYBENCH_ASV_CONFIG", str(dash_db.asv_config))
    monkeypatch.setenv("FLYBENCH_VALIDATE_CHARTS", "1")  # the app skips Altair's schema check for speed
    return dash_db


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in at.get(kind)]


def frame(at: AppTest, containing: str) -> pd.DataFrame:
    """The first table on the page with this column, numbers that the page had to show as text read back."""
    return numbers(next(df.value for df in at.dataframe if containing in df.value.columns))


def numbers(table: pd.DataFrame) -> pd.DataFrame:
    """A column of numbers shown as text because some had no value (ui.MISSING) as numbers again, NaN there."""
    out = table.copy()
    for column in out.columns:
        values = out[column]
        if (values.dtype == object or pd.api.types.is_string_dtype(values)) and (values == ui.MISSING).any() \
                and values.map(lambda v: isinstance(v, str)).all():
            try:
                out[column] = [math.nan if v == ui.MISSING else float(v[:-1]) / 100 if v.endswith("%") else float(v)
                               for v in values]
            except ValueError:
                pass  # a text column that happens to hold the mark
    return out


def charts(at: AppTest) -> int:
    return len(at.get("vega_lite_chart"))


def test_overview_shows_speedups_and_failures_never_as_speed(db: DashboardDB) -> None:
    at = open_page(db.path, subject=PROJECT)
    assert texts(at, "header") == ["Speedup of FlyDSL over each baseline",
                                   "Latest results and fraction of the roofline reached", "Other benchmarks"]
    other = next(df.value for df in at.dataframe if {"label", "unit"} <= set(df.value.columns)
                 and "provider" not in df.value.columns)  # the toy Rates class is no flybench suite: named as asv names it
    assert "attention.Rates.track_tflops(c1, flydsl, bf16)" in set(other["label"])
    speedups = frame(at, "speedup").set_index("machine")
    assert speedups.loc[SECOND, "speedup"] == pytest.approx(1.00 / 0.80) and speedups.loc[SECOND, "shown"] == "1.25×"
    failed = speedups.loc[MACHINE]
    assert failed["shown"] == "flydsl failed" and math.isnan(failed["speedup"]) and math.isnan(failed["value"])
    assert failed["why"] == FAILED_REASON and failed["arch"] == "gfx950"
    latest = frame(at, "tflops").set_index(["machine", "provider"])
    assert latest.loc[(MACHINE, "flydsl"), "shown"] == "failed" and latest.loc[(MACHINE, "torch"), "shown"] == "1.02ms"
    assert latest.loc[(SECOND, "flydsl"), "shown"] == "800μs" and math.isnan(latest.loc[(MACHINE, "flydsl"), "tflops"])
    assert charts(at) == 2 and len(at.get("download_button")) == 3


ROOT = Path(__file__).resolve().parents[1]


def newest_h200_median(workload: str, case: str, provider: str, dtype: str) -> float:
    """The case's median in the newest committed H200 run whose asv results hold it (by asv's commit date)."""
    benchmark = benchmark_name(workload, "quick")
    runs = sorted(((data := json.loads(p.with_name(p.name.replace(".cases.jsonl", ".json")).read_text()))["date"],
                   benchmark in data["results"], p)
                  for p in (ROOT / "results" / "flybench" / "dev-h200").glob("*.cases.jsonl"))
    path = next(p for _, holds, p in reversed(runs) if holds)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    [median] = [r["median_s"] for r in records if (r["workload"], r["case"], r["provider"], r["dtype"], r["status"])
                == (workload, case, provider, dtype, "ok")][-1:]
    return median


def test_overview_without_flydsl_says_so_and_uses_a_reference(db: DashboardDB) -> None:
    if not db.has_h200:
        pytest.skip("the real H200 results (results/flybench/dev-h200) are not in this checkout")
    at = open_page(db.path, subject="flybench")
    assert any("No FlyDSL results exist yet on dev-h200" in w for w in texts(at, "warning"))
    assert at.selectbox(key="reference").value in {"cublas", "flex", "torch"}
    latest = frame(at, "tflops").set_index(["label"])
    gemm = latest.loc["gemm · 8192x8192x8192 · bf16"]
    assert gemm["provider"] == "cublas" and gemm["of_roof"] > 0.5
    assert "bf16 matrix (measured: gemm" in gemm["roof_basis"]  # the Roofline page's roofs, not a second basis
    assert gemm["shown"] == f"{newest_h200_median('gemm', '8192x8192x8192', 'cublas', 'bf16') * 1e3:.2f}ms"
    assert any("the roof the Roofline page draws" in c for c in texts(at, "caption"))


def test_filters_live_in_the_url(db: DashboardDB) -> None:
    at = open_page(db.path, subject=PROJECT, machine=SECOND)
    assert set(frame(at, "tflops")["machine"]) == {SECOND}
    assert at.multiselect(key="machine").value == [SECOND]


CI_CASE = ("flash_attn", "B16S8192H16Hkv16D128_causal", "bf16", "TFLOPS")
CI_LABEL = "flash_attn · B16S8192H16Hkv16D128_causal · bf16"  # FlyDSL's own op name, not the workload


@pytest.fixture
def ci_db(ci_store: Path, db: DashboardDB, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """`db`'s environment (asv config, chart validation), pointed at the database with the import."""
    monkeypatch.setenv("FLYBENCH_DB", str(ci_store))
    return ci_store


@cache
def newest_ci_value(arch: str, pull_requests: bool) -> float:
    """From the file itself: CI_CASE's newest value (by job time) on `arch`, among main runs or PR runs.

    A run is a pull request's when any of its records names the PR (FlyDSL's ingest resolves it for
    some runners' jobs only); every other run is main's.
    """
    raw = flydsl_ci_records()
    pr_runs = {r["run_id"] for r in raw if r.get("pr") is not None}
    runs = [r for r in raw if (r["op"], r["shape"], r["dtype"], r["metric"]) == CI_CASE and r["arch"] == arch
            and (r["run_id"] in pr_runs) == pull_requests]
    newest = max(runs, key=lambda r: r["ts"])
    assert newest["status"] == "ok"
    return float(newest["value"])


def ci_table(at: AppTest) -> pd.DataFrame:
    """The imported section's table (not the rows behind its chart, which also name the workload)."""
    return numbers(next(df.value for df in at.dataframe
                        if "ratio" in df.value.columns and "workload" not in df.value.columns)).set_index("label")


def test_overview_shows_flydsl_ci_results_apart_marked_with_their_source(ci_db: Path) -> None:
    at = open_page(ci_db)
    headers = texts(at, "header")
    assert headers[0] == "Speedup of FlyDSL over each baseline"  # flybench's own, first
    assert headers[-1] == "Imported from FlyDSL CI (not measured by flybench)"  # the imported sections last
    for own in (frame(at, "speedup"), frame(at, "tflops")):  # nothing imported in flybench's own heatmaps
        assert not own["machine"].str.startswith("linux-flydsl").any() and set(own["provenance"]) == {"flybench"}
    assert at.radio(key="runs").value == "main only"
    table = ci_table(at)
    gfx942, gfx950 = (newest_ci_value(arch, pull_requests=False) for arch in ("gfx942", "gfx950"))
    case = table.loc[CI_LABEL]
    assert (case["unit"], case["gfx942"], case["gfx950"]) == (  # one spelling of the unit on every page
        "TFLOP/s", f"{value_text(gfx942, 'TFLOP/s')} †", f"{value_text(gfx950, 'TFLOP/s')} †")
    assert case["ratio"] == f"{gfx950 / gfx942:.3f}×" and gfx950 > gfx942  # TFLOP/s: gfx950 / gfx942, as shown
    link = parse_qs(urlsplit(case["history"]).query)  # the row links to its case's History
    assert urlsplit(case["history"]).path == "history" and link["benchmark"] == ["attention.FlydslCI.track_tflops"]
    history = open_page(ci_db, "history", **{k: v[0] for k, v in link.items()})
    assert texts(history, "header") == [f"flash_attn · {link['params'][0]} · flydsl"]  # FlyDSL's op name
    spec = json.loads(history.get("vega_lite_chart")[0].proto.spec)
    (line,) = [layer for layer in spec["spec"]["layer"] if layer["mark"] in ("line", {"type": "line"})]
    assert line["encoding"]["y"]["title"] == "TFLOP/s"  # FlyDSL CI's "TFLOPS", one spelling
    drawn = frame(history, "panel")
    assert {"gfx942 · linux-flydsl-mi325-1 †", "gfx950 · linux-flydsl-mi355-1 †"} <= set(drawn["panel"])
    assert drawn["url"].str.fullmatch(r"https://github\.com/ROCm/FlyDSL/actions/runs/\d+").all()  # each point: its run
    shown = table[["gfx942", "gfx950"]].stack()
    shown = shown[shown != ""]  # a case may be measured on one of them only: the other cell is blank
    assert len(shown) > 100 and shown.str.endswith(" †").all()  # every imported value carries the mark
    assert any(c.startswith("† Imported from flydsl-ci") for c in texts(at, "caption"))
    assert any("(main pushes)" in c for c in texts(at, "caption"))
    # where FlyDSL stands: per op and architecture, from main's runs
    assert "Where FlyDSL stands (imported main runs)" in headers
    standing = frame(at, "worst")
    assert {"flash_attn", "mla"} <= set(standing["op"]) and set(standing["arch"]) >= {"gfx942", "gfx950"}
    assert (standing["cases"] >= 1).all() and standing["trend"].between(0.5, 2).all()
    # what the data cannot answer, said in a sentence with the way to fill it
    assert any("No CK, AITER, hipBLASLt or Triton rows for gfx1201, gfx942, gfx950" in i
               and "FlyDSL CI measures flydsl only" in i and "has not run on" in i for i in texts(at, "info"))
    # FlyDSL CI's own -3% verdicts beside flybench's, marked as theirs, each linked to its CI run
    assert "FlyDSL CI's own verdicts (theirs, not flybench's)" in texts(at, "subheader")
    verdicts = frame(at, "vs_main")
    (caption,) = [c for c in texts(at, "caption") if "it flagged" in c]
    assert f"it flagged {len(verdicts)}." in caption and len(verdicts) > 0
    assert (verdicts["vs_main"] < 0).all()
    assert verdicts["ci_run"].str.fullmatch(r"https://github\.com/ROCm/FlyDSL/actions/runs/\d+").all()


def test_overview_imported_runs_filter_switches_to_pull_requests(ci_db: Path) -> None:
    at = open_page(ci_db, runs="pull requests")
    gfx942, gfx950 = (newest_ci_value(arch, pull_requests=True) for arch in ("gfx942", "gfx950"))
    assert (gfx942, gfx950) != (newest_ci_value("gfx942", False), newest_ci_value("gfx950", False))
    case = ci_table(at).loc[CI_LABEL]
    assert (case["gfx942"], case["gfx950"]) == (f"{value_text(gfx942, 'TFLOP/s')} †",
                                                f"{value_text(gfx950, 'TFLOP/s')} †")
    assert case["ratio"] == f"{gfx950 / gfx942:.3f}×"
    assert any("(pull-request runs)" in c for c in texts(at, "caption"))
    only_toy = open_page(ci_db, subject=PROJECT, runs="pull requests")  # a subject without imports
    assert "Imported from FlyDSL CI (not measured by flybench)" not in texts(only_toy, "header")
    assert only_toy.radio(key="runs").value == "pull requests"  # the one rule stays as the URL set it


def test_arch_ratio_inverts_times_and_keeps_throughput() -> None:
    """Above 1 always means the head architecture is faster: TFLOP/s divide as they are, times invert."""
    rows = pd.DataFrame([
        {"arch": arch, "unit": unit, "value": value, "benchmark": f"x.FlydslCI.{name}", "status": "ok",
         "params": '{"case": "c1", "provider": "flydsl", "dtype": "bf16"}', "machine": f"m-{arch}",
         "workload": "x", "subject": "s", "commit_hash": "abc", "commit_date": pd.Timestamp("2026-07-01"),
         "run_context": "main", "pr": None, "reason": None, "source": "flydsl-ci"}
        for name, unit, values in (("track_tflops", "TFLOPS", (300.0, 200.0)), ("track_time", "seconds", (1e-3, 2e-3)))
        for arch, value in zip(("gfx950", "gfx942"), values)])
    wide = frames.by_arch(frames.newest_imported(rows)).set_index("unit", drop=False)
    ratio = frames.arch_ratio(wide, "gfx950", "gfx942", RegressConfig())
    assert ratio["TFLOPS"] == pytest.approx(1.5) and ratio["seconds"] == pytest.approx(2.0)
    texts = dict(zip(wide.index, frames.ratio_text(wide, ratio, "gfx950", "gfx942")))
    assert texts == {"TFLOPS": "1.50× †", "seconds": "2.00× †"}


def test_history_draws_the_series_marks_the_step_and_the_failure(db: DashboardDB) -> None:
    at = open_page(db.path, "history", subject=PROJECT, benchmark="attention.Quick.track_time")
    assert texts(at, "header") == [f"attention · c1, bf16 · {PROJECT}"] and charts(at) == 1
    assert at.selectbox(key="params").value == "c1, bf16"  # the case: its parameters but the provider
    rows = frame(at, "series")
    assert set(rows["panel"]) == {f"gfx950 · {MACHINE}", f"gfx942 · {SECOND}"}  # one small multiple per machine
    flydsl = rows[(rows["series"] == "FlyDSL") & (rows["machine"] == MACHINE)]  # the label; the id beside it
    assert set(flydsl["provider"]) == {"flydsl"}
    assert list(flydsl["value"][:5]) == pytest.approx([1.00e-3, 1.01e-3, 0.99e-3, 1.50e-3, 1.51e-3])
    assert list(flydsl["status"]) == ["ok"] * 5 + ["failed"]
    assert list(flydsl["message"]) == [f"change {i}" for i in range(6)]  # from the toy project's git log
    assert flydsl["value"].isna().iloc[-1] and flydsl["why"].iloc[-1] == FAILED_REASON
    steps = frame(at, "what")
    (what,) = steps["what"]
    commits = db.project.commits
    assert what == f"FlyDSL: {commits[2][:8]} → {commits[3][:8]}: 1.00ms → 1.51ms (+50.5%), confidence 100%"
    (step,) = steps.itertuples()
    assert step.message == "change 3" and step.author == "t" and step.panel == f"gfx950 · {MACHINE}"
    assert parse_qs(urlsplit(step.alert).query) == {"subject": [PROJECT], "machine": [MACHINE],
                                                    "series": ["attention.Quick.track_time(c1, flydsl, bf16)"]}
    assert step.bisect == (f"flybench bisect 'attention.Quick.track_time(c1, flydsl, bf16)' "
                           f"{commits[2][:8]} {commits[3][:8]}")
    assert any("✕ on the bottom edge" in c for c in texts(at, "caption"))
    assert any("the alert threshold, a change must leave ±3%" in c for c in texts(at, "caption"))
    # the x axis is the commits in order, labelled with dates, as asv draws a history
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    (x,) = [layer["encoding"]["x"] for layer in spec["spec"]["layer"] if layer["mark"] in ("line", {"type": "line"})]
    assert x["field"] == "order" and x["type"] == "quantitative" and "commits in order" in x["title"]
    labels = json.loads(x["axis"]["labelExpr"].split("[")[0])
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) for v in labels.values()) and labels
    positions = rows.drop_duplicates("commit_hash").sort_values("order")
    assert list(positions["order"]) == list(range(len(positions)))  # one step per commit, none skipped
    assert list(positions["commit_date"]) == sorted(positions["commit_date"])


def test_compare_two_commits_gives_flybench_compares_verdicts(db: DashboardDB) -> None:
    commits = db.project.commits
    at = open_page(db.path, "compare", repo=PROJECT, machine_a=MACHINE, base=commits[2][:8], head=commits[3][:8])
    assert any("2 regressions, 0 improvements, 2 unchanged, 1 resource change on m1-gfx950" in m
               for m in texts(at, "markdown"))
    assert list(frame(at, "metric")["change"]) == ["flash_attn_generic: VGPRs 238 -> 256 on gfx950"]
    cases = frame(at, "verdict").set_index(["benchmark", "parameters"])
    time = cases.loc[("attention.Quick.track_time", "c1, flydsl, bf16")]
    assert time["verdict"] == "regression" and (time["base_text"], time["head_text"]) == ("990μs", "1.50ms")
    assert time["change"] == pytest.approx(0.51 / 0.99) and time["evidence"].startswith(
        "one round a side, interval +")  # judged with the series' noise over its history
    assert cases.loc[("attention.Quick.track_time", "c1, torch, bf16"), "verdict"] == "unchanged"
    assert charts(at) == 1
    head = at.selectbox(key="head")  # the picker reads hash, date, run and message; the value is the hash
    assert head.value == commits[3][:8] and at.query_params["head"] in (commits[3][:8], [commits[3][:8]])
    label = next(o for o in head.options if o.startswith(commits[3][:8]))
    assert label.endswith(" · change 3") and " · 20" in label and "flybench run" in label


def test_compare_newest_commit_shows_the_failure_as_broken(db: DashboardDB) -> None:
    commits = db.project.commits
    at = open_page(db.path, "compare", repo=PROJECT, machine_a=MACHINE, base=commits[4][:8], head=commits[5][:8])
    broken = frame(at, "verdict").set_index(["benchmark", "parameters"]).loc[
        ("attention.Quick.track_time", "c1, flydsl, bf16")]
    assert broken["verdict"] == "broken" and broken["head_text"] == "failed" and math.isnan(broken["change"])
    assert FAILED_REASON in broken["evidence"]


def test_compare_two_machines(db: DashboardDB) -> None:
    at = open_page(db.path, "compare", repo=PROJECT, mode="two machines", machine_a=MACHINE, machine_b=SECOND)
    cases = frame(at, "verdict").set_index(["benchmark", "parameters"])
    torch = cases.loc[("attention.Quick.track_time", "c1, torch, bf16")]
    assert (torch["base_text"], torch["head_text"]) == ("1.02ms", "1.00ms") and torch["verdict"] == "unchanged"
    flydsl = cases.loc[("attention.Quick.track_time", "c1, flydsl, bf16")]
    assert flydsl["verdict"] == "fails on base only" and flydsl["base_text"] == "failed"


def test_regressions_lists_the_planted_step(db: DashboardDB) -> None:
    at = open_page(db.path, "regressions", subject=PROJECT)
    rows = frame(at, "commits").set_index("benchmark")
    commits = db.project.commits
    time = rows.loc["attention.Quick.track_time"]
    assert time["commits"] == f"{commits[2][:8]}..{commits[3][:8]}" and time["change"] == pytest.approx(0.505)
    assert (time["base_text"], time["head_text"]) == ("1.00ms", "1.51ms") and time["evidence"].startswith("confidence 100%")
    assert time["state"] == "open alert" and "no code attribution" in time["evidence"]
    assert "flash_attn_generic" not in rows.index  # resource changes have a section of their own
    resources = frame(at, "metric_label").set_index("kernel")
    assert resources.loc["flash_attn_generic", "head_text"] == "256 registers"
    assert resources.loc["flash_attn_generic", "delta"] == "+18"
    assert resources.loc["flash_attn_generic", "resources"] == "resources?kernel=flash_attn_generic"
    assert charts(at) == 1  # timings get bars; resource changes (0 -> 28 has no bar) a ranked table
    quiet = open_page(db.path, "regressions", machine=SECOND)  # one commit there: nothing can have regressed
    assert not quiet.dataframe and texts(quiet, "success") == ["No open regression for this selection.",
                                                               "No resource got worse in this selection."]
    series = "attention.Quick.track_time(c1, flydsl, bf16)"
    alert = open_page(db.path, "regressions", subject=PROJECT, machine=MACHINE, series=series)
    assert list(frame(alert, "commits")["parameters"]) == ["c1, flydsl, bf16"]  # History's alert link lands here


def test_resource_changes_rank_what_costs_speed_first() -> None:
    from dashboard import analysis

    rows = pd.DataFrame({
        "benchmark": ["compile_metrics.Amd.track_sgprs", "compile_metrics.Amd.track_agprs",
                      "compile_metrics.Amd.track_vgpr_spills", "compile_metrics.Amd.track_vgprs", "k"],
        "params": [{}, {}, {}, {}, {"arch": "gfx950", "metric": "vgpr_count"}],
        "env_name": ["e", "e", "e", "e", ""], "worse": [True, True, True, False, True],
        "before": [31, 0, 0, 250, 238], "after": [106, 28, 1, 240, 256]})
    rows = rows.assign(absolute=rows["after"] - rows["before"], change=(rows["after"] - rows["before"]) / rows["before"])
    ranked = analysis.by_relevance(rows)
    assert list(ranked["metric"]) == ["vgpr_spills", "vgpr_count", "agprs", "sgprs", "vgprs"]
    undone = rows.assign(state=["change", "change", "change, undone later", "change", "change"])
    assert list(analysis.by_relevance(undone)["metric"]) == ["vgpr_count", "agprs", "sgprs", "vgpr_spills", "vgprs"]


def test_kernel_resources_across_commits(db: DashboardDB) -> None:
    at = open_page(db.path, "resources", kernel="flash_attn_generic")
    assert texts(at, "header") == ["flash_attn_generic"]
    newest = frame(at, "arch").set_index("arch")
    assert newest.loc["gfx950", "VGPRs"] == "256" and newest.loc["gfx950", "LDS bytes"] == "49,152"
    changes = frame(at, "worse")
    assert list(changes["base_text"]) == ["238 registers"] and list(changes["worse"]) == [True]
    assert list(changes["delta"]) == ["+18"] and list(changes["metric"]) == ["VGPRs"]
    assert list(changes["history"]) == [""]  # the compile_metrics table's rows are no benchmark's series
    assert list(changes["undone"]) == [""]  # the change still holds
    assert charts(at) == 1
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    line = next(layer for layer in spec["spec"]["layer"] if layer["mark"]["type"] == "line")
    assert line["mark"]["invalid"] == "break-paths-filter-domains"  # a failed compile breaks it, no drop to 0
    assert line["encoding"]["strokeDash"]["field"] == "arch"
    at.toggle(key="by_commit").set_value(True).run()  # the changes in commit order, newest first
    assert not at.exception and list(frame(at, "worse")["undone"]) == [""]


def test_roofline_uses_the_measured_ceilings(db: DashboardDB) -> None:
    if not db.has_h200:
        pytest.skip("the real H200 results (results/flybench/dev-h200) are not in this checkout")
    at = open_page(db.path, "roofline", machine="dev-h200")
    roofs, points = frame(at, "basis").set_index("ceiling"), frame(at, "intensity")
    gemm = points[points["label"].str.startswith("gemm · ")]
    assert roofs.loc["bf16 matrix", "basis"].startswith("measured: gemm")
    assert roofs.loc["bf16 matrix", "tflops"] == pytest.approx(gemm["tflops"].max(), abs=0.05)  # shown as %.1f
    assert roofs.loc["memory copy", "gbps"] > 1000 and roofs.loc["memory copy", "basis"] == "measured: gemm copy-1GiB (cublas)"
    assert roofs.loc["fp8 matrix", "basis"].startswith("vendor")
    assert list(points["intensity"]) == pytest.approx(list(1000 * points["tflops"] / points["gbps"]))
    assert charts(at) == 1
    cases = frame(at, "history")
    assert cases["history"].str.startswith("history?").all() and len(cases) == len(points)
    toy = frame(open_page(db.path, "roofline", subject=PROJECT), "intensity")  # 1e11 FLOP over 5e8 bytes
    assert len(toy) > 0 and list(toy["intensity"]) == pytest.approx([200.0] * len(toy))


def test_one_case_reads_one_roof_fraction_on_overview_and_roofline(db: DashboardDB) -> None:
    """The ctx32k Triton diffusion-attention point once read 25.4% on Roofline and 18.0% on an Overview filtered to
    its workload (the filter left out the gemm rows the measured roofs come from, so it fell back to the vendor's)."""
    if not db.has_h200:
        pytest.skip("the real H200 results (results/flybench/dev-h200) are not in this checkout")
    label = "diffusion_attention · dream7b-b1-ctx32k-d32-p16-bidir · bf16"
    overview = open_page(db.path, subject="flybench", machine="dev-h200", workload="diffusion_attention")
    shown = frame(overview, "tflops").set_index(["label", "provider"]).loc[(label, "triton")]
    roofline = open_page(db.path, "roofline", machine="dev-h200", workload="diffusion_attention")
    point = frame(roofline, "intensity").set_index(["label", "provider"]).loc[(label, "triton")]
    assert shown["of_roof"] == pytest.approx(point["of_roof"], rel=1e-3)
    assert shown["roof_basis"] == point["roof_basis"] and "measured: gemm" in shown["roof_basis"]
    for at in (overview, roofline):  # the basis is stated on both pages, in the same words
        stated = [c for c in texts(at, "caption") if c.startswith("Roofs (one basis on every page")]
        assert stated and "memory copy (measured: gemm copy-1GiB (cublas))" in stated[0]


def test_xla_is_named_by_what_it_runs_on_each_workload(db: DashboardDB) -> None:
    """XLA's attention is jax.nn.dot_product_attention: it was labelled "XLA (ragged_dot)", the MoE's path."""
    from dashboard.names import provider_label

    assert provider_label("xla", "moe") == "XLA (ragged_dot)"
    assert provider_label("xla", "attention") == "XLA (dot_product_attention)" and provider_label("xla") == "XLA"
    if not db.has_h200:
        pytest.skip("the real H200 results (results/flybench/dev-h200) are not in this checkout")
    latest = frame(open_page(db.path, subject="flybench", machine="dev-h200"), "tflops")
    xla = latest[latest["provider"] == "xla"]
    assert len(xla) and not (xla["label"].str.startswith("attention") & (xla["provider_label"] == "XLA (ragged_dot)")).any()
    assert "XLA (dot_product_attention)" in set(xla.loc[xla["label"].str.startswith("attention "), "provider_label"])


def test_a_partial_newest_run_hides_no_provider(db: DashboardDB) -> None:
    """dev-h200's newest run measured jax-triton alone (83e5ed1b). The p64 case's Triton kernel (66 us, from an
    earlier run) stays on Overview and Roofline beside the jax.jit variant (485 us), as was once not the case."""
    if not db.has_h200:
        pytest.skip("the real H200 results (results/flybench/dev-h200) are not in this checkout")
    label = "diffusion_attention · llama3-8b-b8-ctx4k-d32-p64-bidir · bf16"
    overview = frame(open_page(db.path, subject="flybench", machine="dev-h200"), "tflops")
    shown = overview[overview["label"] == label].set_index("provider")
    assert {"triton", "jax-triton", "torch", "xla"} <= set(shown.index)
    assert shown.loc["triton", "shown"].startswith("66") and shown.loc["triton", "shown"].endswith("μs")
    assert shown.loc["triton", "tflops"] > 5 * shown.loc["jax-triton", "tflops"]
    points = frame(open_page(db.path, "roofline", machine="dev-h200"), "intensity")
    on_roofline = set(points.loc[points["label"] == label, "provider"])
    assert {"triton", "jax-triton"} <= on_roofline


@pytest.mark.parametrize("page", [None, "history", "compare", "regressions", "resources", "roofline", "model"])
def test_missing_database_says_how_to_fill_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: str | None) -> None:
    monkeypatch.setenv("FLYBENCH_DB", str(tmp_path / "none.duckdb"))
    at = open_page(tmp_path / "none.duckdb", page)
    assert any("Nothing to show yet" in i for i in texts(at, "info"))
    assert any("flybench ingest" in c.value and "flybench import flydsl-ci" in c.value for c in at.code)
    assert not charts(at)


def test_empty_database_says_how_to_fill_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with connect(tmp_path / "empty.duckdb"):
        pass  # the schema, no rows
    monkeypatch.setenv("FLYBENCH_DB", str(tmp_path / "empty.duckdb"))
    at = open_page(tmp_path / "empty.duckdb", "history")
    assert any("holds no results yet" in i for i in texts(at, "info"))


def test_database_locked_by_a_writer_says_busy(dash_db: DashboardDB, tmp_path: Path,  # noqa: F811
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    db = Path(shutil.copy(dash_db.path, tmp_path / "locked.duckdb"))
    # The writer holds the lock until the test closes its stdin (it was 60 s: a page run slower than that, on a
    # loaded machine, found the lock gone).
    hold = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); sys.stdin.read()"
    writer = subprocess.Popen([sys.executable, "-c", hold, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "locked"
        monkeypatch.setenv("FLYBENCH_DB", str(db))
        at = open_page(db, "history")
        [busy] = [w for w in texts(at, "warning") if "The database is busy" in w]
        # the holder's PID and the server's paths are the operator's business, not a visitor's
        assert str(writer.pid) not in busy and str(tmp_path) not in busy and "locked.duckdb" not in busy
    finally:
        writer.kill()
        writer.wait()


def test_a_bare_duckdb_file_reads_as_empty_not_as_an_old_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    duckdb.connect(str(tmp_path / "bare.duckdb")).close()  # a file with no table at all
    monkeypatch.setenv("FLYBENCH_DB", str(tmp_path / "bare.duckdb"))
    at = open_page(tmp_path / "bare.duckdb")
    assert any("holds no results yet" in i for i in texts(at, "info"))
    assert not any("schema" in t for kind in ("info", "warning") for t in texts(at, kind))


def test_a_url_filter_with_no_results_says_so_instead_of_showing_the_rest(db: DashboardDB) -> None:
    at = open_page(db.path, "roofline", arch="gfx1100")
    (warning,) = texts(at, "warning")
    assert warning.startswith("Architecture gfx1100: nothing on this page for it") and not charts(at)


def test_values_from_the_url_are_shown_as_text_not_markdown(db: DashboardDB) -> None:
    """A crafted link cannot put a live link, an image or code on the page: its values are escaped."""
    phish = "[Session expired: sign in again](https://evil.example/login)"
    (warning,) = texts(open_page(db.path, "roofline", machine=phish), "warning")
    assert "\\[Session expired: sign in again\\](https:\u200b//evil.example/login)" in warning  # no autolink
    (warning,) = texts(open_page(db.path, "roofline", provider="![x](http://127.0.0.1:9/p.png)"), "warning")
    assert warning.startswith("Provider \\!\\[x\\](http:\u200b//127.0.0.1:9/p.png): nothing on this page")
    alert = open_page(db.path, "regressions", subject=PROJECT, machine=MACHINE, series="x` **bold** `y")
    assert "The alert of x\\` \\*\\*bold\\*\\* \\`y only" in texts(alert, "info")[0]


def test_compare_refuses_a_commit_against_itself(db: DashboardDB) -> None:
    head = db.project.commits[3][:8]
    at = open_page(db.path, "compare", repo=PROJECT, machine_a=MACHINE, base=head, head=head)
    assert texts(at, "info") == ["Base and head are the same commit: pick two different ones."]
    assert not any("improvement" in m and not m.startswith("**0") for m in texts(at, "markdown")) and not charts(at)


def test_compare_opens_on_two_commits_that_share_cases(ci_db: Path) -> None:
    at = open_page(ci_db, "compare")
    assert at.selectbox(key="repo").value == "flydsl"  # measured on the most architectures
    summary = next(m for m in texts(at, "markdown") if " on linux-flydsl-" in m)
    assert " 0 unchanged" not in summary and "unchanged" in summary  # the two share measured cases
    machines = open_page(ci_db, "compare", mode="two machines")
    assert (machines.selectbox(key="machine_a").value, machines.selectbox(key="machine_b").value) == (
        "linux-flydsl-mi325-1", "linux-flydsl-mi355-1")  # gfx942 against gfx950
    table = frame(machines, "verdict")
    marked = table[table["base_text"] != "n/a †"]
    assert marked["base_text"].str.endswith(" †").all() and marked["head_text"].str.endswith(" †").all()


def test_regressions_mark_imports_follow_the_runs_rule_and_leave_compile_durations_out(ci_db: Path) -> None:
    main = frame(open_page(ci_db, "regressions"), "commits")
    imported = main[main["machine"].str.startswith("linux-flydsl")]
    assert len(imported) and imported["base_text"].str.endswith(" †").all()
    assert set(imported["run"]) <= {"main"}  # main only by default: no step whose first bad commit is a PR's
    assert not main["benchmark"].str.endswith(".track_compile_time").any()
    everything = frame(open_page(ci_db, "regressions", runs="all"), "commits")
    assert len(everything) >= len(main)


def test_regressions_are_read_from_the_store_not_refitted(db: DashboardDB, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps the ingest stored are the page's answer: no step detection while they are current, one read
    per database version; a write that did not store them is answered by a replay until the next ingest."""
    from dashboard import data
    from flybench.regress import stored

    copy = tmp_path / "copy.duckdb"  # a file no other test has cached answers for
    shutil.copy(db.path, copy)
    monkeypatch.setenv("FLYBENCH_DB", str(copy))
    fits: list[str | None] = []
    replay = stored.scan_scope
    monkeypatch.setattr(stored, "scan_scope", lambda db, scope, *a, **k: fits.append(scope[1]) or replay(db, scope, *a,
                                                                                                           **k))
    reads: list[object] = []
    read = data.LOADERS["regressions"]
    monkeypatch.setitem(data.LOADERS, "regressions", lambda *a, **k: reads.append(k) or read(*a, **k))
    at = open_page(copy, "regressions")
    at.toggle(key="all_changes").set_value(True).run()
    at.multiselect(key="machine").select(SECOND).run()
    assert not at.exception and len(reads) == 1 and fits == []  # widget changes: served from the cache
    with connect(copy) as conn:  # new rows, stored by something that did not store the steps
        conn.execute("UPDATE results SET value = value * 2 WHERE machine = ?", [SECOND])
    open_page(copy, "regressions")
    assert len(reads) == 2 and fits == [SECOND]


def test_history_benchmark_picker_reads_as_labels_and_the_url_keeps_the_id(db: DashboardDB) -> None:
    at = open_page(db.path, "history", subject=PROJECT, benchmark="attention.Quick.track_time")
    picker = at.selectbox(key="benchmark")
    assert picker.value == "attention.Quick.track_time"
    assert "attention · Quick · time" in picker.options  # what a person reads
    assert not any(o.endswith(".track_time") for o in picker.options if o.startswith("attention"))
    other = next(o for o in picker.options if o != "attention · Quick · time")
    picker.select(other).run()  # AppTest selects by the shown label
    chosen = at.selectbox(key="benchmark").value
    assert chosen != "attention.Quick.track_time" and "." in chosen  # the value is still the id
    assert at.query_params["benchmark"] in (chosen, [chosen])  # and the link keeps the id, not the label


VIEWS = [(None, {}), ("history", {}), ("compare", {}), ("compare", {"mode": "two machines"}), ("regressions", {}),
         ("regressions", {"all_changes": "true"}), ("resources", {}), ("roofline", {})]


def unreadable_cells(at: AppTest) -> list[str]:
    """Cells of the page's tables that Streamlit's grid would draw as "None" (a null) or that read None or nan."""
    found = []
    for table in at.dataframe:
        shown = table.value
        for column in shown.columns:
            values = shown[column]
            for row in values.index[values.isna()]:
                found.append(f"{column}[{row}] is null (drawn as None)")
            for row, value in values.items():
                if isinstance(value, str) and value.strip().lower() in ("none", "nan", "none †", "nan †"):
                    found.append(f"{column}[{row}] reads {value!r}")
    return found


@pytest.mark.parametrize(("page", "query"), VIEWS)
def test_no_table_shows_none(db: DashboardDB, page: str | None, query: dict[str, str]) -> None:
    at = open_page(db.path, page, **query)
    assert at.dataframe and not unreadable_cells(at), unreadable_cells(at)[:10]


@pytest.mark.parametrize(("page", "query"), VIEWS)
def test_no_table_of_imported_data_shows_none(ci_db: Path, page: str | None, query: dict[str, str]) -> None:
    at = open_page(ci_db, page, **query)
    assert at.dataframe and not unreadable_cells(at), unreadable_cells(at)[:10]


def test_kernel_resources_link_each_change_to_its_series_history(db: DashboardDB, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = Path(__file__).resolve().parents[1] / "results" / "flydsl"
    if not (compiled / "cpu-compile").is_dir():
        pytest.skip("the committed compile-only history (results/flydsl) is not in this checkout")
    copy = Path(shutil.copy(db.path, tmp_path / "compiled.duckdb"))
    assert ingest(compiled, copy).ok
    monkeypatch.setenv("FLYBENCH_DB", str(copy))
    at = open_page(copy, "resources", kernel="flash_attn_generic:causal_m128")
    changes = frame(at, "history")
    results = changes["machine"] == "cpu-compile"  # the machine code history's rows are no benchmark's series
    assert results.any() and changes.loc[results, "history"].str.startswith("history?").all()
    assert (changes.loc[~results, "history"] == "").all()
    link = parse_qs(urlsplit(changes.loc[results, "history"].iloc[0]).query)
    history = open_page(copy, "history", **{k: v[0] for k, v in link.items()})
    assert "flash_attn_generic:causal_m128" in texts(history, "header")[0] and charts(history) == 1


def test_no_page_module_has_a_bare_string_streamlit_would_draw() -> None:
    """Streamlit draws a page module's bare string literals (after its docstring) as markdown: a constant's
    docstring there shows up at the top of the page."""
    import ast

    for module in sorted((ROOT / "dashboard" / "views").glob("*.py")):
        body = ast.parse(module.read_text()).body[1:]
        bare = [n.lineno for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                and isinstance(n.value.value, str)]
        assert bare == [], f"{module.name}: bare strings at lines {bare}"


def test_a_pull_request_push_is_held_against_its_same_job_base_with_both_verdicts(ci_db: Path) -> None:
    """FlyDSL's PR #812: each case of its newest push against the main its CI job rebuilt beside it."""
    raw = [r for r in flydsl_ci_records() if r.get("pr") == 812]
    newest = max(r["ts"] for r in raw)
    at = open_page(ci_db, "pull_request", pr="812")
    assert not at.exception
    pushes = frame(at, "cases")
    assert len(pushes) == len({r["commit"] for r in raw})  # one row per push
    assert pushes["job_time"].iloc[0] == pd.Timestamp(newest.rstrip("Z"))  # newest first
    cases = frame(at, "base_source")
    pushed = next(r["commit"] for r in raw if r["ts"] == newest)
    record = max((r for r in raw if r["commit"] == pushed and r["op"] == "flash_attn" and r.get("vs_main")
                  and r["runner"] == "linux-flydsl-mi325-1" and r["shape"] == "B4S8192H64Hkv8D128_causal"),
                 key=lambda r: r["ts"])  # a re-run's newest record is the one the store keeps
    row = cases[cases["label"] == "flash_attn · B4S8192H64Hkv8D128_causal · bf16"].set_index("machine").loc[
        "linux-flydsl-mi325-1"]
    assert row["base"] == pytest.approx(record["vs_main"]["baseline"]) and row["base_source"] == "same job: main"
    assert row["change"] == pytest.approx(record["value"] / record["vs_main"]["baseline"] - 1, abs=5e-4)
    assert row["flybench"] == "slower" and bool(row["source_regression"]) == record["regression"]
    assert row["ci_run"] == f"https://github.com/ROCm/FlyDSL/actions/runs/{record['run_id']}"
    slower = cases[cases["flybench"] == "slower"]
    (title,) = [h for h in texts(at, "subheader") if "slower" in h]
    assert title.startswith(f"{record['commit'][:8]} (") and f"{len(slower)} slower" in title
    assert (slower["change"] < 0).all() and (cases.loc[cases["flybench"] == "faster", "change"] > 0).all()
    without = cases[~cases["base_source"].str.startswith("same job")]
    assert without["base_source"].str.startswith(("main at ", "no main run")).all()


def test_a_store_without_pull_request_runs_says_where_they_come_from(db: DashboardDB) -> None:
    at = open_page(db.path, "pull_request")
    assert not at.exception and not at.dataframe
    (info,) = texts(at, "info")
    assert info.startswith("No pull-request runs in this store.") and "flybench import flydsl-ci" in info \
        and "flybench gate" in info


def test_steps_the_environment_made_are_listed_apart_never_as_regressions(
        db: DashboardDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from dashboard import data
    from flybench.regress.episodes import ENVIRONMENT

    copy = tmp_path / "copy.duckdb"  # a file no other test has cached answers for
    shutil.copy(db.path, copy)
    monkeypatch.setenv("FLYBENCH_DB", str(copy))
    read = data.LOADERS["regressions"]
    monkeypatch.setitem(data.LOADERS, "regressions", lambda *a, **k: [
        replace(r, kind=ENVIRONMENT) if r.kind == "step" else r for r in read(*a, **k)])
    at = open_page(copy, "regressions", subject=PROJECT)
    assert "No open regression for this selection." in texts(at, "success")
    (heading,) = [h for h in texts(at, "subheader") if "environment" in h]
    moved = frame(at, "commits")
    assert heading == f"{len(moved)} step{'s' if len(moved) != 1 else ''} the environment made (not regressions)"
    assert len(moved) > 0 and set(moved["kind"]) == {ENVIRONMENT}


def test_an_accepted_level_closes_its_alert_on_the_page_as_in_the_cli(db: DashboardDB, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`flybench accept --db STORE`, run in another folder, writes beside the store; the page reads it there as
    `flybench regressions` does: the alert leaves the open list, the toggle for closed alerts shows it as
    accepted, and the reason given is shown."""
    from flybench.cli import main as cli

    copy = tmp_path / "copy.duckdb"  # a file no other test has cached answers for
    shutil.copy(db.path, copy)
    monkeypatch.setenv("FLYBENCH_DB", str(copy))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # neither the verb nor the page reads ./results/accepted.json of this folder
    series = "attention.Quick.track_time(c1, flydsl, bf16)"
    assert cli(["accept", series, db.project.commits[3][:8], "--reason", "exact lse", "--db", str(copy),
                "--machine", MACHINE]) == 0
    assert (tmp_path / "copy.accepted.json").is_file() and not (elsewhere / "results").exists()
    monkeypatch.chdir(tmp_path)
    page = open_page(copy, "regressions", subject=PROJECT)
    assert "attention.Quick.track_time" not in set(frame(page, "commits")["benchmark"])
    levels = frame(page, "reason")
    assert list(levels["reason"]) == ["exact lse"] and list(levels["series"]) == [series]
    closed = frame(open_page(copy, "regressions", subject=PROJECT, closed="true"), "commits").set_index("benchmark")
    assert closed.loc["attention.Quick.track_time", "state"] == "accepted alert"


def test_the_overview_counts_no_accepted_alert(ci_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where FlyDSL stands counts the open alerts of each op; one accepted there leaves the count as on the
    Regressions page and in the CLI."""
    from flybench.cli import main as cli
    from flybench.regress import load_config, stored

    copy = tmp_path / "ci.duckdb"
    shutil.copy(ci_db, copy)
    monkeypatch.setenv("FLYBENCH_DB", str(copy))
    alert = next(r for r in stored.regressions(copy, config=load_config())
                 if r.regressed and r.context == "main" and ".FlydslCI." in r.benchmark)  # an imported op's alert

    def alerts() -> int:
        standing = frame(open_page(copy), "alerts")
        return int(standing["alerts"].sum())

    before = alerts()
    assert cli(["accept", alert.series, alert.step.first_bad[:8], "--reason", "tile change, intended",
                "--db", str(copy), "--machine", alert.machine, "--subject", alert.subject]) == 0
    assert alerts() == before - 1


def test_regressions_on_a_store_without_any_change_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first store a new user builds from the committed H200 results has no resource change (nor an open
    alert): the page says so instead of failing on the empty table."""
    h200 = APP.parents[1] / "results" / "flybench"
    if not any(h200.glob("*/*.json")):
        pytest.skip("no committed results in this checkout")
    db = tmp_path / "own.duckdb"
    assert ingest(h200, db).ok
    monkeypatch.setenv("FLYBENCH_DB", str(db))
    at = open_page(db, "regressions")
    assert "No resource got worse in this selection." in texts(at, "success")


FLYDSL_CLONE = Path("/work/.mirror/ROCm+FlyDSL/repo")
"""A clone of FlyDSL with main's history, where this machine has one: what gives the import its code attribution."""


@pytest.fixture(scope="module")
def attributed_store(ci_store: Path, dash_db: DashboardDB,  # noqa: F811
                     tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture database plus FlyDSL CI's month imported with a clone of FlyDSL: its steps attributed to code."""
    from test_import_flydsl_ci import DATA as FLYDSL_CI

    from flybench.importers.flydsl_ci import import_file
    from flybench.regress import stored

    if not (FLYDSL_CLONE / "HEAD").is_file():
        pytest.skip(f"no FlyDSL clone at {FLYDSL_CLONE}")
    db = Path(shutil.copy(dash_db.path, tmp_path_factory.mktemp("attributed") / "attributed.duckdb"))
    assert import_file(FLYDSL_CI, db, flydsl_repo=FLYDSL_CLONE).ok
    stored.refresh(db)
    return db


def test_history_names_the_alerts_attributed_pull_request_not_the_ranges_tip(
        attributed_store: Path, dash_db: DashboardDB, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """FlyDSL CI's month imported with a clone: the gemm step on both architectures is attributed to #768, whose
    own CI job measured the drop; the range's newest commit is #741's. The steps table and the red rule's label
    name #768 with the alert's evidence, as `flybench regressions` does."""
    from flybench.regress import stored

    db = attributed_store
    monkeypatch.setenv("FLYBENCH_DB", str(db))
    monkeypatch.setenv("FLYBENCH_ASV_CONFIG", str(dash_db.asv_config))
    at = open_page(db, "history", benchmark="gemm.FlydslCI.track_tflops",
                   params="8192x8192x8192, tile128x256x128, fp8")
    steps = frame(at, "attributed").set_index("panel")
    alerts = {r.machine: r for r in stored.regressions(db) if r.regressed
              and r.series == "gemm.FlydslCI.track_tflops(8192x8192x8192, tile128x256x128, flydsl, fp8)"}
    assert len(steps) == len(alerts) == 2
    for machine, alert in alerts.items():
        row = steps.loc[next(p for p in steps.index if machine in p)]
        assert row["evidence"] == alert.evidence  # the CLI's words
        named = row["attributed"].split(", ")
        assert "#768" in named and "#741" not in named  # the culprit the paired run confirms; not the tip's PR
        assert "(#741)" in row["message"]  # the range's newest commit, said as such
    labels = {t for chart in at.get("vega_lite_chart") for d in chart.proto.datasets
              for t in _arrow_column(d.data.data, "tag")}  # the red rules' labels the browser draws
    assert labels and all(t.startswith("#") and "(attributed), seen at 3f5846bf" in t for t in labels)


def _arrow_column(ipc: bytes, name: str) -> list[str]:
    import pyarrow as pa

    table = pa.ipc.open_stream(ipc).read_all()
    return [v for v in table.column(name).to_pylist() if v] if name in table.column_names else []


def test_the_model_lane_says_which_splits_predate_a_change_of_the_attribution_method(db: DashboardDB) -> None:
    """The committed H200 splits were traced at c956a724, before the attribution fixes (2247860, 5d2675c): the page
    says so above them and in each row, and the Amdahl check inherits it."""
    if not db.has_h200:
        pytest.skip("no committed H200 results in this checkout")
    at = open_page(db.path, "model")
    [warning] = [w for w in texts(at, "warning") if "attribution method" in w]
    assert "traced at c956a724" in warning and "flybench run -w mixtral_step --roles" in warning
    split = frame(at, "step_ms")
    assert len(split) and all(m.startswith("before 2247860 (") and "; 5d2675c (" in m for m in split["method"])
    checks = frame(at, "predicted")
    assert len(checks) and all(m.startswith("before 2247860") for m in checks["method"])


def test_a_split_traced_after_every_method_change_reads_current() -> None:
    from flybench.model.attribution import METHOD_CHANGES

    newest = pd.Timestamp(METHOD_CHANGES[-1].date)
    assert frames.method_text(newest + pd.Timedelta(minutes=1)) == "current"
    assert frames.method_text((newest - pd.Timedelta(minutes=1)).tz_localize(None)).startswith(
        f"before {METHOD_CHANGES[-1].commit[:7]} (")
    assert frames.method_text(pd.NaT).startswith("unknown")


def test_the_environments_steps_say_the_rule_and_whether_each_recovered(
        attributed_store: Path, dash_db: DashboardDB, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The environment's steps are the ones whose range changed nothing the series runs; each says whether its
    series is back at its old level, read from the series' newest value."""
    from flybench.store import queries

    monkeypatch.setenv("FLYBENCH_DB", str(attributed_store))
    at = open_page(attributed_store, "regressions")
    assert any("changed nothing the series runs" in c for c in texts(at, "caption"))
    steps = frame(at, "since")
    assert len(steps) and all(s.startswith(("recovered (now ", "still at the new level (now ")) for s in steps["since"])
    main = queries.imported_run_rows(attributed_store, context="main").sort_values("job_time")
    for r in steps.itertuples():
        newest = main[(main["machine"] == r.machine) & (main["benchmark"] == r.benchmark)
                      & (main["params"].map(lambda p: ", ".join(map(str, json.loads(p).values()))) == r.parameters)
                      ]["value"].iloc[-1]
        before, after = (float(t.split()[0].replace(",", "")) for t in (r.base_text, r.head_text))
        assert r.since.startswith("recovered") == (abs(newest - before) < abs(newest - after))


def test_the_resource_changes_count_agrees_with_the_cli(db: DashboardDB) -> None:
    """The page counted every worse change (79) where `flybench regressions` counted the standing ones (44): it
    now gives both, and the standing count is the CLI's."""
    from flybench.regress import load_config, stored

    found = [r for r in stored.regressions(db.path, config=load_config()) if r.kind == "change" and r.step.worse]
    standing = sum(r.state != "undone" for r in found)
    [said] = [c for c in texts(open_page(db.path, "regressions"), "caption") if " worse (" in c]
    assert said.startswith(f"{len(found)} worse ({standing} standing, each a regression as `flybench regressions` "
                           f"counts it; {len(found) - standing} undone by a later commit)")


def test_the_overview_says_which_results_came_with_the_repository(db: DashboardDB,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed H200 results are the machine's that ran them, not the reader's: the page says so, as
    `flybench regressions` leaves them out of its verdict."""
    if not db.has_h200 or subprocess.run(["git", "-C", str(APP.parents[1]), "rev-parse", "--git-dir"],
                                         capture_output=True).returncode != 0:
        pytest.skip("needs the committed H200 results in a git checkout")
    monkeypatch.chdir(APP.parents[1])
    [note] = [c for c in texts(open_page(db.path), "caption") if c.startswith("Came with the repository")]
    assert "dev-h200" in note and "m1-gfx950" not in note and "--include-others" in note


def test_imported_values_of_different_commits_are_flagged(ci_db: Path) -> None:
    """Each architecture's newest run can be of another commit: the imported table names the commits a row sets
    side by side, and a caption counts the rows that mix commits."""
    at = open_page(ci_db)
    table = next(df.value for df in at.dataframe if "commits" in df.value.columns and "ratio" in df.value.columns)
    mixed = table[table["commits"].str.contains("commits: ")]
    for text in mixed["commits"]:
        count, hashes = text.split(" commits: ")
        assert int(count) == len(set(hashes.split(", "))) >= 2 and all(re.fullmatch(r"[0-9a-f]{8}", h)
                                                                      for h in hashes.split(", "))
    assert set(table["commits"]) - set(mixed["commits"]) <= {"one commit"}
    said = [c for c in texts(at, "caption") if "side by side values of different commits" in c]
    if mixed.empty:
        assert not said
    else:
        assert len(said) == 1 and said[0].startswith(f"{len(mixed)} of {len(table)} cases")


def test_commits_compared_names_each_commit_once() -> None:
    wide = pd.DataFrame({"gfx942 commit_hash": ["a" * 40, "b" * 40, None], "gfx950 commit_hash": ["a" * 40, "c" * 40,
                                                                                                "d" * 40]})
    assert frames.commits_compared(wide, ["gfx942", "gfx950"]) == ["one commit", f"2 commits: {'b' * 8}, {'c' * 8}",
                                                                    "one commit"]


def test_the_runners_modes_are_named_and_drawn_where_a_series_flips(ci_db: Path) -> None:
    """FlyDSL's MI355X series that flip per job between speed modes (`flybench.regress.modes` on the stored
    values): the longest one's History says so under the chart and draws each mode as a grey band at its levels,
    and Regressions lists it with its runner and levels."""
    from flybench.regress.modes import modes
    from flybench.store import queries

    machine, cfg = "linux-flydsl-mi355-1", RegressConfig()
    rows = queries.scan_rows(ci_db, machine, "flydsl")
    rows = rows[(rows["status"] == "ok") & rows["benchmark"].str.endswith(".track_tflops")]
    flipping = {key: found for key, group in rows.groupby(["env_name", "benchmark", "params"])
                if (found := modes(group["value"].tolist(), cfg.noise_k, math.log1p(cfg.step_floor) / 2))}
    assert flipping  # the month's data: some MI355X series flip
    (_, benchmark, params), expected = max(flipping.items(), key=lambda kv: (sum(m.runs for m in kv[1]), kv[0]))
    case = frames.case_text(params)  # as the History page's case picker names it: without the provider
    at = open_page(ci_db, "history", benchmark=benchmark, params=case)
    [said] = [c for c in texts(at, "caption") if "flips between" in c]
    assert f"flips between {len(expected)} modes on " in said and machine in said
    for m in expected:
        assert f"{m.level:.4g} TFLOP/s ({m.runs} runs)" in said
    import pyarrow as pa

    drawn = sorted((r["lo"], r["hi"]) for chart in at.get("vega_lite_chart") for d in chart.proto.datasets
                   for r in pa.ipc.open_stream(d.data.data).read_all().to_pylist() if r.get("layer") == "mode")
    assert drawn == [(pytest.approx(m.low), pytest.approx(m.high)) for m in expected]  # the grey bands the browser draws

    at = open_page(ci_db, "regressions")
    listed = frame(at, "levels")
    mine = listed[(listed["machine"] == machine) & (listed["benchmark"] == benchmark)
                  & (listed["parameters"] == ", ".join(map(str, json.loads(params).values())))]
    assert len(mine) == 1 and mine["modes"].iloc[0] == len(expected)
    assert mine["levels"].iloc[0] == ", ".join(f"{m.level:.4g}" for m in expected)
