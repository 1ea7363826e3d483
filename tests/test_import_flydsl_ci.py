"""`flybench import flydsl-ci` on FlyDSL's real CI history (read from ../shared/data, never copied here).

Covers the mapping onto flybench's workloads, provenance marking, idempotence,
incremental imports, commit order from a clone, bad input, and the noise
estimate the detector needs for series of one rounded value per run.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
from pathlib import Path

import pytest
from fixtures.heads import heads_mismatches

from flybench.cli import main as cli
from flybench.errors import FlybenchError
from flybench.importers.flydsl_ci import SOURCE, import_file
from flybench.importers.flydsl_ci.mapping import map_case
from flybench.regress.config import RegressConfig
from flybench.regress.history import Point, detect, resolution
from flybench.store import connect, queries
from flybench.workloads import get_workload

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "flydsl-ci-history-2026-06-11_2026-07-12.json.gz"
TABLES = ("results", "commits", "machines", "environments", "benchmarks", "imported_records", "imported_commits",
          "imported_files")
TFLOPS = RegressConfig(relative=0.0).thresholds("x", "", "TFLOPS")

pytestmark = pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} not found (the shared data folder)")


def records() -> list[dict]:
    return json.loads(gzip.decompress(DATA.read_bytes()))["records"]


def write(path: Path, items: list, **top: object) -> Path:
    path.write_text(json.dumps({"schema": 1, "repo": "ROCm/FlyDSL", "records": items, **top}))
    return path


def dump(db: Path, exclude: str = "") -> dict[str, tuple]:
    """Per table: row count and a digest of every row, computed in DuckDB (fast on 18k rows)."""
    with connect(db, read_only=True) as conn:
        return {t: conn.execute(f"SELECT count(*), md5(string_agg(r, '|' ORDER BY r)) FROM (SELECT row::VARCHAR AS r "
                                f"FROM (SELECT * {exclude if t == 'results' else ''} FROM {t}) row)").fetchone()
                for t in TABLES}


def scalar(db: Path, sql: str) -> object:
    with connect(db, read_only=True) as conn:
        return conn.execute(sql).fetchone()[0]


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("flydsl") / "store.duckdb"
    report = import_file(DATA, db)
    assert report.ok and report.records == report.new == 18071
    return db


def test_every_record_is_kept_and_every_row_marked_with_its_source(full: Path) -> None:
    raw = records()
    assert scalar(full, "SELECT count(*) FROM imported_records") == len(raw) == 18071
    assert scalar(full, "SELECT count(*) FROM imported_records WHERE record->>'regression' = 'true'") == 568
    statuses = dict(queries._query(full, "SELECT status, count(*) FROM imported_records GROUP BY 1").values)
    assert statuses == {"ok": 15489, "skip": 1979, "missing": 603}
    rows = queries.history(full, subject="flydsl")
    assert set(rows["source"]) == {SOURCE} and rows["source_record"].notna().all()
    assert set(rows["status"]) == {"ok", "skipped", "missing"}
    assert rows.loc[rows["status"] != "ok", "value"].isna().all()  # kept as such, with no invented value
    # one row per runner, commit, context and case: only the 180 re-runs of PR 823 collapse (latest job wins)
    assert len(rows) == len(raw) - 180
    record = json.loads(rows.iloc[0]["source_record"])
    assert (record["runner"], record["commit"], str(record["run_id"])) == tuple(rows.iloc[0][["machine", "commit_hash",
                                                                                              "run_id"]])
    assert queries.sources(full).loc[0, "source"] == SOURCE


def test_ops_and_shapes_map_onto_workloads(full: Path) -> None:
    attention = get_workload("attention")
    names = {c.name for cases in attention.catalog().values() for c in cases}
    shapes = {r["shape"] for r in records() if r["op"] == "flash_attn"}
    assert shapes and shapes <= names  # FlyDSL's flash_attn shapes are flybench attention cases
    for shape in shapes:
        mapped = map_case("flash_attn", shape, "bf16", "TFLOPS")
        assert mapped.benchmark == "attention.FlydslCI.track_tflops"
        assert mapped.params == {"case": shape, "provider": "flydsl", "dtype": "bf16"}
        assert mapped.shape == attention.case(shape).shape
    moe = map_case("moe_gemm2_atomic", "t64-d6144x1024-e128k8", "fp8", "TFLOPS")
    assert (moe.workload, moe.params["case"], moe.params["kernel"]) == (
        "moe_stage", "t64-d6144x1024-e128k8-s2", "moe_gemm2_atomic")
    stages = get_workload("moe_stage")
    for op in ("moe_gemm1", "moe_gemm2_atomic", "moe_gemm2_reduce"):  # FlyDSL's fp8 stages are flybench cases
        for shape in ("t64-d6144x1024-e128k8", "t32768-d8192x8192-e16k4"):
            mapped = map_case(op, shape, "fp8", "TFLOPS")
            assert stages.case(mapped.params["case"]).shape.items() <= mapped.shape.items()
    mla = map_case("mla", "B32C8192", "fp8", "TFLOPS")
    assert (mla.benchmark, mla.params["case"]) == ("mla_decode.FlydslCI.track_tflops", "B32C8192")
    assert mla.shape == get_workload("mla_decode").case("B32C8192").shape
    assert moe.shape == {"tokens": 64, "hidden": 6144, "inter": 1024, "experts": 128, "top_k": 8, "stage": 2,
                         "variant": "atomic", "family": ""}
    assert map_case("moe_gemm1", "t64-d6144x1024-e128k8", "fp8", "TFLOPS").shape["stage"] == 1
    assert map_case("moe_fp4_s2_reduce", "t16-d7168x256-e257k9", "fp4", "TFLOPS").shape["family"] == "fp4"
    assert map_case("moe_a8w4", "t512-d3072x3072-e128k4", "a8w4", "TFLOPS").shape["stage"] is None
    gemm = map_case("gemm", "8192x8192x8192_tile128x256x128", "fp8", "TFLOPS")
    assert (gemm.benchmark, gemm.params["case"], gemm.params["config"]) == (
        "gemm.FlydslCI.track_tflops", "8192x8192x8192", "tile128x256x128")
    assert gemm.shape == {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192}
    kept = map_case("hgemm", "32x384x7168_tile16x64x128_sk14", "bf16", "TFLOPS")
    assert (kept.workload, kept.benchmark) == (None, "hgemm.FlydslCI.track_tflops")
    assert map_case("flash_attn", "weird", "bf16", "TFLOPS").benchmark == "flash_attn.FlydslCI.track_tflops"
    assert map_case("layernorm", "32768x8192", "bf16", "TB/s").benchmark == "layernorm.FlydslCI.track_tbps"
    landed = queries._query(full, "SELECT source_record->>'op' AS op, split_part(benchmark, '.', 1) AS workload "
                                  "FROM results GROUP BY ALL")
    where = {op: set(group["workload"]) for op, group in landed.groupby("op")}
    assert where["flash_attn"] == {"attention"} and where["gemm"] == {"gemm"} and where["hgemm"] == {"hgemm"}
    stage_ops = [op for op in where if re.fullmatch(r"moe_(\w+_)?(s|gemm)[12](_atomic|_reduce)?", op)]
    assert {"moe_gemm1", "moe_gemm2_atomic", "moe_fp4_s1", "moe_w4a16_s2_reduce"} <= set(stage_ops)
    assert all(where[op] == {"moe_stage"} for op in stage_ops)
    assert where["moe_fp4"] == {"moe"} and where["mla"] == {"mla_decode"}


def test_series_heads_hold_the_newest_imported_row_of_every_series(full: Path) -> None:
    rows, differ = heads_mismatches(full)
    assert differ == 0 and rows == scalar(full, "SELECT count(*) FROM (SELECT DISTINCT subject, machine, env_name, "
                                                "benchmark, params FROM results)")


def test_same_file_twice_changes_nothing(full: Path, tmp_path: Path) -> None:
    before = dump(full)
    report = import_file(DATA, full)
    assert (report.new, report.rows, report.commits) == (0, 0, 0) and report.ok
    assert dump(full) == before


def test_newer_file_adds_only_what_is_new(full: Path, tmp_path: Path) -> None:
    """An older window, then the newer one: the same store as importing the newer file alone.

    The older file also holds two of the three jobs of run 29070368278: the
    third (the one without a PR number) comes later and must still join PR 814.
    """
    raw = records()
    early = [r for r in raw if r["ts"] < "2026-07-01" or (r["run_id"] == 29070368278 and "navi" not in r["runner"])]
    db = tmp_path / "store.duckdb"
    first = import_file(write(tmp_path / "older.json", early), db)
    second = import_file(DATA, db)
    assert first.new == len(early) and second.new == len(raw) - len(early)
    mine, reference = dump(db, "EXCLUDE (source_file)"), dump(full, "EXCLUDE (source_file)")  # names the file
    for table in ("results", "commits", "imported_commits", "machines", "environments", "benchmarks"):
        assert mine[table] == reference[table], table


def test_main_only_and_pr_filters(full: Path) -> None:
    rows = queries.history(full, subject="flydsl")
    main, prs = queries.in_context(rows, "main"), queries.in_context(rows, "pr")
    assert len(main) + len(prs) == len(rows) and main["pr"].isna().all() and prs["pr"].notna().all()
    assert set(main["env_name"]) == {"flydsl-ci"} and all(e.startswith("flydsl-ci-pr") for e in prs["env_name"])
    # run 29070368278 carries PR 814 on two runners and none on the third: the run is PR 814's on all three
    run = rows[rows["run_id"] == "29070368278"]
    assert set(run["pr"]) == {814} and set(run["run_context"]) == {"pr"}
    with pytest.raises(FlybenchError, match="unknown run context"):
        queries.in_context(rows, "nightly")


def test_bad_files_are_refused_whole(full: Path, tmp_path: Path) -> None:
    before = dump(full)
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(DATA.read_bytes()[:5000])
    with pytest.raises(FlybenchError, match=r"truncated\.json\.gz: corrupt or truncated gzip"):
        import_file(truncated, full)
    text = tmp_path / "history.json"
    text.write_text('{"schema": 1, "records": [')
    with pytest.raises(FlybenchError, match=r"history\.json: not valid JSON .* line 1"):
        import_file(text, full)
    with pytest.raises(FlybenchError, match=r"schema 2; this importer reads FlyDSL CI history schema 1"):
        import_file(write(tmp_path / "v2.json", [], schema=2), full)
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(FlybenchError, match="expected an object with a 'records' list"):
        import_file(tmp_path / "list.json", full)
    assert dump(full) == before


def test_bad_records_are_named_and_the_good_ones_imported(tmp_path: Path) -> None:
    good = records()[:40]
    bad = [dict(good[0]) for _ in range(4)]
    del bad[0]["commit"]
    bad[1]["metric"] = "GB/s"
    bad[2].update(status="ok", value=None)
    bad[3]["ts"] = "yesterday"
    path = write(tmp_path / "mixed.json", good[:10] + bad + good[10:])
    db = tmp_path / "store.duckdb"
    report = import_file(path, db)
    assert [(e.index, e.message) for e in report.rejected] == [
        (10, "missing field 'commit'"), (11, "unknown metric 'GB/s'; known: TFLOPS, TB/s, speedup"),
        (12, "status 'ok' needs a finite number in 'value', got None"), (13, "field 'ts' is not an ISO 8601 time: "
                                                                            "'yesterday'")]
    assert not report.ok and report.new == 40 and "mixed.json: record 11: unknown metric" in report.summary()
    assert scalar(db, "SELECT count(*) FROM imported_records") == 40
    assert cli(["import", "flydsl-ci", str(path), "--db", str(db)]) == 2  # rejected records: bad input, not 1
    assert cli(["import", "flydsl-ci", str(write(tmp_path / "ok.json", good)), "--db", str(db)]) == 0
    (tmp_path / "broken.json").write_text("{")
    assert cli(["import", "flydsl-ci", str(tmp_path / "broken.json"), "--db", str(db)]) == 2


def test_out_of_range_numbers_dates_and_shapes_are_rejected_records_not_crashes(tmp_path: Path) -> None:
    """The fault battery's records: each is set aside with its reason, and the good ones land."""
    good = [r for r in records() if r["op"] == "flash_attn"][:20]
    bad = [dict(good[0]) for _ in range(4)]
    bad[0]["ts"] = "9999-12-31T23:00:00-05:00"  # past the end of datetime once in UTC
    bad[1]["pr"] = 2**40  # aborted all 2,000 records of its file
    bad[2]["shape"] = "B1S1H1Hkv1D0_causal"  # ZeroDivisionError
    bad[3]["ts"] = "1970-01-01T00:00:00Z"
    db = tmp_path / "store.duckdb"
    report = import_file(write(tmp_path / "faults.json", bad + good), db)
    messages = [e.message for e in report.rejected]
    assert messages[0] == "field 'ts' is not an ISO 8601 time: '9999-12-31T23:00:00-05:00'"
    assert messages[1].startswith("field 'pr' must be a pull-request number") and "1099511627776" in messages[1]
    assert messages[2].startswith("shape 'B1S1H1Hkv1D0_causal' of op 'flash_attn' cannot be read")
    assert messages[3] == "field 'ts' '1970-01-01T00:00:00Z' is outside 2000 to 2100: not a CI run's time"
    assert report.new == len({json.dumps(r, sort_keys=True) for r in good}) > 0


def test_a_history_that_unpacks_past_the_cap_is_refused_before_it_is_read_whole(tmp_path: Path, monkeypatch,
                                                                                capsys) -> None:
    from flybench.importers.flydsl_ci import read

    monkeypatch.setattr(read, "MAX_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"schema": 1, "records": [' + b" " * (4 << 20) + b"]}"))
    assert cli(["import", "flydsl-ci", str(bomb), "--db", str(tmp_path / "db.duckdb")]) == 2
    assert "over 1 MiB of JSON" in capsys.readouterr().err


def test_a_clone_orders_commits_and_tells_main_from_branches(tmp_path: Path) -> None:
    """Main's history decides order and membership, whatever the CI jobs' completion times say."""
    repo = tmp_path / "FlyDSL"
    hashes = _repo(repo)  # main: m1 -> m2 (squash of #7, committed with an older date); branch: b1 off m1
    base = records()[0]
    jobs = [("m2", "2026-07-01T01:00:00Z"), ("m1", "2026-07-01T02:00:00Z"), ("b1", "2026-07-01T00:30:00Z")]
    items = [{**base, "commit": hashes[name], "ts": ts, "run_id": i, "pr": None} for i, (name, ts) in enumerate(jobs)]
    path = write(tmp_path / "h.json", items)
    db = tmp_path / "store.duckdb"
    import_file(path, db)
    assert _order(db, hashes) == ["b1", "m2", "m1"]  # by CI time, and pr: null counts as main
    assert set(queries.history(db)["run_context"]) == {"main"}
    report = import_file(path, db, flydsl_repo=repo)
    assert report.new == 0 and report.commits == 3 and "main's history" in report.ordered_by
    assert _order(db, hashes) == ["m1", "m2", "b1"]  # m2's older committer date yields to main's order
    contexts = dict(queries.history(db)[["commit_hash", "run_context"]].values)
    assert (contexts[hashes["m1"]], contexts[hashes["m2"]], contexts[hashes["b1"]]) == ("main", "main", "branch")
    merged = queries.imported_commits(db).set_index("hash").loc[hashes["m2"]]
    assert (merged["merged_pr"], merged["ordered_by"], bool(merged["on_main"])) == (7, "git-main", True)
    before = dump(db)
    import_file(path, db, flydsl_repo=repo)
    assert dump(db) == before


def test_a_shallow_clone_or_one_of_another_repository_moves_nothing_off_main_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Main runs the clone does not know stay main runs (unattributed), the import's summary names the clone's
    fault, and the regressions report heads with it, where it used to say "0 regressions" with exit 0."""
    repo = tmp_path / "FlyDSL"
    hashes = _repo(repo)
    base = records()[0]
    items = [{**base, "commit": hashes[name], "ts": ts, "run_id": i, "pr": None}
             for i, (name, ts) in enumerate([("m1", "2026-07-01T02:00:00Z"), ("m2", "2026-07-01T03:00:00Z")])]
    path = write(tmp_path / "h.json", items)
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    report = import_file(path, tmp_path / "shallow.duckdb", flydsl_repo=shallow)
    assert any("is a shallow clone: 1 of the 2 commits FlyDSL's CI ran as main are beyond its depth" in line
               for line in report.summary().splitlines())
    assert set(queries.history(tmp_path / "shallow.duckdb")["run_context"]) == {"main"}

    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "-C", str(other), "init", "-q", "-b", "main"], check=True)
    subprocess.run(["git", "-C", str(other), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    db = tmp_path / "other.duckdb"
    report = import_file(path, db, flydsl_repo=other)
    assert f"clone: {other} holds none of the history's 2 main commits: it is a clone of another repository" \
        in report.summary()
    assert set(queries.history(db)["run_context"]) == {"main"}
    capsys.readouterr()
    assert cli(["regressions", "--db", str(db), "--subject", "flydsl", "--format", "markdown"]) == 0
    assert "\n> **Warning:** flydsl: no code attribution: its 2 main commits were imported without a clone that " \
           "holds them" in capsys.readouterr().out


def _repo(root: Path) -> dict[str, str]:
    def git(*args: str, date: str = "2026-06-30T00:00:00+00:00") -> str:
        env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": "t",
               "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
        return subprocess.run(["git", "-C", str(root), *args], env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    root.mkdir()
    git("init", "-q", "-b", "main")
    git("commit", "-q", "--allow-empty", "-m", "m1", date="2026-06-29T00:00:00+00:00")
    m1 = git("rev-parse", "HEAD")
    git("checkout", "-q", "-b", "topic")
    git("commit", "-q", "--allow-empty", "-m", "b1", date="2026-06-29T12:00:00+00:00")
    b1 = git("rev-parse", "HEAD")
    git("checkout", "-q", "main")
    git("commit", "-q", "--allow-empty", "-m", "Squashed topic (#7)", date="2026-06-28T00:00:00+00:00")
    return {"m1": m1, "b1": b1, "m2": git("rev-parse", "HEAD")}


def _order(db: Path, hashes: dict[str, str]) -> list[str]:
    names = {h: n for n, h in hashes.items()}
    return [names[h] for h in queries.commits(db, subject="flydsl")["hash"]]


def test_rounded_single_values_need_more_than_one_printed_digit_to_step() -> None:
    assert (resolution([0.3, 0.4, 1.1]), resolution([1550.34, 1547.09]), resolution([1.23456789012])) == (0.1, 0.01, 0)
    flips = [Point(str(i), v) for i, v in enumerate([0.4] * 8 + [0.3, 0.4, 0.3] + [0.3] * 8)]
    assert detect(flips, TFLOPS) == []  # 0.4 -> 0.3 is -25%, but one unit of the last printed digit
    drop = [Point(str(i), v) for i, v in enumerate([0.9] * 10 + [0.3] * 9)]
    (step,) = detect(drop, TFLOPS)  # six units is a step
    assert (step.last_good, step.first_bad) == ("9", "10") and step.confidence > 0.99


def test_run_to_run_jumps_count_as_noise_for_single_values() -> None:
    """Five real nights of FlyDSL's gfx942 gemm 256x2112x7168 fp8 on main: +7.5% in, -8.8% out, one value each.

    Around asv's Potts fit the residuals are ~0 (each jump becomes a level of
    its own), so only the run-to-run spread says these jumps are the series'
    normal behaviour rather than a -7% regression on the last night.
    """
    nights = [Point(str(i), v) for i, v in enumerate([281.54, 302.88, 305.24, 299.22, 277.96])]
    limits = RegressConfig(relative=0.03).thresholds("gemm.FlydslCI.track_tflops", "", "TFLOPS")
    assert detect(nights, limits) == []
    rng = random.Random(3)
    quiet = [Point(str(i), round(100 * (1 + 0.005 * rng.gauss(0, 1)) * (0.9 if i >= 12 else 1), 2))
             for i in range(24)]
    (step,) = detect(quiet, RegressConfig(relative=0.05).thresholds("x", "", "TFLOPS"))
    assert (step.last_good, step.first_bad) == ("11", "12") and step.confidence > 0.99


def test_the_nightly_report_is_about_main_and_pull_request_runs_stay_out(full: Path, tmp_path: Path,
                                                                        capsys) -> None:
    """`flybench regressions` as the nightly runs it: a step seen only in a pull request's runs (PR 830's one-run
    blips of tiny attention cases) is not in the main report and does not fail it; `--runs pr` reports pull
    requests' runs only (each pull request is a series of a few runs: too short to hold a persistent step)."""
    from flybench.cli import main

    out = tmp_path / "main.json"
    code = main(["regressions", "--subject", "flydsl", "--db", str(full), "--include-others", "--format", "json",
                 "--output", str(out)])  # imported rows are judged on request only (flybench.store.origin)
    assert all(r["env_name"] == "flydsl-ci" for r in json.loads(out.read_text()))
    assert code == (1 if json.loads(out.read_text()) else 0)
    prs = tmp_path / "prs.json"
    code = main(["regressions", "--subject", "flydsl", "--db", str(full), "--include-others", "--runs", "pr",
                 "--format", "json",
                 "--output", str(prs)])
    found = json.loads(prs.read_text())
    assert all(r["env_name"].startswith("flydsl-ci-pr") for r in found) and code == (1 if found else 0)


def test_an_imported_history_is_judged_by_the_report_without_a_flag(full: Path, capsys) -> None:
    """`flybench import flydsl-ci`, then `flybench regressions --subject flydsl`: the history the user imported
    is the report's subject, not rows 'nobody measured' left out behind --include-others."""
    capsys.readouterr()
    cli(["regressions", "--subject", "flydsl", "--db", str(full), "--format", "json"])
    captured = capsys.readouterr()
    assert "not judged" not in captured.err
    plain = json.loads(captured.out)
    assert plain  # the month's steps are there to be judged
    cli(["regressions", "--subject", "flydsl", "--db", str(full), "--include-others", "--format", "json"])
    assert plain == json.loads(capsys.readouterr().out)
