"""The history scan (`flybench.regress.scan`): code steps open alerts, the runner's do not, and the alerts are the
same whichever way the history arrived (FlyDSL's real CI month, read from ../shared/data, never copied here)."""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path

import pandas as pd
import pytest

from flybench.importers.flydsl_ci.store import import_file
from flybench.regress import RegressConfig, checkpoint, scan, stored
from flybench.store import connect, queries

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
    values = noisy(1000, 10, 1) + [v * 0.94 for v in noisy(1000, 6, 2)]
    found = replay({(BENCH, "a"): values}, attribution(16, {"c10": [(BENCH, "a")]}))
    [alert] = found.alerts
    assert (alert.regression.step.last_good, alert.regression.step.first_bad, alert.status) == ("c09", "c10", "open")
    assert alert.regression.evidence == ("code (files only: no registered kernel covers this series): #110 changed "
                                         "what it runs (kernels/gemm.py)")
    assert alert.opened_through == "c11"  # seen once two runs held the new level


def test_a_young_series_alone_is_not_judged_until_its_runs_say_how_they_scatter() -> None:
    """Eight runs of a series with no other series of its workload on the machine: its step waits until the
    series has more than YOUNG runs."""
    values = noisy(1000, 8, 1) + [v * 0.94 for v in noisy(1000, 6, 2)]
    [alert] = replay({(BENCH, "a"): values}, attribution(14, {"c08": [(BENCH, "a")]})).alerts
    assert (alert.regression.step.first_bad, alert.opened_through) == ("c08", f"c{scan.YOUNG:02d}")


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
    """Over a range that changed nothing the series runs, a move to a level it already visited is its modes."""
    modes = [1000, 1000, 940, 1000, 940, 1000, 1000, 940, 1000, 1000, 1000, 1000, 940, 940, 940, 940]
    found = replay({(BENCH, "a"): modes}, attribution(16, {c: [(BENCH, "b")] for c in ("c12", "c13")}))
    assert found.alerts == []


def test_a_step_back_to_a_level_the_series_held_is_a_step_when_the_range_changed_its_code() -> None:
    """A change that undoes an earlier change (an optimisation reverted) goes back to a level the series held
    some runs before: over a range that changed the code it is a step, not a flip between modes."""
    values = noisy(940, 6, 1) + noisy(1000, 10, 2) + noisy(940, 4, 3)
    touched = {c: [(BENCH, "a")] for c in ("c06", "c16")}
    found = replay({(BENCH, "a"): values}, attribution(len(values), touched))
    assert [(a.regression.step.first_bad, a.status) for a in found.alerts] == [("c16", "open")]
    assert replay({(BENCH, "a"): values}, attribution(len(values), {"c06": [(BENCH, "a")]})).alerts == []


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
    for db in (nightly, at_once):  # the stored (resumed) scans equal a replay from the first commit
        with connect(db, read_only=True) as conn:
            scopes = conn.execute("SELECT subject, machine FROM scan_checkpoints").fetchall()
        for scope in scopes:
            whole = stored.scan_scope(db, scope, RegressConfig())
            with connect(db, read_only=True) as conn:
                kept = conn.execute("SELECT count(*) FROM alerts WHERE subject = ? AND machine = ?",
                                    list(scope)).fetchone()[0]
            assert kept == len(whole.alerts)


@pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} not found (the shared data folder)")
def test_a_nightly_resumes_the_stored_replay_and_reads_only_the_new_commits(tmp_path: Path) -> None:
    with gzip.open(DATA, "rt") as f:
        document = json.load(f)
    records = document["records"]
    middle = sorted(r["ts"] for r in records)[len(records) // 2]
    db, part = tmp_path / "store.duckdb", tmp_path / "part.json"
    part.write_text(json.dumps({**document, "records": [r for r in records if r["ts"] <= middle]}))
    import_file(part, db)
    stored.refresh(db)
    import_file(DATA, db)
    scope = ("flydsl", "linux-flydsl-mi355-1")
    resumed = stored._replayed(db, scope, RegressConfig(), stored.fingerprint(RegressConfig()))
    assert resumed.moved is not None and 0 < len(resumed.moved)
    assert sorted(map(repr, resumed.replay.scan().alerts)) == \
        sorted(map(repr, stored.scan_scope(db, scope, RegressConfig()).alerts))
    with connect(db) as conn:  # a changed row of a judged commit: the replay starts again from the first commit
        conn.execute("UPDATE results SET value = value * 2 WHERE rowid = (SELECT min(rowid) FROM results "
                     "WHERE machine = ? AND value IS NOT NULL)", [scope[1]])
    assert stored._replayed(db, scope, RegressConfig(), stored.fingerprint(RegressConfig())).moved is None


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


def machine_attribution(runs: int, codes: dict[str, str], touched: dict[str, list[tuple[str, str]]] | None = None,
                        compiler: tuple[str, ...] = (), cxx: tuple[str, ...] = ()) -> scan.Attribution:
    """Every run's commit known; `codes`: commit -> the hash of kernel k's machine code from that commit on (series
    a runs k on gfx950), each commit compiled on wheel 0.2.4 with its python/flydsl laid over; the `compiler`
    commits changed python/flydsl, the `cxx` ones the compiler's C++."""
    hashes, code = [f"c{i:02d}" for i in range(runs)], "h0"
    rows = []
    for h in hashes:
        code = codes.get(h, code)
        rows.append({"hash": h, "kernel": "k", "arch": "gfx950", "code_hash": code, "status": "ok",
                     "library": f"flydsl 0.2.4 + python/flydsl of {h}", "detail": ""})
    changes = pd.DataFrame({"hash": hashes, "position": range(runs), "merged_pr": [100 + i for i in range(runs)],
                            "title": ["t"] * runs,
                            "files": [["python/flydsl/expr/typing.py"] if h in compiler else
                                      ["lib/Dialect/Fly/IR/FlyOps.cpp"] if h in cxx else ["docs/a.md"] for h in hashes]})
    touches = pd.DataFrame([{"benchmark": b, "params": json.dumps({"case": c}), "hash": commit,
                             "files": files} for commit, hit in (touched or {}).items() for b, c, *files in hit],
                           columns=["benchmark", "params", "hash", "files"])
    kernels = pd.DataFrame([{"benchmark": BENCH, "params": json.dumps({"case": "a"}), "kernel": "k",
                             "arch": "gfx950"}])
    return scan.Attribution(changes, touches, pd.DataFrame(columns=["benchmark", "params", "pr", "delta_pct"]),
                            pd.DataFrame(rows), kernels)


STEP = noisy(1000, 8, 1) + [v * 0.94 for v in noisy(1000, 6, 2)]


def test_a_compiler_only_range_whose_machine_code_changed_is_a_code_step_that_names_the_kernel() -> None:
    found = replay({(BENCH, "a"): STEP}, machine_attribution(14, {"c08": "h1"}, compiler=("c08",)))
    [alert] = found.alerts
    assert alert.regression.step.first_bad == "c08"
    assert alert.regression.evidence == ("code (machine code): the machine code of k (gfx950) changed between c07 "
                                         "and c08 (#108)")


def test_a_compiler_only_range_with_identical_machine_code_is_the_environment_s_and_says_so() -> None:
    found = replay({(BENCH, "a"): STEP}, machine_attribution(14, {}, compiler=("c08",)))
    assert found.alerts == []
    [step] = found.steps
    assert step.kind == "environment"
    assert step.evidence == ("environment (machine code): the machine code of k (gfx950) is identical at c07 and c08 "
                             "over 1 commit(s) (#108)")


def test_a_kernel_refactor_that_emits_the_same_machine_code_is_cleared_but_a_harness_change_is_not() -> None:
    refactor = {"c08": [(BENCH, "a", "kernels/gemm.py")]}
    assert replay({(BENCH, "a"): STEP}, machine_attribution(14, {}, refactor)).alerts == []
    harness = {"c08": [(BENCH, "a", "tests/test_common.py")]}
    [alert] = replay({(BENCH, "a"): STEP}, machine_attribution(14, {}, harness)).alerts
    assert alert.regression.evidence.startswith("code (machine code identical, files): #108 changed what the "
                                                "benchmark runs (tests/test_common.py)")


def test_without_machine_code_the_compiler_s_files_count_as_code_and_the_alert_says_files_only() -> None:
    full = machine_attribution(14, {}, compiler=("c08",))
    changes = pd.DataFrame({"hash": [f"c{i:02d}" for i in range(14)], "position": range(14),
                            "merged_pr": [100 + i for i in range(14)], "title": ["t"] * 14,
                            "files": [["python/flydsl/expr/typing.py"] if i == 8 else [] for i in range(14)]})
    no_code = scan.Attribution(changes, pd.DataFrame(columns=["benchmark", "params", "hash", "files"]),
                               pd.DataFrame(columns=["benchmark", "params", "pr", "delta_pct"]))
    [alert] = replay({(BENCH, "a"): STEP}, no_code).alerts
    assert alert.regression.evidence == ("code (files only: no registered kernel covers this series): #108 changed "
                                         "the compiler (python/flydsl/expr/typing.py)")
    assert replay({(BENCH, "a"): STEP}, full).alerts == []  # the same range, its machine code known and identical


def test_a_step_spread_over_two_runs_is_judged_as_one_over_both_ranges() -> None:
    """The shape of FlyDSL's MI355X gemm_async 5120x5120x8320 fp8 series at #768 (about 2,300 TFLOPS, a job
    halfway, then 2,180 and lower): one job caught half the slowdown. The range covers both runs, so the change
    in the second range is found."""
    values = noisy(1000, 8, 1) + [970.0] + [v * 0.94 for v in noisy(1000, 6, 2)]
    found = replay({(BENCH, "a"): values}, attribution(len(values), {"c09": [(BENCH, "a")]}))
    [alert] = found.alerts
    assert (alert.regression.step.last_good, alert.regression.step.first_bad) == ("c07", "c08")
    assert "the step spread over two runs (c08, c09), judged as one" in alert.regression.evidence


def test_a_slow_drift_is_one_alert_that_worsens_not_an_alert_a_week() -> None:
    """Without attribution (a range the store has no commits for) a series that slides 2% a run for ten runs
    would open alert after alert; it is one alert, and each further step is an event on it."""
    unknown = scan.Attribution(pd.DataFrame(columns=["hash", "position", "merged_pr", "title"]),
                               pd.DataFrame(columns=["benchmark", "params", "hash", "files"]),
                               pd.DataFrame(columns=["benchmark", "params", "pr", "delta_pct"]))
    slide = [1000.0 * 0.98 ** max(0, i - 10) for i in range(30)]
    series = {(BENCH, c): [v * (1 + 0.002 * ((i * 7 + k) % 3 - 1)) for i, v in enumerate(slide)]
              for k, c in enumerate("ab")}
    found = replay(series, unknown)
    assert sorted(a.regression.params["case"] for a in found.alerts) == ["a", "b"]
    assert {e.event for e in found.events} == {"opened", "worsened"}


def test_a_young_series_is_held_to_its_workload_s_typical_noise() -> None:
    """A new shape's first four runs agree to 0.1% by chance, far closer than its kernel's runs do (its siblings
    scatter by 2% run to run). A 3.5% move of its fifth and sixth runs is within that noise; beside siblings that
    scatter by 0.3% it is a step."""
    young = [None] * 24 + [1000.0, 1001.0, 1000.0, 1001.0, 966.0, 967.0]
    touched = {"c28": [(BENCH, "a")]}
    noisy_siblings = {(BENCH, f"s{k}"): noisy(1000, 30, 20 + k, spread=0.02) for k in range(3)}
    assert replay({(BENCH, "a"): young, **noisy_siblings}, attribution(30, touched)).alerts == []
    quiet_siblings = {(BENCH, f"s{k}"): noisy(1000, 30, 20 + k, spread=0.003) for k in range(3)}
    [alert] = replay({(BENCH, "a"): young, **quiet_siblings}, attribution(30, touched)).alerts
    assert alert.regression.params == {"case": "a"}


def test_each_commit_is_judged_from_the_rows_up_to_it() -> None:
    """Causal: what the replay of rows up to commit c says of c (its events) is what the whole replay says of c,
    for every c; so an alert never appears 'opened at c09' only once c14 is stored."""
    values = noisy(1000, 8, 1) + [940.0] * 4 + [1000.0] + [940.0] * 2 + [1001.0, 999.0] + noisy(1002, 5, 9)
    series = {(BENCH, "a"): values, (BENCH, "b"): noisy(1000, len(values), 4)}
    att = attribution(len(values), {"c08": [(BENCH, "a")]})
    whole = replay(series, att)
    for n in range(1, len(values) + 1):
        prefix = replay({k: v[:n] for k, v in series.items()}, att)
        seen = [(e.event, e.through, e.alert.regression.step) for e in whole.events if int(e.through[1:]) < n]
        assert [(e.event, e.through, e.alert.regression.step) for e in prefix.events] == seen


def test_a_replay_resumed_from_a_stored_checkpoint_equals_the_whole_replay() -> None:
    values = noisy(1000, 8, 1) + [940.0] * 4 + [1000.0] + [940.0] * 2 + [1001.0, 999.0] + noisy(1002, 60, 9)
    series = {(BENCH, "a"): values, (BENCH, "b"): noisy(1000, len(values), 4)}
    att, frame = attribution(len(values), {"c08": [(BENCH, "a")]}), history(series)
    whole = scan.Replay("flydsl", "mi355", RegressConfig()).feed(frame, att).scan()
    resumed = scan.Replay("flydsl", "mi355", RegressConfig())
    for start in range(0, len(values), 7):
        chunk = frame[frame["commit_hash"].isin([f"c{i:02d}" for i in range(start, start + 7)])]
        resumed = resumed.feed(chunk, att)
        resumed = checkpoint.load(checkpoint.dump(resumed.trimmed()), "flydsl", "mi355", resumed.commits,
                                  RegressConfig())
    assert resumed.scan() == whole


def test_a_series_that_slides_a_little_every_run_opens_one_alert_at_its_onset() -> None:
    """A steady slide of 1% a run over twenty runs, every commit touching the kernel: its onset looks like a step,
    and from then on the series' own trend before each boundary explains every further level, so it is one
    alert, not one a week. The same 6% at once is one step."""
    touched = {f"c{i:02d}": [(BENCH, "a")] for i in range(30)}
    slide = [1000.0 * 0.99 ** max(0, i - 10) * (1 + 0.001 * (i % 2)) for i in range(30)]
    [alert] = replay({(BENCH, "a"): slide}, attribution(30, touched)).alerts
    assert alert.regression.step.first_bad in ("c11", "c12")
    at_once = [1000.0 * (1 + 0.001 * (i % 2)) * (0.94 if i >= 20 else 1) for i in range(30)]
    assert [a.regression.step.first_bad for a in replay({(BENCH, "a"): at_once}, attribution(30, touched)).alerts] \
        == ["c20"]


@pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} not found (the shared data folder)")
def test_machine_code_that_arrives_after_the_scan_makes_it_stale(tmp_path: Path) -> None:
    """The nightly compiles the night's kernels and ingests their machine code after the import's scan: the stored
    scans must be judged again with it, not kept because the rows did not change."""
    db = tmp_path / "store.duckdb"
    import_file(DATA, db)
    stored.refresh(db)
    assert stored.refresh(db) == []
    with connect(db) as conn:
        conn.execute("INSERT INTO machine_code VALUES ('flydsl', 'abc', 'k', 'gfx950', 'h', 'ok', 'w', '', NULL)")
    assert ("flydsl", "linux-flydsl-mi355-1") in stored.refresh(db)


def test_identical_machine_code_says_nothing_of_a_c_plus_plus_change_the_wheel_of_both_ends_does_not_hold() -> None:
    """Both ends compiled on one wheel with their python/flydsl laid over it: a range that changed lib/ is not
    compiled into either, so their identical machine code clears nothing, and the files decide."""
    [alert] = replay({(BENCH, "a"): STEP}, machine_attribution(14, {}, cxx=("c08",))).alerts
    assert alert.regression.evidence == (
        "code (files only: the range changed the compiler's C++, which the machine code of k (gfx950) at both ends, "
        "built on flydsl 0.2.4, does not hold): #108 changed the compiler (lib/Dialect/Fly/IR/FlyOps.cpp)")



def test_a_damaged_checkpoint_replays_from_the_first_commit(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    values = noisy(1000, 10, 1) + [v * 0.94 for v in noisy(1000, 6, 2)]
    rows = history({(BENCH, "a"): values})
    rows = rows.assign(subject="flydsl", machine="mi355")
    with connect(db) as conn:
        conn.register("rows", rows)
        conn.execute("INSERT INTO commits (subject, hash, date, branch) SELECT DISTINCT 'flydsl', commit_hash, "
                     "commit_date, 'main' FROM rows")
        conn.execute("INSERT INTO results (subject, machine, commit_hash, env_name, benchmark, params, unit, value, "
                     "status, run_context, source_file) SELECT subject, machine, commit_hash, env_name, benchmark, "
                     "params, unit, value, status, run_context, 'f' FROM rows")
    stored.refresh(db)
    with connect(db) as conn:
        conn.execute("UPDATE scan_checkpoints SET state = 'not a replay'::BLOB")
    scope = ("flydsl", "mi355")
    again = stored._replayed(db, scope, RegressConfig(), stored.fingerprint(RegressConfig()))
    assert again.moved is None and len(again.replay.scan().steps) == len(stored.scan_scope(db, scope,
                                                                                             RegressConfig()).steps)


def arch_attribution(runs: int, changed_on: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Series a runs kernel k on both targets (it is measured on a gfx942 and a gfx950 runner); k's machine code
    changes at c08 on `changed_on` only."""
    hashes = [f"c{i:02d}" for i in range(runs)]
    code = [{"hash": h, "kernel": "k", "arch": arch, "code_hash": "h1" if arch == changed_on and h >= "c08" else "h0",
             "status": "ok", "library": "flydsl 0.2.4", "detail": ""} for h in hashes for arch in ("gfx942", "gfx950")]
    changes = pd.DataFrame({"hash": hashes, "position": range(runs), "merged_pr": [100 + i for i in range(runs)],
                            "title": ["t"] * runs, "files": [["python/flydsl/expr/typing.py"] if h == "c08" else []
                                                             for h in hashes]})
    kernels = pd.DataFrame([{"benchmark": BENCH, "params": json.dumps({"case": "a"}), "kernel": "k", "arch": arch}
                            for arch in ("gfx942", "gfx950")])
    return changes, pd.DataFrame(code), kernels


def test_a_runner_s_series_is_judged_on_its_own_architecture_s_machine_code_and_names_it() -> None:
    """k's code changed for gfx942 only: on the gfx950 runner the step is the environment's, citing gfx950 code;
    on the gfx942 runner it is a code step citing gfx942 code."""
    changes, code, kernels = arch_attribution(14, "gfx942")
    empty = (pd.DataFrame(columns=["benchmark", "params", "hash", "files"]),
             pd.DataFrame(columns=["benchmark", "params", "pr", "delta_pct"]))
    on_gfx950 = replay({(BENCH, "a"): STEP}, scan.Attribution(changes, *empty, code, kernels, arch="gfx950"))
    assert on_gfx950.alerts == []
    assert on_gfx950.steps[0].evidence.startswith("environment (machine code): the machine code of k (gfx950) is "
                                                  "identical at c07 and c08")
    [alert] = replay({(BENCH, "a"): STEP}, scan.Attribution(changes, *empty, code, kernels, arch="gfx942")).alerts
    assert alert.regression.evidence == ("code (machine code): the machine code of k (gfx942) changed between c07 "
                                         "and c08 (#108)")


def test_ordinary_scatter_before_a_step_is_not_a_drift_that_eats_it() -> None:
    """The shape of FlyDSL's MI355X gemm 9728x8192x8320 fp8 series at #768: four runs that scatter (2028, 2015,
    1992, 2007 TFLOP/s), then -5.5% over a range whose machine code changed. Read as a trend, the scatter took 2.6%
    off the step; it is within one standard error of no slope. A steady slide is still a trend."""
    values = [2028.06, 2014.78, 1992.06, 2007.15, 1955.39, 1892.85, 1900.23, 1924.29, 1885.32, 1885.6]
    siblings = {(BENCH, f"s{k}"): noisy(2000, 10, 30 + k, spread=0.01) for k in range(3)}
    [alert] = replay({(BENCH, "a"): values, **siblings}, machine_attribution(10, {"c04": "h1"})).alerts
    assert alert.regression.step.first_bad == "c04"
    assert alert.regression.evidence.startswith("code (machine code): the machine code of k (gfx950) changed")
    before = [-math.log(v) for v in values[:4]]
    assert scan._drift(before, 4, 4, 0.01) == 0.0
    slide = [0.01 * i for i in range(8)]  # 1% worse every run, scattering 0.1%
    assert scan._drift(slide, 4, 4, 0.001) == pytest.approx(0.01 * 4)


def compiler_attribution(runs: int, *, pairs: dict[int, float] | None = None,
                         main_pairs: dict[str, float] | None = None) -> scan.Attribution:
    """Every run's commit known, c10 (#110) changed the compiler and nothing else; no machine code (no registered
    kernel covers series a); `pairs`: pull request -> series a's paired A/B in percent; `main_pairs`: commit ->
    its main run against the job's rebuild of main."""
    hashes = [f"c{i:02d}" for i in range(runs)]
    changes = pd.DataFrame({"hash": hashes, "position": range(runs), "merged_pr": [100 + i for i in range(runs)],
                            "title": ["t"] * runs,
                            "files": [["python/flydsl/expr/typing.py"] if h == "c10" else [] for h in hashes]})
    params = json.dumps({"case": "a"})
    paired = pd.DataFrame([{"benchmark": BENCH, "params": params, "pr": pr, "delta_pct": d}
                           for pr, d in (pairs or {}).items()], columns=["benchmark", "params", "pr", "delta_pct"])
    main = pd.DataFrame([{"benchmark": BENCH, "params": params, "hash": h, "delta_pct": d}
                         for h, d in (main_pairs or {}).items()], columns=["benchmark", "params", "hash", "delta_pct"])
    return scan.Attribution(changes, pd.DataFrame(columns=["benchmark", "params", "hash", "files"]), paired,
                            main_pairs=main)


COMPILER_STEP = noisy(1000, 10, 5) + [v * 0.93 for v in noisy(1000, 6, 6)]
QUIET_PAIRS = {100 + i: 0.3 * ((i * 5) % 3 - 1) for i in range(10)}
"""Paired A/Bs of the pull requests before #110: within 0.3% of none."""


def test_a_files_only_step_on_a_series_that_flips_is_unconfirmed_listed_apart_and_never_an_alert() -> None:
    """A compiler-only range with no machine code, on a series whose main run once differed 20% from the job's
    rebuild of the same main (a runner that flips modes within a job): nothing separates the code's step from a
    flip, so it is listed as unconfirmed, says why, and opens no alert."""
    flips = compiler_attribution(16, pairs=QUIET_PAIRS, main_pairs={"c03": 20.0, "c10": 0.2})
    found = replay({(BENCH, "a"): COMPILER_STEP}, flips)
    assert found.alerts == []
    [step] = found.steps
    assert step.kind == "unconfirmed" and not step.regressed
    assert step.evidence.startswith(
        "unconfirmed (files only, on a series that flips between runner modes: 1 same-job comparison(s) of unchanged "
        "code differ by a step's size (main at c03 +20.0%); neither the job's shift nor a paired A/B separates code "
        "from runner: no pull request of the range has a paired A/B of it): code (files only: no registered kernel "
        "covers this series): #110 changed the compiler")
    quiet = compiler_attribution(16, pairs=QUIET_PAIRS, main_pairs={"c03": 0.4, "c10": 0.2})
    [alert] = replay({(BENCH, "a"): COMPILER_STEP}, quiet).alerts  # the same step on a series that does not flip
    assert alert.regression.evidence.startswith("code (files only: no registered kernel covers this series): #110")


def test_a_pull_request_s_own_paired_a_b_beyond_its_pairs_scatter_confirms_a_flipping_series_step() -> None:
    flips = {"c03": 20.0, "c10": 0.2}
    confirmed = compiler_attribution(16, pairs={**QUIET_PAIRS, 110: -7.0}, main_pairs=flips)
    [alert] = replay({(BENCH, "a"): COMPILER_STEP}, confirmed).alerts
    assert alert.regression.evidence.endswith(
        "confirmed by the paired A/B: #110's own CI job measured it -7.0% against main, beyond 2 x the scatter of "
        "its 12 other same-job comparisons (0.4%)")
    within = compiler_attribution(16, pairs={**{100 + i: (-4.0, 4.0)[i % 2] for i in range(10)}, 110: -3.5},
                                  main_pairs=flips)
    found = replay({(BENCH, "a"): COMPILER_STEP}, within)
    assert found.alerts == []
    assert "#110's paired A/B (-3.5%) is within 2 x the scatter of its 12 other same-job comparisons" in \
        found.steps[0].evidence


def test_a_series_whose_flips_are_its_workload_s_is_confirmed_by_the_job_s_shift() -> None:
    """At c04 one job moved the workload's three untouched series and series a by 10%, and back: net of the job's
    shift series a never flipped, so its own step at the compiler's commit is an alert, and says the job's shift
    decided."""
    job = [1.10 if i == 4 else 1.0 for i in range(16)]
    subject = [v * j for v, j in zip(COMPILER_STEP, job)]
    siblings = {(BENCH, f"s{k}"): [v * j for v, j in zip(noisy(1000, 16, 40 + k), job)] for k in range(3)}
    [alert] = replay({(BENCH, "a"): subject, **siblings}, compiler_attribution(16)).alerts
    assert alert.regression.params == {"case": "a"}
    assert alert.regression.evidence.endswith("; confirmed by the job's shift: the series flipped (-10.1% at c04..c05) "
                                              "with its workload, not net of it")


def test_an_unconfirmed_step_is_stored_apart_where_the_pages_read_it(tmp_path: Path) -> None:
    found = replay({(BENCH, "a"): COMPILER_STEP},
                   compiler_attribution(16, pairs=QUIET_PAIRS, main_pairs={"c03": 20.0, "c10": 0.2}))
    db = tmp_path / "store.duckdb"
    with connect(db) as conn:
        conn.register("incoming", pd.DataFrame([stored._row(r) for r in found.steps]))
        conn.execute("INSERT INTO regression_steps BY NAME SELECT * FROM incoming")
    [row] = queries.history_steps(db, subject="flydsl", kind="unconfirmed").itertuples()
    assert (row.machine, row.first_bad) == ("mi355", "c10")
    assert row.evidence.startswith("unconfirmed (files only, on a series that flips between runner modes")
    assert queries.history_steps(db, kind="environment").empty


def seen_attribution(changed: bool, pairs: dict[int, float] | None = None) -> scan.Attribution:
    """c10 (#110) changed the compiler alone; series a runs no registered kernel, five other kernels compiled at
    every commit for gfx950 (the runner's target), k0's code changing at c10 where `changed`."""
    hashes = [f"c{i:02d}" for i in range(16)]
    code = pd.DataFrame([{"hash": h, "kernel": f"k{n}", "arch": "gfx950", "status": "ok", "detail": "",
                          "code_hash": "h1" if changed and n == 0 and h >= "c10" else "h0",
                          "library": f"flydsl 0.2.4 + python/flydsl of {h}"} for h in hashes for n in range(5)])
    changes = pd.DataFrame({"hash": hashes, "position": range(16), "merged_pr": [100 + i for i in range(16)],
                            "title": ["t"] * 16,
                            "files": [["python/flydsl/expr/typing.py"] if h == "c10" else [] for h in hashes]})
    paired = pd.DataFrame([{"benchmark": BENCH, "params": json.dumps({"case": "a"}), "pr": pr, "delta_pct": d}
                           for pr, d in (pairs or {}).items()], columns=["benchmark", "params", "pr", "delta_pct"])
    return scan.Attribution(changes, pd.DataFrame(columns=["benchmark", "params", "hash", "files"]), paired, code,
                            pd.DataFrame(columns=["benchmark", "params", "kernel", "arch"]), arch="gfx950")


def test_a_compiler_change_that_emitted_nothing_new_wherever_it_is_seen_leaves_a_files_only_step_unconfirmed() -> None:
    """#777 in FlyDSL's month changed the compiler alone and every kernel compiled at both ends for gfx942 emitted
    identical code: a step on a series no machine code covers is then not shown to be the code's, unless the pull
    request's own paired A/B says so."""
    found = replay({(BENCH, "a"): COMPILER_STEP}, seen_attribution(changed=False, pairs=QUIET_PAIRS))
    assert found.alerts == []
    [step] = found.steps
    assert step.kind == "unconfirmed"
    assert step.evidence.startswith("unconfirmed (files only: the compiler change emitted identical machine code for "
                                    "all 5 kernels compiled at both ends for gfx950, and no paired A/B separates code "
                                    "from runner: no pull request of the range has a paired A/B of it): code (files "
                                    "only: no registered kernel covers this series): #110 changed the compiler")
    [alert] = replay({(BENCH, "a"): COMPILER_STEP}, seen_attribution(changed=True, pairs=QUIET_PAIRS)).alerts
    assert alert.regression.evidence == ("code (files only: no registered kernel covers this series): #110 changed "
                                         "the compiler (python/flydsl/expr/typing.py)")
    [paired] = replay({(BENCH, "a"): COMPILER_STEP},
                      seen_attribution(changed=False, pairs={**QUIET_PAIRS, 110: -7.0})).alerts
    assert "; confirmed by the paired A/B: #110's own CI job measured it -7.0% against main" in \
        paired.regression.evidence
