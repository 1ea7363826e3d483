"""FlyDSL's own rule (a same-job drop of 3% or more against main) judged with flybench's history detector.

Each flagged record gets the first verdict that holds, in this order:

1. `A/A`: a push to main compared with main itself; the code is the same, so
   the flag is noise by construction.
2. `confirmed`: a pull request whose squash merge falls inside a worse step
   the detector found on main, same runner and case.
3. `rounding`: the drop is at most one unit of the last printed digit
   (0.3 -> 0.2 TFLOPS is -33%).
4. `within noise`: smaller than `noise_k` times the series' own noise, the
   bar the detector holds a step to.
5. `not reproduced`: the same PR's next run of the case on that runner passed.
6. `merged, no step`: the PR landed while main was being measured, and main
   shows no worse step there.
7. `unresolved`: none of the above (PR not merged in the window, or a
   branch run FlyDSL could not tie to a PR).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from flybench.regress.history import resolution
from studies.flydsl_ci.data import History, Job
from studies.flydsl_ci.steps import Alert, aa_band, relative_noise

VERDICTS = ("A/A", "confirmed", "rounding", "within noise", "not reproduced", "merged, no step", "unresolved")
RULE_PCT = -3.0
"""FlyDSL's DEFAULT_REGRESSION_PCT: a same-job delta at or below this is flagged."""


@dataclass(frozen=True)
class Judged:
    """One flagged record and the study's verdict on it."""

    job: Job
    verdict: str


def judge_flags(history: History, alerts: list[Alert], noise_k: float) -> list[Judged]:
    """A verdict for each of FlyDSL's flagged records; `alerts` are the detector's on main."""
    worse = [a for a in alerts if a.direction == "worse"]
    return [Judged(job, _verdict(history, job, worse, noise_k)) for job in history.jobs if job.flagged]


def counts(judged: list[Judged]) -> Counter:
    return Counter(j.verdict for j in judged)


def missed_by_rule(history: History, alerts: list[Alert]) -> list[tuple[Alert, bool]]:
    """Each worse step on main, with whether FlyDSL's rule flagged any run of it (PRs in range, or its commit).

    A/A flags do not count: they compare a main commit with itself, whatever the step.
    """
    result = []
    for alert in (a for a in alerts if a.direction == "worse"):
        prs = {c.merged_pr for c in history.merged_between(alert.step.last_good, alert.step.first_bad)}
        commits = {c.hash for c in history.merged_between(alert.step.last_good, alert.step.first_bad)}
        flagged = any(j.flagged and not j.aa and (j.pr in prs or j.commit in commits)
                      for j in history.jobs_of(alert.key))
        result.append((alert, flagged))
    return result


def _verdict(history: History, job: Job, worse: list[Alert], noise_k: float) -> str:
    if job.aa:
        return "A/A"
    merge = history.merge_of(job.pr) if job.pr is not None else None
    if merge is not None and any(_contains(history, a, merge.hash) for a in worse if a.key == job.key):
        return "confirmed"
    if _one_unit(history, job):
        return "rounding"
    series = history.series.get(job.key)
    noise = relative_noise(series) if series else math.nan
    if job.delta is not None and not math.isnan(noise) and abs(job.delta) < noise_k * noise:
        return "within noise"
    later = [j for j in history.jobs_of(job.key)
             if j.pr == job.pr and j.pr is not None and j.ts > job.ts and j.delta is not None]
    if later and min(later, key=lambda j: j.ts).delta > RULE_PCT:  # type: ignore[operator]
        return "not reproduced"
    if merge is not None and series is not None and _inside(history, series.points, merge.hash):
        return "merged, no step"
    return "unresolved"


def _inside(history: History, points: tuple, commit: str) -> bool:
    """Main was measured on both sides of `commit`, so a step there could have been seen."""
    pos = [history.position[p.commit] for p in points if p.value is not None and p.commit in history.position]
    return bool(pos) and min(pos) < history.position[commit] <= max(pos)


def _contains(history: History, alert: Alert, commit: str) -> bool:
    pos = history.position
    return pos[alert.step.last_good] < pos[commit] <= pos[alert.step.first_bad]


def _one_unit(history: History, job: Job) -> bool:
    """The flagged drop is one unit of the last digit FlyDSL printed for this case, or less."""
    if job.value is None or job.baseline_value is None:
        return False
    unit = resolution([j.value for j in history.jobs_of(job.key)] + [job.baseline_value])
    return unit > 0 and abs(job.baseline_value - job.value) <= unit * (1 + 1e-9)


def beyond_band(history: History, judged: list[Judged]) -> tuple[int, int, int]:
    """Flags of PR and branch runs, how many exceed their case's A/A band, and how many confirmed ones do.

    The band (the largest move two builds of the same main ever showed in one
    job) is a per-case replacement for the flat 3%.
    """
    ab = [j for j in judged if j.verdict != "A/A" and j.job.delta is not None]
    kept = [j for j in ab if abs(j.job.delta) > aa_band(history, j.job.key)]  # type: ignore[arg-type]
    return len(ab), len(kept), sum(j.verdict == "confirmed" for j in kept)
