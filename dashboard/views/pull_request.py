"""Pull request: one pull request's push, each case against its base on the same runner, with both verdicts.

A pull request's runs are an environment of their own, so Compare cannot set
them against main. Here each case of a push is held against the base its
source measured beside it in the same job (FlyDSL CI's `vs_main`: the main it
rebuilt on the runner right after the pull request), or else main's newest run
on that runner before the push. Two verdicts sit side by side: the source's own
(FlyDSL CI flags 3% below main) and flybench's, which holds the change against
the main series' own run-to-run noise on that runner. flybench's own pull
requests are judged by `flybench gate` in their CI job; its report is the pull
request's comment, not a row of the store.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, filters, frames, ui
from dashboard import machine_code as code
from flybench.regress import load_config

COLUMNS = ["arch", "machine", "label", "unit", "value", "base", "base_source", "change", "flybench",
           "source_regression", "vs_main", "commit_hash", "ci_run", "history"]
PUSH_COLUMNS = ["push", "commit_hash", "job_time", "runners", "cases", "slower", "faster", "flagged", "ci_runs"]
CALL_ORDER = {call: i for i, call in enumerate(frames.PR_CALLS)}


def main() -> None:
    st.title("Pull request")
    st.caption("Each case of one push of a pull request against its base on the same runner. Base: what the CI "
               "job measured beside it (FlyDSL CI rebuilds main in the same job), else main's newest run on that "
               "runner before the push. Two verdicts: the CI's own flag, and flybench's call against the main "
               "series' own noise.")
    data.require_data()
    rows = data.load("imported_runs", context="pr")
    by_code = data.load("code_by_pr")
    if rows.empty and by_code.empty:
        st.info("No pull-request runs in this store. `flybench import flydsl-ci HISTORY --flydsl-repo CLONE` "
                "brings FlyDSL's; flybench's own pull requests are judged by `flybench gate` in their CI job "
                "(docs/gate.md), whose report is the pull request's comment.")
        return
    rows = frames.provenance(rows)
    prs = rows.groupby("pr").agg(pushes=("commit_hash", "nunique"), last=("job_time", "max")).sort_values(
        "last", ascending=False)
    names = {str(int(pr)): f"#{int(pr)} ({r.pushes} push{'es' if r.pushes > 1 else ''}, last {r.last:%Y-%m-%d})"
             for pr, r in prs.iterrows()}
    for r in by_code.itertuples():  # merged pull requests the store holds machine code for, runs or not
        names.setdefault(str(r.pr), f"#{r.pr} (merged, no runs of its own)")
        names[str(r.pr)] += f" · machine code: {r.changed} of {r.compared} changed"
    pr = filters.pick_one("Pull request", "pr", list(names), format_func=names.get, sidebar=False)
    if int(pr) in set(prs.index.astype(int)):
        pushes_of(int(pr))
    code_changed(int(pr), by_code)


def code_changed(pr: int, by_code: pd.DataFrame) -> None:
    """Which kernels' machine code the pull request changed, on every target: its merge commit against the newest
    earlier main commit the store holds machine code for. A compiler-only pull request, whose files reach no
    kernel, shows here as what it did to the code."""
    row = by_code[by_code["pr"] == pr]
    st.subheader(f"Machine code #{pr} changed", anchor="machine-code")
    if row.empty:
        st.caption(f"The store holds no machine code at #{pr}'s merge commit and the main commit before it "
                   "(`python -m flybench.compile.code_history`, then `flybench ingest`; docs/compile-metrics.md).")
        return
    row = row.iloc[0]
    found = code.pull_request_code(data.load("machine_code"), data.load("merged_prs"), pr)
    base, head, within, pairs = found
    also = [f"#{n}" for n in within if n != pr]
    st.markdown(f"**{row.changed} of {row.compared}** kernel x target pairs compiled at both ends changed "
                f"({base[:8]} → {head[:8]}" + (f", a range that also merged {', '.join(also)}" if also else "")
                + ").")
    pairs["diff"] = [ui.code_change_link(k, a, base, head) if v == "changed" else ""
                     for k, a, v in zip(pairs["kernel"], pairs["arch"], pairs["verdict"])]
    ui.table(pairs, f"pr-{pr}-machine-code", [*code.PAIR_COLUMNS, "diff"], column_config={
        "base_code": "code at base", "head_code": "code at head",
        "diff": st.column_config.LinkColumn("diff", display_text="open")})
    st.caption("Each registered kernel on each target, as the FlyDSL of each commit emitted it "
               "(flybench.compile.code_history, no GPU): `changed` where the machine code differs, `identical` "
               "where it is the same, else why there is none at one end. `diff` opens the instruction counts and "
               "resources at both commits on Kernel resources.")


def pushes_of(pr: int) -> None:
    """The pull request's pushes, each case held against its base, with both verdicts."""
    cases = data.load("pull_request_cases", pr=int(pr), config=load_config())
    pushes = push_table(cases)
    hashes = list(pushes["commit_hash"])
    labels = dict(zip(hashes, pushes["push"]))
    by_prefix(hashes)
    chosen_hash = filters.pick_one("Push", "push", hashes, sidebar=False, format_func=labels.get,
                                   help="The pull request's commits, newest first; each was measured by its own CI "
                                        "job. The link names it by its hash (`?push=` takes a prefix of 7 or more).")
    push = labels[chosen_hash]
    st.subheader(f"Pushes of #{pr}")
    ui.table(pushes, f"pr-{pr}-pushes", PUSH_COLUMNS, column_config={
        "job_time": st.column_config.DatetimeColumn("CI job", format="YYYY-MM-DD HH:mm"),
        "flagged": st.column_config.NumberColumn("flagged by the CI (theirs)")})
    chosen = cases[cases["commit_hash"] == chosen_hash].copy()
    chosen["label"] = frames.imported_label(chosen)
    chosen["unit"] = chosen["unit"].map(frames.unit_label)  # FlyDSL CI's TFLOPS reads TFLOP/s, as on every page
    chosen["vs_main"] = chosen["vs_main"] / 100
    chosen["ci_run"] = [ui.ci_run_link(s, r) for s, r in zip(chosen["source"], chosen["source_run"])]
    chosen["history"] = ui.history_links(chosen)
    chosen = chosen.sort_values(["flybench", "change"], key=lambda c: c.map(CALL_ORDER) if c.name == "flybench" else c)
    slower = chosen[chosen["flybench"] == "slower"]
    st.subheader(f"{push}: {len(slower)} slower, {int((chosen['flybench'] == 'faster').sum())} faster, "
                 f"{len(chosen)} cases")
    st.caption("change: head against base, below 0 slower (times are inverted). flybench calls a change past the "
               "larger of the step floor and noise_k x the main series' run-to-run noise on that runner "
               "(flybench.toml [regress]); `source_regression` is the CI's own flag, `vs_main` its own figure.")
    ui.table(chosen, f"pr-{pr}-cases", COLUMNS, column_config={
        "change": st.column_config.NumberColumn("change", format="percent"),
        "vs_main": st.column_config.NumberColumn("vs main (CI's own)", format="percent"),
        "source_regression": st.column_config.CheckboxColumn("CI flag (theirs)"),
        "ci_run": st.column_config.LinkColumn("CI run", display_text="open"),
        "history": st.column_config.LinkColumn("history", display_text="open")})
    ui.provenance_note(chosen)


def by_prefix(hashes: list[str]) -> None:
    """A push named in the URL by a prefix of its hash (7 characters or more, as git abbreviates it; or the
    push's label, hash first) is named by its full hash from here on; anything else is left for the picker to
    say it matches nothing."""
    wanted = st.query_params.get("push")
    if wanted is None or "push" in st.session_state or wanted in hashes:
        return
    token = wanted.split()[0].lower() if wanted.split() else ""
    found = [h for h in hashes if len(token) >= 7 and h.startswith(token)]
    if len(found) == 1:
        st.query_params["push"] = found[0]


def push_table(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per push, newest first: its runners, cases, flybench's calls and the CI's own flags."""
    pushes = cases.groupby("commit_hash").agg(
        job_time=("job_time", "max"), runners=("machine", lambda m: ", ".join(sorted(set(m)))),
        cases=("value", "size"), slower=("flybench", lambda c: int((c == "slower").sum())),
        faster=("flybench", lambda c: int((c == "faster").sum())),
        flagged=("source_regression", lambda f: int(f.fillna(False).astype(bool).sum())),
        ci_runs=("source_run", lambda r: ", ".join(sorted(set(r.dropna().astype(str)))))).reset_index()
    pushes = pushes.sort_values("job_time", ascending=False).reset_index(drop=True)
    pushes["push"] = [f"{c[:8]} ({t:%Y-%m-%d %H:%M})" for c, t in zip(pushes["commit_hash"], pushes["job_time"])]
    return pushes


main()
