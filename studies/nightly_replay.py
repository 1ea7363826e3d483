"""Replay FlyDSL's imported CI month night by night through the nightly's own path: import, scan, report.

Each "night" is one of main's CI runs, oldest first. The store gets every
record of the history up to the end of that run (`flybench import
flydsl-ci`'s code, with the clone ordering commits by main), the scan runs
as after any import (`stored.refresh`, which advances the alerts), and the
night's report is what `flybench regressions --subject flydsl` (main's runs,
the default configuration) would print. Beside it, the fresh fit of that
night (`find_regressions`, what the report was before alerts were state).

Per night it records the open alerts on main, the ones opened and recovered
that night, and the main steps the fresh fit still finds; at the end, every
alert's history, and how often an open alert was missing from that night's
fresh fit (a regression the stateless report would have dropped). The
history file is read where it lies; OUT gets rows.jsonl and summary.md.

    python -m studies.nightly_replay --history ../shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz \\
        --flydsl-repo ~/FlyDSL --out docs/data/nightly-replay
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

from flybench.benchmark_names import series_name
from flybench.importers.flydsl_ci.store import import_file
from flybench.regress import find_regressions, stored
from flybench.regress.alerts import canonical
from flybench.regress.episodes import ENVIRONMENT
from flybench.store import connect
from studies.flydsl_ci.data import load
from studies.flydsl_ci.detectors import measured_order
from studies.flydsl_ci.labels import scored
from studies.flydsl_ci.yardstick import Event

SUBJECT = "flydsl"


def nights(records: list[dict]) -> list[tuple[str, str]]:
    """(run id, its last record's time) of main's runs (no pull request), oldest first."""
    ends: dict[str, str] = {}
    for r in records:
        if r.get("pr") is None:
            ends[r["run_id"]] = max(ends.get(r["run_id"], ""), r["ts"])
    return sorted(ends.items(), key=lambda kv: kv[1])


def night_report(db: Path) -> dict:
    """The main report's alerts and environment steps, the alert table's state, and the fresh fit's main steps."""
    report = [r for r in stored.regressions(db, subject=SUBJECT) if r.context == "main"]
    reported = {(r.machine, r.series, r.step.first_bad) for r in report if r.kind == "step"}
    environment = sorted({(r.machine, r.benchmark, canonical(r.params), r.step.first_bad) for r in report
                          if r.kind == ENVIRONMENT})
    fit = {(r.machine, r.series) for r in find_regressions(db, subject=SUBJECT)
           if r.context == "main" and r.kind == "step" and r.step.worse}
    with connect(db, read_only=True) as conn:
        table = conn.execute("SELECT machine, benchmark, params, first_bad, status, flips FROM alerts "
                             "WHERE subject = ? AND runs = 'main'", [SUBJECT]).fetchall()
    return {"reported": sorted(reported), "fit": sorted(fit), "alerts": table, "environment": environment}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.nightly_replay", description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=Path, required=True, help="FlyDSL's CI history (.json.gz), read in place")
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--labels", type=Path, help="labels.json (studies/flydsl_ci/labels.py): score the alerts")
    args = parser.parse_args(argv)
    with gzip.open(args.history, "rt") as f:
        document = json.load(f)
    records = document["records"]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        db, part = Path(work) / "store.duckdb", Path(work) / "history.json"
        for number, (run, end) in enumerate(nights(records), start=1):
            part.write_text(json.dumps({**document, "records": [r for r in records if r["ts"] <= end]}))
            import_file(part, db, SUBJECT, flydsl_repo=args.flydsl_repo)
            stored.refresh(db)
            report = night_report(db)
            opened = {(m, b, p, f) for m, b, p, f, status, _ in report["alerts"] if status == "open"}
            series_fit = set(report["fit"])
            lost = [a for a in report["reported"] if (a[0], a[1]) not in series_fit]
            unreported = [a for a in opened if (a[0], series_name(a[1], list(json.loads(a[2]).values())), a[3])
                          not in set(report["reported"])]
            rows.append({"night": number, "run": run, "end": end, "open": len(opened),
                         "reported": len(report["reported"]), "fit_steps": len(series_fit),
                         "open_not_in_fit": len(lost), "open_not_reported": len(unreported),
                         "alerts": [list(a) for a in report["alerts"]],
                         "environment": [list(e) for e in report["environment"]]})
            print(f"night {number} ({end}): {len(report['reported'])} reported on main, fit {len(series_fit)}, "
                  f"{len(lost)} open alerts the fit no longer finds ({time.monotonic() - began:.0f} s)", flush=True)
        order = measured_order(load(db, args.flydsl_repo))
    (args.out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scores = score(rows, json.loads(args.labels.read_text())["labels"], order) if args.labels else []
    (args.out / "summary.md").write_text(summary(rows, args.history) + scores_table(scores, args.labels))
    print(scores_table(scores, args.labels))
    return 0


def score(rows: list[dict], labels: list[dict], order: dict[str, int]) -> list[dict]:
    """Per architecture and for both: the alerts opened on main over the month (each a flag at its first bad
    commit) against the worse code labels (`labels.scored`), and the steps reported as the environment's against
    the worse environment labels and the worse code labels."""
    def key(machine: str, benchmark: str, params: str) -> tuple[str, str, str]:
        return machine, benchmark, canonical(params)

    alerts = {key(*a[:3]) + (a[3],) for r in rows for a in r["alerts"]}
    environment = {key(*e[:3]) + (e[3],) for r in rows for e in r["environment"]}
    labelled = [{**x, "key": list(key(*x["key"]))} for x in labels]
    arch = {tuple(x["key"])[0]: x["arch"] for x in labelled}
    out = []
    for name in [*sorted(set(arch.values())), "both"]:
        def ours(k: tuple, name: str = name) -> bool:
            return name == "both" or arch.get(k[0]) == name

        flags = [Event(a[:3], "worse", order[a[3]]) for a in alerts if ours(a) and a[3] in order]
        env_flags = [Event(e[:3], "worse", order[e[3]]) for e in environment if ours(e) and e[3] in order]
        mine = [x for x in labelled if ours(tuple(x["key"]))]
        as_code = scored(mine, flags, order)
        env_as_code = [{**x, "kind": "code"} for x in mine if x["kind"] == "environment"]
        out.append({"arch": name, **as_code,
                    "environment_labels": sum(x["kind"] == "environment" and x["direction"] == "worse" for x in mine),
                    "environment_named": scored(env_as_code, env_flags, order)["hits"],
                    "code_labels_called_environment": scored(mine, env_flags, order)["hits"]})
    return out


def scores_table(scores: list[dict], labels: Path | None) -> str:
    if not scores:
        return ""
    def two(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    return "\n".join([
        "", f"## Alerts scored against the labels (`{labels}`)", "",
        "Each alert opened on main over the month is one flag at its first bad commit, matched to the worse code "
        "labels of the same series within one measured main run (`studies/flydsl_ci/labels.py`, `scored`).", "",
        "| architecture | alerts | worse code labels found | precision | recall | alerts on environment labels | "
        "worse environment labels named environment | worse code labels called environment |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *(f"| {s['arch']} | {s['flags']} | {s['hits']} of {s['labels']} | {two(s['precision'])} | {two(s['recall'])} "
          f"| {s['flags_on_environment_labels']} | {s['environment_named']} of {s['environment_labels']} | "
          f"{s['code_labels_called_environment']} |" for s in scores)]) + "\n"


def summary(rows: list[dict], source: Path) -> str:
    final = {tuple(a[:4]): a for a in rows[-1]["alerts"]} if rows else {}
    lines = [f"Imported: FlyDSL's own CI results, `{source.name}` (read where it lies, not copied), replayed one "
             "main CI run (night) at a time through import, scan and `flybench regressions --subject flydsl` (main, "
             "default configuration).", "",
             f"- nights: {len(rows)}; alerts opened on main over the month: {len(final)}, open at the end: "
             f"{sum(a[4] == 'open' for a in final.values())}, recovered: "
             f"{sum(a[4] == 'recovered' for a in final.values())}, reopened at least once: "
             f"{sum(a[5] > 0 for a in final.values())}",
             f"- nights on which an open alert was missing from that night's fresh fit (what the report without "
             f"state would have dropped): {sum(r['open_not_in_fit'] > 0 for r in rows)} of {len(rows)}, "
             f"{sum(r['open_not_in_fit'] for r in rows)} alert-nights in all",
             f"- nights on which an open alert was missing from the report itself: "
             f"{sum(r.get('open_not_reported', 0) > 0 for r in rows)} of {len(rows)}", "",
             "| night | main run ends | reported on main | open alerts | fresh fit's main steps | "
             "open, not in the fit |", "| --- | --- | --- | --- | --- | --- |",
             *(f"| {r['night']} | {r['end']} | {r['reported']} | {r['open']} | {r['fit_steps']} | "
               f"{r['open_not_in_fit']} |" for r in rows)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
