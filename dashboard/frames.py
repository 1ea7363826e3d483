"""Pure pandas: the tables the pages draw, computed from the store's rows, with no Streamlit in sight.

Kept apart from the pages so the arithmetic (speedups, ceilings, labels) can
be tested without running an app, and so that a failed case can never slip
into a chart as a number: every function here carries `status` through and
turns anything but `ok` into a label, not a value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from dashboard.names import provider_label, provider_labels
from flybench.benchmark_names import is_own, series_name
from flybench.hardware import PEAKS
from flybench.regress.config import RegressConfig
from flybench.regress.history import Point, series_noise
from flybench.counters import DERIVED
from flybench.regress.report import METRIC_LABELS, value_text

FLYBENCH = "flybench"
"""The provenance of rows flybench measured itself; imported rows carry their `source` instead."""
SUBJECT_PROVIDER = "flydsl"
"""The provider whose standing the Overview is about, when it has results."""
CASE_KEY = ["subject", "machine", "arch", "workload", "shape_set", "case", "dtype"]
IMPORTED_KEY = ["subject", "arch", "benchmark", "params"]
"""An imported case per architecture: the source's op (benchmark), shape and dtype (params) and metric (unit)."""
ARCH_FIELDS = ["value", "status", "why", "machine", "commit_hash", "commit_date", "run_context", "pr"]
"""What `by_arch` keeps of each architecture's newest row besides its text, as `<arch> <field>`."""
FAILED_REASON = "the benchmark raised; asv recorded no value"
SIDE_METRICS = ("tflops", "gbps", "roofline_fraction")
UNKNOWN_UNIT = "unknown unit"
"""What a series whose benchmark definition gave no unit says instead of nothing."""
UNIT_NAMES = {"tflops": "TFLOP/s", "tflop/s": "TFLOP/s", "gb/s": "GB/s", "tb/s": "TB/s"}
BEST = "best baseline"
"""The speedup heatmap's column for the fastest baseline of each case, which its cells name."""


def provenance(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with `provenance`: 'flybench' for our own rows, else the importer's `source` (e.g. 'flydsl-ci')."""
    out = frame.copy()
    source = out["source"] if "source" in out else pd.Series(None, index=out.index, dtype=object)
    out["provenance"] = source.fillna(FLYBENCH).replace("", FLYBENCH).astype(str)
    return out


def imported(frame: pd.DataFrame) -> pd.Series:
    """Rows some other system measured (a `source` other than flybench)."""
    return frame["provenance"] != FLYBENCH


def mark(text: str, provenance_value: str) -> str:
    """`text`, with a dagger when the row was imported rather than measured by flybench."""
    return text if provenance_value == FLYBENCH else f"{text} †"


def unit_label(unit: Any) -> str:
    """One spelling per unit on every page: FlyDSL CI's 'TFLOPS' is flybench's 'TFLOP/s'."""
    if not isinstance(unit, str) or not unit:
        return UNKNOWN_UNIT
    return UNIT_NAMES.get(unit.lower(), unit)


def fmt(value: Any, unit: str | None) -> str:
    """A value as the reports print it (1.49ms, 65.0μs, 397.5 TFLOP/s), or a dash where there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return value_text(float(value), unit if unit in ("seconds", "bytes") else unit_label(unit))


def cell_text(status: str, value: Any, unit: str | None) -> str:
    """What a cell says: the value only when the status is ok; else 'n/a' (unavailable) or the status itself.

    Imported rows have statuses of their own ('skipped', 'missing'), which say more than 'n/a'.
    """
    if status == "ok":
        return fmt(value, unit)
    return "n/a" if status == "unavailable" or not isinstance(status, str) else status


def reason_text(status: str, reason: Any) -> str:
    """Why a case has no value, for the hover; empty when it has one."""
    if status == "ok":
        return ""
    if isinstance(reason, str) and reason:
        return reason
    return FAILED_REASON if status == "failed" else "not measured here (the provider cannot run on this machine)"


def case_label(frame: pd.DataFrame) -> pd.Series:
    """'workload · case · dtype'; the shape set is named too when the frame mixes several."""
    prefix = frame["workload"].astype(str)
    if frame["shape_set"].nunique() > 1:
        prefix = prefix + "." + frame["shape_set"].astype(str).str.lower()
    return prefix + " · " + frame["case"].astype(str) + " · " + frame["dtype"].astype(str)


def benchmark_label(benchmark: str, unit: Any, provenance_value: str) -> str:
    """'attention · Quick · time', 'attention · FlydslCI · tflops (TFLOP/s) †': flybench's own ids as a reader
    names them (workload, shape set or source, metric); a foreign benchmark keeps asv's name."""
    if not is_own(benchmark) or benchmark.count(".") < 2:
        return mark(benchmark, provenance_value)
    workload, group, metric = benchmark.split(".", 2)
    what = metric.removeprefix("track_").replace("_", " ")
    if isinstance(unit, str) and unit and unit != "seconds" and unit_label(unit).lower() != what.lower():
        what += f" ({unit_label(unit)})"
    return mark(f"{workload} · {group} · {what}", provenance_value)


def params_dict(params: Any) -> dict[str, Any]:
    """The stored parameters (a JSON object, or NULL for compile metrics) as a dict."""
    return json.loads(params) if isinstance(params, str) else (params if isinstance(params, dict) else {})


def params_text(params: Any) -> str:
    """asv's parameters as one readable string: 'c1, flydsl, bf16'."""
    return ", ".join(str(v) for v in params_dict(params).values())


def without_failed_values(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy where rows whose status is not ok carry no value: a failed case's time is not a speed."""
    out = frame.copy()
    columns = [c for c in ("value", "ci_99_a", "ci_99_b", "q_25", "q_75", *SIDE_METRICS) if c in out]
    out.loc[out["status"] != "ok", columns] = np.nan
    return out


def newest_per_case(latest: pd.DataFrame) -> pd.DataFrame:
    """One row per case and provider (the newest, if several environments measured it), with provenance.

    `shown` is the cell text and `why` the hover's reason; values of cases that are not ok are blanked.
    """
    return _newest(latest, CASE_KEY + ["provider"], case_label)


def newest_imported(rows: pd.DataFrame) -> pd.DataFrame:
    """Per architecture, the newest row of each imported case (op, shape, dtype, metric), as `newest_per_case`.

    Keyed on the benchmark and all its parameters, not on flybench's case key:
    FlyDSL's MoE kernels or GEMM tiles share a shape and must not hide each other.
    """
    return _newest(rows, IMPORTED_KEY, imported_label)


def _newest(rows: pd.DataFrame, key: list[str], label: Callable[[pd.DataFrame], pd.Series]) -> pd.DataFrame:
    """The newest row (by commit date) per `key`, labelled, with its cell text and reason."""
    rows = provenance(without_failed_values(rows)).sort_values("commit_date", na_position="first", kind="stable")
    rows = rows.drop_duplicates(key, keep="last").reset_index(drop=True)
    rows["label"] = label(rows) if len(rows) else pd.Series(dtype=str)
    rows["shown"] = [mark(cell_text(s, v, u), p) for s, v, u, p in
                     zip(rows["status"], rows["value"], rows["unit"], rows["provenance"])]
    rows["why"] = [reason_text(s, r) for s, r in zip(rows["status"], rows["reason"])]
    return rows


def imported_label(frame: pd.DataFrame) -> pd.Series:
    """'flash_attn · B16S8192H16Hkv16D128_causal · bf16': the source's own names, the provider left out.

    The source's op (FlyDSL's `flash_attn`, not flybench's workload `attention`)
    where the row records it, else the workload; then every parameter but the provider.
    """
    rest = frame["params"].map(lambda p: " · ".join(str(v) for k, v in params_dict(p).items() if k != "provider"))
    op = frame["source_op"] if "source_op" in frame else pd.Series(None, index=frame.index, dtype=object)
    return op.fillna(frame["workload"]).astype(str) + " · " + rest


def foreign_label(frame: pd.DataFrame) -> pd.Series:
    """A foreign benchmark's series exactly as asv names it: `benchmarks.TimeSuite.time_keys(10, 'a')`."""
    values = [list(params_dict(p).values()) for p in frame["params"]]
    return pd.Series([series_name(b, v) if v else b for b, v in zip(frame["benchmark"], values)],
                     index=frame.index, dtype=object)


def newest_foreign(rows: pd.DataFrame) -> pd.DataFrame:
    """The newest row of each foreign series (any unit, an unknown one included), labelled as asv names it."""
    out = _newest(rows, ["subject", "machine", "env_name", "benchmark", "params"], foreign_label)
    out["unit"] = out["unit"].map(unit_label)
    out["shown"] = [mark(cell_text(s, v, u), p) for s, v, u, p in
                    zip(out["status"], out["value"], out["unit"], out["provenance"])]
    return out


def by_arch(newest: pd.DataFrame) -> pd.DataFrame:
    """One row per imported case, the newest text of each architecture in a column named after it.

    The rest of each architecture's row follows as `<arch> <field>` (ARCH_FIELDS), for the download
    and for `arch_ratio`.
    """
    index = ["subject", "workload", "label", "unit", "benchmark", "params", "provenance"]
    rows = newest[newest["arch"].notna()].drop_duplicates(index + ["arch"])
    wide = rows.set_index(index + ["arch"])[["shown", *ARCH_FIELDS]].unstack("arch")
    wide.columns = [arch if field == "shown" else f"{arch} {field}" for field, arch in wide.columns]
    return wide.reset_index()


def commits_compared(wide: pd.DataFrame, archs: list[str]) -> list[str]:
    """For each case of `by_arch`, the commits its architectures' newest values come from: 'one commit' or
    'N commits: a, b, c' (short hashes, in the order of `archs`)."""
    columns = [f"{a} commit_hash" for a in archs if f"{a} commit_hash" in wide]
    out = []
    for hashes in zip(*(wide[c] for c in columns)):
        found = list(dict.fromkeys(h[:8] for h in hashes if isinstance(h, str)))
        out.append("one commit" if len(found) <= 1 else f"{len(found)} commits: {', '.join(found)}")
    return out


def arch_ratio(wide: pd.DataFrame, head: str, base: str, config: RegressConfig) -> pd.Series:
    """How much faster `head` is than `base` on each case of `by_arch`: above 1, faster, whatever the unit.

    A bigger-is-better unit (TFLOP/s, TB/s, as flybench's regression config
    says) divides head by base; a time is inverted (base / head). NaN unless
    both sides have an ok value.
    """
    if f"{head} value" not in wide or f"{base} value" not in wide:
        return pd.Series(np.nan, index=wide.index, dtype=float)
    h, b = (wide[f"{arch} value"].astype(float) for arch in (head, base))
    ok = (wide[f"{head} status"] == "ok") & (wide[f"{base} status"] == "ok") & (h > 0) & (b > 0)
    bigger = np.array([config.thresholds(n, p, u).bigger_is_better
                       for n, p, u in zip(wide["benchmark"], wide["params"], wide["unit"])], dtype=bool)
    return pd.Series(np.where(bigger, h / b.where(ok, 1.0), b / h.where(ok, 1.0)), index=wide.index).where(ok)


def ratio_text(wide: pd.DataFrame, ratio: pd.Series, head: str, base: str) -> list[str]:
    """'1.43× †', or which side has no value ('gfx942 skipped †'); the provenance mark as on every imported cell."""
    texts = []
    for r, provenance_value, *statuses in zip(ratio, wide["provenance"], wide[f"{head} status"],
                                              wide[f"{base} status"]):
        if pd.isna(r):
            text = " and ".join(f"{arch} {s if isinstance(s, str) else 'not measured'}"
                                for arch, s in zip((head, base), statuses) if s != "ok") or "a side reads 0: no ratio"
        else:
            text = f"{r:.2f}×"
        texts.append(mark(text, provenance_value))
    return texts


def speedup_pairs(latest: pd.DataFrame) -> pd.DataFrame:
    """Every ordered pair of providers measured on the same case: `speedup` = t_baseline / t_provider.

    Above 1 the provider is faster than the baseline. When either side failed
    its correctness check (or crashed) the pair has no speedup, only a label
    naming who failed and a reason for the hover. Unavailable cases are left out.
    """
    rows = newest_per_case(latest[latest["status"].isin(["ok", "failed"])])
    key = CASE_KEY + ["label"] + (["section"] if "section" in rows else [])
    cols = key + ["provider", "value", "status", "why", "commit_hash", "provenance"]
    pairs = rows[cols].merge(rows[cols], on=key, suffixes=("", "_base"))
    pairs = pairs[pairs["provider"] != pairs["provider_base"]].rename(columns={"provider_base": "baseline"})
    ok = (pairs["status"] == "ok") & (pairs["status_base"] == "ok") & (pairs["value"] > 0)
    pairs["speedup"] = np.where(ok, pairs["value_base"] / pairs["value"].where(ok, 1.0), np.nan)
    pairs["provider_label"] = provider_labels(pairs)
    pairs["baseline_label"] = provider_labels(pairs, "baseline")
    pairs["shown"] = [_pair_label(r) for r in pairs.itertuples()]
    pairs["why"] = [" / ".join(w for w in (r.why, r.why_base) if w) for r in pairs.itertuples()]
    return pairs.reset_index(drop=True)


def best_baseline(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per case and provider with two or more baselines measured ok, the speedup over the fastest of them.

    A speedup over a weak baseline flatters; the one over the best baseline a
    case has is the claim that holds. Rows as `speedup_pairs`, `baseline`
    keeping the fastest one's id, `baseline_label` BEST, `best_of` how many
    there were, and `shown` naming it: '1.80× vs cuBLAS loop (best of 3)'.
    """
    ok = pairs[pairs["speedup"].notna()]
    key = [c for c in CASE_KEY + ["label", "section", "provider"] if c in ok]
    counts = ok.groupby(key, dropna=False)["baseline"].transform("size")
    several = ok[counts >= 2]
    best = several.loc[several.groupby(key, dropna=False)["value_base"].idxmin()].copy()
    best["best_of"] = counts[best.index].astype(int)
    best["shown"] = [mark(f"{s:.2f}× vs {label} (best of {n})", p if p == q else "")
                     for s, label, n, p, q in zip(best["speedup"], provider_labels(best, "baseline"), best["best_of"],
                                                  best["provenance"], best["provenance_base"])]
    return best.assign(baseline_label=BEST).reset_index(drop=True)


def _pair_label(r: Any) -> str:
    if r.status != "ok" or r.status_base != "ok":
        failed = [p for p, s in ((r.provider, r.status), (r.baseline, r.status_base)) if s != "ok"]
        text = " and ".join(failed) + " failed"
    else:
        text = f"{r.speedup:.2f}×"
    return text if r.provenance == r.provenance_base == FLYBENCH else f"{text} †"


def roofline_basis(frame: pd.DataFrame) -> list[str]:
    """Which ceilings the roofline fractions were computed against ('measured:<file>', 'vendor'), as recorded."""
    bases = set()
    for contract in frame.get("contract", pd.Series(dtype=object)).dropna():
        basis = json.loads(contract).get("roofline_basis") if isinstance(contract, str) else None
        if basis:
            bases.add(basis)
    return sorted(bases)


def ceilings(latest: pd.DataFrame, machine: str) -> pd.DataFrame:
    """The machine's roofs: its gemm workload's best TFLOP/s per dtype and best copy GB/s, else vendor peaks.

    Columns: ceiling, dtype, tflops, gbps, basis. Vendor figures appear only
    where nothing was measured, and say so.
    """
    rows = latest[(latest["machine"] == machine) & (latest["workload"] == "gemm") & (latest["status"] == "ok")]
    copy = rows["case"].astype(str).str.startswith("copy")
    found: list[dict[str, Any]] = []
    for dtype, group in rows[~copy & rows["tflops"].notna()].groupby("dtype"):
        best = group.loc[group["tflops"].idxmax()]
        found.append({"ceiling": f"{dtype} matrix", "dtype": dtype, "tflops": best["tflops"], "gbps": np.nan,
                      "basis": f"measured: gemm {best['case']} ({best['provider']})"})
    if rows.loc[copy, "gbps"].notna().any():
        best = rows[copy].loc[rows.loc[copy, "gbps"].idxmax()]
        found.append({"ceiling": "memory copy", "dtype": "", "tflops": np.nan, "gbps": best["gbps"],
                      "basis": f"measured: gemm {best['case']} ({best['provider']})"})
    peak = PEAKS.get(machine.rsplit("-", 1)[-1].lower())
    if peak is not None:
        measured = {f["ceiling"] for f in found}
        for name, dtype, tflops, gbps in (("bf16 matrix", "bf16", peak.bf16_tflops, np.nan),
                                          ("fp8 matrix", "fp8", peak.fp8_tflops, np.nan),
                                          ("memory copy", "", np.nan, peak.hbm_tbs * 1000)):
            if name not in measured:
                found.append({"ceiling": name, "dtype": dtype, "tflops": tflops, "gbps": gbps,
                              "basis": "vendor figure (not measured here)"})
    return pd.DataFrame(found, columns=["ceiling", "dtype", "tflops", "gbps", "basis"])


def intensity_points(latest: pd.DataFrame) -> pd.DataFrame:
    """The newest ok case of each provider that a roofline can place, with its intensity (`with_intensity`)."""
    return with_intensity(newest_per_case(latest[latest["status"] == "ok"])).reset_index(drop=True)


def with_intensity(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with both TFLOP/s and GB/s measured, and their arithmetic intensity: FLOPs per byte moved."""
    placed = rows[(rows["tflops"] > 0) & (rows["gbps"] > 0)]
    return placed.assign(intensity=1000 * placed["tflops"] / placed["gbps"])


def machine_roofs(latest: pd.DataFrame, machines: Any) -> pd.DataFrame:
    """`ceilings` of each of these machines, one frame with a `machine` column."""
    return pd.concat([ceilings(latest, m).assign(machine=m) for m in sorted(set(machines))], ignore_index=True)


RATE_CLASSES = {"fp16": "16-bit", "bf16": "16-bit", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
"""dtypes that share a matrix peak on these GPUs (fp16 and bf16 run at one rate; fp8 at twice it)."""


def rate_class(dtype: object) -> str:
    return RATE_CLASSES.get(str(dtype).lower(), str(dtype).lower())


def roof_fractions(cases: pd.DataFrame, roofs: pd.DataFrame) -> pd.DataFrame:
    """`cases` with `intensity`, `of_roof` and `roof_basis` where both TFLOP/s and GB/s were measured: each
    fraction is of the roof the Roofline page draws for the case's machine and dtype (`roofs`: `machine_roofs`
    of every machine's newest rows, unfiltered, `against_roofs`), so every page gives one figure for one case."""
    out = cases.assign(intensity=np.nan, of_roof=np.nan, roof_basis="")
    placed = with_intensity(out)
    if placed.empty:
        return out
    judged = against_roofs(placed, roofs)
    columns = ["intensity", "of_roof", "roof_basis"]
    out.loc[judged.index, columns] = judged[columns]
    return out


def against_roofs(points: pd.DataFrame, roofs: pd.DataFrame) -> pd.DataFrame:
    """Each point's fraction of the roof drawn above it, on the chart's own basis.

    The attainable rate is min(the matrix roof of the dtype's rate class;
    copy bandwidth x intensity) from `roofs` (machine, ceiling, dtype, tflops,
    gbps, basis), so the hover and the dashed line agree; the stored
    `roofline_fraction` may be of another basis (the vendor's figures).
    `roof_basis` names the two roofs used. A dtype with no roof of its rate
    class gets none: an fp16 case held against the fp8 roof reads at a third
    of what it reaches.
    """
    out = points.copy()
    machines = roofs.assign(rate=roofs["dtype"].map(rate_class))
    compute = machines[machines["tflops"].notna()].sort_values("tflops", kind="stable") \
        .drop_duplicates(["machine", "rate"], keep="last")  # each machine's highest roof of a rate class
    copy = machines[machines["gbps"].notna()].sort_values("gbps", kind="stable") \
        .drop_duplicates("machine", keep="last")
    compute = compute.set_index(["machine", "rate"])
    copy = copy.set_index("machine")
    keys = pd.MultiIndex.from_arrays([out["machine"], out["dtype"].map(rate_class)])
    peak = compute["tflops"].reindex(keys).to_numpy(dtype=float)
    bandwidth = copy["gbps"].reindex(out["machine"]).to_numpy(dtype=float)
    attainable = np.minimum(peak, bandwidth * out["intensity"].to_numpy(dtype=float) / 1000)
    out["of_roof"] = out["tflops"].to_numpy(dtype=float) / attainable
    named = (compute["ceiling"] + " (" + compute["basis"] + ")").reindex(keys).to_numpy(dtype=object)
    bandwidth_named = (copy["ceiling"] + " (" + copy["basis"] + ")").reindex(out["machine"]).to_numpy(dtype=object)
    out["roof_basis"] = [
        "no roof for this machine" if pd.isna(b) else f"no {dtype} matrix roof for this machine" if pd.isna(c)
        else f"{c}, {b}" for c, b, dtype in zip(named, bandwidth_named, out["dtype"])]
    return out


def unplaced(latest: pd.DataFrame) -> pd.DataFrame:
    """The cases a roofline cannot place, counted by why: failed, imported without byte counts, no counts."""
    rows = newest_per_case(latest)
    placed = (rows["status"] == "ok") & (rows["tflops"] > 0) & (rows["gbps"] > 0)
    reason = np.select([rows["status"] != "ok", imported(rows), rows["gbps"].isna() | ~(rows["gbps"] > 0)],
                       ["no value (failed, unavailable or not measured)",
                        "imported: the source records no FLOP or byte counts",
                        "no byte count recorded for the case (a copy, or an older case record)"],
                       "no FLOP count recorded for the case")
    left = rows.loc[~placed].assign(reason=reason[~placed.to_numpy()])
    return left.groupby(["machine", "reason"]).size().rename("cases").reset_index()


def roof_lines(roofs: pd.DataFrame, low: float, high: float) -> pd.DataFrame:
    """Attainable TFLOP/s = min(peak, bandwidth x intensity) per compute roof, sampled at its corners.

    `end` marks each roof's last point, where its name is written.
    """
    bandwidth = roofs["gbps"].dropna()
    if bandwidth.empty:
        return pd.DataFrame(columns=["roof", "intensity", "tflops", "end"])
    gbps = float(bandwidth.max())
    lines = []
    for roof in roofs.dropna(subset=["tflops"]).itertuples():
        ridge = 1000 * roof.tflops / gbps
        xs = sorted({low, ridge, high, min(low, ridge / 10), max(high, ridge * 10)})
        lines += [{"roof": roof.ceiling, "intensity": x, "tflops": min(roof.tflops, gbps * x / 1000),
                   "end": x == xs[-1]} for x in xs]
    return pd.DataFrame(lines)


def metric_label(metric: str) -> str:
    """'VGPRs' for vgpr_count: the report's names; a counter figure's label ('DRAM read'); a profiler's own
    counter name verbatim (smsp__inst_executed.sum); else the metric with spaces."""
    if metric in DERIVED:
        return DERIVED[metric].label
    return METRIC_LABELS.get(metric, metric if "__" in metric else metric.replace("_", " "))


def kernel_name(kernel: Any, params: Any) -> str:
    """A compile-only kernel as engineers name it: its `kernel` parameter (else `kernel`, the compile_metrics
    table's name), the parameters other than kernel, arch and metric following in brackets."""
    given = params_dict(params)
    rest = ", ".join(str(v) for k, v in given.items() if k not in ("kernel", "arch", "metric", "counter"))
    return str(given.get("kernel", kernel)) + (f" ({rest})" if rest else "")


def kernels_first(rows: pd.DataFrame) -> list[str]:
    """The kernels of resource rows, the one to open on first: FlyDSL's own kernels (the registry's checkout
    kernels) before the project's baselines (its Triton kernels), then the one compiled for the most
    architectures, then at the most commits. The page opened on a Triton kernel when the ranking counted
    architectures alone."""
    from flybench.compile.registry import CHECKOUT_CASES

    flydsl = {c.name for c in CHECKOUT_CASES}
    ranked = rows.groupby("kernel_name").agg(archs=("arch", "nunique"), commits=("commit_hash", "nunique"))
    ranked["flydsl"] = [name.split(" (")[0] in flydsl for name in ranked.index]
    return list(ranked.sort_values(["flydsl", "archs", "commits"], ascending=False, kind="stable").index)


def kernel_names(rows: pd.DataFrame) -> pd.Series:
    """Each row's kernel as engineers name it (`kernel_name`); the benchmark id stays in `origin`."""
    return pd.Series([kernel_name(k, p) for k, p in zip(rows["kernel"], rows["params"])], index=rows.index,
                     dtype=object)


def case_text(params: Any) -> str:
    """A case of one benchmark as its parameters without the provider: 'B16S8192H16Hkv16D128_causal, bf16'."""
    return ", ".join(str(v) for k, v in params_dict(params).items() if k != "provider")


def panel_labels(rows: pd.DataFrame) -> pd.Series:
    """'gfx950 · linux-flydsl-mi355-1 †': one small multiple per machine, named by architecture first."""
    arch = rows["arch"].fillna("no GPU architecture").astype(str)
    return [mark(f"{a} · {m}", p) for a, m, p in zip(arch, rows["machine"], rows["provenance"])]


def series_labels(rows: pd.DataFrame) -> pd.Series:
    """A line within its machine's panel: the provider's label, with the environment where a machine has several
    (each of FlyDSL CI's pull requests is an environment of its own), marked † when imported."""
    # a foreign benchmark has no provider: its environment names the line
    provider = pd.Series(provider_labels(rows), index=rows.index).where(rows["provider"].notna(), rows["env_name"])
    several = rows.groupby("machine")["env_name"].transform("nunique") > 1
    label = provider.astype(str).where(~several, provider.astype(str) + " · " + rows["env_name"].astype(str))
    return pd.Series([mark(t, p) for t, p in zip(label, rows["provenance"])], index=rows.index, dtype=object)


def threshold_band(rows: pd.DataFrame, config: RegressConfig, factor: float = 1.0, x: str = "order") -> pd.DataFrame:
    """Per drawn series, the band around its newest level that a value must leave to count as a change.

    The level is the median of the series' last five ok values; the band's
    half-width is the larger of the step floor and the absolute threshold the
    history scan uses for that series (flybench.toml [regress]); a step must
    also beat noise_k times the series' own noise. `factor` is the display
    scale of `y`; `start` and `end` are the series' first and last `x`
    (its commit positions). Columns: panel, series, lo, hi, start, end, band.
    """
    found = []
    for (panel, series), one in rows[rows["status"] == "ok"].groupby(["panel", "series"], sort=False):
        limits = config.thresholds(one["benchmark"].iloc[0], params_text(one["params"].iloc[0]), one["unit"].iloc[0])
        level = float(one["y"].tail(5).median())
        half = max(abs(level) * limits.step_floor, limits.absolute * factor)
        found.append({"panel": panel, "series": series, "lo": level - half, "hi": level + half,
                      "start": one[x].min(), "end": one[x].max(),
                      "band": f"a change must leave ±{limits.step_floor:.0%} of the newest level"
                              + (f" and exceed {fmt(limits.absolute, one['unit'].iloc[0])}" if limits.absolute else "")
                              + f" and {limits.noise_k:g}x the series' noise"})
    return pd.DataFrame(found, columns=["panel", "series", "lo", "hi", "start", "end", "band"])


def display_scale(unit: str | None, values: pd.Series) -> tuple[float, str]:
    """(factor, axis title) that puts times into s, ms or μs by their median; other units in their one spelling."""
    if unit != "seconds" or values.dropna().empty:
        return 1.0, unit_label(unit)
    median = float(values.dropna().abs().median())
    return next(((f, name) for f, name in ((1.0, "s"), (1e3, "ms"), (1e6, "μs")) if median * f >= 1), (1e9, "ns"))


def step_text(step: Any) -> str:
    """'abc12345 → def67890: 1.00ms → 1.50ms (+50.0%), confidence 100%', for a hover or a table."""
    return (f"{step.last_good[:8]} → {step.first_bad[:8]}: {fmt(step.before, step.unit)} → "
            f"{fmt(step.after, step.unit)} ({step.relative:+.1%}), confidence {step.confidence:.0%}")


PR_CALLS = ("slower", "faster", "within noise", "no base")


def pull_request_cases(push: pd.DataFrame, main: pd.DataFrame, config: RegressConfig) -> pd.DataFrame:
    """Each case of one pull-request push against its base on the same runner, and both verdicts.

    The base is what the source measured in the same job where it did (FlyDSL CI's `vs_main`: the main it
    rebuilt beside the pull request), else main's newest run on that runner before the push's job (`main`:
    `imported_run_rows` of main). `change` is oriented so that below 0 is slower. flybench's call holds it
    against the main series' own run-to-run noise on that runner: slower or faster past the step floor and
    noise_k times that noise, else within noise. The source's own flag (`source_regression`) stays its own.
    """
    out = push.copy()
    series = {key: group.sort_values("job_time") for key, group in main[main["status"] == "ok"].groupby(
        ["machine", "benchmark", "params"], sort=False)} if not main.empty else {}
    bases, sources, calls, changes, bars = [], [], [], [], []
    for r in out.itertuples():
        history = series.get((r.machine, r.benchmark, r.params))
        before = history[history["job_time"] <= r.job_time] if history is not None else None
        if pd.notna(r.base_value):
            base, source = r.base_value, f"same job: {r.base_label or 'main'}"
        elif before is not None and len(before):
            base = float(before["value"].iloc[-1])
            source = f"main at {before['commit_hash'].iloc[-1][:8]}, the newest main run before this push"
        else:
            base, source = np.nan, "no main run of this case on this runner"
        limits = config.thresholds(r.benchmark, params_text(r.params), r.unit)
        change = (r.value / base - 1) if base and r.status == "ok" and pd.notna(base) else np.nan
        change = change if limits.bigger_is_better or np.isnan(change) else -change  # below 0: slower
        noise = _relative_noise(history, limits) if history is not None else np.nan
        bar = max(limits.step_floor, limits.noise_k * noise) if not np.isnan(noise) else limits.step_floor
        bases.append(base), sources.append(source), changes.append(change), bars.append(bar)
        calls.append("no base" if np.isnan(change) else "slower" if change <= -bar else "faster" if change >= bar
                     else "within noise")
    out["base"], out["base_source"], out["change"], out["bar"], out["flybench"] = bases, sources, changes, bars, calls
    return out


def _relative_noise(history: pd.DataFrame, limits: Any) -> float:
    """The main series' noise on its runner, relative to its level (`flybench.regress.history.series_noise`)."""
    points = [Point(c, v) for c, v in zip(history["commit_hash"], history["value"])]
    level = history["value"].median()
    return series_noise(points, limits) / level if len(points) >= 3 and level else np.nan


def undone(found: pd.DataFrame, shown: pd.DataFrame) -> list[str]:
    """For each resource change (`found`: arch, metric label, before, first_bad_date) of a kernel's rows
    (`shown`: arch, metric_label, value, status, short, commit_date): 'at <commit> (<date>)' where a later
    measured commit of the same architecture and metric has the value from before the change again; empty while
    the change holds."""
    ok = shown[shown["status"] == "ok"].sort_values("commit_date", kind="stable")
    out = []
    for change in found.itertuples():
        series = ok[(ok["arch"] == change.arch) & (ok["metric_label"] == change.metric)]
        later = series[series["commit_date"] > change.first_bad_date]
        back = later[later["value"] == change.before]
        out.append("" if back.empty else f"at {back['short'].iloc[0]} ({back['commit_date'].iloc[0]:%Y-%m-%d})")
    return out


TREND_RUNS = 10
"""Main runs a standing's trend spans: the newest value against the median of the first three of these."""


def standing(main: pd.DataFrame, alerts: pd.DataFrame) -> pd.DataFrame:
    """Where an imported subject stands, per op (the source's own name) and architecture, from its main runs:
    the cases, the newest run, the geometric mean of each case's trend (its newest value against the median of
    the first three of its newest TREND_RUNS runs, oriented so that above 1 is faster), the case that moved
    worst, and the open alerts (`alerts`: machine, benchmark, params of each open regression).

    Every imported unit is a rate or a speedup (bigger is better), so a ratio of values is a speed ratio.
    """
    ok = main[(main["status"] == "ok") & (main["value"] > 0)].sort_values("job_time", kind="stable")
    series_key = ["machine", "benchmark", "params"]
    ok = ok.assign(series=ok.groupby(series_key, sort=False).ngroup())  # the series in order of first appearance
    recent = ok.groupby("series", sort=False).tail(TREND_RUNS)
    start = recent.groupby("series").head(3).groupby("series")["value"].median()
    last = recent.groupby("series").tail(1).sort_values("series", kind="stable")
    cases = pd.DataFrame({
        "op": [o or b.split(".")[0] for o, b in zip(last["source_op"], last["benchmark"])],
        "arch": last["arch"].to_numpy(), "machine": last["machine"].to_numpy(),
        "benchmark": last["benchmark"].to_numpy(), "params": last["params"].to_numpy(),
        "case": [case_text(p) for p in last["params"]], "newest": last["job_time"].to_numpy(),
        "trend": last["value"].to_numpy(dtype=float) / start.reindex(last["series"]).to_numpy(dtype=float)},
        columns=["op", "arch", "machine", "benchmark", "params", "case", "newest", "trend"])
    if cases.empty:
        return pd.DataFrame(columns=["op", "arch", "cases", "newest", "trend", "worst", "alerts"])
    open_alerts = {(m, b, json.dumps(json.loads(p), sort_keys=True)) for m, b, p in
                   zip(alerts.get("machine", []), alerts.get("benchmark", []), alerts.get("params", []))}
    cases["alert"] = [(m, b, json.dumps(json.loads(p), sort_keys=True)) in open_alerts
                      for m, b, p in zip(cases["machine"], cases["benchmark"], cases["params"])]
    out = []
    for (op, arch), group in cases.groupby(["op", "arch"], sort=True):
        worst = group.loc[group["trend"].idxmin()]
        out.append({"op": op, "arch": arch, "cases": len(group), "newest": group["newest"].max(),
                    "trend": float(np.exp(np.log(group["trend"]).mean())),
                    "worst": f"{worst['case']}: {worst['trend'] - 1:+.1%}", "alerts": int(group["alert"].sum())})
    return pd.DataFrame(out)


MODEL_WORKLOAD = "mixtral_step"
STOCK_PROVIDER = "xla"
"""The model lane's stock path: XLA's ragged_dot MoE, which the AMD talk measured FlyDSL against."""


def model_rows(latest: pd.DataFrame) -> pd.DataFrame:
    """The model lane's newest timed steps, one row per machine, case and provider: ms a step, tokens/s, the
    speedup over the stock path of the same machine and case, and the conditions the figure holds under."""
    rows = latest[(latest["workload"] == MODEL_WORKLOAD) & (latest["status"] == "ok") & latest["value"].notna()]
    if rows.empty:
        return pd.DataFrame()
    rows = rows.copy()
    conditions = rows["contract"].map(lambda text: (json.loads(text) if isinstance(text, str) else {})
                                      .get("conditions", {}))
    for name in ("phase", "batch", "tokens", "context", "moe", "moe_flops", "xla_flags"):
        rows[name] = conditions.map(lambda c, n=name: c.get(n))
    rows["ms"] = rows["value"] * 1e3
    rows["tokens_per_s"] = rows["batch"] * rows["tokens"] / rows["value"]
    stock = rows[rows["provider"] == STOCK_PROVIDER].drop_duplicates(["machine", "case"], keep="last") \
        .set_index(["machine", "case"])["value"]  # one stock time per machine and case, whatever its environments
    keys = list(zip(rows["machine"], rows["case"]))
    rows["speedup"] = [stock.get(key, float("nan")) / value for key, value in zip(keys, rows["value"])]
    rows["conditions"] = [condition_text(c) for c in conditions]
    return rows.sort_values(["machine", "case", "provider"]).reset_index(drop=True)


def model_headline(rows: pd.DataFrame, provider: str = "jax-triton") -> list[str]:
    """The model lane's figure, one line per machine: `provider`'s speed over ragged_dot per case, with the commit
    and date of the stored run each comes from ('dev-h200: 3.62x prefill 1 x 2048, 2.19x decode ... (run at
    c956a724, 2026-12-02 15:16)'). Only stored rows: a figure nobody can find in the store is not a headline."""
    lines = []
    for machine, mine in rows[rows["provider"] == provider].groupby("machine", sort=True):
        cases = [f"{r.speedup:.2f}x {r.phase} (batch {r.batch}, "
                 + (f"{r.tokens} tokens" if r.phase == "prefill" else f"context {r.context}") + ")"
                 for r in mine.sort_values(["phase", "case"], ascending=[False, True]).itertuples()
                 if pd.notna(r.speedup)]
        runs = sorted({(str(c)[:8], d) for c, d in zip(mine["commit_hash"], mine["commit_date"])}, key=str)
        when = "; ".join(f"{c}, {d:%Y-%m-%d %H:%M}" if pd.notna(d) else c for c, d in runs)
        if cases:
            lines.append(f"{machine}: {', '.join(cases)} (stored run at {when})")
    return lines


def condition_text(conditions: dict[str, Any]) -> str:
    """The conditions of one model figure, as printed beside its speedup."""
    if not conditions:
        return "no conditions recorded"
    flags = conditions.get("xla_flags") or "none"
    return (f"{conditions.get('precision', '?')}; batch {conditions.get('batch')} x {conditions.get('tokens')} "
            f"tokens, context {conditions.get('context')}; {conditions.get('layers')} layers; MoE "
            f"{conditions.get('moe')} performs {conditions.get('moe_flops', 0) / 1e12:.3g} TFLOP; XLA_FLAGS: {flags}"
            + ("" if "command_buffers" not in conditions else
               f"; traced with command buffers {'on' if conditions['command_buffers'] else 'off'}"))


MOE_LAYERS = ("ragged_dot", "dense", "triton")
"""The model lane's MoE layers, in the order the page sets their tokens/s side by side."""
SPLIT = ("moe", "attention", "other", "rest", "untraced")
"""A step's split as the page shows it (flybench.model.roles.shares): the MoE, attention, the other roles, the
kernels with no role, and the time no kernel ran."""
SAME_CONDITIONS = ("precision", "phase", "batch", "tokens", "context", "layers", "xla_flags", "command_buffers")
"""What two variants' splits must share for an Amdahl check between them: all but the MoE layer."""


def tokens_by_layer(steps: pd.DataFrame) -> pd.DataFrame:
    """`model_rows` as one row per machine and case: tokens/s of each MoE layer (`MOE_LAYERS`) side by side, with
    where each value comes from (commit, environment) in `provenance`."""
    if steps.empty:
        return pd.DataFrame()
    rows = []
    for (machine, case), group in steps.groupby(["machine", "case"], sort=True):
        row: dict[str, Any] = {"machine": machine, "case": case}
        sources = []
        for moe in MOE_LAYERS:
            found = group[group["moe"] == moe]
            row[moe] = float(found["tokens_per_s"].iloc[-1]) if not found.empty else float("nan")
            if not found.empty:
                last = found.iloc[-1]
                sources.append(f"{moe}: {last['provider']} at {str(last['commit_hash'])[:8]}"
                               + (f" ({last['env_name']})" if "env_name" in last and last["env_name"] else ""))
        row["conditions"] = group["conditions"].iloc[0]
        row["provenance"] = "; ".join(sources)
        rows.append(row)
    return pd.DataFrame(rows)


def role_rows(splits: pd.DataFrame) -> pd.DataFrame:
    """The newest role split of each machine, case and provider (`queries.role_splits`): the step's ms, each part
    of the split (`SPLIT`) in ms and as a share of the step, the conditions, and the provenance (commit, the
    tracer that ran the step, the steps traced, the file it came from). A case whose step could not be traced
    keeps its status and reason."""
    if splits.empty:
        return pd.DataFrame()
    from flybench.model.roles import shares

    newest = splits.drop_duplicates(["machine", "benchmark", "case", "provider"], keep="last")
    rows = []
    for r in newest.to_dict("records"):
        conditions = _json(r.get("conditions"))
        roles_ms = _json(r.get("roles_ms"))
        tracer = _json(r.get("tracer"))
        step_ms = r.get("step_ms") if isinstance(r.get("step_ms"), float) and math.isfinite(r["step_ms"]) else None
        row = {"machine": r["machine"], "case": r["case"], "provider": r["provider"], "moe": conditions.get("moe"),
               "status": r["status"], "reason": r.get("reason") or "", "step_ms": step_ms, "roles_ms": roles_ms,
               "conditions_of": conditions, "conditions": condition_text(conditions) if conditions else "",
               "commit_hash": r["commit_hash"]}
        if r["status"] == "ok":
            row.update(shares(roles_ms, step_ms))
        when = r.get("commit_date")
        row["provenance"] = (f"commit {str(r['commit_hash'])[:8]}"
                             + (f" ({when:%Y-%m-%d})" if isinstance(when, pd.Timestamp) and not pd.isna(when) else "")
                             + (f"; jax {tracer.get('jax')} on {tracer.get('device')} ({tracer.get('platform')})"
                                if tracer else "")
                             + (f"; {r.get('steps')} steps traced" if r["status"] == "ok" else "")
                             + f"; {r['source_file']}")
        row["method"] = method_text(when)
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["machine", "case", "provider"]).reset_index(drop=True)


def method_text(when: Any) -> str:
    """'current' for a split traced at a commit dated after every change of the attribution method
    (`flybench.model.attribution.METHOD_CHANGES`), else 'before <commits>: <what changed>'."""
    from flybench.model.attribution import METHOD_CHANGES

    if not isinstance(when, pd.Timestamp) or pd.isna(when):
        return "unknown: the split's commit has no date"
    stamp = when.tz_localize("UTC") if when.tzinfo is None else when
    later = [c for c in METHOD_CHANGES if stamp < pd.Timestamp(c.date)]
    return "current" if not later else "before " + "; ".join(f"{c.commit[:7]} ({c.what})" for c in later)


def amdahl_rows(split: pd.DataFrame) -> pd.DataFrame:
    """The Amdahl check of each traced variant against the stock path (`xla`, ragged_dot) of the same machine and
    case (`flybench.model.attribution.amdahl`): the speedup measured over the traced steps, the one predicted by
    replacing only the MoE's kernel time, and the gap between them. The check holds only where both splits share
    `SAME_CONDITIONS`; where they differ, the row says which and gives no figure."""
    if split.empty:
        return pd.DataFrame()
    from flybench.model.attribution import Attribution, amdahl

    done = split[split["status"] == "ok"]
    rows = []
    for (machine, case), group in done.groupby(["machine", "case"], sort=True):
        stock = group[group["provider"] == STOCK_PROVIDER]
        if stock.empty:
            continue
        base = stock.iloc[0]
        for _, head in group[group["provider"] != STOCK_PROVIDER].iterrows():
            row: dict[str, Any] = {"machine": machine, "case": case, "variant": f"{head['moe']} over {base['moe']}",
                                   "base_ms": base["step_ms"], "head_ms": head["step_ms"],
                                   "base_moe_ms": base["roles_ms"].get("moe", 0.0),
                                   "head_moe_ms": head["roles_ms"].get("moe", 0.0),
                                   "conditions": head["conditions"],
                                   "method": head["method"] if head["method"] != "current" else base["method"],
                                   "provenance": f"{base['provider']}: {base['provenance']} | "
                                                 f"{head['provider']}: {head['provenance']}"}
            differ = [n for n in SAME_CONDITIONS if base["conditions_of"].get(n) != head["conditions_of"].get(n)]
            if differ:
                row["check"] = "not comparable: " + ", ".join(
                    f"{n} {base['conditions_of'].get(n)!r} against {head['conditions_of'].get(n)!r}" for n in differ)
            else:
                check = amdahl(Attribution(base["step_ms"], base["roles_ms"]),
                               Attribution(head["step_ms"], head["roles_ms"]))
                row.update(measured=check["measured"], predicted=check["predicted"],
                           predicted_ms=check["predicted_step_ms"], gap=check["predicted"] / check["measured"] - 1,
                           check=f"replacing only the MoE's {row['base_moe_ms']:.3g} ms by {row['head_moe_ms']:.3g} "
                                 f"ms predicts {check['predicted']:.3g}x; measured {check['measured']:.3g}x")
            rows.append(row)
    return pd.DataFrame(rows)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value)
    return value if value is not None and not (isinstance(value, float) and math.isnan(value)) else {}


PATH = re.compile(r"(?:/[\w.+@-]+){2,}/")


def without_paths(text: str) -> str:
    """A compiler's message without the folders of the machine that compiled it ('.../flydsl/expr/__init__.py'
    keeps the file): the paths name that machine's layout, and a visitor need not read them."""
    return PATH.sub(".../", text)


def change_context(found: pd.DataFrame, rows: pd.DataFrame, notes: pd.DataFrame) -> pd.DataFrame:
    """What lies behind each resource change of one kernel: `found` (`analysis.resource_changes` with `arch`)
    gains `pr` (the first bad commit's pull request), `failed_between` (commits strictly inside the range, in
    commit order, where the kernel has no value on that architecture: it failed to compile, or was
    unavailable), `failures` (the compiler messages as the commit notes give them, the first of each commit's
    failures, without the compiling machine's folders; and how many commits were unavailable) and `compiler` (the FlyDSL
    wheel and its LLVM on each side: "changed: ..." when either differs, so a change the compiler made is
    told from one the kernel's code made). `notes`: `queries.commit_notes`."""
    out = found.copy()
    known = notes.drop_duplicates("hash").set_index("hash") if not notes.empty else pd.DataFrame(
        columns=["pr", "wheel", "llvm", "first_failure"])
    order = rows.sort_values("commit_date", kind="stable").drop_duplicates("commit_hash")["commit_hash"].tolist()
    place = {h: i for i, h in enumerate(order)}
    missing = rows[rows["status"] != "ok"]  # failed compiles and commits where the kernel was unavailable
    failed = missing.groupby("arch")["commit_hash"].agg(lambda c: set(c))
    status = {(a, h): s for a, h, s in zip(missing["arch"], missing["commit_hash"], missing["status"])}

    def note(commit: str, field: str) -> Any:
        value = known[field].get(commit) if field in known else None
        return None if value is None or (isinstance(value, float) and np.isnan(value)) else value

    prs, counts, reasons, compilers = [], [], [], []
    for r in out.itertuples():
        pr = note(r.first_bad, "pr")
        prs.append(f"#{int(pr)}" if pr is not None else "")
        low, high = place.get(r.last_good, -1), place.get(r.first_bad, -1)
        inside = [h for h in order[low + 1:high]] if 0 <= low < high else []
        broken = [h for h in inside if h in failed.get(r.arch, set())]
        counts.append(len(broken))
        messages = sorted({without_paths(note(h, "first_failure") or "no message recorded") for h in broken
                           if status[r.arch, h] == "failed"})
        unavailable = sum(status[r.arch, h] != "failed" for h in broken)
        reasons.append("; ".join(messages + ([f"not compiled (unavailable) at {unavailable} commit(s)"]
                                             if unavailable else [])))
        sides = [(note(h, "wheel"), note(h, "llvm")) for h in (r.last_good, r.first_bad)]
        if sides[0] == (None, None) or sides[1] == (None, None):
            compilers.append("not recorded")
            continue
        (wheel_a, llvm_a), (wheel_b, llvm_b) = sides
        moved = [f"FlyDSL {wheel_a} -> {wheel_b}"] if wheel_a != wheel_b else []
        moved += [f"LLVM {str(llvm_a)[:8]} -> {str(llvm_b)[:8]}"] if llvm_a != llvm_b else []
        compilers.append("changed: " + ", ".join(moved) if moved
                         else f"same: FlyDSL {wheel_b}, LLVM {str(llvm_b)[:8]}")
    out["pr"], out["failed_between"], out["failures"], out["compiler"] = prs, counts, reasons, compilers
    return out
