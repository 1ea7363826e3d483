"""The yardstick's labelling procedure (studies/flydsl_ci/labels.py) on a month made up to show each rule."""

from __future__ import annotations

from datetime import datetime, timezone

from flybench.importers.git_history import CommitInfo
from flybench.regress.history import Point
from studies.flydsl_ci.data import History, Series
from studies.flydsl_ci.labels import label

DAY = datetime(2026, 6, 20, tzinfo=timezone.utc)
COMMITS = [f"c{i}" for i in range(10)]
MAIN = [CommitInfo(c, DAY, DAY, f"commit {c}", True, i, 100 + i) for i, c in enumerate(COMMITS)]
WOBBLE = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001, 1.0, 1.002]


def series(runner: str, op: str, case: str, scale: float, step_at: int | None = None, change: float = 0.0,
           ) -> Series:
    values = [scale * w * (1 + change if step_at is not None and i >= step_at else 1) for i, w in enumerate(WOBBLE)]
    key = (runner, f"{op}.FlydslCI.track_tflops", f'{{"case": "{case}"}}')
    return Series(key, "gfx950", op, case, "fp8", "TFLOPS", tuple(Point(c, v) for c, v in zip(COMMITS, values)))


def history(*items: Series) -> History:
    return History({s.key: s for s in items}, [], MAIN)


def test_a_step_at_a_commit_that_touched_its_kernel_and_a_sibling_shape_moved_too_is_a_worse_code_step() -> None:
    month = history(series("mi355", "gemm", "a", 500, step_at=5, change=-0.06),
                    series("mi355", "gemm", "b", 800, step_at=5, change=-0.05),
                    series("mi355", "softmax", "s", 2.0), series("mi355", "layernorm", "l", 2.0))
    changed = {"c5": ["kernels/gemm/preshuffle_gemm.py", "tests/kernels/test_gemm.py"]}
    found = label(month, lambda commit: changed.get(commit, []))
    assert sorted((l.case, l.kind, l.direction, l.last_good, l.first_bad, l.touched_by) for l in found) == [
        ("a", "code", "worse", "c4", "c5", ("#105",)), ("b", "code", "worse", "c4", "c5", ("#105",))]
    assert found[0].witnesses == ("also b fp8",) and round(found[0].percent) == -6


def test_a_lone_step_or_one_that_does_not_persist_is_not_labelled() -> None:
    lone = history(series("mi355", "gemm", "a", 500, step_at=5, change=-0.06), series("mi355", "gemm", "b", 800))
    assert label(lone, lambda commit: ["kernels/gemm/preshuffle_gemm.py"] if commit == "c5" else []) == []
    blip = series("mi355", "gemm", "a", 500, step_at=9, change=-0.06)  # one run at the new level: no persistence
    assert label(history(blip, series("mi355", "gemm", "b", 800, step_at=9, change=-0.06)),
                 lambda commit: ["kernels/gemm/preshuffle_gemm.py"]) == []


def test_a_runner_wide_move_at_commits_that_touched_no_kernel_is_an_environment_step() -> None:
    month = history(series("mi355", "gemm", "a", 500, step_at=4, change=0.05),
                    series("mi355", "gemm", "b", 800, step_at=4, change=0.05),
                    series("mi355", "softmax", "s", 2.0, step_at=4, change=0.04),
                    series("mi355", "layernorm", "l", 3.0, step_at=4, change=0.04))
    found = label(month, lambda commit: ["docs/README.md"])
    assert {(l.kind, l.direction) for l in found} == {("environment", "better")} and len(found) == 4
    assert found[0].witnesses[-1] == "3 untouched ops moved the same way on the runner"
    two_ops = history(*(s for s in month.series.values() if s.op != "layernorm"))
    assert label(two_ops, lambda commit: ["docs/README.md"]) == []  # two ops moving is not yet an episode
