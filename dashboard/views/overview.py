"""Overview: where FlyDSL stands against each baseline on each architecture, at the newest commit measured.

A heatmap of FlyDSL's speedup over each baseline per workload case, a panel
per machine (named with its architecture); then every provider's latest time
per case, coloured by the fraction of the roofline it reaches. Machines with
no FlyDSL results (FlyDSL cannot run there yet) get the same ratios against a
reference provider the reader picks, and the page says so plainly.

Rows another system measured (FlyDSL's own CI, `flybench import flydsl-ci`)
get a section of their own below, marked †: the newest value per architecture
and the gfx950 / gfx942 ratio, never mixed into flybench's speedups.
"""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data, filters, frames, ui
from dashboard.names import provider_label, provider_labels
from flybench.benchmark_names import parse
from flybench.importers.flydsl_ci import SOURCE as FLYDSL_CI
from flybench.regress import load_config
from flybench.regress.report import literal_markdown

SPEEDUP_COLUMNS = ["section", "arch", "machine", "label", "provider", "provider_label", "baseline", "baseline_label",
                   "speedup", "shown", "why", "value", "value_base", "commit_hash", "provenance"]
LATEST_COLUMNS = ["section", "arch", "machine", "label", "provider", "provider_label", "status", "shown",
                  "of_roof", "roof_basis", "tflops", "gbps", "why", "commit_hash", "commit_date", "provenance"]
SPEEDUP_SCALE = alt.Scale(type="log", scheme="redblue", domainMid=1, domain=[0.1, 10], clamp=True)
SPEEDUP_TOOLTIP = ["section:N", "label:N", alt.Tooltip("provider_label:N", title="provider"),
                   alt.Tooltip("provider:N", title="provider id"), alt.Tooltip("baseline_label:N", title="against"),
                   alt.Tooltip("baseline:N", title="baseline id"), alt.Tooltip("speedup:Q", format=".3f"),
                   alt.Tooltip("why:N", title="failed because"), "provenance:N"]
SOURCE_NAMES = {FLYDSL_CI: "FlyDSL CI"}  # how a section names an importer's `source`
REGRESSION_PERCENT = 3  # FlyDSL CI's own rule: a case this far below the main it rebuilt in the job is flagged
RATIO = ("gfx950", "gfx942")  # an imported case's architectures: head / base, above 1 = head faster
HISTORY = st.column_config.LinkColumn("history", display_text="open")
FOREIGN_COLUMNS = ["label", "machine", "shown", "unit", "status", "why", "commit_hash", "commit_date", "provenance"]


def main() -> None:
    st.title("Overview")
    st.caption("The newest result of every case on every machine. Speedup = baseline time / provider time "
               "(above 1: faster). A case that failed its correctness check shows as failed, never as a speed.")
    data.require_data()
    facets, rule = data.facets()
    suites = facets["benchmark"].map(lambda b: parse(b) is not None)
    allowed = filters.scope(facets[frames.imported(facets) | (suites & (facets["unit"] == "seconds"))
                                   | ~facets["own_name"]])
    own_cases = allowed[~frames.imported(allowed) & allowed["own_name"]]
    latest = data.memo("overview-latest", own_latest, own_cases=own_cases)
    own = latest[~frames.imported(latest) & latest["own_name"]]
    imported, foreign = allowed[frames.imported(allowed)], allowed[~allowed["own_name"]]
    if own.empty and imported.empty and foreign.empty:
        ui.no_rows("timed cases")
        return
    if not own.empty:
        own_results(own)
        data.committed_note(set(own["machine"]))
    if not foreign.empty:
        foreign_results(foreign)
    if not imported.empty:
        where_it_stands(imported)
        imported_results(imported, rule)


def own_latest(own_cases: pd.DataFrame) -> pd.DataFrame:
    """The newest rows of the cases the filters leave (kept per selection by `data.memo`)."""
    return frames.provenance(filters.within(data.load("latest_cases"), own_cases))


def own_results(latest: pd.DataFrame) -> None:
    """flybench's own timed cases: speedups, machines without FlyDSL, latest results."""
    latest = latest.assign(section=latest["arch"].fillna("?") + " · " + latest["machine"])
    pairs = data.memo("speedup-pairs", frames.speedup_pairs, latest=latest)
    ran = latest[(latest["provider"] == frames.SUBJECT_PROVIDER) & (latest["status"] != "unavailable")]
    with_subject = set(ran["section"])  # a FlyDSL row that could not run there is no FlyDSL result
    speedups(pairs[pairs["section"].isin(with_subject) & (pairs["provider"] == frames.SUBJECT_PROVIDER)])
    relative(latest[~latest["section"].isin(with_subject)], pairs)
    latest_results(latest)


def speedups(pairs: pd.DataFrame) -> None:
    """FlyDSL against the best baseline of each case (named) and against each one, where FlyDSL has results."""
    if pairs.empty:
        return
    shown = pd.concat([frames.best_baseline(pairs), pairs], ignore_index=True)
    st.header("Speedup of FlyDSL over each baseline", divider="gray")
    st.caption(f"Column '{frames.BEST}': where a case has several baselines, FlyDSL against the fastest of them, "
               "named in the cell; the other columns: against each baseline.")
    ui.chart(charts.heatmap(shown[SPEEDUP_COLUMNS], "baseline_label", "label", "speedup", "speedup",
                            SPEEDUP_SCALE,
                            "datum.speedup > 1.6 || datum.speedup < 0.62", SPEEDUP_TOOLTIP, x_first=frames.BEST,
                            cell_width=230),
             shown, "speedup", SPEEDUP_COLUMNS, stretch=False)


def relative(rows: pd.DataFrame, pairs: pd.DataFrame) -> None:
    """Machines without FlyDSL: every provider against a reference provider the reader picks."""
    if rows.empty:
        return
    machines = literal_markdown(", ".join(sorted(rows["machine"].unique())))  # names from files: literal text
    st.header("Machines without FlyDSL results", divider="gray")
    st.warning(f"No FlyDSL results exist yet on {machines}: nothing there measures FlyDSL. "
               "Shown instead: each provider's speed relative to a reference provider.")
    providers = sorted(rows.loc[rows["status"] != "unavailable", "provider"].dropna().unique())
    if not providers:
        return
    reference = filters.pick_one("Reference provider", "reference", providers, default="torch", sidebar=False)
    shown = pairs[pairs["section"].isin(set(rows["section"])) & (pairs["baseline"] == reference)]
    if shown.empty:
        st.caption(f"No case there was measured by {literal_markdown(reference)} and another provider, so there is "
                   "no ratio to show.")
        return
    ui.chart(charts.heatmap(shown[SPEEDUP_COLUMNS], "provider_label", "label", "speedup",
                            f"speed vs {provider_label(reference)}",
                            SPEEDUP_SCALE,
                            "datum.speedup > 1.6 || datum.speedup < 0.62", SPEEDUP_TOOLTIP),
             shown, "relative", SPEEDUP_COLUMNS, stretch=False)


def latest_results(latest: pd.DataFrame) -> None:
    """Every provider's newest time per case, coloured by its fraction of the roofline."""
    measured = data.memo("latest-measured", measured_cases, latest=latest, roofs=data.roofs())
    unavailable = int((latest["status"] == "unavailable").sum())
    st.header("Latest results and fraction of the roofline reached", divider="gray")
    st.caption("Cell: median time. Colour: fraction of the roof the Roofline page draws for the case's machine "
               "and dtype, whatever the filters (measured ceilings where the machine has them, else the vendor's; "
               "the hover and the table name them)"
               + (f". Not shown: {unavailable} cases whose provider cannot run on their machine." if unavailable
                  else "."))
    if not measured.empty:
        st.caption(ui.roof_statement(measured))
    if measured.empty:
        return
    figure = charts.heatmap(measured[LATEST_COLUMNS], "provider_label", "label", "of_roof", "of roofline",
                            alt.Scale(scheme="blues", domain=[0, 1]), "datum.of_roof > 0.6",
                            ["section:N", "label:N", alt.Tooltip("provider_label:N", title="provider"),
                             alt.Tooltip("provider:N", title="provider id"), alt.Tooltip("shown:N", title="time"),
                             "status:N",
                             alt.Tooltip("why:N", title="failed because"),
                             alt.Tooltip("of_roof:Q", format=".1%", title="of roofline"),
                             alt.Tooltip("roof_basis:N", title="roofs"),
                             alt.Tooltip("tflops:Q", format=",.4~g", title="TFLOP/s"),
                             alt.Tooltip("gbps:Q", format=".4g", title="GB/s"),
                             alt.Tooltip("commit_hash:N", title="commit"), "provenance:N"])
    ui.chart(figure, measured, "latest", LATEST_COLUMNS, stretch=False)
    ui.provenance_note(measured)


def measured_cases(latest: pd.DataFrame, roofs: pd.DataFrame) -> pd.DataFrame:
    """Each provider's newest time per case with its fraction of its roof and its label."""
    measured = frames.roof_fractions(frames.newest_per_case(latest[latest["status"] != "unavailable"]), roofs)
    measured["provider_label"] = provider_labels(measured)
    return measured


def where_it_stands(allowed: pd.DataFrame) -> None:
    """Per op and architecture of the imported subjects: the cases, the trend over the newest main runs, the case
    that moved worst and the open alerts, from main's runs only (a pull request's runs are not where it stands)."""
    main_rows = frames.provenance(data.load("imported_runs", context="main"))
    main_rows = filters.within(main_rows, allowed, ("subject", "arch", "machine", "benchmark"))
    if main_rows.empty:
        return
    found = [r for r in data.load("regressions", config=load_config(), accepted=data.acceptances())
             if r.regressed and r.context == "main"]  # accepted levels close alerts here as on Regressions
    alerts = pd.DataFrame([{"machine": r.machine, "benchmark": r.benchmark, "params": json.dumps(r.params)}
                           for r in found], columns=["machine", "benchmark", "params"])
    table = data.memo("standing", frames.standing, main=main_rows, alerts=alerts)
    st.header("Where FlyDSL stands (imported main runs)", divider="gray")
    st.caption(f"Per op and architecture, over FlyDSL CI's main runs: the trend is the geometric mean over the "
               f"op's cases of each one's newest value against the median of the first three of its newest "
               f"{frames.TREND_RUNS} runs (above 1: faster); the worst case's own change beside it; open alerts "
               "from `flybench regressions`. No baseline speedup: FlyDSL CI times FlyDSL only.")
    ui.table(table, "standing", ["op", "arch", "cases", "trend", "worst", "alerts", "newest"], column_config={
        "trend": st.column_config.NumberColumn("trend (geomean)", format="%.3f×"),
        "newest": st.column_config.DatetimeColumn("newest main run", format="YYYY-MM-DD")})


def imported_results(allowed: pd.DataFrame, rule: set[str] | None) -> None:
    """Results another system measured, a section per source: kept out of flybench's speedups above."""
    newest = data.memo("imported-newest", imported_newest, allowed=allowed, rule=sorted(rule) if rule else None)
    if not newest:
        ui.no_rows("imported results of these runs")
    for source, group in newest.items():
        imported_source(source, group)


def imported_newest(allowed: pd.DataFrame, rule: list[str] | None) -> dict[str, pd.DataFrame]:
    """Per source, the newest imported value of every case the filters and the imported-runs rule leave."""
    rows = data.load("latest_cases", unit=None, benchmarks=sorted(allowed["benchmark"].unique()))
    rows = frames.provenance(filters.within(rows, allowed))
    rows = filters.in_runs(rows[frames.imported(rows)], set(rule) if rule is not None else None)  # main / PR
    return {str(source): frames.newest_imported(group) for source, group in rows.groupby("provenance", sort=True)}


def imported_source(source: str, newest: pd.DataFrame) -> None:
    """One source's newest value per architecture and case, then the gfx950 / gfx942 ratio where both have one."""
    head, base = RATIO
    archs = sorted(newest["arch"].dropna().unique())
    wide = data.memo("imported-wide", wide_table, newest=newest, archs=archs)
    runs = ", ".join(filters.RUN_NAMES.get(c, c) for c in sorted(set(newest["run_context"].dropna())))
    text = literal_markdown  # the source, its architectures and its runners' names are data
    st.header(f"Imported from {text(SOURCE_NAMES.get(source, source))} (not measured by flybench)", divider="gray")
    st.caption(f"The newest value of every case {text(source)} measured on {text(', '.join(archs))} ({runs}), on "
               f"its own runners ({text(', '.join(sorted(newest['machine'].unique())))}) with its own method: one "
               "value per CI job, "
               "no samples. Compare these with each other, never with flybench's measurements above. "
               f"{head} vs {base} = how much faster {head} is: throughput (TFLOP/s, TB/s) divided as it is, "
               "times inverted; above 1: faster. Each side is its architecture's newest run, "
               "which may be of another commit (see the hover).")
    arch_ratios(wide, head, base, source)
    apart = int(wide["commits"].str.contains("commits").sum())
    if apart:
        st.caption(f"{apart} of {len(wide)} cases set side by side values of different commits (each "
                   "architecture's newest run): the `commits` column names them, so a difference between "
                   "architectures can be a difference between commits.")
    ui.table(wide, f"imported-{source}", ["label", "unit", *archs, "ratio", "commits", "history"], column_config={
        "ratio": st.column_config.NumberColumn(f"{head} vs {base}", format="%.3f×"), "history": HISTORY})
    ui.provenance_note(newest)
    no_baselines(newest, archs, source)
    source_verdicts(newest, source)


def wide_table(newest: pd.DataFrame, archs: list[str]) -> pd.DataFrame:
    """One row per case, a column per architecture, the gfx950 / gfx942 ratio, history links and the commits
    each row sets side by side."""
    head, base = RATIO
    wide = frames.by_arch(newest)
    wide["ratio"] = frames.arch_ratio(wide, head, base, load_config())
    wide["shown"] = frames.ratio_text(wide, wide["ratio"], head, base) if head in wide and base in wide else ""
    wide["history"] = ui.history_links(wide)
    wide["commits"] = frames.commits_compared(wide, archs)
    wide["unit"] = wide["unit"].map(frames.unit_label)  # after the ratio, which reads the unit as stored
    return wide


def no_baselines(newest: pd.DataFrame, archs: list[str], source: str) -> None:
    """Say why no page compares the imported kernels with a baseline there, and how that would change."""
    providers = sorted(newest["provider"].dropna().unique())
    if len(providers) > 1:
        return
    measured = frames.provenance(data.load("latest_cases"))
    own = set(measured.loc[~frames.imported(measured), "arch"].dropna()) if not measured.empty else set()
    unmeasured = [a for a in archs if a not in own]
    text = literal_markdown  # architectures, providers and the source are data
    st.info(f"No CK, AITER, hipBLASLt or Triton rows for {text(', '.join(archs))} in this selection: "
            f"{text(SOURCE_NAMES.get(source, source))} measures {text(', '.join(providers))} only, with no baseline "
            "rows of its own (its speedup rows are ratios to one)"
            + (f", and flybench has not run on {text(', '.join(unmeasured))}. Its nightly on those runners measures "
               "the baselines beside FlyDSL (docs/rocm.md)." if unmeasured else "."))


def source_verdicts(newest: pd.DataFrame, source: str) -> None:
    """The source's own verdicts on its newest runs, marked as its: FlyDSL CI flags a case 3% below the main it
    rebuilt in the same job (`vs_main`)."""
    if "source_vs_main" not in newest or newest["source_vs_main"].isna().all():
        return
    flagged = newest[newest["source_regression"].fillna(False).astype(bool)].copy()
    name = literal_markdown(SOURCE_NAMES.get(source, source))  # an importer's name is data
    st.subheader(f"{name}'s own verdicts (theirs, not flybench's)")
    st.caption(f"{name} rebuilds main in the same job and flags a case at {REGRESSION_PERCENT}% or more below it "
               f"(`vs_main`). Of the {len(newest)} newest runs shown, it flagged {len(flagged)}. flybench's own "
               "verdicts are on the Regressions page.")
    if flagged.empty:
        return
    flagged["vs_main"] = flagged["source_vs_main"] / 100
    flagged["history"] = ui.history_links(flagged)
    flagged["ci_run"] = [ui.ci_run_link(source, r) for r in flagged["source_run"]]
    ui.table(flagged.sort_values("source_vs_main"), f"source-verdicts-{source}",
             ["arch", "label", "run_context", "pr", "vs_main", "commit_hash", "ci_run", "history"], column_config={
                 "vs_main": st.column_config.NumberColumn("vs main, same job", format="percent"),
                 "ci_run": st.column_config.LinkColumn("CI run", display_text="open"), "history": HISTORY})


def arch_ratios(wide: pd.DataFrame, head: str, base: str, source: str) -> None:
    """The ratio heatmap, a panel per workload, over the cases measured on both architectures."""
    if head not in wide or base not in wide or not (both := wide[head].notna() & wide[base].notna()).any():
        st.caption(f"No case in this selection was measured on both {literal_markdown(head)} and "
                   f"{literal_markdown(base)}, so there is no ratio.")
        return
    shown = wide.loc[both, ["workload", "label", "unit", head, base, "ratio", "shown", "provenance"]].assign(
        **{f"{arch}_commit": wide.loc[both, f"{arch} commit_hash"].str[:8] for arch in (head, base)})
    figure = charts.heatmap(shown, "unit", "label", "ratio", f"{head} vs {base}", SPEEDUP_SCALE,
                            "datum.ratio > 1.6 || datum.ratio < 0.62",
                            ["label:N", "unit:N", f"{head}:N", f"{base}:N", alt.Tooltip("ratio:Q", format=".3f"),
                             *(alt.Tooltip(f"{arch}_commit:N", title=f"{arch} commit") for arch in (head, base)),
                             "provenance:N"], section="workload")
    ui.chart(figure, wide[both], f"imported-ratio-{source}", ["workload", "label", "unit", head, base, "ratio", "shown",
                                                              f"{head} commit_hash", f"{base} commit_hash"],
             stretch=False)


def foreign_results(allowed: pd.DataFrame) -> None:
    """Benchmarks of suites flybench did not write, named exactly as asv names them, in whatever unit they have."""
    rows = data.load("latest_cases", unit=None, benchmarks=sorted(allowed["benchmark"].unique()))
    newest = frames.newest_foreign(filters.within(rows, allowed))
    st.header("Other benchmarks", divider="gray")
    st.caption("Benchmarks outside flybench's case suites, named as their asv suite names them: the newest value "
               "of each series, in the unit its benchmark definition gives.")
    newest["history"] = ui.history_links(newest)
    ui.table(newest, "foreign", [*FOREIGN_COLUMNS, "history"], column_config={
        "shown": "newest value", "commit_hash": "commit", "commit_date": "date", "history": HISTORY})
    ui.provenance_note(newest)


main()
