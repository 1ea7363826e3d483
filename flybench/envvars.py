"""Every environment variable flybench sets or reads: its name, who sets it, who reads it.

The names are defined here and imported everywhere else, so a variable
cannot be spelt two ways.
"""

# Between `flybench run` and the benchmark processes asv starts (flybench.run_identity reads them):
# which run, commit, asv environment and machine a case record belongs to, and where it is written.
RUN_ID = "FLYBENCH_RUN_ID"
COMMIT = "FLYBENCH_COMMIT"
ENV_NAME = "FLYBENCH_ENV_NAME"
MACHINE = "FLYBENCH_MACHINE"
RESULTS_DIR = "FLYBENCH_RESULTS_DIR"
# Between a `flybench run --gpus` worker and its cases (flybench.suite): the GPU a case runs on, as the node
# numbers it, and that GPU's UUID; they go into the case's record.
GPU_INDEX = "FLYBENCH_GPU_INDEX"
GPU_UUID = "FLYBENCH_GPU_UUID"
# Between `flybench run --one-process` and its asv (flybench.asv_main): run every case in one measuring process.
ONE_PROCESS = "FLYBENCH_ONE_PROCESS"

# Set by the user.
FLYDSL_SRC = "FLYBENCH_FLYDSL_SRC"
"""A FlyDSL source checkout: its kernels are not in the PyPI wheel (providers.flydsl, compile.runner)."""
DEVICE = "FLYBENCH_DEVICE"
"""`cpu` makes flybench.hardware ignore any GPU (tests, CPU timing)."""
CEILINGS = "FLYBENCH_CEILINGS"
"""A JSON file of measured ceilings, the roofline's denominators (measure.roofline)."""
FAKE_GPUS = "FLYBENCH_FAKE_GPUS"
"""For tests: `flybench run --gpus` sees this many stand-in GPUs and deals CPU cases to them (flybench.hardware)."""
GATE_CACHE = "FLYBENCH_GATE_CACHE"
"""Where `flybench gate` keeps compiles, FlyDSL's exported trees and wheels between gates when --cache is not given
(default: $XDG_CACHE_HOME/flybench/gate, else ~/.cache/flybench/gate)."""
COMPILE_CACHE = "FLYBENCH_COMPILE_CACHE"
"""Where compile-only metrics are cached between asv processes (compile.cache)."""
FLYDSL_PYTHON = "FLYBENCH_FLYDSL_PYTHON"
"""The git tree of a FlyDSL commit's python/flydsl laid over the flydsl wheel (the gate's FlyDSL sides): part of
every compile's toolchain key (compile.toolchain), since the wheel's version cannot tell an overlay from the wheel."""

# Between `flybench dashboard` and the Streamlit app (dashboard/data.py, dashboard/commits.py).
DB = "FLYBENCH_DB"
ASV_CONFIG = "FLYBENCH_ASV_CONFIG"
VALIDATE_CHARTS = "FLYBENCH_VALIDATE_CHARTS"
"""Tests set it to have every chart checked against Vega-Lite's schema (dashboard/ui.py)."""
