"""Where the dashboard gets its rows: the store's shared queries, cached per version of the database file.

DuckDB allows one writer or several readers, never both, so every query here
goes through `flybench.store.queries`, which opens the file read-only for
that one query and closes it again: an open dashboard never holds the lock
`flybench ingest` needs. Answers are cached with `st.cache_data` keyed on the
modification times of the file and its write-ahead log, so a page re-renders
from memory until an ingest changes the database, and then reads it afresh.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

import pandas as pd

from dashboard import charts, filters, frames, machine_code, ui
from dashboard.analysis import history_steps, series_modes
from flybench import envvars
from flybench.errors import FlybenchError
from flybench.regress import accepted, stored
from flybench.regress.report import literal_markdown
from flybench.regress.counters import counter_changes
from flybench.regress.compare import compare
from flybench.store import DEFAULT_DB, origin, queries

def _named_resources(path: str, units: list[str]) -> pd.DataFrame:
    """`queries.resource_history` with each row's kernel as engineers name it (`frames.kernel_names`): parsing
    every row's parameters cost the Kernel resources page 0.13 s a render, so it is done once per database.

    Plus the machine code history's resources (`machine_code.resource_rows`), the imported month of every
    registered kernel, where the compile-only results hold no value for that kernel, target, commit and
    metric (a commit both compiled shows the results' row once)."""
    rows = queries.resource_history(path, units=units)
    rows = rows.assign(kernel_name=frames.kernel_names(rows)) if not rows.empty else rows.assign(kernel_name="")
    code = machine_code.resource_rows(queries.machine_code_history(path))
    # a commit the store has no date for (machine code ingested without the import that dates main's commits)
    # has no place on a commit axis
    code = code[code["unit"].str.lower().isin(units) & code["commit_date"].notna()]
    code = code.assign(kernel_name=code["kernel"].astype(object))
    if code.empty:
        return rows
    key = ["subject", "kernel_name", "arch", "commit_hash", "metric"]
    seen = pd.MultiIndex.from_frame(rows[key].astype(object)) if not rows.empty else None
    fresh = code if seen is None else code[~pd.MultiIndex.from_frame(code[key].astype(object)).isin(seen)]
    return pd.concat([rows, fresh], ignore_index=True) if not rows.empty else fresh.reset_index(drop=True)


def _pull_request_cases(path: str, pr: int, config: Any) -> pd.DataFrame:
    """Every push of one imported pull request against its base (`frames.pull_request_cases`), once per database:
    holding each case against its main series' noise cost the page 0.8 s a render."""
    rows = frames.provenance(queries.imported_run_rows(path, context="pr"))
    return frames.pull_request_cases(rows[rows["pr"] == pr], queries.imported_run_rows(path, context="main"), config)


def _code_by_pr(path: str) -> pd.DataFrame:
    """Per merged pull request, how many kernel x target pairs its machine code changed
    (`machine_code.changed_by_pull_request`), once per database."""
    return machine_code.changed_by_pull_request(queries.machine_code_history(path),
                                                queries.merged_pull_requests(path))


def _roofs(path: str) -> pd.DataFrame:
    """`roofs`, once per database (0.1 s a render otherwise)."""
    latest = frames.provenance(queries.latest_cases(path))
    roofs = frames.machine_roofs(latest, latest["machine"].dropna()) if not latest.empty \
        else pd.DataFrame(columns=["ceiling", "dtype", "tflops", "gbps", "basis", "machine"])
    return roofs.astype({"tflops": float, "gbps": float})  # a machine with no roof leaves the columns untyped


LOADERS: dict[str, Callable[..., Any]] = {
    "counts": queries.table_counts,
    "facets": queries.result_facets,
    "latest_cases": queries.latest_cases,
    "latest_results": queries.latest_results,
    "benchmark_history": queries.benchmark_history,
    "benchmark_cases": queries.benchmark_cases,
    "commits": queries.commits,
    "shared_cases": queries.shared_cases,
    "commit_titles": queries.commit_titles,
    "commit_notes": queries.commit_notes,
    "imported_runs": queries.imported_run_rows,
    "resources": _named_resources,
    "pull_request_cases": _pull_request_cases,
    "case_counters": queries.case_counter_history,
    "case_kernels": queries.case_kernels,
    "case_rates": queries.case_rates,
    "role_splits": queries.role_splits,
    "machine_code": queries.machine_code_history,
    "merged_prs": queries.merged_pull_requests,
    "series_kernels": queries.series_kernels,
    "code_by_pr": _code_by_pr,
    "roofs": _roofs,
    "others": origin.others,
    "history_steps": history_steps,
    "series_modes": series_modes,
    "regressions": stored.regressions,
    "history_noise": stored.history_noise,
    "counter_changes": counter_changes,
    "compare": compare,
}
"""Everything a page may ask for, by name, so one cached function serves them all."""


def db_path() -> Path:
    """`--db PATH` after `--` on the streamlit command line, else $FLYBENCH_DB, else results/flybench.duckdb."""
    argv = sys.argv
    if "--db" in argv[:-1]:
        return Path(argv[argv.index("--db") + 1])
    return Path(os.environ.get(envvars.DB) or DEFAULT_DB)


def stamp(path: Path) -> tuple[int, ...]:
    """The database's identity as far as caching cares: mtime and size of the file and of its WAL (0 if absent).

    Every ingest changes one of them, so a new ingest is a new cache key, and
    an unchanged file is served from memory however the widgets move.
    """
    return tuple(n for p in (path, path.with_name(path.name + ".wal"))
                 for n in ((p.stat().st_mtime_ns, p.stat().st_size) if p.exists() else (0, 0)))


def load(name: str, **kwargs: Any) -> Any:
    """The answer of LOADERS[name] on the current database; stops the page with advice if it cannot be read."""
    path = db_path()
    try:
        return _cached(name, str(path), stamp(path), **kwargs)
    except FlybenchError as exc:
        ui.cannot_read(path, str(exc))
        st.stop()


@st.cache_data(max_entries=256, show_spinner="Reading the database...")
def _cached(name: str, path: str, version: tuple[int, ...], **kwargs: Any) -> Any:
    """`version` is only part of the cache key: a new ingest makes a new key; so are the options (`kwargs`)."""
    return LOADERS[name](path, **kwargs)


def memo(name: str, compute: Callable[..., Any], **kwargs: Any) -> Any:
    """`compute(**kwargs)`, once per version of the database and arguments (Streamlit hashes them, frames by
    content): a page's pure computations over rows it already loaded (a chart's spec, a kernel's changes) cost
    every rerun otherwise, and a widget change reruns the whole page. `compute` must depend on nothing else."""
    path = db_path()
    return _memo(name, str(path), stamp(path), compute, **kwargs)


def _content_key(obj: pd.DataFrame | pd.Series) -> str:
    """A frame's identity for `memo` by content: its column names and types, its length and the hash of every
    column of scalars (text, numbers, dates), index included. Columns of dicts or arrays (the parameters) are
    left out: hashing their text cost more than the computations `memo` saves, and the text columns taken
    from the same parameters (benchmark, case, provider, dtype) already tell two selections apart. (Streamlit's
    own hash cannot take such a frame and says so in the server's log on every rerun.)"""
    frame = obj.to_frame() if isinstance(obj, pd.Series) else obj
    digest = hashlib.sha256(repr((list(frame.columns), [str(t) for t in frame.dtypes], len(frame))).encode())
    scalars = [c for c in frame.columns if frame[c].dtype != object]
    if scalars:
        digest.update(pd.util.hash_pandas_object(frame[scalars], index=True).to_numpy().tobytes())
    else:
        digest.update(pd.util.hash_pandas_object(frame.index.to_series(), index=False).to_numpy().tobytes())
    return digest.hexdigest()


@st.cache_data(max_entries=128, show_spinner=False, hash_funcs={pd.DataFrame: _content_key, pd.Series: _content_key})
def _memo(name: str, path: str, version: tuple[int, ...], _compute: Callable[..., Any], **kwargs: Any) -> Any:
    """`name` stands for `_compute` in the key (a function is not hashed); `path` and `version` tie it to the
    database as `_cached` does."""
    return _compute(**kwargs)


def chart_spec(builder: Callable[..., Any], **kwargs: Any) -> dict[str, Any]:
    """`charts.vega_spec(builder(**kwargs))` kept per database version and arguments (`memo`): building an Altair
    chart and turning it into a spec was the largest part of a History or Roofline rerun (0.3-0.5 s)."""
    return memo(f"chart:{builder.__module__}.{builder.__name__}",
                lambda **given: charts.vega_spec(builder(**given)), **kwargs)


def require_data(resources: bool = False) -> dict[str, int]:
    """Row counts, or the page stops and says how to fill the database (a missing file, an empty one).

    `resources`: the page can also live on compile metrics alone.
    """
    counts = load("counts")
    if not counts["results"] and not (resources and counts["compile_metrics"]):
        ui.fill_instructions(db_path(), "The database holds no results yet.")
        st.stop()
    return counts


def roofs() -> pd.DataFrame:
    """Every machine's roofs (`frames.machine_roofs`), from all of its newest rows whatever the page's filters:
    the one roof basis every page measures a case against. A workload filter that leaves out the gemm
    workload must not move a case onto the vendor's figures."""
    return load("roofs")


def acceptances() -> list[accepted.Acceptance]:
    """The accepted levels of this store, as `flybench regressions --db` applies them (`accepted.for_store`):
    every page that shows or counts an alert applies these. A file that cannot be read is said, and none applied;
    the old `results/accepted.json` of the folder the dashboard started in is applied too while it exists, and
    said."""
    try:
        found, note = accepted.for_store(db_path())
    except FlybenchError as exc:
        st.warning(f"Accepted levels not applied: {literal_markdown(str(exc))}")
        return []
    if note:
        st.caption(literal_markdown(note[0].upper() + note[1:] + "."))
    return found


def committed_note(machines: set[str]) -> None:
    """Say which of these machines' results came with the repository (committed by the machine that ran them,
    not measured here), as `flybench regressions` leaves them out of its verdict by default."""
    others = {machine: why for (_, machine), why in load("others").items() if machine in machines}
    committed = sorted(m for m, why in others.items() if why.startswith("committed"))
    if committed:
        st.caption(f"Came with the repository, not measured here: {literal_markdown(', '.join(committed))} "
                   "(results committed by the machines that ran them). `flybench regressions` leaves them out "
                   "of its verdict unless given --include-others.")


def facets() -> tuple[pd.DataFrame, set[str] | None]:
    """What the filters offer, with provenance, narrowed by the imported-runs rule (shown on every page alike)."""
    rows = frames.provenance(load("facets"))
    rule = filters.run_rule(rows)
    return filters.in_runs(rows, rule), rule
