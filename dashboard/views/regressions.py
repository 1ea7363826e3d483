"""Regressions: the alerts of the stored history, with commit range, size, state and evidence.

The list is `flybench regressions`' own (the replayed history scan, its
thresholds from flybench.toml, the acceptances of `flybench accept`), read
from what `flybench ingest` stored (`flybench.regress.stored`), so the page,
the nightly alert and the terminal agree and a first render is a read. Timing steps and
changes of deterministic metrics (registers, LDS bytes, spills) are listed
apart: a resource change is exact, ranked by how directly it costs speed
(spills and occupancy first), and only the worse ones unless asked. A
compile's duration is noise of the machine that compiled, not a property of
the kernel: its steps are counted apart and never listed. The imported-runs
rule applies to where the first bad commit was measured.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, data, filters, frames, ui
from dashboard import machine_code as code
from flybench.benchmark_names import is_compile_duration, series_name
from flybench.errors import FlybenchError
from flybench.regress import accepted, load_config
from flybench.regress.episodes import ENVIRONMENT
from flybench.regress.report import literal_markdown

COLUMNS = ["machine", "benchmark", "parameters", "commits", "base_text", "head_text", "change", "state", "modes",
           "machine_code", "code_diff", "evidence", "run", "history", "subject", "kind", "unit"]
ENVIRONMENT_COLUMNS = [*COLUMNS[:7], "since", *COLUMNS[7:]]
RESOURCE_COLUMNS = ["subject", "machine", "kernel", "metric_label", "arch", "base_text", "head_text", "delta", "change",
                    "commits", "verdict", "state", "evidence", "resources", "benchmark", "unit"]


def main() -> None:
    st.title("Regressions")
    st.caption("Alerts: steps the history scan found, replaying every commit of each machine in order, judged "
               "against each series' own scatter, net of the runner's per-job shifts, and attributed to code by "
               "what each commit range changed (docs/alerts.md); each says its evidence. Accepted levels "
               "(`flybench accept`, kept beside the database) close their alert here as in `flybench regressions`, "
               "on every page and in every count. "
               "Every change of a deterministic metric is exact.")
    data.require_data(resources=True)
    facets, rule = data.facets()
    allowed = filters.scope(facets, ("subject", "arch", "machine", "workload"))
    closed = st.toggle("Also list alerts that recovered or were accepted", key="closed", bind="query-params")
    # stored by the last ingest; a flybench.toml edit (part of the key) is answered afresh until the next one
    levels = data.acceptances()
    found = data.load("regressions", config=load_config(), accepted=levels, closed=closed) \
        + data.load("counter_changes")
    rows = filters.within(analysis.regression_rows(found), allowed, ("subject", "machine", "workload"))
    source = facets.groupby("machine")["provenance"].first()
    rows = rows.assign(provenance=rows["machine"].map(source).fillna(frames.FLYBENCH))
    rows["run_context"] = rows["run"].where(frames.imported(rows))  # flybench's own steps have no run context
    rows = filters.in_runs(rows, rule)
    durations = rows["benchmark"].map(is_compile_duration).astype(bool)
    rows = rows[~durations]
    rows = one_series(rows)
    for column in ("base_text", "head_text", "label"):
        rows[column] = [frames.mark(t, p) for t, p in zip(rows[column], rows["provenance"])]
    arch_of = facets.dropna(subset=["arch"]).groupby("machine")["arch"].first()
    found = data.memo("alert-code", code_columns, rows=rows[rows["kind"] != "change"], arch_of=arch_of)
    for column in ("machine_code", "code_diff"):
        rows[column] = found[column].reindex(rows.index, fill_value="")
    flipping = pd.concat([data.load("series_modes", machine=m, subject=s) for m, s in
                          allowed[["machine", "subject"]].drop_duplicates().itertuples(index=False)]
                         or [pd.DataFrame(columns=analysis.MODE_COLUMNS)], ignore_index=True)
    rows["modes"] = data.memo("alert-modes", mode_notes, rows=rows, flipping=flipping)
    steps(rows[rows["kind"] == "step"])
    accept_control(rows[(rows["kind"] == "step") & (rows["state"] == "open alert")])
    accepted_levels(levels, allowed)
    environment_steps(rows[rows["kind"] == ENVIRONMENT])
    for kind, apart in rows[~rows["kind"].isin(["step", ENVIRONMENT, "change"])].groupby("kind", sort=True):
        other_steps(str(kind), apart)
    resource_changes(rows[rows["kind"] == "change"])
    multimodal(flipping)
    if durations.any():
        st.caption(f"Not listed: {int(durations.sum())} steps in compile durations (how long a compile took on "
                   "its machine is noise of that machine, not a kernel regression; see Kernel resources).")
    ui.provenance_note(rows)
    data.committed_note(set(rows["machine"]))


# What decided a step on a series that flips, as the scan's evidence says it (`scan._confirmed`), in that order (a
# string here would be drawn on the page: Streamlit's magic writes a page module's bare strings).
DECIDED = [("on a series that flips between runner modes", "neither the job's shift nor a paired A/B separated code "
                                                            "from runner: unconfirmed"),
           ("the compiler change emitted identical machine code", "the compiler change's identical machine code "
                                                                  "elsewhere, and no paired A/B: unconfirmed"),
           ("confirmed by the paired A/B", "the paired A/B, which separated code from runner"),
           ("confirmed by the job's shift", "the job's shift, which separated code from runner")]


def mode_notes(rows: pd.DataFrame, flipping: pd.DataFrame) -> pd.Series:
    """Per step on a series that flips between runner modes (`flybench.regress.modes`): its modes, and which
    evidence decided the step, read from the evidence the scan wrote; empty for every other step."""
    levels = {}
    for key, mine in flipping.groupby(["machine", "env_name", "benchmark", "params"], sort=False):
        levels[key[:3] + (json.dumps(json.loads(key[3]), sort_keys=True),)] = (
            f"flips between {len(mine)} modes on {key[0]} ("
            + ", ".join(f"{level:.4g}" for level in mine["level"]) + ")")
    notes = []
    for r in rows.itertuples():
        said = levels.get((r.machine, r.env_name, r.benchmark, json.dumps(r.params, sort_keys=True)))
        if said is None or r.kind == "change":
            notes.append("")
            continue
        how = next((text for clue, text in DECIDED if clue in r.evidence),
                   "its machine code, not its modes" if "(machine code)" in r.evidence.split(":", 1)[0] else
                   "the files: the range changed nothing it runs" if r.kind == ENVIRONMENT else
                   "the files, with no runner flip as large as the step in the runs before it")
        notes.append(f"{said}; decided by {how}")
    return pd.Series(notes, index=rows.index, dtype=object)


def multimodal(flipping: pd.DataFrame) -> None:
    """Which series flip between runner modes, on which runner, at which levels."""
    if flipping.empty:
        return
    series = flipping.groupby(["machine", "env_name", "benchmark", "params"], sort=False)
    st.subheader(f"{series.ngroups} series flip between runner modes")
    st.caption("Series whose values keep going back to two or more levels a step apart (flybench.regress.modes: "
               "the history scan's bimodal rule over the runs a scan keeps). A step back to a mode is the runner's; "
               "a files-only step on such a series is an alert only where the job's shift or a paired A/B "
               "separates code from runner (the `modes` column above says which decided).")
    table = series.agg(modes=("modes", "first"), levels=("level", lambda x: ", ".join(f"{v:.4g}" for v in x)),
                       runs=("runs", lambda x: ", ".join(map(str, x)))).reset_index()
    table["parameters"] = [", ".join(map(str, json.loads(p).values())) for p in table["params"]]
    ui.table(table, "multimodal", ["machine", "benchmark", "parameters", "modes", "levels", "runs"])


def code_columns(rows: pd.DataFrame, arch_of: pd.Series) -> pd.DataFrame:
    """Per step, what the machine code of its series' kernels did over its range on its own runner's
    architecture (`machine_code`: which changed, or identical, or why it cannot say) and a link to the change
    (`code_diff`: the instruction counts and resources at the two commits, on Kernel resources)."""
    out = pd.DataFrame({"machine_code": "", "code_diff": ""}, index=rows.index)
    if rows.empty:
        return out
    records = data.load("machine_code")
    for subject in rows["subject"].unique():
        kernels = data.load("series_kernels", subject=subject)
        if kernels.empty:
            continue
        runs = {(b, json.dumps(json.loads(p), sort_keys=True), a): k for b, p, k, a in
                kernels[["benchmark", "params", "kernel", "arch"]].itertuples(index=False)}
        of_series: dict[tuple, list[str]] = {}
        for (b, p, a), k in runs.items():
            of_series.setdefault((b, p, a), []).append(k)
        mine = rows[rows["subject"] == subject]
        for index, r in zip(mine.index, mine.itertuples()):
            arch = arch_of.get(r.machine)
            names = sorted(of_series.get((r.benchmark, json.dumps(r.params, sort_keys=True), arch), []))
            if not names:
                out.loc[index, "machine_code"] = f"no registered kernel on {arch}" if arch else ""
                continue
            pairs = code.pairs(records[records["subject"] == subject], r.last_good, r.first_bad, arch, names)
            changed = list(pairs.loc[pairs["verdict"] == "changed", "kernel"])
            same = int((pairs["verdict"] == "identical").sum())
            if changed:
                said = f"changed on {arch}: {', '.join(changed)}" + (f"; {same} identical" if same else "")
            elif same:
                said = f"identical on {arch} ({same} kernel{'s' if same != 1 else ''})"
            else:
                said = f"none stored at both {r.last_good[:8]} and {r.first_bad[:8]} on {arch}"
            out.loc[index, "machine_code"] = said
            if changed or same:
                out.loc[index, "code_diff"] = ui.code_change_link((changed or names)[0], arch, r.last_good,
                                                                  r.first_bad, names) + "#machine-code"
    return out


def accept_control(open_alerts: pd.DataFrame) -> None:
    """Accept an open alert's new level with a reason, written where `flybench accept` writes it (the store's
    acceptances file, through flybench.regress.accepted): the alert closes on every page and in `flybench
    regressions`. The store itself stays read-only."""
    if done := st.session_state.pop("accept-done", None):
        st.success(literal_markdown(done))
    if open_alerts.empty:
        return
    labels = {index: f"{r.machine}: {series_name(r.benchmark, list(r.params.values()))} at {r.commits}"
              for index, r in zip(open_alerts.index, open_alerts.itertuples())}
    with st.expander("Accept an open alert's new level"):
        with st.form("accept-form", clear_on_submit=True):
            chosen = st.selectbox("Alert", list(labels), format_func=labels.get, key="accept-alert")
            reason = st.text_input("Reason (kept with the acceptance)", key="accept-reason",
                                   placeholder="an intended trade-off, a new baseline")
            submitted = st.form_submit_button("Accept this level")
        if submitted:
            r = open_alerts.loc[chosen]
            if not reason.strip():
                st.error("Say why the new level is accepted: the reason is kept with it.")
                return
            entry = accepted.Acceptance(r["subject"], r["machine"], r["benchmark"], r["params"], r["first_bad"],
                                        reason.strip(), accepted.now())
            try:
                accepted.add(accepted.beside(data.db_path()), entry)
            except FlybenchError as exc:
                st.error(literal_markdown(str(exc)))
                return
            st.session_state["accept-done"] = f"Accepted {labels[chosen]}: {reason.strip()}"
            st.rerun()
    st.caption(f"Written to {literal_markdown(str(accepted.beside(data.db_path())))}, where `flybench accept --db` "
               "writes; commit it with the results.")


def accepted_levels(levels: list[accepted.Acceptance], allowed: pd.DataFrame) -> None:
    """The accepted levels that apply here, with the reason each was given: why an alert is no longer open; each
    can be taken back (un-accepted) from its own file, as `flybench accept --undo` does."""
    shown = [a for a in levels if a.machine in set(allowed["machine"])]
    if done := st.session_state.pop("unaccept-done", None):
        st.success(literal_markdown(done))
    if not shown:
        return
    st.subheader(f"{len(shown)} accepted level{'s' if len(shown) != 1 else ''}")
    st.caption("Each closes its series' alerts up to the accepted commit, on every page and in every count "
               "(`flybench accept`, or accepted here); the reason is the one given then.")
    names = [f"{a.machine}: {series_name(a.benchmark, list(a.params.values()))} at {a.commit[:8]}" for a in shown]
    ui.table(pd.DataFrame([{"series": series_name(a.benchmark, list(a.params.values())), "machine": a.machine,
                            "subject": a.subject, "commit": a.commit[:8], "reason": a.reason,
                            "accepted_at": a.accepted_at} for a in shown]), "accepted-levels")
    with st.expander("Un-accept a level"):
        with st.form("unaccept-form"):
            chosen = st.selectbox("Accepted level", range(len(shown)), format_func=names.__getitem__,
                                  key="unaccept-level")
            submitted = st.form_submit_button("Un-accept: open its alert again")
        if submitted:
            try:
                removed = accepted.remove(accepted.beside(data.db_path()), shown[chosen])
            except FlybenchError as exc:
                st.error(literal_markdown(str(exc)))
                return
            if not removed:
                st.error(f"{literal_markdown(names[chosen])} is not in this store's acceptances file (it comes "
                         "from the old results/accepted.json of the folder the dashboard started in): edit or "
                         "delete that file.")
                return
            st.session_state["unaccept-done"] = f"Un-accepted {names[chosen]}: its alert is open again."
            st.rerun()


def one_series(rows: pd.DataFrame) -> pd.DataFrame:
    """The alert of one series when the link asks for it (`?series=`, as History's steps link here)."""
    wanted = st.query_params.get("series")
    if not wanted:
        return rows
    names = [series_name(b, list(p.values())) for b, p in zip(rows["benchmark"], rows["params"])]
    st.info(f"The alert of {literal_markdown(wanted)} only; remove `series` from the address to list them all.")
    return rows[pd.Series([n == wanted for n in names], index=rows.index, dtype=bool)]  # [] would drop the columns


def steps(rows: pd.DataFrame) -> None:
    """The statistical steps of timed series (and rates), biggest first, each linking to its case's History."""
    st.header("Timings and rates", divider="gray")
    if rows.empty:
        st.success("No open regression for this selection.")
        return
    rows = rows.assign(history=ui.history_links(rows))
    open_ = int((rows["state"] == "open alert").sum())
    st.subheader(f"{open_} open alert{'s' if open_ != 1 else ''}"
                 + (f", {len(rows) - open_} recovered or accepted" if len(rows) > open_ else ""))
    ui.chart(data.chart_spec(charts.change_bars, frame=rows, title="change (first bad vs last good)"), rows,
             "regressions-chart", COLUMNS)
    ui.table(rows, "regressions", COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "before", "head_text": "after", "commits": "last good..first bad",
        "run": "first bad measured in", "history": st.column_config.LinkColumn("history", display_text="open"),
        "machine_code": "machine code (own architecture)",
        "code_diff": st.column_config.LinkColumn("code change", display_text="open")})
    evidence_in_full(rows)


def evidence_in_full(rows: pd.DataFrame) -> None:
    """Each alert's evidence whole, wrapped: a table cell cuts a long one off at any width."""
    with st.expander("Evidence in full", expanded=st.query_params.get("series") is not None):
        for r in rows.itertuples():
            st.markdown(f"**{literal_markdown(r.label)}** ({r.commits}, {r.state}): {literal_markdown(r.evidence)}"
                        + (f" Machine code: {literal_markdown(r.machine_code)}." if r.machine_code else "")
                        + (f" The series {literal_markdown(r.modes)}." if r.modes else ""))


def environment_steps(rows: pd.DataFrame) -> None:
    """Steps that moved with the machine: listed apart, never counted as regressions (flybench.regress.episodes)."""
    if rows.empty:
        return
    st.subheader(f"{len(rows)} step{'s' if len(rows) != 1 else ''} the environment made (not regressions)")
    st.caption("Steps whose commit range changed nothing the series runs: none of its commits touched the files it "
               "runs or the compiler, or, where the store holds the kernels' machine code, that code is identical "
               "at both ends (the evidence says which). A runner, driver or machine episode, not a kernel change: "
               "never an alert (docs/alerts.md). `since`: whether the series' newest value is back at its level "
               "before the step.")
    rows = rows.assign(history=ui.history_links(rows), since=since_step(rows))
    ui.table(rows, "environment-steps", ENVIRONMENT_COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "before", "head_text": "after", "commits": "last good..first bad",
        "history": st.column_config.LinkColumn("history", display_text="open")})


def other_steps(kind: str, rows: pd.DataFrame) -> None:
    """Steps the scan keeps apart under a kind of their own (such as steps over a C++ range no machine code
    holds): listed with their evidence, never counted as alerts."""
    st.subheader(f"{len(rows)} {kind} step{'s' if len(rows) != 1 else ''} "
                 f"(not {'alerts' if len(rows) != 1 else 'an alert'})")
    st.caption(f"Steps the history scan classed as {literal_markdown(kind)}: not an alert and not in `flybench "
               "regressions`' exit status; the evidence says what is missing to decide (docs/alerts.md).")
    ui.table(rows.assign(history=ui.history_links(rows)), f"{kind}-steps", COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "before", "head_text": "after", "commits": "last good..first bad",
        "machine_code": "machine code (own architecture)",
        "code_diff": st.column_config.LinkColumn("code change", display_text="open"),
        "history": st.column_config.LinkColumn("history", display_text="open")})


def since_step(rows: pd.DataFrame) -> list[str]:
    """For each step, whether its series came back: 'recovered (now X)' where its newest value lies nearer the
    level before the step than after it, 'still at the new level (now X)' otherwise, '' where none is stored."""
    own = data.load("latest_cases")
    imported = data.load("imported_runs", context="main")
    key = ["machine", "env_name", "benchmark", "params"]
    newest = pd.concat([own[[*key, "value", "status"]],
                        imported.sort_values("job_time", kind="stable").drop_duplicates(key, keep="last")[
                            [*key, "value", "status"]] if not imported.empty else own.iloc[:0][[*key, "value",
                                                                                                "status"]]])
    now = {(m, e, b, json.dumps(json.loads(p))): v for m, e, b, p, v, status in newest.itertuples(index=False)
           if status == "ok" and pd.notna(v)}
    out = []
    for r in rows.itertuples():
        value = now.get((r.machine, r.env_name, r.benchmark, json.dumps(r.params)))
        if value is None:
            out.append("")
            continue
        back = abs(value - r.before) < abs(value - r.after)
        out.append(f"{'recovered' if back else 'still at the new level'} (now {frames.fmt(value, r.unit)})")
    return out


def resource_changes(rows: pd.DataFrame) -> None:
    """Changes of deterministic metrics, exact and ranked by relevance; a table, since 0 -> 28 has no bar."""
    st.header("Resource changes (exact)", divider="gray")
    every = st.toggle("Also list resource changes that are not worse", key="all_changes", bind="query-params")
    shown = analysis.by_relevance(rows if every else rows[rows["worse"].astype(bool)])  # an empty object column
    # would index columns, not rows, and leave none
    if shown.empty:
        st.success("No resource got worse in this selection." if not every else "No resource changed.")
        return
    shown = shown.assign(
        kernel=[frames.kernel_name(b, p) for b, p in zip(shown["benchmark"], shown["params"])],
        metric_label=shown["metric"].map(frames.metric_label),
        arch=[p.get("arch", "") for p in shown["params"]],
        delta=[f"{a:+,g}" for a in shown["absolute"]])
    counted = ["counter" in p for p in shown["params"]]  # a hardware counter: its case's History, not a kernel's
    shown["resources"] = [ui.history_link(subj, b, frames.case_text({k: v for k, v in p.items() if k != "counter"}))
                          if c else ui.resources_link(k) for c, subj, b, p, k in
                          zip(counted, shown["subject"], shown["benchmark"], shown["params"], shown["kernel"])]
    worse = shown["worse"].astype(bool)
    undone = int((worse & (shown["state"] == "change, undone later")).sum())
    st.caption(f"{int(worse.sum())} worse ({int(worse.sum()) - undone} standing, each a regression as `flybench "
               f"regressions` counts it; {undone} undone by a later commit), ranked by how directly they cost "
               "speed: spills and scratch, "
               "then occupancy, then the VGPR, AGPR and LDS budgets that set it, then the rest; a metric leaving "
               "0 (the first spill) before any percentage.")
    ui.table(shown, "resource-changes", RESOURCE_COLUMNS, column_config={
        "metric_label": "metric", "base_text": "before", "head_text": "after",
        "change": st.column_config.NumberColumn("change", format="percent"), "commits": "last..first changed",
        "resources": st.column_config.LinkColumn("details", display_text="open",
                                                 help="a kernel's resources; a hardware counter's case History")})


main()
