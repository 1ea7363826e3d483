"""The labelling procedure (studies/flydsl_ci/labels.py) on a small month made up to show each rule: a code step,
a bimodal series and a runner episode."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from flybench.importers.git_history import CommitInfo
from flybench.regress.history import Point
from studies.flydsl_ci.data import History, Job, Series
from studies.flydsl_ci.labels import OpFiles, label

DAY = datetime(2026, 6, 20, tzinfo=timezone.utc)
N = 14
COMMITS = [f"c{i:02d}" for i in range(N)]
MAIN = [CommitInfo(c, DAY + timedelta(hours=4 * i), DAY + timedelta(hours=4 * i), f"commit {c}", True, i, 100 + i)
        for i, c in enumerate(COMMITS)]
WOBBLE = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001, 1.0, 1.002, 0.999, 1.001, 0.998, 1.003]
FILES = {"gemm": "kernels/gemm/preshuffle_gemm.py", "moe": "kernels/moe/moe_gemm_2stage.py"}


def files(op: str, commit: str) -> OpFiles:
    own = FILES[op.split("_")[0]]
    return OpFiles(frozenset({own, f"tests/kernels/test_{op.split('_')[0]}.py"}), frozenset(), frozenset({op}))


def series(op: str, case: str, levels: list[float]) -> tuple[Series, list[Job]]:
    """A main series with these levels (times a small wobble); every main run is also a job (an A/A one), and
    one pull-request job per commit measured main beside its own head, at the level main had then."""
    key = ("mi355", f"{op}.FlydslCI.track_tflops", f'{{"case": "{case}"}}')
    values = [level * w for level, w in zip(levels, WOBBLE)]
    jobs = []
    for i, (c, v) in enumerate(zip(COMMITS, values)):
        at = MAIN[i].order_date
        jobs.append(Job(key, "gfx950", op, f"m{i}", c, at + timedelta(minutes=30), "main", None, True, v, 0.0,
                        "main", v, False))
        jobs.append(Job(key, "gfx950", op, f"p{i}", f"pr{i}", at + timedelta(hours=3), "pr", 900 + i, False, v,
                        0.0, "main", v * (1.0005 if i % 2 else 0.9995), False))
    return Series(key, "gfx950", op, case, "fp8", "TFLOPS", tuple(Point(c, v) for c, v in zip(COMMITS, values))), jobs


def history(*items: tuple[Series, list[Job]]) -> History:
    return History({s.key: s for s, _ in items}, [j for _, jobs in items for j in jobs], MAIN)


def step(scale: float, at: int, change: float) -> list[float]:
    return [scale * (1 + change if i >= at else 1) for i in range(N)]


def test_a_step_at_a_commit_that_changed_its_kernel_with_a_sibling_shape_moving_too_is_a_worse_code_step() -> None:
    month = history(series("gemm", "a", step(500, 6, -0.06)), series("gemm", "b", step(800, 6, -0.05)),
                    series("moe_s1", "m", [2.0] * N))
    changed = {"c06": ["kernels/gemm/preshuffle_gemm.py"]}
    found = label(month, lambda commit: changed.get(commit, []), files)
    assert sorted((x.case, x.kind, x.direction, x.last_good, x.first_bad, x.touched_by, x.confidence)
                  for x in found) == [("a", "code", "worse", "c05", "c06", ("#106",), "high"),
                                      ("b", "code", "worse", "c05", "c06", ("#106",), "high")]
    assert round(found[0].percent) == -6 and found[0].witnesses[0] == "also b fp8"


def test_a_bimodal_series_is_not_a_code_step_even_where_its_kernel_changed() -> None:
    """Two levels all month; the main runs after c06 happen to sit low, but the jobs' main samples after c06
    visit the high level as before: the level distribution did not change."""
    high, low = 100.0, 90.0
    levels = [high, low, high, high, low, high, low, low, low, low, high, low, high, low]
    bimodal, jobs = series("gemm", "a", levels)
    jobs = [j if j.context == "main" else Job(j.key, j.arch, j.op, j.run_id, j.commit, j.ts, j.context, j.pr,
                                               j.on_main, j.value, j.delta, j.baseline,
                                               high if int(j.run_id[1:]) % 2 else low, j.flagged) for j in jobs]
    month = history((bimodal, jobs), series("gemm", "b", [50.0] * N))
    found = label(month, lambda commit: ["kernels/gemm/preshuffle_gemm.py"] if commit == "c06" else [], files)
    assert [x for x in found if x.kind == "code"] == []


def test_a_runner_episode_at_a_compiler_only_commit_is_the_environment_not_code() -> None:
    """The runner's jobs switch speed modes: four MoE ops drop 4% together at c06, where only the JIT's cache
    key changed, and the jobs' samples show the low mode before c06 as well."""
    modes = [1.0, 0.96, 0.96, 1.0, 1.0, 1.0, 0.96, 0.96, 1.0, 1.0, 1.0, 1.0, 0.96, 0.96]
    items = []
    for op in ("moe_s1", "moe_s2_atomic", "moe_s2_reduce", "moe_w4a16_s1"):
        s, jobs = series(op, "t128", [50.0 * m for m in modes])
        items.append((s, jobs))
    month = history(*items)
    found = label(month, lambda commit: ["python/flydsl/compiler/jit_function.py"] if commit == "c06" else [],
                  files)
    assert [x for x in found if x.kind == "code"] == []
    episode = [x for x in found if x.kind == "environment" and x.first_bad == "c06"]
    assert len(episode) == 4 and all(x.direction == "worse" and x.evidence == "episode" for x in episode)
