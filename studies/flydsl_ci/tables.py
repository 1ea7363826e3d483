"""The study's tables and headline numbers, computed from the store and rendered as markdown.

Each function takes what the study loaded and returns rows (lists of
strings) or plain numbers; `markdown()` renders rows. Nothing here reads
the input file: every number comes from the database the importer wrote.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from flybench.importers.flydsl_ci.derive import MAIN_ENV, SOURCE
from flybench.regress import RegressConfig, find_regressions
from flybench.regress.history import MAD_TO_SIGMA
from flybench.store import queries
from flybench.workloads import WORKLOADS
from studies.flydsl_ci.data import History
from studies.flydsl_ci.flags import VERDICTS, Judged
from studies.flydsl_ci.steps import Alert, aa_band, evidence, relative_noise
from studies.flydsl_ci.sweep import coarse


def markdown(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def tally(counts: dict[str, int]) -> str:
    """`{'ok': 3, 'skip': 1}` as "3 ok, 1 skip", biggest first."""
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def pct(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}%"


def import_summary(db: Path, subject: str, history: History) -> dict[str, Any]:
    """What the importer stored: records, statuses, rows, mapping, commits and how main was told apart."""
    records = queries.imported_records(db, SOURCE, subject)
    results = queries.history(db, subject=subject)
    results = results[results["source"] == SOURCE]
    commits = queries.imported_commits(db, SOURCE, subject)
    workloads = results["benchmark"].str.split(".").str[0]
    pr_null = set(records.loc[records["pr"].isna(), "commit_hash"])
    main = set(commits.loc[commits["on_main"].fillna(False).astype(bool), "hash"])
    case = ["runner", "commit_hash", "op", "shape", "dtype", "metric"]
    rerun = records[records.duplicated(case, keep=False)]
    return {
        "records": len(records), "statuses": tally(Counter(records["status"])),
        "rerun_prs": ", ".join(f"#{int(p)}" for p in sorted(rerun["pr"].dropna().unique())) or "none",
        "flagged": int(sum(json.loads(r)["regression"] for r in records["record"])),
        "commits": len(commits), "runs": records["run_id"].nunique(), "runners": records["runner"].nunique(),
        "rows": len(results), "reruns": len(records) - len(results),
        "mapped": tally({w: int(n) for w, n in Counter(workloads).items() if w in WORKLOADS}),
        "own_names": int(sum(n for w, n in Counter(workloads).items() if w not in WORKLOADS)),
        "contexts": tally(Counter(results["run_context"])),
        "pr_null_commits": len(pr_null), "pr_null_on_main": len(pr_null & main),
        "pr_null_not_in_clone": int(sum((commits["ordered_by"] == "ci-timestamp") & commits["hash"].isin(pr_null))),
        "main_commits": len(main), "series": len(history.series),
    }


def noise_frame(history: History) -> pd.DataFrame:
    """One row per main series with 5 values or more: run-to-run noise, same-job A/A spread and band, in %."""
    rows = []
    for series in history.series.values():
        if math.isnan(relative_noise(series)):
            continue  # skipped on this architecture, or measured fewer than 5 times
        aa = [j for j in history.jobs_of(series.key) if j.aa and j.delta is not None]
        rows.append({"arch": series.arch, "op": series.op, "label": series.label, "coarse": coarse(series),
                     "history_noise": relative_noise(series), "aa_sigma": _spread([j.delta for j in aa]),
                     "aa_band": aa_band(history, series.key) if aa else math.nan})
    return pd.DataFrame(rows)


def _spread(deltas: list[float]) -> float:
    """Per-measurement robust spread from A/A differences: scaled MAD / sqrt 2 (NaN without A/A runs)."""
    if not deltas:
        return math.nan
    center = statistics.median(deltas)
    return MAD_TO_SIGMA * statistics.median(abs(d - center) for d in deltas) / math.sqrt(2)


def noise_table(frame: pd.DataFrame) -> list[list[str]]:
    """Per op and arch: series, run-to-run noise (median, max), same-job noise, worst A/A move, coarse series."""
    rows = []
    for (op, arch), group in frame.groupby(["op", "arch"]):
        rows.append([op, arch, len(group), pct(group["history_noise"].median()), pct(group["history_noise"].max()),
                     pct(group["aa_sigma"].median(), 2), pct(group["aa_band"].max()), int(group["coarse"].sum())])
    return rows


def step_rows(history: History, alerts: list[Alert]) -> list[list[str]]:
    """Every alert with its commit range, PRs merged in it, size, confidence, delay and evidence."""
    rows = []
    for alert in sorted(alerts, key=lambda a: (history.position[a.step.first_bad], history.series[a.key].label)):
        series, found = history.series[alert.key], evidence(history, alert)
        index = [p.commit for p in series.points]
        prs = ", ".join(f"#{p}" for p in found.prs) if len(found.prs) <= 4 else f"{len(found.prs)} PRs"
        measured = ", ".join(f"#{p} {d:+.1f}%" for p, d in found.measured) or "none"
        rows.append([series.label, alert.direction, f"{alert.percent:+.1f}%",
                     f"{alert.step.last_good[:8]}..{alert.step.first_bad[:8]}", prs or "none",
                     f"{alert.step.confidence:.3f}", index.index(alert.night) - index.index(alert.step.first_bad),
                     "yes" if alert.in_final else "no", f"{found.verdict} ({measured})"])
    return rows


def flag_rows(judged: list[Judged]) -> list[list[Any]]:
    """Verdicts by run context (A/A and main runs, PR runs, branch runs), with totals."""
    table = Counter((j.verdict, j.job.context) for j in judged)
    contexts = ("main", "pr", "branch")
    rows = [[v, *(table[(v, c)] for c in contexts), sum(table[(v, c)] for c in contexts)] for v in VERDICTS]
    return rows + [["total", *(sum(table[(v, c)] for v in VERDICTS) for c in contexts), len(judged)]]


def flag_frame(judged: list[Judged]) -> pd.DataFrame:
    counts = Counter((j.verdict, j.job.context) for j in judged)
    return pd.DataFrame([{"verdict": v, "context": c, "records": n} for (v, c), n in counts.items()])


def missed_rows(history: History, missed: list[tuple[Alert, bool]]) -> list[list[str]]:
    return [[history.series[a.key].label, f"{a.percent:+.1f}%", f"{a.step.last_good[:8]}..{a.step.first_bad[:8]}",
             "yes" if flagged else "no", evidence(history, a).verdict]
            for a, flagged in sorted(missed, key=lambda m: history.position[m[0].step.first_bad])]


def regressions_on_main(db: Path, subject: str, config: RegressConfig) -> list[list[str]]:
    """What `flybench regressions --subject flydsl` reports on the main environment with `config`."""
    found = [r for r in find_regressions(db, subject=subject, config=config) if r.env_name == MAIN_ENV]
    return [[r.machine, r.benchmark, ", ".join(f"{v}" for v in r.params.values()),
             f"{r.step.last_good[:8]}..{r.step.first_bad[:8]}", f"{100 * r.step.relative:+.1f}%",
             f"{r.step.confidence:.3f}"] for r in found]
