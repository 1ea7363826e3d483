"""Replay FlyDSL's imported CI month night by night through the nightly's own path, and import it in one go beside it.

Each "night" is one of main's CI runs, oldest first. The store gets every
record of the history up to the end of that run (`flybench import
flydsl-ci`'s code, with the clone ordering commits by main and writing the
code attribution), the scan runs as after any import (`stored.refresh`,
which replays every commit of the machine's stored history: `flybench.
regress.scan`), and the night's report is what `flybench regressions
--subject flydsl` (main's runs, the default configuration) would print.

Then the whole history is imported in one go into a fresh store (the same
`import_file` and `stored.refresh`). The scan's alerts are meant to be a
function of the stored history, so the two final `alerts` tables should hold
the same alerts on main: (machine, benchmark, canonical params, first bad
commit, status). The study says whether they do, and lists the differences.

With labels (`studies/flydsl_ci/labels.py`), both paths are scored per
architecture, against all labels and against the high-confidence ones: the
night-by-night path's flags are the alerts any night's table held, the
one-go path's its final table (every alert the replay opened, open or
recovered). The history file is read where it lies; OUT gets rows.jsonl and
summary.md; --keep-store keeps the night-by-night store.

    python -m studies.nightly_replay --history ../shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz \\
        --flydsl-repo ~/FlyDSL --out docs/data/nightly-replay --labels docs/data/flydsl-labels/labels.json \\
        --keep-store /tmp/nightly.duckdb
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from flybench.importers.flydsl_ci.store import import_file
from flybench.regress import stored
from flybench.regress.alerts import OPEN, RECOVERED, canonical
from flybench.regress.episodes import ENVIRONMENT
from flybench.store import connect, machine_code
from studies.flydsl_ci.data import load
from studies.flydsl_ci.detectors import measured_order
from studies.flydsl_ci.labels import scored
from studies.flydsl_ci.yardstick import Event, match

SUBJECT = "flydsl"
PATHS = ("night by night", "one go")
CONFIDENCES = ("all", "high")

Alert = tuple[str, str, str, str, str]
"""(machine, benchmark, canonical params, first bad commit, status): one alert on main."""
Step = tuple[str, str, str, str]
"""(machine, benchmark, canonical params, first bad commit): one environment step on main."""


def nights(records: list[dict]) -> list[tuple[str, str]]:
    """(run id, its last record's time) of main's runs (no pull request), oldest first."""
    ends: dict[str, str] = {}
    for r in records:
        if r.get("pr") is None:
            ends[r["run_id"]] = max(ends.get(r["run_id"], ""), r["ts"])
    return sorted(ends.items(), key=lambda kv: kv[1])


def state(db: Path) -> dict:
    """The `alerts` table on main, the main report's alerts (kind "step") and its environment steps."""
    report = [r for r in stored.regressions(db, subject=SUBJECT) if r.context == "main"]
    with connect(db, read_only=True) as conn:
        table = conn.execute("SELECT machine, benchmark, params, first_bad, status FROM alerts "
                             "WHERE subject = ? AND runs = 'main'", [SUBJECT]).fetchall()
    return {"alerts": sorted({(m, b, canonical(p), f, s) for m, b, p, f, s in table}),
            "reported": sorted({(r.machine, r.benchmark, canonical(r.params), r.step.first_bad)
                                for r in report if r.kind == "step"}),
            "environment": sorted({(r.machine, r.benchmark, canonical(r.params), r.step.first_bad)
                                   for r in report if r.kind == ENVIRONMENT})}


def ingest(source: Path, db: Path, repo: Path, code_tree: Path | None = None) -> dict:
    """One night: the history so far imported with the clone, then, as the nightly's `flybench ingest` of the
    FlyDSL results tree does, the machine code of its commits (`<tree>/machine-code.jsonl`), then the scan."""
    import_file(source, db, SUBJECT, flydsl_repo=repo)
    if code_tree is not None:
        with connect(db) as conn:
            code = machine_code.read(code_tree)  # None: the tree holds no machine code file
            if code is not None:
                machine_code.store(conn, SUBJECT, code)
    stored.refresh(db)
    return state(db)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.nightly_replay", description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=Path, required=True, help="FlyDSL's CI history (.json.gz), read in place")
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--labels", type=Path, help="labels.json (studies/flydsl_ci/labels.py): score the alerts")
    parser.add_argument("--machine-code", type=Path, metavar="TREE",
                        help="a results tree whose machine-code.jsonl each night ingests (results/flydsl)")
    parser.add_argument("--keep-store", type=Path, help="keep the final night-by-night store here (replaced)")
    args = parser.parse_args(argv)
    with gzip.open(args.history, "rt") as f:
        document = json.load(f)
    records = document["records"]
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        db, part = Path(work) / "nightly.duckdb", Path(work) / "history.json"
        before: dict[Step, str] = {}
        for number, (run, end) in enumerate(nights(records), start=1):
            part.write_text(json.dumps({**document, "records": [r for r in records if r["ts"] <= end]}))
            night = ingest(part, db, args.flydsl_repo, args.machine_code)
            now = {a[:4]: a[4] for a in night["alerts"]}
            rows.append({"row": "night", "night": number, "run": run, "end": end,
                         "open": sum(s == OPEN for s in now.values()),
                         "opened": sum(k not in before for k in now),
                         "recovered": sum(s == RECOVERED and before.get(k) != RECOVERED for k, s in now.items()),
                         "gone": sum(k not in now for k in before),
                         "reported": len(night["reported"]), "environment_steps": len(night["environment"]),
                         "alerts": [list(a) for a in night["alerts"]]})
            before = now
            print(f"night {number} ({end}): {rows[-1]['open']} open alerts on main, {rows[-1]['opened']} opened, "
                  f"{rows[-1]['recovered']} recovered, {rows[-1]['gone']} gone, {len(night['reported'])} reported "
                  f"({time.monotonic() - began:.0f} s)", flush=True)
        order = measured_order(load(db, args.flydsl_repo))
        if args.keep_store:
            args.keep_store.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(db, args.keep_store)
        nightly_seconds = time.monotonic() - began
        one_go = ingest(args.history, Path(work) / "one-go.duckdb", args.flydsl_repo, args.machine_code)
        print(f"one go: {len(one_go['alerts'])} alerts on main ({time.monotonic() - began:.0f} s)", flush=True)
    last = {"alerts": [tuple(a) for a in rows[-1]["alerts"]], "environment": night["environment"]} if rows else \
        {"alerts": [], "environment": []}
    comparison = {**compare(last["alerts"], one_go["alerts"]), "nightly_seconds": round(nightly_seconds),
                  "one_go_seconds": round(time.monotonic() - began - nightly_seconds)}
    rows.append({"row": "comparison", **comparison})
    ever = sorted({tuple(a[:4]) for r in rows if r["row"] == "night" for a in r["alerts"]})
    flags = {PATHS[0]: (ever, last["environment"]),
             PATHS[1]: (sorted({a[:4] for a in one_go["alerts"]}), one_go["environment"])}
    scores = score(flags, json.loads(args.labels.read_text())["labels"], order) if args.labels else []
    rows += [{"row": "score", **s} for s in scores]
    (args.out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = summary(rows, args.history, len(ever), comparison) + scores_table(scores, args.labels)
    (args.out / "summary.md").write_text(text)
    print(comparison_text(comparison) + scores_table(scores, args.labels))
    return 0


def compare(nightly: list[Alert], one_go: list[Alert]) -> dict:
    """The final alerts on main of both paths, and the ones only one of them holds."""
    a, b = set(map(tuple, nightly)), set(map(tuple, one_go))
    return {"identical": a == b, "nightly_alerts": len(a), "one_go_alerts": len(b),
            "only_nightly": [list(x) for x in sorted(a - b)], "only_one_go": [list(x) for x in sorted(b - a)]}


def comparison_text(c: dict) -> str:
    lines = ["", "## Night by night against one go", "",
             f"The final `alerts` table on main of each path, as (machine, benchmark, canonical params, first bad "
             f"commit, status): night by night {c['nightly_alerts']}, one go {c['one_go_alerts']}; identical: "
             f"{'yes' if c['identical'] else 'no'}."]
    for name, only in (("night by night", c["only_nightly"]), ("one go", c["only_one_go"])):
        if only:
            lines += ["", f"Only in the {name} path:", "",
                      *(f"- {m} {b} {p} first bad {f[:12]}, {s}" for m, b, p, f, s in only)]
    return "\n".join(lines) + "\n"


def score(flags: dict[str, tuple[list[Step], list[Step]]], labels: list[dict], order: dict[str, int]) -> list[dict]:
    """Per path, label confidence and architecture (and both): the path's alerts on main (each a flag at its first
    bad commit) against the worse code labels (`labels.scored`), and its environment steps on main against the
    worse environment labels and against the worse code labels no alert found."""
    def key(machine: str, benchmark: str, params: str) -> tuple[str, str, str]:
        return machine, benchmark, canonical(params)

    labelled = [{**x, "key": list(key(*x["key"]))} for x in labels]
    arch = {x["key"][0]: x["arch"] for x in labelled}
    out = []
    for path, (alerts, environment) in flags.items():
        for confidence in CONFIDENCES:
            chosen = [x for x in labelled if confidence == "all" or x.get("confidence") == confidence]
            for name in [*sorted(set(arch.values())), "both"]:
                def ours(k: tuple | list, name: str = name) -> bool:
                    return name == "both" or arch.get(k[0]) == name

                alert_flags = [Event(a[:3], "worse", order[a[3]]) for a in alerts if ours(a) and a[3] in order]
                env_flags = [Event(e[:3], "worse", order[e[3]]) for e in environment if ours(e) and e[3] in order]
                mine = [x for x in chosen if ours(x["key"])]
                env_as_code = [{**x, "kind": "code"} for x in mine if x["kind"] == ENVIRONMENT]
                code = [Event(tuple(x["key"]), "worse", order[x["first_bad"]]) for x in mine
                        if x["kind"] == "code" and x["direction"] == "worse" and x["first_bad"] in order]
                found = {i for i, _ in match(code, alert_flags)}
                out.append({"path": path, "labels_used": confidence, "arch": name, **scored(mine, alert_flags, order),
                            "environment_labels": sum(x["kind"] == ENVIRONMENT and x["direction"] == "worse"
                                                      for x in mine),
                            "environment_named": scored(env_as_code, env_flags, order)["hits"],
                            "code_labels_called_environment": len({i for i, _ in match(code, env_flags)} - found)})
    return out


def scores_table(scores: list[dict], labels: Path | None) -> str:
    if not scores:
        return ""
    def two(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    return "\n".join([
        "", f"## Alerts scored against the labels (`{labels}`)", "",
        "Each alert on main is one flag at its first bad commit, matched to the worse code labels of the same series "
        "within one measured main run (`studies/flydsl_ci/labels.py`, `scored`). Night by night: every alert any "
        "night's table held; one go: the final table (every alert the replay opened, open or recovered). Columns: "
        "labels (all, or `confidence` high only); alerts (flags); worse code labels found (labels matched by a "
        "flag, of the worse code labels); precision (found / alerts); recall (found / worse code labels); alerts "
        "on environment labels (flags matching a worse environment label instead); worse environment labels named "
        "environment (matched by an environment step of the report on main); worse code labels missed, "
        "called environment (no alert found them, an environment step of the report on main matched them).", "",
        "| path | labels | architecture | alerts | worse code labels found | precision | recall | "
        "alerts on environment labels | worse environment labels named environment | "
        "worse code labels missed, called environment |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(f"| {s['path']} | {s['labels_used']} | {s['arch']} | {s['flags']} | {s['hits']} of {s['labels']} | "
          f"{two(s['precision'])} | {two(s['recall'])} | {s['flags_on_environment_labels']} | "
          f"{s['environment_named']} of {s['environment_labels']} | {s['code_labels_called_environment']} |"
          for s in scores)]) + "\n"


def summary(rows: list[dict], source: Path, ever: int, comparison: dict) -> str:
    nightly = [r for r in rows if r["row"] == "night"]
    final = nightly[-1]["alerts"] if nightly else []
    lines = [f"Imported: FlyDSL's own CI results, `{source.name}` (read where it lies, not copied), replayed one "
             "main CI run (night) at a time through import (with the clone: code attribution), scan "
             "(`stored.refresh`, which replays the machine's whole stored history) and `flybench regressions "
             "--subject flydsl` (main, default configuration); then imported in one go into a fresh store.", "",
             f"- nights: {len(nightly)} ({comparison['nightly_seconds']} s); one go: {comparison['one_go_seconds']} s",
             f"- alerts on main in the final table: {len(final)}, open {sum(a[4] == OPEN for a in final)}, recovered "
             f"{sum(a[4] == RECOVERED for a in final)}; alerts any night's table held: {ever}",
             f"- nights on which the report on main did not show every open alert: "
             f"{sum(r['reported'] != r['open'] for r in nightly)} of {len(nightly)}", "",
             "Columns: open alerts (the night's `alerts` table on main, status open); opened (alerts not in the "
             "night before's table); recovered (alerts whose status became recovered); gone (alerts of the night "
             "before's table that this night's replay no longer opens); reported on main (the report's alerts); "
             "environment steps (the report's steps on main read as the environment's).", "",
             "| night | main run ends | open alerts | opened | recovered | gone | reported on main | "
             "environment steps |", "| --- | --- | --- | --- | --- | --- | --- | --- |",
             *(f"| {r['night']} | {r['end']} | {r['open']} | {r['opened']} | {r['recovered']} | {r['gone']} | "
               f"{r['reported']} | {r['environment_steps']} |" for r in nightly)]
    return "\n".join(lines) + "\n" + comparison_text(comparison)


if __name__ == "__main__":
    sys.exit(main())
