"""Base-vs-head comparison of two commits on one machine, the check a pull request gets.

Each case is one row, judged on its time alone; its TFLOP/s, GB/s,
roofline fraction and error ride along as context. A case is a regression
only if the difference is statistically real (Mann-Whitney U on the device
samples, p < 0.002 as in `asv compare`; the 99% confidence intervals not
overlapping when there are too few samples), larger than the relative and
absolute thresholds, and measured under the same contract: rows whose
contracts differ are refused, naming the field.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import mannwhitneyu

from flybench.regress import noise, stored
from flybench.regress.config import RegressConfig, Thresholds, load_config
from flybench.store import queries

VERDICTS = ("regression", "broken", "improvement", "fixed", "incomparable", "skipped", "unchanged")
"""Most urgent first; "broken": head fails where base passed; "skipped": not measured on both sides."""


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
    test: str = ""  # "mann-whitney", "ci-99", "none" (no spread recorded), "" (not tested)
    p_value: float | None = None
    detail: str = ""
    context: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """(base, head) of the case's derived facts: TFLOP/s, GB/s, roofline fraction, error; never judged."""
    noise: float | None = None
    """The case's run-to-run noise relative to its level (None: unknown, one round and no history)."""
    noise_source: str = ""  # "rounds", "history" or ""
    detectable: float | None = None
    """The smallest relative change this comparison calls a change for this case, at its noise."""
    threshold: float | None = None  # the configured relative threshold of this case
    counters: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """(base, head) of the counter pass's derived figures (flybench.counters.DERIVED) where both commits have
    them: why the time moved, never judged."""

    @property
    def noise_limited(self) -> bool:
        """Whether the case's noise (or the absolute floor) keeps it from meeting its configured threshold."""
        return self.detectable is not None and self.threshold is not None and self.detectable > self.threshold * 1.0001

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

    def having(self, verdict: str) -> list[CaseResult]:
        return [c for c in self.cases if c.verdict == verdict]

    @property
    def failing(self) -> bool:
        """A real regression, or a case that broke: what fails the pull-request check."""
        return any(c.verdict in ("regression", "broken") for c in self.cases)


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
        b, h = sides[base_hash].get(key), sides[head_hash].get(key)
        params = json.loads(params_text)
        unit = (b or h)["unit"]
        thresholds = cfg.thresholds(benchmark, ", ".join(map(str, params.values())), unit)
        if not thresholds.deterministic:
            case_noise = noise.from_rounds(_rounds(b), _rounds(h)) or history_noise(key, unit, thresholds)
            result.cases.append(judge(benchmark, params, env, unit, b, h, thresholds, cfg, case_noise))
        elif b is not None and h is not None and _measured(b) and _measured(h) and b["value"] != h["value"]:
            name = f"{benchmark}({', '.join(map(str, params.values()))})"
            metric = benchmark.rsplit(".", 1)[-1]
            result.resources.append(_resource(name, None, metric, unit, b["value"], h["value"], thresholds))
    result.resources += _metric_changes(metrics, base_hash, head_hash, cfg)
    counters = _counter_pairs(queries.case_counters(db_path, machine, [base_hash, head_hash], subject),
                              base_hash, head_hash)
    result.cases = [replace(c, counters=counters[key]) if (key := (c.env_name, c.benchmark, _params_key(c.params)))
                    in counters else c for c in result.cases]
    result.cases.sort(key=lambda c: (VERDICTS.index(c.verdict), -abs(c.relative or 0)))
    return result


def significance(b: dict[str, Any], h: dict[str, Any], p_threshold: float) -> tuple[bool, str, float | None]:
    """Whether base and head differ beyond their noise: Mann-Whitney, else CI overlap, else assume so.

    The test is only used when the sample sizes can reach p_threshold at all
    (asv's rule); with no spread recorded the thresholds alone decide, as in
    `asv compare`.
    """
    xs, ys = _samples(b["samples"]), _samples(h["samples"])
    if xs and ys and 2 / math.comb(len(xs) + len(ys), min(len(xs), len(ys))) < p_threshold:
        p = float(mannwhitneyu(xs, ys, alternative="two-sided").pvalue)
        p = 1.0 if math.isnan(p) else p  # all samples tied
        return p < p_threshold, "mann-whitney", p
    bounds = (b["ci_99_a"], b["ci_99_b"], h["ci_99_a"], h["ci_99_b"])
    if all(v is not None and math.isfinite(v) for v in bounds):
        overlap = b["ci_99_a"] <= h["ci_99_b"] and h["ci_99_a"] <= b["ci_99_b"]
        return not overlap, "ci-99", None
    return True, "none", None


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
    history = functools.cache(lambda: noise.histories(db_path, machine, subject))

    def of(key: tuple[str, str, str], unit: str | None, thresholds: Thresholds) -> noise.Noise | None:
        if (*key, unit) in known:
            return known[(*key, unit)]
        return noise.from_history(history().get(key, []), thresholds)
    return of


def judge(benchmark: str, params: dict[str, Any], env: str, unit: str | None,
          b: dict[str, Any] | None, h: dict[str, Any] | None,
          thresholds: Thresholds, cfg: RegressConfig, case_noise: noise.Noise | None = None) -> CaseResult:
    """The verdict on one case from its base and head rows (as `store.queries.records` gives them).

    A side that was not measured is None. A row holds `value`, `status`,
    `reason`, `contract` (JSON text), `samples`, `ci_99_a`/`ci_99_b`, optionally `rounds` and the context
    columns; `case_noise` sets the smallest change called (`noise.detectable`).
    """
    case = CaseResult(benchmark, params, env, unit, b["value"] if b else None, h["value"] if h else None, "skipped",
                      context=_context(b, h), noise=case_noise.relative if case_noise else None,
                      noise_source=case_noise.source if case_noise else "")
    if b is None or h is None:
        return replace(case, detail=f"measured only in {'head' if b is None else 'base'}")
    if not (_measured(b) and _measured(h)):
        statuses = (b["status"], h["status"])
        verdict = {("ok", "failed"): "broken", ("failed", "ok"): "fixed"}.get(statuses, "skipped")
        reason = h["reason"] if h["status"] != "ok" else b["reason"]
        detail = f"base {b['status']}, head {h['status']}" + (f": {reason}" if reason else "")
        return replace(case, verdict=verdict, detail=detail)
    mismatch = contract_difference(b["contract"], h["contract"], cfg.contract_ignore)
    if mismatch:
        return replace(case, verdict="incomparable", detail=mismatch)
    real, test, p = significance(b, h, cfg.p_threshold)
    change = h["value"] - b["value"]
    worse = change < 0 if thresholds.bigger_is_better else change > 0
    smallest = noise.detectable(case_noise, b["value"], unit, thresholds)
    large = change != 0 and abs(change) >= smallest * abs(b["value"])
    verdict = ("regression" if worse else "improvement") if real and large else "unchanged"
    return replace(case, verdict=verdict, test=test, p_value=p, detectable=smallest, threshold=thresholds.relative)


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


def _rounds(row: dict[str, Any] | None) -> list[float] | None:
    """The medians of the rounds that measured this side (None: not stored)."""
    rounds = None if row is None else row.get("rounds")
    return None if rounds is None else [float(r) for r in rounds]


def _samples(samples: Any) -> list[float]:
    return [] if samples is None else [float(s) for s in samples if not math.isnan(s)]
