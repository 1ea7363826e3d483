"""The regression engine's verdicts as tables: steps in drawn series, open regressions, comparisons.

Nothing here judges on its own: steps and open regressions are `find_regressions`' (stored by
the last ingest, `flybench.regress.stored`), verdicts from `flybench.regress.compare`,
with the thresholds of `flybench.toml`, so the dashboard always agrees with
`flybench regressions` and `flybench compare`.
"""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dashboard.frames import case_text, cell_text, fmt
from flybench.benchmark_names import is_compile_duration, workload_of
from flybench.regress import CaseResult, Comparison, RegressConfig, Regression, load_config, stored
from flybench.regress.accepted import Acceptance
from flybench.regress.compare import judge  # the per-case verdict `flybench compare` gives
from flybench.regress.history import Point, detect
from flybench.regress.modes import modes
from flybench.regress.noise import Noise
from flybench.regress.report import (
    _case_cells,  # the evidence column of `flybench compare`
    evidence_of,
    resource_text,
    state_text,
)
from flybench.store import queries

MACHINE_FIELDS = frozenset({"device", "arch", "clocks", "roofline_basis"})
"""Contract fields that differ between two machines by nature; the rest must still match."""
CASE_COLUMNS = ["verdict", "benchmark", "parameters", "case_params", "workload", "case", "provider", "dtype", "unit",
                "base", "head", "change", "base_text", "head_text", "test", "p_value", "evidence"]
STEP_COLUMNS = ["machine", "env_name", "params", "last_good", "first_bad", "first_bad_date", "before", "after",
                "relative", "confidence", "noise", "unit", "worse", "evidence", "attributed", "state"]


def history_steps(db_path: str | Path, benchmark: str, machines: list[str] | None = None,
                  subject: str | None = None, series: list[tuple[str, str, str]] | None = None,
                  config: RegressConfig | None = None, accepted: list[Acceptance] | None = None,
                  closed: bool = True) -> pd.DataFrame:
    """The steps `flybench regressions` finds in the series of one benchmark (every change if deterministic),
    with the alert's evidence, the commits it attributes the step to (`attributed_to`) and its state ('open
    alert', 'recovered alert', 'accepted alert'; with `closed`, the recovered and accepted ones too, so a page
    names them as such instead of saying nothing cleared the thresholds).

    Read from the steps the last ingest stored (`flybench.regress.stored`;
    computed here only where they are stale), `accepted` levels applied as
    there. `series`: only these (machine, env_name, params) keys, the series a
    page draws.
    """
    found = stored.regressions(db_path, subject=subject, benchmark=glob.escape(benchmark), config=config,
                               accepted=accepted, closed=closed)
    wanted = None if series is None else {(m, e, json.dumps(json.loads(p))) for m, e, p in series}
    found = [r for r in found if r.env_name and (machines is None or r.machine in machines)
             and (wanted is None or (r.machine, r.env_name, json.dumps(r.params)) in wanted)]
    dates = {s: queries.commit_dates(db_path, s, sorted({r.step.first_bad for r in found if r.subject == s}))
             for s in {r.subject for r in found}}
    return pd.DataFrame([{
        "machine": r.machine, "env_name": r.env_name, "params": json.dumps(r.params), "last_good": r.step.last_good,
        "first_bad": r.step.first_bad, "first_bad_date": dates[r.subject].get(r.step.first_bad),
        "before": r.step.before, "after": r.step.after, "relative": r.step.relative, "confidence": r.step.confidence,
        "noise": r.step.noise, "unit": r.unit, "worse": r.step.worse, "evidence": evidence_of(r),
        "attributed": attributed_to(r.evidence), "state": state_text(r)} for r in found], columns=STEP_COLUMNS)


MODE_COLUMNS = ["machine", "env_name", "benchmark", "params", "modes", "mode", "level", "low", "high", "runs"]


def series_modes(db_path: str | Path, machine: str, subject: str, config: RegressConfig | None = None
                 ) -> pd.DataFrame:
    """The machine's series that flip between runner modes (`flybench.regress.modes`, the scan's bimodal rule over
    the values the scan reads): one row per mode, `params` as canonical JSON. Metrics the scan does not judge
    (deterministic ones, compile durations) have no modes."""
    cfg = config or load_config()
    rows = queries.scan_rows(db_path, machine, subject)
    rows = rows[rows["status"] == "ok"]
    found = []
    for (env, benchmark, params, unit), group in rows.groupby(["env_name", "benchmark", "params", "unit"],
                                                             sort=False, dropna=False):
        t = cfg.thresholds(benchmark, str(params), unit)
        if t.deterministic or is_compile_duration(benchmark):
            continue
        found += [(machine, env, benchmark, json.dumps(json.loads(str(params))), len(m), n + 1, *mode)
                  for m in [modes(group["value"].tolist(), t.noise_k, np.log1p(t.step_floor) / 2)]
                  for n, mode in enumerate(m)]
    return pd.DataFrame(found, columns=MODE_COLUMNS)


ATTRIBUTED = re.compile(r"#\d+")


def attributed_to(evidence: str) -> str:
    """The pull requests the history scan attributes a step to, as its evidence names them ('#768'), or '' where
    the step rests on no code (the environment's) or names none: the range's newest commit is only where the
    step was first seen, not what made it (docs/alerts.md)."""
    first = evidence.split("; ")[0]
    if not first.startswith("code"):
        return ""
    return ", ".join(dict.fromkeys(ATTRIBUTED.findall(first)))


def resource_changes(rows: pd.DataFrame) -> pd.DataFrame:
    """Every change of a deterministic metric between consecutive measured commits, per series, exactly.

    `rows` as `queries.resource_history` gives them (with `kernel_name`):
    each series goes through `detect`, which reports every change of a
    deterministic unit, as `flybench regressions` does.
    """
    cfg = load_config()
    found = []
    for (subject, machine, kernel, arch, metric), series in rows.groupby(
            ["subject", "machine", "kernel_name", "arch", "metric"], sort=False, dropna=False):
        unit = series["unit"].iloc[0]
        points = [Point(c, v if s == "ok" else None) for c, v, s in
                  zip(series["commit_hash"], series["value"], series["status"])]
        thresholds = replace(cfg.thresholds(kernel, f"{arch}, {metric}", unit), deterministic=True)
        found += [Regression(subject, machine, "", kernel, {"arch": arch, "metric": metric}, unit, step, "change")
                  for step in detect(points, thresholds)]
    return regression_rows(found)


def regression_rows(found: list[Regression]) -> pd.DataFrame:
    """`find_regressions`' answer as rows: one per open regression (or deterministic change).

    With the columns `charts.change_bars` draws: label, verdict, base_text, head_text, evidence.
    """
    rows = pd.DataFrame([{
        "subject": r.subject, "machine": r.machine,
        "workload": workload_of(r.benchmark) if r.env_name else None,  # compile metrics: a kernel, no workload
        "benchmark": r.benchmark, "env_name": r.env_name, "params": r.params, "run": r.runs,
        "parameters": ", ".join(map(str, r.params.values())), "kind": r.kind,
        "commits": f"{r.step.last_good[:8]}..{r.step.first_bad[:8]}", "last_good": r.step.last_good,
        "first_bad": r.step.first_bad, "before": r.step.before, "after": r.step.after,
        "change": r.step.relative, "absolute": r.step.absolute, "confidence": r.step.confidence,
        "noise": r.step.noise, "unit": r.unit, "worse": r.step.worse, "state": state_text(r),
        "why": evidence_of(r),
    } for r in found], columns=["subject", "machine", "workload", "benchmark", "env_name", "params", "run", "parameters",
                                "kind", "commits", "last_good", "first_bad", "before", "after", "change", "absolute",
                                "confidence", "noise", "unit", "worse", "state", "why"])
    rows["label"] = rows["machine"] + ": " + rows["benchmark"] + " · " + rows["parameters"]  # the runner first:
    # a long benchmark name cut it off the end of a bar's label
    rows["verdict"] = rows["worse"].map({True: "regression", False: "improvement"})
    _add_texts(rows, "before", "after")
    rows["evidence"] = ["exact (deterministic metric)" if k == "change" else
                        f"confidence {c:.0%}, noise {fmt(n, u)}; {why}"
                        for k, c, n, u, why in zip(rows["kind"], rows["confidence"], rows["noise"], rows["unit"],
                                                   rows["why"])]
    return rows


RESOURCE_RANK = ("spill", "scratch", "occupancy", "vgpr", "agpr", "lds", "smem", "registers", "sgpr")
"""Resource metrics by how directly a change costs speed: spills and scratch go through memory, occupancy
hides latency, and the VGPR, AGPR and LDS budgets set occupancy; SGPRs, code size and instruction counts
(matched by nothing here) come last."""


def resource_metric(benchmark: str, params: dict[str, Any], env_name: str) -> str:
    """The metric a deterministic change is of: `vgpr_count` (compile_metrics table), `vgprs` (a result), or a
    watched hardware counter (`counter`, flybench.regress.counters)."""
    if "counter" in params:
        return str(params["counter"])
    return str(params.get("metric", "")) if not env_name else benchmark.rsplit(".", 1)[-1].removeprefix("track_")


def by_relevance(rows: pd.DataFrame) -> pd.DataFrame:
    """Deterministic changes, the ones that cost speed first: worse before better, standing before undone by a
    later commit, then by RESOURCE_RANK,
    a metric leaving 0 (the first spill, the first AGPR) before any percentage, then by size of change."""
    metric = [resource_metric(b, p, e) for b, p, e in zip(rows["benchmark"], rows["params"], rows["env_name"])]
    rank = [next((i for i, key in enumerate(RESOURCE_RANK) if key in m), len(RESOURCE_RANK)) for m in metric]
    size = rows["change"].abs().replace(np.inf, np.nan)
    undone = rows["state"] == "change, undone later" if "state" in rows else False
    order = rows.assign(metric=metric, _better=~rows["worse"].astype(bool), _undone=undone, _rank=rank,
                        _from_zero=rows["before"] != 0, _size=-size.fillna(0), _absolute=-rows["absolute"].abs())
    keys = ["_better", "_undone", "_rank", "_from_zero", "_size", "_absolute"]
    return order.sort_values(keys, kind="stable").drop(columns=keys)


def case_rows(cases: list[CaseResult]) -> pd.DataFrame:
    """Verdicts as rows, with the evidence as `flybench compare` states it.

    A side that failed (or was not measured) keeps no value and no change:
    its text says "failed" or "n/a", never a speed.
    """
    records = []
    for c in cases:
        base_status, head_status = _statuses(c)
        base = c.base if base_status == "ok" else None
        head = c.head if head_status == "ok" else None
        records.append({
            "verdict": c.verdict, "benchmark": c.benchmark, "parameters": ", ".join(map(str, c.params.values())),
            "case_params": case_text(c.params),
            "workload": workload_of(c.benchmark), "case": c.params.get("case"),
            "provider": c.params.get("provider"), "dtype": c.params.get("dtype"), "unit": c.unit,
            "base": base, "head": head, "change": c.relative if base is not None and head is not None else None,
            "base_text": cell_text(base_status, base, c.unit), "head_text": cell_text(head_status, head, c.unit),
            "test": c.test, "p_value": c.p_value, "evidence": _case_cells(c)[5]})
    rows = pd.DataFrame(records, columns=CASE_COLUMNS)
    rows["label"] = rows["benchmark"] + " · " + rows["parameters"]
    return rows


def _statuses(case: CaseResult) -> tuple[str, str]:
    """Each side's status, as far as the verdict tells it ('broken': head failed; 'fixed': base failed)."""
    if case.verdict == "broken":
        return "ok", "failed"
    if case.verdict == "fixed":
        return "failed", "ok"
    stated = re.match(r"base (\w+), head (\w+)", case.detail or "")  # compare's "base ok, head unavailable"
    return (stated.group(1), stated.group(2)) if stated else ("ok", "ok")


def resource_rows(comparison: Comparison) -> pd.DataFrame:
    """Deterministic metrics that changed between base and head, in the report's words."""
    return pd.DataFrame([{"change": resource_text(r), "worse": r.worse, "metric": r.metric, "base": r.base,
                          "head": r.head} for r in comparison.resources],
                        columns=["change", "worse", "metric", "base", "head"])


def machine_comparison(base_rows: pd.DataFrame, head_rows: pd.DataFrame,
                       noise: Sequence[dict[tuple, Noise | None]] = ({}, {})) -> list[CaseResult]:
    """Each (benchmark, parameters) measured on both machines, judged as `flybench compare` judges commits.

    The measurement contracts must still match apart from MACHINE_FIELDS
    (device, arch, clocks, roofline basis), which two machines never share.
    Each side is one round, so a case is judged with the larger of its two
    machines' history noise (`stored.history_noise`, keyed by environment,
    benchmark, parameters and unit), and is ambiguous where neither has one.
    """
    cfg = load_config()
    cfg = replace(cfg, contract_ignore=cfg.contract_ignore | MACHINE_FIELDS)
    sides = [_by_case(base_rows), _by_case(head_rows)]
    cases = []
    for benchmark, params_json in sorted(sides[0].keys() | sides[1].keys()):
        b, h = (side.get((benchmark, params_json)) for side in sides)
        params = json.loads(params_json)
        unit = (b or h)["unit"]
        thresholds = cfg.thresholds(benchmark, ", ".join(map(str, params.values())), unit)
        known = [found for side, row in zip(noise, (b, h)) if row is not None
                 and (found := side.get((row["env_name"], benchmark, params_json, unit))) is not None]
        case_noise = max(known, key=lambda n: n.relative) if known else None
        cases.append(judge(benchmark, params, (b or h)["env_name"], unit, b, h, thresholds, cfg, case_noise))
    return cases


def _by_case(rows: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """The newest row per (benchmark, parameters), whatever environment measured it."""
    newest = rows.sort_values("commit_date", na_position="first", kind="stable")
    return {(r["benchmark"], r["params"]): r for r in queries.records(newest)}



def _add_texts(rows: pd.DataFrame, base: str, head: str) -> None:
    """`base_text` and `head_text`: the two values as the reports print them, for hovers and tables."""
    rows["base_text"] = [fmt(v, u) for v, u in zip(rows[base], rows["unit"])]
    rows["head_text"] = [fmt(v, u) for v, u in zip(rows[head], rows["unit"])]
