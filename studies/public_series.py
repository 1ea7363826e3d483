"""The history scan on public labelled series: the Turing Change Point Dataset, scored as its benchmark scores it.

The scan (`flybench.regress.scan.replay`) was built on benchmark timings. To
see whether its generic rules hold on series it was never tuned on, each
univariate series of TCPD (van den Burg & Williams, "An Evaluation of Change
Point Detection Algorithms", 2020) is replayed as one benchmark series of a
machine of its own: one synthetic commit per time index, dates increasing,
no code attribution (an `Attribution` of empty tables), the default
`RegressConfig`. The scan reports only worse steps, so each series is
replayed twice: with a smaller-is-better unit (it finds rises) and with a
bigger-is-better unit (it finds falls).

Change points. The counted set ("alerts") is the first bad index of every
alert the replay opened (events "opened" and "reopened") and of every step
it listed apart (with no attribution and one series a machine, the
environment's rule cannot fire, so this is in practice the alerts). Two
alternatives are scored beside it so the choice can be judged: "open at the
end" (only the alerts still open after the last index, as `flybench
regressions` lists them) and "with recoveries" (the counted set plus the
index at which each recovered alert's series was back at its old level).
The union of both directions' counted sets is scored too: a two-sided
detector made of the two runs.

Values. The scan works on log values with relative floors, so values must
be > 0. A series whose values are all > 0 is replayed as published: its
relative steps are its own. A series with a value <= 0 (TCPD's simulated
quality-control series, noise around 0) is mapped affinely onto [1, 2]
(1 + (x - min) / (max - min)): a step of a tenth of its range is then a
relative step of 5-10%. The alternative map, every series onto [1, 2], is
scored as well. A missing value (None in TCPD) stays a row of status
"failed" at its index: the scan skips it as it skips a failed run, and the
indices stay those the annotations name.

F1 is TCPDBench's (`analysis/scripts/metrics.py`, margin 5): index 0 is a
change point of every annotator and of every method, precision counts the
predictions that match a point of any annotator, recall is averaged over the
annotators, and a true point matches at most one prediction (the nearest
unmatched one within the margin). The baseline "zero" predicts only index 0.

    python -m studies.public_series --tcpd /tmp/TCPD --out docs/data/public-series

The dataset is read where it lies; OUT gets score.json and score.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from flybench.regress.config import RegressConfig
from flybench.regress.scan import Attribution, Scan, replay

MARGIN = 5
"""TCPDBench's margin: a prediction within 5 indices of a true change point matches it."""
RISES, FALLS = "rises", "falls"
UNITS = {RISES: "value", FALLS: "TFLOP/s"}
"""A unit the default config reads as smaller-is-better (a rise is worse) and one it reads as bigger-is-better."""
COUNTED, OPEN_AT_END, WITH_RECOVERIES = "alerts", "open at the end", "with recoveries"
AS_PUBLISHED, UNIT_RANGE = "as published", "onto [1, 2]"
SUBJECT = "tcpd"
YOUNG = 10
"""False alarms in a series' first YOUNG runs are counted apart: its scatter then comes from a handful of runs."""
REFIRE_RUNS = 8
"""A false alarm within REFIRE_RUNS runs after another change point of the same direction is counted apart: a
drift fires alert after alert."""
TIE = 1e-9
"""F1 values this close are a tie (the same predictions matched, up to float rounding)."""


class StudyError(Exception):
    """Bad input: the message says what was wrong and what to do."""


@dataclass(frozen=True)
class Labelled:
    """One univariate TCPD series: its values (None where missing) and each annotator's change points."""

    name: str
    values: list[float | None]
    annotations: dict[str, list[int]]


# --- the metric (TCPDBench's definition, margin 5) ---

def true_positives(truth: set[int], predictions: set[int], margin: int = MARGIN) -> set[int]:
    """The true points matched by a prediction within `margin`, each prediction used at most once: each true
    point, in `truth`'s iteration order, takes the nearest prediction not yet taken (the smaller on a tie).

    The order is the set's, as in TCPDBench, not sorted: where two true points compete for one prediction the
    first served wins, and TCPDBench's published scores are those of its sets' order (sorting changes the F1 of
    3 of the 496 prediction sets this study scores).
    """
    free = set(predictions)
    matched = set()
    for tau in truth:
        near = sorted((abs(tau - x), x) for x in free if abs(tau - x) <= margin)
        if near:
            matched.add(tau)
            free.remove(near[0][1])
    return matched


def f1(annotations: Mapping[str, Iterable[int]], predictions: Iterable[int], margin: int = MARGIN) -> float:
    """TCPDBench's F1 against several annotators: index 0 added to every annotator's set and to the predictions;
    precision over the union of the annotators' points, recall averaged over the annotators. The sets are built
    in TCPDBench's order (annotators in file order, each one's points added to the union in its set's order),
    which decides who is served first in `true_positives`."""
    if not annotations:
        raise ValueError("F1 needs at least one annotator")
    truths = []
    for points in annotations.values():
        truth = set(points)
        truth.add(0)
        truths.append(truth)
    union: set[int] = set()
    for truth in truths:
        for tau in truth:
            union.add(tau)
    found = set(predictions)
    found.add(0)
    precision = len(true_positives(union, found, margin)) / len(found)
    recall = statistics.fmean(len(true_positives(t, found, margin)) / len(t) for t in truths)
    return 2 * precision * recall / (precision + recall)


# --- the dataset ---

def load(tcpd: Path) -> tuple[list[Labelled], list[tuple[str, str]]]:
    """The univariate series of a TCPD checkout that has their JSON files, and (name, why) for those left out."""
    annotations_path = tcpd / "annotations.json"
    if not annotations_path.is_file():
        raise StudyError(f"{annotations_path} not found: pass --tcpd a checkout of "
                         "https://github.com/alan-turing-institute/TCPD (its annotations.json and datasets/)")
    try:
        annotations = json.loads(annotations_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StudyError(f"cannot read {annotations_path}: {exc}") from exc
    series, left_out = [], []
    for name in sorted(annotations):
        path = tcpd / "datasets" / name / f"{name}.json"
        if not path.is_file():
            left_out.append((name, "not in the checkout: TCPD's own scripts download it (license), not run here"))
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            columns = data["series"]
            values = [None if v is None else float(v) for v in columns[0]["raw"]]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise StudyError(f"cannot read {path}: {exc}; is --tcpd a TCPD checkout?") from exc
        if len(columns) != 1:
            left_out.append((name, f"multivariate ({len(columns)} series): the scan judges one series at a time"))
            continue
        if not any(v is not None for v in values):
            left_out.append((name, "no values"))
            continue
        series.append(Labelled(name, values, {k: [int(p) for p in v] for k, v in annotations[name].items()}))
    if not series:
        raise StudyError(f"no series found under {tcpd / 'datasets'}: pass --tcpd a TCPD checkout with its "
                         "datasets/<name>/<name>.json files")
    return series, left_out


def positive(values: list[float | None], transform: str) -> list[float | None]:
    """The values the scan reads (module docstring): as published where all are > 0, else onto [1, 2]."""
    present = [v for v in values if v is not None]
    if transform == AS_PUBLISHED and min(present) > 0:
        return list(values)
    low, span = min(present), max(present) - min(present)
    return [None if v is None else 1 + ((v - low) / span if span else 0.0) for v in values]


def transform_of(values: list[float | None], transform: str) -> str:
    """What `positive` did to a series, in words for the table."""
    if transform == AS_PUBLISHED and min(v for v in values if v is not None) > 0:
        return AS_PUBLISHED
    return UNIT_RANGE


# --- the scan ---

def commit(index: int) -> str:
    return f"t{index:05d}"


def history(name: str, values: list[float | None], unit: str) -> pd.DataFrame:
    """The series as a machine's stored history (`queries.history`'s columns): one commit per index."""
    start = pd.Timestamp("2000-01-01")
    return pd.DataFrame({
        "env_name": "tcpd", "benchmark": f"tcpd.{name}", "params": json.dumps({"series": name}), "unit": unit,
        "commit_hash": [commit(i) for i in range(len(values))],
        "commit_date": [start + pd.Timedelta(days=i) for i in range(len(values))],
        "value": values, "status": ["failed" if v is None else "ok" for v in values],
        "run_context": "", "branch": "main",
    })


def no_attribution() -> Attribution:
    """An attribution that knows no commit: every step is judged without code attribution."""
    return Attribution(pd.DataFrame({"hash": [], "merged_pr": []}),
                       pd.DataFrame({"benchmark": [], "params": [], "hash": [], "files": []}),
                       pd.DataFrame({"benchmark": [], "params": [], "pr": [], "delta_pct": []}))


def scan(name: str, values: list[float | None], direction: str, cfg: RegressConfig) -> Scan:
    """One series replayed on a machine of its own (so no other series' steps are read together with its)."""
    return replay(SUBJECT, name, history(name, values, UNITS[direction]), no_attribution(), cfg)


def change_points(found: Scan) -> dict[str, set[int]]:
    """The indices each reading of the scan's result takes as change points (module docstring)."""
    def index(c: str | None) -> int:
        return int(c[1:])

    listed = {index(r.step.first_bad) for r in found.steps}
    counted = {index(e.alert.regression.step.first_bad) for e in found.events if e.event in ("opened", "reopened")}
    counted |= listed
    still_open = {index(a.regression.step.first_bad) for a in found.alerts if a.status == "open"} | listed
    recoveries = {index(e.alert.closed_by) for e in found.events if e.event == "recovered" and e.alert.closed_by}
    return {COUNTED: counted, OPEN_AT_END: still_open, WITH_RECOVERIES: counted | recoveries}


def score(series: list[Labelled], transform: str, cfg: RegressConfig) -> list[dict]:
    """Per series: the zero baseline's F1 and the scan's, each direction, each reading, and the union."""
    rows = []
    for s in series:
        values = positive(s.values, transform)
        points = {d: change_points(scan(s.name, values, d, cfg)) for d in (RISES, FALLS)}
        row = {"series": s.name, "n": len(s.values), "missing": sum(v is None for v in s.values),
               "annotators": len(s.annotations), "values": transform_of(s.values, transform),
               "annotated": sorted({p for a in s.annotations.values() for p in a}),
               "zero": f1(s.annotations, [])}
        for d in (RISES, FALLS):
            row[d] = {reading: {"points": sorted(p), "f1": f1(s.annotations, p)} for reading, p in points[d].items()}
        union = points[RISES][COUNTED] | points[FALLS][COUNTED]
        row["both"] = {"points": sorted(union), "f1": f1(s.annotations, union)}
        rows.append(row)
    return rows


def tally(rows: list[dict], pick: Callable[[dict], float]) -> dict:
    """Mean F1 of the scan and of zero, and how many series the scan beats, ties and loses."""
    diffs = [pick(r) - r["zero"] for r in rows]
    return {"mean_scan": statistics.fmean(map(pick, rows)), "mean_zero": statistics.fmean(r["zero"] for r in rows),
            "beats": sum(d > TIE for d in diffs), "ties": sum(abs(d) <= TIE for d in diffs),
            "loses": sum(d < -TIE for d in diffs)}


def summary(rows: list[dict]) -> dict[str, dict]:
    """The tallies of every direction and reading."""
    found = {f"{d}, {reading}": tally(rows, lambda r, d=d, reading=reading: r[d][reading]["f1"])
             for d in (RISES, FALLS) for reading in (COUNTED, OPEN_AT_END, WITH_RECOVERIES)}
    found["both directions (union), alerts"] = tally(rows, lambda r: r["both"]["f1"])
    return found


# --- the table ---

def false_alarms(row: dict, direction: str) -> list[int]:
    """The counted points of a direction that lie more than MARGIN from every annotated point."""
    return [p for p in row[direction][COUNTED]["points"]
            if p and all(abs(p - a) > MARGIN for a in row["annotated"])]


def losses(rows: list[dict]) -> list[dict]:
    """Each (series, direction) where the scan scores below zero, worst first, with what its false alarms were:
    how many came in the series' first YOUNG runs, how many within REFIRE_RUNS runs after another point of the
    same direction (alert after alert: what a drift does), and the annotated points it missed."""
    found = []
    for r in rows:
        for d in (RISES, FALLS):
            loss = r["zero"] - r[d][COUNTED]["f1"]
            if loss <= TIE:
                continue
            points = r[d][COUNTED]["points"]
            false = false_alarms(r, d)
            missed = [a for a in r["annotated"] if a and all(abs(a - p) > MARGIN for p in points)]
            found.append({"series": r["series"], "direction": d, "zero": r["zero"], "scan": r[d][COUNTED]["f1"],
                          "loss": loss, "false": len(false), "young": sum(p < YOUNG for p in false),
                          "refired": sum(any(0 < p - q <= REFIRE_RUNS for q in points) for p in false),
                          "missed": missed})
    return sorted(found, key=lambda x: -x["loss"])


def markdown(result: dict) -> str:
    primary = result["transforms"][AS_PUBLISHED]
    lines = [
        "# The history scan on TCPD's univariate series: F1 (margin 5) against the \"zero\" baseline",
        "",
        f"Written by `python -m studies.public_series` (studies/public_series.py) from TCPD commit "
        f"`{result['tcpd_commit'] or 'unknown'}`, scan of flybench `{result['flybench']}`. "
        "Rises: the series replayed as smaller-is-better (a rise is "
        "worse); falls: as bigger-is-better. Change points counted: the first bad index of every alert opened. "
        "Values: as published where all are > 0, else onto [1, 2] (README.md).",
        "",
        "## Means",
        "",
        "| values | direction, reading | mean F1 scan | mean F1 zero | beats | ties | loses |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for transform, block in result["transforms"].items():
        for label, t in block["summary"].items():
            lines.append(f"| {transform} | {label} | {t['mean_scan']:.3f} | {t['mean_zero']:.3f} | {t['beats']} | "
                         f"{t['ties']} | {t['loses']} |")
    lines += [
        "",
        f"{len(primary['rows'])} series. Left out: " + "; ".join(
            f"{', '.join(n for n, w in result['left_out'] if w == why)} ({why})"
            for why in dict.fromkeys(w for _, w in result["left_out"])) + ".",
        "",
        "## Per series (values as published where positive; counted reading)",
        "",
        "Points: the counted change points (indices); false: those more than 5 from every annotated point.",
        "",
        "| series | n | annotators | values | zero | rises | falls | both | rises: points (false) | "
        "falls: points (false) | annotated (any annotator) |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for r in primary["rows"]:
        cells = [r["series"], str(r["n"]) + (f" ({r['missing']} missing)" if r["missing"] else ""),
                 str(r["annotators"]), r["values"], f"{r['zero']:.3f}"]
        cells += [_marked(r[d][COUNTED]["f1"], r["zero"]) for d in (RISES, FALLS)]
        cells.append(_marked(r["both"]["f1"], r["zero"]))
        cells += [f"{_list(r[d][COUNTED]['points'])} ({_list(false_alarms(r, d))})" for d in (RISES, FALLS)]
        cells.append(_list(r["annotated"]))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "A score in bold is below zero's on that series.", "",
              "## Where the scan scores below zero (values as published where positive; counted reading)", "",
              f"False: counted points more than 5 from every annotated point; young: of those, in the series' first "
              f"{YOUNG} runs; re-fired: of those, within {REFIRE_RUNS} runs after another point of the same "
              "direction (alert after alert, as a drift does). Missed: annotated points (any annotator, either "
              "direction) with no counted point within 5.", "",
              "| series | direction | zero | scan | loss | false | young | re-fired | missed |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for x in primary["losses"]:
        lines.append(f"| {x['series']} | {x['direction']} | {x['zero']:.3f} | {x['scan']:.3f} | {x['loss']:.3f} | "
                     f"{x['false']} | {x['young']} | {x['refired']} | {_list(x['missed'])} |")
    lines.append("")
    return "\n".join(lines)


def _marked(value: float, zero: float) -> str:
    return f"**{value:.3f}**" if value < zero - TIE else f"{value:.3f}"


def _list(points: list[int]) -> str:
    return ", ".join(map(str, points)) or "-"


def tcpd_commit(tcpd: Path) -> str | None:
    """The checkout's commit, read from its .git without running git (None when it is not a git checkout)."""
    head = tcpd / ".git" / "HEAD"
    try:
        text = head.read_text(encoding="utf-8").strip()
        if text.startswith("ref: "):
            ref = text[5:]
            loose = tcpd / ".git" / ref
            if loose.is_file():
                return loose.read_text(encoding="utf-8").strip()
            packed = (tcpd / ".git" / "packed-refs").read_text(encoding="utf-8").splitlines()
            return next((line.split()[0] for line in packed if line.endswith(" " + ref)), None)
        return text
    except (OSError, UnicodeDecodeError):
        return None


def flybench_revision() -> str:
    """The commit of the scan that was scored, and whether flybench/regress had uncommitted changes then."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "flybench/regress"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" with uncommitted changes to flybench/regress" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tcpd", type=Path, required=True, help="a checkout of alan-turing-institute/TCPD")
    parser.add_argument("--out", type=Path, default=Path("docs/data/public-series"))
    args = parser.parse_args(argv)
    try:
        series, left_out = load(args.tcpd)
    except StudyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg = RegressConfig()
    result = {"tcpd_commit": tcpd_commit(args.tcpd), "flybench": flybench_revision(), "margin": MARGIN, "units": UNITS,
              "left_out": left_out, "transforms": {}}
    for transform in (AS_PUBLISHED, UNIT_RANGE):
        rows = score(series, transform, cfg)
        result["transforms"][transform] = {"summary": summary(rows), "losses": losses(rows),
                                           "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "score.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out / "score.md").write_text(markdown(result), encoding="utf-8")
    for transform, block in result["transforms"].items():
        for label, t in block["summary"].items():
            print(f"{transform:>13} | {label:<32} scan {t['mean_scan']:.3f}  zero {t['mean_zero']:.3f}  "
                  f"beats {t['beats']} ties {t['ties']} loses {t['loses']}")
    print(f"wrote {args.out / 'score.md'} and {args.out / 'score.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
