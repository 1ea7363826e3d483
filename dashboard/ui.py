"""Page furniture every view shares: tables with their download, charts with theirs, and the empty states.

Every chart comes with the rows behind it (sortable, downloadable as CSV),
so a number on the screen can always be traced to the row that produced it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from dashboard import charts
from dashboard.frames import FLYBENCH, case_text, imported, unit_label
from flybench.importers.flydsl_ci import SOURCE as FLYDSL_CI
from flybench.regress.report import literal_markdown

MISSING = "—"
"""What a table cell with no value reads, instead of the "None" Streamlit's grid would write."""
FILL_COMMANDS = """\
flybench run                 # measure on this machine through asv: results/flybench/<machine>/*.json
flybench ingest --db {db}    # load asv's results files into DuckDB (idempotent; rerun after each run)
flybench import flydsl-ci --db {db} HISTORY.json   # add FlyDSL CI's own history, marked as imported"""


def cannot_read(path: Path, problem: str) -> None:
    """A database that is missing, locked by a writer or of an older schema: say what to do about it."""
    if "locked" in problem:  # the holder's process and the server's paths are the operator's, not a visitor's
        st.warning("**The database is busy:** another program (an ingest, say) is writing to it. "
                   "Reload this page when it has finished.")
    else:
        fill_instructions(path, problem)


def fill_instructions(path: Path, problem: str) -> None:
    """What a fresh checkout shows: how to measure and ingest, instead of an error."""
    st.info(f"**Nothing to show yet.** {problem}")
    st.markdown("Measure on this machine and load the results into the database the dashboard reads:")
    st.code(FILL_COMMANDS.format(db=path), language="bash")
    st.caption("Then reload this page. The database is always rebuildable from asv's results files.")


def download(frame: pd.DataFrame, name: str) -> None:
    """A CSV of exactly these rows; built only when clicked, so large frames cost nothing per rerun."""
    st.download_button(f"Download these {len(frame)} rows (CSV)", lambda: frame.to_csv(index=False),
                       file_name=f"flybench-{name}.csv", mime="text/csv", key=f"download-{name}",
                       on_click="ignore", icon=":material/download:")


def table(frame: pd.DataFrame, name: str, columns: list[str] | None = None,
          column_config: dict[str, Any] | None = None) -> None:
    """A sortable table (of `columns`, if given) and a download of all its rows' columns."""
    shown, config = readable(frame[[c for c in columns if c in frame]] if columns else frame, column_config or {})
    st.dataframe(shown, hide_index=True, column_config=config, key=f"table-{name}")
    download(frame, name)


def readable(shown: pd.DataFrame, config: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The table with no cell Streamlit would draw as "None": a missing text is blank; a number or date column
    with a missing (or infinite) value becomes text, MISSING in those cells, its column's format kept in words.
    A `unit` column reads as the docs spell units (`frames.unit_label`).

    Streamlit's grid writes "None" into every null cell and offers no other text for it.
    """
    shown, config = shown.copy(), dict(config)
    if "unit" in shown and len(shown):  # one spelling per unit in every table (FlyDSL CI's TFLOPS is TFLOP/s)
        shown["unit"] = [unit_label(u) if isinstance(u, str) and u else u for u in shown["unit"]]
    for column in shown.columns:
        values = shown[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            numbers = pd.to_numeric(values, errors="coerce").astype(float)
            if np.isfinite(numbers).all():
                continue
            shown[column] = [_number_text(v, config.get(column)) for v in numbers]
        elif pd.api.types.is_datetime64_any_dtype(values):
            if values.notna().all():
                continue
            shown[column] = [f"{v:%Y-%m-%d %H:%M}" if pd.notna(v) else MISSING for v in values]
        else:
            if values.dtype == object or pd.api.types.is_string_dtype(values):
                shown[column] = values.astype(object).where(values.notna(), "")
            continue
        label = config.get(column)
        config[column] = (label.get("label") if isinstance(label, dict) else label) or column
    return shown, config


def _number_text(value: float, config: Any) -> str:
    """A number as its column's format would show it (percent, or a printf format such as '%.3f×'), else in
    full; MISSING where there is none."""
    if not np.isfinite(value):
        return MISSING
    form = config.get("type_config", {}).get("format") if isinstance(config, dict) else None
    if form == "percent":
        return f"{value:.1%}"
    return form % value if isinstance(form, str) and form.startswith("%") else str(value)


def chart(figure: alt.TopLevelMixin | charts.Spec | dict[str, Any], frame: pd.DataFrame, name: str,
          columns: list[str] | None = None, stretch: bool = True) -> None:
    """The chart (as wide as the page unless `stretch` is off), then the rows it was drawn from, folded away.
    `figure` may be a spec already (`charts.vega_spec`'s, as a page caches it)."""
    spec = dict(figure) if isinstance(figure, dict) else charts.vega_spec(figure)
    if stretch and "facet" not in spec:  # Streamlit's default ("fit") takes a legend's height out of the plot's
        spec["autosize"] = {"type": "fit-x", "contains": "padding"}
    st.vega_lite_chart(spec=spec, width="stretch" if stretch else "content", key=f"chart-{name}")
    with st.expander("Rows behind this chart"):
        table(frame, name, columns)


def roof_statement(points: pd.DataFrame) -> str:
    """'Roofs (one basis on every page): dev-h200: bf16 matrix (measured: ...), memory copy (...)': each machine's
    roofs that the fractions shown are of, as Overview and Roofline both state them."""
    placed = points[points["of_roof"].notna()] if "of_roof" in points else points.iloc[:0]
    if placed.empty:
        return "Roofs: no case here has both TFLOP/s and GB/s measured, so none has a fraction of a roof."
    bases = placed.groupby("machine")["roof_basis"].agg(lambda b: " | ".join(sorted(set(b))))
    return "Roofs (one basis on every page, whatever the filters): " + "; ".join(
        f"{literal_markdown(m)}: {literal_markdown(b)}" for m, b in bases.items())


def provenance_note(frame: pd.DataFrame) -> None:
    """Rows imported from another system (FlyDSL's CI) carry a mark and this sentence, never pass as ours."""
    if "provenance" in frame and imported(frame).any():
        sources = literal_markdown(", ".join(sorted(set(frame.loc[imported(frame), "provenance"]))))  # data
        st.caption(f"† Imported from {sources}: measured by that system with its own method, not by flybench. "
                   f"Rows measured by {FLYBENCH} carry no mark.")


def history_link(subject: str, benchmark: str, case: str) -> str:
    """The History page of one case, as a link every other page can put beside a row."""
    return "history?" + urlencode({"subject": subject, "benchmark": benchmark, "params": case})


def history_links(rows: pd.DataFrame) -> list[str]:
    """Each row's case (subject, benchmark, params) on the History page."""
    return [history_link(s, b, case_text(p)) for s, b, p in zip(rows["subject"], rows["benchmark"], rows["params"])]


def alert_link(subject: str, machine: str, series: str, runs: str | None = None) -> str:
    """The Regressions page showing one series' alert (and the imported-runs rule the link was made under)."""
    query = {"subject": subject, "machine": machine, "series": series, **({"runs": runs} if runs else {})}
    return "regressions?" + urlencode(query)


CI_RUNS = {FLYDSL_CI: "https://github.com/ROCm/FlyDSL/actions/runs/"}
"""Where each importer's CI runs are read (the run id is appended)."""


def ci_run_link(source: str, run_id: object) -> str:
    """An imported row's CI run, where its source has a run page; empty otherwise."""
    prefix = CI_RUNS.get(source)
    return f"{prefix}{int(run_id)}" if prefix and str(run_id).isdigit() else ""


def resources_link(kernel: str) -> str:
    """The Kernel resources page of one kernel."""
    return "resources?" + urlencode({"kernel": kernel})


def code_change_link(kernel: str, arch: str, base: str, head: str, kernels: list[str] | None = None) -> str:
    """Kernel resources opened on one kernel's machine code change on one target between two commits (the
    instruction counts and resources at each end), with the other `kernels` of the series listed beside it."""
    query = {"kernel": kernel, "code_arch": arch, "base": base, "head": head}
    if kernels and kernels != [kernel]:
        query["kernels"] = ",".join(kernels)
    return "resources?" + urlencode(query)


def no_rows(what: str) -> None:
    """An empty selection is a normal state, not an error: say what would fill it."""
    st.info(f"No {what} for this selection. Widen the filters in the sidebar.")


URL_FIELDS_LIMIT = 1000
"""Streamlit ignores a query string of more parameters than this, whole: every filter in it is dropped."""


def address_limit_note() -> None:
    """A warning, drawn in the browser, when the address holds more parameters than Streamlit reads: it drops
    them all before any page sees them, so only the browser knows, and without this the page would silently
    show everything."""
    st.html(f"""<div id="flybench-address-limit" role="alert" style="display:none;padding:0.75rem 1rem;
border-radius:0.5rem;background:#fff3cd;color:#664d03;border:1px solid #ffe69c"></div>
<script>
(() => {{
  const fields = window.location.search.length > 1 ? window.location.search.slice(1).split("&").length : 0;
  if (fields <= {URL_FIELDS_LIMIT}) return;
  const note = document.getElementById("flybench-address-limit");
  note.textContent = "This address holds " + fields + " parameters; the dashboard reads at most {URL_FIELDS_LIMIT} "
    + "and ignores all of them above that, so no filter in it applies and the page shows everything. "
    + "Shorten the address: pick fewer values per filter.";
  note.style.display = "block";
}})();
</script>""", unsafe_allow_javascript=True)
