"""Compare: two commits on one machine, or two machines at their newest results, side by side.

The verdicts are `flybench compare`'s own (Mann-Whitney U on the samples,
99% intervals where samples are too few, relative and absolute thresholds,
matching measurement contracts), so the page and the pull-request check agree.
Two machines are compared the same way, except that the contract fields a
machine cannot share (device, arch, clocks) are not required to match.
Both open on a pair that has cases in common: the newest commit against the
nearest one sharing the most of its cases, the two machines sharing the most.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, commits, data, filters, frames, ui
from flybench.benchmark_names import is_compile_duration
from flybench.regress import load_config
from flybench.regress.report import literal_markdown, summary_line

COLUMNS = ["verdict", "benchmark", "parameters", "base_text", "head_text", "change", "evidence", "base", "head", "unit",
           "history"]
MODES = ("two commits", "two machines")
SCOPED = ("workload", "provider", "dtype", "case")
# Between machines nothing broke or got fixed: a case fails on one of them.
MACHINE_VERDICTS = {"broken": "fails on head only", "fixed": "fails on base only"}


def main() -> None:
    st.title("Compare")
    data.require_data()
    facets, rule = data.facets()
    filters.known("Compare", "mode", MODES)
    mode = st.radio("Compare", MODES, horizontal=True, key="mode", bind="query-params")
    repo = filters.pick_one("Subject (repository)", "repo", subjects(facets), sidebar=False)
    mine = facets[facets["subject"] == repo]
    allowed = filters.scope(mine, SCOPED)
    if mode == "two machines":
        cases = two_machines(repo, mine, rule)
    else:
        cases = two_commits(repo, mine, allowed, rule)
    if cases is not None:
        show(filters.within(cases, allowed, SCOPED), repo)


def subjects(facets: pd.DataFrame) -> list[str]:
    """Subjects, the one measured on the most architectures first (the default)."""
    counts = facets.groupby("subject").agg(archs=("arch", "nunique"), machines=("machine", "nunique"))
    return list(counts.sort_values(["archs", "machines"], ascending=False, kind="stable").index)


def two_commits(repo: str, mine: pd.DataFrame, allowed: pd.DataFrame, rule: set[str] | None) -> pd.DataFrame | None:
    """Pick a machine and two of its commits; the comparison `flybench compare BASE HEAD` would print."""
    machine = filters.pick_one("Machine", "machine_a", judged_first(mine), sidebar=False)
    listed = data.load("commits", machine=machine, subject=repo)
    if rule is not None:  # the imported-runs rule: a commit stays if one of the chosen runs measured it
        listed = listed[[not c.size or bool(set(c) & rule) for c in map(pd.Series, listed["run_contexts"])]]
    if len(listed) < 2:
        st.info(f"{literal_markdown(machine)} has results for fewer than two commits of {literal_markdown(repo)} in "
                "these runs; nothing to compare.")
        return None
    full = {h[:8]: h for h in listed["hash"]}  # short hashes in the URL, as in the reports
    shorts = list(full)
    described = commits.annotate(listed.rename(columns={"hash": "commit_hash"}).assign(subject=repo),
                                 data.load("commit_titles"))
    about = {r.short: commit_text(r) for r in described.itertuples()}
    left, right = st.columns(2)
    with right:
        head = filters.pick_one("Head commit", "head", shorts, default=default_head(machine, repo, full), sidebar=False,
                                format_func=lambda s: about.get(s, s))
    with left:
        base = filters.pick_one("Base commit", "base", shorts, default=default_base(machine, repo, full, head),
                                sidebar=False, format_func=lambda s: about.get(s, s))
    for side, short in (("Base", base), ("Head", head)):
        st.caption(f"{side} {literal_markdown(about.get(short, short))}")  # a commit message is data
    if base == head:
        st.info("Base and head are the same commit: pick two different ones.")
        return None
    comparison = data.load("compare", machine=machine, base=full[base], head=full[head], subject=repo)
    rows = analysis.case_rows(comparison.cases)
    kept = filters.within(rows, allowed, SCOPED).index
    shown = replace(comparison, cases=[comparison.cases[i] for i in kept])
    st.markdown(f"**{literal_markdown(summary_line(shown))}**" + ("" if len(kept) == len(rows) else
                                                  f" (of {len(rows)} cases, {len(kept)} in this selection)"))
    changes = analysis.resource_rows(comparison)
    if not changes.empty:
        st.subheader("Resource changes (exact)")
        ui.table(changes, "compare-resources")
    return marked(rows, mine, machine, machine)


def commit_text(r: Any) -> str:
    """'4a895cf5 · 2026-07-01 12:00 · main · the message': a commit as a reader picks it, the hash first."""
    runs = ", ".join(r.run_contexts) if len(r.run_contexts) else "flybench run"
    date = f"{r.date:%Y-%m-%d %H:%M}" if pd.notna(r.date) else "no date"
    return f"{r.short} · {date} · {runs} · {r.message or 'no message recorded'}"


def judged_first(mine: pd.DataFrame) -> list[str]:
    """The subject's machines, the default first: one with a judged timing or rate (a compile's duration is
    never judged, and a compile-only machine has no timing), then the most commits measured."""
    deterministic = load_config().deterministic_units
    judged = ~mine["benchmark"].map(is_compile_duration).astype(bool) & \
        ~mine["unit"].fillna("").str.lower().isin(deterministic)
    ranked = mine.assign(judged=judged).groupby("machine").agg(judged=("judged", "any"), commits=("commits", "sum"))
    return list(ranked.sort_values(["judged", "commits"], ascending=False, kind="stable").index)


HEADS_TRIED = 20  # commits, newest first, tried as the default head until one shares cases with an older one


def default_head(machine: str, repo: str, full: dict[str, str]) -> str:
    """The newest commit that shares measured cases with an older one on the machine: the newest pair with
    cases in common (the newest commit alone can have none, as a run of one provider on new cases)."""
    shorts = list(full)
    for short in reversed(shorts[-HEADS_TRIED:]):
        if default_base(machine, repo, full, short) is not None:
            return short
    return shorts[-1]


def default_base(machine: str, repo: str, full: dict[str, str], head: str) -> str | None:
    """The newest commit before `head` that shares the most measured cases with it."""
    shared = data.load("shared_cases", machine=machine, head=full[head], subject=repo)
    order = {h: i for i, h in enumerate(full.values())}
    older = shared[shared["commit_hash"].map(order).lt(order[full[head]]) & shared["shared"].gt(0)]
    if older.empty:
        return None
    best = older.assign(at=older["commit_hash"].map(order)).sort_values(["shared", "at"]).iloc[-1]
    return str(best["commit_hash"])[:8]


def two_machines(repo: str, mine: pd.DataFrame, rule: set[str] | None) -> pd.DataFrame | None:
    """Two machines' newest results case by case (gfx942 against gfx950 on FlyDSL CI's imported runs)."""
    machines = sorted(mine["machine"].unique())
    if len(machines) < 2:
        st.info(f"{literal_markdown(repo)} has results on one machine only ({literal_markdown(', '.join(machines))}); "
                "nothing to compare it with yet.")
        return None
    first, second = default_pair(mine)
    left, right = st.columns(2)
    with left:
        base = filters.pick_one("Base machine", "machine_a", machines, default=first, sidebar=False)
    with right:
        head = filters.pick_one("Head machine", "machine_b", [m for m in machines if m != base], default=second,
                                sidebar=False)
    sides = [filters.in_runs(data.load("latest_results", machine=m, subject=repo), rule) for m in (base, head)]
    noise = [data.load("history_noise", machine=m, subject=repo) for m in (base, head)]
    cases = analysis.case_rows(analysis.machine_comparison(*sides, noise))
    cases["verdict"] = cases["verdict"].replace(MACHINE_VERDICTS)
    counts = cases["verdict"].value_counts()
    said = ", ".join(f"{n} {v}" for v, n in counts.items())
    st.markdown(f"**{literal_markdown(base)} → {literal_markdown(head)}: {said}** "
                "(newest result of each case on each machine)")
    return marked(cases, mine, base, head)


def default_pair(mine: pd.DataFrame) -> tuple[str, str]:
    """The two machines with the most cases in common, the lower architecture as the base."""
    cases = {m: set(zip(g["benchmark"], g["case"], g["provider"], g["dtype"])) for m, g in mine.groupby("machine")}
    arch = dict(zip(mine["machine"], mine["arch"].fillna("")))
    pair = max(combinations(sorted(cases), 2), key=lambda p: len(cases[p[0]] & cases[p[1]]))
    return tuple(sorted(pair, key=lambda m: (arch[m], m)))  # type: ignore[return-value]


def marked(cases: pd.DataFrame, mine: pd.DataFrame, base: str, head: str) -> pd.DataFrame:
    """Each side's text marked † where that machine's rows were imported; the provenance column says by whom."""
    source = mine.groupby("machine")["provenance"].first()
    out = cases.copy()
    out["base_text"] = [frames.mark(t, source.get(base, frames.FLYBENCH)) for t in out["base_text"]]
    out["head_text"] = [frames.mark(t, source.get(head, frames.FLYBENCH)) for t in out["head_text"]]
    out["provenance"] = " / ".join(dict.fromkeys(source.get(m, frames.FLYBENCH) for m in (base, head)))
    out["unit"] = out["unit"].map(frames.unit_label)
    return out


def show(cases: pd.DataFrame, repo: str) -> None:
    """Bars of the relative change per case, then the table with both values side by side."""
    if cases.empty:
        ui.no_rows("cases measured on both sides")
        return
    cases = cases.assign(history=[ui.history_link(repo, b, p) for b, p in zip(cases["benchmark"], cases["case_params"])])
    st.subheader("Change per case (head against base)")
    ui.chart(data.chart_spec(charts.change_bars, frame=cases, title="head vs base"), cases, "compare-cases", COLUMNS)
    st.subheader("All cases")
    ui.table(cases, "compare-table", COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "base", "head_text": "head",
        "history": st.column_config.LinkColumn("history", display_text="open")})
    ui.provenance_note(pd.DataFrame({"provenance": cases["provenance"].iloc[0].split(" / ")}))

main()
