"""A corpus nobody here wrote: its benchmark names reach every query and page as asv names them.

The fixture is a small asv results tree in asv's own format with the names
foreign suites use (`benchmarks.TimeSuite.time_keys`, a module-level
function, a `track_*` in GB/s, one whose unit its definition leaves out),
ingested as `flybench ingest` ingests any tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.asv_files import COMMIT, MACHINE, benchmarks_json, machine_json, results_json
from streamlit.testing.v1 import AppTest

from flybench.benchmark_names import is_own, workload_of
from flybench.importers.flydsl_ci.mapping import benchmark_name as flydsl_ci_name
from flybench.store import ingest, queries

SECOND = "b" * 40
NAMES = {
    "benchmarks.TimeSuite.time_keys": {"param_names": ["n"], "params": [["10", "100"]]},
    "benchmarks.time_range": {},
    "io.Bandwidth.track_copy": {"type": "track", "unit": "GB/s"},
    "io.Bandwidth.track_count": {"type": "track", "unit": None},
}
APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


@pytest.fixture(scope="module")
def foreign_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("foreign") / "results"
    tree.mkdir()
    benchmarks_json(tree, NAMES)
    machine_json(tree)
    for commit, scale in ((COMMIT, 1.0), (SECOND, 1.1)):
        results_json(tree, {
            "benchmarks.TimeSuite.time_keys": [[1e-3 * scale, 2e-3 * scale], [["10", "100"]]],
            "benchmarks.time_range": [[5e-6 * scale], []],
            "io.Bandwidth.track_copy": [[900.0 * scale], []],
            "io.Bandwidth.track_count": [[7.0], []],
        }, commit=commit)
    db = tree.parent / "foreign.duckdb"
    report = ingest(tree, db, subject="othersuite")
    assert report.ok, report.summary()
    return db


def test_names_that_flybench_did_not_write_are_their_own_workload() -> None:
    assert not any(map(is_own, NAMES))
    assert [workload_of(n) for n in NAMES] == list(NAMES)  # never one workload called "benchmarks"
    assert workload_of("attention.Quick.track_time") == "attention"
    assert workload_of("compile_metrics.Amd.track_vgprs") == "compile_metrics"
    assert workload_of("flash_attn.FlydslCI.track_tflops") == "flash_attn"
    assert is_own(flydsl_ci_name("flash_attn", "TFLOPS"))  # the importer's names stay flybench's own


def test_facets_keep_each_foreign_name_as_it_is(foreign_db: Path) -> None:
    facets = queries.result_facets(foreign_db)
    assert sorted(facets["workload"].unique()) == sorted(NAMES)
    assert not facets["own_name"].any() and facets["shape_set"].isna().all()
    assert dict(zip(facets["benchmark"], facets["unit"]))["io.Bandwidth.track_copy"] == "GB/s"


def test_latest_cases_of_any_unit_reach_every_series(foreign_db: Path) -> None:
    rows = queries.latest_cases(foreign_db, unit=None)
    assert len(rows) == 5 and set(rows["benchmark"]) == set(NAMES)
    assert set(rows["commit_hash"]) == {SECOND}
    assert len(queries.latest_cases(foreign_db)) == 3  # the default is still the timed series


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch, page: str | None = None, **query: str) -> AppTest:
    monkeypatch.setenv("FLYBENCH_DB", str(db))
    at = AppTest.from_file(str(APP), default_timeout=600)  # a bound against a hang, not a time to beat
    if page:
        at.switch_page(f"views/{page}.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_overview_lists_foreign_benchmarks_by_their_names_in_their_units(foreign_db: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(foreign_db, monkeypatch)
    assert [h.value for h in at.header] == ["Other benchmarks"]
    table = next(df.value for df in at.dataframe).set_index("label")
    assert set(table.index) == {"benchmarks.TimeSuite.time_keys(10)", "benchmarks.TimeSuite.time_keys(100)",
                                "benchmarks.time_range", "io.Bandwidth.track_copy", "io.Bandwidth.track_count"}
    assert table.loc["io.Bandwidth.track_copy", "shown"] == "990 GB/s"
    assert table.loc["io.Bandwidth.track_count", "unit"].startswith("unknown")  # shown, never dropped
    assert table.loc["benchmarks.TimeSuite.time_keys(100)", "shown"] == "2.20ms"


def test_history_draws_a_foreign_series_under_its_name(foreign_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(foreign_db, monkeypatch, "history", benchmark="benchmarks.TimeSuite.time_keys", params="100")
    assert [h.value for h in at.header] == ["benchmarks.TimeSuite.time_keys · 100 · othersuite"]
    rows = next(df.value for df in at.dataframe if "series" in df.value.columns)
    assert list(rows["value"]) == pytest.approx([2e-3, 2.2e-3]) and set(rows["machine"]) == {MACHINE}
    workloads = at.multiselect(key="workload").options
    assert sorted(workloads) == sorted(NAMES)
