"""FlyDSL's CI history as a test bed for flybench's regression detection: docs/flydsl-ci-study.md.

One command imports the history (idempotent: a second run changes nothing),
reads it back from the store, and writes the study's figures and the
document itself, so every number in it comes from this run:

    python -m studies.flydsl_ci \\
        --data ../shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz \\
        --flydsl-repo /path/to/FlyDSL --db /tmp/flydsl-ci.duckdb

The clone of FlyDSL (any clone whose main reaches 2026-07-12) tells main's
commits from pull-request commits and names the PR behind each squash merge.
The prose lives in doc.md beside this file; `$name` fields are
filled from the computed numbers and tables.
"""

from __future__ import annotations

import argparse
import string
from pathlib import Path
from typing import Any

from flybench.importers.flydsl_ci import import_file
from flybench.importers.flydsl_ci.store import DEFAULT_SUBJECT
from flybench.regress import RegressConfig
from studies.flydsl_ci import figures, tables
from studies.flydsl_ci import sweep as sweeping
from studies.flydsl_ci.data import History, load
from studies.flydsl_ci.flags import beyond_band, counts, judge_flags, missed_by_rule
from studies.flydsl_ci.steps import evidence

COMPARE = (0.03, 3.0)
"""(relative, noise_k) for listing steps and judging FlyDSL's flags: FlyDSL's 3%, flybench's default noise_k."""
TEMPLATE = Path(__file__).with_name("doc.md")


def study(db: Path, repo: Path, doc: Path, images: Path, subject: str = DEFAULT_SUBJECT,
          main_ref: str | None = None) -> dict[str, Any]:
    """Compute everything from the store, draw the figures, write the document; returns the fields."""
    history = load(db, repo, subject, main_ref)
    fields: dict[str, Any] = {f"import_{k}": v for k, v in tables.import_summary(db, subject, history).items()}
    noise = tables.noise_frame(history)
    fields["noise_table"] = tables.markdown(
        ["op", "arch", "series", "run to run (median)", "run to run (max)", "same job (median)",
         "largest A/A move", "coarse"], tables.noise_table(noise))
    fine = noise[~noise["coarse"]]
    fields |= {"noise_median": tables.pct(fine["history_noise"].median()),
               "aa_median": tables.pct(fine["aa_sigma"].median(), 2),
               "quieter_in_job": int((fine["aa_sigma"] < fine["history_noise"]).sum()), "fine_series": len(fine),
               "coarse_series": int(noise["coarse"].sum()), "noise_series": len(noise),
               "few_values": len(history.series) - len(noise)}

    alerts = sweeping.scan(list(history.series.values()), *COMPARE)
    judged = judge_flags(history, alerts, COMPARE[1])
    missed = missed_by_rule(history, alerts)
    fields |= {"alerts": len(alerts), "alerts_worse": sum(a.direction == "worse" for a in alerts),
               "step_table": tables.markdown(
                   ["case", "direction", "size", "commits (last good..first bad)", "PRs merged", "confidence",
                    "nights late", "open at end", "evidence (PR's own run)"], tables.step_rows(history, alerts)),
               "flag_table": tables.markdown(["verdict", "main", "PR", "branch", "total"], tables.flag_rows(judged)),
               "missed_table": tables.markdown(["case", "size", "commits", "flagged by the 3% rule", "evidence"],
                                               tables.missed_rows(history, missed)),
               "missed_unflagged": sum(not flagged for _, flagged in missed)}
    fields |= {f"flags_{k.replace('/', '').replace(',', '').replace(' ', '_')}": n for k, n in counts(judged).items()}
    fields["band_flags"], fields["band_kept"], fields["band_confirmed"] = beyond_band(history, judged)
    fields["band_dropped"] = fields["band_flags"] - fields["band_kept"]
    fields["confirmed_prs"] = ", ".join(f"#{p}" for p in sorted({j.job.pr for j in judged if j.verdict == "confirmed"}))

    judged_series = sweeping.judged(history)
    real = sweeping.real_steps(history, judged_series)
    outcomes = sweeping.sweep(history, judged_series, real)
    quiet, catch = sweeping.quietest(outcomes), sweeping.catching(outcomes)
    landed = sorted({pr for a in real if a.direction == "worse" for pr in evidence(history, a).backing})
    fields["regression_prs"] = ", ".join(f"#{pr}" for pr in landed)
    fields |= {"judged_series": len(judged_series), "real_steps": len(real),
               "real_table": tables.markdown(["case", "direction", "size", "commits", "confidence", "evidence"],
                                             [r[:4] + [r[5], r[8]] for r in tables.step_rows(history, real)]),
               "sweep_table": tables.markdown(
                   ["relative", "noise_k", "nights", "alerts", "on quiet series", "real caught"],
                   [[f"{o.relative:.0%}", f"{o.noise_k:g}", o.nights, o.alerts, o.quiet_alarms,
                     f"{o.caught}/{len(real)}"] for o in outcomes if o.noise_k in (2.0, 4.0, 6.0)]),
               "quietest": f"{quiet.label}: {quiet.caught}/{len(real)} real steps, {quiet.quiet_alarms} false alarms",
               "alternative": next(f"{o.label}: {o.caught}/{len(real)} real steps, {o.quiet_alarms} false alarms"
                                   for o in outcomes if (o.relative, o.noise_k, o.nights) == (catch.relative, 4.0, 1)),
               "defaults": next(f"{o.caught}/{len(real)} real steps, {o.quiet_alarms} false alarms" for o in outcomes
                                if (o.relative, o.noise_k, o.nights) == (0.20, 3.0, 1)),
               "clean": "Some settings" if any(o.quiet_alarms == 0 and o.caught == len(real) for o in outcomes)
               else "No setting",
               "catching": f"{catch.label}: {catch.caught}/{len(real)} real steps, {catch.quiet_alarms} false alarms"}
    for name, config in (("default", RegressConfig()),
                         ("chosen", RegressConfig(relative=catch.relative, noise_k=catch.noise_k))):
        rows = tables.regressions_on_main(db, subject, config)
        fields[f"regressions_{name}"] = tables.markdown(
            ["runner", "benchmark", "params", "commits", "size", "confidence"], rows) if rows else "(none)"
        fields[f"regressions_{name}_count"] = len(rows)
    fields["chosen_relative"], fields["chosen_noise_k"] = f"{catch.relative:.2f}", f"{catch.noise_k:g}"
    _draw(history, noise, judged, real, outcomes, images)
    doc.write_text(string.Template(TEMPLATE.read_text(encoding="utf-8")).substitute(fields), encoding="utf-8")
    return fields


def _draw(history: History, noise: Any, judged: list, real: list, outcomes: list, images: Path) -> None:
    figures.save(figures.noise(noise), images / "noise.png")
    figures.save(figures.by_op(noise), images / "noise-by-op.png")
    figures.save(figures.flags(tables.flag_frame(judged)), images / "flags.png")
    figures.save(figures.sweep(outcomes, len(real)), images / "thresholds.png")
    figures.save(figures.steps(history, real), images / "steps.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.flydsl_ci", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="FlyDSL CI history file to import first (idempotent)")
    parser.add_argument("--flydsl-repo", type=Path, required=True, help="a clone of FlyDSL (main through the data)")
    parser.add_argument("--main-ref", help="the clone's main branch (default: origin/main, main, else HEAD)")
    parser.add_argument("--db", type=Path, default=Path("results/flydsl-ci.duckdb"))
    parser.add_argument("--doc", type=Path, default=Path("docs/flydsl-ci-study.md"))
    parser.add_argument("--images", type=Path, default=Path("docs/img/flydsl-ci"))
    args = parser.parse_args(argv)
    if args.data:
        print(import_file(args.data, args.db, flydsl_repo=args.flydsl_repo, main_ref=args.main_ref).summary())
    fields = study(args.db, args.flydsl_repo, args.doc, args.images, main_ref=args.main_ref)
    print(f"wrote {args.doc} and {len(list(args.images.glob('*.png')))} figures in {args.images}; "
          f"{fields['real_steps']} real steps, best trade-off {fields['catching']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
