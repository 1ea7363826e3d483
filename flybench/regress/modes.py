"""Whether a series flips between modes, and at which levels: the scan's bimodal rule, as a page can show it.

The history scan (`scan._visited`) takes a step to a level the series already
held VISITS times in the MODE_RUNS runs before as a bimodal series flipping
(FlyDSL's MI355X switches between speed modes of 2-5% per job), and
`scan._confirmed` leaves a files-only step on such a series unconfirmed. A
person reading History or an alert needs the same thing said of the whole
series: it has these levels and keeps going back to them. This is a pure
function of the values it is handed, with the scan's own constants, so the
pages do not grow a second rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

from flybench.regress.scan import DIGITS, KEPT, VISITS

QUARTILE = 0.3186
"""The lower quartile of |x| for x normal with unit spread: a series' run-to-run scatter read from its smaller half
of moves, since a series that flips every other run has flips for half of its moves (the scan's `_scatter` takes
the median, which they would inflate)."""


class Mode(NamedTuple):
    """One level a series keeps going back to: its median, lowest and highest value, and its runs."""

    level: float
    low: float
    high: float
    runs: int


def modes(values: Sequence[float], noise_k: float, floor: float) -> list[Mode]:
    """The series' modes, lowest first, where it flips between two or more; else an empty list.

    Over the newest KEPT runs (those a stored scan keeps), the values (as logs: modes are ratios) sorted are
    split wherever two neighbours lie further apart than a step must be: `noise_k` times the run-to-run scatter
    of successive runs (read from the smaller moves, QUARTILE, so that the flips do not count as scatter), at
    least `floor` (log(1 + step_floor) / 2: half the smallest step, below which no flip can pass as one) and
    DIGITS halves of the last printed digit (the smallest difference between two values; FlyDSL prints 0.5
    TFLOPS). A group of VISITS runs or more is a mode; the series flips when it has two or more and came back VISITS times to a mode it
    had left. A series that stepped once (and perhaps recovered once) has levels, not modes."""
    raw = [float(v) for v in values[-KEPT:] if v is not None and v > 0 and math.isfinite(v)]
    kept = [math.log(v) for v in raw]
    if len(kept) < 2 * VISITS + 1:
        return []
    jumps = sorted(abs(b - a) for a, b in zip(kept, kept[1:]))
    scatter = jumps[len(jumps) // 4] / QUARTILE / math.sqrt(2)
    printed = sorted({round(v, 12) for v in raw})
    digit = min((b - a for a, b in zip(printed, printed[1:])), default=0.0)
    gap = max(noise_k * scatter, floor, DIGITS * digit / 2 / statistics.median(raw))
    order = sorted(range(len(kept)), key=kept.__getitem__)
    group = [0] * len(kept)
    for a, b in zip(order, order[1:]):
        group[b] = group[a] + (kept[b] - kept[a] > gap)
    sizes = [group.count(g) for g in range(group[order[-1]] + 1)]
    big = [g for g, n in enumerate(sizes) if n >= VISITS]
    if len(big) < 2:
        return []
    path = [g for g in group if g in big]  # the modes in run order, an outlier between them left out
    seen, returns = {path[0]}, 0
    for a, b in zip(path, path[1:]):
        if a != b:
            returns += b in seen
            seen.add(b)
    if returns < VISITS:
        return []
    return [Mode(statistics.median(members), min(members), max(members), len(members))
            for members in ([v for v, g in zip(raw, group) if g == m] for m in big)]
