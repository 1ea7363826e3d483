"""The detector comparison's mechanics: each candidate's worse steps, counted once, the first night they show."""

from __future__ import annotations

import importlib.util

import pytest

from studies.flydsl_ci.detectors import e_divisive, flags, measured_order, potts_trailing
from test_flydsl_labels import history, series


def test_a_trailing_potts_fit_finds_a_drop_and_keeps_only_what_clears_the_bar() -> None:
    values = [100, 100.4, 99.8, 100.2, 94, 94.3, 93.8, 94.1]
    [(index, before, after)] = potts_trailing(10, 0.02)(values)
    assert index == 4 and before > after and round(after / before - 1, 2) == -0.06
    assert potts_trailing(10, 0.10)(values) == []
    assert potts_trailing(3, 0.02)(values) == []  # the newest three runs hold no step


def test_each_worse_step_is_one_flag_however_many_nights_show_it() -> None:
    month = history(series("mi355", "gemm", "a", 500, step_at=5, change=-0.06),
                    series("mi355", "gemm", "b", 800, step_at=5, change=+0.06))  # better: not a flag
    order = measured_order(month)
    found = flags(month, potts_trailing(10, 0.02), order)
    assert [(e.key[2], e.direction, e.at) for e in found] == [('{"case": "a"}', "worse", order["c5"])]


@pytest.mark.skipif(importlib.util.find_spec("otava") is None, reason="pip install --no-deps apache-otava==0.8.0")
def test_e_divisive_as_otava_runs_it_finds_the_same_drop() -> None:
    values = [100, 100.4, 99.8, 100.2, 100.1, 94, 94.3, 93.8, 94.1, 94.0]
    assert [index for index, before, after in e_divisive(0.01)(values) if after < before] == [5]
