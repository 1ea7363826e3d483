"""Alert state: a step opens an alert that later fits cannot drop; it closes when its series returns to the old
level, and a series that flips between two modes keeps one alert."""

from __future__ import annotations

from flybench.regress.alerts import OPEN, RECOVERED, advance, series_key
from flybench.regress.history import Point, Regression, Step

BEFORE, AFTER = 1.0e-3, 1.1e-3  # seconds: a 10% slower level


def step(first_bad: str, last_good: str, before: float = BEFORE, after: float = AFTER) -> Regression:
    return Regression("flydsl", "mi355", "ci", "attention.Quick.track_time", {"case": "c", "provider": "flydsl"},
                      "seconds", Step(last_good, first_bad, before, after, 1e-6, 1.0, True), "step", "main")


def series(*values: float) -> list[Point]:
    return [Point(f"c{i}", v) for i, v in enumerate(values)]


def points(*values: float) -> dict:
    return {series_key(step("c3", "c2")): series(*values)}


def test_a_step_opens_an_alert_that_a_refit_without_it_keeps_open() -> None:
    alerts, events = advance([], [step("c3", "c2")], points(BEFORE, BEFORE, BEFORE, AFTER, AFTER))
    assert [(a.status, a.opened_through) for a in alerts] == [(OPEN, "c4")] and [e.event for e in events] == ["opened"]
    # a longer history whose fit makes one segment of the step: no step found, the level is still bad
    later, events = advance(alerts, [], points(BEFORE, BEFORE, BEFORE, AFTER, AFTER, AFTER, AFTER))
    assert [a.status for a in later] == [OPEN] and events == []
    # the same step found again, its edge moved one commit by the refit: the same alert, seen again
    again, events = advance(later, [step("c4", "c3", after=AFTER * 1.01)],
                            points(BEFORE, BEFORE, BEFORE, AFTER, AFTER, AFTER, AFTER))
    assert len(again) == 1 and [e.event for e in events] == ["seen"]


def test_an_alert_closes_when_the_series_is_back_at_its_old_level() -> None:
    alerts, _ = advance([], [step("c3", "c2")], points(BEFORE, BEFORE, BEFORE, AFTER, AFTER))
    one_back, events = advance(alerts, [], points(BEFORE, BEFORE, BEFORE, AFTER, AFTER, BEFORE))
    assert [a.status for a in one_back] == [OPEN] and events == []  # one night back is a blip, not a fix
    fixed, events = advance(alerts, [], points(BEFORE, BEFORE, BEFORE, AFTER, AFTER, BEFORE * 1.01, BEFORE))
    assert [(a.status, a.closed_by) for a in fixed] == [(RECOVERED, "c5")]
    assert [(e.event, e.detail) for e in events] == [("recovered", "back at the old level at c5")]


def test_a_series_flipping_between_two_modes_keeps_one_alert() -> None:
    values = [BEFORE] * 3
    alerts: list = []
    for night in range(8):  # two nights slow, two nights fast, twice
        values.append(AFTER if night % 4 < 2 else BEFORE)
        found = [step("c3", "c2")] if values[-1] == AFTER else []
        alerts, _ = advance(alerts, found, points(*values))
    assert len(alerts) == 1 and alerts[0].flips == 1
    assert alerts[0].status == RECOVERED  # the last two nights were fast


def test_improvements_and_compile_metric_changes_open_no_alert() -> None:
    better = step("c3", "c2", before=AFTER, after=BEFORE)
    better = Regression(**{**better.__dict__, "step": Step("c2", "c3", AFTER, BEFORE, 1e-6, 1.0, False)})
    change = Regression("flydsl", "cpu", "", "flash_attn", {"arch": "gfx950", "metric": "vgpr_count"}, "registers",
                        Step("c2", "c3", 128, 136, 0, 1.0, True), "change")
    assert advance([], [better, change], points(AFTER, BEFORE)) == ([], [])


def test_a_return_that_other_workloads_shared_is_the_runners_and_keeps_the_alert_open() -> None:
    """A runner episode that speeds up everything brings a regressed series back to its old level: not a fix."""
    alerts, _ = advance([], [step("c3", "c2")], points(BEFORE, BEFORE, BEFORE, AFTER, AFTER))
    mine = series(BEFORE, BEFORE, BEFORE, AFTER, AFTER, BEFORE, BEFORE)

    def other(workload: str, lifted: bool) -> tuple[tuple, list[Point]]:
        key = ("flydsl", "mi355", "ci", f"{workload}.Quick.track_time", '{"case": "c"}')
        late = 0.9e-3 if lifted else 1.0e-3  # faster from c5 on
        return key, series(1.0e-3, 1.0e-3, 1.0e-3, 1.0e-3, 1.0e-3, late, late)

    lifted = dict([other("moe", True), other("gemm", True)])
    units = {key: "seconds" for key in lifted} | {series_key(alerts[0].regression): "seconds"}
    held, events = advance(alerts, [], {series_key(alerts[0].regression): mine, **lifted}, units)
    assert [a.status for a in held] == [OPEN] and events == []
    alone = dict([other("moe", True), other("gemm", False)])  # one other workload moved: the fix is the series' own
    fixed, _ = advance(alerts, [], {series_key(alerts[0].regression): mine, **alone}, units)
    assert [(a.status, a.closed_by) for a in fixed] == [(RECOVERED, "c5")]
    in_other_units, _ = advance(alerts, [], {series_key(alerts[0].regression): mine, **lifted},
                                {key: "TFLOP/s" for key in lifted})
    assert [a.status for a in in_other_units] == [RECOVERED]
