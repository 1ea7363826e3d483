"""Kernel resources: one kernel at a time, each metric per architecture across commits, every change exact.

VGPRs, AGPRs, SGPRs, LDS, scratch, spills, occupancy come from compiling
without running (the compile_metrics table, and results of benchmarks whose
unit is deterministic: registers, bytes, waves), so every change is real and
a register or LDS regression shows here before any timing moves. How long
the compile took is not such a metric: it is the compiling machine's noise,
drawn in a section of its own and never listed as a change.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, commits, data, filters, frames, ui
from dashboard import machine_code as code
from flybench.benchmark_names import is_compile_duration
from flybench.regress import load_config
from flybench.regress.report import literal_markdown

COLUMNS = ["kernel_name", "arch", "metric_label", "value", "unit", "short", "commit_date", "message", "status", "why",
           "origin", "subject", "machine"]
CODE_STEP_COLUMNS = ["arch", "verdict", "base", "head", "pull_requests", "title", "base_code", "head_code", "diff"]
CHANGE_COLUMNS = ["arch", "metric", "commits", "base_text", "head_text", "delta", "change", "undone",
                  "first_bad_date", "message", "pr", "compiler", "failed_between", "failures", "author", "worse",
                  "history", "machine"]


def main() -> None:
    st.title("Kernel resources")
    data.require_data(resources=True)
    facets, _ = data.facets()  # the imported-runs rule shows here too; compile metrics are flybench's own
    rows = data.load("resources", units=sorted(load_config().deterministic_units))
    if rows.empty:
        st.info("No compile-time resource metrics in the database yet. They come from the compile-only suite "
                "(VGPRs, LDS, spills... per kernel and architecture, no GPU needed), ingested like any other "
                "results with `flybench ingest`.")
        return
    allowed = filters.scope(rows, ("subject", "arch", "machine"))
    kernel = filters.pick_one("Kernel", "kernel", frames.kernels_first(allowed), sidebar=False)
    if kernel is None:
        ui.no_rows("kernels")
        return
    shown = prepare(allowed[allowed["kernel_name"] == kernel])
    metrics = filters.pick_many("Metric", "metric", shown["metric_label"])
    shown = shown[shown["metric_label"].isin(metrics)]
    st.header(kernel, divider="gray")
    st.subheader("Newest value per architecture")
    newest = shown.sort_values("commit_date", kind="stable").groupby(["arch", "metric_label"]).tail(1)
    table = newest.pivot_table(index="arch", columns="metric_label", values="value", aggfunc="last")
    ui.table(table.map(lambda v: "" if pd.isna(v) else f"{v:,g}").reset_index(), "resources-newest")
    st.caption("A blank cell: the metric does not exist on that architecture (AGPRs on NVIDIA, say).")
    st.subheader("Across commits")
    failed = int((shown["status"] != "ok").sum())
    st.caption("A panel per metric, a step line per architecture (colour, dash and point shape apart, so identical "
               "values on two architectures stay visible); hover a point for its commit and message."
               + (f" ✕ on a panel's bottom edge: one of {failed} failed compiles, where the line breaks."
                  if failed else ""))
    ui.chart(data.chart_spec(charts.resource_lines, frame=shown), shown, "resources-history", COLUMNS, stretch=False)
    changes(shown)
    machine_code(kernel)
    durations(facets, kernel)


def prepare(rows: pd.DataFrame) -> pd.DataFrame:
    """One kernel's rows with metric labels as engineers read them, commit messages, reasons."""
    out = commits.annotate(frames.without_failed_values(rows), data.load("commit_titles"))
    out["arch"] = out["arch"].fillna("no architecture")
    out["metric_label"] = out["metric"].map(frames.metric_label)
    notes = data.load("commit_notes")
    told = dict(zip(zip(notes["subject"], notes["hash"]), notes["first_failure"])) if not notes.empty else {}
    reason = [r if isinstance(r, str) and r or s != "failed" else  # asv keeps no message: the commit notes' first
              (f"{told[(u, h)]} (the first failure at this commit)" if told.get((u, h)) else r)
              for s, r, u, h in zip(out["status"], out["reason"], out["subject"], out["commit_hash"])]
    out["why"] = [frames.reason_text(s, r) for s, r in zip(out["status"], reason)]
    return out


def changes(shown: pd.DataFrame) -> None:
    """Every change of the kernel's metrics between consecutive measured commits, with its exact delta."""
    found = data.memo("resource-changes", change_rows, shown=shown, notes=data.load("commit_notes"))
    if found.empty:
        st.caption("No metric of this kernel changed across the commits measured.")
        return
    st.subheader("Every change (exact)")
    by_commit = st.toggle("Order by commit (newest first) instead of by how directly it costs speed",
                          key="by_commit", bind="query-params")
    if by_commit:
        found = found.sort_values("first_bad_date", ascending=False, kind="stable")
    st.caption("`undone`: a later commit brought the metric back to its value before the change. `pr`: the first "
               "changed commit's pull request. `compiler`: the FlyDSL wheel and its LLVM on the two sides; "
               "\"changed\" means the compiler moved too, so the change need not be the kernel's code. "
               "`no value`: commits inside the range where this kernel has no value on that architecture (a "
               "line break on the chart): its compile failed, with the compiler's message as the commit notes "
               "record it (the first failure at that commit, without the compiling machine's folders), or it was "
               "not compiled there (unavailable), counted.")
    if found["compiler"].str.startswith("changed").any():
        st.caption(f"{int(found['compiler'].str.startswith('changed').sum())} of {len(found)} changes span a "
                   "change of compiler.")
    ui.table(found, "resources-changes", CHANGE_COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "base_text": "before", "head_text": "after", "commits": "last..first changed",
        "first_bad_date": st.column_config.DatetimeColumn("date", format="YYYY-MM-DD HH:mm"),
        "failed_between": st.column_config.NumberColumn("no value", format="%d"),
        "failures": "why",
        "history": st.column_config.LinkColumn("history", display_text="open")})


def change_rows(shown: pd.DataFrame, notes: pd.DataFrame) -> pd.DataFrame:
    """The kernel's changes as the table lists them (a pure function of its rows and the commits' notes)."""
    found = analysis.resource_changes(shown)
    if found.empty:
        return found
    found[["arch", "metric"]] = found["parameters"].str.split(", ", n=1, expand=True)
    found["metric"] = found["metric"].map(frames.metric_label)
    found["delta"] = [f"{a:+g}" for a in found["after"] - found["before"]]
    about = shown.drop_duplicates("commit_hash").set_index("commit_hash")
    found["first_bad_date"] = found["first_bad"].map(about["commit_date"])
    found["message"] = found["first_bad"].map(about["message"]).fillna("")
    found["author"] = found["first_bad"].map(about["author"]).fillna("")
    series = shown.drop_duplicates(["arch", "metric_label"]).set_index(["arch", "metric_label"])
    found["history"] = [history_link(series.loc[key]) for key in zip(found["arch"], found["metric"])]
    found["undone"] = frames.undone(found, shown)
    found = frames.change_context(found, shown, notes)
    return found


def machine_code(kernel: str) -> None:
    """The kernel's machine code: between the two commits a link names (`?base=&head=&code_arch=`, as an alert
    links here), each resource and instruction count at both ends; else every commit range over which its code
    changed on some target, each linking to that view."""
    records = data.load("machine_code")
    mine = records[records["kernel"] == kernel]
    if mine.empty:
        return
    st.subheader("Machine code", anchor="machine-code")
    base, head = (resolve(mine, st.query_params.get(k)) for k in ("base", "head"))
    if base and head:
        between(records, kernel, base, head, st.query_params.get("code_arch"))
        return
    steps = []
    for arch, rows in mine.groupby("arch", sort=True):
        rows = rows.dropna(subset=["position"]).sort_values("position")
        for before, after in zip(rows.itertuples(), rows.iloc[1:].itertuples()):
            said = code.verdict(before, after)
            if said != "identical" and not (before.status == after.status != "ok"):
                steps.append({"arch": arch, "verdict": said, "base": before.hash[:8], "head": after.hash[:8],
                              "pull_requests": prs_between(before.position, after.position),
                              "title": after.title, "base_code": str(before.code_hash)[:12] if before.status == "ok"
                              else before.status, "head_code": str(after.code_hash)[:12] if after.status == "ok"
                              else after.status,
                              "diff": ui.code_change_link(kernel, arch, before.hash, after.hash)})
    compiled = mine.dropna(subset=["position"])
    st.caption(f"Compiled at {compiled['hash'].nunique()} of main's commits (flybench.compile.code_history, no "
               "GPU): where the code a commit's FlyDSL emits for this kernel differs from the commit before, per "
               "target. `diff` opens the instruction counts and resources at both ends; the ISA text itself is "
               "not stored (the gate writes its unified diff, docs/gate.md).")
    if not steps:
        st.caption("Its machine code is identical at every compiled commit on every target.")
        return
    ui.table(pd.DataFrame(steps), "machine-code-steps", CODE_STEP_COLUMNS, column_config={
        "pull_requests": "pull requests in the range",
        "diff": st.column_config.LinkColumn("diff", display_text="open")})


def prs_between(low: float, high: float) -> str:
    """The pull requests merged on main after position `low` up to and including `high`."""
    merged = data.load("merged_prs")
    inside = [f"#{int(n)}" for n in merged.loc[(merged["position"] > low) & (merged["position"] <= high), "merged_pr"]]
    return ", ".join(inside) if len(inside) <= 6 else f"{', '.join(inside[:5])} and {len(inside) - 5} more"


def resolve(records: pd.DataFrame, given: str | None) -> str | None:
    """A commit a link names (a prefix of 7 or more), as the full hash of a record; None where none matches."""
    if not given:
        return None
    found = sorted({h for h in records["hash"] if len(given) >= 7 and h.startswith(given.lower())})
    if len(found) != 1:
        st.warning(f"Commit {literal_markdown(given)}: no machine code of this kernel is stored at it.")
        return None
    return found[0]


def between(records: pd.DataFrame, kernel: str, base: str, head: str, arch: str | None) -> None:
    """The kernel's (and the linked series' other kernels') machine code at two commits, on one target."""
    archs = sorted(set(records.loc[records["kernel"] == kernel, "arch"]))
    arch = arch if arch in archs else (archs[0] if len(archs) == 1 else None)
    kernels = [k for k in (st.query_params.get("kernels") or kernel).split(",") if k] or [kernel]
    where = f" on {arch}" if arch else ""
    st.markdown(f"**{base[:8]} → {head[:8]}{where}**: what each commit's FlyDSL emitted.")
    pairs = code.pairs(records, base, head, arch, sorted(set(kernels) | {kernel}))
    ui.table(pairs, "machine-code-pairs", code.PAIR_COLUMNS, column_config={
        "base_code": "code at base", "head_code": "code at head"})
    for target in ([arch] if arch else archs):
        found = code.diff(records, kernel, target, base, head)
        if found.empty:
            continue
        moved = int(found["delta"].fillna(0).ne(0).sum())
        st.markdown(f"{kernel} on {target}: {moved} of {len(found)} counts moved")
        found["metric"] = found["metric"].map(frames.metric_label)
        ui.table(found, f"machine-code-diff-{target}", code.DIFF_COLUMNS, column_config={
            "base": st.column_config.NumberColumn(f"at {base[:8]}", format="%g"),
            "head": st.column_config.NumberColumn(f"at {head[:8]}", format="%g"),
            "delta": st.column_config.NumberColumn("difference", format="%+g")})
    st.caption("Static counts of the code (instructions by class) and its resources, as the machine code record "
               "keeps them; remove `base` and `head` from the address to list every change of this kernel.")


def history_link(row: pd.Series) -> str:
    """The series' History page, where it is a benchmark's (the compile_metrics table's rows and the machine code
    history have none)."""
    return "" if row["origin"] in ("compile_metrics", code.ORIGIN) else ui.history_link(row["subject"], row["origin"],
                                                                          frames.case_text(row["params"]))


def durations(facets: pd.DataFrame, kernel: str) -> None:
    """How long the kernel took to compile, apart: machine noise, never a change or a regression."""
    names = sorted(b for b in facets["benchmark"].unique() if is_compile_duration(b))
    rows = data.memo("compile-durations", duration_rows, names=names, kernel=kernel) if names else pd.DataFrame()
    if rows.empty:
        return
    st.subheader("Compile duration (noise, not a resource)")
    st.caption("Wall time of the compile on the machine that compiled it: it varies with that machine's load, "
               "so it is never listed as a change or a regression.")
    rows = prepare(rows)
    ui.chart(data.chart_spec(charts.resource_lines, frame=rows), rows, "resources-durations", COLUMNS, stretch=False)


def duration_rows(names: list[str], kernel: str) -> pd.DataFrame:
    """The compile-duration rows of one kernel, from every duration benchmark (`names`), as resource rows."""
    rows = pd.concat([data.load("benchmark_history", benchmark=b) for b in names], ignore_index=True)
    rows = rows[rows["params"].map(lambda p: frames.params_dict(p).get("kernel")) == kernel]
    if rows.empty:
        return rows
    arch = rows["params"].map(lambda p: frames.params_dict(p).get("arch"))
    return rows.assign(kernel=kernel, metric="compile_time", origin=rows["benchmark"], arch=arch.fillna(rows["arch"]))


main()
