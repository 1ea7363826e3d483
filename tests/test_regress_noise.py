"""Floors from each case's own noise: rounds of a pull request's job, else the series' history."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.asv_project import MACHINE, AsvProject, build, case_record, write_sidecar

from flybench.regress import load_config, noise
from flybench.regress.compare import compare
from flybench.regress.compare import judge
from flybench.regress.history import Point
from flybench.store import ingest

CFG = load_config(None)
TIME = replace(CFG.thresholds("diffusion_attention.Quick.track_time", "", "seconds"), relative=0.05)  # a PR's


def side(median_us: float, rounds: list[float] | None) -> dict:
    """A measured row: 60 samples around `median_us`, the rounds' medians in us."""
    samples = [median_us * 1e-6 * (1 + 0.002 * ((i % 7) - 3)) for i in range(60)]
    return {"value": median_us * 1e-6, "status": "ok", "samples": samples, "ci_99_a": None, "ci_99_b": None,
            "contract": None, "reason": None, "errors": None,
            "rounds": None if rounds is None else [r * 1e-6 for r in rounds]}


def test_rounds_give_the_spread_of_round_medians_pooled_over_both_sides() -> None:
    found = noise.from_rounds([100.0, 102.0, 98.0], [200.0, 204.0, 196.0])
    assert found.source == "rounds" and found.runs == (3, 3)
    assert found.relative == pytest.approx(1.4826 * 0.02)
    assert noise.from_rounds([100.0], [200.0, 201.0]) is None  # one round says nothing about noise
    assert noise.from_rounds(None, [1.0, 2.0]) is None


def test_history_needs_enough_commits_and_gives_relative_noise() -> None:
    flat = [Point(str(i), 1e-3 * (1 + 0.01 * (-1) ** i)) for i in range(12)]
    found = noise.from_history(flat, TIME)
    assert found.source == "history" and 0.005 < found.relative < 0.05
    assert noise.from_history(flat[:4], TIME) is None
    assert noise.from_history([Point(str(i), math.inf) for i in range(12)], TIME) is None


def test_detectable_change_follows_the_noise_with_a_small_fixed_minimum() -> None:
    quiet = noise.Noise(0.002, "rounds", (2, 2))
    assert noise.detectable(quiet, 67e-6, "seconds", TIME) == pytest.approx(max(TIME.relative, 1e-6 / 67e-6))
    loud = noise.Noise(0.05, "rounds", (2, 2))
    assert noise.detectable(loud, 1e-3, "seconds", TIME) == pytest.approx(TIME.noise_k * 0.05)  # 3 x 5% x sqrt(2/2)
    assert noise.detectable(None, 67e-6, "seconds", TIME) == pytest.approx(TIME.absolute / 67e-6)  # the old floor


def test_a_ten_percent_slowdown_of_a_decode_kernel_is_caught_once_its_noise_is_known() -> None:
    cfg, thresholds = CFG, TIME
    unknown = judge("diffusion_attention.Quick.track_time", {}, "env", "seconds", side(67.0, None),
                     side(73.7, None), thresholds, cfg)
    assert unknown.verdict == "unchanged" and unknown.noise is None  # 6.7 us under the 10 us floor
    rounds = noise.from_rounds([67.0, 67.2], [73.6, 73.8])
    known = judge("diffusion_attention.Quick.track_time", {}, "env", "seconds", side(67.0, [67.0, 67.2]),
                   side(73.7, [73.6, 73.8]), thresholds, cfg, rounds)
    assert known.verdict == "regression" and known.noise_source == "rounds"
    assert known.detectable == pytest.approx(0.05) and not known.noise_limited
    noisy = judge("diffusion_attention.Quick.track_time", {}, "env", "seconds", side(67.0, [60.0, 74.0]),
                   side(73.7, [66.0, 81.0]), thresholds, cfg, noise.from_rounds([60.0, 74.0], [66.0, 81.0]))
    assert noisy.verdict == "unchanged" and noisy.noise_limited and noisy.detectable > 0.1


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


def test_rounds_reach_the_store_and_the_comparison(project: AsvProject, tmp_path: Path) -> None:
    import shutil

    shutil.copy(project.root / "asv.conf.json", tmp_path / "asv.conf.json")
    results = Path(shutil.copytree(project.results_dir, tmp_path / "results"))
    for index in (0, 1):
        target = results / project.results_file(index).relative_to(project.results_dir)
        write_sidecar(target, [case_record("torch", run_id=f"round-{r}", median_s=m * 1e-3)
                               for r, m in enumerate((1.00, 1.01, 0.99))])
    db = tmp_path / "store.duckdb"
    assert ingest(results, db).ok
    result = compare(db, MACHINE, project.commits[0], project.commits[1])
    torch = next(c for c in result.cases if c.benchmark.endswith("track_time") and c.params["provider"] == "torch")
    assert torch.noise_source == "rounds" and torch.noise == pytest.approx(1.4826 * 0.01)
    flydsl = next(c for c in result.cases if c.benchmark.endswith("track_time") and c.params["provider"] == "flydsl")
    assert flydsl.noise_source == "history" and flydsl.noise > 0  # the toy's six commits of this series
    assert json.loads(json.dumps(torch.detectable)) > 0


def test_every_row_says_what_it_can_detect_and_the_summary_lists_the_noise_limited() -> None:
    from flybench.regress import Comparison, markdown
    from flybench.regress.report import noise_limited

    quiet = noise.from_rounds([67.0, 67.2], [73.6, 73.8])
    loud = noise.from_rounds([60.0, 74.0], [66.0, 81.0])
    cases = [judge("diffusion_attention.Quick.track_time", {"case": name, "provider": "triton", "dtype": "bf16"},
                    "env", "seconds", side(67.0, base), side(73.7, head), TIME, CFG, found)
             for name, base, head, found in (("quiet", [67.0, 67.2], [73.6, 73.8], quiet),
                                              ("loud", [60.0, 74.0], [66.0, 81.0], loud))]
    comparison = Comparison("m", "a" * 40, "b" * 40, CFG.p_threshold, cases)
    assert [c.params["case"] for c in noise_limited(comparison)] == ["loud"]
    text = markdown(comparison)
    assert "detects 5.0% here (noise 0.21% between rounds)" in text  # the quiet regression's row
    section = text[text.index("Cases whose noise keeps them from the threshold (1)"):]
    assert "loud, triton, bf16" in section and "(threshold 5.0%)" in section and "between rounds" in section
