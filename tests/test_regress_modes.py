"""flybench.regress.modes: whether a series flips between runner modes, and at which levels."""

from __future__ import annotations

import math

import pytest

from flybench.regress.modes import modes

FLOOR = math.log1p(0.03) / 2  # half the default step floor, as the pages pass it


def test_a_series_flipping_between_two_modes_a_job_apart_has_both() -> None:
    """FlyDSL's MI355X attention series flips per job between speed modes about 4% apart (1092 and 1168 TFLOP/s
    on the month): both modes are named, each at its median, the runs counted."""
    low = [1090.1, 1093.4, 1091.8, 1092.6, 1089.9, 1093.0, 1091.2, 1092.2]
    high = [1166.0, 1168.9, 1167.3, 1169.8, 1168.2, 1166.7, 1169.1, 1167.9]
    values = [low[0], low[1], high[0], high[1], low[2], high[2], high[3], low[3], low[4], high[4], high[5],
              low[5], high[6], low[6], low[7], high[7]]
    found = modes(values, noise_k=2.0, floor=FLOOR)
    assert [m.runs for m in found] == [8, 8]
    assert found[0].level == pytest.approx(sorted(low)[3] * 0.5 + sorted(low)[4] * 0.5)
    assert found[1].low == min(high) and found[1].high == max(high)


def test_a_smaller_per_job_shift_is_a_third_mode_where_the_runs_keep_it_apart() -> None:
    """A 2% mode beside a 5% one (the month's 2-5% per job), each job's mode held for a few runs: three modes
    where the scatter inside each is small."""
    jitter = [0.0, 0.15, -0.1, 0.05, -0.15, 0.1]
    jobs = [1.0, 1.0, 1.0, 1.02, 1.02, 1.0, 1.0, 1.05, 1.05, 1.05, 1.0, 1.0, 1.02, 1.02, 1.02, 1.0, 1.05, 1.05,
            1.0, 1.0]
    values = [100.0 * f + jitter[i % len(jitter)] for i, f in enumerate(jobs)]
    found = modes(values, noise_k=2.0, floor=FLOOR)
    assert [round(m.level) for m in found] == [100, 102, 105]


def test_a_single_step_and_its_recovery_are_levels_not_modes() -> None:
    """A regression that a later commit undid goes back once: not a series that keeps flipping."""
    values = [100.0, 100.3, 99.8, 100.1, 100.2, 94.0, 94.2, 93.9, 94.1, 100.0, 100.1, 99.9]
    assert modes(values, noise_k=2.0, floor=FLOOR) == []


def test_scatter_as_wide_as_the_modes_makes_none() -> None:
    """Runs that scatter evenly over 6% have no gap a step wide between neighbours: one level, no modes."""
    values = [100.0 + (i * 37 % 13) * 0.5 for i in range(30)]
    assert modes(values, noise_k=2.0, floor=FLOOR) == []


def test_a_printed_digit_is_not_a_mode() -> None:
    """FlyDSL prints small rates to one decimal: 0.5 and 0.6 TFLOPS alternating are the digit, not two modes."""
    assert modes([0.5, 0.6] * 10, noise_k=2.0, floor=FLOOR) == []
