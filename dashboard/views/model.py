"""Model lane: a Mixtral-shaped decoder step per MoE layer, its speedup over XLA's ragged_dot, and its conditions.

The AMD talk's claim (FlyDSL's MoE made Mixtral 2.5x faster in prefill and
3.5x in decode) is a model figure. The `mixtral_step` workload measures one
step of such a model with the MoE layer swapped; this page sets each layer's
newest step beside the stock path's (`xla`, ragged_dot) on the same machine,
and prints beside every speedup what it holds under: precision, batch and
sequence, the MoE FLOPs the layer performs, and the XLA flags. Below, the
tokens/s of each MoE layer side by side, the role split of each traced step
(`flybench run --roles`) and the Amdahl check of each variant against
ragged_dot, each value with the commit and run it comes from.
"""

from __future__ import annotations

import streamlit as st

from dashboard import data, frames, ui
from flybench.regress.report import literal_markdown

COLUMNS = ["machine", "case", "provider", "moe", "ms", "tokens_per_s", "speedup", "conditions", "commit_hash"]
NUMBERS = {"ms": st.column_config.NumberColumn("ms a step", format="%.2f"),
           "tokens_per_s": st.column_config.NumberColumn("tokens/s", format="localized"),
           "speedup": st.column_config.NumberColumn("speed over ragged_dot", format="%.2fx"),
           "moe": st.column_config.TextColumn("MoE layer")}
LAYER_COLUMNS = ["machine", "case", *frames.MOE_LAYERS, "conditions", "provenance"]
LAYER_NUMBERS = {moe: st.column_config.NumberColumn(f"{moe} tokens/s", format="localized")
                 for moe in frames.MOE_LAYERS}
SPLIT_COLUMNS = ["machine", "case", "provider", "moe", "method", "status", "step_ms",
                 *[f"{part}_{kind}" for part in frames.SPLIT for kind in ("ms", "share")], "reason", "conditions",
                 "provenance"]
SPLIT_NUMBERS = {"step_ms": st.column_config.NumberColumn("ms a step", format="%.3f"),
                 "method": st.column_config.TextColumn("attribution method"),
                 "moe": st.column_config.TextColumn("MoE layer"),
                 **{f"{part}_ms": st.column_config.NumberColumn(f"{label} ms", format="%.3f")
                    for part, label in zip(frames.SPLIT, ("MoE", "attention", "other", "no role", "untraced"))},
                 **{f"{part}_share": st.column_config.NumberColumn(f"{label} share", format="percent")
                    for part, label in zip(frames.SPLIT, ("MoE", "attention", "other", "no role", "untraced"))}}
CHECK_COLUMNS = ["machine", "case", "variant", "method", "measured", "predicted", "gap", "base_ms", "head_ms",
                 "predicted_ms", "check", "conditions", "provenance"]
CHECK_NUMBERS = {"measured": st.column_config.NumberColumn("measured speedup", format="%.3fx"),
                 "predicted": st.column_config.NumberColumn("predicted by the MoE", format="%.3fx"),
                 "gap": st.column_config.NumberColumn("predicted / measured - 1", format="percent"),
                 "base_ms": st.column_config.NumberColumn("ragged_dot ms", format="%.3f"),
                 "head_ms": st.column_config.NumberColumn("variant ms", format="%.3f"),
                 "predicted_ms": st.column_config.NumberColumn("predicted ms", format="%.3f")}


def main() -> None:
    st.title("Model lane")
    st.caption("One decoder step of a Mixtral-8x7B-shaped model in JAX (random weights, fewer layers), the MoE "
               "layer swapped: `xla` runs ragged_dot (the stock path), `xla-dense` every expert, `jax-triton` the "
               "project's Triton MoE inside the jit. Speed is the stock path's step time over the row's, on the "
               "same machine and case.")
    data.require_data()
    rows = frames.model_rows(data.load("latest_cases"))
    if rows.empty:
        st.info("No model-lane steps are stored. Run `flybench run -w mixtral_step` (the quick set on a GPU: 4 "
                "layers, 12 GB of weights; the tiny set runs on a CPU) and `flybench ingest`.")
        return
    for line in frames.model_headline(rows):
        st.markdown(f"**The Triton MoE over ragged_dot, {literal_markdown(line)}**")
    st.caption("The headline is the newest timed step of each layer stored (`flybench run -w mixtral_step`, then "
               "`flybench ingest`), as in the table; docs/model-lane.md quotes the same run. The Amdahl check below "
               "times the traced steps of a `--roles` pass, a second measurement, so its speeds differ a little.")
    ui.table(rows, "model-steps", [*COLUMNS, "commit_date"], column_config={
        **NUMBERS, "commit_date": st.column_config.DatetimeColumn("run's commit date", format="YYYY-MM-DD HH:mm")})
    st.subheader("Tokens/s by MoE layer")
    st.caption("Each layer's newest step on the machine and case, side by side; provenance names the provider and "
               "the commit each value was measured at.")
    ui.table(frames.tokens_by_layer(rows), "model-tokens", LAYER_COLUMNS, column_config=LAYER_NUMBERS)
    roles()


def roles() -> None:
    """Where a step's time goes, and the Amdahl check of each variant against ragged_dot."""
    st.subheader("Where a step's time goes")
    split = frames.role_rows(data.load("role_splits"))
    if split.empty:
        st.info("No role split is stored. Run `flybench run -w mixtral_step --roles` (each measured step traced "
                "once more under JAX's profiler, its kernels attributed to the MoE, attention and the other roles; "
                "the tiny set runs on a CPU) and `flybench ingest`.")
        return
    st.caption("The kernels' time a step by role, from a trace of the step after the timing pass "
               "(`flybench run --roles`): MoE, attention, other (norms, routing, head), kernels with no role, and "
               "the time no kernel ran (launch gaps, host). On a GPU the trace runs with command buffers off, "
               "which its XLA_FLAGS say.")
    older = split[split["method"] != "current"]
    if not older.empty:
        commits = ", ".join(sorted({str(c)[:8] for c in older["commit_hash"]}))
        st.warning(f"{len(older)} of these {len(split)} splits (traced at {commits}, the newest stored) predate a "
                   "change of the attribution method, named in their row: their shares and the Amdahl check below "
                   "are of the older method. Trace again (`flybench run -w mixtral_step --roles`, then `flybench "
                   "ingest`) to read them under the current one.")
    ui.table(split, "model-roles", SPLIT_COLUMNS, column_config=SPLIT_NUMBERS)
    st.subheader("Amdahl check")
    st.caption("A variant's speed over ragged_dot, measured over the traced steps, against the speed predicted by "
               "replacing only the MoE's kernel time: where they agree, the MoE explains the speedup. It holds "
               "only under the conditions beside it, which both variants must share.")
    checks = frames.amdahl_rows(split)
    if checks.empty:
        st.info("No variant is traced beside ragged_dot (`xla`) on the same machine and case: trace both "
                "(`flybench run -w mixtral_step -p xla -p xla-dense --roles`).")
        return
    ui.table(checks, "model-amdahl", CHECK_COLUMNS,
             column_config={**CHECK_NUMBERS, "method": st.column_config.TextColumn("attribution method")})


main()
