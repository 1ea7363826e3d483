"""Model lane: a Mixtral-shaped decoder step per MoE layer, its speedup over XLA's ragged_dot, and its conditions.

The AMD talk's claim (FlyDSL's MoE made Mixtral 2.5x faster in prefill and
3.5x in decode) is a model figure. The `mixtral_step` workload measures one
step of such a model with the MoE layer swapped; this page sets each layer's
newest step beside the stock path's (`xla`, ragged_dot) on the same machine,
and prints beside every speedup what it holds under: precision, batch and
sequence, the MoE FLOPs the layer performs, and the XLA flags.
"""

from __future__ import annotations

import streamlit as st

from dashboard import data, frames, ui

COLUMNS = ["machine", "case", "provider", "moe", "ms", "tokens_per_s", "speedup", "conditions", "commit_hash"]
NUMBERS = {"ms": st.column_config.NumberColumn("ms a step", format="%.2f"),
           "tokens_per_s": st.column_config.NumberColumn("tokens/s", format="localized"),
           "speedup": st.column_config.NumberColumn("speed over ragged_dot", format="%.2fx"),
           "moe": st.column_config.TextColumn("MoE layer")}


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
    ui.table(rows, "model-steps", COLUMNS, column_config=NUMBERS)
    st.subheader("Where a step's time goes")
    st.info("The split of a step by role (MoE GEMMs, routing, attention, norms, the rest) comes from a profiler "
            "trace of the step: `python -m studies.model_attribution` writes it (docs/model-lane.md); the store "
            "does not hold it yet, so this page cannot chart it.")


main()
