"""Base-vs-head comparison of two commits on one machine, the check a pull request gets.

Each case is one row, judged on its time alone; its TFLOP/s, GB/s,
roofline fraction and error ride along as context. The verdict comes from
the case's rounds (one median per measuring process), never from pooled
samples: `flybench.regress.verdict` owns the rules. Rows whose measurement
contracts differ are refused, naming the field.

Cases are subjects or controls (`[regress] subject_providers`): a pull
request is judged on the providers whose code it can change; the others,
measured in the same rounds, are drift controls that never fail the check.
A subject's change that the controls of its workload share is reported as
"environment", not as a regression.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from flybench.regress import noise, stored, verdict
from flybench.regress.config import RegressConfig, Thresholds, load_config
from flybench.store import queries

VERDICTS = ("regression", "broken", "improvement", "fixed", "environment", "ambiguous", "incomparable", "skipped",
            "unchanged")
"""Most urgent first; "broken": head fails where base passed; "environment": a change the drift controls share;
"ambiguous": the rounds cannot tell yet; "skipped": not measured on both sides."""
FAILING = ("regression", "broken")


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one benchmark x parameters, with the evidence behind it."""

    benchmark: str
    params: dict[str, Any]
    env_name: str
    unit: str | None
    base: float | None
    head: float | None
    verdict: str
    test: str = ""  # "welch-t (rounds)", "normal (history noise)", "" (not tested)
    p_value: float | None = None
    role: str = "subject"  # or "control": measured for drift, never fails the check
    rounds: tuple[int, int] | None = None  # rounds judged on base, on head
    interval: tuple[float, float] | None = None  # the relative change's confidence interval
    round_spread: float | None = None  # the largest spread of a round's own samples (IQR over median), either side
    round_medians: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # each round's median, base and head
    detail: str = ""
    context: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """(base, head) of the case's derived facts: TFLOP/s, GB/s, roofline fraction, error; never judged."""
    noise: float | None = None
    """The case's run-to-run noise relative to its level (None: unknown, one round and no history)."""
    noise_source: str = ""  # "rounds", "history" or ""
    detectable: float | None = None
    """The true relative change this comparison calls with about 90% probability, at its noise and rounds."""
    threshold: float | None = None  # the configured relative threshold of this case
    counters: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """(base, head) of the counter pass's derived figures (flybench.counters.DERIVED) where both commits have
    them: why the time moved, never judged."""

    @property
    def noise_limited(self) -> bool:
        """Whether the case's noise hides changes of twice its tolerance (it detects them less than 90% of the time)."""
        return self.detectable is not None and self.threshold is not None and self.detectable > 2 * self.threshold

    @property
    def relative(self) -> float | None:
        if self.base is None or self.head is None or not self.base:
            return None
        return (self.head - self.base) / abs(self.base)


@dataclass(frozen=True)
class ResourceChange:
    """A deterministic metric that changed (registers, LDS bytes, occupancy): always real."""

    name: str
    arch: str | None
    metric: str
    unit: str | None
    base: float
    head: float
    worse: bool


@dataclass
class Comparison:
    """Everything `flybench compare` reports for one machine, base and head."""

    machine: str
    base: str
    head: str
    p_threshold: float
    cases: list[CaseResult] = field(default_factory=list)
    resources: list[ResourceChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """How the evidence was gathered (the gate's rounds and what its time budget bought), shown above the cases."""
    unmeasured: str = ""
    """Why nothing was timed, where a gate timed nothing on purpose (its headline says it)."""

    def having(self, verdict: str) -> list[CaseResult]:
        """The subject cases with this verdict (controls are `controls`)."""
        return [c for c in self.cases if c.verdict == verdict and c.role == "subject"]

    @property
    def controls(self) -> list[CaseResult]:
        return [c for c in self.cases if c.role == "control"]

    @property
    def failing(self) -> bool:
        """A subject's real regression, or a subject case that broke: what fails the pull-request check."""
        return any(c.verdict in FAILING and c.role == "subject" for c in self.cases)


def compare(
    db_path: str | Path,
    machine: str,
    base: str,
    head: str,
    *,
    subject: str | None = None,
    config: RegressConfig | str | Path | None = None,
) -> Comparison:
    """Compare `head` with `base` (hashes or unique prefixes) on `machine`.

    Unknown machines or commits raise FlybenchError listing the known ones.
    """
    cfg = config if isinstance(config, RegressConfig) else load_config(config)
    base_hash, head_hash, rows, metrics = queries.commit_pair(db_path, machine, base, head, subject)
    result = Comparison(machine, base_hash, head_hash, cfg.p_threshold)
    sides: dict[str, dict[tuple[str, str, str], dict[str, Any]]] = {base_hash: {}, head_hash: {}}
    for r in queries.records(rows):
        sides[r["commit_hash"]][(r["env_name"], r["benchmark"], r["params"])] = r
    history_noise = _history_noise(db_path, machine, subject, cfg)
    for key in sorted(sides[base_hash].keys() | sides[head_hash].keys()):
        env, benchmark, params_text = key
        b, h = (_selected(side.get(key)) for side in (sides[base_hash], sides[head_hash]))
        if b is None and h is None:
            continue  # not selected by either side's runs: nothing happened to report
        params = json.loads(params_text)
        unit = (b or h)["unit"]
        thresholds = cfg.thresholds(benchmark, ", ".join(map(str, params.values())), unit)
        if not thresholds.deterministic:
            role = "subject" if cfg.is_subject(params.get("provider")) else "control"
            result.cases.append(judge(benchmark, params, env, unit, b, h, thresholds, cfg,
                                      history_noise(key, unit, thresholds), role=role))
        elif b is not None and h is not None and _measured(b) and _measured(h) and b["value"] != h["value"]:
            name = f"{benchmark}({', '.join(map(str, params.values()))})"
            metric = benchmark.rsplit(".", 1)[-1]
            result.resources.append(_resource(name, None, metric, unit, b["value"], h["value"], thresholds))
    result.cases = attribute_drift(result.cases, cfg)
    result.resources += _metric_changes(metrics, base_hash, head_hash, cfg)
    counters = _counter_pairs(queries.case_counters(db_path, machine, [base_hash, head_hash], subject),
                              base_hash, head_hash)
    result.cases = [replace(c, counters=counters[key]) if (key := (c.env_name, c.benchmark, _params_key(c.params)))
                    in counters else c for c in result.cases]
    result.cases.sort(key=lambda c: (VERDICTS.index(c.verdict), -abs(c.relative or 0)))
    return result


def contract_difference(base: str | None, head: str | None, ignore: frozenset[str] = frozenset()) -> str:
    """'' when the measurement contracts match outside `ignore`, else which fields differ and how."""
    if base is None or head is None:
        return "" if base == head else f"contract recorded only for {'head' if base is None else 'base'}"
    b, h = json.loads(base), json.loads(head)
    fields = sorted(k for k in b.keys() | h.keys() if k not in ignore and b.get(k) != h.get(k))
    if not fields:
        return ""
    return "contracts differ in " + "; ".join(f"{k}: {b.get(k)!r} vs {h.get(k)!r}" for k in fields)


CONTEXT = {"tflops": "TFLOP/s", "gbps": "GB/s", "roofline_fraction": "of roofline", "error": "error"}
"""The context columns of a case's row, with their labels."""


def _context(b: dict[str, Any] | None, h: dict[str, Any] | None) -> dict[str, tuple[float | None, float | None]]:
    def value(row: dict[str, Any] | None, name: str) -> float | None:
        if row is None:
            return None
        if name != "error":
            return row.get(name)
        errors = json.loads(row["errors"]) if row.get("errors") else {}
        return errors.get("out") if isinstance(errors, dict) else None

    pairs = {name: (value(b, name), value(h, name)) for name in CONTEXT}
    return {name: pair for name, pair in pairs.items() if pair != (None, None)}


def _counter_pairs(frame: pd.DataFrame, base: str, head: str) -> dict[tuple[str, str, str], dict[str, tuple]]:
    """Per case, each derived counter figure measured on both sides: {figure: (base, head)}."""
    sides: dict[tuple[str, str, str], dict[str, dict[str, float]]] = {}
    for r in queries.records(frame):
        case = sides.setdefault((r["env_name"], r["benchmark"], _params_key(json.loads(r["params"]))), {})
        case.setdefault(r["counter"], {})[r["commit_hash"]] = r["value"]
    return {key: {name: (v[base], v[head]) for name, v in figures.items() if base in v and head in v}
            for key, figures in sides.items()}


def _params_key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def _history_noise(db_path: str | Path, machine: str, subject: str | None,
                   cfg: RegressConfig) -> Callable[[tuple[str, str, str], str | None, Thresholds], noise.Noise | None]:
    """Each case's noise over its history on the machine: the last scan's where the store is current (a read),
    else computed from the history, as `noise.from_history` does (a fit per case; the history read once)."""
    known = stored.history_noise(db_path, machine, subject, cfg)
    history = functools.cache(lambda: noise.histories(queries.series_values(db_path, machine, subject)))

    def of(key: tuple[str, str, str], unit: str | None, thresholds: Thresholds) -> noise.Noise | None:
        if (*key, unit) in known:
            return known[(*key, unit)]
        return noise.from_history(history().get(key, []), thresholds)
    return of


def judge(benchmark: str, params: dict[str, Any], env: str, unit: str | None,
          b: dict[str, Any] | None, h: dict[str, Any] | None,
          thresholds: Thresholds, cfg: RegressConfig, case_noise: noise.Noise | None = None,
          role: str = "subject") -> CaseResult:
    """The verdict on one case from its base and head rows (as `store.queries.records` gives them).

    A side that was not measured is None. A row holds `value`, `status`,
    `reason`, `contract` (JSON text), optionally `rounds` (each round's
    median; without them the row's value is its one round) and
    `round_spreads`, and the context columns. `case_noise` is the case's
    noise over its history on the machine, used where a side has too few
    rounds to show its own.
    """
    case = CaseResult(benchmark, params, env, unit, b["value"] if b else None, h["value"] if h else None, "skipped",
                      context=_context(b, h), role=role)
    if b is None or h is None:
        return replace(case, detail=f"measured only in {'head' if b is None else 'base'}")
    if not (_measured(b) and _measured(h)):
        statuses = (b["status"], h["status"])
        outcome = {("ok", "failed"): "broken", ("failed", "ok"): "fixed"}.get(statuses, "skipped")
        reason = h["reason"] if h["status"] != "ok" else b["reason"]
        detail = f"base {b['status']}, head {h['status']}" + (f": {reason}" if reason else "")
        return replace(case, verdict=outcome, detail=detail)
    mismatch = contract_difference(b["contract"], h["contract"], cfg.contract_ignore)
    if mismatch:
        return replace(case, verdict="incomparable", detail=mismatch)
    history = case_noise.relative if case_noise is not None else None
    evidence = verdict.judge_rounds(_rounds(b), _rounds(h), thresholds, cfg.p_threshold, history,
                                    noise.FIXED_MINIMUM.get(unit or "", 0.0))
    source = ("rounds" if evidence.test.startswith("welch") else "history") if evidence.noise is not None else ""
    return replace(case, verdict=evidence.verdict, base=evidence.base, head=evidence.head, test=evidence.test,
                   p_value=evidence.p_value, rounds=evidence.rounds, detail=evidence.why,
                   interval=None if evidence.low is None else (evidence.low, evidence.high),
                   noise=evidence.noise, noise_source=source, detectable=evidence.detectable,
                   threshold=evidence.tolerance, round_spread=max(_spreads(b) + _spreads(h), default=None),
                   round_medians=(tuple(_rounds(b)), tuple(_rounds(h))))


DRIFT_SHARE = 0.5
"""The share of a workload's controls that must move significantly with a subject to call its change drift."""


def attribute_drift(cases: list[CaseResult], cfg: RegressConfig) -> list[CaseResult]:
    """Subjects whose change the controls measured in the same rounds share become "environment".

    The controls of a subject are the control cases of its benchmark (one
    workload, measured in the same processes' rounds). When at least
    DRIFT_SHARE of them moved significantly in the subject's direction,
    their median change is the environment's drift; a regression or
    improvement that no longer clears its tolerance once that drift is
    taken out of its change and interval is the environment's.
    """
    controls: dict[str, list[CaseResult]] = {}
    for c in cases:
        if c.role == "control" and c.interval is not None and c.relative is not None:
            controls.setdefault(c.benchmark, []).append(c)
    out = []
    for c in cases:
        watched = controls.get(c.benchmark, [])
        if c.role != "subject" or c.verdict not in ("regression", "improvement") or not watched:
            out.append(c)
            continue
        up = (c.relative or 0) > 0
        moved = [w for w in watched if (w.interval[0] > 0 if up else w.interval[1] < 0)]
        if len(moved) < max(1, DRIFT_SHARE * len(watched)):
            out.append(c)
            continue
        drift = statistics.median(math.log1p(w.relative) for w in moved)
        low, high = (math.expm1(math.log1p(v) - drift) for v in c.interval)
        corrected = math.expm1(math.log1p(c.relative) - drift)
        still = (low > 0 if up else high < 0) and abs(corrected) >= (c.threshold or 0)
        note = (f"{len(moved)} of {len(watched)} controls moved {100 * math.expm1(drift):+.1f}% (median) in the "
                f"same rounds; {100 * corrected:+.1f}% without that drift")
        out.append(replace(c, detail=note) if still else replace(c, verdict="environment", detail=note))
    return out
def compile_changes(base: list[dict[str, Any]], head: list[dict[str, Any]], units: dict[str, str],
                    cfg: RegressConfig) -> tuple[list[ResourceChange], list[CaseResult]]:
    """Two sides' compile records (`python -m flybench.compile --format json`): the metrics that changed, and the
    kernels that compiled in base and fail in head (broken, which fails the check) or the reverse (fixed).

    `units` names the tracked metrics and their units; the context a record keeps beside them, and compile
    times (durations, not resources), are left out.
    """
    sides = [{(r["kernel"], r["arch"]): r for r in records} for records in (base, head)]
    changes, cases = [], []
    for key in sorted(sides[0].keys() & sides[1].keys()):
        b, h = sides[0][key], sides[1][key]
        kernel, arch = key
        statuses = (b["status"], h["status"])
        if statuses in (("ok", "failed"), ("failed", "ok")):
            broke = statuses == ("ok", "failed")
            reason = (h if broke else b).get("reason") or ""
            cases.append(CaseResult("compile", {"kernel": kernel, "arch": arch}, "", None, None, None,
                                    "broken" if broke else "fixed",
                                    detail=f"base {statuses[0]}, head {statuses[1]}: {reason[:300]}"))
            continue
        if statuses != ("ok", "ok"):
            continue
        why = cannot_run(b.get("metrics") or {}, h.get("metrics") or {}, arch)
        if why:
            cases.append(CaseResult("compile", {"kernel": kernel, "arch": arch}, "", None, None, None, "broken",
                                    detail=why))
        for metric in sorted(b.get("metrics", {}).keys() & h.get("metrics", {}).keys()):
            before, after = b["metrics"][metric], h["metrics"][metric]
            unit = units.get(metric)
            if unit in (None, "seconds") or before is None or after is None or before == after:
                continue  # context beside the tracked metrics (by-kind tables, limiters), or a duration
            changes.append(_resource(kernel, arch, metric, unit, float(before), float(after),
                                     cfg.thresholds(kernel, f"{arch}, {metric}", unit)))
    return changes, cases


SPILL_METRICS = ("vgpr_spills", "sgpr_spills", "spill_bytes")
"""Registers spilled to memory (AMD: VGPRs, SGPRs; NVIDIA: spill bytes per thread), which a kernel that spilled
nothing must not start doing unseen."""
NVIDIA_SHARED_LIMIT = {"sm_90": 227 * 1024}
"""Shared memory a block may use (the opt-in maximum): more, and the launch fails."""


def cannot_run(base: dict[str, Any], head: dict[str, Any], arch: str) -> str | None:
    """Why a head kernel that compiled is broken where base's was not, else None: it gets 0 waves (its LDS or
    registers exceed the CU's, `compile.occupancy`), its shared memory exceeds the SM's, or it starts spilling.
    Such a kernel cannot run, or runs from memory where it ran from registers: it fails the check."""
    from flybench.compile.occupancy import ARCHES

    def number(metrics: dict[str, Any], name: str) -> float:
        value = metrics.get(name)
        return float(value) if type(value) in (int, float) else 0.0

    if "occupancy" in head and number(head, "occupancy") == 0 and number(base, "occupancy") > 0:
        lds = number(head, "lds_static") + number(head, "lds_dynamic")
        limit = ARCHES[arch].lds_per_cu if arch in ARCHES else None
        over = (f"its LDS, {lds:,.0f} bytes, exceeds {arch}'s {limit:,} per CU" if limit is not None and lds > limit
                else "its registers exceed the SIMD's")
        return f"0 waves at head ({number(base, 'occupancy'):g} at base): {over}, so it cannot run"
    shared = number(head, "smem_static") + number(head, "smem_dynamic")
    limit = NVIDIA_SHARED_LIMIT.get(arch)
    if limit is not None and shared > limit >= number(base, "smem_static") + number(base, "smem_dynamic"):
        return f"its shared memory, {shared:,.0f} bytes a block, exceeds {arch}'s {limit:,}, so it cannot launch"
    for name in SPILL_METRICS:
        if number(base, name) == 0 and number(head, name) > 0:
            return f"it starts spilling: {name} 0 at base, {number(head, name):g} at head"
    return None


def _metric_changes(metrics: pd.DataFrame, base: str, head: str, cfg: RegressConfig) -> list[ResourceChange]:
    """Rows of the compile_metrics table that differ between base and head (both measured)."""
    key = ["kernel", "arch", "metric"]
    merged = metrics[metrics.commit_hash == base].merge(
        metrics[metrics.commit_hash == head], on=key, suffixes=("_base", "_head"))
    return [
        _resource(r.kernel, r.arch, r.metric, r.unit_head, r.value_base, r.value_head,
                  cfg.thresholds(r.kernel, f"{r.arch}, {r.metric}", r.unit_head))
        for r in merged.dropna(subset=["value_base", "value_head"]).sort_values(key).itertuples()
        if r.value_base != r.value_head
    ]


def _resource(name: str, arch: str | None, metric: str, unit: str | None, base: float, head: float,
              thresholds: Thresholds) -> ResourceChange:
    worse = head < base if thresholds.bigger_is_better else head > base
    return ResourceChange(name, arch, metric, unit, base, head, worse)


def _measured(row: dict[str, Any]) -> bool:
    return row["status"] == "ok" and row["value"] is not None


def _selected(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The row, or None where the side's runs never selected the case.

    asv keeps a value for every parameter combination of a benchmark; a
    combination that no run selected is unavailable with no case record
    (no run id, no reason). A real unavailability has its record's reason.
    """
    if row is None or (row["status"] == "unavailable" and not row.get("run_id") and not row.get("reason")):
        return None
    return row


def _rounds(row: dict[str, Any]) -> list[float]:
    """The medians of the rounds that measured this side; a row without them is one round of its value."""
    rounds = row.get("rounds")
    if rounds is None or len(rounds) == 0:
        return [float(row["value"])]
    return [float(r) for r in rounds]


def _spreads(row: dict[str, Any]) -> list[float]:
    spreads = row.get("round_spreads")
    return [] if spreads is None else [float(s) for s in spreads if isinstance(s, (int, float)) and math.isfinite(s)]

