"""Compare: two commits on one machine, or two machines at their newest results, side by side.

The verdicts are `flybench compare`'s own (Mann-Whitney U on the samples,
99% intervals where samples are too few, relative and absolute thresholds,
matching measurement contracts), so the page and the pull-request check agree.
Two machines are compared the same way, except that the contract fields a
machine cannot share (device, arch, clocks) are not required to match.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, commits, data, filters, ui
from flybench.regress.report import summary_line

COLUMNS = ["verdict", "benchmark", "parameters", "base_text", "head_text", "change", "evidence", "base", "head", "unit"]
MODES = ("two commits", "two machines")
# Between machines nothing broke or got fixed: a case fails on one of them.
MACHINE_VERDICTS = {"broken": "fails on head only", "fixed": "fails on base only"}


def main() -> None:
    st.title("Compare")
    data.require_data()
    facets = data.load("facets")
    mode = st.radio("Compare", MODES, horizontal=True, key="mode", bind="query-params")
    repos = sorted(facets["subject"].unique())
    repo = filters.pick_one("Subject (repository)", "repo", repos, default="flybench", sidebar=False)
    mine = facets[facets["subject"] == repo]
    allowed = filters.scope(mine, ("workload", "provider", "dtype", "case"))
    machines = sorted(mine["machine"].unique())
    if mode == "two machines":
        cases = two_machines(repo, machines)
    else:
        cases = two_commits(repo, machines)
    if cases is not None:
        show(filters.within(cases, allowed, ("workload", "provider", "dtype", "case")))


def two_commits(repo: str, machines: list[str]) -> pd.DataFrame | None:
    """Pick a machine and two of its commits; the comparison `flybench compare BASE HEAD` would print."""
    machine = filters.pick_one("Machine", "machine_a", machines, sidebar=False)
    listed = data.load("commits", machine=machine, subject=repo)
    if len(listed) < 2:
        st.info(f"{machine} has results for one commit of {repo} only; nothing to compare it with yet.")
        return None
    full = {h[:8]: h for h in listed["hash"]}  # short hashes in the URL and the selectors, as in the reports
    shorts = list(full)
    left, right = st.columns(2)
    with left:
        base = filters.pick_one("Base commit", "base", shorts, default=shorts[-2], sidebar=False)
    with right:
        head = filters.pick_one("Head commit", "head", shorts, default=shorts[-1], sidebar=False)
    described = commits.annotate(listed.rename(columns={"hash": "commit_hash"}).assign(subject=repo))
    st.caption(" · ".join(f"{side} {r.short}: {r.date:%Y-%m-%d %H:%M} {r.message}".strip()
                          for side, short in (("base", base), ("head", head))
                          for r in described[described["short"] == short].itertuples()))
    comparison = data.load("compare", machine=machine, base=full[base], head=full[head], subject=repo)
    st.markdown(f"**{summary_line(comparison)}**")
    changes = analysis.resource_rows(comparison)
    if not changes.empty:
        st.subheader("Resource changes (exact)")
        ui.table(changes, "compare-resources")
    return analysis.case_rows(comparison.cases)


def two_machines(repo: str, machines: list[str]) -> pd.DataFrame | None:
    """Two machines' newest results case by case (for example gfx942 against gfx950)."""
    if len(machines) < 2:
        st.info(f"{repo} has results on one machine only ({', '.join(machines)}); nothing to compare it with yet.")
        return None
    left, right = st.columns(2)
    with left:
        base = filters.pick_one("Base machine", "machine_a", machines, sidebar=False)
    with right:
        head = filters.pick_one("Head machine", "machine_b", [m for m in machines if m != base], sidebar=False)
    sides = [data.load("latest_results", machine=m, subject=repo) for m in (base, head)]
    cases = analysis.case_rows(analysis.machine_comparison(*sides))
    cases["verdict"] = cases["verdict"].replace(MACHINE_VERDICTS)
    counts = cases["verdict"].value_counts()
    st.markdown(f"**{base} → {head}: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + "** "
                "(newest result of each case on each machine)")
    return cases


def show(cases: pd.DataFrame) -> None:
    """Bars of the relative change per case, then the table with both values side by side."""
    if cases.empty:
        ui.no_rows("cases measured on both sides")
        return
    st.subheader("Change per case (head against base)")
    ui.chart(charts.change_bars(cases, "head vs base"), cases, "compare-cases", COLUMNS)
    st.subheader("All cases")
    ui.table(cases, "compare-table", COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "base", "head_text": "head"})


main()
