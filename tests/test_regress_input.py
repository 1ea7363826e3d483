"""Bad input to the regression reports: non-finite values, a wrong config, names that match nothing.

Each must end in a clear answer: a non-finite value is not measured, and a
wrong config or name exits 2 with a message that says what to write instead,
never a traceback and never exit 1 (which means "regression").
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from asv import step_detect
from fixtures.asv_project import MACHINE, PROJECT, STEP_AT, AsvProject, build

from flybench.cli import main
from flybench.errors import FlybenchError
from flybench.regress import RegressConfig, find_regressions, load_config
from flybench.regress.history import Point, detect, series_noise
from flybench.store import connect, ingest, queries

INF, NAN = math.inf, math.nan
SECONDS = RegressConfig().thresholds("bench", "", "seconds")
TFLOPS = RegressConfig().thresholds("bench", "", "TFLOP/s")
REGISTERS = RegressConfig().thresholds("bench", "", "registers")


@pytest.fixture(autouse=True)
def detector_inputs(monkeypatch: pytest.MonkeyPatch) -> list[list]:
    """The series asv's step detection receives; a non-finite one fails the test at once instead of hanging it."""
    real, seen = step_detect.detect_steps, []

    def guarded(y, w=None):
        wrong = [v for v in [*y, *(w or [])] if v is not None and not math.isfinite(v)]
        assert not wrong, f"non-finite values reached asv's detect_steps: {wrong}"
        seen.append(list(y))
        return real(y, w)

    monkeypatch.setattr(step_detect, "detect_steps", guarded)
    return seen


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


@pytest.fixture(scope="module")
def db(project: AsvProject, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted history, plus one compile metric of another subject on another machine."""
    path = tmp_path_factory.mktemp("input") / "store.duckdb"
    assert ingest(project.results_dir, path).ok
    with connect(path) as conn:
        conn.execute("INSERT INTO compile_metrics VALUES ('other', ?, 'm2-gfx942', 'moe_kernel', 'gfx942', "
                     "'vgpr_count', 128, 'registers', NULL)", [project.commits[0]])
    return path


def run_cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """`flybench <argv>`: its exit status and stderr; a traceback anywhere fails the test."""
    status = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, err


# --- Non-finite values are not measured


def test_a_non_finite_value_counts_as_not_measured(detector_inputs: list[list]) -> None:
    values = [1.00, 1.01, 0.99, 1.00, 1.50, 1.51, 1.49, 1.50]
    for wrong in (INF, -INF, NAN):
        with_wrong = [Point(str(i), v * 1e-3) for i, v in enumerate(values)]
        with_wrong[2] = Point("2", wrong)
        missing = [*with_wrong[:2], Point("2", None), *with_wrong[3:]]
        (step,) = detect(with_wrong, SECONDS)
        assert (step.last_good, step.first_bad) == ("3", "4") and [step] == detect(missing, SECONDS)
        assert series_noise(with_wrong, SECONDS) == series_noise(missing, SECONDS)
    assert detector_inputs and all(y[2] is None for y in detector_inputs)


def test_an_infinite_rate_is_not_a_perfect_point(detector_inputs: list[list]) -> None:
    """For bigger-is-better units the detector sees 1/value: an infinite rate would have become a real 0."""
    rates = [Point(str(i), v) for i, v in enumerate([100.0, 101.0, INF, 99.0, 100.0, 66.0, 67.0, 66.5])]
    (step,) = detect(rates, TFLOPS)
    assert (step.last_good, step.first_bad) == ("4", "5") and step.before == pytest.approx(100.0, rel=0.01)
    assert [y[2] for y in detector_inputs] == [None]


@pytest.mark.parametrize("wrong", [1.7e308, -1.7e308, 1e200, 5e-324])
@pytest.mark.parametrize("thresholds", [SECONDS, TFLOPS], ids=["seconds", "TFLOP/s"])
def test_a_value_too_large_or_small_to_fit_is_not_measured(wrong: float, thresholds, detector_inputs) -> None:
    """A finite 1.7e308 squares to infinity inside asv's Potts solver, which then never returns."""
    values = [1.00, 1.01, 0.99, 1.00, 1.50, 1.51, 1.49, 1.50, 1.50]
    with_wrong = [Point(str(i), v) for i, v in enumerate(values)]
    with_wrong[2:4] = [Point("2", wrong), Point("3", wrong)]
    missing = [*with_wrong[:2], Point("2", None), Point("3", None), *with_wrong[4:]]
    assert detect(with_wrong, thresholds) == detect(missing, thresholds)
    assert series_noise(with_wrong, thresholds) == series_noise(missing, thresholds)
    assert all(y[2] is None and y[3] is None for y in detector_inputs)


@pytest.mark.parametrize("values", [[INF] * 5, [-INF] * 5, [NAN] * 5, [None] * 5, [INF, None, NAN, -INF], [],
                                    [1e-3], [INF, 1e-3, NAN]])
@pytest.mark.parametrize("thresholds", [SECONDS, TFLOPS, REGISTERS], ids=["seconds", "TFLOP/s", "registers"])
def test_a_series_with_fewer_than_two_finite_values_has_no_step(values: list, thresholds) -> None:
    points = [Point(str(i), v) for i, v in enumerate(values)]
    assert detect(points, thresholds) == [] and series_noise(points, thresholds) == 0.0


def test_non_finite_weights_count_as_missing(detector_inputs: list[list]) -> None:
    points = [Point(str(i), v * 1e-3, w) for i, (v, w) in enumerate(
        zip([1.0, 1.0, 1.0, 1.5, 1.5, 1.5], [1e3, INF, NAN, 1e3, 1e3, 1e3]))]
    (step,) = detect(points, SECONDS)
    assert (step.last_good, step.first_bad) == ("2", "3") and detector_inputs


def test_a_deterministic_metric_skips_non_finite_values() -> None:
    points = [Point(c, v) for c, v in zip("abcde", [238, INF, 238, NAN, 256])]
    assert [(s.last_good, s.first_bad, s.before, s.after) for s in detect(points, REGISTERS)] == [
        ("c", "e", 238, 256)]


def test_a_stored_infinity_is_not_measured(project: AsvProject, tmp_path: Path, capsys,
                                           detector_inputs: list[list]) -> None:
    """A results tree with Infinity in it: one point of the planted step, the whole of another series."""
    results = Path(shutil.copytree(project.results_dir, tmp_path / "results"))
    shutil.copy(project.root / "asv.conf.json", tmp_path / "asv.conf.json")
    for index in range(len(project.commits)):
        path = results / project.results_file(index).relative_to(project.results_dir)
        data = json.loads(path.read_text())
        if index == 1:
            data["results"]["attention.Quick.track_time"][0][0] = INF  # flydsl, before its step
        data["results"]["attention.Rates.track_tflops"][0][1] = -INF if index == 2 else INF  # torch, throughout
        path.write_text(json.dumps(data))
        assert "Infinity" in path.read_text()
    db = tmp_path / "store.duckdb"
    assert ingest(results, db).ok
    stored = queries.records(queries.history(db, MACHINE, "attention.Quick.track_time"))
    (infinite,) = [r for r in stored if r["commit_hash"] == project.commits[1] and r["params"].find("flydsl") >= 0]
    assert (infinite["value"], infinite["status"]) == (None, "failed") and "finite" in infinite["reason"]
    with connect(db) as conn:  # a compile metric with an infinite value, and one that is nothing but
        for commit, vgprs, lds in zip(project.commits, (238, INF, 238, NAN, 256, 256), (INF,) * 6):
            conn.execute("INSERT INTO compile_metrics VALUES (?, ?, ?, 'flash_attn', 'gfx950', 'vgpr_count', ?, "
                         "'registers', NULL), (?, ?, ?, 'flash_attn', 'gfx950', 'lds_bytes', ?, 'bytes', NULL)",
                         [PROJECT, commit, MACHINE, vgprs, PROJECT, commit, MACHINE, lds])

    found = find_regressions(db)
    steps = {(r.benchmark, r.params.get("provider") or r.params["metric"]): r.step for r in found}
    assert set(steps) == {("attention.Quick.track_time", "flydsl"), ("attention.Rates.track_tflops", "flydsl"),
                          ("flash_attn", "vgpr_count")}
    time = steps["attention.Quick.track_time", "flydsl"]
    assert (time.last_good, time.first_bad) == (project.commits[STEP_AT - 1], project.commits[STEP_AT])
    assert time.before == pytest.approx(1.0e-3, rel=0.02) and math.isfinite(time.noise)
    vgprs = steps["flash_attn", "vgpr_count"]
    assert (vgprs.last_good, vgprs.first_bad, vgprs.before, vgprs.after) == (
        project.commits[2], project.commits[4], 238, 256)
    assert detector_inputs and all(v is None or math.isfinite(v) for y in detector_inputs for v in y)

    status, _ = run_cli(["regressions", "--db", str(db), "--format", "json"], capsys)
    assert status == 1


# --- The config: types, ranges and names


REGRESS = "[regress]\n"
OVERRIDE = '[regress.overrides."moe.*"]\n'


@pytest.mark.parametrize("text, message", [
    (REGRESS + 'relative = "five percent"', 'relative = "five percent" is not a number'),
    (REGRESS + "noise_k = [3]", "noise_k = [3] is not a number"),
    (REGRESS + "relative = -1", "relative = -1 is out of range"),
    (REGRESS + "relative = 1.5", "relative = 1.5 is out of range"),
    (REGRESS + "relative = 1", "relative = 1 is out of range"),
    (REGRESS + "relative = nan", "relative = nan is out of range"),
    (REGRESS + "noise_k = 0", "noise_k = 0 is out of range"),
    (REGRESS + "noise_k = -3.0", "noise_k = -3.0 is out of range"),
    (REGRESS + "noise_k = inf", "noise_k = inf is out of range"),
    (REGRESS + "p_threshold = 0", "p_threshold = 0 is out of range"),
    (REGRESS + "p_threshold = 1.0", "p_threshold = 1.0 is out of range"),
    (REGRESS + "relative = true", "relative = true is not a number"),
    (REGRESS + "noise_k = false", "noise_k = false is not a number"),
    (REGRESS + "p_threshold = true", "p_threshold = true is not a number"),
    (REGRESS + "absolute = 1e-5", "absolute = 1e-05 is not a table"),
    (REGRESS + "absolute = { seconds = -1e-5 }", 'absolute."seconds" = -1e-05 is out of range'),
    (REGRESS + 'absolute = { seconds = "10us" }', 'absolute."seconds" = "10us" is not a number'),
    (REGRESS + "absolute = { seconds = true }", 'absolute."seconds" = true is not a number'),
    (REGRESS + 'bigger_is_better_units = "TFLOP/s"', 'bigger_is_better_units = "TFLOP/s" is not a list of strings'),
    (REGRESS + 'deterministic_units = ["registers", 3]', 'deterministic_units = ["registers", 3] is not a list'),
    (REGRESS + "contract_ignore = [true]", "contract_ignore = [true] is not a list of strings"),
    (REGRESS + "overrides = 3", "overrides = 3 is not a table of globs"),
    ('[regress.overrides]\n"moe.*" = 0.3', "0.3 is not a table of thresholds"),
    (OVERRIDE + 'relative = "high"', 'relative = "high" is not a number'),
    (OVERRIDE + "relative = 2", "relative = 2 is out of range"),
    (OVERRIDE + "noise_k = -1", "noise_k = -1 is out of range"),
    (OVERRIDE + "noise_k = true", "noise_k = true is not a number"),
    (OVERRIDE + "absolute = -2e-5", "absolute = -2e-05 is out of range"),
    (OVERRIDE + "absolute = { seconds = 2e-5 }", 'absolute = { "seconds" = 2e-05 } is not a number'),
    (OVERRIDE + "p_threshold = 0.01", "unknown keys p_threshold; allowed: absolute, noise_k, relative"),
    (REGRESS + "relativ = 0.05", "unknown keys relativ; allowed: absolute, bigger_is_better_units"),
    ("[regres]\nrelative = 0.05", "unknown section [regres]; flybench's settings go in the one section [regress]"),
    ("[compare]\np_threshold = 0.01", "unknown section [compare]"),
    ("relative = 0.05", "relative is outside any section"),
    ("regress = 5", "[regress]: 5 is not a table; write [regress] on a line of its own"),
    (REGRESS + "relative = ", "Invalid value"),
])
def test_a_wrong_config_says_what_is_wrong(text: str, message: str, tmp_path: Path, db: Path, project: AsvProject,
                                            capsys) -> None:
    config = tmp_path / "flybench.toml"
    config.write_text(text + "\n")
    with pytest.raises(FlybenchError) as caught:
        load_config(config)
    assert message in str(caught.value) and str(config) in str(caught.value)
    for argv in (["regressions"], ["compare", project.commits[0], project.commits[1], "--machine", MACHINE]):
        status, err = run_cli([*argv, "--db", str(db), "--config", str(config)], capsys)
        assert status == 2 and message in err


def test_a_wrong_value_is_answered_with_what_to_write(tmp_path: Path) -> None:
    config = tmp_path / "flybench.toml"
    for text, example in [("relative = 1.5", "write e.g. relative = 0.05"),
                          ("absolute = 1e-5", "write e.g. absolute = { seconds = 1e-5 }"),
                          ('deterministic_units = "registers"', 'write e.g. deterministic_units = ["registers"'),
                          ("noise_k = 0", "noise_k is a multiple of the series' noise, above 0")]:
        config.write_text(REGRESS + text + "\n")
        with pytest.raises(FlybenchError) as caught:
            load_config(config)
        assert example in str(caught.value)


def test_values_at_the_edges_of_their_ranges_load(tmp_path: Path) -> None:
    config = tmp_path / "flybench.toml"
    config.write_text(REGRESS + "relative = 0\nnoise_k = 1\np_threshold = 0.5\nabsolute = { seconds = 0 }\n"
                      "bigger_is_better_units = []\ndeterministic_units = ['Registers']\ncontract_ignore = []\n"
                      + OVERRIDE + "relative = 0.999\nabsolute = 0\nnoise_k = 1e-3\n")
    cfg = load_config(config)
    assert (cfg.relative, cfg.noise_k, cfg.p_threshold, cfg.absolute) == (0.0, 1.0, 0.5, {"seconds": 0.0})
    assert cfg.deterministic_units == {"registers"} and not cfg.bigger_is_better_units
    assert cfg.thresholds("moe.x", "", "seconds").relative == 0.999


# --- Names that match nothing


def test_unknown_names_exit_2_listing_the_known_ones(db: Path, project: AsvProject, capsys) -> None:
    cases = [
        (["regressions", "--machine", "m1-gfx95"], ["unknown machine 'm1-gfx95'", MACHINE, "m2-gfx942"]),
        (["regressions", "--subject", "toyprj"], ["unknown subject 'toyprj'", PROJECT, "other"]),
        (["regressions", "--subject", PROJECT, "--machine", "m2-gfx942"],
         [f"subject '{PROJECT}' has no results on machine 'm2-gfx942'", MACHINE]),
        (["regressions", "--benchmark", "moe.*"], ["'moe.*' matches no benchmark", "attention.Quick.track_time"]),
        (["regressions", "--benchmark", "attention"], ["'attention' matches no benchmark", "'*attention*'"]),
        (["regressions", "--machine", MACHINE, "--benchmark", "moe_kernel"], ["'moe_kernel' matches no benchmark"]),
        (["compare", project.commits[0], project.commits[1], "--subject", "toyprj"],
         ["unknown subject 'toyprj'", PROJECT]),
        (["compare", project.commits[0], project.commits[1], "--machine", "nowhere"],
         ["unknown machine 'nowhere'", MACHINE]),
        (["compare", project.commits[0], project.commits[1]], ["pass --machine", MACHINE, "m2-gfx942"]),
    ]
    for argv, messages in cases:
        status, err = run_cli([*argv, "--db", str(db)], capsys)
        assert status == 2 and all(m in err for m in messages), (argv, err)


def test_known_names_still_report(db: Path, project: AsvProject, capsys) -> None:
    base, head = project.commits[STEP_AT - 1], project.commits[STEP_AT]
    for argv, expected in [
        (["regressions", "--machine", MACHINE, "--subject", PROJECT, "--benchmark", "*.track_time"], 1),
        (["regressions", "--benchmark", "moe_kernel"], 0),
        (["compare", base, head, "--machine", MACHINE, "--subject", PROJECT], 1),
        (["compare", project.commits[0], project.commits[1], "--machine", MACHINE], 0),
    ]:
        status, _ = run_cli([*argv, "--db", str(db)], capsys)
        assert status == expected, argv


def test_an_empty_database_says_so(tmp_path: Path, capsys) -> None:
    db = tmp_path / "empty.duckdb"
    with connect(db):
        pass
    for argv in (["regressions"], ["compare", "a", "b"], ["compare", "a", "b", "--machine", MACHINE]):
        status, err = run_cli([*argv, "--db", str(db)], capsys)
        assert status == 2 and f"{db} holds no results" in err and "flybench ingest" in err
    status, err = run_cli(["regressions", "--db", str(tmp_path / "missing.duckdb")], capsys)
    assert status == 2 and "no database at" in err


def test_two_commits_that_share_no_case_are_not_a_pass(project: AsvProject, tmp_path: Path, capsys) -> None:
    """A green check on a comparison of nothing would hide a head whose cases were all renamed or lost."""
    path = tmp_path / "disjoint.duckdb"
    assert ingest(project.results_dir, path).ok
    base, head = project.commits[STEP_AT - 1], project.commits[STEP_AT]
    with connect(path) as conn:  # head measured other cases than base
        conn.execute("UPDATE results SET params = replace(params::VARCHAR, '\"c1\"', '\"c9\"')::JSON "
                     "WHERE commit_hash = ?", [head])
    status, err = run_cli(["compare", base, head, "--machine", MACHINE, "--subject", PROJECT, "--db", str(path)],
                          capsys)
    assert status == 2 and "share no case measured on both" in err
