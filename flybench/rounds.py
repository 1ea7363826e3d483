"""Interleaved, adaptive rounds of base and head: the schedule a pull request's check measures by.

A round is one measuring process per side (`flybench run --one-process
--append-samples`): every selected case of every workload, one after
another in that process, so a round costs what its kernels cost and not a
process start, a context and the JIT compiles per case. It gives every
case it measures one median, the unit a verdict is judged on
(flybench.regress.verdict); the round stays the independent unit. The
schedule:

1. `initial` rounds of everything selected, base and head interleaved, the
   side that goes first alternating from round to round, so that drift
   over the job falls on both sides alike;
2. then, while some subject case is still ambiguous, one more round of just
   those cases on both sides, until none is, a case has `cap` rounds, or the
   next round would not fit in the time budget.

The budget is a ceiling on the whole run, counted from `started` (the
gate's start, so its selection counts too), the initial rounds included:
the first round always runs (nothing can be judged without it), and every
later round starts only when it would end within the budget, by the time
the last round took (scaled to an adaptive round's share of the cases).

What to run and how to judge are given as functions, so the schedule runs
the same on a GPU runner and in a test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Selection:
    """What one side measures of one workload in a round: the workload, and optionally only some providers,
    dtypes, cases (a round's process measures all of its selections)."""

    workload: str
    providers: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    cases: tuple[str, ...] = ()

    @property
    def size(self) -> int | None:
        """How many (case, provider, dtype) it names, when it names them all (None: the whole workload)."""
        return len(self.cases) * len(self.providers) * len(self.dtypes) if self.cases else None


Case = tuple[str, str, str, str]
"""(workload, case, provider, dtype)."""


@dataclass
class RoundLog:
    """One round as it ran: which selections, how long both sides took."""

    number: int
    selections: list[Selection]
    seconds: float
    adaptive: bool


@dataclass
class Schedule:
    """The outcome of the rounds: each round's log, and why the schedule stopped adding rounds."""

    rounds: list[RoundLog] = field(default_factory=list)
    stopped: str = ""
    ambiguous: list[Case] = field(default_factory=list)  # still ambiguous when it stopped

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rounds)

    def summary(self, budget_s: float, cap: int, elapsed_s: float | None = None) -> list[str]:
        """What the budget bought, in a few lines for the report (`elapsed_s`: the whole run's time so far, when
        the budget counts more than the rounds)."""
        initial = [r for r in self.rounds if not r.adaptive]
        extra = [r for r in self.rounds if r.adaptive]
        lines = [f"{len(initial)} round{'s' if len(initial) != 1 else ''} of everything selected, base and head "
                 f"interleaved: {_minutes(sum(r.seconds for r in initial))}"]
        if extra:
            lines.append(f"{len(extra)} more round{'s' if len(extra) != 1 else ''} of the cases still ambiguous "
                         f"({', '.join(str(_cases_in(r)) for r in extra)} cases): "
                         f"{_minutes(sum(r.seconds for r in extra))}")
        spent = (f"{_minutes(self.seconds)} of rounds, {_minutes(elapsed_s)} in all" if elapsed_s is not None
                 else _minutes(self.seconds))
        lines.append(f"{self.stopped}; {spent} of a {_minutes(budget_s)} budget, at most {cap} rounds a case")
        return lines


def run_rounds(selections: Sequence[Selection], measure: Callable[[str, list[Selection]], None],
               ambiguous: Callable[[], list[Case]], *, initial: int = 3, cap: int = 8, budget_s: float = 3600.0,
               clock: Callable[[], float] = time.monotonic, started: float | None = None) -> Schedule:
    """Measure `selections` on both sides ("base", "head") in rounds, adding rounds for ambiguous cases.

    `measure(side, selections)` runs one side's measuring process of a round; `ambiguous()`
    judges what has been measured so far and names the subject cases whose
    verdict is still ambiguous and that more rounds could settle. `started`
    (on `clock`) is when the budget began; default now.
    """
    if initial < 1 or cap < initial:
        raise ValueError(f"rounds: initial {initial} must be at least 1 and at most the cap {cap}")
    schedule = Schedule()
    start = clock() if started is None else started
    for number in range(1, initial + 1):
        if number > 1 and clock() - start + schedule.rounds[-1].seconds > budget_s:
            schedule.stopped = (f"round {number} of {initial} (about {_minutes(schedule.rounds[-1].seconds)}) would "
                                "not fit in the budget")
            schedule.ambiguous = ambiguous()
            return schedule
        schedule.rounds.append(_round(number, list(selections), measure, clock, adaptive=False))
    initial_s = schedule.seconds
    total = sum(s.size or 0 for s in selections)
    for number in range(initial + 1, cap + 1):
        schedule.ambiguous = ambiguous()
        if not schedule.ambiguous:
            schedule.stopped = "no ambiguous case that more rounds could settle"
            return schedule
        again = rerun(schedule.ambiguous)
        last = schedule.rounds[-1]
        estimate = (last.seconds if last.adaptive
                    else initial_s / initial * min(1.0, len(schedule.ambiguous) / total if total else 1.0))
        if clock() - start + estimate > budget_s:
            schedule.stopped = f"{len(schedule.ambiguous)} ambiguous: another round (about {_minutes(estimate)}) " \
                               "would not fit in the budget"
            return schedule
        schedule.rounds.append(_round(number, again, measure, clock, adaptive=True))
    schedule.ambiguous = ambiguous()
    schedule.stopped = (f"{len(schedule.ambiguous)} still ambiguous at the cap of {cap} rounds"
                        if schedule.ambiguous else "no ambiguous case that more rounds could settle")
    return schedule


def rerun(cases: Sequence[Case]) -> list[Selection]:
    """One selection per workload covering the cases: their providers, dtypes and cases (the product of the three,
    which may measure a few more cases than named)."""
    by_workload: dict[str, list[Case]] = {}
    for case in cases:
        by_workload.setdefault(case[0], []).append(case)
    return [Selection(workload, *(tuple(sorted({c[i] for c in group})) for i in (2, 3, 1)))
            for workload, group in sorted(by_workload.items())]


def _round(number: int, selections: list[Selection], measure: Callable[[str, list[Selection]], None],
           clock: Callable[[], float], adaptive: bool) -> RoundLog:
    sides = ("base", "head") if number % 2 else ("head", "base")
    began = clock()
    for side in sides:
        measure(side, selections)
    return RoundLog(number, selections, clock() - began, adaptive)


def _cases_in(log: RoundLog) -> int:
    return sum(s.size or 0 for s in log.selections)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
