"""Machine code on the pages (pandas, no Streamlit): what each commit's compiler emitted per kernel and target.

The store keeps, per main commit, kernel and target, a hash of the machine
code the FlyDSL of that commit emits and its resources and static
instruction counts (`machine_code`, from the tree's machine-code.jsonl). The
history scan rests an alert on it where it has it; these tables show the same
records: which kernels' code a merged pull request changed (compiler-only ones
included), what changed between an alert's two commits on its own runner's
architecture (the instruction counts by class and the resources at each end),
and the resources of every registered kernel across the imported month. The
ISA text itself is not stored: the counts are what the record keeps.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from flybench.compile.record import AMD_METRICS

UNITS = {"instructions": "instructions", **{m.name: m.unit for m in AMD_METRICS if m.unit != "seconds"}}
"""A machine code record's metric -> its unit, as the compile-only suite tracks it (and the total instruction
count the record adds); a compile's duration is no property of the code."""
MACHINE = "machine code history"
"""The rows' machine on Kernel resources: compiled without a GPU, commit by commit (flybench.compile.code_history)."""
ORIGIN = "machine_code"
DIFF_COLUMNS = ["metric", "base", "head", "delta"]
PAIR_COLUMNS = ["kernel", "arch", "verdict", "base", "head", "base_code", "head_code", "detail"]


def metrics_of(text: Any) -> dict[str, Any]:
    """A record's metrics (JSON text as the store returns it), {} where it has none."""
    if not isinstance(text, str) or not text:
        return {}
    found = json.loads(text)
    return found if isinstance(found, dict) else {}


def resource_rows(records: pd.DataFrame) -> pd.DataFrame:
    """The records as Kernel resources' rows (`queries.resource_history`'s columns): one per kernel, target,
    commit and metric of a compiled record; a failed or unavailable record as one row without a value, so its
    line breaks there and the reason shows."""
    rows = []
    for r in records.itertuples(index=False):
        base = {"subject": r.subject, "machine": MACHINE, "commit_hash": r.hash, "commit_date": r.date,
                "kernel": r.kernel, "params": None, "arch": r.arch, "origin": ORIGIN}
        if r.status != "ok":
            rows.append({**base, "metric": "vgprs", "value": None, "unit": UNITS["vgprs"], "status": "failed",
                         "reason": r.detail})
            continue
        for metric, value in metrics_of(r.metrics).items():
            if metric in UNITS and isinstance(value, (int, float)):
                rows.append({**base, "metric": metric, "value": float(value), "unit": UNITS[metric], "status": "ok",
                             "reason": None})
    return pd.DataFrame(rows, columns=["subject", "machine", "commit_hash", "commit_date", "kernel", "params", "arch",
                                       "metric", "value", "unit", "status", "reason", "origin"])


def _text(value: Any) -> str:
    """A text column's value, '' for SQL NULL (which pandas hands back as NaN)."""
    return value if isinstance(value, str) else ""


def verdict(base: Any, head: Any) -> str:
    """What one kernel on one target did between two records: 'changed', 'identical', or why it cannot say."""
    if base is None or head is None:
        return "no record at " + ("either end" if base is None and head is None else
                                  "the base" if base is None else "the head")
    if base.status != "ok" or head.status != "ok":
        return {("ok", "failed"): "fails to build at the head", ("failed", "ok"): "builds again at the head",
                ("ok", "unavailable"): "removed at the head", ("unavailable", "ok"): "added at the head"}.get(
            (base.status, head.status), f"{base.status} at the base, {head.status} at the head")
    return "identical" if base.code_hash == head.code_hash else "changed"


def pairs(records: pd.DataFrame, base: str, head: str, arch: str | None = None,
          kernels: list[str] | None = None) -> pd.DataFrame:
    """Every kernel and target with a record at `base` or `head` (of those `kernels`, on `arch` when given),
    with its verdict, changed ones first."""
    sub = records[records["hash"].isin([base, head])]
    if arch is not None:
        sub = sub[sub["arch"] == arch]
    if kernels is not None:
        sub = sub[sub["kernel"].isin(kernels)]
    at = {(r.kernel, r.arch, r.hash): r for r in sub.itertuples(index=False)}
    out = []
    for kernel, target in sorted({(k, a) for k, a, _ in at}):
        b, h = at.get((kernel, target, base)), at.get((kernel, target, head))
        out.append({"kernel": kernel, "arch": target, "verdict": verdict(b, h), "base": base[:8], "head": head[:8],
                    "base_code": _text(b.code_hash)[:12] if b is not None else "",
                    "head_code": _text(h.code_hash)[:12] if h is not None else "",
                    "detail": _text(h.detail if h is not None else b.detail)})
    frame = pd.DataFrame(out, columns=PAIR_COLUMNS)
    return frame.sort_values("verdict", key=lambda v: v != "changed", kind="stable").reset_index(drop=True)


def diff(records: pd.DataFrame, kernel: str, arch: str, base: str, head: str) -> pd.DataFrame:
    """One kernel's machine code change on one target: each resource and instruction count at the two commits
    and the difference, the ones that moved first."""
    at = {r.hash: metrics_of(r.metrics) for r in records[(records["kernel"] == kernel) & (records["arch"] == arch)
                                                          & records["hash"].isin([base, head])].itertuples()}
    before, after = at.get(base, {}), at.get(head, {})
    rows = [{"metric": m, "base": before.get(m), "head": after.get(m),
             "delta": (after[m] - before[m]) if isinstance(before.get(m), (int, float))
             and isinstance(after.get(m), (int, float)) else None}
            for m in sorted(set(before) | set(after)) if m in UNITS]
    frame = pd.DataFrame(rows, columns=DIFF_COLUMNS)
    moved = frame["delta"].fillna(1).ne(0)
    return pd.concat([frame[moved], frame[~moved]], ignore_index=True)


def previous_recorded(records: pd.DataFrame, head: str) -> str | None:
    """The newest main commit before `head` in main's order with machine code records: the
    base a merged pull request's machine code is held against."""
    placed = records.dropna(subset=["position"]).drop_duplicates("hash")
    at = placed.loc[placed["hash"] == head, "position"]
    if at.empty:
        return None
    before = placed[placed["position"] < at.iloc[0]]
    return None if before.empty else str(before.sort_values("position")["hash"].iloc[-1])


def pull_request_code(records: pd.DataFrame, merged: pd.DataFrame,
                      pr: int) -> tuple[str, str, list[int], pd.DataFrame] | None:
    """Which kernels' machine code pull request `pr` changed: its merge commit against the newest earlier main
    commit with records, every kernel and target (compiler-only pull requests included, whose files reach no
    kernel), and the pull requests merged in that range (more than `pr` where the commits between have no
    records); None where the store has no machine code at both."""
    commit = merged.loc[merged["merged_pr"] == pr, "hash"]
    if commit.empty or not records["hash"].eq(commit.iloc[0]).any():
        return None
    head = str(commit.iloc[0])
    base = previous_recorded(records, head)
    if base is None:
        return None
    places = dict(zip(merged["hash"], merged["position"]))
    low = records.loc[records["hash"] == base, "position"].iloc[0]
    within = [int(p) for h, p in zip(merged["hash"], merged["merged_pr"]) if low < places[h] <= places[head]]
    return base, head, within, pairs(records, base, head)


def changed_by_pull_request(records: pd.DataFrame, merged: pd.DataFrame) -> pd.DataFrame:
    """Per merged pull request whose merge commit and the one before it have machine code: how many kernel x
    target pairs changed, and which."""
    out = []
    for pr in merged["merged_pr"].dropna().astype(int):
        found = pull_request_code(records, merged, pr)
        if found is None:
            continue
        base, head, within, table = found
        changed = table[table["verdict"] == "changed"]
        both = table[table["verdict"].isin(["changed", "identical"])]
        out.append({"pr": pr, "base": base[:8], "head": head[:8], "range": ", ".join(f"#{n}" for n in within),
                    "changed": len(changed), "compared": len(both),
                    "kernels": ", ".join(f"{k} ({a})" for k, a in zip(changed["kernel"], changed["arch"]))})
    return pd.DataFrame(out, columns=["pr", "base", "head", "range", "changed", "compared", "kernels"])
