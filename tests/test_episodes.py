"""History steps read together: a lone series' step is dropped, a kernel's corroborated step stays, and steps
that moved several workloads or the controls at one commit are the environment's, never a regression."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from flybench.errors import FlybenchError
from flybench.regress import RegressConfig, exit_code, load_config, markdown
from flybench.regress.episodes import ENVIRONMENT, kernel_key, read_together
from flybench.regress.history import PERSIST, Point, Regression, Step, detect

CFG = RegressConfig()


def step(benchmark: str = "attention.Full.track_time", case: str = "c1", provider: str = "flydsl",
         first_bad: str = "c5", kind: str = "step", worse: bool = True) -> Regression:
    return Regression("flydsl", "mi355", "ci", benchmark, {"case": case, "provider": provider, "dtype": "bf16"},
                      "seconds", Step("c4", first_bad, 1.0e-3, 1.05e-3, 1e-6, 1.0, worse), kind, "main")


def kernels(*found: Regression, series: int = 3) -> dict:
    """Every kernel of `found` measured on `series` cases."""
    return {kernel_key(r.subject, r.machine, r.env_name, r.benchmark, r.params): series for r in found}


def test_a_lone_series_step_is_dropped_and_two_cases_of_the_kernel_keep_theirs() -> None:
    lone = step()
    assert read_together([lone], kernels(lone), CFG) == []
    pair = [step(case="c1"), step(case="c2")]
    assert read_together(pair, kernels(*pair), CFG) == pair
    elsewhere = [step(case="c1"), step(case="c2", first_bad="c6")]  # another commit: no witness
    assert read_together(elsewhere, kernels(*elsewhere), CFG) == []
    other_provider = [step(provider="flydsl"), step(case="c2", provider="triton")]  # another kernel: no witness
    assert read_together(other_provider, kernels(*other_provider), CFG) == []


def test_a_kernel_measured_on_one_case_needs_no_witness() -> None:
    lone = step()
    assert read_together([lone], kernels(lone, series=1), CFG) == [lone]
    assert read_together([lone], kernels(lone), replace(CFG, corroborate=1)) == [lone]


def test_steps_in_three_workloads_at_one_commit_are_the_environments_and_exit_zero() -> None:
    found = [step("attention.Full.track_time", "c1"), step("attention.Full.track_time", "c2"),
             step("moe.Full.track_time", "m1"), step("gemm.Full.track_time", "g1")]
    judged = read_together(found, kernels(*found), CFG)
    assert [r.kind for r in judged] == [ENVIRONMENT] * 4
    assert not any(r.regressed for r in judged) and exit_code(judged) == 0
    text = markdown(judged)
    assert "0 regressions in the history, 4 steps the environment made" in text
    assert "environment: other workloads or controls moved at this commit too" in text
    two = found[:3]  # two workloads: a change to shared code, still code
    assert [r.kind for r in read_together(two, kernels(*two), CFG)] == ["step", "step"]
    assert [r.kind for r in read_together(found, kernels(*found), replace(CFG, environment_workloads=4))] == \
        ["step", "step"]  # moe and gemm alone are dropped; attention's two cases stay code


def test_a_control_stepping_with_the_subject_makes_it_the_environments() -> None:
    found = [step(case="c1"), step(case="c2"), step(case="c1", provider="xla")]
    with_controls = replace(CFG, control_providers=frozenset({"xla"}))
    assert {r.kind for r in read_together(found, kernels(*found), with_controls)} == {ENVIRONMENT}
    assert [r.kind for r in read_together(found[:2], kernels(*found), with_controls)] == ["step", "step"]


def test_deterministic_changes_and_improvements_pass_through() -> None:
    change = step(kind="change")
    better = step(worse=False)
    assert read_together([change, better], kernels(change), CFG) == [change, better]


def series(values: list[float]) -> list[Point]:
    return [Point(str(i), v) for i, v in enumerate(values)]


def test_a_small_step_in_the_window_is_found_once_two_runs_show_its_new_level() -> None:
    rng = random.Random(1)
    quiet = [1e-3 * (1 + 0.003 * rng.gauss(0, 1)) for _ in range(40)]
    values = quiet[:36] + [v * 1.05 for v in quiet[36:]]  # 5% slower over the newest 4 runs
    thresholds = replace(CFG.thresholds("attention.Full.track_time", "", "seconds"), absolute=0.0)
    (found,) = detect(series(values), thresholds, window=CFG.window)
    assert (found.last_good, found.first_bad) == ("35", "36") and found.relative == pytest.approx(0.05, abs=0.01)
    assert PERSIST == 2
    assert detect(series(values[:37]), thresholds, window=CFG.window) == []  # one run at the new level: a blip
    assert len(detect(series(values[:38]), thresholds, window=CFG.window)) == 1


@pytest.mark.parametrize(("line", "message"), [
    ("window = 2", "window = 2 is out of range; window is the newest runs a series' fit reads"),
    ("corroborate = 1.5", "corroborate = 1.5 is out of range"),
    ("environment_workloads = 1", "environment_workloads = 1 is out of range"),
    ("step_floor = 1", "step_floor = 1 is out of range"),
])
def test_history_settings_are_checked(tmp_path: Path, line: str, message: str) -> None:
    config = tmp_path / "flybench.toml"
    config.write_text(f"[regress]\n{line}\n")
    with pytest.raises(FlybenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(config)
    config.write_text("[regress]\nwindow = 0\ncorroborate = 3\nenvironment_workloads = 2\nstep_floor = 0.05\n")
    loaded = load_config(config)
    assert (loaded.window, loaded.corroborate, loaded.environment_workloads, loaded.step_floor) == (0, 3, 2, 0.05)
    assert isinstance(loaded.window, int)
