"""The database the dashboard tests read, built by really ingesting real asv results, and the queries it adds.

Three sources, all real files:
- the store tests' toy asv project (tests/fixtures/asv_project.py): six commits on
  m1-gfx950, flydsl stepping up 50% at commit 3, torch flat;
- one more real `asv run` of that project at its newest commit on a second
  machine, m2-gfx942, where flydsl takes 0.80 ms and torch 1.00 ms (planted the
  way the toy project plants all its values), so there are two architectures to
  compare;
- the H200 results of a real `flybench run` (results/flybench/dev-h200 in the
  repository), when present.
At the newest commit on m1-gfx950 a case record marks flydsl as failing its
correctness check, as `flybench run` records one, so the pages must show
"failed" there; the other cases of the newest commit have records with FLOP
and byte counts, from which the store derives their TFLOP/s. compile_metrics gets the rows the store tests plant (VGPRs
238 -> 256), since nothing writes that table yet.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures.asv_project import MACHINE, PROJECT, TORCH_MS, AsvProject, build, case_record, write_sidecar

from flybench.regress import stored
from flybench.store import connect, ingest, queries

REPO = Path(__file__).resolve().parents[1]
SECOND = "m2-gfx942"


def one_round(seconds: float) -> dict[str, object]:
    """A case record's samples and median, as the measuring process that gave asv `seconds` wrote them."""
    return {"samples_s": [seconds], "median_s": seconds}
SECOND_VALUES = {"time": {"flydsl": 0.80e-3, "torch": 1.00e-3}, "tflops": {"flydsl": 125.0, "torch": 100.0}}
FAILED_REASON = "correctness: relative error 0.31 > tolerance 0.02"
COUNTS = {"version": 2, "flops": 1e11, "bytes": 5e8, "floor_s": 0.5e-3}
"""A case record's counts at the newest commit: 100 TFLOP/s at 1 ms, derived from the time by the store."""
H200_PLACES = (REPO / "results" / "flybench" / "dev-h200",)
H200_SUBJECT = "flybench"


@dataclass(frozen=True)
class DashboardDB:
    """The built database and what went into it."""

    path: Path
    project: AsvProject
    asv_config: Path
    has_h200: bool


_BUILT: dict[Path, DashboardDB] = {}


def h200_results() -> Path | None:
    """The directory of the real H200 results, if this checkout (or this machine) has them."""
    return next((p for p in H200_PLACES if any(p.glob("*-*.json")) and (p / "machine.json").is_file()), None)


def build_db(base: Path) -> DashboardDB:
    """Build (once per session and base) the dashboard's fixture database under `base`."""
    if base in _BUILT:
        return _BUILT[base]
    project = build(base / "asv_toy")
    tree = Path(shutil.copytree(project.results_dir, base / "dashboard" / "toy-results"))
    _run_second_machine(project, base / "dashboard" / "toy-m2", tree)
    newest = next((tree / MACHINE).glob(f"{project.commits[-1][:8]}-*.json"))
    write_sidecar(newest, [case_record("flydsl", status="failed", reason=FAILED_REASON, commit=project.commits[-1],
                                       errors={"out": 0.31}, samples_s=[], median_s=None, tflops=None, gbps=None,
                                       roofline_fraction=None),
                           case_record("torch", **COUNTS, **one_round(TORCH_MS[-1] * 1e-3))])
    second = next((tree / SECOND).glob(f"{project.commits[-1][:8]}-*.json"))
    on_second = {"machine": SECOND, "device": {"kind": "rocm", "arch": "gfx942", "name": "AMD Instinct MI325X"}}
    write_sidecar(second, [case_record(p, **on_second, **COUNTS, **one_round(SECOND_VALUES["time"][p]))
                           for p in ("flydsl", "torch")])
    db = base / "dashboard" / "dashboard.duckdb"
    assert ingest(tree, db, subject=PROJECT).ok
    h200 = h200_results()
    if h200 is not None:
        h200_tree = base / "dashboard" / "h200-results"
        shutil.copytree(h200, h200_tree / "dev-h200", ignore=shutil.ignore_patterns("benchmarks.json", "*.lock"))
        shutil.copy(next(p for p in (h200 / "benchmarks.json", h200.parent / "benchmarks.json") if p.is_file()),
                    h200_tree / "benchmarks.json")
        assert ingest(h200_tree, db, subject=H200_SUBJECT).ok
    with connect(db) as conn:
        for commit, vgprs in zip(project.commits[2:4], (238, 256)):
            for metric, value, unit in (("vgpr_count", vgprs, "registers"),
                                        ("group_segment_fixed_size", 49152, "bytes")):
                conn.execute("INSERT INTO compile_metrics VALUES (?, ?, ?, 'flash_attn_generic', 'gfx950', ?, ?, ?, "
                             "NULL)", [PROJECT, commit, MACHINE, metric, value, unit])
    stored.refresh(db)  # as `flybench ingest` ends: the steps stored for the pages to read
    built = DashboardDB(db, project, project.root / "asv.conf.json", h200 is not None)
    _BUILT[base] = built
    return built


def _run_second_machine(project: AsvProject, root: Path, tree: Path) -> None:
    """One real `asv run` of the toy suite at its newest commit, as machine SECOND, into `tree`."""
    shutil.copytree(project.root, root, ignore=shutil.ignore_patterns("results", "html"))
    values = root / "values-m2.json"
    values.write_text(json.dumps(SECOND_VALUES))
    env = {**os.environ, "HOME": str(root / "home"), "TOY_VALUES": str(values)}
    for cmd in (["machine", "--yes", "--machine", SECOND, "--os", "Linux", "--arch", "x86_64", "--cpu", "toy cpu",
                 "--num_cpu", "2", "--ram", "4GB"],
                ["run", "--python=same", "--set-commit-hash", project.commits[-1], "--record-samples", "--quick",
                 "--machine", SECOND, "--launch-method", "forkserver"]):
        done = subprocess.run([sys.executable, "-m", "asv", *cmd], cwd=root, env=env, capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, f"asv {cmd[0]} failed:\n{done.stdout}\n{done.stderr}"
    shutil.copytree(root / "results" / SECOND, tree / SECOND)


@pytest.fixture(scope="session")
def dash_db(tmp_path_factory: pytest.TempPathFactory) -> DashboardDB:
    return build_db(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def ci_store(dash_db: DashboardDB, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture database plus FlyDSL's real CI history, imported as `flybench import flydsl-ci` does."""
    from test_import_flydsl_ci import DATA as FLYDSL_CI

    from flybench.importers.flydsl_ci import import_file

    if not FLYDSL_CI.is_file():
        pytest.skip(f"{FLYDSL_CI} not found (the shared data folder)")
    db = Path(shutil.copy(dash_db.path, tmp_path_factory.mktemp("flydsl-ci") / "dashboard.duckdb"))
    assert import_file(FLYDSL_CI, db).ok
    stored.refresh(db)  # as `flybench import` ends
    return db


def test_latest_cases_derive_rates_from_the_counts_and_keep_failures(dash_db: DashboardDB) -> None:
    latest = queries.latest_cases(dash_db.path, subject=PROJECT).set_index(["machine", "provider"])
    flydsl, torch = latest.loc[(MACHINE, "flydsl")], latest.loc[(MACHINE, "torch")]
    assert flydsl["status"] == "failed" and flydsl["reason"] == FAILED_REASON
    assert flydsl["value"] == pytest.approx(1.49e-3) and flydsl["tflops"] != flydsl["tflops"]  # NaN: not ok
    assert torch["status"] == "ok" and torch["tflops"] == pytest.approx(round(100 / 1.02, 4))
    assert torch["commit_hash"] == dash_db.project.commits[-1] and torch["arch"] == "gfx950"
    second = latest.loc[(SECOND, "flydsl")]
    assert second["value"] == pytest.approx(0.80e-3) and second["tflops"] == pytest.approx(125.0)
    assert second["arch"] == "gfx942" and "samples" not in latest


def test_benchmark_history_filters_in_sql(dash_db: DashboardDB) -> None:
    rows = queries.benchmark_history(dash_db.path, "attention.Quick.track_time", [MACHINE])
    assert len(rows) == 12 and set(rows["provider"]) == {"flydsl", "torch"} and set(rows["machine"]) == {MACHINE}
    flydsl = rows[rows["provider"] == "flydsl"]
    assert list(flydsl["commit_hash"]) == dash_db.project.commits
    assert list(flydsl["status"]) == ["ok"] * 5 + ["failed"]


def test_facets_and_counts(dash_db: DashboardDB) -> None:
    facets = queries.result_facets(dash_db.path)
    toy = facets[facets["subject"] == PROJECT]
    assert set(toy["machine"]) == {MACHINE, SECOND} and set(toy["arch"]) == {"gfx950", "gfx942"}
    # Quick is a flybench case suite; Rates is not, so it is its own workload, named as asv names it
    assert set(toy["workload"]) == {"attention", "attention.Rates.track_tflops"} and set(toy["case"]) == {"c1"}
    assert dict(zip(toy["benchmark"], toy["own_name"])) == {"attention.Quick.track_time": True,
                                                             "attention.Rates.track_tflops": False}
    counts = queries.table_counts(dash_db.path)
    assert counts["results"] >= 6 * 4 + 4 and counts["compile_metrics"] == 4
    assert (facets["subject"] == "flybench").any() == dash_db.has_h200


def test_resource_history_unions_compile_metrics(dash_db: DashboardDB) -> None:
    rows = queries.resource_history(dash_db.path, ["registers", "bytes"])
    vgprs = rows[rows["metric"] == "vgpr_count"]
    assert list(vgprs["value"]) == [238, 256] and set(rows["origin"]) == {"compile_metrics"}
    timed = queries.resource_history(dash_db.path, ["seconds"])
    assert timed.loc[timed["origin"] != "compile_metrics", "kernel"].str.endswith(".Quick").all()
