"""The detector comparison's mechanics: each candidate's worse steps, counted once, the first night they show."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone

import pytest

from flybench.importers.git_history import CommitInfo
from flybench.regress.history import Point
from studies.flydsl_ci.data import History, Series
from studies.flydsl_ci.detectors import e_divisive, flags, measured_order, potts_trailing

DAY = datetime(2026, 6, 20, tzinfo=timezone.utc)
COMMITS = [f"c{i}" for i in range(10)]
MAIN = [CommitInfo(c, DAY, DAY, f"commit {c}", True, i, 100 + i) for i, c in enumerate(COMMITS)]
WOBBLE = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001, 1.0, 1.002]


def series(case: str, scale: float, step_at: int, change: float) -> Series:
    """A main series of one gemm case on the MI355X runner, stepping by `change` at commit `step_at`."""
    values = [scale * w * (1 + change if i >= step_at else 1) for i, w in enumerate(WOBBLE)]
    key = ("mi355", "gemm.FlydslCI.track_tflops", f'{{"case": "{case}"}}')
    return Series(key, "gfx950", "gemm", case, "fp8", "TFLOPS", tuple(Point(c, v) for c, v in zip(COMMITS, values)))


def test_a_trailing_potts_fit_finds_a_drop_and_keeps_only_what_clears_the_bar() -> None:
    values = [100, 100.4, 99.8, 100.2, 94, 94.3, 93.8, 94.1]
    [(index, before, after)] = potts_trailing(10, 0.02)(values)
    assert index == 4 and before > after and round(after / before - 1, 2) == -0.06
    assert potts_trailing(10, 0.10)(values) == []
    assert potts_trailing(3, 0.02)(values) == []  # the newest three runs hold no step


def test_each_worse_step_is_one_flag_however_many_nights_show_it() -> None:
    month = History({s.key: s for s in (series("a", 500, 5, -0.06), series("b", 800, 5, +0.06))}, [],
                    MAIN)  # b got better: not a flag
    order = measured_order(month)
    found = flags(month, potts_trailing(10, 0.02), order)
    assert [(e.key[2], e.direction, e.at) for e in found] == [('{"case": "a"}', "worse", order["c5"])]


@pytest.mark.skipif(importlib.util.find_spec("otava") is None, reason="pip install --no-deps apache-otava==0.8.0")
def test_e_divisive_as_otava_runs_it_finds_the_same_drop() -> None:
    values = [100, 100.4, 99.8, 100.2, 100.1, 94, 94.3, 93.8, 94.1, 94.0]
    assert [index for index, before, after in e_divisive(0.01)(values) if after < before] == [5]
