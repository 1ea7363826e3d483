"""One row per case in the store: five-metric results fold into the case's time row, on ingest and in the v5 migration.

The five-metric files are the real ones committed under results/flybench/
(H200 runs with their case records), read where they are committed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixtures.heads import heads_mismatches
from fixtures.old_schema import database_at

from flybench import benchmark_names
from flybench.store import connect, ingest, queries, schema, sidecar

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "results" / "flybench"
FIVE_METRIC = sorted(p for p in (COMMITTED / "dev-h200").glob("*-*.json")
                     if any(f"track_{m}" in p.read_text() for m in ("tflops",)))
V4_TABLES = ("machines", "commits", "environments", "benchmarks", "results", "compile_metrics", "ingested_files",
             "result_files", "series_heads", "stale_heads")
KEY = ("subject", "machine", "commit_hash", "env_name", "benchmark", "params")

pytestmark = pytest.mark.skipif(not FIVE_METRIC, reason="no five-metric results committed under results/flybench")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed five-metric files with their case records and asv's files, in a tree of their own."""
    root = tmp_path_factory.mktemp("five") / "flybench"
    (root / "dev-h200").mkdir(parents=True)
    shutil.copy(COMMITTED / "benchmarks.json", root)
    shutil.copy(COMMITTED / "dev-h200" / "machine.json", root / "dev-h200")
    for path in FIVE_METRIC:
        shutil.copy(path, root / "dev-h200")
        shutil.copy(sidecar.sidecar_path(path), root / "dev-h200")
    (root.parent / "asv.conf.json").write_text(json.dumps({"project": "flybench", "results_dir": "flybench"}))
    return root


def rows(db: Path, table: str = "results") -> dict[tuple, dict]:
    with connect(db, read_only=True) as conn:
        frame = conn.execute(f"SELECT * FROM {table}").df()
    found = {}
    for row in queries.records(frame):
        row["errors"] = None if row["errors"] is None else json.loads(row["errors"])  # JSON text: parsed
        row["samples"] = None if row["samples"] is None else list(row["samples"])
        key = tuple(row[k] for k in KEY)
        assert key not in found, f"{key} stored twice"
        found[key] = row
    return found


def test_ingest_keeps_one_row_per_case_with_the_siblings_as_context(tree: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folded_db, unfolded_db = tmp_path / "folded.duckdb", tmp_path / "unfolded.duckdb"
    assert ingest(tree, folded_db).ok
    monkeypatch.setattr(sidecar, "fold", lambda found: found)  # what the five-metric store held
    assert ingest(tree, unfolded_db).ok
    folded, unfolded = rows(folded_db), rows(unfolded_db)
    names = {key[4] for key in folded}
    assert all(benchmark_names.parse(n).method == "track_time" for n in names)
    assert any(benchmark_names.parse(key[4]).method != "track_time" for key in unfolded)
    time_rows = {k: r for k, r in unfolded.items() if k[4].endswith(".track_time")}
    assert folded.keys() == time_rows.keys()
    checked = 0
    for key, before in time_rows.items():
        after = folded[key]
        assert {c: after[c] for c in before if c not in ("tflops", "gbps", "roofline_fraction", "errors")} == \
               {c: before[c] for c in before if c not in ("tflops", "gbps", "roofline_fraction", "errors")}
        siblings = {name: unfolded.get((*key[:4], key[4].replace("track_time", name), key[5]))
                    for name in benchmark_names.LEGACY_METRICS}
        for method, column in benchmark_names.LEGACY_METRICS.items():
            sibling = siblings[method]
            if column == "error":
                expected = before["errors"] if before["errors"] is not None else (
                    {"out": sibling["value"]} if sibling and sibling["value"] is not None else None)
                assert after["errors"] == expected
            else:
                fallback = sibling["value"] if sibling and sibling["status"] == "ok" else None
                assert after[column] == (before[column] if before[column] is not None else fallback)
                checked += after[column] is not None
    assert checked > 100  # the rates really are there: the committed runs hold hundreds of measured cases


def test_v5_migration_gives_what_a_fresh_ingest_gives_row_for_row(tree: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fresh, v4 = tmp_path / "fresh.duckdb", tmp_path / "v4.duckdb"
    assert ingest(tree, fresh).ok
    with monkeypatch.context() as patch:
        patch.setattr(sidecar, "fold", lambda found: found)
        assert ingest(tree, tmp_path / "unfolded.duckdb").ok
    database_at(v4, 4, tmp_path / "unfolded.duckdb", V4_TABLES)  # what the five-metric flybench (v4) wrote
    with connect(tmp_path / "unfolded.duckdb", read_only=True) as conn:
        before = conn.execute("SELECT count(*) FROM results").fetchone()[0]

    with connect(v4) as conn:  # a writer migrates
        assert schema.current_version(conn) == schema.LATEST
    migrated, expected = rows(v4), rows(fresh)
    assert before > len(expected) > 0
    assert migrated.keys() == expected.keys()
    rounds = ("rounds", "round_spreads")
    for key, row in expected.items():  # v6's rounds (v10's spreads) need the records' every run: v4 stored none
        assert [migrated[key].pop(name) for name in rounds] == [None, None]
        assert migrated[key] == {k: v for k, v in row.items() if k not in rounds}, key
    heads = [{k: {c: v for c, v in r.items() if c not in rounds} for k, r in rows(db, "series_heads").items()}
             for db in (v4, fresh)]
    assert heads[0] == heads[1]
    assert heads_mismatches(v4)[1] == 0
    assert ingest(tree, v4).loaded == []  # the files are known: nothing is read again


def test_compare_and_regressions_give_one_verdict_per_case_with_its_context(tree: Path, tmp_path: Path) -> None:
    from flybench.regress import find_regressions
    from flybench.regress.compare import compare

    db = tmp_path / "store.duckdb"
    assert ingest(tree, db).ok
    older, newer = [h[:8] for h in queries.commits(db, "dev-h200")["hash"]][-2:]  # by commit date
    with connect(db, read_only=True) as conn:
        # a combination that no run selected (unavailable, with no case record) is not a case of the comparison
        cases = conn.execute("SELECT count(DISTINCT (env_name, benchmark, params)) FROM results "
                             "WHERE (commit_hash LIKE ? OR commit_hash LIKE ?) AND NOT (status = 'unavailable' "
                             "AND run_id IS NULL AND reason IS NULL)", [f"{older}%", f"{newer}%"]).fetchone()[0]
    result = compare(db, "dev-h200", older, newer)
    keys = [(c.env_name, c.benchmark, json.dumps(c.params)) for c in result.cases]
    assert len(keys) == len(set(keys)) == cases
    assert {benchmark_names.parse(c.benchmark).method for c in result.cases} == {"track_time"}
    judged = [c for c in result.cases if c.rounds]  # one round a side, no history here: judged ambiguous
    assert judged and all(c.unit == "seconds" for c in judged)
    assert any("tflops" in c.context and "error" in c.context for c in judged)  # the facts ride along
    assert all(benchmark_names.parse(r.benchmark).method == "track_time" for r in find_regressions(db))
