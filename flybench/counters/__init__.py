"""Hardware counters per case: an opt-in pass after timing (`flybench run --counters`).

`collect` profiles each gated case once, under Nsight Compute on NVIDIA
(flybench.counters.ncu) or rocprofv3 on ROCm (flybench.counters.rocprof),
and writes counter records (flybench.counters.record) that the store
ingests beside the timings. `DERIVED` names the figures read from every
tool's counters the same way.
"""

from flybench.counters._model import DERIVED, WATCHED_DERIVED, Counter, KernelCounters, combine, format_figure
from flybench.counters.collect import backend_for, collect, unavailable_reason

__all__ = ["DERIVED", "WATCHED_DERIVED", "Counter", "KernelCounters", "backend_for", "collect", "combine",
           "format_figure", "unavailable_reason"]
