"""The yardstick that scores the nightly detector on FlyDSL's CI month (studies/flydsl_ci/yardstick.py).

Synthetic cases only: TCPDBench-style matching with a margin, the scores,
reading units the other way for improvements, and the night-by-night replay
of `find_regressions` on a small imported history.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flybench.importers.flydsl_ci import import_file
from flybench.regress import RegressConfig
from studies.flydsl_ci.steps import fit_once
from studies.flydsl_ci.yardstick import Event, Replay, Score, config_of, flipped, match, score, toml

A, B = ("r1", "gemm.FlydslCI.track_tflops", "{}"), ("r2", "gemm.FlydslCI.track_tflops", "{}")


def test_a_flag_matches_within_the_margin_on_its_own_series_and_direction() -> None:
    labels = [Event(A, "worse", 5)]
    assert match(labels, [Event(A, "worse", 6)]) == [(0, 0)]
    assert match(labels, [Event(A, "worse", 4)]) == [(0, 0)]
    assert match(labels, [Event(A, "worse", 7)]) == []  # two commits off
    assert match(labels, [Event(B, "worse", 5)]) == []  # another runner
    assert match(labels, [Event(A, "better", 5)]) == []  # the other direction
    assert match(labels, [Event(A, "worse", 7)], margin=2) == [(0, 0)]


def test_each_label_takes_the_nearest_flag_and_each_flag_matches_once() -> None:
    labels = [Event(A, "worse", 5), Event(A, "worse", 6)]
    flags = [Event(A, "worse", 4), Event(A, "worse", 5), Event(A, "worse", 6)]
    assert match(labels, flags) == [(0, 1), (1, 2)]
    # one flag between two labels counts for one of them only
    assert score(labels, [Event(A, "worse", 5)]) == Score(labels=2, flags=1, hits=1)
    # a step reported twice (moved by a commit on a later night) is one match and one false alarm
    twice = score([Event(A, "worse", 5)], [Event(A, "worse", 5), Event(A, "worse", 6)])
    assert (twice.hits, twice.false_alarms) == (1, 1)


def test_precision_recall_and_f1() -> None:
    s = Score(labels=10, flags=20, hits=8)
    assert (s.precision, s.recall) == (0.4, 0.8)
    assert s.f1 == pytest.approx(2 * 0.4 * 0.8 / 1.2)
    assert Score(labels=8, flags=0, hits=0).f1 == 0.0
    assert Score(labels=8, flags=6, hits=6).f1 == pytest.approx(6 / 7)


def test_improvements_are_the_worse_steps_of_the_metric_read_the_other_way() -> None:
    base = RegressConfig(relative=0.04)
    other = flipped(base, ["TFLOPS", "seconds"])
    assert not other.thresholds("x", "", "TFLOPS").bigger_is_better
    assert other.thresholds("x", "", "seconds").bigger_is_better
    assert other.thresholds("x", "", "TFLOPS").relative == 0.04


def test_a_setting_renders_as_flybench_toml() -> None:
    config = config_of(0.04, 2.5, 40.0, (("moe.FlydslCI.*", {"noise_k": 4.0}),))
    assert toml(config) == ('[regress]\nrelative = 0.04\nnoise_k = 2.5\nabsolute = { TFLOPS = 40 }\n\n'
                            '[regress.overrides."moe.FlydslCI.*"]\nnoise_k = 4')


def _history(path: Path) -> Path:
    """Twelve main pushes of one case on one runner: about 1000 TFLOPS, then 900 from the seventh on."""
    values = [1000.0, 1004.0, 997.0, 1002.0, 999.0, 1003.0, 900.0, 903.0, 898.0, 901.0, 899.0, 902.0]
    records = [{
        "op": "gemm", "shape": "8192x8192x8192_tile128x256x128", "dtype": "fp8", "metric": "TFLOPS",
        "value": v, "status": "ok", "vs_main": None, "vs_tag": None, "regression": False, "extra": {},
        "ts": f"2026-06-{10 + i:02d}T00:00:00Z", "commit": f"{i + 1:040x}", "pr": None, "run_id": 100 + i,
        "source": "ci", "runner": "r1", "arch": "gfx942"} for i, v in enumerate(values)]
    path.write_text(json.dumps({"schema": 1, "repo": "ROCm/FlyDSL", "records": records}))
    return path


def test_the_replay_raises_a_step_once_on_the_night_it_first_shows(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    assert import_file(_history(tmp_path / "history.json"), db).ok
    replay = Replay(db)
    assert len(replay.commits) == 12
    with fit_once():
        worse = replay.flags(config_of(0.05, 2.0), "worse")
        better = replay.flags(config_of(0.05, 2.0), "better")
        strict = replay.flags(config_of(0.15, 2.0), "worse")
    assert len(worse) == 1 and better == [] and strict == []
    flag = worse[0]
    assert replay.at(flag).at == 6 and flag.step.last_good == replay.commits[5]
    assert replay.position[flag.night] >= 6  # never before the step was measured
    assert flag.step.relative == pytest.approx(-0.1, abs=0.01)
