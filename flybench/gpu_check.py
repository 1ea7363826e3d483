"""The per-GPU A/A figure: is one GPU of a node consistently slower than the others?

A run dealt to the GPUs of a node measures each case on one GPU, and the
lists go to the GPUs in a rotation that changes with every run
(flybench.cli.run), so over several runs each case meets several GPUs. A
GPU's figure is the median, over the cases it measured in this run, of the
case's time against its own history on the machine (the median of its
earlier runs' medians, whichever GPU measured them). Healthy GPUs sit near
1.0 together; a GPU whose figure stands `SLOW` or more above the median of
the node's figures, over at least `MIN_CASES` cases, is named slow.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flybench.measure import record as records

SLOW = 0.03
MIN_CASES = 5


@dataclass(frozen=True)
class GpuFigure:
    index: int
    uuid: str
    cases: int  # cases of this run on this GPU that have a history
    ratio: float | None  # median of (this run's median / the case's history); None without history


def figures(run: Iterable[dict[str, Any]], history: Iterable[dict[str, Any]]) -> list[GpuFigure]:
    """Per GPU of the run's records (`gpu` set, status ok), its figure against `history` (records of other runs
    of the same machine)."""
    medians: dict[records.CaseKey, dict[str, float]] = {}
    for record in history:
        if record["status"] == "ok" and type(record.get("median_s")) in (int, float) and record["median_s"] > 0:
            medians.setdefault(records.key_of(record), {})[str(record.get("run_id"))] = float(record["median_s"])
    reference = {key: statistics.median(runs.values()) for key, runs in medians.items()}
    ratios: dict[int, list[float]] = {}
    uuids: dict[int, str] = {}
    for record in run:
        gpu = record.get("gpu")
        if type(gpu) is not dict or type(gpu.get("index")) is not int:
            continue
        uuids[gpu["index"]] = str(gpu.get("uuid") or "")
        ratios.setdefault(gpu["index"], [])
        ref = reference.get(records.key_of(record))
        if record["status"] == "ok" and ref and type(record.get("median_s")) in (int, float):
            ratios[gpu["index"]].append(record["median_s"] / ref)
    return [GpuFigure(i, uuids[i], len(r), statistics.median(r) if r else None) for i, r in sorted(ratios.items())]


def slow(found: list[GpuFigure]) -> list[GpuFigure]:
    """The GPUs whose figure stands SLOW or more above the node's median figure, on MIN_CASES cases or more."""
    counted = [f for f in found if f.ratio is not None and f.cases >= MIN_CASES]
    if len(counted) < 2:
        return []
    middle = statistics.median(f.ratio for f in counted)
    return [f for f in counted if f.ratio > middle * (1 + SLOW)]


def lines(found: list[GpuFigure]) -> list[str]:
    """What a run prints: one line per GPU, then the verdict."""
    if not any(f.ratio is not None for f in found):
        return ["per-GPU check: no case of this run has an earlier run on this machine yet; nothing to compare"]
    out = [f"per-GPU check: GPU {f.index} ({f.uuid or 'no UUID'}): "
           + (f"{f.ratio:.3f}x its cases' history over {f.cases} cases" if f.ratio is not None else "no history")
           for f in found]
    named = slow(found)
    out.append("per-GPU check: " + ("; ".join(f"GPU {f.index} is {f.ratio:.3f}x, slower than the others "
                                               f"(more than {SLOW:.0%} above the node's median)" for f in named)
                                    if named else f"no GPU stands more than {SLOW:.0%} above the others"))
    return out
