"""History step detection and base-vs-head comparison on real asv results with a planted regression."""

from __future__ import annotations

import argparse
import json
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.asv_project import MACHINE, PROJECT, STEP_AT, AsvProject, build, case_record, write_sidecar

from flybench.cli import compare as compare_cli
from flybench.cli import regressions as regressions_cli
from flybench.errors import FlybenchError
from flybench.regress.compare import compare
from flybench.regress import RegressConfig, exit_code, find_regressions, load_config, markdown, to_json
from flybench.regress.history import Point, detect
from flybench.store import connect, ingest

SECONDS = RegressConfig().thresholds("bench", "", "seconds")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


@pytest.fixture(scope="module")
def db(project: AsvProject, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted history, ingested once; tests that change it use `fresh_db`."""
    path = tmp_path_factory.mktemp("regress") / "store.duckdb"
    assert ingest(project.results_dir, path).ok
    return path


@pytest.fixture
def results(project: AsvProject, tmp_path: Path) -> Path:
    return Path(shutil.copytree(project.results_dir, tmp_path / "results"))


def test_planted_step_is_found_with_its_commit_range(db: Path, project: AsvProject) -> None:
    found = find_regressions(db)
    assert {(r.benchmark, r.params["provider"]) for r in found} == {
        ("attention.Quick.track_time", "flydsl"), ("attention.Rates.track_tflops", "flydsl")}
    for regression in found:
        step = regression.step
        assert (step.last_good, step.first_bad) == (project.commits[STEP_AT - 1], project.commits[STEP_AT])
        assert step.worse and step.confidence > 0.99 and regression.kind == "step"
    time = next(r for r in found if r.unit == "seconds").step
    assert (time.before, time.after) == pytest.approx((1.00e-3, 1.50e-3))
    assert time.relative == pytest.approx(0.5) and time.absolute == pytest.approx(0.5e-3)
    tflops = next(r for r in found if r.unit == "TFLOP/s").step  # bigger is better: a drop is the regression
    assert tflops.relative == pytest.approx(-1 / 3, rel=1e-3)
    assert exit_code(found) == 1
    assert find_regressions(db, benchmark="*track_time", machine="elsewhere") == []


def test_flat_noisy_series_has_no_step() -> None:
    rng = random.Random(7)
    flat = [Point(str(i), 1e-3 * (1 + 0.03 * rng.gauss(0, 1))) for i in range(40)]
    assert detect(flat, SECONDS) == []
    assert detect(flat, replace(SECONDS, relative=0.0, absolute=0.0)) == []


def test_noise_calibration_needs_bigger_steps_on_noisy_series() -> None:
    """A 12% step clears a 5% floor on a quiet series, not (at 3 noise) on one whose own noise is ~5%."""
    rng = random.Random(0)
    draws = [rng.gauss(0, 1) for _ in range(40)]
    thresholds = replace(SECONDS, step_floor=0.05, absolute=0.0, noise_k=3.0)

    def series(noise: float) -> list[Point]:
        return [Point(str(i), 1e-3 * (1 + noise * d) * (1.12 if i >= 20 else 1)) for i, d in enumerate(draws)]

    (quiet,) = detect(series(0.005), thresholds)
    assert (quiet.last_good, quiet.first_bad) == ("19", "20") and quiet.noise < 1e-5
    assert detect(series(0.04), thresholds) == []
    assert len(detect(series(0.04), replace(thresholds, noise_k=1.0))) == 1


def test_deterministic_metrics_report_every_change() -> None:
    registers = RegressConfig().thresholds("kernel", "", "registers")
    points = [Point(c, v) for c, v in zip("abcdef", [238, 238, 256, None, 256, 250])]
    steps = detect(points, registers)
    assert [(s.last_good, s.first_bad, s.before, s.after, s.worse) for s in steps] == [
        ("b", "c", 238, 256, True), ("e", "f", 256, 250, False)]
    waves = RegressConfig().thresholds("kernel", "", "waves")
    assert detect([Point("a", 2), Point("b", 1)], waves)[0].worse


def test_config_overrides_by_glob(tmp_path: Path, db: Path) -> None:
    config = tmp_path / "flybench.toml"
    config.write_text('[regress]\nrelative = 0.1\nabsolute = { "TFLOP/s" = 1.0 }\n\n'
                      '[regress.overrides."attention.Quick.track_time"]\nstep_floor = 0.6\n'
                      '[regress.overrides."*(c1, torch, bf16)"]\nnoise_k = 9\n')
    cfg = load_config(config)
    assert cfg.thresholds("attention.Quick.track_time", "c1, flydsl, bf16", "seconds").step_floor == 0.6
    assert cfg.thresholds("attention.Quick.track_time", "c1, flydsl, bf16", "seconds").relative == 0.1
    assert cfg.thresholds("attention.Rates.track_tflops", "c1, torch, bf16", "TFLOP/s").noise_k == 9
    assert cfg.thresholds("x", "", "TFLOP/s").absolute == 1.0 and cfg.absolute["seconds"] == 1e-5
    assert [r.benchmark for r in find_regressions(db, config=config)] == ["attention.Rates.track_tflops"]
    config.write_text("[regress]\nrelativ = 0.1\n")
    with pytest.raises(FlybenchError, match="unknown keys relativ"):
        load_config(config)


def test_compare_flags_the_planted_regression(db: Path, project: AsvProject) -> None:
    result = compare(db, MACHINE, project.commits[STEP_AT - 1][:7], project.commits[STEP_AT])
    verdicts = {(c.benchmark, c.params["provider"]): c for c in result.cases}
    time = verdicts["attention.Quick.track_time", "flydsl"]
    # one round a side: the series' history on the machine gives one round's noise
    assert time.verdict == "regression" and time.test == "normal (history noise)" and time.p_value < 0.002
    assert time.rounds == (1, 1) and time.interval[0] > 0.3
    assert verdicts["attention.Rates.track_tflops", "flydsl"].verdict == "regression"
    # torch moved 3%, inside its 20% tolerance whatever its noise says
    torch = verdicts["attention.Quick.track_time", "torch"]
    assert torch.verdict == "unchanged" and -0.2 < torch.interval[0] < torch.interval[1] < 0.2
    assert exit_code(result) == 1

    text = markdown(result)
    assert text.startswith("### :red_circle: flybench: 2 regressions, 0 improvements, 2 unchanged on m1-gfx950")
    assert text.index("#### Regressions") < text.index("2 unchanged, counted")
    assert "| `attention.Quick.track_time` | c1, flydsl, bf16 | 990μs | 1.50ms | +51.5% (+510μs) |" in text
    data = json.loads(to_json(result))
    assert data["summary"]["regression"] == 2 and data["head"] == project.commits[STEP_AT]


def test_compare_without_change_passes(db: Path, project: AsvProject) -> None:
    result = compare(db, MACHINE, project.commits[0], project.commits[1])
    assert {c.verdict for c in result.cases} == {"unchanged"} and exit_code(result) == 0
    assert "### :white_check_mark:" in markdown(result)


def test_compare_reports_a_case_that_broke(db: Path, project: AsvProject) -> None:
    result = compare(db, MACHINE, project.commits[3], project.commits[4])
    (broken,) = result.having("broken")
    assert broken.params["provider"] == "torch" and broken.head is None and exit_code(result) == 1


def test_unknown_commit_lists_the_known_ones_and_exits_2(db: Path, project: AsvProject, capsys) -> None:
    with pytest.raises(FlybenchError, match="known commits: .*" + project.commits[0][:8]):
        compare(db, MACHINE, "deadbeef", project.commits[1])
    with pytest.raises(FlybenchError, match=f"known machines: {MACHINE}"):
        compare(db, "nowhere", project.commits[0], project.commits[1])

    from flybench.cli import main  # the lead's entry point maps FlybenchError to exit status 2

    assert main(["compare", "deadbeef", project.commits[1][:8], "--db", str(db)]) == 2
    assert "known commits" in capsys.readouterr().err


def test_cli_verbs_render_and_exit(db: Path, project: AsvProject, tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="verb")
    compare_cli.add_parser(sub)
    regressions_cli.add_parser(sub)
    out = tmp_path / "comment.md"
    args = parser.parse_args(["compare", project.commits[2], project.commits[3], "--db", str(db),
                              "--format", "markdown", "--output", str(out)])
    assert compare_cli.main(args) == 1 and "2 regressions" in out.read_text()
    args = parser.parse_args(["regressions", "--db", str(db), "--format", "json", "--output", str(out)])
    assert regressions_cli.main(args) == 1 and len(json.loads(out.read_text())) == 2
    args = parser.parse_args(["regressions", "--db", str(db), "--benchmark", "*.track_time", "--output", str(out)])
    assert regressions_cli.main(args) == 1
    assert "1 regression in the history" in out.read_text()
    assert f"{project.commits[STEP_AT - 1][:8]}..{project.commits[STEP_AT][:8]}" in out.read_text()


def test_contract_mismatch_is_refused_naming_the_field(results: Path, project: AsvProject, tmp_path: Path) -> None:
    base, head = (results / project.results_file(i).relative_to(project.results_dir) for i in (0, 1))
    write_sidecar(base, [case_record("flydsl"), case_record("torch")])
    head_torch = case_record("torch", contract={**case_record("torch")["contract"], "samples": 44,
                                                "clocks": {"sm_mhz": "1900"}})  # run-to-run fields only
    write_sidecar(head, [case_record("flydsl", contract={**case_record("flydsl")["contract"], "flush": "none"}),
                         head_torch])
    db = tmp_path / "store.duckdb"
    assert ingest(results, db, subject=PROJECT).ok
    result = compare(db, MACHINE, project.commits[0], project.commits[1])
    refused = result.having("incomparable")
    assert {c.params["provider"] for c in refused} == {"flydsl"}
    assert all(c.detail == "contracts differ in flush: 'llc' vs 'none'" for c in refused)
    assert "Not compared: measurement contracts or toolchains differ" in markdown(result)
    assert {c.verdict for c in result.cases if c.params["provider"] == "torch"} == {"unchanged"}


def test_resource_changes_are_reported_exactly(results: Path, project: AsvProject, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    ingest(results, db, subject=PROJECT)
    with connect(db) as conn:
        for commit, vgprs, spills in zip(project.commits[2:4], (238, 256), (0, 12)):
            for metric, value in (("vgpr_count", vgprs), ("vgpr_spill_count", spills)):
                conn.execute("INSERT INTO compile_metrics VALUES (?, ?, ?, 'flash_attn_generic', 'gfx950', ?, ?, "
                             "'registers', NULL)", [PROJECT, commit, MACHINE, metric, value])
    result = compare(db, MACHINE, project.commits[2], project.commits[3])
    # the markdown escapes text from the data ("\\>" renders as ">"): what a reader sees is "VGPRs 238 -> 256"
    assert "- flash_attn_generic: VGPRs 238 -\\> 256 on gfx950 (worse)" in markdown(result)
    assert "- flash_attn_generic: VGPR spills 0 -\\> 12 on gfx950 (worse)" in markdown(result)
    changes = [r for r in find_regressions(db) if r.kind == "change"]
    assert sorted((c.params["metric"], c.step.before, c.step.after) for c in changes) == [
        ("vgpr_count", 238, 256), ("vgpr_spill_count", 0, 12)]
    assert [r["relative"] for r in json.loads(to_json(changes))] == [None, pytest.approx(18 / 238)]  # 0 -> 12: none


def test_a_commit_compared_with_itself_is_unchanged_everywhere(db: Path, project: AsvProject) -> None:
    result = compare(db, MACHINE, project.commits[2], project.commits[2])
    assert result.cases and {c.verdict for c in result.cases} <= {"unchanged", "skipped"}
    assert not result.having("improvement") and not result.failing


def test_zero_to_zero_is_no_change() -> None:
    from flybench.regress.compare import judge

    row = {"value": 0.0, "status": "ok", "samples": None, "ci_99_a": None, "ci_99_b": None, "contract": None,
           "reason": None, "errors": None}
    cfg = load_config(None)
    verdict = judge("spills.Kernel.track_count", {}, "env", "spills", row, dict(row),
                     cfg.thresholds("spills.Kernel.track_count", "", "spills"), cfg)
    assert verdict.verdict == "unchanged"
