"""History: one case across commits, every machine side by side, with its alert threshold and detected steps.

A case is one benchmark and its parameters but the provider. Each machine
(named by architecture) gets a small multiple of its own, each provider a
line in it, imported runs marked and drawn with their own point shape, so a
case measured on three architectures by two systems never collapses into one
chart with a long legend. The band around each line is the threshold the
alerts use; the red rules are the steps `flybench regressions` finds, named by
the first bad commit. The commit axis belongs to one subject (repository):
each subject gets its own chart.
"""

from __future__ import annotations

import json
import shlex

import pandas as pd
import streamlit as st

from dashboard import charts, commits, counters, data, elsewhere, filters, frames, ui
from flybench.benchmark_names import series_name
from flybench.regress import load_config
from flybench.regress.report import code_span, literal_markdown

MAX_LINES = 10  # lines per panel, and so legend entries: beyond this the page asks for narrower filters
# Values drawn per line: a longer series is thinned in the query (each commit range's lowest and highest value,
# its newest values, failures and detected steps kept), since a browser drawing 20 lines of 1,000 commits is what
# made a widget change slow, and 720 pixels show no more.
MAX_POINTS = 100
COLUMNS = ["panel", "series", "provider", "order", "short", "commit_date", "run", "message", "author", "status", "value",
           "ci_99_a", "ci_99_b", "unit", "why", "provenance", "commit_hash", "url", "machine", "env_name", "params"]
STEP_COLUMNS = ["panel", "series", "state", "attributed", "evidence", "last_good", "first_bad", "first_bad_date", "run",
                "message", "author", "what", "alert", "bisect"]
SERIES = ["machine", "env_name", "params"]


def main() -> None:
    st.title("History")
    data.require_data()
    facets, rule = data.facets()
    allowed = filters.scope(facets)
    if allowed.empty:
        ui.no_rows("benchmarks")
        return
    names = allowed.drop_duplicates("benchmark").set_index("benchmark")
    labels = {b: frames.benchmark_label(b, r.unit, r.provenance) for b, r in names.iterrows()}
    benchmark = filters.pick_one("Benchmark", "benchmark", ranked(allowed, "benchmark"), format_func=labels.get,
                                 help="Workload · shape set (or source) · metric; the benchmark's id is named under "
                                      "each chart's header and kept in the link.")
    log = st.sidebar.toggle("Logarithmic value axis", key="log", bind="query-params",
                            help="For series whose values differ by orders of magnitude (tiny and large shapes).")
    mine = allowed[allowed["benchmark"] == benchmark]
    cases = filters.within(data.load("benchmark_cases", benchmark=benchmark,
                                     machines=sorted(mine["machine"].unique())), mine)
    cases = frames.provenance(filters.in_runs(cases, rule))
    cases = cases[cases["ran"].astype(bool)]  # a series the provider never ran in has nothing to draw
    if cases.empty:
        where = ", ".join(sorted(mine["machine"].unique()))
        st.caption(literal_markdown(f"No provider could run {benchmark} on {where}."))
        return
    cases = cases.assign(case_text=cases["params"].map(frames.case_text))
    case = filters.pick_one("Case", "params", ranked(cases, "case_text", weight="commits"), sidebar=False)
    for subject, chosen in cases[cases["case_text"] == case].groupby("subject", sort=True):
        series = sorted(chosen[SERIES].drop_duplicates().itertuples(index=False, name=None))
        steps = data.load("history_steps", benchmark=benchmark, machines=sorted(chosen["machine"].unique()),
                          subject=subject, series=series, config=load_config(), accepted=data.acceptances())
        rows = data.load("benchmark_history", benchmark=benchmark, machines=sorted(chosen["machine"].unique()),
                         subject=subject, params=sorted(chosen["params"].unique()), max_points=MAX_POINTS,
                         keep=sorted(set(steps["last_good"]) | set(steps["first_bad"])))
        rows = frames.provenance(filters.in_runs(filters.within(rows, mine), rule))
        rows = rows[pd.MultiIndex.from_frame(rows[SERIES]).isin(series)]
        if rows.empty:
            continue
        st.header(literal_markdown(" · ".join(p for p in (op_name(rows), case, str(subject)) if p)), divider="gray")
        st.caption(f"Benchmark {code_span(series_name(benchmark, [case] if case else []))}; one panel per machine.")
        subject_history(str(subject), benchmark, rows, steps, log)
        counters.section(data.load, benchmark, sorted(chosen["params"].unique()), sorted(chosen["machine"].unique()),
                         str(subject), steps)
    if not cases.empty and case:
        chosen = frames.params_dict(cases[cases["case_text"] == case]["params"].iloc[0])
        if "case" in chosen and "dtype" in chosen:
            elsewhere.section(data.load, benchmark.split(".")[0], str(chosen["case"]), str(chosen["dtype"]), rule)


def op_name(rows: pd.DataFrame) -> str:
    """The case's op as its source names it (FlyDSL CI's `flash_attn`), else flybench's workload."""
    ops = rows["source_op"].dropna() if "source_op" in rows else pd.Series(dtype=object)
    return str(ops.iloc[0]) if len(ops) else str(rows["workload"].iloc[0])


def ranked(rows: pd.DataFrame, column: str, weight: str | None = None) -> list[str]:
    """`column`'s values, the one measured on the most architectures and machines first (the default pick), then
    the one with the most rows (or the most `weight`)."""
    counts = rows.groupby(column).agg(archs=("arch", "nunique"), machines=("machine", "nunique"),
                                      rows=(weight, "sum") if weight else ("machine", "size"))
    return list(counts.sort_values(["archs", "machines", "rows"], ascending=False, kind="stable").index)


def subject_history(subject: str, benchmark: str, rows: pd.DataFrame, steps: pd.DataFrame, log: bool) -> None:
    """The small multiples, their rows and the detected steps of one subject's series of one case."""
    rows = prepare(rows)
    lines = rows.groupby("panel")["series"].nunique()
    if lines.max() > MAX_LINES:  # keep each panel readable: its busiest lines, and say so
        busiest = rows.groupby(["panel", "series"])["series_rows"].max().groupby(level=0, group_keys=False) \
            .nlargest(MAX_LINES)
        rows = rows.set_index(["panel", "series"]).loc[busiest.index].reset_index()
        st.warning(f"Up to {lines.max()} lines in one panel; drawing the {MAX_LINES} with the most commits. "
                   "Narrow the filters (provider, imported runs) to see the others.")
    steps = step_marks(steps, rows, benchmark, subject)
    bands = frames.threshold_band(rows, load_config(), rows.attrs["factor"])
    ticks, gaps = charts.commit_ticks(rows)
    flips = mode_bands(rows, subject)
    ui.chart(data.chart_spec(charts.history, rows=rows, bands=bands, steps=steps, unit_label=rows.attrs["axis"],
                             log=log, ticks=ticks, gaps=gaps, modes=flips), rows, f"history-{subject}",
             COLUMNS, stretch=False)
    for (panel, series, count), levels in flips.groupby(["panel", "series", "modes"], sort=False):
        st.caption(literal_markdown(f"{series} flips between {count} modes on {panel}: "
                                    + ", ".join(levels["mode"]) + ". Shaded grey: the modes. The history scan "
                                    "takes a step back to a mode the series already had as the runner's, and "
                                    "leaves a files-only step on such a series unconfirmed unless the job's shift "
                                    "or a paired A/B separates code from runner."))
    if len(gaps):
        st.caption("The axis is the commits in order, as asv draws them: a dotted grey rule marks "
                   f"{len(gaps)} place(s) where {charts.GAP_DAYS} days or more passed between two commits.")
    st.caption("Shaded around each line: the alert threshold, " + (bands["band"].iloc[0] if not bands.empty else "")
               + " (flybench.toml [regress]); a narrower tint: the 99% interval of each value.")
    thinned = rows.drop_duplicates(["panel", "series"])["series_rows"]
    if (thinned > MAX_POINTS).any():
        st.caption(f"Downsampled for drawing: {len(rows):,} of {int(thinned.sum()):,} values. A line of more than "
                   f"{MAX_POINTS} commits shows the lowest and highest value of each of {MAX_POINTS // 2} commit "
                   "ranges, its newest values, every failure and the commits around each detected step; the steps "
                   "are found on every value. The rows behind the chart are the drawn ones.")
    ui.provenance_note(rows)
    if (rows["status"] == "failed").any():
        st.caption("✕ on the bottom edge: a commit where the case failed (correctness or a crash); "
                   "it has no time to draw. Hover for the reason.")
    if steps.empty:
        st.caption("Detected steps: none in these series clears the regression thresholds (flybench.toml [regress]).")
        return
    st.subheader("Detected steps")
    states = steps["state"].value_counts()
    st.caption("; ".join(f"{n} {state}{'s' if n != 1 else ''}" for state, n in states.items()) + ". An accepted "
               "alert's level was accepted (`flybench accept` or the Regressions page, with its reason there); a "
               "recovered one's series came back to its old level. Both are drawn grey; open ones red.")
    st.caption("The alerts `flybench regressions --closed` reports for these series, with "
               "their evidence: 'attributed to' names the pull requests whose code the scan found changed what the "
               "series runs in the range, as the CLI does; the red dashed rules mark the range's newest commit, "
               "where the step was first measured (its message is that commit's, not necessarily the cause's), "
               "labelled with the attributed pull request where there is one. `alert` opens the series' row on "
               "the Regressions page; `bisect` finds the commit inside a range.")
    ui.table(steps, f"steps-{subject}", STEP_COLUMNS, column_config={
        "attributed": "attributed to", "message": "range's newest commit: message",
        "first_bad_date": st.column_config.DatetimeColumn("date", format="YYYY-MM-DD HH:mm"),
        "alert": st.column_config.LinkColumn("alert", display_text="open"),
        "bisect": st.column_config.TextColumn("bisect command")})


def mode_bands(rows: pd.DataFrame, subject: str) -> pd.DataFrame:
    """The drawn series' runner modes (`flybench.regress.modes`, read once per database version) as bands across
    each line's commits: `lo`..`hi` the mode's lowest and highest value, scaled as the values are."""
    found = pd.concat([data.load("series_modes", machine=m, subject=subject)
                       for m in sorted(rows["machine"].unique())], ignore_index=True)
    if found.empty:
        return found.assign(panel=[], series=[], start=[], end=[], lo=[], hi=[])
    lines = rows.assign(key=[json.dumps(json.loads(p)) for p in rows["params"]]).groupby(
        ["machine", "env_name", "key", "panel", "series"], as_index=False).agg(start=("order", "min"),
                                                                          end=("order", "max"))
    found = found.merge(lines, left_on=["machine", "env_name", "params"], right_on=["machine", "env_name", "key"])
    factor = rows.attrs["factor"]
    found["lo"], found["hi"] = found["low"] * factor, found["high"] * factor
    found["mode"] = [f"{level * factor:.4g} {rows.attrs['axis']} ({n} runs)"
                     for level, n in zip(found["level"], found["runs"])]
    return found[["panel", "series", "modes", "start", "end", "lo", "hi", "mode"]]


def prepare(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows ready to draw: panel and line labels, commit message and link, scaled values, texts, and each
    commit's place on the axis (`order`: commits of every drawn series, by date)."""
    out = commits.annotate(frames.without_failed_values(rows), data.load("commit_titles"))
    out["order"] = charts.commit_order(out)
    out["panel"] = frames.panel_labels(out)
    out["series"] = frames.series_labels(out)
    out["run"] = run_text(out)
    if "source_run" in out:  # an imported point opens the CI run that measured it, not just its commit
        runs = [ui.ci_run_link(s, r) for s, r in zip(out["source"], out["source_run"])]
        out["url"] = [r or u for r, u in zip(runs, out["url"])]
    factor, axis = frames.display_scale(out["unit"].iloc[0], out["value"])
    out["y"], out["y_lo"], out["y_hi"] = (out[c] * factor for c in ("value", "ci_99_a", "ci_99_b"))
    out["why"] = ""
    failing = out["status"] != "ok"  # texts only where they differ from the number (hovers format the rest)
    out.loc[failing, "why"] = [frames.reason_text(s, r) for s, r in zip(out.loc[failing, "status"],
                                                                         out.loc[failing, "reason"])]
    out.attrs.update(axis=axis if axis != frames.UNKNOWN_UNIT else "value", factor=factor)
    return out


def run_text(rows: pd.DataFrame) -> pd.Series:
    """Where a commit's value was measured: 'main', 'PR #785', another branch, or flybench's own run."""
    pr = rows["pr"] if "pr" in rows else pd.Series(None, index=rows.index)
    context = rows["run_context"] if "run_context" in rows else pd.Series(None, index=rows.index)
    return pd.Series([f"PR #{int(p)}" if c == "pr" and pd.notna(p) else (c if isinstance(c, str) else "flybench run")
                      for c, p in zip(context, pr)], index=rows.index, dtype=object)


def step_marks(steps: pd.DataFrame, rows: pd.DataFrame, benchmark: str, subject: str) -> pd.DataFrame:
    """The detected steps of the drawn series: their panel, line, first bad commit's message, author and run,
    a link to the series' alert and the bisect command."""
    labels = rows.drop_duplicates(SERIES)[[*SERIES, "panel", "series", "provenance"]]
    marked = steps.merge(labels, on=SERIES)
    about = commits.annotate(marked[["first_bad"]].rename(columns={"first_bad": "commit_hash"}).assign(subject=subject),
                             data.load("commit_titles"))
    marked["message"], marked["author"] = about["message"].to_numpy(), about["author"].to_numpy()
    runs = rows.drop_duplicates("commit_hash").set_index("commit_hash")["run"]
    marked["run"] = marked["first_bad"].map(runs).fillna("")
    marked["first_bad_order"] = marked["first_bad"].map(rows.drop_duplicates("commit_hash")
                                                        .set_index("commit_hash")["order"])
    marked["tag"] = [(f"{a} (attributed), seen at {c[:8]}"[:48] if a else f"{c[:8]} {m}".strip()[:48])
                     + ("" if s == "open alert" else f" · {s.split()[0]}")
                     for a, c, m, s in zip(marked["attributed"], marked["first_bad"], marked["message"],
                                           marked["state"])]
    # one label per panel and commit (the lines of a panel often step together), stacked down the panel in commit
    # order so that labels of neighbouring steps do not draw over each other
    marked = marked.sort_values(["panel", "first_bad_order"], kind="stable").reset_index(drop=True)
    marked.loc[marked.duplicated(["panel", "first_bad_order", "tag"]), "tag"] = ""
    labelled = marked["tag"] != ""
    marked["tag_y"] = 8.0
    marked.loc[labelled, "tag_y"] = 8.0 + 13.0 * (marked[labelled].groupby("panel").cumcount() % 8)
    marked["closed"] = marked["state"] != "open alert"
    # the alert's pull request as the CLI names it; the range's newest commit only where the scan names none
    marked["what"] = [f"{s}: {frames.step_text(r)}" for s, r in zip(marked["series"], marked.itertuples())]
    names = [series_name(benchmark, list(frames.params_dict(p).values())) for p in marked["params"]]
    marked["alert"] = [ui.alert_link(subject, m, n, st.query_params.get("runs"))
                       for m, n in zip(marked["machine"], names)]
    marked["bisect"] = [f"flybench bisect {shlex.quote(n)} {g[:8]} {b[:8]}" for n, g, b in
                        zip(names, marked["last_good"], marked["first_bad"])]
    return marked


main()
