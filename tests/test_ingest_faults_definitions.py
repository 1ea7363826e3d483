"""benchmarks.json checked against the results files it names the parameters of.

A results file carries its parameters' values by position, never their
names: benchmarks.json names them. Where the two contradict each other, the
rows would be filed under the wrong names (`dtype: rocblas, provider: bf16`),
so the file is refused, naming both files and what differs.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from flybench.store import ingest
from tests.fixtures.asv_files import benchmarks_json, machine_json, results_json

SUITE = "gemm.Quick.track_time"
NAMES = ["case", "provider", "dtype"]
GRID = [["'c1'"], ["'rocblas'", "'torch'"], ["'bf16'", "'fp16'"]]
SAMPLES_AS_TEXT = ["result", "params", "version", "started_at", "duration", "samples"]


def tree_of(root: Path, names: list[str], params: list[list[str]], version: str = "v1",
            results_version: str = "v1", through_asvs_loader: bool = False) -> Path:
    """A results file of the grid GRID (in NAMES' order), named by a benchmarks.json of `names` and `params`.

    `through_asvs_loader`: a sample written as text, a shape only asv's own loader reads.
    """
    root.mkdir()
    benchmarks_json(root, {SUITE: {"param_names": names, "params": params, "version": version}})
    machine_json(root)
    entry = [[1e-3, 2e-3, 3e-3, 4e-3], GRID, results_version, 1767268800000, 0.1]
    if through_asvs_loader:
        entry.append([["0.001"], None, None, None])
    return results_json(root, {SUITE: entry}, columns=SAMPLES_AS_TEXT if through_asvs_loader else None)


def stored_params(db: Path) -> list[dict]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return [json.loads(p) for p, in conn.execute("SELECT params FROM results ORDER BY value").fetchall()]


@pytest.mark.parametrize("through_asvs_loader", [False, True])
def test_param_names_in_another_order_than_the_results_refuse_the_file_naming_both(
        tmp_path: Path, through_asvs_loader: bool) -> None:
    """The battery's case: rows were stored as `dtype: rocblas, provider: bf16`."""
    root = tmp_path / "results"
    path = tree_of(root, ["case", "dtype", "provider"], [GRID[0], GRID[2], GRID[1]],
                   through_asvs_loader=through_asvs_loader)
    report = ingest(root, tmp_path / "db.duckdb", "toy")
    assert [(e.path, e.message) for e in report.errors] == [(str(path), (
        f"benchmark {SUITE!r}: its parameter 2 here takes 'rocblas', 'torch', which {root / 'benchmarks.json'} lists "
        "under 'provider', not under 'dtype': the param_names there (case, dtype, provider) are not in the order of "
        "this file's params, and its rows would be named wrongly. Ingest this file with the benchmarks.json written "
        "with it (asv run writes one), or correct the benchmark's param_names and params there"))]
    assert stored_params(tmp_path / "db.duckdb") == []


def test_another_count_of_parameters_for_the_same_benchmark_version_refuses_the_file(tmp_path: Path) -> None:
    root = tmp_path / "results"
    path = tree_of(root, NAMES[:2], GRID[:2])
    [error] = ingest(root, tmp_path / "db.duckdb", "toy").errors
    assert (error.path, error.message) == (str(path), (
        f"benchmark {SUITE!r} has 3 parameter lists here, but {root / 'benchmarks.json'} names 2 parameters (case, "
        "provider) for the same benchmark version v1: the two files describe different benchmarks. Ingest this file "
        "with the benchmarks.json written with it (asv run writes one), or correct the benchmark's param_names and "
        "params there"))


def test_what_history_explains_still_loads(tmp_path: Path) -> None:
    """An older version of the benchmark with other parameters (named p0, p1, ... as before), and values the
    definition no longer lists (a case that left the suite), contradict nothing."""
    other_version = tmp_path / "other_version"
    tree_of(other_version, NAMES[:2], GRID[:2], results_version="v0")
    assert ingest(other_version, tmp_path / "a.duckdb", "toy").ok
    assert stored_params(tmp_path / "a.duckdb")[0] == {"p0": "c1", "p1": "rocblas", "p2": "bf16"}
    case_gone = tmp_path / "case_gone"
    tree_of(case_gone, NAMES, [["'c2'"], GRID[1], GRID[2]])
    assert ingest(case_gone, tmp_path / "b.duckdb", "toy").ok
    assert stored_params(tmp_path / "b.duckdb")[0] == {"case": "c1", "provider": "rocblas", "dtype": "bf16"}


def test_a_definition_in_the_files_order_names_the_rows(tmp_path: Path) -> None:
    root = tmp_path / "results"
    tree_of(root, NAMES, GRID)
    assert ingest(root, tmp_path / "db.duckdb", "toy").ok
    assert {p["provider"] for p in stored_params(tmp_path / "db.duckdb")} == {"rocblas", "torch"}


def test_names_that_only_the_case_records_contradict_refuse_the_file(tmp_path: Path) -> None:
    """benchmarks.json's values sit where the results file has them, but two names are swapped: only the case
    records beside the file, which name each value themselves, show it."""
    root = tmp_path / "results"
    path = tree_of(root, ["case", "dtype", "provider"], GRID)
    records = [{"version": 2, "run_id": "r1", "workload": "gemm", "shape_set": "quick", "case": "c1",
                "provider": provider, "dtype": dtype, "status": "ok"}
               for provider in ("rocblas", "torch") for dtype in ("bf16", "fp16")]
    path.with_name(path.stem + ".cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    [error] = ingest(root, tmp_path / "db.duckdb", "toy").errors
    assert (error.path, error.message) == (str(path), (
        f"its rows of {SUITE} take bf16, fp16 as 'provider', which the case records beside it give as "
        f"'dtype': {root / 'benchmarks.json'} names this file's parameters in another order than it holds them, "
        "and its rows would be named wrongly. Ingest this file with the benchmarks.json written with it (asv run "
        "writes one), or correct the benchmark's param_names and params there"))
    assert stored_params(tmp_path / "db.duckdb") == []
