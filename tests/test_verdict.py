"""Verdicts from rounds (one median per measuring process), drift controls, and what a comparison reports."""

from __future__ import annotations

import json
import math
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.asv_project import MACHINE, AsvProject, build, case_record, write_sidecar

from flybench.regress import Comparison, load_config, markdown, noise
from flybench.regress.compare import attribute_drift, compare, judge
from flybench.regress.history import Point
from flybench.regress.verdict import judge_rounds
from flybench.store import ingest

CFG = load_config(None)
TIME = replace(CFG.thresholds("moe.Quick.track_time", "", "seconds"), relative=0.03)  # a PR's tolerance
ALPHA = 0.001


def side(rounds_us: list[float], samples_per_round: int = 2000, jitter: float = 0.002) -> dict:
    """A measured row whose samples are tight inside each round; `rounds_us` are the rounds' medians."""
    samples = [r * 1e-6 * (1 + jitter * ((i % 7) - 3)) for r in rounds_us for i in range(samples_per_round)]
    return {"value": sorted(samples)[len(samples) // 2], "status": "ok", "samples": samples, "ci_99_a": None,
            "ci_99_b": None, "contract": None, "reason": None, "errors": None, "run_id": "r",
            "rounds": [r * 1e-6 for r in rounds_us], "round_spreads": [2 * 3 * jitter] * len(rounds_us)}


def verdict_of(base: list[float], head: list[float], role: str = "subject", provider: str = "triton"):
    params = {"case": "c", "provider": provider, "dtype": "bf16"}
    cfg = replace(CFG, p_threshold=ALPHA)
    return judge("moe.Quick.track_time", params, "env", "seconds", side(base), side(head), TIME, cfg, role=role)


def test_a_host_bound_case_scattering_30_percent_between_rounds_gets_no_verdict_from_its_samples() -> None:
    """The H200's torch MoE: 525, 725, 1221, 753 us in four rounds of one commit. Thousands of tight samples per
    round would give a pooled test p = 1e-90 for any shift; over rounds, a 15% shift of such a case is no
    verdict, and 500 A/A pairs of 3+3 rounds drawn with that scatter give no regression or improvement."""
    shifted = verdict_of([525.0, 725.0, 1221.0], [604.0, 834.0, 1404.0])  # every round 15% slower
    assert shifted.verdict == "ambiguous" and shifted.rounds == (3, 3)
    assert shifted.interval[0] < 0 < shifted.interval[1] and shifted.detectable > 1.0
    assert "reaches both sides" in shifted.detail
    rng = random.Random(3)
    verdicts = [verdict_of([800 * rng.lognormvariate(0, 0.3) for _ in range(3)],
                           [800 * rng.lognormvariate(0, 0.3) for _ in range(3)]).verdict for _ in range(500)]
    assert not {"regression", "improvement"} & set(verdicts)


def test_a_clean_six_percent_shift_over_three_rounds_a_side_is_a_regression() -> None:
    case = verdict_of([100.0, 100.4, 99.7], [106.1, 105.8, 106.3])
    assert case.verdict == "regression" and case.test == "welch-t (rounds)" and case.p_value < ALPHA
    assert case.relative == pytest.approx(0.06, abs=0.003) and 0 < case.interval[0] < 0.06 < case.interval[1]
    assert case.noise_source == "rounds" and case.detectable < 0.06
    better = verdict_of([106.1, 105.8, 106.3], [100.0, 100.4, 99.7])
    assert better.verdict == "improvement"


def test_quiet_rounds_that_agree_are_unchanged_and_a_small_real_change_is_too() -> None:
    assert verdict_of([100.0, 100.3, 99.8], [100.1, 99.9, 100.2]).verdict == "unchanged"
    small = verdict_of([100.0, 100.1, 99.9], [101.0, 101.1, 100.9])  # a real 1% is inside the 3% tolerance
    assert small.verdict == "unchanged" and small.interval[0] > 0


def test_a_change_near_the_tolerance_with_some_noise_is_ambiguous_until_more_rounds_tell() -> None:
    base, head = [100.0, 102.5, 97.5], [104.5, 107.0, 102.0]
    assert verdict_of(base, head).verdict == "ambiguous"
    more = verdict_of(base + [100.5, 99.5, 101.5, 98.5, 100.0], head + [105.0, 104.0, 106.0, 103.0, 104.5])
    assert more.verdict == "regression" and more.rounds == (8, 8)


def test_one_round_a_side_is_judged_by_the_history_noise_or_not_at_all() -> None:
    thresholds = replace(TIME, relative=0.05)
    no_history = judge_rounds([100.0], [110.0], thresholds, ALPHA)
    assert no_history.verdict == "ambiguous" and "no history" in no_history.why
    quiet = judge_rounds([100.0], [110.0], thresholds, ALPHA, history_noise=0.01)
    assert quiet.verdict == "regression" and quiet.test == "normal (history noise)"
    assert judge_rounds([100.0], [110.0], thresholds, ALPHA, history_noise=0.05).verdict == "ambiguous"


def test_bigger_is_better_units_turn_the_direction() -> None:
    tflops = CFG.thresholds("x.Rates.track_tflops", "", "TFLOP/s")
    assert judge_rounds([100.0, 100.2, 99.8], [70.0, 70.1, 69.9], tflops, ALPHA).verdict == "regression"
    assert judge_rounds([70.0, 70.1, 69.9], [100.0, 100.2, 99.8], tflops, ALPHA).verdict == "improvement"


def test_a_subject_change_that_the_controls_share_is_the_environment() -> None:
    subject = verdict_of([100.0, 100.4, 99.7], [108.1, 107.8, 108.3])
    controls = [verdict_of([b, b * 1.003, b * 0.998], [b * 1.08, b * 1.083, b * 1.079], role="control",
                           provider=f"torch{i}") for i, b in enumerate((50.0, 70.0, 90.0))]
    assert all(c.verdict == "regression" for c in controls)  # a control's own verdict: reported, never failing
    comparison = Comparison("m", "a" * 40, "b" * 40, ALPHA, attribute_drift([subject, *controls], CFG))
    (judged,) = comparison.having("environment")
    assert judged.params["provider"] == "triton" and "3 of 3 controls moved +8.0%" in judged.detail
    assert not comparison.failing and comparison.having("regression") == []
    text = markdown(comparison)
    assert "#### Environment: the drift controls moved too (1)" in text
    assert "Drift controls (3): measured in the same rounds, never failing the check" in text
    assert "| regression | 3 | +8.0% |" in text and ":white_check_mark:" in text


def test_a_subject_slower_than_its_drifting_controls_is_still_a_regression() -> None:
    subject = verdict_of([100.0, 100.4, 99.7], [116.1, 115.8, 116.3])
    controls = [verdict_of([b, b * 1.003, b * 0.998], [b * 1.08, b * 1.083, b * 1.079], role="control",
                           provider=f"torch{i}") for i, b in enumerate((50.0, 70.0))]
    (judged,) = Comparison("m", "a" * 40, "b" * 40, ALPHA, attribute_drift([subject, *controls], CFG)).having(
        "regression")
    assert "+7.4% without that drift" in judged.detail


def test_quiet_controls_leave_a_subject_regression_alone() -> None:
    subject = verdict_of([100.0, 100.4, 99.7], [108.1, 107.8, 108.3])
    control = verdict_of([50.0, 50.2, 49.9], [50.1, 49.9, 50.0], role="control", provider="torch")
    comparison = Comparison("m", "a" * 40, "b" * 40, ALPHA, attribute_drift([subject, control], CFG))
    assert [c.verdict for c in comparison.having("regression")] == ["regression"] and comparison.failing


def test_the_report_says_rounds_interval_and_spread_within_a_round() -> None:
    case = verdict_of([100.0, 100.4, 99.7], [106.1, 105.8, 106.3])
    text = markdown(Comparison("m", "a" * 40, "b" * 40, ALPHA, [case]))
    row = next(line for line in text.splitlines() if line.startswith("| `moe.Quick.track_time` | c, triton"))
    assert "3+3 rounds, interval +" in row and "welch-t (rounds), p=" in row
    assert "spread within a round ≤1.2%" in row and "detects" in row
    assert "round medians 100μs 100μs 99.7μs -\\> 106μs 106μs 106μs" in row  # each process's own median ("\\>" shows ">")


def test_the_history_gives_relative_noise_once_it_has_enough_commits() -> None:
    flat = [Point(str(i), 1e-3 * (1 + 0.01 * (-1) ** i)) for i in range(12)]
    found = noise.from_history(flat, TIME)
    assert found.source == "history" and 0.005 < found.relative < 0.05
    assert noise.from_history(flat[:4], TIME) is None


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


def test_rounds_and_their_spreads_reach_the_store_and_the_comparison(project: AsvProject, tmp_path: Path) -> None:
    shutil.copy(project.root / "asv.conf.json", tmp_path / "asv.conf.json")
    results = Path(shutil.copytree(project.results_dir, tmp_path / "results"))
    for index, scale in ((0, 1.0), (1, 1.3)):
        target = results / project.results_file(index).relative_to(project.results_dir)
        write_sidecar(target, [case_record("torch", run_id=f"round-{r}", median_s=m * scale * 1e-3,
                                           samples_s=[m * scale * 1e-3 * (1 + d) for d in (-0.01, 0, 0.01, 0.02)])
                               for r, m in enumerate((1.00, 1.002, 0.998))])
    db = tmp_path / "store.duckdb"
    assert ingest(results, db).ok
    result = compare(db, MACHINE, project.commits[0], project.commits[1])
    torch = next(c for c in result.cases if c.benchmark.endswith("track_time") and c.params["provider"] == "torch")
    assert torch.rounds == (3, 3) and torch.noise_source == "rounds" and torch.verdict == "regression"
    assert torch.relative == pytest.approx(0.3, rel=1e-3) and torch.round_spread == pytest.approx(0.025 / 1.005)  # IQR over median, as statistics.quantiles gives them
    flydsl = next(c for c in result.cases if c.benchmark.endswith("track_time") and c.params["provider"] == "flydsl")
    assert flydsl.rounds == (1, 1) and flydsl.noise_source == "history"  # the toy's six commits of this series
    assert json.loads(json.dumps(torch.detectable)) > 0


def test_notes_from_data_render_as_literal_markdown() -> None:
    """A changed file's name reaches the comment's notes: it must never become a link, an image or HTML."""
    comparison = Comparison("m", "a" * 40, "b" * 40, ALPHA, [],
                            notes=["compile selection: all 3 kernels: shared code changed ([x](https://e.example) "
                                   "![i](http://127.0.0.1/p.png) <img src=x>)"])
    line = next(line for line in markdown(comparison).splitlines() if line.startswith("- compile selection"))
    # escaped, and the bare address's autolink broken by a zero-width space: a reader sees the text, no link
    assert "\\[x\\](https:\u200b//e.example)" in line and "\\!\\[i\\]" in line and "\\<img src=x\\>" in line


def test_a_change_too_large_for_a_double_is_not_detectable_rather_than_an_error() -> None:
    """Two rounds a side whose medians moved several-fold: the detectable change overflowed math.expm1 and
    stopped the gate with a traceback; it is infinite, and reads "more than 100%"."""
    from flybench.regress.verdict import _detectable, size_text

    assert _detectable(0.03, 500.0, 9.9) == math.inf and size_text(_detectable(0.03, 500.0, 9.9)) == "more than 100%"


def test_two_rounds_whose_interval_reaches_past_a_double_are_ambiguous_not_an_overflow() -> None:
    """Two rounds a side give Welch's t one degree of freedom: rounds that moved 10^100-fold between processes
    (a loaded machine's worst) put the interval's end past what a double's exponential holds. The gate died of an
    OverflowError writing why the case was ambiguous; the interval reads 'wider than ±100%'."""
    found = judge_rounds([1.0, 1e100], [1.1, 1.1e100], TIME, ALPHA)
    assert found.verdict == "ambiguous" and "wider than ±100%" in found.why and found.high == math.inf
