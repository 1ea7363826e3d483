"""The history scan (`flybench.regress.scan`): code steps open alerts, the runner's do not, and the alerts are the
same whichever way the history arrived (FlyDSL's real CI month, read from ../shared/data, never copied here)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pandas as pd
import pytest

from flybench.importers.flydsl_ci.store import import_file
from flybench.regress import RegressConfig, scan, stored
from flybench.store import connect

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "flydsl-ci-history-2026-06-11_2026-07-12.json.gz"
BENCH = "gemm.FlydslCI.track_tflops"
OTHER = "moe_stage.FlydslCI.track_tflops"


def history(series: dict[tuple[str, str], list[float | None]], unit: str = "TFLOPS") -> pd.DataFrame:
    """Rows as `queries.history` gives them, one commit a run (c00, c01, ...), for (benchmark, case) series."""
    rows = []
    for (benchmark, case), values in series.items():
        for i, value in enumerate(values):
            rows.append({"env_name": "ci", "benchmark": benchmark, "params": json.dumps({"case": case}),
                         "unit": unit, "commit_hash": f"c{i:02d}", "value": value,
                         "status": "ok" if value is not None else "failed", "run_context": "main", "branch": "main",
                         "commit_date": pd.Timestamp("2026-06-01") + pd.Timedelta(days=i)})
    return pd.DataFrame(rows)


def attribution(runs: int, touched: dict[str, list[tuple[str, str]]] | None = None) -> scan.Attribution:
    """Every run's commit known to the store; `touched`: commit -> the (benchmark, case) series it changed."""
    changes = pd.DataFrame({"hash": [f"c{i:02d}" for i in range(runs)], "position": range(runs),
                            "merged_pr": [100 + i for i in range(runs)], "title": ["t"] * runs})
    touches = pd.DataFrame([{"benchmark": b, "params": json.dumps({"case": c}), "hash": commit,
                             "files": ["kernels/gemm.py"]} for commit, hit in (touched or {}).items() for b, c in hit],
                           columns=["benchmark", "params", "hash", "files"])
    return scan.Attribution(changes, touches, pd.DataFrame(columns=["benchmark", "params", "pr", "delta_pct"]))


def noisy(level: float, runs: int, seed: int, spread: float = 0.005) -> list[float]:
    rng = random.Random(seed)
    return [round(level * (1 + spread * rng.gauss(0, 1)), 2) for _ in range(runs)]


def replay(series: dict, att: scan.Attribution) -> scan.Scan:
    return scan.replay("flydsl", "mi355", history(series), att, RegressConfig())


def test_a_step_over_a_range_that_changed_the_kernel_opens_an_alert_that_says_why() -> None:
    values = noisy(1000, 8, 1) + [v * 0.94 for v in noisy(1000, 6, 2)]
    found = replay({(BENCH, "a"): values}, attribution(14, {"c08": [(BENCH, "a")]}))
    [alert] = found.alerts
    assert (alert.regression.step.last_good, alert.regression.step.first_bad, alert.status) == ("c07", "c08", "open")
    assert alert.regression.evidence.startswith("code: #108 changed what it runs (kernels/gemm.py)")
    assert alert.opened_through == "c09"  # seen once two runs held the new level


def test_the_same_step_over_a_range_that_changed_nothing_it_runs_is_the_environment_s() -> None:
    values = noisy(1000, 8, 1) + [v * 0.94 for v in noisy(1000, 6, 2)]
    found = replay({(BENCH, "a"): values}, attribution(14))
    assert found.alerts == []
    [step] = found.steps
    assert step.kind == "environment" and step.step.first_bad == "c08" and "none of the 1 commit(s)" in step.evidence


def test_a_job_that_moved_the_workload_s_untouched_series_is_taken_out_of_a_touched_one() -> None:
    """The runner's job at c08 slows every series of the workload by 5%; the kernel change in it touched only
    series a, which moved with the job and no more: no alert. With a real 6% on top, an alert."""
    job = [1.0] * 8 + [0.95] + [1.0] * 5
    series = {(OTHER, f"w{k}"): [v * j for v, j in zip(noisy(500, 14, 10 + k), job)] for k in range(4)}
    touched = {"c08": [(OTHER, "a")]}
    alone = replay({**series, (OTHER, "a"): [v * j for v, j in zip(noisy(800, 14, 3), job)]}, attribution(14, touched))
    assert alone.alerts == []
    lasting = [1.0] * 8 + [0.94] * 6
    real = replay({**series, (OTHER, "a"): [v * j * s for v, j, s in zip(noisy(800, 14, 3), job, lasting)]},
                  attribution(14, touched))
    assert [a.regression.step.first_bad for a in real.alerts] == ["c08"]


def test_a_bimodal_series_flipping_to_a_level_it_had_is_not_a_step() -> None:
    modes = [1000, 1000, 940, 1000, 940, 1000, 1000, 940, 1000, 1000, 1000, 1000, 940, 940, 940, 940]
    found = replay({(BENCH, "a"): modes}, attribution(16, {c: [(BENCH, "a")] for c in ("c12", "c13")}))
    assert found.alerts == []


def test_an_alert_recovers_when_two_runs_are_back_and_a_one_run_blip_does_not_close_it() -> None:
    values = noisy(1000, 8, 1) + [940.0] * 4 + [1000.0] + [940.0] * 2 + [1001.0, 999.0]
    found = replay({(BENCH, "a"): values}, attribution(len(values), {"c08": [(BENCH, "a")]}))
    [alert] = found.alerts
    assert alert.status == "recovered" and alert.closed_by == "c15"
    assert [e.event for e in found.events] == ["opened", "recovered"]


def test_a_step_back_to_the_levels_of_a_recovered_alert_reopens_it_and_counts_a_flip() -> None:
    """One alert per change of level: the fix closes it, the same slowdown coming back (long after, so the
    series is not flipping between modes it has) reopens it instead of opening a second one."""
    values = noisy(1000, 8, 1) + [940.0] * 6 + [1000.0] * 16 + [940.0] * 4
    touched = {c: [(BENCH, "a")] for c in ("c08", "c30")}
    found = replay({(BENCH, "a"): values}, attribution(len(values), touched))
    [alert] = found.alerts
    assert (alert.status, alert.flips) == ("open", 1)
    assert [e.event for e in found.events] == ["opened", "recovered", "reopened"]


def test_without_attribution_a_lone_series_needs_its_kernel_s_other_series() -> None:
    """Steps over ranges the store has no commits for are read together, as before: a lone series' step is
    dropped, two series of the kernel stepping together open alerts that say they rest on no attribution."""
    unknown = scan.Attribution(pd.DataFrame(columns=["hash", "position", "merged_pr", "title"]),
                               pd.DataFrame(columns=["benchmark", "params", "hash", "files"]),
                               pd.DataFrame(columns=["benchmark", "params", "pr", "delta_pct"]))
    step = noisy(1000, 8, 1) + [v * 0.9 for v in noisy(1000, 6, 2)]
    flat = noisy(1000, 14, 5)
    assert replay({(BENCH, "a"): step, (BENCH, "b"): flat}, unknown).alerts == []
    found = replay({(BENCH, "a"): step, (BENCH, "b"): [v * 0.99 if i >= 8 else v for i, v in enumerate(step)]},
                   unknown)
    assert sorted(a.regression.params["case"] for a in found.alerts) == ["a", "b"]
    assert all("no code attribution" in a.regression.evidence for a in found.alerts)


def test_a_resource_change_a_later_commit_undid_is_listed_as_undone_and_is_no_regression() -> None:
    vgprs = {("compile_metrics.Amd.track_vgprs", "k1"): [128, 128, 160, 160, 128, 128],
             ("compile_metrics.Amd.track_vgprs", "k2"): [128, 128, 160, 160, 160, 160]}
    found = scan.replay("flydsl", "cpu", history(vgprs, "registers"), attribution(6), RegressConfig())
    changes = {(r.params["case"], r.step.first_bad): r for r in found.steps}
    assert changes["k1", "c02"].state == "undone" and changes["k1", "c02"].evidence == "undone at c04"
    assert not changes["k1", "c02"].regressed and changes["k2", "c02"].regressed
    assert changes["k1", "c04"].state == "" and not changes["k1", "c04"].step.worse  # the fix itself


def test_a_compile_s_duration_is_never_judged() -> None:
    """How long a compile took is the compiling machine's noise: no alert, no environment step."""
    durations = {("compile_metrics.Amd.track_compile_time", "k1"): [1.5] * 8 + [3.0] * 6}
    found = scan.replay("flydsl", "cpu", history(durations, "seconds"), attribution(14, {"c08": [
        ("compile_metrics.Amd.track_compile_time", "k1")]}), RegressConfig())
    assert (found.alerts, found.steps) == ([], [])


def open_alerts(db: Path) -> set[tuple]:
    with connect(db, read_only=True) as conn:
        return set(conn.execute("SELECT machine, benchmark, params::VARCHAR, first_bad, status FROM alerts").fetchall())


@pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} not found (the shared data folder)")
def test_the_month_imported_at_once_and_night_by_night_leaves_the_same_alerts(tmp_path: Path) -> None:
    """Each night imports every record up to the end of one of main's CI runs, as the nightly does; the other
    store imports the month in one go. No clone here: the steps are judged without code attribution."""
    with gzip.open(DATA, "rt") as f:
        document = json.load(f)
    records = document["records"]
    ends = sorted({max(r["ts"] for r in records if r["run_id"] == run)
                   for run in {r["run_id"] for r in records if r.get("pr") is None}})
    nightly, part = tmp_path / "nightly.duckdb", tmp_path / "part.json"
    for end in ends:
        part.write_text(json.dumps({**document, "records": [r for r in records if r["ts"] <= end]}))
        import_file(part, nightly)
        stored.refresh(nightly)
    at_once = tmp_path / "at_once.duckdb"
    import_file(DATA, at_once)
    stored.refresh(at_once)
    assert open_alerts(nightly) == open_alerts(at_once)
    assert stored.regressions(nightly, subject="flydsl") == stored.regressions(at_once, subject="flydsl")


@pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} not found (the shared data folder)")
def test_a_history_too_short_to_judge_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from flybench.cli import main

    with gzip.open(DATA, "rt") as f:
        document = json.load(f)
    first = sorted({r["ts"] for r in document["records"] if r.get("pr") is None})[0]
    part = tmp_path / "night1.json"
    part.write_text(json.dumps({**document, "records": [r for r in document["records"] if r["ts"] <= first]}))
    db = tmp_path / "store.duckdb"
    import_file(part, db)
    capsys.readouterr()
    assert main(["regressions", "--db", str(db), "--subject", "flydsl"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("history too short to judge: the longest series here has 1 measured run(s)")
    assert "0 regressions" not in out
