"""The verdict on one timed case from its rounds: the rules a pull request is judged by (docs/verdicts.md).

The unit of evidence is a round: one measuring process, which gives a case
one median. Samples inside a process are not independent evidence about the
next process (on the H200, host-bound torch cases moved 5-50% between
processes of the same commit while their pooled samples gave p = 1e-92), so
no test here ever sees a sample; each sees one number per round.

- The change is the ratio of the geometric means of head's and base's
  round medians (a mean of logs, so a 2x and a 0.5x round cancel).
- Two rounds or more a side: Welch's t over the log round medians
  (`scipy.stats.ttest_ind(equal_var=False)`) gives the change's confidence
  interval at 1 - `p_threshold`.
- Fewer rounds, where the case's history on this machine gives its
  process-to-process noise: a normal interval with that noise.
- Neither: no interval; the case is "ambiguous", and says why.

With the interval oriented so that positive is worse (slower, or fewer
TFLOP/s) and the tolerance T, the larger of the configured relative
threshold and the absolute floor over the base value:

- regression: the interval lies above 0 and the change is T or more worse;
- improvement: the same, better;
- unchanged: the whole interval lies inside (-T, T), whether or not it
  holds 0 (a real change too small to matter is unchanged too);
- ambiguous: anything else; more rounds narrow the interval.

The smallest change a case can detect at its rounds (`detectable`) is the
true change that the rule calls with about 90% probability.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from flybench.regress.config import Thresholds

MIN_ROUNDS = 2
"""Rounds a side below which rounds say nothing about process-to-process noise."""
POWER_Z = stats.norm.ppf(0.9)
"""`detectable` is the change called with this probability (90%)."""
OUTCOMES = ("regression", "improvement", "unchanged", "ambiguous")


@dataclass(frozen=True)
class RoundEvidence:
    """What a case's rounds say about head against base."""

    verdict: str  # one of OUTCOMES
    rounds: tuple[int, int]  # rounds on base, on head
    base: float | None  # geometric mean of base's round medians
    head: float | None
    change: float | None  # head / base - 1
    low: float | None  # the change's confidence interval (None: no noise known)
    high: float | None
    p_value: float | None
    test: str  # "welch-t (rounds)", "normal (history noise)", or "" (no test possible)
    noise: float | None  # one round's relative standard deviation, from the rounds or the history
    tolerance: float  # the T of the rules
    detectable: float | None  # the true change called with 90% probability at these rounds
    why: str = ""  # for an ambiguous case, why


def judge_rounds(base_rounds: Sequence[float], head_rounds: Sequence[float], thresholds: Thresholds,
                 p_threshold: float, history_noise: float | None = None, absolute_floor: float = 0.0) -> RoundEvidence:
    """The verdict on head against base from each side's round medians (one per measuring process).

    `history_noise` (relative standard deviation of one process's value over
    the case's history) stands in where a side has fewer than MIN_ROUNDS;
    `absolute_floor` is the least absolute change ever called, in the unit.
    """
    if base_rounds and set(base_rounds) == set(head_rounds) and len(set(base_rounds)) == 1:  # 0 -> 0 too
        value = float(base_rounds[0])
        return RoundEvidence("unchanged", (len(base_rounds), len(head_rounds)), value, value, 0.0, 0.0, 0.0, 1.0,
                             "identical values", None, thresholds.relative, None)
    x, y = _logs(base_rounds), _logs(head_rounds)
    rounds = (len(x), len(y))
    if not x or not y:
        return RoundEvidence("ambiguous", rounds, None, None, None, None, None, None, "", None,
                             thresholds.relative, None, "a side has no measured round")
    base, head = math.exp(statistics.fmean(x)), math.exp(statistics.fmean(y))
    diff = math.log(head / base)
    tolerance = max(thresholds.relative, absolute_floor / base if base else 0.0)
    interval = _interval(x, y, diff, 1 - p_threshold, history_noise)
    if interval is None:
        return RoundEvidence("ambiguous", rounds, base, head, head / base - 1, None, None, None, "", None, tolerance,
                             None, f"{_rounds_text(rounds)} and no history on this machine: no process-to-process "
                                   "noise to judge by; measure more rounds")
    low, high, p_value, test, noise, se, critical = interval
    sign = -1.0 if thresholds.bigger_is_better else 1.0  # positive: worse
    worse, worse_low, worse_high = sign * diff, min(sign * low, sign * high), max(sign * low, sign * high)
    band = math.log1p(tolerance)
    if worse_low > 0 and worse >= band:
        verdict = "regression"
    elif worse_high < 0 and worse <= -band:
        verdict = "improvement"
    elif -band < worse_low and worse_high < band:
        verdict = "unchanged"
    else:
        verdict = "ambiguous"
    detectable = _detectable(band, se, critical)
    why = "" if verdict != "ambiguous" else (
        f"the {100 * (1 - p_threshold):g}% interval, {interval_text(_change(low), _change(high))}, "
        f"reaches both sides of the {100 * tolerance:.1f}% tolerance or of no change")
    return RoundEvidence(verdict, rounds, base, head, head / base - 1, _change(low), _change(high), p_value,
                         test, noise, tolerance, detectable, why)


def _change(log_change: float) -> float:
    """A log-ratio as a relative change, infinite past what a double holds: two rounds a side have a Welch
    interval wide enough (a t of one degree of freedom) that its end's exponential overflowed under load."""
    return math.inf if log_change > MAX_LOG else math.expm1(log_change)


def _interval(x: list[float], y: list[float], diff: float, confidence: float, history_noise: float | None
              ) -> tuple[float, float, float, str, float, float, float] | None:
    """(low, high, p, test, one round's noise, standard error, critical value) of the log change, or None."""
    if len(x) >= MIN_ROUNDS and len(y) >= MIN_ROUNDS:
        noise = math.sqrt((statistics.variance(x) * (len(x) - 1) + statistics.variance(y) * (len(y) - 1))
                          / (len(x) + len(y) - 2))
        se = math.sqrt(statistics.variance(x) / len(x) + statistics.variance(y) / len(y))
        if se == 0:  # identical rounds on both sides: the change is exact
            return diff, diff, 0.0 if diff else 1.0, "welch-t (rounds)", 0.0, 0.0, 0.0
        result = stats.ttest_ind(y, x, equal_var=False)
        ci = result.confidence_interval(confidence)
        critical = float(stats.t.ppf(1 - (1 - confidence) / 2, result.df))
        return float(ci.low), float(ci.high), float(result.pvalue), "welch-t (rounds)", noise, se, critical
    if history_noise is None or not math.isfinite(history_noise):
        return None
    sigma = math.log1p(history_noise)
    se = sigma * math.sqrt(1 / len(x) + 1 / len(y))
    critical = float(stats.norm.ppf(1 - (1 - confidence) / 2))
    if se == 0:
        return diff, diff, 0.0 if diff else 1.0, "normal (history noise)", 0.0, 0.0, critical
    p_value = float(2 * stats.norm.sf(abs(diff) / se))
    return diff - critical * se, diff + critical * se, p_value, "normal (history noise)", history_noise, se, critical


def detectable_at(noise: float, rounds: int, tolerance: float, p_threshold: float) -> float:
    """The change a case of this noise between rounds would detect with `rounds` rounds a side (Welch's t)."""
    se = math.log1p(noise) * math.sqrt(2 / rounds)
    critical = float(stats.t.ppf(1 - p_threshold / 2, 2 * rounds - 2))
    return _detectable(math.log1p(tolerance), se, critical)


def _detectable(band: float, se: float, critical: float) -> float:
    """The true change called with 90% probability: past the tolerance and clear of zero, each by POWER_Z. Infinite
    where the rounds' noise is so large that the change would not fit in a double (two rounds a side of a case
    whose medians moved several-fold): no change is detectable there, and the report says "more than 100%"."""
    return _change(max(band + POWER_Z * se, (critical + POWER_Z) * se))


MAX_LOG = 700.0
"""The largest log-ratio whose exponential a double holds (e**709.8 is the limit)."""


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if v is not None and math.isfinite(v) and v > 0]


def _rounds_text(rounds: tuple[int, int]) -> str:
    return "one round a side" if rounds == (1, 1) else f"{rounds[0]}+{rounds[1]} rounds"


def interval_text(low: float, high: float) -> str:
    """'-2.7% to +3.0%'. An interval reaching past ±100% reads "wider than ±100%": its digits say nothing more (two
    rounds a side of a case whose medians moved several-fold printed as -100.0% to +1518546232287535176...%)."""
    if high > WIDE or low < -WIDE + 0.0005:  # a change cannot fall below -100%: -99.95% already prints as -100.0%
        return "wider than ±100%"
    return f"{_pct(low)} to {_pct(high)}"


def size_text(value: float) -> str:
    """A change's size, '5.0%'; past 100%, 'more than 100%' (a case that detects only a 10^40-fold change
    detects nothing a person acts on)."""
    return "more than 100%" if value > WIDE else f"{100 * value:.1f}%"


WIDE = 1.0
"""The relative change past which an interval is only said to be wide, and a size only said to be large (100%)."""


def _pct(value: float) -> str:
    return f"{100 * value:+.1f}%"

