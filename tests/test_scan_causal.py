"""The history scan is causal: a history replayed in one go and the same history fed night by night, with the
replay stored and read back between nights, leave the same alerts, events and steps at every night; whatever the
series do (steps, drifts, modes, printed digits that change, failed runs, rows that arrive late)."""

from __future__ import annotations

import math
import random

import pandas as pd

from flybench.regress import RegressConfig, checkpoint, scan, stored
from tests.test_scan import BENCH, OTHER, attribution, history

CFG = RegressConfig()


def nightly(frame: pd.DataFrame, arrival: list[int], att: scan.Attribution) -> None:
    """Feed `frame`'s rows night by night (row i is stored on night `arrival[i]`) the way `stored.refresh` does:
    resume the stored replay with the new commits' rows where the history only grew past what was judged, else
    replay from the first commit; at each night the result must be the one-go replay of the rows stored by then."""
    frame = frame.assign(night=arrival)
    replay, done = None, []
    for night in range(max(arrival) + 1):
        now = frame[frame["night"] <= night].drop(columns="night")
        if now.empty:
            continue
        order = {env: scan._commit_order(rows) for env, rows in now.groupby("env_name")}
        new = frame[frame["night"] == night]
        whole = scan.Replay("flydsl", "mi355", CFG).feed(now, att)
        if replay is None or new["commit_hash"].isin(done).any() or not stored._grown(order, set(done)):
            replay = scan.Replay("flydsl", "mi355", CFG).feed(now, att)
        else:
            replay = checkpoint.load(checkpoint.dump(replay.trimmed()), "flydsl", "mi355", done, CFG)
            replay.feed(now[~now["commit_hash"].isin(done)], att)
        done = list(replay.commits)
        assert _same(replay.scan(), whole.scan()), f"night {night}"


def _same(a: scan.Scan, b: scan.Scan) -> bool:
    """Equal alerts and events in order, and the same steps (listed per series in the order series joined)."""
    return a.alerts == b.alerts and a.events == b.events and sorted(map(repr, a.steps)) == sorted(map(repr, b.steps))


def test_a_printed_digit_that_gets_finer_later_does_not_change_what_was_judged() -> None:
    """One decimal (1.6 -> 1.5 at c08, a range that changed the kernel), then two decimals from c14: the step is
    within three halves of the one-decimal digit, so no night opens an alert; the whole history must not either
    (judging c08..c13 with the two-decimal digit of c14 is reading the future)."""
    values = [1.6] * 8 + [1.5] * 6 + [1.51, 1.49, 1.5, 1.52, 1.5, 1.49, 1.51, 1.5]
    series = {(BENCH, "a"): values}
    att = attribution(len(values), {"c08": [(BENCH, "a")]})
    frame = history(series)
    assert scan.replay("flydsl", "mi355", frame, att, CFG).alerts == []
    nightly(frame, list(range(len(values))), att)


def random_series(rng: random.Random, runs: int) -> list[float | None]:
    """A level with noise, and some of: steps either way, a slow drift, two modes, a printed digit that changes,
    failed runs."""
    level = rng.choice([1.5, 1.5, 12.0, 1000.0]) * rng.uniform(0.8, 1.2)  # 1.5 to one decimal: the digit decides
    spread = rng.choice([0.001, 0.005, 0.02])
    steps = {rng.randrange(4, runs): rng.choice([-1, 1]) * rng.uniform(0.03, 0.12) for _ in range(rng.randrange(3))}
    drift = rng.choice([0.0, 0.0, 0.008]) * rng.choice([-1, 1])
    drift_from = rng.randrange(runs)
    modes = rng.random() < 0.25
    digits = [rng.randrange(1, 3), rng.randrange(1, 4)]
    switch = rng.randrange(runs)
    values: list[float | None] = []
    for i in range(runs):
        v = level * math.prod(1 + s for at, s in steps.items() if i >= at) * (1 + drift) ** max(0, i - drift_from)
        v *= (1.04 if modes and rng.random() < 0.4 else 1.0) * (1 + spread * rng.gauss(0, 1))
        values.append(None if rng.random() < 0.05 else round(v, digits[i >= switch]))
    return values


def test_random_histories_replayed_in_one_go_and_night_by_night_agree_at_every_night() -> None:
    for seed in range(16):  # seed 14 caught the printed digit read from the future
        rng = random.Random(seed)
        runs = rng.randrange(18, 34)
        names = [(BENCH, "a"), (BENCH, "b"), (BENCH, "c"), (OTHER, "a")][:rng.randrange(2, 5)]
        series = {name: random_series(rng, runs) for name in names}
        touched = {f"c{i:02d}": [n for n in names if rng.random() < 0.5] for i in range(runs) if rng.random() < 0.3}
        att = attribution(runs, touched)
        frame = history(series)
        # most rows arrive the night of their commit; some a night or three late
        arrival = [int(c[1:]) + (rng.randrange(1, 4) if rng.random() < 0.08 else 0) for c in frame["commit_hash"]]
        nightly(frame, arrival, att)


def test_only_the_reader_opens_the_store_for_the_scan() -> None:
    """The scan is a pure fold over the rows `flybench.regress.stored` hands it: no other module of the scan's
    path (scan, history, noise, alerts, episodes, checkpoint) imports what opens the store. Base-vs-head
    comparison (compare, counters) reads its two commits on its own."""
    from tests.test_import_structure import _graph

    store = {"flybench/store/db.py", "flybench/store/queries.py"}
    opening = sorted(module for module, imports in _graph().items()
                     if module.startswith("flybench/regress/") and imports & store)
    assert opening == ["flybench/regress/compare.py", "flybench/regress/counters.py", "flybench/regress/stored.py"]
