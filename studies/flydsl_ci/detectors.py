"""Which detector should the nightly run? Candidates replayed night by night over FlyDSL's imported month and
scored against the independent labels (`studies/flydsl_ci/labels.py`).

Each candidate sees, on each night, every main series up to that night's
run and names the first bad runs of the worse steps it finds there; a step
counts once, the first night it shows. Flags are matched to the worse code
labels of the same series within one run (TCPDBench's rule,
`yardstick.match`); flags on environment labels are counted apart.

- `potts-trailing`: asv's Potts fit (`step_detect.detect_steps`) over the
  newest WINDOW runs only, a step kept at `relative` or more;
- `e-divisive`: E-Divisive means as Apache Otava runs it
  (`otava.analysis.compute_change_points`: Hunter's split and merge over
  sliding windows), at `max_pvalue`, with Otava's `min_magnitude`.

The nightly as shipped (asv's Potts fit over the whole history, at the
configuration's thresholds) is scored by `labels.score_nightly`. Otava pins
old numpy releases for its other parts; its analysis needs numpy and scipy
only, so it is installed beside flybench without its dependencies:
`pip install --no-deps apache-otava==0.8.0`.

    python -m studies.flydsl_ci.detectors --db DB --flydsl-repo CLONE --labels docs/data/flydsl-labels/labels.json
    python -m studies.flydsl_ci.detectors --db DB --flydsl-repo CLONE --labels docs/data/flydsl-labels/labels.json \
        --shipped-grid
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from asv import step_detect

from studies.flydsl_ci.data import History, load
from studies.flydsl_ci.labels import scored
from studies.flydsl_ci.yardstick import Event

Detector = Callable[[Sequence[float]], list[tuple[int, float, float]]]
"""Values of one series (bigger is better), oldest first -> (index of the first run of a new level, level
before, level after) for each change it finds."""


def potts_trailing(window: int, relative: float) -> Detector:
    def detect(values: Sequence[float]) -> list[tuple[int, float, float]]:
        recent = list(values[-window:])
        offset = len(values) - len(recent)
        if len(recent) < 3:
            return []
        segments = step_detect.detect_steps([1 / v for v in recent])  # asv looks for rises: time per unit
        return [(offset + right[0], 1 / left[2], 1 / right[2]) for left, right in zip(segments, segments[1:])
                if abs(right[2] / left[2] - 1) >= relative]
    return detect


def e_divisive(max_pvalue: float, window: int = 30, min_magnitude: float = 0.0) -> Detector:
    from otava.analysis import compute_change_points

    def detect(values: Sequence[float]) -> list[tuple[int, float, float]]:
        if len(values) < 4:
            return []
        found, _ = compute_change_points(list(values), window_len=window, max_pvalue=max_pvalue,
                                         min_magnitude=min_magnitude)
        return [(int(c.index), float(c.stats.mean_1), float(c.stats.mean_2)) for c in found]
    return detect


def flags(history: History, detect: Detector, order: dict[str, int]) -> list[Event]:
    """Each distinct worse step (a drop in throughput) the detector finds on any night, as a scoring event."""
    seen: dict[tuple, Event] = {}
    for key, series in history.series.items():
        measured = [p for p in series.points if p.value]
        for night in range(2, len(measured) + 1):
            part = measured[:night]
            for index, before, after in detect([p.value for p in part]):
                if after < before:
                    commit = part[index].commit
                    seen.setdefault((key, commit), Event(key, "worse", order[commit]))
    return list(seen.values())


CANDIDATES: dict[str, Callable[[], Detector]] = {
    "potts-trailing w10 2%": lambda: potts_trailing(10, 0.02),
    "potts-trailing w10 4%": lambda: potts_trailing(10, 0.04),
    "e-divisive p0.01": lambda: e_divisive(0.01),
    "e-divisive p0.001": lambda: e_divisive(0.001),
    "e-divisive p0.01 magnitude 2%": lambda: e_divisive(0.01, min_magnitude=0.02),
}


def measured_order(history: History) -> dict[str, int]:
    """Each measured main commit's place among them, in main's order: one run apart is one apart here."""
    measured = {p.commit for series in history.series.values() for p in series.points}
    return {c: i for i, c in enumerate(sorted(measured, key=lambda c: history.position.get(c, len(history.main))))}


def compare(history: History, labels: list[dict]) -> list[dict]:
    order = measured_order(history)
    return [{"detector": name, **scored(labels, flags(history, make(), order), order)}
            for name, make in CANDIDATES.items()]


ARCH_OF_RUNNER = {"linux-flydsl-mi325-1": "gfx942", "linux-flydsl-mi355-1": "gfx950"}
GRID = [(window, noise_k, floor) for window in (6, 8, 10, 12, 15, 0) for noise_k in (1.5, 2.0, 2.5, 3.0)
        for floor in (0.01, 0.02, 0.03)]
"""The shipped scan's settings tried: window (0: the whole history), noise_k, step_floor."""


def shipped_grid(db: Path, labels: list[dict]) -> list[dict]:
    """The shipped scan (`find_regressions`: window, noise, floor, steps read together) over GRID, replayed night
    by night in one process (the study's `Replay`, a proxy of the nightly's own path), scored per architecture.
    Settings are chosen on gfx942 and gfx950 is held out."""
    from dataclasses import replace

    from flybench.regress.config import RegressConfig
    from studies.flydsl_ci.steps import fit_once
    from studies.flydsl_ci.yardstick import Replay

    replay = Replay(db)
    rows = []
    with fit_once():
        for window, noise_k, floor in GRID:
            config = replace(RegressConfig(), window=window, noise_k=noise_k, step_floor=floor)
            flags = [replay.at(f) for f in replay.flags(config)]
            for arch in sorted(set(ARCH_OF_RUNNER.values())):
                mine = [f for f in flags if ARCH_OF_RUNNER.get(f.key[0]) == arch]
                rows.append({"window": window, "noise_k": noise_k, "step_floor": floor, "arch": arch,
                             **scored([x for x in labels if x["arch"] == arch], mine, replay.position)})
    return rows


def _two(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.flydsl_ci.detectors", description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a store holding the imported FlyDSL CI month")
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--shipped-grid", action="store_true",
                        help="score the shipped scan's settings (GRID) per architecture instead of the candidates")
    args = parser.parse_args(argv)
    labels = json.loads(args.labels.read_text())["labels"]
    if args.shipped_grid:
        print("| window | noise_k | step_floor | architecture | flags | worse code labels found | precision | recall "
              "| flags on environment labels |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in shipped_grid(args.db, labels):
            print(f"| {r['window']} | {r['noise_k']} | {r['step_floor']} | {r['arch']} | {r['flags']} | {r['hits']} of "
                  f"{r['labels']} | {_two(r['precision'])} | {_two(r['recall'])} | {r['flags_on_environment_labels']} |")
        return 0
    rows = compare(load(args.db, args.flydsl_repo), labels)
    print("| detector | flags | worse code labels found | precision | recall | flags on environment labels |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['detector']} | {r['flags']} | {r['hits']} of {r['labels']} | {_two(r['precision'])} | "
              f"{_two(r['recall'])} | {r['flags_on_environment_labels']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
